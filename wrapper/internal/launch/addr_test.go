package launch

import (
	"net"
	"strconv"
	"testing"
)

func TestControlHost(t *testing.T) {
	for _, tc := range []struct {
		host      string
		multi     bool
		bind, dst string
	}{
		{host: "127.0.0.1", multi: true, bind: "127.0.0.1", dst: "127.0.0.1"}, // the harness: NodeAddr=127.0.0.1
		{host: "10.1.2.3", multi: true, bind: "10.1.2.3", dst: "10.1.2.3"},
		{host: "fe80::1", bind: "fe80::1", dst: "fe80::1"},
		{host: "localhost", multi: false, dst: "localhost"}, // bind: localhost's address
		{host: "localhost", multi: true, bind: "", dst: "localhost"},
		{host: "no-such-host.invalid", multi: true, bind: "", dst: "no-such-host.invalid"},
	} {
		bind, dst := ControlHost(tc.host, tc.multi)
		if tc.host == "localhost" && !tc.multi {
			if ip := net.ParseIP(bind); ip == nil || !ip.IsLoopback() {
				t.Errorf("ControlHost(localhost, one node) binds %q, want a loopback address", bind)
			}
		} else if bind != tc.bind {
			t.Errorf("ControlHost(%q, %v) binds %q, want %q", tc.host, tc.multi, bind, tc.bind)
		}
		if dst != tc.dst {
			t.Errorf("ControlHost(%q, %v) dials %q, want %q", tc.host, tc.multi, dst, tc.dst)
		}
	}
}

// A server bound to one address is not reachable on another of the host's.
func TestListenBindsOneAddress(t *testing.T) {
	s, err := Listen("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(s.Port()))); err == nil {
		c.Close()
		t.Errorf("reached the server bound to 127.0.0.1 through 127.0.0.2")
	}
}
