package launch

import (
	"bufio"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"
)

// HelloTimeout is how long an admitted connection may take to say hello. A
// shim writes its hello right after it connects, so a connection silent
// this long is not a shim.
const HelloTimeout = 2 * time.Second

// MaxPending caps the admitted connections that have not said hello yet: one
// beyond it is closed at once rather than left in the kernel's accept
// queue, where it would stand ahead of the shims (review t4, F1).
// MaxPendingPerPeer caps those from one remote address: past it, that
// address's oldest pending connection is closed (take). The shims of a
// 16k-rank job connect at once, but each says hello at once.
const (
	MaxPending        = 4096
	MaxPendingPerPeer = 256
)

// writeTimeout bounds a write to one shim.
const writeTimeout = 5 * time.Second

// Event is a message from a shim, with when it arrived.
type Event struct {
	Msg
	At time.Time
}

// Server is the controller's end of the control channel.
type Server struct {
	Token  string
	Events chan Event // hello, signal and exit of every rank, in arrival order per rank

	ln           net.Listener
	world        int
	pending      chan struct{}
	helloTimeout time.Duration
	admission    *admission
	perPeer      map[netip.Addr][]*pending // pending connections by remote address, oldest first; under mu
	refused      int                       // connections closed before a hello could be read; under mu

	mu    sync.Mutex
	conns map[int]net.Conn
	// closed: when each rank's connection closed since its last hello (its
	// shim ended: exited, killed, or its node's kernel reset the socket).
	closed map[int]time.Time
	// gate: what a waiting shim is told (Go or Abort; "" until Release or
	// Abort says).
	gate Kind
}

// Listen starts a server on host (an address of this node; a free port),
// for the ranks 0..world-1, admitting peers on this host of this process's
// uid and any remote peer. A job's controller uses ListenPeers.
func Listen(host string, world int) (*Server, error) {
	return ListenPeers(host, world, Peers{UID: os.Getuid()})
}

// ListenPeers is Listen admitting only the given peers.
func ListenPeers(host string, world int, peers Peers) (*Server, error) {
	return listen(host, world, MaxPending, HelloTimeout, newAdmission(peers))
}

func listen(host string, world, maxPending int, helloTimeout time.Duration, adm *admission) (*Server, error) {
	if err := checkNoFile(world); err != nil {
		return nil, err
	}
	tok, err := NewToken()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("control channel: %w", err)
	}
	s := &Server{Token: tok, Events: make(chan Event, 1024), ln: ln, world: world,
		pending: make(chan struct{}, maxPending), helloTimeout: helloTimeout, admission: adm,
		perPeer: map[netip.Addr][]*pending{}, conns: map[int]net.Conn{}}
	go s.accept()
	return s, nil
}

// Weaker says why the peer check is weaker than asked ("" when it is not):
// the caller logs it.
func (s *Server) Weaker() string { return s.admission.note }

// Refused is how many connections were closed before a hello was read:
// peers not admitted, and those beyond the pending caps.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Addr is where the shims connect (host:port).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Port is the port it listens on.
func (s *Server) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// Close stops listening and closes every connection.
func (s *Server) Close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
}

// accept never waits for a slot: a connection not admitted, or beyond the
// global cap, is closed at once, so the kernel's queue keeps moving and a
// shim behind thousands of hostile connections is reached within
// milliseconds.
func (s *Server) accept() {
	for {
		c, err := s.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil { // out of descriptors, or a connection reset in the queue
			time.Sleep(5 * time.Millisecond)
			continue
		}
		peer, ok := s.admission.admit(c)
		if ok {
			if p, ok := s.take(peer, c); ok {
				go s.serve(c, peer, p)
				continue
			}
		}
		c.Close()
		s.mu.Lock()
		s.refused++
		s.mu.Unlock()
	}
}

// pending is an admitted connection from a remote peer, before its hello.
type pending struct {
	c       net.Conn
	evicted bool // closed to make way for a newer one from the same address
}

// take reserves a pending slot for c from peer. A remote peer at its cap
// does not lose the new connection but its oldest pending one: a shim says
// hello as soon as it connects, so the oldest silent connection is the
// least likely to be a shim, and someone holding slots from an allocation
// node (where no uid can be checked) cannot keep that node's shims out.
// p is nil for a peer on this host (admitted by uid, not counted by
// address).
func (s *Server) take(peer netip.Addr, c net.Conn) (p *pending, ok bool) {
	remote := !s.admission.isLocal(peer)
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.perPeer[peer]; remote && len(q) >= MaxPendingPerPeer {
		q[0].evicted = true
		q[0].c.Close() // its hello read fails at once and frees its global slot
		s.perPeer[peer] = q[1:]
		s.refused++
	}
	select {
	case s.pending <- struct{}{}:
	default:
		return nil, false
	}
	if remote {
		p = &pending{c: c}
		s.perPeer[peer] = append(s.perPeer[peer], p)
	}
	return p, true
}

func (s *Server) release(peer netip.Addr, p *pending) {
	s.mu.Lock()
	defer s.mu.Unlock()
	<-s.pending
	if p == nil || p.evicted {
		return
	}
	q := s.perPeer[peer]
	for i := range q {
		if q[i] == p {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(s.perPeer, peer)
	} else {
		s.perPeer[peer] = q
	}
}

// hello reads the first line, which must be a hello with the token and a
// rank of the step, within HelloTimeout. It frees the pending slot.
func (s *Server) hello(c net.Conn, sc *bufio.Scanner, peer netip.Addr, p *pending) (Msg, bool) {
	defer s.release(peer, p)
	c.SetReadDeadline(time.Now().Add(s.helloTimeout))
	if !sc.Scan() {
		return Msg{}, false
	}
	m, err := Parse(sc.Text())
	if err != nil || m.Kind != Hello && m.Kind != Wait || !s.tokenOK(m.Token) || m.Rank >= s.world {
		return Msg{}, false
	}
	c.SetReadDeadline(time.Time{})
	return m, true
}

// tokenOK compares in constant time: the comparison's duration says
// nothing about how much of a guess was right.
func (s *Server) tokenOK(tok string) bool {
	return subtle.ConstantTimeCompare([]byte(tok), []byte(s.Token)) == 1
}

func (s *Server) serve(c net.Conn, peer netip.Addr, p *pending) {
	defer c.Close()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 0, 256), MaxLine+1)
	h, ok := s.hello(c, sc, peer, p)
	if !ok {
		return
	}
	rank := h.Rank
	s.mu.Lock()
	s.conns[rank] = c
	delete(s.closed, rank)
	if h.Kind == Wait && s.gate != "" {
		c.SetWriteDeadline(time.Now().Add(writeTimeout))
		c.Write([]byte(string(s.gate) + "\n"))
	}
	s.mu.Unlock()
	s.Events <- Event{Msg: h, At: time.Now()}
	if h.Kind == Wait && !s.waiting(rank, c, sc) {
		s.drop(rank, c)
		return
	}
	for sc.Scan() {
		m, err := Parse(sc.Text())
		if err != nil || m.Kind == Hello || m.Kind == Ckpt || m.Kind == Stack || m.Rank != rank {
			continue // a shim speaks for its own rank only
		}
		s.Events <- Event{Msg: m, At: time.Now()}
	}
	s.drop(rank, c)
}

// waiting reads what a waiting shim says: probed (when asked to probe),
// then, after go, the hello of its running rank. False: anything else.
func (s *Server) waiting(rank int, c net.Conn, sc *bufio.Scanner) bool {
	for sc.Scan() {
		m, err := Parse(sc.Text())
		if err != nil || m.Rank != rank || m.Kind != Probed && (m.Kind != Hello || !s.tokenOK(m.Token)) {
			return false
		}
		s.Events <- Event{Msg: m, At: time.Now()}
		if m.Kind == Hello {
			return true
		}
	}
	return false
}

func (s *Server) drop(rank int, c net.Conn) {
	s.mu.Lock()
	if s.conns[rank] == c {
		delete(s.conns, rank)
		if s.closed == nil {
			s.closed = map[int]time.Time{}
		}
		s.closed[rank] = time.Now()
	}
	s.mu.Unlock()
}

// ClosedAt is when rank's connection closed, since its shim's last hello;
// false while it is open or when none was made. A node that is lost without
// its kernel (power, network) leaves its connections open.
func (s *Server) ClosedAt(rank int) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.closed[rank]
	return t, ok
}

// Release tells every waiting shim, and each that says wait later, to go.
func (s *Server) Release() int { return s.open(Go) }

// Abort tells every waiting shim, and each that says wait later, to exit
// without starting its rank.
func (s *Server) Abort() int { return s.open(Abort) }

func (s *Server) open(k Kind) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = k
	return s.writeAll(Msg{Kind: k})
}

// Broadcast sends m to every connected shim and returns how many it reached.
func (s *Server) Broadcast(m Msg) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeAll(m)
}

// writeAll sends m to every connected shim; s.mu is held.
func (s *Server) writeAll(m Msg) int {
	line := []byte(m.Encode() + "\n")
	n := 0
	for _, c := range s.conns {
		c.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := c.Write(line); err == nil {
			n++
		}
	}
	return n
}

// SendTo sends m to one rank's shim; false if it is not connected.
func (s *Server) SendTo(rank int, m Msg) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.conns[rank]
	if !ok {
		return false
	}
	c.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := c.Write([]byte(m.Encode() + "\n"))
	return err == nil
}

// Connected is the number of shims connected now.
func (s *Server) Connected() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
