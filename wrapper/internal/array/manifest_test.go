package array

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// A manifest written by WriteDir reads back whole; a second WriteDir of
// the same directory is refused as a usage error, and so is reading a
// directory with no sweep.json.
func TestManifestRoundTripAndRefusals(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sw")
	m := &Manifest{Name: "lr-1", Dir: dir, Keys: []string{"lr"}, Metric: "loss", Array: "0-1",
		Trials: []Trial{{Index: 0, Params: map[string]string{"lr": "1e-4"}, Name: "trial-0"}, {Index: 1, Params: map[string]string{"lr": "3e-4"}, Name: "trial-1"}}}
	script := filepath.Join(dir, "sweep.sbatch")
	if err := WriteDir(m, map[string]string{script: Script("/bin/trainrun", m, nil)}); err != nil {
		t.Fatal(err)
	}
	got, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != m.Name || len(got.Trials) != 2 || got.Trials[1].Params["lr"] != "3e-4" || len(got.Trials[1].Argv) == 0 {
		t.Fatalf("read back %+v, wrote %+v", got, m)
	}
	err = WriteDir(m, nil)
	if err == nil || exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "already holds a sweep") {
		t.Fatalf("second WriteDir: %v (code %d), want a usage error", err, exitcode.Of(err))
	}
	_, err = ReadManifest(t.TempDir())
	if err == nil || exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "'trainrun sweep' printed") {
		t.Fatalf("ReadManifest of an empty dir: %v, want a usage error naming the file", err)
	}
}
