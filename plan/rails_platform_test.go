package plan

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/topo/snapshot"
)

// Azure ND H100 v5 puts every GPU and IB VF in its own Hyper-V PCI domain,
// so sysfs shows each pair only across host bridges (NODE); the pairing is
// in the image's /opt/microsoft/ndv5/topo.xml (NCCL_TOPO_FILE), which NCCL
// reads. RailsOf follows that file: rail i is the VF the file puts beside
// the GPU, and a file that pairs them the other way round reverses the map.
func TestRailsOfPlatformTopoFile(t *testing.T) {
	dir, cleanup, err := snapshot.UnpackTemp("azure-ndv5")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	n, err := topo.Discover(topo.Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range n.GPUs {
		if !strings.HasPrefix(g.NearestFrom, "NCCL_TOPO_FILE ") {
			t.Fatalf("capture: GPU%d pairing from %q, want the platform file", g.Index, g.NearestFrom)
		}
	}
	rails, why := RailsOf(n)
	if fmt.Sprint(rails) != "[0 1 2 3 4 5 6 7]" || why != "" {
		t.Fatalf("azure-ndv5 rails = %v (%s), want [0 1 2 3 4 5 6 7] from the platform file", rails, why)
	}

	// The same VM with a topo.xml that pairs VF 0101 with GPU 000c, 0102
	// with 000b, ...: rail 0 (lowest VF bus) is driven by the last GPU.
	xml := filepath.Join(dir, "opt/microsoft/ndv5/topo.xml")
	b, err := os.ReadFile(xml)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for i := 1; i <= 8; i++ {
		s = strings.Replace(s, fmt.Sprintf(`"01%02x:00:00.0"`, i), fmt.Sprintf(`"X%02x"`, 9-i), 1)
	}
	for i := 1; i <= 8; i++ {
		s = strings.Replace(s, fmt.Sprintf(`"X%02x"`, i), fmt.Sprintf(`"01%02x:00:00.0"`, i), 1)
	}
	if err := os.WriteFile(xml, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err = topo.Discover(topo.Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	rails, why = RailsOf(n)
	if fmt.Sprint(rails) != "[7 6 5 4 3 2 1 0]" {
		t.Fatalf("reversed topo.xml: rails = %v (%s), want [7 6 5 4 3 2 1 0]", rails, why)
	}
}
