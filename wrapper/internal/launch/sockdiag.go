package launch

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// socketUID asks the kernel (NETLINK_SOCK_DIAG, the interface behind
// ss -e) for the owner of the one TCP socket whose local end is src and
// whose remote end is dst. This is a request for one socket, not a dump:
// the kernel finds it by hash, so the cost does not grow with the number
// of sockets on the host. (vishvananda/netlink's SocketGet sends a dump
// request and the kernel walks every socket for each call: measured here,
// about 160 lookups a second with 10,000 sockets open, too slow to sort a
// flood from the shims.) The layouts are linux/inet_diag.h's
// inet_diag_req_v2 and inet_diag_msg.
func socketUID(src, dst *net.TCPAddr) (uint32, error) {
	uid, err := socketUIDFamily(src, dst, unix.AF_INET)
	if src.IP.To4() == nil || errors.Is(err, syscall.ENOENT) && dst.IP.To4() != nil {
		// an IPv6 socket, or an IPv6 socket talking to a v4-mapped address
		uid, err = socketUIDFamily(src, dst, unix.AF_INET6)
	}
	if err == nil {
		diagWorks.Store(true)
		return uid, nil
	}
	if diagWorks.Load() {
		return 0, err // the socket is gone (or never was): refused
	}
	// A kernel without sock_diag for TCP (no inet_diag, or a container
	// denied it) answers ENOENT to every request: read its table instead,
	// until sock_diag has answered once (then a miss is a miss, and a flood
	// of connections closed at once cannot make every accept read it).
	return socketUIDProc(src, dst)
}

// diagWorks: sock_diag has found a socket in this process.
var diagWorks atomic.Bool

// socketUIDProc is socketUID from /proc/net/tcp and tcp6, which list
// every socket: the fallback only. (prometheus/procfs parses them, but the
// shim, which imports this package, must stay lean: internal/layering.)
func socketUIDProc(src, dst *net.TCPAddr) (uint32, error) {
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid ...
			f := strings.Fields(line)
			if len(f) < 8 || !procAddrIs(f[1], src) || !procAddrIs(f[2], dst) {
				continue
			}
			uid, err := strconv.ParseUint(f[7], 10, 32)
			if err != nil {
				return 0, fmt.Errorf("%s: uid %q", table, f[7])
			}
			return uint32(uid), nil
		}
	}
	return 0, fmt.Errorf("no TCP socket %s -> %s on this host", src, dst)
}

// procAddrIs says whether s, an address of /proc/net/tcp[6] (hex words of
// the address in the host's byte order, ':', the port in hex), is a.
func procAddrIs(s string, a *net.TCPAddr) bool {
	h, p, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(p, 16, 16)
	if !ok || err != nil || int(port) != a.Port {
		return false
	}
	raw, err := hex.DecodeString(h)
	if err != nil || len(raw)%4 != 0 {
		return false
	}
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(ip[i:], binary.NativeEndian.Uint32(raw[i:]))
	}
	return ip.Equal(a.IP)
}

const (
	diagReqLen = 56 // inet_diag_req_v2
	diagMsgLen = 72 // inet_diag_msg
	diagUIDOff = 64 // inet_diag_msg.idiag_uid
)

func socketUIDFamily(src, dst *net.TCPAddr, family uint8) (uint32, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 1}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	req := make([]byte, unix.NLMSG_HDRLEN+diagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(req[8:], 1) // seq
	b := req[unix.NLMSG_HDRLEN:]
	b[0], b[1] = family, unix.IPPROTO_TCP
	ne.PutUint32(b[4:], 0xffffffff) // every state
	id := b[8:]
	binary.BigEndian.PutUint16(id[0:], uint16(src.Port))
	binary.BigEndian.PutUint16(id[2:], uint16(dst.Port))
	putIP(id[4:20], src.IP, family)
	putIP(id[20:36], dst.IP, family)
	ne.PutUint32(id[40:], 0xffffffff) // INET_DIAG_NOCOOKIE
	ne.PutUint32(id[44:], 0xffffffff)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil || len(msgs) == 0 {
		return 0, fmt.Errorf("sock_diag: an unreadable answer")
	}
	m := msgs[0]
	switch {
	case m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4:
		if e := int32(ne.Uint32(m.Data)); e != 0 {
			return 0, fmt.Errorf("sock_diag: %w", syscall.Errno(-e))
		}
		return 0, fmt.Errorf("sock_diag: no socket")
	case m.Header.Type == unix.SOCK_DIAG_BY_FAMILY && len(m.Data) >= diagMsgLen:
		return ne.Uint32(m.Data[diagUIDOff:]), nil
	}
	return 0, fmt.Errorf("sock_diag: answer of type %d", m.Header.Type)
}

// putIP writes ip as the kernel's __be32[4]: an IPv4 address in the first
// word, an IPv6 one (v4-mapped for an IPv4 peer) in all four.
func putIP(dst []byte, ip net.IP, family uint8) {
	if family == unix.AF_INET {
		copy(dst, ip.To4())
		return
	}
	copy(dst, ip.To16())
}
