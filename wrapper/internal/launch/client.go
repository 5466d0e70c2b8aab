package launch

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Client is a shim's end of the control channel.
type Client struct {
	conn net.Conn
	sc   *bufio.Scanner
}

// Dial connects to the controller at addr and says hello, retrying a few
// times over about 1.5 s (the controller listens before srun starts, but a
// loaded network may drop the first SYN).
func Dial(addr string, hello Msg) (*Client, error) {
	hello.Kind = Hello
	return dial(addr, hello)
}

// DialWait connects, says wait, and waits for the controller's word: go
// (true) or abort (false). Asked to probe first, it calls probe (an error
// ends the wait) and says probed. The connection then carries the rank's
// hello and the rest as Dial's does.
func DialWait(addr string, wait Msg, probe func() error) (c *Client, goAhead bool, err error) {
	wait.Kind = Wait
	if c, err = dial(addr, wait); err != nil {
		return nil, false, err
	}
	for c.sc.Scan() {
		m, err := Parse(c.sc.Text())
		switch {
		case err != nil:
		case m.Kind == Go || m.Kind == Abort:
			return c, m.Kind == Go, nil
		case m.Kind == Probe:
			if err := probeFor(probe); err != nil {
				c.Close()
				return nil, false, err
			}
			if err := c.Send(Msg{Kind: Probed, Rank: wait.Rank}); err != nil {
				c.Close()
				return nil, false, err
			}
		}
	}
	c.Close()
	return nil, false, fmt.Errorf("the controller closed the connection before the step could start (%s): it called the step off or ended; its log in the job output says why", cmpOr(errText(c.sc.Err()), "EOF"))
}

func probeFor(probe func() error) error {
	if probe == nil {
		return errors.New("the controller asked for a probe of the node, but this task was started without a probe directory")
	}
	return probe()
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func dial(addr string, first Msg) (*Client, error) {
	var conn net.Conn
	var err error
	for i := 0; i < 5; i++ {
		conn, err = net.DialTimeout("tcp", addr, 3*time.Second)
		if err == nil {
			break
		}
		time.Sleep(time.Duration(100*(i+1)) * time.Millisecond)
	}
	if err != nil {
		return nil, err
	}
	c := &Client{conn: conn, sc: bufio.NewScanner(conn)}
	c.sc.Buffer(make([]byte, 0, 256), MaxLine+1)
	if err := c.Send(first); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// Send writes one message, waiting at most 2 s.
func (c *Client) Send(m Msg) error {
	c.conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
	_, err := io.WriteString(c.conn, m.Encode()+"\n")
	return err
}

// Receive calls f for each checkpoint or stack request until the
// connection ends.
func (c *Client) Receive(f func(Msg)) {
	for c.sc.Scan() {
		if m, err := Parse(c.sc.Text()); err == nil && (m.Kind == Ckpt || m.Kind == Stack) {
			f(m)
		}
	}
}

// Close ends the connection.
func (c *Client) Close() error { return c.conn.Close() }
