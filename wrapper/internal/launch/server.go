package launch

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"time"
)

// HelloTimeout is how long a new connection may take to say hello.
const HelloTimeout = 10 * time.Second

// MaxPending caps the connections that have not said hello yet; the accept
// loop waits (the kernel's backlog holds the rest) while that many are open.
// The shims of a 16k-rank job connect at once, but each says hello at once.
const MaxPending = 512

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

	mu    sync.Mutex
	conns map[int]net.Conn
	// gate: what a waiting shim is told (Go or Abort; "" until Release or
	// Abort says).
	gate Kind
}

// Listen starts a server on host (an address of this node; a free port),
// for the ranks 0..world-1.
func Listen(host string, world int) (*Server, error) {
	return listen(host, world, MaxPending, HelloTimeout)
}

func listen(host string, world, maxPending int, helloTimeout time.Duration) (*Server, error) {
	tok, err := NewToken()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("control channel: %w", err)
	}
	s := &Server{Token: tok, Events: make(chan Event, 1024), ln: ln, world: world,
		pending: make(chan struct{}, maxPending), helloTimeout: helloTimeout, conns: map[int]net.Conn{}}
	go s.accept()
	return s, nil
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

func (s *Server) accept() {
	for {
		s.pending <- struct{}{} // a slot for one connection before its hello
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.serve(c)
	}
}

// hello reads the first line, which must be a hello with the token and a
// rank of the step, within HelloTimeout. It frees the pending slot.
func (s *Server) hello(c net.Conn, sc *bufio.Scanner) (Msg, bool) {
	defer func() { <-s.pending }()
	c.SetReadDeadline(time.Now().Add(s.helloTimeout))
	if !sc.Scan() {
		return Msg{}, false
	}
	m, err := Parse(sc.Text())
	if err != nil || m.Kind != Hello && m.Kind != Wait || m.Token != s.Token || m.Rank >= s.world {
		return Msg{}, false
	}
	c.SetReadDeadline(time.Time{})
	return m, true
}

func (s *Server) serve(c net.Conn) {
	defer c.Close()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 0, 256), MaxLine+1)
	h, ok := s.hello(c, sc)
	if !ok {
		return
	}
	rank := h.Rank
	s.mu.Lock()
	s.conns[rank] = c
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
		if err != nil || m.Rank != rank || m.Kind != Probed && (m.Kind != Hello || m.Token != s.Token) {
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
	}
	s.mu.Unlock()
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
