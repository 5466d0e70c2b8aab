package policy

import (
	"strings"
	"testing"
)

// Issue 12 finding 4: CkptDir=/scratch/%u/%x with the job name
// "../alice/ckpt" gave another user's store. Every expansion that could leave
// its component is refused; plain ones expand.
func TestExpandCkptDirChecked(t *testing.T) {
	roots := []string{"/scratch"}
	for _, tc := range []struct {
		dir, user, name, want, err string
	}{
		{"/scratch/%u/%x", "bob", "train-1", "/scratch/bob/train-1", ""},
		{"/scratch/%u/%j", "bob", "whatever/..", "/scratch/bob/42", ""}, // %x not used
		{"/scratch/%u/%x", "bob", "../alice/ckpt", "", "%x"},
		{"/scratch/%u/%x", "bob", "..", "", "%x"},
		{"/scratch/%u/%x", "bob", ".", "", "%x"},
		{"/scratch/%u/%x", "bob", "a/b", "", "%x"},
		{"/scratch/%u/%x", "bob", "a\x00b", "", "%x"},
		{"/scratch/%u/%x", "../alice", "x", "", "%u"},
		{"/scratch/%u/%x", "", "x", "", "%u"},
		{"/scratch/%u/%x", "bob", "", "", "%x"},
		{"/scratch/%x%u", "..", ".", "", "%u"},
		{"/other/%u", "bob", "x", "", "CkptRoots"},
	} {
		got, err := ExpandCkptDirChecked(tc.dir, tc.user, "42", tc.name, roots)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s user %q name %q = %q, %v; want %q", tc.dir, tc.user, tc.name, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s user %q name %q = %q, %v; want an error naming %s", tc.dir, tc.user, tc.name, got, err, tc.err)
		}
	}
	// ExpandCkptDir itself, which today's plugin called, gives the attack through:
	if got := ExpandCkptDir("/scratch/%u/%x", "bob", "42", "../alice/ckpt"); !strings.HasPrefix(got, "/scratch/bob/../") {
		t.Errorf("ExpandCkptDir changed: %q", got)
	}
}
