package spank

import (
	"testing"

	"github.com/trainrun/trainrun/plan/policy"
)

// Review t4, F5: a job that made the prolog's partition record impossible
// to write (a full cache file system) got the policy of whatever partition
// its own environment named. Without a record the strictest settings apply:
// here no partition allows every user override, so a signal the site did
// not choose is refused, while the "open" partition the environment names
// would have accepted it.
func TestStepPartitionWithoutRecordIsStrictest(t *testing.T) {
	c := policyConfig(t, testPolicy)
	cache := t.TempDir()
	part, note := StepPartition(cache, 7, "open")
	if part != policy.Unrecorded || note == "" {
		t.Fatalf("StepPartition without a record = %q (%q), want the strictest", part, note)
	}
	given := map[string]string{"train-ckpt-signal": "USR1@5m"}
	getenv := func(string) string { return "" }
	if _, err := Resolve(c, "open", given, getenv); err != nil {
		t.Fatalf("the open partition refuses the override: %v", err)
	}
	if _, err := Resolve(c, part, given, getenv); err == nil {
		t.Error("without a partition record, a user override no partition's policy allows in common was accepted")
	}
}
