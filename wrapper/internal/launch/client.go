package launch

import (
	"bufio"
	"io"
	"net"
	"time"
)

// Client is a shim's end of the control channel.
type Client struct {
	conn net.Conn
}

// Dial connects to the controller at addr and says hello, retrying a few
// times over about 1.5 s (the controller listens before srun starts, but a
// loaded network may drop the first SYN).
func Dial(addr string, hello Msg) (*Client, error) {
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
	hello.Kind = Hello
	c := &Client{conn: conn}
	if err := c.Send(hello); err != nil {
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
	sc := bufio.NewScanner(c.conn)
	sc.Buffer(make([]byte, 0, 256), MaxLine+1)
	for sc.Scan() {
		if m, err := Parse(sc.Text()); err == nil && (m.Kind == Ckpt || m.Kind == Stack) {
			f(m)
		}
	}
}

// Close ends the connection.
func (c *Client) Close() error { return c.conn.Close() }
