package launch

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A world the descriptor limit cannot hold is refused at Listen, naming the
// numbers and what to raise, instead of stalling the accept loop later.
func TestListenRefusesWorldBeyondNoFile(t *testing.T) {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
		t.Skip(err)
	}
	if l.Max > 1<<30 {
		t.Skipf("RLIMIT_NOFILE hard limit %d: no world is beyond it", l.Max)
	}
	world := int(l.Max) // plus spareFiles: one over
	_, err := Listen("127.0.0.1", world)
	if err == nil || !strings.Contains(err.Error(), "RLIMIT_NOFILE") || !strings.Contains(err.Error(), "raise the hard limit") {
		t.Fatalf("Listen of %d ranks with a hard limit of %d: %v, want a refusal naming RLIMIT_NOFILE", world, l.Max, err)
	}
	s, err := Listen("127.0.0.1", int(l.Max)-spareFiles)
	if err != nil {
		t.Fatalf("Listen of %d ranks with a hard limit of %d: %v", int(l.Max)-spareFiles, l.Max, err)
	}
	s.Close()
}
