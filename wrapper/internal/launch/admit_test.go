package launch

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/safefs/safefstest"
)

// flood is safefstest.StartFlood, skipped without root.
func flood(t testing.TB, addr string, n int) *safefstest.Flood {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to open sockets as another uid")
	}
	return safefstest.StartFlood(addr, n)
}

// helloAll dials 16 shims at once and waits for all their hellos.
func helloAll(t testing.TB, s *Server, shims int) time.Duration {
	t.Helper()
	start := time.Now()
	errs := make(chan error, shims)
	for r := range shims {
		go func() {
			c, err := Dial(s.Addr(), Msg{Token: s.Token, Rank: r, PID: 1, Node: "n1", StepID: "0"})
			if err == nil {
				defer c.Close()
			}
			errs <- err
			time.Sleep(100 * time.Millisecond)
		}()
	}
	seen := map[int]bool{}
	for len(seen) < shims {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatalf("a shim could not reach the controller: %v", err)
			}
		case ev := <-s.Events:
			seen[ev.Rank] = true
		case <-time.After(60 * time.Second): // a liveness guard, not a target
			t.Fatalf("only %d of %d shims said hello", len(seen), shims)
		}
	}
	return time.Since(start)
}

// With 5,000 connections from another uid held against the port (and
// dialled again as fast as they are closed), 16 shims still all say hello:
// on main before F1's fix the hostile sockets held every pending slot and
// the accept queue, and a shim's Dial failed after about 16 s.
// BenchmarkHelloUnderFlood measures how long the hellos take.
func TestHelloUnderFlood(t *testing.T) {
	s, err := Listen("127.0.0.1", 16)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fl := flood(t, s.Addr(), 5000)
	defer fl.Stop()
	for s.Refused() < 5000 { // the flood is under way
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // and dialling again as fast as it is closed
	took := helloAll(t, s, 16)
	t.Logf("16 hellos in %v with 5,000 hostile connections (%d refused)", took, s.Refused())
}

func BenchmarkHelloUnderFlood(b *testing.B) {
	s, err := Listen("127.0.0.1", 16)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	fl := flood(b, s.Addr(), 5000)
	defer fl.Stop()
	for s.Refused() < 5000 {
		time.Sleep(10 * time.Millisecond)
	}
	var worst time.Duration
	b.ResetTimer()
	for range b.N {
		worst = max(worst, helloAll(b, s, 16))
	}
	b.ReportMetric(worst.Seconds(), "worst-s")
}

// A socket of another uid on this host is closed before it is read, and
// counted; the job user's own is served.
func TestServerRefusesOtherUIDOnThisHost(t *testing.T) {
	s, err := Listen("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fl := flood(t, s.Addr(), 1)
	for s.Refused() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	fl.Stop()
	c, err := Dial(s.Addr(), Msg{Token: s.Token, Rank: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ev := recv(t, s); ev.Kind != Hello {
		t.Errorf("got %+v", ev)
	}
}

type fakeConn struct {
	net.Conn
	remote net.Addr
}

func (f fakeConn) RemoteAddr() net.Addr { return f.remote }
func (f fakeConn) LocalAddr() net.Addr  { return &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 4000} }

func TestAdmission(t *testing.T) {
	a := newAdmission(Peers{Hosts: []string{"10.0.0.2", "fd00::7"}, UID: 1000})
	a.owner = func(c net.Conn) (uint32, error) {
		if c.RemoteAddr().(*net.TCPAddr).Port == 1 {
			return 0, errors.New("no such socket")
		}
		return uint32(c.RemoteAddr().(*net.TCPAddr).Port), nil
	}
	for _, tc := range []struct {
		ip   string
		port int
		want bool
	}{
		{"10.0.0.2", 5, true},        // an allocation node
		{"::ffff:10.0.0.2", 5, true}, // the same, v4-mapped
		{"fd00::7", 5, true},
		{"10.0.0.3", 5, false},    // a host outside the allocation
		{"127.0.0.1", 1000, true}, // this host, the job user's socket
		{"127.0.0.1", 65534, false},
		{"127.0.0.1", 1, false}, // the kernel does not know the socket
	} {
		_, got := a.admit(fakeConn{remote: &net.TCPAddr{IP: net.ParseIP(tc.ip), Port: tc.port}})
		if got != tc.want {
			t.Errorf("peer %s uid %d: admitted %v, want %v", tc.ip, tc.port, got, tc.want)
		}
	}
	if a.note != "" {
		t.Errorf("note %q", a.note)
	}
	weak := newAdmission(Peers{Hosts: []string{"10.0.0.2", "no-such-node.invalid"}})
	if weak.remote != nil || weak.note == "" {
		t.Errorf("an unresolvable node should open the remote check, and say so: %+v", weak)
	}
}

// From a remote address no uid can be checked: someone on an allocation
// node may hold MaxPendingPerPeer silent connections. A shim from that
// node still gets in: its connection evicts the oldest silent one.
func TestRemotePeerAtCapEvictsOldest(t *testing.T) {
	adm := newAdmission(Peers{UID: os.Getuid()})
	adm.loopbackRemote, adm.local = true, map[netip.Addr]bool{} // 127.0.0.1 stands for another host
	s, err := listen("127.0.0.1", 1, MaxPending, 30*time.Second, adm)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range MaxPendingPerPeer + 50 {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	for s.Refused() < 50 { // the 50 oldest made way
		time.Sleep(5 * time.Millisecond)
	}
	c, err := Dial(s.Addr(), Msg{Token: s.Token, Rank: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ev := recv(t, s); ev.Kind != Hello || ev.Rank != 0 {
		t.Errorf("got %+v", ev)
	}
	s.mu.Lock()
	n := len(s.perPeer[netip.MustParseAddr("127.0.0.1")])
	s.mu.Unlock()
	if n > MaxPendingPerPeer {
		t.Errorf("%d connections pending from one address, cap %d", n, MaxPendingPerPeer)
	}
}

// Both ways of asking the kernel whose socket a peer is agree: the
// one-socket sock_diag request and the /proc/net/tcp fallback.
func TestSocketUIDBothWays(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "[::1]"} {
		t.Run(host, func(t *testing.T) { socketUIDBothWays(t, host) })
	}
}

func socketUIDBothWays(t *testing.T, host string) {
	ln, err := net.Listen("tcp", host+":0")
	if err != nil {
		t.Skipf("no %s here: %v", host, err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	src, dst := s.RemoteAddr().(*net.TCPAddr), s.LocalAddr().(*net.TCPAddr)
	for name, f := range map[string]func(a, b *net.TCPAddr) (uint32, error){"sock_diag": socketUID, "/proc/net/tcp": socketUIDProc} {
		uid, err := f(src, dst)
		if err != nil || int(uid) != os.Getuid() {
			t.Errorf("%s: uid %d, %v; want %d", name, uid, err, os.Getuid())
		}
		if _, err := f(dst, src); err != nil {
			t.Errorf("%s: the server's own end: %v", name, err)
		}
		if _, err := f(&net.TCPAddr{IP: src.IP, Port: 1}, dst); err == nil {
			t.Errorf("%s: a socket that does not exist was found", name)
		}
	}
}
