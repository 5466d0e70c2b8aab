package shim

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

func TestStatState(t *testing.T) {
	for stat, want := range map[string]string{
		"4242 (python3) S 1 4242 4242 0 -1":       "S",
		"4242 (my (odd) name) T 1 4242 4242 0 -1": "T",
		"4242 (a) b) D 1":                         "D",
		"garbage":                                 "-",
		"1 (x)":                                   "-",
	} {
		if got := statState(stat); got != want {
			t.Errorf("statState(%q) = %q, want %q", stat, got, want)
		}
	}
	if st := procState(os.Getpid()); st != "R" && st != "S" {
		t.Errorf("procState(self) = %q, want R or S", st)
	}
}

func TestBeaterLines(t *testing.T) {
	b := &beater{step: -1, started: time.Unix(1000, 0)}
	if _, ok := b.beat(2, "S", time.Unix(1001, 0)); ok {
		t.Fatal("a beat before the trainer client spoke")
	}
	t0 := time.Unix(1010, 0)
	b.line("-1 1010.0", t0)
	m, ok := b.beat(2, "S", t0.Add(3*time.Second))
	if !ok || m.Step != -1 || m.AgeMS != 13000 || m.Phase != launch.PhaseTrain {
		t.Fatalf("first beat %+v, want step -1, 13 s since the start", m)
	}
	for i := 1; i <= 5; i++ {
		b.line(strings.Repeat(" ", i%2)+strconv.Itoa(i)+" 0", t0.Add(time.Duration(i)*200*time.Millisecond))
	}
	b.line("7 0", t0.Add(1400*time.Millisecond)) // two steps in 400 ms: 200 ms each
	b.line("7 0 save", t0.Add(1500*time.Millisecond))
	b.line("bad line", t0)
	m, _ = b.beat(2, "T", t0.Add(2*time.Second))
	want := launch.Msg{Kind: launch.Beat, Rank: 2, Step: 7, AgeMS: 600, StepMS: 200, State: "T", Phase: launch.PhaseSave}
	if m != want {
		t.Errorf("beat %+v, want %+v", m, want)
	}
	if _, err := launch.Parse(m.Encode()); err != nil {
		t.Errorf("%q: %v", m.Encode(), err)
	}
}

// The pipe reaches the child as TRAINRUN_HEARTBEAT_FD, and what the child
// writes arrives as a beat.
func TestBeaterPipe(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", `echo "-1 0" >&$TRAINRUN_HEARTBEAT_FD; echo "4 0" >&$TRAINRUN_HEARTBEAT_FD; sleep 3`)
	b := newBeater()
	if b == nil {
		t.Fatal("no pipe")
	}
	cmd.ExtraFiles, cmd.Env = []*os.File{b.w}, append(os.Environ(), b.env()...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	got := make(chan launch.Msg, 10)
	go b.run(cmd.Process.Pid, 5, 4, func(m launch.Msg) { got <- m })
	select {
	case m := <-got:
		if m.Rank != 5 || m.Step != 4 || m.State != "S" {
			t.Errorf("beat %+v, want rank 5 at step 4, sleeping", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no beat")
	}
}

// Review t4, F10: one line over 64 KiB stopped the reader for good (the
// rank then looked hung). It is skipped, and the lines after it count.
func TestBeaterSkipsOverlongLine(t *testing.T) {
	b := &beater{step: -1, started: time.Unix(1000, 0)}
	in := "3 0\n" + strings.Repeat("x", 100<<10) + "\n4 0\n" + strings.Repeat("9", maxBeatLine) + " 0\n5 0"
	b.read(strings.NewReader(in))
	if m, ok := b.beat(0, "S", time.Unix(1001, 0)); !ok || m.Step != 5 {
		t.Errorf("beat %+v after an overlong line, want step 5", m)
	}
}

// FuzzReadLines: whatever is written to the pipe, each line handed on is
// within the bound and holds no newline; a beat built from it encodes to a
// control line the controller parses.
func FuzzReadLines(f *testing.F) {
	f.Add([]byte("-1 1010.0\n4 0 save\n"))
	f.Add([]byte(strings.Repeat("x", 5000) + "\n7 0\n"))
	f.Add([]byte("9223372036854775807 0\n\n\r\n-2 x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := &beater{step: -1, started: time.Unix(1000, 0)}
		readLines(bytes.NewReader(data), 64, func(s string) {
			if len(s) > 64 || strings.Contains(s, "\n") {
				t.Fatalf("line %q handed on", s)
			}
			b.line(s, time.Unix(1001, 0))
		})
		if m, ok := b.beat(1, "S", time.Unix(1002, 0)); ok {
			if _, err := launch.Parse(m.Encode()); err != nil {
				t.Fatalf("beat %q does not parse: %v", m.Encode(), err)
			}
		}
	})
}
