package spank

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The handoff directory is the one place under the cache the job's user
// may write. On the cache's own file system (the default cache is
// /run/trainrun, on the node's /run tmpfs) one job could fill it, and every
// other job on the node then lost its partition record, its drain handoff
// and its plan file (review t4, F5). So the handoff directory is a tmpfs of
// its own, of HandoffFSBytes: what the user writes is bounded there and
// charged to nothing root needs. Its records are a few KiB each (the epilog
// reads at most 64 KiB of one).
const (
	HandoffFSBytes  = 1 << 20
	handoffFSInodes = maxHandoffEntries + 64 // the epilog refuses more than maxHandoffEntries; a bound of its own past that
)

// mountHandoff makes h (in the root-owned job directory) a tmpfs of its
// own, owned by uid:gid, mode 0700, unless it is one already (a second step
// of the job). The caller holds the job directory's lock. Until the mount
// succeeds h is root's (mode 0700), so a failed mount leaves the user
// nothing to write on the cache's file system.
func mountHandoff(h string, uid, gid uint32) error {
	if mounted(h) {
		return nil
	}
	if err := mkdirOwned(h, 0o700, uint32(os.Geteuid()), uint32(os.Getegid()), true); err != nil {
		return err
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700,uid=%d,gid=%d", HandoffFSBytes, handoffFSInodes, uid, gid)
	if err := unix.Mount("trainrun-handoff", h, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return fmt.Errorf("mount a %d-byte tmpfs on %s: %w (the handoff directory is not put on the cache's own file system, which one job could fill)", HandoffFSBytes, h, err)
	}
	return nil
}

// mounted says whether dir is a mount point: its device differs from its
// parent's.
func mounted(dir string) bool {
	var a, b unix.Stat_t
	if unix.Lstat(dir, &a) != nil || unix.Lstat(filepath.Dir(dir), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}

// unmountHandoff detaches what is mounted on the job's handoff directory
// (every layer, should two steps have raced past the lock).
func unmountHandoff(h string) error {
	for i := 0; i < 8 && mounted(h); i++ {
		if err := unix.Unmount(h, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil {
			return fmt.Errorf("unmount %s: %w", h, err)
		}
	}
	return nil
}

// lockDir takes an exclusive flock on dir (steps of one job start on a node
// at once); the returned function releases it.
func lockDir(dir string) (func(), error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { unix.Close(fd) }, nil
}
