//go:build e2e

package e2e

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// unmountHandoffs detaches the plugin's per-job handoff file systems
// (spank/handoff_fs.go) still mounted under dir: a job whose epilog did
// not run before the test's cluster stopped leaves one, and t.TempDir
// cannot remove a mount point. Register it after the directory's own
// cleanup, so that it runs first.
func unmountHandoffs(t *testing.T, dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		// mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - FSTYPE SOURCE SUPER
		if len(f) < 10 || !strings.HasPrefix(f[4], dir+"/") || !strings.Contains(line, " - tmpfs trainrun-handoff ") {
			continue
		}
		if err := syscall.Unmount(f[4], syscall.MNT_DETACH); err != nil {
			t.Logf("unmount %s: %v", f[4], err)
		}
	}
}
