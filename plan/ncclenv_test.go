package plan

import (
	"fmt"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/topo"
)

// Hand-built node models of the public machines in ../shared/fixtures (the
// lead's topo package will capture full sysfs trees; these carry only the
// facts the NCCL environment depends on, each traced to its fixture). Roles
// follow topo's rules (topo/roles.go): the compute rail is the most common
// (link layer, rate) among NICs sharing a PCIe switch with a GPU; other link
// layers are storage/management; rail NICs far from every GPU are storage.

type gpuSpec struct {
	bus string
	sm  int
}

type nicSpec struct {
	name, bus      string
	vendor, device string
	product        string
	layer, state   string
	rate           float64
	role           topo.NICRole
	near           int           // GPU index it shares a switch with; -1 none
	nearPath       topo.PathType // PIX or PXB for near; others get SYS
	netdev         string
	gid            *int
	ipv4           string
	ports          int
}

func intp(i int) *int { return &i }

func mkNode(name string, gpus []gpuSpec, nics []nicSpec, ifs []topo.NetInterface) *topo.Node {
	n := &topo.Node{Hostname: name}
	for i, g := range gpus {
		n.GPUs = append(n.GPUs, topo.GPU{Index: i, BusID: g.bus, SM: g.sm, NUMANode: intp(i * 2 / len(gpus)), NearestPath: topo.PathSYS})
	}
	for _, c := range nics {
		d := topo.RDMADevice{Name: c.name, BusID: c.bus, Vendor: c.vendor, PCIDevice: c.device, Product: c.product, Role: c.role, RoleReason: "fixture"}
		ports := max(c.ports, 1)
		for p := 1; p <= ports; p++ {
			d.Ports = append(d.Ports, topo.RDMAPort{Number: p, LinkLayer: c.layer, State: c.state, RateGbps: c.rate, NetDev: c.netdev, RoCEv2GIDIndex: c.gid, RoCEv2IPv4: c.ipv4})
		}
		for gi := range gpus {
			path := topo.PathSYS
			if gi == c.near {
				path = c.nearPath
			}
			d.GPUPaths = append(d.GPUPaths, path)
		}
		if c.role == topo.RoleCompute {
			for _, p := range d.Ports {
				if p.Active() {
					d.NCCL = true
				}
			}
		}
		if c.near >= 0 && c.nearPath < n.GPUs[c.near].NearestPath {
			n.GPUs[c.near].NearestPath = c.nearPath
		}
		n.RDMA = append(n.RDMA, d)
	}
	n.NetIfs = ifs
	return n
}

func lo() topo.NetInterface {
	return topo.NetInterface{Name: "lo", OperState: "unknown", Kind: topo.NetLoopback, IPv4: []string{"127.0.0.1"}}
}

func docker0() topo.NetInterface {
	return topo.NetInterface{Name: "docker0", OperState: "up", Kind: topo.NetBridge, IPv4: []string{"172.17.0.1"}}
}

func nic(name, ip string, role topo.NICRole) topo.NetInterface {
	ni := topo.NetInterface{Name: name, OperState: "up", Kind: topo.NetPhysical, Role: role, Socket: role != topo.RoleCompute}
	if ip != "" {
		ni.IPv4 = []string{ip}
	}
	return ni
}

// hgxH100Interleaved is fixtures/ib/h100-ibdev2netdev-8ib-plus-2x-dualport-eth.txt
// (imbue-ai/cluster-health#4): 8 ConnectX-7 InfiniBand ports and two
// dual-port ConnectX-6 Ethernet cards interleaved in mlx5 numbering
// (mlx5_1, _2, _7, _8 are Ethernet). PCI buses come from the netdev names
// (ibp26s0 = bus 0x1a). GPU bus ids are not in the fixture: one GPU is put
// under each CX-7's switch (bus−1), as on HGX boards. ibUp false keeps the
// capture's state (every IB port Down, the two CX-6 port-1s Up).
func hgxH100Interleaved(ibUp bool) *topo.Node {
	ibState := "DOWN"
	if ibUp {
		ibState = "ACTIVE"
	}
	ib := []struct {
		name string
		bus  int
	}{{"mlx5_0", 0x1a}, {"mlx5_3", 0x3c}, {"mlx5_4", 0x4d}, {"mlx5_5", 0x5e}, {"mlx5_6", 0x9c}, {"mlx5_9", 0xbc}, {"mlx5_10", 0xcc}, {"mlx5_11", 0xdc}}
	var gpus []gpuSpec
	var nics []nicSpec
	for i, d := range ib {
		gpus = append(gpus, gpuSpec{bus: fmt.Sprintf("0000:%02x:00.0", d.bus-1), sm: 90})
		nics = append(nics, nicSpec{name: d.name, bus: fmt.Sprintf("0000:%02x:00.0", d.bus), vendor: "0x15b3", device: "0x1021", product: "ConnectX-7",
			layer: "InfiniBand", state: ibState, rate: 400, role: topo.RoleCompute, near: i, nearPath: topo.PathPIX, netdev: fmt.Sprintf("ibp%ds0", d.bus)})
	}
	eth := []struct {
		name, bus, netdev, state string
	}{{"mlx5_1", "0000:1b:00.0", "enp27s0f0np0", "ACTIVE"}, {"mlx5_2", "0000:1b:00.1", "enp27s0f1np1", "DOWN"},
		{"mlx5_7", "0000:9d:00.0", "enp157s0f0np0", "ACTIVE"}, {"mlx5_8", "0000:9d:00.1", "enp157s0f1np1", "DOWN"}}
	for _, e := range eth {
		nics = append(nics, nicSpec{name: e.name, bus: e.bus, vendor: "0x15b3", device: "0x101d", product: "ConnectX-6 Dx",
			layer: "Ethernet", state: e.state, rate: 100, role: topo.RoleStorage, near: -1, netdev: e.netdev})
	}
	n := mkNode("hgx-h100", gpus, nics, []topo.NetInterface{lo(), docker0(),
		nic("enp27s0f0np0", "10.10.0.11/16", topo.RoleStorage), nic("enp157s0f0np0", "10.20.0.11/16", topo.RoleStorage)})
	n.NVSwitches = []topo.NVSwitch{{BusID: "0000:05:00.0"}, {BusID: "0000:06:00.0"}, {BusID: "0000:07:00.0"}, {BusID: "0000:08:00.0"}}
	return n
}

// h100Reversed is fixtures/nvidia-smi-topo/h100-nv18-9nic-reversed-order-nccl-1453.partial.tsv
// (NVIDIA/nccl#1453): GPU0 is PIX to NIC8, GPU1 to NIC7, … GPU7 to NIC1;
// NIC0 is SYS to every GPU and NIC. NIC k is taken as mlx5_k (nvidia-smi's
// legend order; the legend itself was not captured). Each NIC's bus is put
// next to its GPU's, so in PCI order the rails run mlx5_8 … mlx5_1.
func h100Reversed() *topo.Node {
	var gpus []gpuSpec
	var nics []nicSpec
	for g := 0; g < 8; g++ {
		bus := 0x18 + 0x10*g
		gpus = append(gpus, gpuSpec{bus: fmt.Sprintf("0000:%02x:00.0", bus), sm: 90})
		k := 8 - g
		nics = append(nics, nicSpec{name: fmt.Sprintf("mlx5_%d", k), bus: fmt.Sprintf("0000:%02x:00.0", bus+1), vendor: "0x15b3", device: "0x1021", product: "ConnectX-7",
			layer: "InfiniBand", state: "ACTIVE", rate: 400, role: topo.RoleCompute, near: g, nearPath: topo.PathPIX})
	}
	// NIC0: same kind, far from every GPU (SYS): storage by topo's rule 4.
	nics = append(nics, nicSpec{name: "mlx5_0", bus: "0000:02:00.0", vendor: "0x15b3", device: "0x1021", product: "ConnectX-7",
		layer: "InfiniBand", state: "ACTIVE", rate: 400, role: topo.RoleStorage, near: -1})
	return mkNode("h100-rev", gpus, nics, []topo.NetInterface{lo(), nic("eno1", "192.168.1.20/24", topo.RoleManagement)})
}

// azureNDv5 is fixtures/nccl-topo-xml/azure-ndv5-topo.xml (Azure/azhpc-images):
// 8 H100 at 0001..000c:00:00.0 and 8 InfiniBand NICs (class 0x020700) at
// 0101..0108:00:00.0 on a Hyper-V flat bus; the XML pairs GPU i with NIC i
// under fake switches ffff:ff:0N.0, which the VM's own sysfs does not show
// (numa_node -1, no switches). The IB devices are mlx5_ib0..7 and eth0 is the
// accelerated-networking VF (azhpc-images names; eth0 from the health check
// tests/health_checks/NDv4/test-nccl.sh). /etc/nccl.conf is
// fixtures/nccl-env/azure-ndv5-etc-nccl.conf.
func azureNDv5() *topo.Node {
	gpuBus := []string{"0001", "0002", "0003", "0008", "0009", "000a", "000b", "000c"}
	var gpus []gpuSpec
	var nics []nicSpec
	for i := 0; i < 8; i++ {
		gpus = append(gpus, gpuSpec{bus: gpuBus[i] + ":00:00.0", sm: 90})
		nics = append(nics, nicSpec{name: fmt.Sprintf("mlx5_ib%d", i), bus: fmt.Sprintf("01%02x:00:00.0", i+1), vendor: "0x15b3", device: "0x101e", product: "ConnectX-7 VF",
			layer: "InfiniBand", state: "ACTIVE", rate: 400, role: topo.RoleCompute, near: -1})
	}
	n := mkNode("ndv5", gpus, nics, []topo.NetInterface{lo(), docker0(), nic("eth0", "10.0.0.4/24", topo.RoleManagement)})
	for i := range n.GPUs {
		n.GPUs[i].NUMANode = nil // Hyper-V guest: numa_node -1
	}
	return n
}

// awsP4d is fixtures/sysfs/aws-p4d-lspci-flat-aws-ofi-nccl-64.partial.txt and
// nccl-topo-xml/aws-p4d-24xl-topo.xml: 8 A100 (sm_80) and 4 EFA devices
// (vendor 0x1d0f, device 0xefa0, class 0x020000) on a flat bus; NVSwitches
// hidden from the VM. ens32 is the primary ENI.
func awsP4d() *topo.Node {
	var gpus []gpuSpec
	var nics []nicSpec
	for i := 0; i < 8; i++ {
		gpus = append(gpus, gpuSpec{bus: fmt.Sprintf("0000:%02x:%02x.0", 0x10+0x10*(i/2), 0x1c+i%2), sm: 80})
	}
	for i := 0; i < 4; i++ {
		nics = append(nics, nicSpec{name: fmt.Sprintf("rdmap%ds27", 16+16*i), bus: fmt.Sprintf("0000:%02x:1b.0", 0x10+0x10*i), vendor: "0x1d0f", device: "0xefa0", product: "EFA",
			layer: "Ethernet", state: "ACTIVE", rate: 100, role: topo.RoleCompute, near: -1})
	}
	n := mkNode("p4d", gpus, nics, []topo.NetInterface{lo(), docker0(), nic("ens32", "172.31.10.5/20", topo.RoleManagement)})
	for i := range n.GPUs {
		n.GPUs[i].NUMANode = nil
		n.GPUs[i].NVLinks = []topo.NVLink{{RemoteBusID: "fffffff:ff:ff.0", RemoteType: "unknown", Count: 12}}
	}
	return n
}

// ibmH100VSI is fixtures/nccl-topo-xml/ibmcloud-h100-vsi-topo.xml (IBM Cloud
// gx3d-160x1792x8h100): 8 H100 and 8 ConnectX-7 VFs (0x15b3:0x101e, class
// 0x020000: RoCE, 200 Gb/s) named mlx5_7 … mlx5_0 in bus order, each under
// a virtual bridge with its GPU. GID index 3 is where mlx5 puts the RoCE v2
// GID of a port's first IPv4 address (0: v1 link-local, 1: v2 link-local,
// 2: v1 IPv4, 3: v2 IPv4): the fixture has no gid_attrs capture, this is the
// driver's usual layout. eth0 carries the VSI's primary address.
func ibmH100VSI() *topo.Node {
	nicBus := []string{"a3", "ad", "b7", "c1", "cb", "d5", "df", "e9"}
	gpuBus := []string{"a4", "ae", "b8", "c2", "cc", "d6", "e0", "ea"}
	var gpus []gpuSpec
	var nics []nicSpec
	for i := 0; i < 8; i++ {
		gpus = append(gpus, gpuSpec{bus: "0000:" + gpuBus[i] + ":00.0", sm: 90})
		nics = append(nics, nicSpec{name: fmt.Sprintf("mlx5_%d", 7-i), bus: "0000:" + nicBus[i] + ":00.0", vendor: "0x15b3", device: "0x101e", product: "ConnectX-7 VF",
			layer: "Ethernet", state: "ACTIVE", rate: 200, role: topo.RoleCompute, near: i, nearPath: topo.PathPIX,
			netdev: fmt.Sprintf("enp%ds0", 163+10*i), gid: intp(3), ipv4: fmt.Sprintf("10.%d.0.5", 240+i)})
	}
	return mkNode("ibm-h100", gpus, nics, []topo.NetInterface{lo(), nic("eth0", "10.240.64.5/24", topo.RoleManagement)})
}

// dgxA100 is fixtures/nvidia-smi-topo/dgx-a100-8gpu-10nic.txt: 8 A100 (NV12,
// sm_80) with mlx5_0..7 (HDR InfiniBand) two per PCIe switch with two GPUs
// (PXB), and mlx5_8/9 a dual-port card far from every GPU (SYS; the storage
// HCA on NUMA 0). Six NVSwitches (nccl-topo-xml/dgx-a100-nccl-1505).
func dgxA100() *topo.Node {
	var gpus []gpuSpec
	var nics []nicSpec
	gbus := []int{0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd}
	nbus := []int{0x0c, 0x12, 0x4b, 0x54, 0x8d, 0x94, 0xba, 0xcc}
	for i := 0; i < 8; i++ {
		gpus = append(gpus, gpuSpec{bus: fmt.Sprintf("0000:%02x:00.0", gbus[i]), sm: 80})
		nics = append(nics, nicSpec{name: fmt.Sprintf("mlx5_%d", i), bus: fmt.Sprintf("0000:%02x:00.0", nbus[i]), vendor: "0x15b3", device: "0x101b", product: "ConnectX-6",
			layer: "InfiniBand", state: "ACTIVE", rate: 200, role: topo.RoleCompute, near: i, nearPath: topo.PathPXB, netdev: fmt.Sprintf("ib%d", i)})
	}
	for i, bus := range []string{"0000:e1:00.0", "0000:e1:00.1"} {
		nics = append(nics, nicSpec{name: fmt.Sprintf("mlx5_%d", 8+i), bus: bus, vendor: "0x15b3", device: "0x101b", product: "ConnectX-6",
			layer: "InfiniBand", state: "ACTIVE", rate: 200, role: topo.RoleStorage, near: -1})
	}
	n := mkNode("dgx-a100", gpus, nics, []topo.NetInterface{lo(), docker0(), nic("enp226s0", "10.1.1.5/24", topo.RoleManagement)})
	for i := 0; i < 6; i++ {
		n.NVSwitches = append(n.NVSwitches, topo.NVSwitch{BusID: fmt.Sprintf("0000:%02x:00.0", 0xc4+i)})
	}
	// Each NIC is PXB to both GPUs of its switch pair (GPU 2k, 2k+1).
	for i := range n.RDMA[:8] {
		n.RDMA[i].GPUPaths[i^1] = topo.PathPXB
	}
	return n
}

func envFor(t *testing.T, node *topo.Node, in EnvInput) *Env {
	t.Helper()
	rails, _ := RailsOf(node)
	nodes := []PlaceNode{{Name: "n1", Rails: rails}, {Name: "n2", Rails: rails}}
	p, err := Place(PlaceInput{Layout: Layout{TP: 8, DP: 2}, GPUsPerNode: 8, Nodes: nodes, Traffic: Traffic{TP: 1, DP: 1}})
	if err != nil {
		t.Fatal(err)
	}
	in.Node, in.Placement, in.Plan = node, p, Layout{TP: 8, DP: 2}
	if in.MasterPort == 0 {
		in.MasterPort = 29500
	}
	e, err := RankEnv(in)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type wantVar struct {
	value  string // "" = not injected
	source EnvSource
}

func TestRankEnvFixtureMachines(t *testing.T) {
	cases := []struct {
		name  string
		node  *topo.Node
		in    EnvInput
		want  map[string]wantVar
		notes []string // substrings expected among the notes
	}{
		{
			// All 8 CX-7 InfiniBand ports, exact names, in PCI order; the
			// CX-6 Ethernet ports (mlx5_1/2/7/8) are the front-end, not
			// compute, even though two of them are up. Bootstrap over the
			// interface holding the node's Slurm address.
			name: "HGX H100, 8 IB + 4 Ethernet interleaved, IB up",
			node: hgxH100Interleaved(true),
			in:   EnvInput{NodeAddrs: []string{"10.10.0.11"}},
			want: map[string]wantVar{
				"NCCL_IB_HCA":                     {"=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1", SrcTrainrun},
				"NCCL_SOCKET_IFNAME":              {"=enp27s0f0np0", SrcTrainrun},
				"NCCL_IB_GID_INDEX":               {"", SrcTrainrun},  // InfiniBand: no GID index
				"NCCL_NVLS_ENABLE":                {"1", SrcTrainrun}, // NVSwitch + sm_90
				"NCCL_TOPO_FILE":                  {"", SrcTrainrun},  // bare metal: NCCL sees the switches
				"CUDA_DEVICE_ORDER":               {"PCI_BUS_ID", SrcTrainrun},
				"TORCH_NCCL_ASYNC_ERROR_HANDLING": {"1", SrcTrainrun},
			},
		},
		{
			// As captured: every IB port Down. Nothing to list: the up
			// Ethernet ports must not be offered to NCCL as compute.
			name: "HGX H100 as captured, IB ports down",
			node: hgxH100Interleaved(false),
			in:   EnvInput{NodeAddrs: []string{"10.10.0.11"}},
			want: map[string]wantVar{
				"NCCL_IB_HCA":        {"", SrcTrainrun},
				"NCCL_SOCKET_IFNAME": {"=enp27s0f0np0", SrcTrainrun},
			},
			notes: []string{"no active compute-fabric port", "mlx5_0:1 (port down)"},
		},
		{
			// The 8 rail NICs in PCI order, which runs mlx5_8 … mlx5_1;
			// mlx5_0 (SYS to every GPU) is not a rail. The node's address
			// resolves to 127.0.1.1 (Debian /etc/hosts): lo is refused and
			// the management NIC is used instead.
			name: "H100 with NIC order reversed against GPUs",
			node: h100Reversed(),
			in:   EnvInput{NodeAddrs: []string{"127.0.1.1"}},
			want: map[string]wantVar{
				"NCCL_IB_HCA":        {"=mlx5_8:1,mlx5_7:1,mlx5_6:1,mlx5_5:1,mlx5_4:1,mlx5_3:1,mlx5_2:1,mlx5_1:1", SrcTrainrun},
				"NCCL_SOCKET_IFNAME": {"=eno1", SrcTrainrun},
			},
		},
		{
			// Azure's /etc/nccl.conf sets NCCL_TOPO_FILE (the flat Hyper-V
			// bus needs it): kept, not injected, since the environment would
			// override the file. The IB VFs are the compute fabric.
			name: "Azure ND H100 v5",
			node: azureNDv5(),
			in: EnvInput{NodeAddrs: []string{"10.0.0.4"}, NCCLConf: map[string]string{
				"NCCL_IB_PCI_RELAXED_ORDERING": "1", "NCCL_TOPO_FILE": "/opt/microsoft/ndv5/topo.xml", "NCCL_IGNORE_CPU_AFFINITY": "1"}},
			want: map[string]wantVar{
				"NCCL_IB_HCA":        {"=mlx5_ib0:1,mlx5_ib1:1,mlx5_ib2:1,mlx5_ib3:1,mlx5_ib4:1,mlx5_ib5:1,mlx5_ib6:1,mlx5_ib7:1", SrcTrainrun},
				"NCCL_SOCKET_IFNAME": {"=eth0", SrcTrainrun},
				"NCCL_TOPO_FILE":     {"", SrcNCCLConf},
			},
		},
		{
			// EFA: NCCL_IB_HCA is left unset (aws-ofi-nccl chooses EFA
			// devices; NCCL's verbs transport is not used), and so is
			// NCCL_TOPO_FILE (the plugin installs p4d-24xl-topo.xml when
			// unset). A100: no NVLS.
			name: "AWS p4d.24xlarge with EFA",
			node: awsP4d(),
			in:   EnvInput{NodeAddrs: []string{"172.31.10.5"}},
			want: map[string]wantVar{
				"NCCL_IB_HCA":        {"", SrcTrainrun},
				"NCCL_SOCKET_IFNAME": {"=ens32", SrcTrainrun},
				"NCCL_TOPO_FILE":     {"", SrcPlugin},
				"NCCL_NVLS_ENABLE":   {"", SrcTrainrun},
			},
		},
		{
			// RoCE: the 8 VFs (mlx5_7 … mlx5_0 in bus order) and GID 3. The
			// IBM doc's tested environment sets NCCL_IB_HCA and
			// NCCL_TOPO_FILE itself: both are kept and reported.
			name: "IBM Cloud H100 VSI, RoCE, user env from IBM's doc",
			node: ibmH100VSI(),
			in: EnvInput{NodeAddrs: []string{"10.240.64.5"}, UserEnv: map[string]string{
				"NCCL_IB_HCA":    "mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7",
				"NCCL_TOPO_FILE": "/opt/ibm/topo.xml",
			}},
			want: map[string]wantVar{
				"NCCL_IB_HCA":        {"", SrcUser},
				"NCCL_SOCKET_IFNAME": {"=eth0", SrcTrainrun},
				"NCCL_IB_GID_INDEX":  {"3", SrcTrainrun},
			},
			notes: []string{"NCCL_IB_HCA=mlx5_0,mlx5_1"},
		},
		{
			name: "IBM Cloud H100 VSI, RoCE, clean environment",
			node: ibmH100VSI(),
			in:   EnvInput{NodeAddrs: []string{"10.240.64.5"}},
			want: map[string]wantVar{
				"NCCL_IB_HCA":       {"=mlx5_7:1,mlx5_6:1,mlx5_5:1,mlx5_4:1,mlx5_3:1,mlx5_2:1,mlx5_1:1,mlx5_0:1", SrcTrainrun},
				"NCCL_IB_GID_INDEX": {"3", SrcTrainrun},
			},
		},
		{
			// The 8 compute HCAs; mlx5_8/9 (storage, SYS to every GPU) are
			// left out. A100's NVSwitch has no SHARP: NVLS not set.
			name: "DGX A100",
			node: dgxA100(),
			in:   EnvInput{NodeAddrs: []string{"10.1.1.5"}},
			want: map[string]wantVar{
				"NCCL_IB_HCA":        {"=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1", SrcTrainrun},
				"NCCL_SOCKET_IFNAME": {"=enp226s0", SrcTrainrun},
				"NCCL_NVLS_ENABLE":   {"", SrcTrainrun},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := envFor(t, tc.node, tc.in)
			for k, w := range tc.want {
				v := e.Var(k)
				if v == nil {
					t.Errorf("%s: missing", k)
					continue
				}
				got := ""
				if v.Inject {
					got = v.Value
				}
				if got != w.value || v.Source != w.source {
					t.Errorf("%s = %q (inject %v, source %s), want %q from %s; why: %s", k, v.Value, v.Inject, v.Source, w.value, w.source, v.Why)
				}
				if v.Why == "" {
					t.Errorf("%s has no explanation", k)
				}
			}
			for _, s := range tc.notes {
				if !strings.Contains(strings.Join(e.Notes, "\n"), s) {
					t.Errorf("notes %q lack %q", e.Notes, s)
				}
			}
			for _, v := range e.Injected() {
				if debugOnly[v.Key] {
					t.Errorf("debug-only %s injected without policy", v.Key)
				}
			}
		})
	}
}

func TestRankEnvPrecedence(t *testing.T) {
	node := hgxH100Interleaved(true)
	cases := []struct {
		name   string
		in     EnvInput
		key    string
		value  string
		inject bool
		source EnvSource
	}{
		{"user's value kept", EnvInput{UserEnv: map[string]string{"NCCL_IB_HCA": "=mlx5_0:1"}}, "NCCL_IB_HCA", "=mlx5_0:1", false, SrcUser},
		{"nccl.conf kept", EnvInput{NCCLConf: map[string]string{"NCCL_SOCKET_IFNAME": "eth9"}, NodeAddrs: []string{"10.10.0.11"}}, "NCCL_SOCKET_IFNAME", "eth9", false, SrcNCCLConf},
		{"user beats nccl.conf", EnvInput{UserEnv: map[string]string{"NCCL_NVLS_ENABLE": "0"}, NCCLConf: map[string]string{"NCCL_NVLS_ENABLE": "1"}}, "NCCL_NVLS_ENABLE", "0", false, SrcUser},
		{"trainrun wins by policy", EnvInput{UserEnv: map[string]string{"NCCL_IB_HCA": "mlx5"}, Policy: NCCLPolicy{TrainrunWins: true}}, "NCCL_IB_HCA",
			"=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1", true, SrcTrainrun},
		{"policy force beats user", EnvInput{UserEnv: map[string]string{"NCCL_IB_HCA": "mlx5"}, Policy: NCCLPolicy{Force: map[string]string{"NCCL_IB_HCA": "=mlx5_0:1"}}}, "NCCL_IB_HCA", "=mlx5_0:1", true, SrcPolicyForce},
		{"policy default over computed", EnvInput{Policy: NCCLPolicy{Defaults: map[string]string{"NCCL_NVLS_ENABLE": "0"}}}, "NCCL_NVLS_ENABLE", "0", true, SrcPolicyDefault},
		{"policy default yields to user", EnvInput{UserEnv: map[string]string{"NCCL_NVLS_ENABLE": "1"}, Policy: NCCLPolicy{Defaults: map[string]string{"NCCL_NVLS_ENABLE": "0"}}}, "NCCL_NVLS_ENABLE", "1", false, SrcUser},
		{"debug variable only by policy", EnvInput{Policy: NCCLPolicy{Force: map[string]string{"NCCL_ALGO": "Ring"}}}, "NCCL_ALGO", "Ring", true, SrcPolicyForce},
		{"fabric tcp by policy disables IB", EnvInput{Policy: NCCLPolicy{Fabric: "tcp"}}, "NCCL_IB_DISABLE", "1", true, SrcTrainrun},
		{"fabric tcp lists no HCA", EnvInput{Policy: NCCLPolicy{Fabric: "tcp"}}, "NCCL_IB_HCA", "", false, SrcTrainrun},
		{"launcher var replaces a stale RANK", EnvInput{Rank: 9, UserEnv: map[string]string{"RANK": "0"}}, "RANK", "9", true, SrcTrainrun},
		{"user's MASTER_PORT kept", EnvInput{UserEnv: map[string]string{"MASTER_PORT": "12345"}}, "MASTER_PORT", "12345", false, SrcUser},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := envFor(t, node, tc.in)
			v := e.Var(tc.key)
			if v == nil {
				t.Fatalf("%s missing", tc.key)
			}
			if v.Value != tc.value || v.Inject != tc.inject || v.Source != tc.source {
				t.Fatalf("%s = %q inject=%v source=%s, want %q inject=%v source=%s (why: %s)", tc.key, v.Value, v.Inject, v.Source, tc.value, tc.inject, tc.source, v.Why)
			}
		})
	}
	// Without policy no debug-only variable ever appears.
	e := envFor(t, node, EnvInput{})
	for k := range debugOnly {
		if e.Var(k) != nil {
			t.Errorf("%s present without policy", k)
		}
	}
}

func TestRankEnvLauncherVars(t *testing.T) {
	node := hgxH100Interleaved(true)
	e := envFor(t, node, EnvInput{Rank: 11, MasterAddr: "10.10.0.11", MasterPort: 29400, PlanPath: "/run/plan.json"})
	want := map[string]string{
		"MASTER_ADDR": "10.10.0.11", "MASTER_PORT": "29400", "WORLD_SIZE": "16", "RANK": "11",
		"LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "8", "NODE_RANK": "1", "GROUP_RANK": "1",
		"TRAINRUN_TP": "8", "TRAINRUN_DP": "2", "TRAINRUN_PP": "1", "TRAINRUN_PLAN": "/run/plan.json",
	}
	for k, w := range want {
		if v, _ := e.Get(k); v != w {
			t.Errorf("%s = %q, want %q", k, v, w)
		}
	}
	if _, ok := e.Get("CUDA_VISIBLE_DEVICES"); ok {
		t.Errorf("CUDA_VISIBLE_DEVICES set although rails follow GPU order")
	}
}

func TestRailsOf(t *testing.T) {
	cases := []struct {
		name string
		node *topo.Node
		want []int
	}{
		// mlx5 names run backwards but rails are numbered in PCI order: the
		// NIC beside GPU0 is rail 0.
		{"reversed mlx5 numbering", h100Reversed(), []int{0, 1, 2, 3, 4, 5, 6, 7}},
		// Two NICs and two GPUs per switch pair up in order.
		{"DGX A100 shared switches", dgxA100(), []int{0, 1, 2, 3, 4, 5, 6, 7}},
		// Flat VM bus: no pairing visible.
		{"Azure flat bus", azureNDv5(), nil},
		{"EFA: 4 NICs for 8 GPUs", awsP4d(), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, why := RailsOf(tc.node)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("rails = %v (%s), want %v", got, why, tc.want)
			}
		})
	}
	// A node whose NICs sit in the reverse PCI order of their GPUs: rail 0
	// (lowest NIC bus) is beside the last GPU, so local rank 0 drives GPU 7
	// and the environment reorders CUDA_VISIBLE_DEVICES.
	n := h100Reversed()
	for i := range n.GPUs {
		n.GPUs[i].BusID = fmt.Sprintf("0000:%02x:00.0", 0x90-0x10*i)
	}
	rails, _ := RailsOf(n)
	if fmt.Sprint(rails) != "[7 6 5 4 3 2 1 0]" {
		t.Fatalf("rails = %v", rails)
	}
	e := envFor(t, n, EnvInput{UserEnv: map[string]string{"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}})
	if v, _ := e.Get("CUDA_VISIBLE_DEVICES"); v != "7,6,5,4,3,2,1,0" {
		t.Fatalf("CUDA_VISIBLE_DEVICES = %q", v)
	}
}

func TestParseNCCLConf(t *testing.T) {
	m, err := ParseNCCLConf([]byte("# Azure ndv5\nNCCL_IB_PCI_RELAXED_ORDERING=1\nNCCL_TOPO_FILE=/opt/microsoft/ndv5/topo.xml\n\nnot a setting\nNCCL_DEBUG=INFO=x\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"NCCL_IB_PCI_RELAXED_ORDERING": "1", "NCCL_TOPO_FILE": "/opt/microsoft/ndv5/topo.xml", "NCCL_DEBUG": "INFO=x"}
	if fmt.Sprint(m) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", m, want)
	}
	if _, err := ParseNCCLConf([]byte("NCCL_X = 1\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("want a line-numbered error for spaces around the key, got %v", err)
	}
}

// NVL72: GPUs registered with the fabric manager in one clique with a
// non-zero cluster UUID get NCCL_MNNVL_ENABLE=1; an all-zero UUID (NCCL's
// "no MNNVL", src/mnnvl.cc) or an unfinished registration does not.
func TestRankEnvMNNVL(t *testing.T) {
	cases := []struct {
		name, uuid, state, want string
	}{
		{"clique", "5c7f1d3a-0000-4000-8000-00000000abcd", "completed", "1"},
		{"zero uuid", "00000000-0000-0000-0000-000000000000", "completed", ""},
		{"registration in progress", "5c7f1d3a-0000-4000-8000-00000000abcd", "in-progress", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := hgxH100Interleaved(true)
			for i := range n.GPUs {
				n.GPUs[i].Fabric = &topo.NVLinkFabric{ClusterUUID: tc.uuid, CliqueID: 7, State: tc.state}
			}
			e := envFor(t, n, EnvInput{})
			v := e.Var("NCCL_MNNVL_ENABLE")
			got := ""
			if v.Inject {
				got = v.Value
			}
			if got != tc.want {
				t.Fatalf("NCCL_MNNVL_ENABLE = %q, want %q (%s)", got, tc.want, v.Why)
			}
		})
	}
}
