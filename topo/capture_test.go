package topo

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func nodeJSON(t *testing.T, n *Node) string {
	t.Helper()
	c := *n
	c.Root = ""
	b, err := json.MarshalIndent(&c, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A capture of a captured tree discovers to the same node, NVML answers
// included: what Capture copies is exactly what Discover reads.
func TestCaptureRoundTrip(t *testing.T) {
	for _, name := range []string{"hgx-h100", "ibmcloud-h100-vsi", "azure-ndv5"} {
		t.Run(name, func(t *testing.T) {
			src := machineTree(t, name)
			rec, err := LoadRecordedNVML(src)
			if err != nil || rec == nil {
				t.Fatalf("recorded NVML: %v", err)
			}
			dst := filepath.Join(t.TempDir(), "capture")
			if err := Capture(src, dst, rec); err != nil {
				t.Fatal(err)
			}
			a, err := Discover(Options{Root: src})
			if err != nil {
				t.Fatal(err)
			}
			b, err := Discover(Options{Root: dst})
			if err != nil {
				t.Fatal(err)
			}
			if ja, jb := nodeJSON(t, a), nodeJSON(t, b); ja != jb {
				t.Fatalf("capture differs:\n--- original\n%s\n--- capture\n%s", ja, jb)
			}
		})
	}
}

// This machine (no GPU here) captured and read back matches the live read.
func TestCaptureLive(t *testing.T) {
	if _, err := os.Stat("/sys/bus/pci/devices"); err != nil {
		t.Skip("no sysfs")
	}
	dst := filepath.Join(t.TempDir(), "capture")
	if err := Capture("/", dst, nil); err != nil {
		t.Fatal(err)
	}
	live, err := Discover(Options{Root: "/"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Discover(Options{Root: dst})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(live.NUMANodes, got.NUMANodes) || live.CPU != got.CPU || live.Hostname != got.Hostname {
		t.Errorf("NUMA/CPU/hostname: live %v %v %q, capture %v %v %q", live.NUMANodes, live.CPU, live.Hostname, got.NUMANodes, got.CPU, got.Hostname)
	}
	if len(live.GPUs) != len(got.GPUs) || len(live.RDMA) != len(got.RDMA) {
		t.Errorf("GPUs %d/%d RDMA %d/%d", len(live.GPUs), len(got.GPUs), len(live.RDMA), len(got.RDMA))
	}
	byName := map[string]NetInterface{}
	for _, ni := range got.NetIfs {
		byName[ni.Name] = ni
	}
	for _, ni := range live.NetIfs {
		c, ok := byName[ni.Name]
		if !ok {
			t.Errorf("interface %s missing from the capture", ni.Name)
			continue
		}
		if c.Kind != ni.Kind || c.OperState != ni.OperState || c.BusID != ni.BusID || c.Role != ni.Role {
			t.Errorf("%s: live %+v, capture %+v", ni.Name, ni, c)
		}
		// The live addresses come from the kernel's interface list, the
		// capture's from fib_trie + route: the same addresses, each with its
		// subnet's prefix.
		if strings.Join(c.IPv4, ",") != strings.Join(ni.IPv4, ",") {
			t.Errorf("%s: IPv4 live %v, capture %v", ni.Name, ni.IPv4, c.IPv4)
		}
	}
	if strings.Join(live.SocketIfNames(), ",") != strings.Join(got.SocketIfNames(), ",") {
		t.Errorf("socket interfaces live %v, capture %v", live.SocketIfNames(), got.SocketIfNames())
	}
}

func TestCaptureRefusesNonEmpty(t *testing.T) {
	dst := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dst, "x"), nil, 0o644))
	if err := Capture("/", dst, nil); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("err = %v", err)
	}
	if err := Capture(t.TempDir(), filepath.Join(t.TempDir(), "c"), nil); err == nil || !strings.Contains(err.Error(), "not a sysfs tree") {
		t.Fatalf("err = %v", err)
	}
}
