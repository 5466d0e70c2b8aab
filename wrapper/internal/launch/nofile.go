package launch

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// spareFiles is what the controller keeps open besides the control
// connections: the listener, srun's pipes, the logs, the store's files.
const spareFiles = 256

// checkNoFile makes sure the controller can hold one connection per rank:
// it lifts the soft RLIMIT_NOFILE to the hard one (the Go runtime does so
// at start, a setrlimit since may have lowered it), and refuses a world
// the hard limit cannot hold. Past it the accept loop would fail with
// EMFILE while the kernel's queue filled, and the last shims' connections
// would time out one by one, minutes into a 16k-rank start (make
// bench-scale, test/README.md).
func checkNoFile(world int) error {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
		return nil // no limit to read: nothing to check against
	}
	if l.Cur < l.Max {
		c := l
		c.Cur = l.Max
		if unix.Setrlimit(unix.RLIMIT_NOFILE, &c) == nil {
			l = c
		}
	}
	if need := uint64(world) + spareFiles; l.Cur < need {
		return fmt.Errorf("control channel: %d ranks need %d open files in the controller, but its RLIMIT_NOFILE is %d (hard limit %d): raise the hard limit on the batch node (limits.conf nofile, or slurmd's LimitNOFILE with PropagateResourceLimits) to at least %d, or run fewer ranks",
			world, need, l.Cur, l.Max, need)
	}
	return nil
}
