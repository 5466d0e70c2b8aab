package topo

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/topo/snapshot"
)

// Every generated file passes the strict reader, lint included, and places
// each GPU and NCCL NIC where NCCL would find it.
func TestNCCLXMLGeneratedIsAccepted(t *testing.T) {
	for _, name := range snapshot.Names() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			n := discoverMachine(t, name)
			x, err := n.NCCLTopoXML()
			if err != nil {
				t.Fatal(err)
			}
			sys, err := parseNCCLTopo(x, true)
			if err != nil {
				t.Fatalf("NCCL would reject or misread the file: %v\n%s", err, x)
			}
			parent := endpointParents(sys)
			for _, g := range n.GPUs {
				if _, ok := parent[g.BusID]; !ok {
					t.Errorf("GPU%d %s missing from the XML", g.Index, g.BusID)
				}
			}
			for _, d := range n.RDMA {
				_, ok := parent[d.BusID]
				if ok != d.NCCL {
					t.Errorf("%s %s in XML: %v, NCCL uses it: %v", d.Name, d.BusID, ok, d.NCCL)
				}
			}
			// A GPU and the NIC next to it share their parent in the file.
			for _, g := range n.GPUs {
				if g.NearestPath != PathPIX || len(g.NCCLNICs) != 1 {
					continue
				}
				nic := n.RDMAByName(g.NCCLNICs[0])
				if parent[g.BusID] != parent[nic.BusID] {
					t.Errorf("GPU%d under %s, its NIC %s under %s", g.Index, parent[g.BusID], nic.Name, parent[nic.BusID])
				}
			}
		})
	}
}

// endpointParents maps each <pci> busid to its parent's busid, or to
// "cpu:<numaid>" when it sits directly under a CPU.
func endpointParents(sys *ncclElem) map[string]string {
	out := map[string]string{}
	var walk func(e *ncclElem, parent string)
	walk = func(e *ncclElem, parent string) {
		self := parent
		switch e.name {
		case "cpu":
			id, _ := e.attr("numaid")
			self = "cpu:" + id
		case "pci":
			b, _ := e.attr("busid")
			out[b] = parent
			self = b
		}
		for _, c := range e.children {
			walk(c, self)
		}
	}
	walk(sys, "")
	return out
}

func cpuOf(parent map[string]string, bus string) string {
	for p := parent[bus]; p != ""; p = parent[p] {
		if strings.HasPrefix(p, "cpu:") {
			return p
		}
	}
	return ""
}

// IBM published the NCCL topology of its H100 VSI; the file generated from
// the captured tree must hang every GPU and NIC under the same bridge and CPU.
func TestNCCLXMLMatchesIBMPublished(t *testing.T) {
	pub, err := os.ReadFile("testdata/nccl-xml/ibmcloud-h100-vsi-topo.xml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := parseNCCLTopo(pub, false)
	if err != nil {
		t.Fatal(err)
	}
	n := discoverMachine(t, "ibmcloud-h100-vsi")
	x, err := n.NCCLTopoXML()
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseNCCLTopo(x, true)
	if err != nil {
		t.Fatal(err)
	}
	wp, gp := endpointParents(want), endpointParents(got)
	checked := 0
	for bus, p := range wp {
		if strings.HasSuffix(p, ":00.0") && !strings.HasPrefix(p, "cpu:") {
			if gp[bus] != p {
				t.Errorf("%s: parent %q, IBM's file %q", bus, gp[bus], p)
			}
			if cpuOf(gp, bus) != cpuOf(wp, bus) {
				t.Errorf("%s: under %s, IBM's file %s", bus, cpuOf(gp, bus), cpuOf(wp, bus))
			}
			checked++
		}
	}
	if checked != 16 {
		t.Fatalf("compared %d endpoints, want 16", checked)
	}
	// The CPU affinity masks are the same strings.
	aff := func(sys *ncclElem) map[string]string {
		m := map[string]string{}
		for _, c := range sys.children {
			id, _ := c.attr("numaid")
			m[id], _ = c.attr("affinity")
		}
		return m
	}
	if a, b := aff(got), aff(want); a["0"] != b["0"] || a["1"] != b["1"] {
		t.Errorf("affinity %v, IBM's file %v", a, b)
	}
}

// The cloud files were written by hand for machines the VM cannot show;
// the GPUs and NICs must at least sit under the same NUMA node in ours.
func TestNCCLXMLNUMAMatchesCloudFiles(t *testing.T) {
	cases := []struct{ machine, file string }{
		{"azure-ndv5", "testdata/nccl-xml/azure-ndv5-topo.xml"},
		{"aws-p4d", "testdata/nccl-xml/aws-p4d-24xl-topo.xml"},
	}
	for _, c := range cases {
		t.Run(c.machine, func(t *testing.T) {
			pub, err := os.ReadFile(c.file)
			if err != nil {
				t.Fatal(err)
			}
			want, err := parseNCCLTopo(pub, false)
			if err != nil {
				t.Fatal(err)
			}
			n := discoverMachine(t, c.machine)
			x, err := n.NCCLTopoXML()
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseNCCLTopo(x, true)
			if err != nil {
				t.Fatal(err)
			}
			wp, gp := endpointParents(want), endpointParents(got)
			checked := 0
			for bus := range wp {
				if strings.HasPrefix(bus, "ffff:") {
					continue
				}
				if cpuOf(gp, bus) != cpuOf(wp, bus) {
					t.Errorf("%s under %s, published file %s", bus, cpuOf(gp, bus), cpuOf(wp, bus))
				}
				checked++
			}
			if checked < 12 {
				t.Fatalf("compared %d endpoints", checked)
			}
		})
	}
}

func TestNCCLXMLFixturesGrammar(t *testing.T) {
	files, _ := filepath.Glob("testdata/nccl-xml/*.xml")
	if len(files) < 8 {
		t.Fatalf("found %d fixture files", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			_, err = parseNCCLTopo(b, false)
			partial := strings.Contains(f, ".partial.")
			if partial && err == nil {
				t.Fatal("a truncated dump parsed")
			}
			if !partial && err != nil {
				t.Fatalf("published file rejected: %v", err)
			}
		})
	}
}

func TestNCCLXMLParserRejects(t *testing.T) {
	ok := `<system version="1">
  <cpu numaid="0" affinity="0000ffff" arch="x86_64" vendor="AuthenticAMD" familyid="23" modelid="49">
    <pci busid="0000:07:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16"/>
  </cpu>
</system>
`
	if _, err := parseNCCLTopo([]byte(ok), true); err != nil {
		t.Fatalf("baseline rejected: %v", err)
	}
	many := `<system version="1">` + "\n" + strings.Repeat(`  <cpu numaid="0"/>`+"\n", 256) + "</system>\n"
	attrs := `<system version="1">` + "\n  <cpu numaid=\"0\""
	for i := 0; i < 16; i++ {
		attrs += " a" + strconv.Itoa(i) + "=\"1\""
	}
	attrs += "/>\n</system>\n"
	cases := []struct {
		name, doc, want string
		lint            bool
	}{
		{"xml declaration", `<?xml version="1.0"?>` + "\n" + ok, "declaration", false},
		{"tab indent", strings.Replace(ok, "  <cpu", "\t<cpu", 1), "tab", false},
		{"attribute on next line", strings.Replace(ok, `" arch=`, "\"\n     arch=", 1), "expected >", false},
		{"double space", strings.Replace(ok, `" arch=`, `"  arch=`, 1), "empty attribute", false},
		{"space around =", strings.Replace(ok, `numaid="0"`, `numaid = "0"`, 1), "expected '='", false},
		{"unclosed", strings.Replace(ok, "</system>\n", "", 1), "end of file", false},
		{"mismatched close", strings.Replace(ok, "</cpu>", "</pci>", 1), "does not match", false},
		{"wrong version", strings.Replace(ok, `version="1"`, `version="2"`, 1), "VERSION", false},
		{"257 elements", many, "more than 256", false},
		{"17 attributes", attrs, "more than 16", false},
		{"upper-case busid", strings.Replace(ok, "0000:07:00.0", "0000:0A:00.0", 1), "lower-case", true},
		{"nvml busid form", strings.Replace(ok, "0000:07:00.0", "00000000:07:00.0", 1), "lower-case", true},
		{"unknown link speed", strings.Replace(ok, "16.0 GT/s PCIe", "Unknown", 1), "Gen3", true},
		{"no numaid", strings.Replace(ok, `numaid="0" `, "", 1), "numaid", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseNCCLTopo([]byte(c.doc), c.lint)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

// NCCL's own dump inside the flat H200 VM (first GPU and NIC as posted) hangs
// both directly under a CPU with numaid -1; the file generated from the
// captured tree must say the same, with the same link attributes.
func TestNCCLXMLMatchesNCCLDumpInFlatVM(t *testing.T) {
	b, err := os.ReadFile("testdata/nccl-xml/h200-kvm-vm-flat-nccl-tests-256.partial.xml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseNCCLTopo(b, false); err == nil {
		t.Fatal("the truncated dump parsed as is")
	}
	want, err := parseNCCLTopo(append(b, "  </cpu>\n</system>\n"...), false) // close what the poster cut
	if err != nil {
		t.Fatal(err)
	}
	n := discoverMachine(t, "h200-kvm-flat")
	x, err := n.NCCLTopoXML()
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseNCCLTopo(x, true)
	if err != nil {
		t.Fatal(err)
	}
	wp, gp := endpointParents(want), endpointParents(got)
	for _, bus := range []string{"0000:05:00.0", "0000:0d:00.0"} {
		if wp[bus] != "cpu:-1" || gp[bus] != wp[bus] {
			t.Errorf("%s under %q, NCCL's dump %q", bus, gp[bus], wp[bus])
		}
	}
	attrs := func(sys *ncclElem, bus string) map[string]string {
		out := map[string]string{}
		var walk func(e *ncclElem)
		walk = func(e *ncclElem) {
			if v, _ := e.attr("busid"); e.name == "pci" && v == bus {
				for _, a := range e.attrs {
					out[a[0]] = a[1]
				}
			}
			for _, c := range e.children {
				walk(c)
			}
		}
		walk(sys)
		return out
	}
	for _, bus := range []string{"0000:05:00.0", "0000:0d:00.0"} {
		w, g := attrs(want, bus), attrs(got, bus)
		for _, k := range []string{"class", "vendor", "device", "subsystem_vendor", "subsystem_device", "link_speed", "link_width"} {
			if w[k] != g[k] {
				t.Errorf("%s %s=%q, NCCL's dump %q", bus, k, g[k], w[k])
			}
		}
	}
}

// NCCL's own dump of the HGX H200 (truncated by its poster after the fourth
// switch's NIC): every endpoint it shows hangs under the same switch and CPU in
// the generated file, with the same ids, link attributes and CPU affinity.
func TestNCCLXMLMatchesNCCLDumpHGXH200(t *testing.T) {
	b, err := os.ReadFile("testdata/nccl-xml/hgx-h200-baremetal-nccl-tests-256.partial.xml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := parseNCCLTopo(append(b, "        </nic>\n      </pci>\n    </pci>\n  </cpu>\n</system>\n"...), false)
	if err != nil {
		t.Fatal(err)
	}
	n := discoverMachine(t, "hgx-h200-roce")
	x, err := n.NCCLTopoXML()
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseNCCLTopo(x, true)
	if err != nil {
		t.Fatal(err)
	}
	wp, gp := endpointParents(want), endpointParents(got)
	if len(wp) != 11 {
		t.Fatalf("the dump shows %d PCI functions, want 11", len(wp))
	}
	for bus, p := range wp {
		if gp[bus] != p {
			t.Errorf("%s under %q, NCCL's dump %q", bus, gp[bus], p)
		}
	}
	pciAttrs := func(sys *ncclElem) map[string]map[string]string {
		out := map[string]map[string]string{}
		var walk func(e *ncclElem)
		walk = func(e *ncclElem) {
			if e.name == "pci" || e.name == "cpu" {
				m := map[string]string{}
				for _, a := range e.attrs {
					m[a[0]] = a[1]
				}
				key := m["busid"]
				if e.name == "cpu" {
					key = "cpu:" + m["numaid"]
				}
				out[key] = m
			}
			for _, c := range e.children {
				walk(c)
			}
		}
		walk(sys)
		return out
	}
	wa, ga := pciAttrs(want), pciAttrs(got)
	for key, w := range wa {
		for k, v := range w {
			if k == "host_hash" {
				continue // NCCL overwrites it on load
			}
			if ga[key][k] != v {
				t.Errorf("%s %s=%q, NCCL's dump %q", key, k, ga[key][k], v)
			}
		}
	}
}
