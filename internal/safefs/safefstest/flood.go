package safefstest

import (
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Flood keeps n connections to addr open from sockets nobody owns (a
// socket takes the fsuid of the thread that creates it), dialling again as
// soon as the server closes one, until Stop: another user on the batch
// node holding the controller's port. It needs root.
type Flood struct {
	Dials atomic.Int64 // connections made so far
	stop  chan struct{}
	wg    sync.WaitGroup
}

// StartFlood starts the flood; the caller checks for root first.
func StartFlood(addr string, n int) *Flood {
	f := &Flood{stop: make(chan struct{})}
	again := make(chan struct{}, n)
	for range n {
		again <- struct{}{}
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		runtime.LockOSThread() // the fsuid is this thread's only; the thread ends with the goroutine
		unix.Setfsuid(Nobody)
		for {
			select {
			case <-f.stop:
				return
			case <-again:
			}
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				again <- struct{}{}
				continue
			}
			f.Dials.Add(1)
			f.wg.Add(1)
			go f.hold(c, again)
		}
	}()
	return f
}

// hold keeps c until the server closes it, then asks for another.
func (f *Flood) hold(c net.Conn, again chan struct{}) {
	defer f.wg.Done()
	defer c.Close()
	go func() { <-f.stop; c.Close() }()
	c.Read(make([]byte, 1))
	select {
	case <-f.stop:
	default:
		again <- struct{}{}
	}
}

// Stop ends the flood and closes its connections.
func (f *Flood) Stop() {
	close(f.stop)
	f.wg.Wait()
}
