package topo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/topo/snapshot"
)

// Without proc/net/fib_trie the interfaces' addresses are unknown; the
// node's Slurm address is matched to an interface by the route table's
// directly attached subnets, else the default route's interface is named,
// each with its reason.
func TestInterfaceForWithoutFibTrie(t *testing.T) {
	dir := t.TempDir()
	if err := snapshot.Unpack("hgx-h200-roce", dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "proc/net/fib_trie")); err != nil {
		t.Fatal(err)
	}
	n, err := Discover(Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !n.AddressesUnknown() || len(n.SocketIfNames()) != 0 {
		t.Fatalf("addresses should be unknown: %v %v", n.AddressesUnknown(), n.SocketIfNames())
	}
	name, how, ok := n.InterfaceFor("10.10.7.9")
	if !ok || name != "eno1" || !strings.Contains(how, "directly attached subnet 10.10.0.0/16") {
		t.Fatalf("InterfaceFor(10.10.7.9) = %q %q %v", name, how, ok)
	}
	if _, how, ok := n.InterfaceFor("192.168.1.1"); ok || !strings.Contains(how, "no default route") {
		t.Fatalf("an address on no subnet and no default route: %q %v", how, ok)
	}
	// Add a default route via eno1's gateway.
	route := filepath.Join(dir, "proc/net/route")
	b, _ := os.ReadFile(route)
	os.Remove(route)
	b = append(b, []byte("eno1\t00000000\t01000A0A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n")...)
	if err := os.WriteFile(route, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err = Discover(Options{Root: dir}); err != nil {
		t.Fatal(err)
	}
	name, how, ok = n.InterfaceFor("192.168.1.1")
	if !ok || name != "eno1" || !strings.Contains(how, "default route (via 10.10.0.1)") {
		t.Fatalf("default route: %q %q %v", name, how, ok)
	}
	// With fib_trie the address itself decides.
	full := discoverMachine(t, "hgx-h200-roce")
	if name, how, ok := full.InterfaceFor("10.10.0.31"); !ok || name != "eno1" || how != "eno1 holds 10.10.0.31" {
		t.Fatalf("with fib_trie: %q %q", name, how)
	}
}

// An RDMA device whose port state cannot be read leaves NCCL's device list
// undecided, with the file named.
func TestRDMAUndecided(t *testing.T) {
	dir := t.TempDir()
	if err := snapshot.Unpack("hgx-h200-roce", dir); err != nil {
		t.Fatal(err)
	}
	if why := discoverMachine(t, "hgx-h200-roce").RDMAUndecided(); why != "" {
		t.Fatalf("undamaged: %s", why)
	}
	if err := os.Remove(filepath.Join(dir, "sys/class/infiniband/mlx5_3/ports/1/state")); err != nil {
		t.Fatal(err)
	}
	n, err := Discover(Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	if why := n.RDMAUndecided(); !strings.Contains(why, "mlx5_3 port 1") || !strings.Contains(why, "ports/1/state: missing") {
		t.Fatalf("undecided: %q", why)
	}
	if d := n.RDMAByName("mlx5_3"); d == nil || d.NCCL {
		t.Fatalf("mlx5_3 kept but not used: %+v", d)
	}
	var b strings.Builder
	if err := WriteExplain(&b, n); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1 device(s) degraded", "  mlx5_3:\n    - " + dir + "/sys/", "ports/1/state: missing (port state unknown)", "NCCL_IB_HCA is left to NCCL: mlx5_3 port 1", "GPU0 0000:18:00.0: mlx5_0 (PIX) from sysfs"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, b.String())
		}
	}
}
