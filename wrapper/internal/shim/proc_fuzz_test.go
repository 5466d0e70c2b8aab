package shim

import (
	"strings"
	"testing"
)

// FuzzStatState: /proc/PID/stat of the training process, whose command
// name (field 2) the user chooses and may hold spaces and parentheses. No
// panic; the state is "-" or the one-byte field right after the last ')':
// a forged name can never pass for a D-state process (the evidence that
// excludes a node from a requeued job, issue 35).
func FuzzStatState(f *testing.F) {
	for _, s := range []string{"4242 (python3) S 1 4242", "7 (a) D (b) R 1", "7 (x) ) D", "9 (no close R", "9 (x)", "1 (x) DD 2", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, stat string) {
		st := statState(stat)
		if st == "-" {
			return
		}
		i := strings.LastIndexByte(stat, ')')
		if len(st) != 1 || i < 0 || strings.Fields(stat[i+1:])[0] != st {
			t.Fatalf("%q: state %q", stat, st)
		}
	})
}
