package topo

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// Route is one IPv4 route of /proc/net/route: the subnet an interface
// reaches directly, or the default route (0.0.0.0/0).
type Route struct {
	Iface   string       `json:"iface"`
	Prefix  netip.Prefix `json:"prefix"`
	Gateway string       `json:"gateway,omitempty"` // next hop; "" for a directly attached subnet
}

// readRoutes parses /proc/net/route (little-endian hex fields). A missing
// or malformed file gives no routes.
func readRoutes(path string) []Route {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	le := func(v uint64) [4]byte { return [4]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
	var out []Route
	lines := strings.Split(string(b), "\n")
	for _, line := range lines[min(1, len(lines)):] {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		dst, e1 := strconv.ParseUint(f[1], 16, 32)
		gw, e2 := strconv.ParseUint(f[2], 16, 32)
		mask, e3 := strconv.ParseUint(f[7], 16, 32)
		if e1 != nil || e2 != nil || e3 != nil {
			continue
		}
		bits := 0
		for _, x := range le(mask) {
			for x&0x80 != 0 {
				bits++
				x <<= 1
			}
		}
		r := Route{Iface: f[0], Prefix: netip.PrefixFrom(netip.AddrFrom4(le(dst)), bits)}
		if gw != 0 {
			r.Gateway = netip.AddrFrom4(le(gw)).String()
		}
		out = append(out, r)
	}
	return out
}

// routeFor is the most specific non-default route holding ip, or nil.
func routeFor(routes []Route, ip netip.Addr) *Route {
	var best *Route
	for i := range routes {
		r := &routes[i]
		if r.Prefix.Bits() > 0 && r.Prefix.Contains(ip) && (best == nil || r.Prefix.Bits() > best.Prefix.Bits()) {
			best = r
		}
	}
	return best
}

// InterfaceFor names the interface that carries addr (the node's address
// as Slurm knows it), and how that was decided: the interface holding the
// address; else, when addresses are unknown (no fib_trie), the interface
// whose directly attached subnet in proc/net/route holds it; else the
// default route's interface. ok is false when none of the three applies.
func (n *Node) InterfaceFor(addr string) (name, how string, ok bool) {
	a, _, _ := strings.Cut(strings.TrimSpace(addr), "/")
	ip, err := netip.ParseAddr(a)
	if err != nil || !ip.Is4() {
		return "", fmt.Sprintf("%q is not an IPv4 address", addr), false
	}
	for _, ni := range n.NetIfs {
		for _, p := range ni.IPv4 {
			if q, _, _ := strings.Cut(p, "/"); q == a {
				return ni.Name, fmt.Sprintf("%s holds %s", ni.Name, a), true
			}
		}
	}
	if r := routeFor(n.Routes, ip); r != nil && r.Gateway == "" {
		return r.Iface, fmt.Sprintf("no interface address is known to hold %s (no fib_trie); %s is on %s's directly attached subnet %s (proc/net/route)", a, a, r.Iface, r.Prefix), true
	}
	for _, r := range n.Routes {
		if r.Prefix.Bits() == 0 {
			return r.Iface, fmt.Sprintf("no interface holds or is attached to a subnet holding %s; %s carries the default route (via %s), the way the node reaches other subnets", a, r.Iface, orDash(r.Gateway)), true
		}
	}
	return "", fmt.Sprintf("no interface holds %s, no subnet in proc/net/route holds it and there is no default route", a), false
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// AddressesUnknown reports whether the interfaces' IPv4 addresses could
// not be read (a captured tree without proc/net/fib_trie).
func (n *Node) AddressesUnknown() bool {
	for _, d := range n.Degraded {
		if d.Device == "net" && strings.Contains(d.What, "fib_trie") {
			return true
		}
	}
	return false
}

// RDMAUndecided says why NCCL's device list cannot be decided from this
// node's facts: an RDMA device whose ports, link layer or state could not be
// read might be a compute NIC. "" when every device was read.
func (n *Node) RDMAUndecided() string {
	for _, d := range n.RDMA {
		if len(d.Ports) == 0 && len(n.DegradedFor(d.Name)) > 0 {
			return fmt.Sprintf("%s: %s; whether it is a compute NIC is unknown, so the device list is left to NCCL's own detection", d.Name, n.DegradedFor(d.Name)[0])
		}
		for _, p := range d.Ports {
			if p.LinkLayer == "" || p.State == "" {
				return fmt.Sprintf("%s port %d: %s; whether it is a usable compute port is unknown, so the device list is left to NCCL's own detection", d.Name, p.Number, strings.Join(n.DegradedFor(d.Name), "; "))
			}
		}
	}
	return ""
}
