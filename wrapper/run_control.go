package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The control channel joins the controller (in the batch step) and the shims
// (one per task). It exists because Slurm's signals take different paths to
// the batch shell and to the step (see issue "Checkpoints, preemption and
// requeue"): the shims hear what reaches the step (SIGTERM at preemption)
// and tell the controller within milliseconds; the controller asks each shim
// to signal its own training process, and only that process (never its
// data-loader workers, which `scancel --signal` to the step would reach).
//
// Protocol: one text line per message.
//
//	shim → controller:  hello TOKEN RANK PID NODE STEPID
//	                    signal RANK NAME          (the shim received a signal)
//	                    exit RANK CODE            (the training process ended; CODE 128+n for signal n)
//	controller → shim:  ckpt ID                   (send TRAINRUN_CKPT_SIGNAL once per ID)
type controlEvent struct {
	Kind string // hello, signal, exit
	Rank int
	Args []string
	At   time.Time
}

type controlServer struct {
	ln     net.Listener
	token  string
	events chan controlEvent

	mu    sync.Mutex
	conns map[int]net.Conn
	seen  map[int]bool
}

func newToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// startControl listens on all interfaces on a free port.
func startControl() (*controlServer, error) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		return nil, fmt.Errorf("control channel: %w", err)
	}
	s := &controlServer{ln: ln, token: newToken(), events: make(chan controlEvent, 1024),
		conns: map[int]net.Conn{}, seen: map[int]bool{}}
	go s.accept()
	return s, nil
}

func (s *controlServer) port() int { return s.ln.Addr().(*net.TCPAddr).Port }

func (s *controlServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
}

func (s *controlServer) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.serve(c)
	}
}

func (s *controlServer) serve(c net.Conn) {
	defer c.Close()
	sc := bufio.NewScanner(c)
	rank := -1
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		if rank < 0 {
			// The first line must be a hello with the token.
			if f[0] != "hello" || len(f) < 3 || f[1] != s.token {
				return
			}
			r, err := strconv.Atoi(f[2])
			if err != nil || r < 0 {
				return
			}
			rank = r
			s.mu.Lock()
			s.conns[rank] = c
			s.seen[rank] = true
			s.mu.Unlock()
			s.events <- controlEvent{Kind: "hello", Rank: rank, Args: f[3:], At: time.Now()}
			continue
		}
		r, err := strconv.Atoi(f[1])
		if err != nil || r != rank {
			continue
		}
		s.events <- controlEvent{Kind: f[0], Rank: rank, Args: f[2:], At: time.Now()}
	}
	s.mu.Lock()
	if s.conns[rank] == c {
		delete(s.conns, rank)
	}
	s.mu.Unlock()
}

// broadcast sends line to every connected shim and returns how many it reached.
func (s *controlServer) broadcast(line string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.conns {
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte(line + "\n")); err == nil {
			n++
		}
	}
	return n
}

// connected is the number of shims currently connected.
func (s *controlServer) connected() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// sendTo sends line to one rank's shim; false if it is not connected.
func (s *controlServer) sendTo(rank int, line string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.conns[rank]
	if !ok {
		return false
	}
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Write([]byte(line + "\n"))
	return err == nil
}
