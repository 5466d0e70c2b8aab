package topo

import (
	"encoding/json"
	"slices"
	"sort"
	"testing"
)

func TestNormalizeBusID(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"nvml form", "00000000:07:00.0", "0000:07:00.0"},
		{"nvml upper case", "00000000:B7:00.0", "0000:b7:00.0"},
		{"sysfs form", "0000:5d:00.1", "0000:5d:00.1"},
		{"no domain", "1b:00.0", "0000:1b:00.0"},
		{"azure domain", "0101:00:00.0", "0101:00:00.0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := NormalizeBusID(c.in)
			if err != nil || got != c.want {
				t.Fatalf("NormalizeBusID(%q) = %q, %v; want %q", c.in, got, err, c.want)
			}
		})
	}
	for _, bad := range []string{"", "07:00", "0000:07:00.9", "zz:00.0", "0000:07:20.0"} {
		if _, err := NormalizeBusID(bad); err == nil {
			t.Errorf("NormalizeBusID(%q): want error", bad)
		}
	}
}

func TestCPUList(t *testing.T) {
	cases := []struct {
		name, in, want string
		n              int
	}{
		{"two ranges", "0-47,96-143", "0-47,96-143", 96},
		{"single", "5", "5", 1},
		{"unsorted singles merge", "3,1,2", "1-3", 3},
		{"empty", "", "", 0},
		{"newline", "0-3\n", "0-3", 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := ParseCPUList(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if l.String() != c.want || len(l) != c.n {
				t.Fatalf("ParseCPUList(%q) = %q (%d CPUs), want %q (%d)", c.in, l, len(l), c.want, c.n)
			}
		})
	}
	for _, bad := range []string{"a", "3-1", "1,,2"} {
		if _, err := ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q): want error", bad)
		}
	}
}

func TestLinkJSONRoundTrip(t *testing.T) {
	in := []Link{{Type: PathSelf}, {Type: PathNVLink, NVLinks: 18}, {Type: PathPIX}, {Type: PathSYS}, {Type: PathNODE}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `["X","NV18","PIX","SYS","NODE"]` {
		t.Fatalf("marshal = %s", b)
	}
	var out []Link
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if in[i] != out[i] {
			t.Fatalf("round trip [%d]: %v != %v", i, in[i], out[i])
		}
	}
	if err := json.Unmarshal([]byte(`["NVX"]`), &out); err == nil {
		t.Fatal("NVX: want error")
	}
}

func TestNVLinkDomain(t *testing.T) {
	reg := func(uuid string, clique uint32, state string) *NVLinkFabric {
		return &NVLinkFabric{ClusterUUID: uuid, CliqueID: clique, State: state}
	}
	const u = "5a1c7e11-0000-0000-0000-000000000001"
	cases := []struct {
		name string
		f    []*NVLinkFabric
		want string
	}{
		{"all agree", []*NVLinkFabric{reg(u, 7, "completed"), reg(u, 7, "completed")}, u + ".7"},
		{"cliques differ", []*NVLinkFabric{reg(u, 7, "completed"), reg(u, 8, "completed")}, ""},
		{"one not registered", []*NVLinkFabric{reg(u, 7, "completed"), nil}, ""},
		{"in progress", []*NVLinkFabric{reg(u, 7, "in-progress"), reg(u, 7, "in-progress")}, ""},
		{"zero uuid", []*NVLinkFabric{reg("00000000-0000-0000-0000-000000000000", 0, "completed")}, ""},
		{"no GPUs", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := &Node{}
			for _, f := range c.f {
				n.GPUs = append(n.GPUs, GPU{Fabric: f})
			}
			if got := n.NVLinkDomain(); got != c.want {
				t.Fatalf("NVLinkDomain() = %q, want %q", got, c.want)
			}
		})
	}
}

// A CPU number past Linux's NR_CPUS, or a list longer than that, is
// refused: "0-9223372036854775807" once allocated until memory ran out.
func TestParseCPUListBoundary(t *testing.T) {
	if l, err := ParseCPUList("0-65535"); err != nil || len(l) != 65536 {
		t.Errorf("0-65535: %d CPUs, %v", len(l), err)
	}
	for _, bad := range []string{"65536", "0-65536", "0-9223372036854775807", "-1", "0-40000,0-40000", "99999999999999999999"} {
		if l, err := ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q) = %d CPUs; want an error", bad, len(l))
		}
	}
}

// FuzzParseCPUList (sysfs cpulist files, captured trees): no panic,
// bounded, sorted, and the compact form reads back as the same list.
func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0-47,96-143", "0", "", "3,1-2", "0-65535", "0-9223372036854775807", "1,1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseCPUList(s)
		if err != nil {
			return
		}
		if len(l) > maxCPU+1 || !sort.IntsAreSorted(l) {
			t.Fatalf("%q: %d CPUs, sorted %v", s, len(l), sort.IntsAreSorted(l))
		}
		back, err := ParseCPUList(l.String())
		if err != nil || !slices.Equal(back, l) {
			t.Fatalf("%q prints %q, which reads back as %v (%v)", s, l.String(), back, err)
		}
	})
}
