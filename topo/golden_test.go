package topo

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/golden"
	"github.com/trainrun/trainrun/topo/snapshot"
)

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "golden", name), got)
}

func TestGoldenMatrix(t *testing.T) {
	for _, name := range snapshot.Names() {
		t.Run(name, func(t *testing.T) {
			n := discoverMachine(t, name)
			var b bytes.Buffer
			if err := WriteMatrix(&b, n); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, name+".matrix.txt", b.Bytes())
			x, err := n.NCCLTopoXML()
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, name+".nccl.xml", x)
		})
	}
}

func TestDiscoverBadRoot(t *testing.T) {
	empty := t.TempDir()
	_, err := Discover(Options{Root: empty})
	want := filepath.Join(empty, "sys/bus/pci/devices") + ": not a sysfs tree (missing); pass the root of a captured machine, the directory that holds sys/"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}

	// A damaged attribute no longer fails the node (issue 14): the GPU is
	// kept, identified by its device id, and Degraded names the file and
	// the value.
	dir := t.TempDir()
	if err := snapshot.Unpack("hgx-h100", dir); err != nil {
		t.Fatal(err)
	}
	class := filepath.Join(dir, "sys/bus/pci/devices/0000:19:00.0/class")
	os.Remove(class)
	if err := os.WriteFile(class, []byte("zz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := Discover(Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.GPUs) != 8 || n.GPUByBusID("0000:19:00.0") == nil {
		t.Fatalf("GPU 0000:19:00.0 lost: %d GPUs", len(n.GPUs))
	}
	got := strings.Join(n.DegradedFor("0000:19:00.0"), "\n")
	if !strings.Contains(got, "0000:19:00.0/class") || !strings.Contains(got, `"zz" is not a 6-digit 0x hex number`) || !strings.Contains(got, "taken for a gpu from its NVIDIA GPU device id 0x2330") {
		t.Fatalf("degraded notes for 0000:19:00.0:\n%s", got)
	}

	// A dangling device link is left out, named, and the rest is read.
	dir2 := t.TempDir()
	if err := snapshot.Unpack("aws-p4d", dir2); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir2, "sys/bus/pci/devices/0000:99:00.0")
	if err := os.Symlink("../../../devices/pci0000:99/0000:99:00.0", link); err != nil {
		t.Fatal(err)
	}
	n, err = Discover(Options{Root: dir2})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(n.DegradedFor("0000:99:00.0"), "\n"); !strings.Contains(got, link+": dangling link") || len(n.GPUs) != 8 {
		t.Fatalf("%d GPUs, degraded %q", len(n.GPUs), got)
	}
}

// Without NVML and without a recording, discovery says once why NVLink is
// missing and still reports every sysfs fact.
func TestDiscoverSysfsOnly(t *testing.T) {
	dir := t.TempDir()
	if err := snapshot.Unpack("dgx-a100", dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, snapshot.RecordedNVMLFile)); err != nil {
		t.Fatal(err)
	}
	n, err := Discover(Options{Root: dir, NVMLUnavailable: "libnvidia-ml.so.1 not found (ERROR_LIBRARY_NOT_FOUND)"})
	if err != nil {
		t.Fatal(err)
	}
	if n.Source != "sysfs" || n.NVLinkUnavailable != "libnvidia-ml.so.1 not found (ERROR_LIBRARY_NOT_FOUND)" {
		t.Fatalf("source %q, reason %q", n.Source, n.NVLinkUnavailable)
	}
	if n.GPUs[0].Name != "NVIDIA A100-SXM4-40GB" || n.GPUs[0].UUID != "" || n.GPUs[0].SM != 80 {
		t.Errorf("GPU0 %+v", n.GPUs[0])
	}
	// PCIe relations replace NVLink in the matrix: GPU0/GPU1 share the top switch.
	if got := n.GPULinks[0][1].String(); got != "PXB" {
		t.Errorf("GPU0-GPU1 %s, want PXB without NVML", got)
	}
	if got := n.GPULinks[0][2].String(); got != "SYS" {
		t.Errorf("GPU0-GPU2 %s, want SYS", got)
	}
	if len(n.NCCLNICs()) != 8 {
		t.Errorf("NCCL NICs %v", n.NCCLNICs())
	}
	var b bytes.Buffer
	if err := WriteMatrix(&b, n); err != nil {
		t.Fatal(err)
	}
	if strings.Count(b.String(), "ERROR_LIBRARY_NOT_FOUND") != 1 {
		t.Errorf("the reason should be stated once:\n%s", b.String())
	}
}

// Discovery of one 8-GPU node must stay under 100 ms (issue 14). Besides
// wall time it reports the process's CPU time per discovery (user+system,
// getrusage), which a loaded build machine inflates far less than ns/op.
func BenchmarkDiscoverHGXH100(b *testing.B) {
	dir := machineTree(b, "hgx-h100")
	var r0, r1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Discover(Options{Root: dir}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := time.Duration(r1.Utime.Nano() - r0.Utime.Nano() + r1.Stime.Nano() - r0.Stime.Nano())
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

func BenchmarkUnpackHGXH100(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if err := snapshot.Unpack("hgx-h100", filepath.Join(b.TempDir(), "m")); err != nil {
			b.Fatal(err)
		}
	}
}

// Intel VMD puts NVMe drives behind a nested host bridge with a five-digit
// domain (pci10000:00 inside 0000:00:0e.0); discovery must not trip on it.
func TestDiscoverVMDDomain(t *testing.T) {
	dir := t.TempDir()
	if err := snapshot.Unpack("h100-reversed", dir); err != nil {
		t.Fatal(err)
	}
	vmd := filepath.Join(dir, "sys/devices/pci0000:00/0000:00:0e.0")
	nvme := filepath.Join(vmd, "pci10000:00/10000:01:00.0")
	for d, attrs := range map[string]map[string]string{
		vmd:  {"class": "0x010400", "vendor": "0x8086", "device": "0x28c0", "numa_node": "0"},
		nvme: {"class": "0x010802", "vendor": "0x144d", "device": "0xa80a", "numa_node": "0"},
	} {
		must(t, os.MkdirAll(d, 0o755))
		for f, v := range attrs {
			must(t, os.WriteFile(filepath.Join(d, f), []byte(v+"\n"), 0o444))
		}
	}
	must(t, os.Symlink("../../../devices/pci0000:00/0000:00:0e.0", filepath.Join(dir, "sys/bus/pci/devices/0000:00:0e.0")))
	must(t, os.Symlink("../../../devices/pci0000:00/0000:00:0e.0/pci10000:00/10000:01:00.0", filepath.Join(dir, "sys/bus/pci/devices/10000:01:00.0")))
	n, err := Discover(Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.GPUs) != 8 || len(n.NCCLNICs()) != 8 {
		t.Fatalf("%d GPUs, NCCL NICs %v", len(n.GPUs), n.NCCLNICs())
	}
}
