package topo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/topo/snapshot"
)

// treeFromSpec expands an inline spec into a temporary tree.
func treeFromSpec(t *testing.T, spec string) string {
	t.Helper()
	s, err := snapshot.Parse("inline.spec", []byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := snapshot.Expand(s, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

const roceNode = `name roce
numa 0 cpus=0-15
cpu vendor=GenuineIntel family=6 model=143 name=x
host pci0000:10 numa=0
  port 0000:10:01.0
    switch 0000:11:00.0 vendor=0x1000 device=0xc030
      gpu 0000:13:00.0 device=0x2330
      nic 0000:14:00.0 device=0x1021 rdma=mlx5_0
        ibport 1 layer=Ethernet state=ACTIVE phys=LinkUp rate=400 gen=NDR net=eth2 ipv4=10.1.0.2
  port 0000:10:02.0
    switch 0000:21:00.0 vendor=0x1000 device=0xc030
      gpu 0000:23:00.0 device=0x2330
      nic 0000:24:00.0 device=0x1021 rdma=mlx5_1
        ibport 1 layer=Ethernet state=ACTIVE phys=LinkUp rate=400 gen=NDR net=eth3 ipv4=10.2.0.2
  port 0000:10:03.0
    nic 0000:30:00.0 device=0x101d rdma=mlx5_2
      ibport 1 layer=Ethernet state=ACTIVE phys=LinkUp rate=100 gen=EDR net=eth0 ipv4=192.168.1.5
`

func TestRoles(t *testing.T) {
	cases := []struct {
		name   string
		spec   string
		mutate func(t *testing.T, dir string)
		roles  map[string]NICRole
		nccl   []string
		note   string
		reason map[string]string
		socket []string
	}{
		{
			name:   "RoCE rail with a slower front-end on the same link layer",
			spec:   roceNode,
			roles:  map[string]NICRole{"mlx5_0": RoleCompute, "mlx5_1": RoleCompute, "mlx5_2": RoleStorage},
			nccl:   []string{"mlx5_0", "mlx5_1"},
			reason: map[string]string{"mlx5_2": "rate 100 Gb/s differs from the compute rail's 400 Gb/s"},
		},
		{
			name: "XDR switch-management device on the HCA's function",
			spec: strings.Replace(roceNode, "layer=Ethernet state=ACTIVE phys=LinkUp rate=400 gen=NDR net=eth2 ipv4=10.1.0.2", "layer=InfiniBand state=ACTIVE phys=LinkUp rate=800 gen=XDR net=ibp20s0", 1),
			mutate: func(t *testing.T, dir string) {
				// smi1 shares 0000:14:00.0 with mlx5_0, four IB ports, as in
				// fixtures/ib/xdr-smi-devices-rdmamap-pr17.txt.
				fn := filepath.Join(dir, "sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0/0000:12:01.0/0000:14:00.0")
				smi := filepath.Join(fn, "infiniband/smi1")
				must(t, os.MkdirAll(smi, 0o755))
				must(t, os.WriteFile(filepath.Join(smi, "fw_ver"), []byte("40.44.1000\n"), 0o444))
				for p := 1; p <= 4; p++ {
					pd := filepath.Join(smi, "ports", string(rune('0'+p)))
					must(t, os.MkdirAll(pd, 0o755))
					for f, v := range map[string]string{"link_layer": "InfiniBand", "state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "800 Gb/sec (4X XDR)"} {
						must(t, os.WriteFile(filepath.Join(pd, f), []byte(v+"\n"), 0o444))
					}
				}
				must(t, os.Symlink("../..", filepath.Join(smi, "device")))
				must(t, os.Symlink("../../devices/pci0000:10/0000:10:01.0/0000:11:00.0/0000:12:01.0/0000:14:00.0/infiniband/smi1", filepath.Join(dir, "sys/class/infiniband/smi1")))
			},
			roles:  map[string]NICRole{"mlx5_0": RoleCompute, "mlx5_1": RoleStorage, "mlx5_2": RoleStorage, "smi1": RoleManagement},
			nccl:   []string{"mlx5_0"},
			reason: map[string]string{"smi1": "on the function of mlx5_0", "mlx5_1": "Ethernet 400 Gb/s on an InfiniBand fabric"},
		},
		{
			name: "software RDMA device without a PCI function",
			spec: roceNode,
			mutate: func(t *testing.T, dir string) {
				v := filepath.Join(dir, "sys/devices/virtual/infiniband/rxe0")
				must(t, os.MkdirAll(v, 0o755))
				must(t, os.Symlink("../../devices/virtual/infiniband/rxe0", filepath.Join(dir, "sys/class/infiniband/rxe0")))
			},
			roles: map[string]NICRole{"mlx5_0": RoleCompute, "mlx5_1": RoleCompute, "mlx5_2": RoleStorage},
			nccl:  []string{"mlx5_0", "mlx5_1"},
			note:  "RDMA device rxe0 skipped",
		},
		{
			name: "management address on a bond; container bridges and a bonding_masters file ignored",
			spec: strings.Replace(roceNode, "ipv4=192.168.1.5", "", 1) + "netif bond0 kind=bond ip=172.16.0.9/16 state=up\nnetif docker0 kind=bridge ip=172.17.0.1/16 state=up\nnetif lo kind=loopback ip=127.0.0.1/8\n",
			mutate: func(t *testing.T, dir string) {
				must(t, os.WriteFile(filepath.Join(dir, "sys/class/net/bonding_masters"), []byte("bond0\n"), 0o444))
			},
			roles:  map[string]NICRole{"mlx5_0": RoleCompute, "mlx5_1": RoleCompute, "mlx5_2": RoleStorage},
			nccl:   []string{"mlx5_0", "mlx5_1"},
			socket: []string{"bond0"},
		},
		{
			name: "no GPUs: no rail",
			spec: strings.NewReplacer("      gpu 0000:13:00.0 device=0x2330\n", "", "      gpu 0000:23:00.0 device=0x2330\n", "").Replace(
				strings.Replace(roceNode, "rate=100 gen=EDR", "rate=25 gen=EDR", 1)),
			roles: map[string]NICRole{"mlx5_0": RoleUnknown, "mlx5_1": RoleUnknown, "mlx5_2": RoleManagement},
			nccl:  []string{},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := treeFromSpec(t, c.spec)
			if c.mutate != nil {
				c.mutate(t, dir)
			}
			n, err := Discover(Options{Root: dir})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]NICRole{}
			for _, d := range n.RDMA {
				got[d.Name] = d.Role
				if want, ok := c.reason[d.Name]; ok && !strings.Contains(d.RoleReason, want) {
					t.Errorf("%s reason %q, want %q", d.Name, d.RoleReason, want)
				}
			}
			if len(got) != len(c.roles) {
				t.Errorf("roles %v, want %v", got, c.roles)
			}
			for k, v := range c.roles {
				if got[k] != v {
					t.Errorf("%s: %s, want %s", k, got[k], v)
				}
			}
			if g := n.NCCLNICs(); strings.Join(g, ",") != strings.Join(c.nccl, ",") {
				t.Errorf("NCCL NICs %v, want %v", g, c.nccl)
			}
			if c.socket != nil && strings.Join(n.SocketIfNames(), ",") != strings.Join(c.socket, ",") {
				t.Errorf("socket interfaces %v, want %v", n.SocketIfNames(), c.socket)
			}
			for _, ni := range n.NetIfs {
				if ni.Name == "bonding_masters" {
					t.Error("bonding_masters is not an interface")
				}
			}
			if c.note != "" && !strings.Contains(strings.Join(n.Notes, "\n"), c.note) {
				t.Errorf("notes %q lack %q", n.Notes, c.note)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
