package topo

import (
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// readPorts reads /sys/class/infiniband/<dev>/ports/<n>: link_layer, state
// ("4: ACTIVE"), phys_state ("5: LinkUp"), rate ("400 Gb/sec (4X NDR)"),
// the netdev and, on RoCE, the GID table. A missing or malformed attribute
// leaves that fact empty and is recorded in Node.Degraded under the
// device's name; the port is kept.
func readPorts(n *Node, devDir, fnDir, name string) []RDMAPort {
	pdirs := listDir(filepath.Join(devDir, "ports"))
	var nums []int
	for _, s := range pdirs {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			nums = append(nums, v)
		}
	}
	sort.Ints(nums)
	if len(nums) == 0 {
		n.degrade(name, "%s: no ports: link layer, state and rate unknown, so NCCL use is left undecided", filepath.Join(devDir, "ports"))
	}
	netdevs := listDir(filepath.Join(fnDir, "net"))
	var out []RDMAPort
	for k, num := range nums {
		pdir := filepath.Join(devDir, "ports", strconv.Itoa(num))
		port := RDMAPort{Number: num}
		bad := func(attr, why string) {
			n.degrade(name, "%s: %s", filepath.Join(pdir, attr), why)
		}
		if s, why := readAttr(pdir, "link_layer"); why == "" {
			port.LinkLayer = s
		} else {
			bad("link_layer", why+" (link layer unknown)")
		}
		port.State = stateName(pdir, "state", bad)
		port.PhysState = stateName(pdir, "phys_state", bad)
		if s, why := readAttr(pdir, "rate"); why == "" {
			num, _, _ := strings.Cut(s, " ")
			if v, err := strconv.ParseFloat(num, 64); err == nil && strings.Contains(s, "Gb/sec") {
				port.RateGbps = v
			} else {
				bad("rate", strconv.Quote(s)+" is not \"N Gb/sec (...)\" (rate unknown)")
			}
		} else {
			bad("rate", why+" (rate unknown)")
		}
		port.NetDev = portNetDev(pdir, fnDir, netdevs, k)
		if port.LinkLayer == "Ethernet" {
			port.RoCEv2GIDIndex, port.RoCEv2IPv4 = roceV2GID(pdir)
		}
		out = append(out, port)
	}
	return out
}

// stateName reads "4: ACTIVE" as "ACTIVE".
func stateName(pdir, attr string, bad func(attr, why string)) string {
	s, why := readAttr(pdir, attr)
	if why != "" {
		bad(attr, why+" (port state unknown)")
		return ""
	}
	num, name, ok := strings.Cut(s, ":")
	if _, err := strconv.Atoi(strings.TrimSpace(num)); !ok || err != nil || strings.TrimSpace(name) == "" {
		bad(attr, strconv.Quote(s)+" is not \"N: NAME\" (port state unknown)")
		return ""
	}
	return strings.TrimSpace(name)
}
