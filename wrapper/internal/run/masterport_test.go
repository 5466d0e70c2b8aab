package run

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
)

// MASTER_PORT is the job's derived port unless it is taken on the
// rendezvous node when that is this one: then the next free one, said.
func TestFreeMasterPort(t *testing.T) {
	derived := masterPort("44") // 20725
	busy := map[int]bool{}
	listen := func(_, addr string) (net.Listener, error) {
		p, _ := strconv.Atoi(strings.TrimPrefix(addr, ":"))
		if busy[p] {
			return nil, errors.New("address already in use")
		}
		return net.Listen("tcp", "127.0.0.1:0") // a real listener to close
	}
	var logged []string
	logf := func(f string, a ...any) { logged = append(logged, f) }

	if p := freeMasterPort("44", true, listen, logf); p != derived || len(logged) != 0 {
		t.Errorf("free: port %d (log %q), want %d and no message", p, logged, derived)
	}
	busy[derived], busy[derived+1] = true, true
	if p := freeMasterPort("44", true, listen, logf); p != derived+2 || len(logged) != 1 {
		t.Errorf("taken twice: port %d (log %q), want %d and one message", p, logged, derived+2)
	}
	if p := freeMasterPort("44", false, listen, logf); p != derived {
		t.Errorf("rank 0 on another node: port %d, want the derived %d (nothing to check here)", p, derived)
	}
	busy = map[int]bool{29999: true}
	for id := 0; ; id++ { // a job whose derived port is the range's last
		if masterPort(strconv.Itoa(id)) == 29999 {
			if p := freeMasterPort(strconv.Itoa(id), true, listen, logf); p != 20000 {
				t.Errorf("29999 taken: port %d, want the wrap to 20000", p)
			}
			break
		}
	}
}
