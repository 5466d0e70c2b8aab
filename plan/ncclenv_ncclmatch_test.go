package plan

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/topo/snapshot"
)

// ncclIBSelect is NCCL's own reading of NCCL_IB_HCA, ported from
// src/misc/utils.cc (parseStringList, matchIf, matchPort, matchIfList) and
// the device loop of src/transport/net_ib/init.cc: a leading '^' inverts,
// then a leading '=' makes names exact (strncmp over strlen(name)+1),
// otherwise each entry is a prefix; ":N" restricts the port; only ACTIVE
// ports with an InfiniBand or Ethernet link layer are considered at all.
func ncclIBSelect(env string, n *topo.Node) []string {
	not := strings.HasPrefix(env, "^")
	env = strings.TrimPrefix(env, "^")
	exact := strings.HasPrefix(env, "=")
	env = strings.TrimPrefix(env, "=")
	type netIf struct {
		prefix string
		port   int
	}
	var list []netIf
	for _, e := range strings.Split(env, ",") {
		name, port, hasPort := strings.Cut(e, ":")
		if name == "" {
			continue
		}
		p := -1
		if hasPort {
			fmt.Sscanf(port, "%d", &p) // atoi: garbage reads as 0
		}
		list = append(list, netIf{name, p})
	}
	match := func(dev string, port int) bool {
		if len(list) == 0 {
			return true
		}
		for _, u := range list {
			ok := dev == u.prefix
			if !exact {
				ok = strings.HasPrefix(dev, u.prefix)
			}
			if ok && (u.port == -1 || port == -1 || u.port == port) {
				return true
			}
		}
		return false
	}
	var out []string
	for _, d := range n.RDMA {
		for _, p := range d.Ports {
			if !p.Active() || (p.LinkLayer != "InfiniBand" && p.LinkLayer != "Ethernet") {
				continue
			}
			if match(d.Name, p.Number) != not {
				out = append(out, fmt.Sprintf("%s:%d", d.Name, p.Number))
			}
		}
	}
	sort.Strings(out)
	return out
}

// On every captured machine, what NCCL itself would select from trainrun's
// NCCL_IB_HCA is exactly the active compute-fabric ports: no storage or
// management port, no Ethernet port on an InfiniBand job, nothing down.
func TestNCCLSelectsExactlyTheComputePorts(t *testing.T) {
	for _, m := range snapshot.Names() {
		t.Run(m, func(t *testing.T) {
			dir, cleanup, err := snapshot.UnpackTemp(m)
			if err != nil {
				t.Fatal(err)
			}
			defer cleanup()
			n, err := topo.Discover(topo.Options{Root: dir})
			if err != nil {
				t.Fatal(err)
			}
			p, err := Place(PlaceInput{Layout: Layout{TP: len(n.GPUs)}, GPUsPerNode: len(n.GPUs), Nodes: []PlaceNode{{Name: m}}})
			if err != nil {
				t.Fatal(err)
			}
			e, err := RankEnv(EnvInput{Node: n, Placement: p, Plan: Layout{TP: len(n.GPUs)}})
			if err != nil {
				t.Fatal(err)
			}
			hca, set := e.Get("NCCL_IB_HCA")
			var want []string
			fabric := fabricOf(n, "")
			for _, d := range n.RDMA {
				if d.Role != topo.RoleCompute || isEFA(&d) {
					continue
				}
				for _, pt := range d.Ports {
					if pt.Active() && (fabric != "infiniband" || pt.LinkLayer == "InfiniBand") {
						want = append(want, fmt.Sprintf("%s:%d", d.Name, pt.Number))
					}
				}
			}
			sort.Strings(want)
			if !set {
				if len(want) != 0 {
					t.Fatalf("NCCL_IB_HCA unset, but compute ports %v are active", want)
				}
				return
			}
			if got := ncclIBSelect(hca, n); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("NCCL would select %v from %s, want %v", got, hca, want)
			}
		})
	}
}

// Why the '=': on the HGX H100 whose mlx5 numbering interleaves IB and
// Ethernet, the same names without it select mlx5_10 and mlx5_11 through
// "mlx5_1", and "mlx5_1" is itself an Ethernet front-end port.
func TestNCCLPrefixMatchPitfall(t *testing.T) {
	dir, cleanup, err := snapshot.UnpackTemp("hgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	n, err := topo.Discover(topo.Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	got := ncclIBSelect("mlx5_1", n)
	want := []string{"mlx5_10:1", "mlx5_11:1", "mlx5_1:1"}
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("prefix mlx5_1 selects %v, want %v", got, want)
	}
	if got := ncclIBSelect("=mlx5_1:1", n); fmt.Sprint(got) != "[mlx5_1:1]" {
		t.Fatalf("exact =mlx5_1:1 selects %v", got)
	}
}
