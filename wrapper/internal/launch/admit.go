package launch

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
)

// Peers says who may open a control connection, checked when it is
// accepted, before it takes a slot or is read: the first review's token
// check comes too late against someone who only holds sockets open (review
// t4, F1).
type Peers struct {
	// Hosts are the allocation's node addresses (Slurm's NodeAddr, else
	// the node's name). A peer on another host must come from one of them.
	// Empty: any remote address (tests; the caller warns).
	Hosts []string
	// UID is the job user's. A peer on this host (the batch node, where
	// other users may log in) must be a socket this uid owns; the kernel
	// says whose it is (sock_diag, as ss -e shows).
	UID int
}

// admission is Peers resolved once, at Listen.
type admission struct {
	remote map[netip.Addr]bool // nil: any remote peer
	local  map[netip.Addr]bool // this host's own addresses
	uid    uint32
	owner  func(c net.Conn) (uint32, error) // the peer socket's uid
	note   string                           // why the check is weaker than asked, "" when it is not
	// loopbackRemote treats loopback peers as remote ones (tests of the
	// per-address caps, which cannot dial from another host).
	loopbackRemote bool
}

// isLocal says whether ip is this host's: its socket's owner is checked.
func (a *admission) isLocal(ip netip.Addr) bool {
	return ip.IsLoopback() && !a.loopbackRemote || a.local[ip]
}

func newAdmission(p Peers) *admission {
	a := &admission{local: localAddrs(), uid: uint32(p.UID), owner: peerUID}
	if len(p.Hosts) == 0 {
		return a
	}
	a.remote = map[netip.Addr]bool{}
	var unknown []string
	for _, h := range p.Hosts {
		addrs, err := resolve(h)
		if err != nil {
			unknown = append(unknown, h)
			continue
		}
		for _, ip := range addrs {
			a.remote[ip] = true
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		a.remote = nil
		a.note = fmt.Sprintf("the address of node(s) %s does not resolve here, so the control channel admits remote peers from any address (the token still guards it)", strings.Join(unknown, ","))
	}
	return a
}

func resolve(h string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(h); err == nil {
		return []netip.Addr{ip.Unmap()}, nil
	}
	names, err := net.LookupHost(h)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, n := range names {
		if ip, err := netip.ParseAddr(n); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no address", h)
	}
	return out, nil
}

// localAddrs are this host's interface addresses; loopback counts as this
// host whatever the interfaces say.
func localAddrs() map[netip.Addr]bool {
	m := map[netip.Addr]bool{}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				m[ip.Unmap()] = true
			}
		}
	}
	return m
}

// admit says whether c may go on to its hello, and the peer address it is
// counted under.
func (a *admission) admit(c net.Conn) (netip.Addr, bool) {
	ta, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return netip.Addr{}, false
	}
	ip = ip.Unmap()
	if a.isLocal(ip) {
		uid, err := a.owner(c)
		return ip, err == nil && uid == a.uid
	}
	return ip, a.remote == nil || a.remote[ip]
}

// peerUID asks the kernel who owns the other end of a connection from
// this host: the socket whose source is c's remote and whose destination
// is c's local address (sockdiag.go).
func peerUID(c net.Conn) (uint32, error) {
	r, ok1 := c.RemoteAddr().(*net.TCPAddr)
	l, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("not a TCP connection")
	}
	return socketUID(r, l)
}

// NodePeers is who may connect in a job on nodes, given Slurm's NodeAddr
// of each (a node missing from addrs is reached by its name), from the job
// user uid.
func NodePeers(nodes []string, addrs map[string]string, uid int) Peers {
	p := Peers{UID: uid}
	for _, n := range nodes {
		p.Hosts = append(p.Hosts, cmpOr(addrs[n], n))
	}
	return p
}
