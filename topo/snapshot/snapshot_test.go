package snapshot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBuiltInSpecsCarrySources(t *testing.T) {
	names := Names()
	if len(names) < 6 {
		t.Fatalf("%d machines", len(names))
	}
	for _, name := range names {
		s, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if s.Name != name || s.Title == "" {
			t.Errorf("%s: name %q title %q", name, s.Name, s.Title)
		}
		var public, inferred bool
		for _, src := range s.Sources {
			// A saved fixture, or a public address (the GB200 and H200 NVL
			// captures cite GitHub threads that the fixtures do not hold).
			public = public || strings.Contains(src, "fixtures/") || strings.Contains(src, "github.com/")
			inferred = inferred || strings.HasPrefix(src, "INFERRED")
		}
		if !public || !inferred {
			t.Errorf("%s: every spec names its public sources and says what was inferred (%q)", name, s.Sources)
		}
	}
}

// The tree has the kernel's shape: relative links from the class and bus
// directories into /sys/devices, as in the captured path
// /sys/devices/pci0000:5d/0000:5d:00.0/0000:5e:00.0/infiniband/mlx5_0
// (fixtures/sysfs/ib-resolved-path-netdata-9091.txt).
func TestExpandKernelLayout(t *testing.T) {
	spec := `name t
numa 0 cpus=0-3
cpu vendor=GenuineIntel family=6 model=143 name=x
host pci0000:5d numa=0
  port 0000:5d:00.0
    nic 0000:5e:00.0 device=0x1021 rdma=mlx5_0 net=ibp94s0 guid=0xa088c2030074cfda
      ibport 1 layer=InfiniBand state=ACTIVE phys=LinkUp rate=400 gen=NDR
  port 0000:5d:01.0
    nic 0000:5f:00.0 device=0x1021 rdma=mlx5_1
      ibport 1 layer=Ethernet state=ACTIVE phys=LinkUp rate=200 gen=HDR net=enp95s0np0 ipv4=10.9.8.7
`
	s, err := Parse("t.spec", []byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := Expand(s, dir); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"sys/class/infiniband/mlx5_0":      "../../devices/pci0000:5d/0000:5d:00.0/0000:5e:00.0/infiniband/mlx5_0",
		"sys/bus/pci/devices/0000:5e:00.0": "../../../devices/pci0000:5d/0000:5d:00.0/0000:5e:00.0",
		"sys/class/net/ibp94s0":            "../../devices/pci0000:5d/0000:5d:00.0/0000:5e:00.0/net/ibp94s0",
		"sys/devices/pci0000:5d/0000:5d:00.0/0000:5e:00.0/infiniband/mlx5_0/device": "../..",
		"sys/devices/pci0000:5d/0000:5d:00.0/0000:5e:00.0/driver":                   "../../../../bus/pci/drivers/mlx5_core",
	}
	for p, want := range links {
		got, err := os.Readlink(filepath.Join(dir, p))
		if err != nil || got != want {
			t.Errorf("%s -> %q (%v), want %q", p, got, err, want)
		}
	}
	files := map[string]string{
		"sys/class/infiniband/mlx5_0/ports/1/state":             "4: ACTIVE\n",
		"sys/class/infiniband/mlx5_0/ports/1/phys_state":        "5: LinkUp\n",
		"sys/class/infiniband/mlx5_0/ports/1/rate":              "400 Gb/sec (4X NDR)\n",
		"sys/class/infiniband/mlx5_0/ports/1/link_layer":        "InfiniBand\n",
		"sys/class/infiniband/mlx5_0/node_guid":                 "a088:c203:0074:cfda\n",
		"sys/class/infiniband/mlx5_1/ports/1/gids/3":            "0000:0000:0000:0000:0000:ffff:0a09:0807\n",
		"sys/class/infiniband/mlx5_1/ports/1/gid_attrs/types/3": "RoCE v2\n",
		"sys/class/infiniband/mlx5_1/ports/1/gid_attrs/types/2": "IB/RoCE v1\n",
		"sys/class/infiniband/mlx5_1/ports/1/gid_attrs/ndevs/3": "enp95s0np0\n",
		"sys/bus/pci/devices/0000:5e:00.0/class":                "0x020700\n",
		"sys/bus/pci/devices/0000:5f:00.0/class":                "0x020000\n",
		"sys/bus/pci/devices/0000:5e:00.0/local_cpulist":        "0-3\n",
		"sys/bus/pci/devices/0000:5e:00.0/local_cpus":           "0000000f\n",
		"sys/bus/pci/devices/0000:5e:00.0/numa_node":            "0\n",
		"sys/devices/system/node/node0/cpulist":                 "0-3\n",
		"sys/class/net/ibp94s0/type":                            "32\n",
		"sys/class/net/enp95s0np0/operstate":                    "up\n",
	}
	for p, want := range files {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q (%v), want %q", p, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "sys/class/infiniband/mlx5_1/ports/1/gid_attrs/types/5")); err == nil {
		t.Error("unset GID entries have no type file (reading one fails on a real kernel)")
	}
}

func TestParseErrorsNameTheLine(t *testing.T) {
	cases := []struct{ name, spec, want string }{
		{"unknown keyword", "name x\nswich 0000:01:00.0\n", "x.spec line 2: swich: unknown keyword"},
		{"tab", "name x\nhost pci0000:00\n\tgpu 0000:01:00.0\n", "x.spec line 3: tab in indentation"},
		{"orphan function", "name x\ngpu 0000:01:00.0\n", "x.spec line 2: gpu: a PCI function must be indented under a host bridge"},
		{"orphan port", "name x\nhost pci0000:00\n  gpu 0000:01:00.0\n    ibport 1 layer=InfiniBand\n", "x.spec line 4: ibport: an ibport is indented under its nic"},
		{"not key=value", "name x\nhost pci0000:00\n  gpu 0000:01:00.0 numa\n", `x.spec line 3: gpu: "numa" is not key=value`},
		{"duplicate key", "name x\nhost pci0000:00\n  gpu 0000:01:00.0 numa=0 numa=1\n", `key "numa" given twice`},
		{"quote", "name x\ntitle \"open\n", "x.spec line 2: unterminated quote"},
		{"no name", "title x\n", "x.spec: no 'name' line"},
		{"bad link", "name x\nnvlinks all 0000:05:00.0\n", `bad link "0000:05:00.0"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("x.spec", []byte(c.spec))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

func TestExpandErrors(t *testing.T) {
	cases := []struct{ name, spec, want string }{
		{"duplicate address", "name x\nnuma 0 cpus=0\nhost pci0000:00\n  gpu 0000:01:00.0\n  gpu 0000:01:00.0\n", "line 5: 0000:01:00.0 already used on line 4"},
		{"bad address", "name x\nnuma 0 cpus=0\nhost pci0000:00\n  gpu 0000:1:00.0\n", `PCI address "0000:1:00.0"`},
		{"bad state", "name x\nnuma 0 cpus=0\nhost pci0000:00\n  nic 0000:01:00.0 rdma=mlx5_0\n    ibport 1 layer=InfiniBand state=UP phys=LinkUp rate=400\n", `state="UP"; accepted: DOWN, INIT, ARMED, ACTIVE`},
		{"nic without ports", "name x\nnuma 0 cpus=0\nhost pci0000:00\n  nic 0000:01:00.0 rdma=mlx5_0\n", "nic mlx5_0 has no ibport lines"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse("x.spec", []byte(c.spec))
			if err != nil {
				t.Fatal(err)
			}
			err = Expand(s, t.TempDir())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

func TestUnpackRefusesNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x"), nil, 0o644)
	if err := Unpack("hgx-h100", dir); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("err = %v", err)
	}
	if err := Unpack("nope", t.TempDir()); err == nil || !strings.Contains(err.Error(), `no built-in machine "nope"`) {
		t.Fatalf("err = %v", err)
	}
}
