package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// SpaceOf reports the file system holding dir.
func SpaceOf(dir string) (Space, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Space{}, err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	var st unix.Statfs_t
	if err := unix.Statfs(abs, &st); err != nil {
		return Space{}, fmt.Errorf("statfs %s: %w", abs, err)
	}
	sp := Space{Free: st.Bavail * uint64(st.Bsize), Total: st.Blocks * uint64(st.Bsize), Mount: abs}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		if m, t := mountOf(mi, abs); m != "" {
			sp.Mount, sp.FSType = m, t
		}
	}
	return sp, nil
}
