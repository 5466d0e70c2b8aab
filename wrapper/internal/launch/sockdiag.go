package launch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
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
	return uid, err
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
