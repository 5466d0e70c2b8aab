package topo

import (
	"bufio"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/trainrun/trainrun/topo/snapshot"
)

var (
	treesMu   sync.Mutex
	treesRoot string
	trees     = map[string]string{}
)

func TestMain(m *testing.M) {
	var err error
	if treesRoot, err = os.MkdirTemp("", "topo-test-trees-"); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(treesRoot)
	os.Exit(code)
}

// machineTree unpacks a built-in machine once per test binary (the trees are
// read-only for the tests that share them).
func machineTree(tb testing.TB, name string) string {
	tb.Helper()
	treesMu.Lock()
	defer treesMu.Unlock()
	if dir, ok := trees[name]; ok {
		return dir
	}
	dir := filepath.Join(treesRoot, name)
	if err := snapshot.Unpack(name, dir); err != nil {
		tb.Fatal(err)
	}
	trees[name] = dir
	return dir
}

// discoverMachine discovers a built-in machine's tree as if it were /.
func discoverMachine(tb testing.TB, name string) *Node {
	tb.Helper()
	n, err := Discover(Options{Root: machineTree(tb, name)})
	if err != nil {
		tb.Fatalf("Discover(%s): %v", name, err)
	}
	return n
}

type machineWant struct {
	gpus      int
	numa      map[int]string // NUMA node -> CPU list
	gpuNUMA   []int          // per GPU index; -1 = unknown
	nearest   [][]string     // per GPU index: nearest NICs
	nearPath  []PathType     // per GPU index
	ncclNICs  []string       // exact, natural order
	roles     map[string]NICRole
	gidIndex  int      // -1: not a RoCE rail
	socket    []string // NCCL_SOCKET_IFNAME candidates
	source    string
	gpuLink01 string   // GPU0-GPU1 cell
	notes     []string // substrings that must appear in Notes
}

func ids(prefix string, nums ...int) []string {
	var out []string
	for _, n := range nums {
		out = append(out, prefix+strconv.Itoa(n))
	}
	return out
}

func one(names ...string) [][]string {
	var out [][]string
	for _, n := range names {
		out = append(out, []string{n})
	}
	return out
}

func repeatPath(p PathType, n int) []PathType {
	out := make([]PathType, n)
	for i := range out {
		out[i] = p
	}
	return out
}

func roles(role NICRole, names ...string) map[string]NICRole {
	m := map[string]NICRole{}
	for _, n := range names {
		m[n] = role
	}
	return m
}

func merge(ms ...map[string]NICRole) map[string]NICRole {
	out := map[string]NICRole{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

var all8 = ids("mlx5_", 0, 1, 2, 3, 4, 5, 6, 7)

var machineWants = map[string]machineWant{
	"hgx-h100": {
		gpus: 8, numa: map[int]string{0: "0-55,112-167", 1: "56-111,168-223"},
		gpuNUMA:  []int{0, 0, 0, 0, 1, 1, 1, 1},
		nearest:  one("mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"),
		nearPath: repeatPath(PathPIX, 8),
		ncclNICs: ids("mlx5_", 0, 3, 4, 5, 6, 9, 10, 11),
		roles: merge(roles(RoleCompute, ids("mlx5_", 0, 3, 4, 5, 6, 9, 10, 11)...),
			roles(RoleStorage, "mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8")),
		gidIndex: -1, socket: []string{"enp157s0f0np0", "enp27s0f0np0"}, source: "recorded-nvml+sysfs", gpuLink01: "NV18",
	},
	"hgx-h100-ibdown": {
		gpus: 8, numa: map[int]string{0: "0-55,112-167", 1: "56-111,168-223"},
		gpuNUMA:  []int{0, 0, 0, 0, 1, 1, 1, 1},
		nearest:  one("mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"),
		nearPath: repeatPath(PathPIX, 8),
		ncclNICs: []string{},
		roles: merge(roles(RoleCompute, ids("mlx5_", 0, 3, 4, 5, 6, 9, 10, 11)...),
			roles(RoleStorage, "mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8")),
		gidIndex: -1, socket: []string{"enp157s0f0np0", "enp27s0f0np0"}, source: "recorded-nvml+sysfs", gpuLink01: "NV18",
		notes: []string{"no compute NIC has an ACTIVE port"},
	},
	"dgx-a100": {
		gpus: 8,
		numa: map[int]string{0: "0-15,128-143", 1: "16-31,144-159", 2: "32-47,160-175", 3: "48-63,176-191",
			4: "64-79,192-207", 5: "80-95,208-223", 6: "96-111,224-239", 7: "112-127,240-255"},
		gpuNUMA: []int{3, 3, 1, 1, 7, 7, 5, 5},
		nearest: [][]string{{"mlx5_0", "mlx5_1"}, {"mlx5_0", "mlx5_1"}, {"mlx5_2", "mlx5_3"}, {"mlx5_2", "mlx5_3"},
			{"mlx5_4", "mlx5_5"}, {"mlx5_4", "mlx5_5"}, {"mlx5_6", "mlx5_7"}, {"mlx5_6", "mlx5_7"}},
		nearPath: repeatPath(PathPXB, 8),
		ncclNICs: ids("mlx5_", 0, 1, 2, 3, 4, 5, 6, 7),
		roles:    merge(roles(RoleCompute, ids("mlx5_", 0, 1, 2, 3, 4, 5, 6, 7)...), roles(RoleStorage, "mlx5_8", "mlx5_9")),
		gidIndex: -1, socket: []string{"enp226s0f0"}, source: "recorded-nvml+sysfs", gpuLink01: "NV12",
	},
	"h100-reversed": {
		gpus: 8, numa: map[int]string{0: "0-79", 1: "80-159"},
		gpuNUMA:  []int{0, 0, 0, 0, 1, 1, 1, 1},
		nearest:  one("mlx5_8", "mlx5_7", "mlx5_6", "mlx5_5", "mlx5_4", "mlx5_3", "mlx5_2", "mlx5_1"),
		nearPath: repeatPath(PathPIX, 8),
		ncclNICs: ids("mlx5_", 1, 2, 3, 4, 5, 6, 7, 8),
		roles:    merge(roles(RoleCompute, ids("mlx5_", 1, 2, 3, 4, 5, 6, 7, 8)...), roles(RoleStorage, "mlx5_0")),
		gidIndex: -1, socket: []string{"enp225s0np0"}, source: "recorded-nvml+sysfs", gpuLink01: "NV18",
	},
	"azure-ndv5": {
		gpus: 8, numa: map[int]string{0: "0-47", 1: "48-95"},
		gpuNUMA: []int{0, 0, 0, 0, 1, 1, 1, 1},
		// The VM's bus is flat (sysfs: NODE to the 4 NICs of the NUMA node);
		// the pairing comes from /opt/microsoft/ndv5/topo.xml, which
		// /etc/nccl.conf names, as NCCL reads it: GPU 0008:00:00.0 with NIC
		// 0104:00:00.0 (mlx5_ib3) and so on, one each.
		nearest:  one(ids("mlx5_ib", 0, 1, 2, 3, 4, 5, 6, 7)...),
		nearPath: repeatPath(PathPIX, 8),
		ncclNICs: ids("mlx5_ib", 0, 1, 2, 3, 4, 5, 6, 7),
		roles:    merge(roles(RoleCompute, ids("mlx5_ib", 0, 1, 2, 3, 4, 5, 6, 7)...), roles(RoleManagement, "mlx5_an0")),
		gidIndex: -1, socket: []string{"eth0"}, source: "recorded-nvml+sysfs", gpuLink01: "NV18",
		notes: []string{"NCCL_TOPO_FILE"},
	},
	"ibmcloud-h100-vsi": {
		gpus: 8, numa: map[int]string{0: "0-79", 1: "80-159"},
		gpuNUMA:  []int{0, 0, 0, 0, 1, 1, 1, 1},
		nearest:  one("mlx5_7", "mlx5_6", "mlx5_5", "mlx5_4", "mlx5_3", "mlx5_2", "mlx5_1", "mlx5_0"),
		nearPath: repeatPath(PathPIX, 8),
		ncclNICs: ids("mlx5_", 0, 1, 2, 3, 4, 5, 6, 7),
		roles:    roles(RoleCompute, ids("mlx5_", 0, 1, 2, 3, 4, 5, 6, 7)...),
		gidIndex: 3, socket: []string{"enp0s3"}, source: "recorded-nvml+sysfs", gpuLink01: "NV18",
	},
	"h200-kvm-flat": {
		gpus: 8, numa: map[int]string{0: "0-95"},
		gpuNUMA:  []int{-1, -1, -1, -1, -1, -1, -1, -1},
		nearest:  [][]string{all8, all8, all8, all8, all8, all8, all8, all8},
		nearPath: repeatPath(PathPHB, 8),
		ncclNICs: all8,
		roles:    roles(RoleCompute, all8...),
		gidIndex: 3, socket: []string{"enp1s0"}, source: "recorded-nvml+sysfs", gpuLink01: "NV18",
		notes: []string{"NCCL_TOPO_FILE"},
	},
	"h200-kvm-pxb": {
		gpus: 8, numa: map[int]string{0: "0-47", 1: "48-95"},
		gpuNUMA:  []int{0, 0, 0, 0, 1, 1, 1, 1},
		nearest:  one(all8...),
		nearPath: repeatPath(PathPIX, 8),
		ncclNICs: all8,
		roles:    roles(RoleCompute, all8...),
		gidIndex: 3, socket: []string{"enp1s0"}, source: "recorded-nvml+sysfs", gpuLink01: "NV18",
	},
	"hgx-h200-roce": {
		gpus: 8, numa: map[int]string{0: "0-23,96-119", 1: "24-47,120-143", 2: "48-71,144-167", 3: "72-95,168-191"},
		gpuNUMA:  []int{0, 0, 0, 1, 2, 2, 3, 3},
		nearest:  one(all8...),
		nearPath: repeatPath(PathPIX, 8),
		ncclNICs: all8,
		roles:    roles(RoleCompute, all8...),
		gidIndex: 3, socket: []string{"eno1"}, source: "recorded-nvml+sysfs", gpuLink01: "NV18",
	},
	"gb200-nvl72": {
		// Grace Blackwell: GPUs on NVLink-C2C, so PCIe shows no GPU-NIC
		// switch (nvidia-smi prints SYS); pairing is by the Grace NUMA node.
		gpus: 4, numa: graceNUMA(),
		gpuNUMA:  []int{0, 0, 1, 1},
		nearest:  [][]string{ids("mlx5_", 0, 1, 4), ids("mlx5_", 0, 1, 4), ids("mlx5_", 2, 3, 5), ids("mlx5_", 2, 3, 5)},
		nearPath: repeatPath(PathNODE, 4),
		ncclNICs: ids("mlx5_", 0, 1, 2, 3),
		roles:    merge(roles(RoleCompute, ids("mlx5_", 0, 1, 2, 3)...), roles(RoleStorage, "mlx5_4", "mlx5_5")),
		gidIndex: -1, socket: []string{"enP6p3s0f0np0"}, source: "recorded-nvml+sysfs", gpuLink01: "NV18",
		notes: []string{"NVLink-C2C"},
	},
	"h200-nvl": {
		gpus: 8, numa: map[int]string{0: "0-47,96-143", 1: "48-95,144-191"},
		gpuNUMA:  []int{0, 0, 0, 0, 1, 1, 1, 1},
		nearest:  one(all8...),
		nearPath: repeatPath(PathPIX, 8),
		ncclNICs: all8,
		roles:    roles(RoleCompute, all8...),
		gidIndex: -1, socket: []string{"eno1"}, source: "recorded-nvml+sysfs", gpuLink01: "NV6",
	},
	"aws-p4d": {
		gpus: 8, numa: map[int]string{0: "0-23,48-71", 1: "24-47,72-95"},
		gpuNUMA: []int{0, 0, 0, 0, 1, 1, 1, 1},
		nearest: [][]string{{"rdmap16s27"}, {"rdmap16s27"}, {"rdmap32s27"}, {"rdmap32s27"},
			{"rdmap144s27"}, {"rdmap144s27"}, {"rdmap160s27"}, {"rdmap160s27"}},
		nearPath: repeatPath(PathPHB, 8),
		ncclNICs: []string{"rdmap16s27", "rdmap32s27", "rdmap144s27", "rdmap160s27"},
		roles:    roles(RoleCompute, "rdmap16s27", "rdmap32s27", "rdmap144s27", "rdmap160s27"),
		gidIndex: -1, socket: []string{"eth0"}, source: "recorded-nvml+sysfs", gpuLink01: "NV12",
		notes: []string{"NCCL_TOPO_FILE"},
	},
}

// graceNUMA is a GB200 tray's NUMA layout: the two Graces' cores, then
// nodes 2-33 without CPUs (8 per GPU for its memory).
func graceNUMA() map[int]string {
	m := map[int]string{0: "0-71", 1: "72-143"}
	for i := 2; i < 34; i++ {
		m[i] = ""
	}
	return m
}

func TestEveryBuiltInMachineHasExpectations(t *testing.T) {
	for _, name := range snapshot.Names() {
		if _, ok := machineWants[name]; !ok {
			t.Errorf("built-in machine %s has no expectations in machineWants", name)
		}
	}
	if len(snapshot.Names()) < 6 {
		t.Errorf("want at least 6 built-in machines, have %v", snapshot.Names())
	}
}

func TestDiscoverMachines(t *testing.T) {
	for _, name := range snapshot.Names() {
		want, ok := machineWants[name]
		if !ok {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			n := discoverMachine(t, name)
			if len(n.GPUs) != want.gpus {
				t.Fatalf("%d GPUs, want %d", len(n.GPUs), want.gpus)
			}
			if n.Source != want.source {
				t.Errorf("source %q, want %q", n.Source, want.source)
			}
			gotNUMA := map[int]string{}
			for _, nn := range n.NUMANodes {
				gotNUMA[nn.ID] = nn.CPUs.String()
			}
			if !reflect.DeepEqual(gotNUMA, want.numa) {
				t.Errorf("NUMA layout %v, want %v", gotNUMA, want.numa)
			}
			for i, g := range n.GPUs {
				if g.Index != i {
					t.Errorf("GPU %d has index %d", i, g.Index)
				}
				numa := -1
				if g.NUMANode != nil {
					numa = *g.NUMANode
				}
				if numa != want.gpuNUMA[i] {
					t.Errorf("GPU%d NUMA %d, want %d", i, numa, want.gpuNUMA[i])
				}
				if want.numa != nil && numa >= 0 && g.LocalCPUs.String() != want.numa[numa] {
					t.Errorf("GPU%d local CPUs %s, want those of node %d (%s)", i, g.LocalCPUs, numa, want.numa[numa])
				}
				if !reflect.DeepEqual(g.NearestNICs, want.nearest[i]) || g.NearestPath != want.nearPath[i] {
					t.Errorf("GPU%d nearest %v (%s), want %v (%s)", i, g.NearestNICs, g.NearestPath, want.nearest[i], want.nearPath[i])
				}
			}
			if got := n.NCCLNICs(); !reflect.DeepEqual(got, want.ncclNICs) {
				t.Errorf("NCCL NICs %v, want %v", got, want.ncclNICs)
			}
			for _, d := range n.RDMA {
				if r, ok := want.roles[d.Name]; !ok {
					t.Errorf("unexpected RDMA device %s", d.Name)
				} else if d.Role != r {
					t.Errorf("%s role %s (%s), want %s", d.Name, d.Role, d.RoleReason, r)
				}
			}
			if len(n.RDMA) != len(want.roles) {
				t.Errorf("%d RDMA devices, want %d", len(n.RDMA), len(want.roles))
			}
			idx, _, ok := n.RoCEGIDIndex()
			if (want.gidIndex >= 0) != ok || (ok && idx != want.gidIndex) {
				t.Errorf("RoCE GID index %d (%v), want %d", idx, ok, want.gidIndex)
			}
			if got := n.SocketIfNames(); !reflect.DeepEqual(got, want.socket) {
				t.Errorf("socket interfaces %v, want %v", got, want.socket)
			}
			if got := n.GPULinks[0][1].String(); got != want.gpuLink01 {
				t.Errorf("GPU0-GPU1 %s, want %s", got, want.gpuLink01)
			}
			for _, s := range want.notes {
				if !strings.Contains(strings.Join(n.Notes, "\n"), s) {
					t.Errorf("notes %q lack %q", n.Notes, s)
				}
			}
		})
	}
}

// The matrix discovery computes must equal what nvidia-smi printed on the
// real machine, cell by cell, wherever the capture has the cell.
func TestMatrixMatchesNvidiaSmi(t *testing.T) {
	cases := []struct{ machine, file string }{
		{"dgx-a100", "testdata/nvidia-smi/dgx-a100-8gpu-10nic.txt"},
		{"h100-reversed", "testdata/nvidia-smi/h100-nv18-9nic-reversed-order-nccl-1453.partial.tsv"},
	}
	for _, c := range cases {
		t.Run(c.machine, func(t *testing.T) {
			n := discoverMachine(t, c.machine)
			rows, cols := readSmiMatrix(t, c.file)
			cell := func(r string, col int) string {
				kind, idx := r[:3], atoiT(t, r[3:])
				switch {
				case kind == "GPU" && col < len(n.GPUs):
					return n.GPULinks[idx][col].String()
				case kind == "GPU":
					return n.RDMA[col-len(n.GPUs)].GPUPaths[idx].String()
				case col < len(n.GPUs):
					return n.RDMA[idx].GPUPaths[col].String()
				default:
					return n.NICLinks[idx][col-len(n.GPUs)].String()
				}
			}
			checked := 0
			for _, r := range rows {
				for col, want := range r.cells {
					if col >= len(cols) {
						break
					}
					if got := cell(r.name, col); got != want {
						t.Errorf("%s-%s: discovered %s, nvidia-smi %s", r.name, cols[col], got, want)
					}
					checked++
				}
				if strings.HasPrefix(r.name, "GPU") && r.cpus != "" {
					g := n.GPUs[atoiT(t, r.name[3:])]
					if g.LocalCPUs.String() != r.cpus || numaString(g.NUMANode) != r.numa {
						t.Errorf("%s affinity %s / NUMA %s, nvidia-smi %s / %s", r.name, g.LocalCPUs, numaString(g.NUMANode), r.cpus, r.numa)
					}
				}
			}
			if checked < 100 {
				t.Fatalf("only %d cells compared", checked)
			}
		})
	}
}

var smiDev = regexp.MustCompile(`^(GPU|NIC)[0-9]+$`)

type smiRow struct {
	name       string
	cells      []string
	cpus, numa string
}

// readSmiMatrix reads `nvidia-smi topo -m` output (tab or space separated).
func readSmiMatrix(t *testing.T, path string) ([]smiRow, []string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cols []string
	var rows []smiRow
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if cols == nil && fields[0] == "GPU0" {
			for _, c := range fields {
				if smiDev.MatchString(c) {
					cols = append(cols, c)
				}
			}
			continue
		}
		if !smiDev.MatchString(fields[0]) {
			continue
		}
		r := smiRow{name: fields[0]}
		rest := fields[1:]
		n := len(cols)
		if len(rest) < n {
			n = len(rest)
		}
		r.cells = rest[:n]
		if len(rest) >= len(cols)+2 {
			r.cpus, r.numa = rest[len(cols)], rest[len(cols)+1]
		}
		rows = append(rows, r)
	}
	return rows, cols
}

func atoiT(t *testing.T, s string) int {
	v := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not a number: %q", s)
		}
		v = v*10 + int(c-'0')
	}
	return v
}

// ibdev2netdev on the real HGX H100 named each mlx5 device's netdev and
// whether it was up; discovery of the captured tree must agree.
func TestIbdev2netdevAgrees(t *testing.T) {
	n := discoverMachine(t, "hgx-h100-ibdown")
	f, err := os.Open(filepath.Join("testdata", "ib", "h100-ibdev2netdev-8ib-plus-2x-dualport-eth.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	state := map[string]string{}
	for _, ni := range n.NetIfs {
		state[ni.Name] = ni.OperState
	}
	sc := bufio.NewScanner(f)
	seen := 0
	for sc.Scan() {
		fld := strings.Fields(sc.Text())
		if len(fld) < 6 || fld[3] != "==>" {
			continue
		}
		dev, netdev, up := fld[0], fld[4], fld[5] == "(Up)"
		d := n.RDMAByName(dev)
		if d == nil {
			t.Errorf("%s: not discovered", dev)
			continue
		}
		if d.Ports[0].NetDev != netdev {
			t.Errorf("%s: netdev %s, ibdev2netdev says %s", dev, d.Ports[0].NetDev, netdev)
		}
		if (state[netdev] == "up") != up {
			t.Errorf("%s: operstate %s, ibdev2netdev says %s", netdev, state[netdev], fld[5])
		}
		wantLayer := "InfiniBand"
		if strings.Contains(sc.Text(), "ethernet") {
			wantLayer = "Ethernet"
		}
		if d.Ports[0].LinkLayer != wantLayer {
			t.Errorf("%s: link layer %s, capture says %s", dev, d.Ports[0].LinkLayer, wantLayer)
		}
		seen++
	}
	if seen != 12 {
		t.Fatalf("compared %d devices, want 12", seen)
	}
}
