package shim

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// The trainer's liveness reaches its shim node-locally: the shim passes the
// write end of a pipe as file descriptor heartbeatFD (env
// TRAINRUN_HEARTBEAT_FD) and the trainer client writes one line "STEP
// UNIX_TIME [save|train]" per report_progress call (non-blocking: a full pipe
// drops the line), "-1 UNIX_TIME" when it starts, and "STEP UNIX_TIME save"
// while it writes a checkpoint. Nothing goes to shared storage. The shim
// adds the process's state from /proc/PID/stat and sends the controller one
// beat per launch.BeatInterval, at once when the state turns bad.
const (
	heartbeatFD = 3 // the first of cmd.ExtraFiles
	statePoll   = time.Second
	stepSamples = 8 // step times the shim keeps for the median it sends
)

// stackSignal is launch.StackSignal, the one name both sides use.
var stackSignal = launch.SignalByName(launch.StackSignal).(syscall.Signal)

// beater is the shim's side of the heartbeat pipe.
type beater struct {
	r, w *os.File

	mu         sync.Mutex
	armed      bool // the trainer client wrote at least one line
	step       int64
	advancedAt time.Time
	started    time.Time
	saving     bool
	times      []time.Duration // recent step times
}

// newBeater makes the pipe; nil (no heartbeat, the task still runs) if it
// cannot be made. The caller passes b.w as the trainer's first extra file
// (fd heartbeatFD) and adds b.env() to its environment.
func newBeater() *beater {
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	return &beater{r: r, w: w, step: -1}
}

// env is what the trainer client reads.
func (b *beater) env() []string {
	return []string{"TRAINRUN_HEARTBEAT_FD=" + strconv.Itoa(heartbeatFD), "TRAINRUN_STACK_SIGNAL=" + launch.StackSignal}
}

// run reads the trainer's lines and sends beats until the process is gone.
func (b *beater) run(pid, rank, world int, send func(launch.Msg)) {
	b.w.Close() // the trainer holds the write end now
	b.mu.Lock()
	b.started = time.Now()
	b.mu.Unlock()
	go b.read(b.r)
	interval := launch.BeatInterval(world)
	tick := time.NewTicker(statePoll)
	defer tick.Stop()
	var lastSent time.Time
	lastState := ""
	for now := range tick.C {
		st := procState(pid)
		if st == "-" {
			return
		}
		bad := st != lastState && (st == "T" || st == "t" || st == "D" || st == "Z")
		lastState = st
		if !bad && now.Sub(lastSent) < interval {
			continue // build a beat only when one is due
		}
		if m, ok := b.beat(rank, st, now); ok {
			send(m)
			lastSent = now
		}
	}
}

// read takes the trainer client's lines.
func (b *beater) read(r io.Reader) {
	readLines(r, maxBeatLine, func(s string) { b.line(s, time.Now()) })
}

// maxBeatLine bounds a heartbeat line; a real one is about 30 bytes.
const maxBeatLine = 4096

// readLines calls f with each line of r (without its newline) until r
// ends. A line longer than max is skipped whole and the reading goes on:
// any process holding the pipe's write end (the trainer's children inherit
// it) could write one, and a bufio.Scanner stops for good at its first
// overlong line, after which the rank looked hung (review t4, F10).
func readLines(r io.Reader, max int, f func(string)) {
	br := bufio.NewReaderSize(r, max)
	skipping := false
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			skipping = true // the rest of this line goes too
			continue
		}
		if !skipping && len(line) > 0 {
			f(strings.TrimSuffix(string(line), "\n"))
		}
		skipping = false
		if err != nil {
			return
		}
	}
}

// line takes one "STEP UNIX_TIME [save|train]" line received at now.
func (b *beater) line(s string, now time.Time) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return
	}
	step, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || step < -1 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed = true
	b.saving = len(f) > 2 && f[2] == launch.PhaseSave
	if step > b.step {
		if b.step >= 0 && !b.advancedAt.IsZero() {
			b.times = append(b.times, now.Sub(b.advancedAt)/time.Duration(step-b.step))
			if len(b.times) > stepSamples {
				b.times = b.times[1:]
			}
		}
		b.step, b.advancedAt = step, now
	}
}

// beat is the message for now; false before the trainer client spoke.
func (b *beater) beat(rank int, state string, now time.Time) (launch.Msg, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.armed {
		return launch.Msg{}, false
	}
	since := b.advancedAt
	if since.IsZero() {
		since = b.started
	}
	m := launch.Msg{Kind: launch.Beat, Rank: rank, Step: b.step, AgeMS: max(now.Sub(since).Milliseconds(), 0), State: state, Phase: launch.PhaseTrain}
	if b.saving {
		m.Phase = launch.PhaseSave
	}
	if len(b.times) > 0 {
		t := slices.Clone(b.times)
		slices.Sort(t)
		m.StepMS = t[len(t)/2].Milliseconds()
	}
	return m, true
}

// procState is the state letter of /proc/PID/stat ("-" when unreadable: the
// process is gone).
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "-"
	}
	return statState(string(b))
}

// statState reads the state field of a /proc/PID/stat line: the first field
// after the command name's closing parenthesis (the name may hold spaces and
// parentheses).
func statState(stat string) string {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return "-"
	}
	f := strings.Fields(stat[i+1:])
	if len(f) == 0 || len(f[0]) != 1 {
		return "-"
	}
	return f[0]
}

// dumpStack asks the training process for its Python stack (the client
// registers faulthandler on SIGURG; it writes to the trainer's stderr, which
// is the job's log), and says why not when it cannot.
func dumpStack(p *os.Process, rank int, node string, gpu int, env Env) {
	st := procState(p.Pid)
	caught, err := catchesSignal(p.Pid, stackSignal)
	switch {
	case err != nil:
		return // gone
	case !caught:
		fmt.Fprintf(env.Stderr, "trainrun: exec-task: rank %d on %s (GPU %d): no stack dump: the training process does not catch SIG%s (the trainer client registers Python's faulthandler on it)\n", rank, node, gpu, launch.StackSignal)
		return
	case st == "T" || st == "t":
		fmt.Fprintf(env.Stderr, "trainrun: exec-task: rank %d on %s (GPU %d): the training process is stopped (T): its stack dump comes only if it is continued\n", rank, node, gpu)
	}
	fmt.Fprintf(env.Stderr, "trainrun: exec-task: rank %d on %s (GPU %d): stack dump of the training process (pid %d, %s) follows\n", rank, node, gpu, p.Pid, st)
	p.Signal(stackSignal)
}
