package run

import (
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/wrapper/internal/health"
)

// A fixed hang timeout shorter than three beats is raised, and said.
func TestHangWatchTimeoutAtLeastThreeBeats(t *testing.T) {
	var logged []string
	logf := func(f string, a ...any) { logged = append(logged, f) }
	if newHangWatch(nil, 2, logf) != nil {
		t.Fatal("--hang-timeout off gave a watch")
	}
	c := health.Auto(3 * time.Second)
	if newHangWatch(&c, 2, logf) == nil || len(logged) != 1 || !strings.Contains(logged[0], "shorter than three beats") {
		t.Errorf("3s at 2 ranks (2 s beats): log %q, want one message", logged)
	}
	logged = nil
	c = health.Auto(10 * time.Second)
	newHangWatch(&c, 2, logf)
	a := health.Auto(0)
	newHangWatch(&a, 2, logf)
	if len(logged) != 0 {
		t.Errorf("10s and auto: log %q, want nothing", logged)
	}
}
