package launch

import (
	"bufio"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestEncodeParseRoundTrip(t *testing.T) {
	for _, m := range []Msg{
		{Kind: Hello, Token: "0123abcd", Rank: 17, PID: 4242, Node: "n3", StepID: "0"},
		{Kind: Hello, Token: "t", Rank: 0, PID: 1, Node: "n1"}, // outside a step: no STEPID
		{Kind: Signal, Rank: 3, Signal: "TERM"},
		{Kind: Exit, Rank: 3, Code: 143},
		{Kind: Ckpt, CkptID: 7},
		{Kind: Stack, CkptID: 2},
		{Kind: Beat, Rank: 9, Step: 120, AgeMS: 3500, StepMS: 210, State: "T", Phase: PhaseTrain},
		{Kind: Beat, Rank: 0, Step: -1, AgeMS: 0, StepMS: 0, State: "-", Phase: PhaseSave},
		{Kind: Wait, Token: "t", Rank: 8, Node: "n2", StepID: "3"},
		{Kind: Probe},
		{Kind: Probed, Rank: 8},
		{Kind: Delivered, Rank: 5, CkptID: 2},
		{Kind: Wait, Token: "t", Rank: 9}, // outside a step, node unknown
		{Kind: Go},
		{Kind: Abort},
	} {
		line := m.Encode()
		got, err := Parse(line)
		if err != nil || got != m {
			t.Errorf("%+v → %q → %+v, %v", m, line, got, err)
		}
	}
}

// The lines today's shims and controller write parse as they did.
func TestParseWireLines(t *testing.T) {
	for line, want := range map[string]Msg{
		"hello tok 5 99 n2 12\n":            {Kind: Hello, Token: "tok", Rank: 5, PID: 99, Node: "n2", StepID: "12"},
		"hello tok 5 99 n2 ":                {Kind: Hello, Token: "tok", Rank: 5, PID: 99, Node: "n2"},
		"signal 5 USR2":                     {Kind: Signal, Rank: 5, Signal: "USR2"},
		"exit 5 0":                          {Kind: Exit, Rank: 5},
		"exit 5 1 user ValueError: bad  lr": {Kind: Exit, Rank: 5, Code: 1, Class: "user", Evidence: "ValueError: bad lr"},
		"exit 5 137 signal":                 {Kind: Exit, Rank: 5, Code: 137, Class: "signal"},
		"ckpt 1":                            {Kind: Ckpt, CkptID: 1},
		"stack 3":                           {Kind: Stack, CkptID: 3},
		"beat 2 40 1200 95 S save":          {Kind: Beat, Rank: 2, Step: 40, AgeMS: 1200, StepMS: 95, State: "S", Phase: PhaseSave},
		"wait tok 8 n1 0":                   {Kind: Wait, Token: "tok", Rank: 8, Node: "n1", StepID: "0"},
		"wait tok 0 n1 -":                   {Kind: Wait, Token: "tok", Rank: 0, Node: "n1"},
		"probe":                             {Kind: Probe},
		"probed 3":                          {Kind: Probed, Rank: 3},
		"delivered 4 7":                     {Kind: Delivered, Rank: 4, CkptID: 7},
		"go":                                {Kind: Go},
		"abort\n":                           {Kind: Abort},
	} {
		got, err := Parse(line)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", line, got, err, want)
		}
	}
	for _, bad := range []string{"", "hello", "hello tok", "hello tok -1", "signal x TERM", "exit 1", "exit 1 x", "ckpt", "ckpt 0", "ckpt x", "boom 1 2",
		"signal 1 TERM extra", "stack 0", "beat 1 2 3 4 S", "beat 1 2 -3 4 S train", "beat 1 -2 3 4 S train", "beat 1 2 3 4 SS train", "beat x 2 3 4 S train", "beat 1 2 3 4 S nap",
		"wait tok 1 n1", "wait tok 1 n1 0 1", "wait tok x n1 0", "probe 1", "probed", "probed x", "probed 1 2", "delivered 1", "delivered 1 0", "delivered x 1", "delivered 1 2 3", "go 1", "abort now", strings.Repeat("x", MaxLine+1)} {
		if m, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", bad, m)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"hello tok 5 99 n2 12", "signal 5 USR2", "exit 5 143", "exit 2 1 oom torch.OutOfMemoryError: CUDA out of memory.", "ckpt 3", "hello a -1", "exit 1 99999999999999999999", "beat 3 17 2500 120 D train", "beat 0 -1 0 0 - save", "stack 4", "wait tok 3 n1 7", "probe", "probed 2", "delivered 3 1", "go", "abort"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		m, err := Parse(line)
		if err != nil {
			return
		}
		if m.Rank < 0 || (m.Kind == Ckpt || m.Kind == Stack) && m.CkptID <= 0 || m.Kind == Beat && (m.Step < -1 || m.AgeMS < 0 || m.StepMS < 0) {
			t.Fatalf("%q accepted as %+v", line, m)
		}
		// What parses encodes to a line that parses to the same message.
		again, err := Parse(m.Encode())
		if err != nil || again != m {
			t.Fatalf("%q → %+v → %q → %+v, %v", line, m, m.Encode(), again, err)
		}
	})
}

func recv(t *testing.T, s *Server) Event {
	t.Helper()
	select {
	case ev := <-s.Events:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5 s")
	}
	return Event{}
}

// Server and client against each other: hello, signal and exit arrive as
// sent; a checkpoint request reaches the one rank or all.
func TestServerAndClient(t *testing.T) {
	s, err := Listen("127.0.0.1", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") || s.Port() == 0 {
		t.Fatalf("listening on %s, want the given address", s.Addr())
	}
	var cs [2]*Client
	got := make(chan [2]int, 4)
	for r := range cs {
		c, err := Dial(s.Addr(), Msg{Token: s.Token, Rank: r, PID: 100 + r, Node: "n1", StepID: "0"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs[r] = c
		go c.Receive(func(m Msg) { got <- [2]int{r, m.CkptID} })
		ev := recv(t, s)
		if ev.Kind != Hello || ev.Rank != r || ev.PID != 100+r || ev.StepID != "0" || ev.At.IsZero() {
			t.Fatalf("hello: %+v", ev)
		}
	}
	cs[1].Send(Msg{Kind: Signal, Rank: 1, Signal: SignalName(syscall.SIGTERM)})
	if ev := recv(t, s); ev.Kind != Signal || ev.Rank != 1 || SignalByName(ev.Signal) != syscall.SIGTERM {
		t.Errorf("signal: %+v", ev)
	}
	cs[0].Send(Msg{Kind: Exit, Rank: 0, Code: 143})
	if ev := recv(t, s); ev.Kind != Exit || ev.Rank != 0 || ev.Code != 143 {
		t.Errorf("exit: %+v", ev)
	}
	// A shim cannot speak for another rank.
	cs[0].Send(Msg{Kind: Exit, Rank: 1, Code: 1})
	if !s.SendTo(1, Msg{Kind: Ckpt, CkptID: 4}) {
		t.Fatal("SendTo(1) reached no one")
	}
	if g := <-got; g != [2]int{1, 4} {
		t.Errorf("SendTo(1): rank %d got request %d", g[0], g[1])
	}
	if n := s.Broadcast(Msg{Kind: Ckpt, CkptID: 5}); n != 2 || s.Connected() != 2 {
		t.Errorf("Broadcast reached %d, connected %d", n, s.Connected())
	}
	seen := map[int]int{}
	for range 2 {
		g := <-got
		seen[g[0]] = g[1]
	}
	if seen[0] != 5 || seen[1] != 5 {
		t.Errorf("broadcast: %v", seen)
	}
	select {
	case ev := <-s.Events:
		t.Errorf("rank 0 spoke for rank 1: %+v", ev)
	default:
	}
}

// dialRaw connects and writes line (if any), and says whether the server
// closed the connection within wait.
func closedWithin(t *testing.T, addr, line string, wait time.Duration) bool {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if line != "" {
		c.Write([]byte(line + "\n"))
	}
	c.SetReadDeadline(time.Now().Add(wait))
	_, err = bufio.NewReader(c).ReadByte()
	ne, ok := err.(net.Error)
	return !(ok && ne.Timeout())
}

func TestServerRefusesStrangers(t *testing.T) {
	s, err := listen("127.0.0.1", 4, 8, 200*time.Millisecond, newAdmission(Peers{UID: os.Getuid()}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, line := range map[string]string{
		"wrong token":       "hello nottoken 1 9 n1 0",
		"rank beyond world": "hello " + s.Token + " 4 9 n1 0",
		"no hello first":    "exit 1 0",
		"silent":            "",
	} {
		if !closedWithin(t, s.Addr(), line, 3*time.Second) {
			t.Errorf("%s: connection still open after 3 s", name)
		}
	}
	if !closedWithin(t, s.Addr(), "", 3*time.Second) {
		t.Error("silent connection kept past the hello deadline")
	}
	if closedWithin(t, s.Addr(), "hello "+s.Token+" 3 9 n1 0", 500*time.Millisecond) {
		t.Error("a good hello was closed")
	}
	select {
	case ev := <-s.Events:
		if ev.Rank != 3 {
			t.Errorf("event from a refused connection: %+v", ev)
		}
	case <-time.After(2 * time.Second):
		t.Error("no hello event for the good connection")
	}
}

// Connections that never say hello hold at most maxPending slots, and only
// until the deadline; those beyond the cap are closed at once, not queued
// ahead of the shims; a shim that comes later still gets in.
func TestServerCapsConnectionsBeforeHello(t *testing.T) {
	const pending = 4
	s, err := listen("127.0.0.1", 1, pending, 300*time.Millisecond, newAdmission(Peers{UID: os.Getuid()}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 3 * pending {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close() // open and silent until the test ends
	}
	if len(s.pending) > pending {
		t.Fatalf("%d connections pending, cap %d", len(s.pending), pending)
	}
	for s.Refused() < 2*pending {
		time.Sleep(5 * time.Millisecond)
	}
	for len(s.pending) > 0 { // the silent ones time out
		time.Sleep(20 * time.Millisecond)
	}
	c, err := Dial(s.Addr(), Msg{Token: s.Token, Rank: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ev := recv(t, s); ev.Kind != Hello || ev.Rank != 0 {
		t.Errorf("got %+v", ev)
	}
}

func TestSignalNames(t *testing.T) {
	for in, want := range map[string]syscall.Signal{"USR2": syscall.SIGUSR2, "SIGUSR1": syscall.SIGUSR1, "term": syscall.SIGTERM, "10": syscall.Signal(10)} {
		if got := SignalByName(in); got != want {
			t.Errorf("SignalByName(%q) = %v", in, got)
		}
	}
	for _, bad := range []string{"FOO", "0", "65", ""} {
		if SignalByName(bad) != nil {
			t.Errorf("SignalByName(%q) accepted", bad)
		}
	}
	if SignalName(syscall.SIGUSR2) != "USR2" || SignalName(syscall.Signal(40)) != "40" {
		t.Error("SignalName")
	}
}

// The controller's load stays bounded: world/BeatInterval beats a second.
func TestBeatInterval(t *testing.T) {
	for world, want := range map[int]time.Duration{1: 2 * time.Second, 2000: 2 * time.Second, 16384: 16384 * time.Millisecond, 100000: 30 * time.Second} {
		iv := BeatInterval(world)
		if iv != want {
			t.Errorf("BeatInterval(%d) = %s, want %s", world, iv, want)
		}
		if rate := float64(world) / iv.Seconds(); rate > 1001 && world <= 30000 {
			t.Errorf("%d ranks: %.0f beats/s at the controller", world, rate)
		}
	}
}

// A step started before its plan: shims wait; one asked to probe probes and
// says probed; Release lets every waiting one go (and each that arrives
// later at once), after which the same connection carries the rank's hello;
// Abort sends them home; a failed probe ends the wait with its error.
func TestServerWaitGoAbort(t *testing.T) {
	s, err := Listen("127.0.0.1", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	type res struct {
		c  *Client
		ok bool
		e  error
	}
	probes := make(chan int, 4)
	dial := func(rank int) chan res {
		ch := make(chan res, 1)
		go func() {
			c, ok, err := DialWait(s.Addr(), Msg{Token: s.Token, Rank: rank, Node: "n1", StepID: "4"}, func() error { probes <- rank; return nil })
			ch <- res{c, ok, err}
		}()
		return ch
	}
	first := dial(0)
	if ev := recv(t, s); ev.Kind != Wait || ev.Rank != 0 || ev.Node != "n1" || ev.StepID != "4" {
		t.Fatalf("wait: %+v", ev)
	}
	if !s.SendTo(0, Msg{Kind: Probe}) {
		t.Fatal("SendTo a waiting shim failed")
	}
	if ev := recv(t, s); ev.Kind != Probed || ev.Rank != 0 {
		t.Fatalf("after probe: %+v", ev)
	}
	if r := <-probes; r != 0 || len(probes) != 0 {
		t.Fatalf("probe ran for rank %d (%d more)", r, len(probes))
	}
	select {
	case r := <-first:
		t.Fatalf("a shim went before Release: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	if n := s.Release(); n != 1 {
		t.Errorf("Release reached %d shims, want 1", n)
	}
	r0 := <-first
	if r0.e != nil || !r0.ok {
		t.Fatalf("rank 0 after Release: %+v", r0)
	}
	defer r0.c.Close()
	late := <-dial(1) // after Release: go at once
	if late.e != nil || !late.ok {
		t.Fatalf("rank 1 after Release: %+v", late)
	}
	defer late.c.Close()
	recv(t, s) // rank 1's wait
	r0.c.Send(Msg{Kind: Hello, Token: s.Token, Rank: 0, PID: 77, Node: "n1", StepID: "4"})
	if ev := recv(t, s); ev.Kind != Hello || ev.Rank != 0 || ev.PID != 77 {
		t.Fatalf("hello after go: %+v", ev)
	}
	got := make(chan int, 1)
	go r0.c.Receive(func(m Msg) { got <- m.CkptID })
	s.SendTo(0, Msg{Kind: Ckpt, CkptID: 3})
	if id := <-got; id != 3 {
		t.Errorf("checkpoint request after go: id %d", id)
	}
	// A wrong second line ends the connection.
	late.c.Send(Msg{Kind: Exit, Rank: 1})
	waitFor(t, func() bool { return s.Connected() == 1 })

	a, err := Listen("127.0.0.1", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Abort()
	if c, ok, err := DialWait(a.Addr(), Msg{Token: a.Token, Rank: 1}, nil); err != nil || ok {
		t.Errorf("after Abort: go=%v, %v", ok, err)
	} else {
		c.Close()
	}
	if _, _, err := DialWait(a.Addr(), Msg{Token: "wrong", Rank: 1}, nil); err == nil {
		t.Error("a wrong token was let through")
	}

	p, err := Listen("127.0.0.1", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	failed := make(chan error, 1)
	go func() {
		_, _, err := DialWait(p.Addr(), Msg{Token: p.Token, Rank: 1, Node: "n2"}, func() error { return errors.New("sysfs gone") })
		failed <- err
	}()
	recv(t, p)
	p.SendTo(1, Msg{Kind: Probe})
	if err := <-failed; err == nil || !strings.Contains(err.Error(), "sysfs gone") {
		t.Errorf("a failed probe: %v", err)
	}
	go func() {
		_, _, err := DialWait(p.Addr(), Msg{Token: p.Token, Rank: 0, Node: "n2"}, nil)
		failed <- err
	}()
	recv(t, p)
	p.SendTo(0, Msg{Kind: Probe})
	if err := <-failed; err == nil || !strings.Contains(err.Error(), "without a probe directory") {
		t.Errorf("asked to probe without a probe directory: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 200 && !cond(); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if !cond() {
		t.Fatal("condition not reached within 2 s")
	}
}
