package run

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/checkpoint/checkpointtest"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
)

func TestFixedLayout(t *testing.T) {
	tests := []struct {
		name        string
		fix         string
		world, gb   int
		want        plan.Layout
		code        int
		msgContains string
	}{
		{name: "dp derived", fix: "tp=2,pp=2", world: 8, want: plan.Layout{TP: 2, PP: 2, VPP: 1, CP: 1, EP: 1, DP: 2, MicroBatch: 1, GradAccum: 1, Recompute: "none", Offload: "none"}},
		{name: "grad accum from global batch", fix: "tp=4,mbs=2", world: 32, gb: 64, want: plan.Layout{TP: 4, PP: 1, VPP: 1, CP: 1, EP: 1, DP: 8, MicroBatch: 2, GradAccum: 4, Recompute: "none", Offload: "none"}},
		{name: "everything", fix: "tp=2,pp=2,vpp=2,cp=2,ep=2,dp=2,mbs=1,recompute=selective,zero=1,sp=true,offload=optimizer", world: 16,
			want: plan.Layout{TP: 2, PP: 2, VPP: 2, CP: 2, EP: 2, DP: 2, SP: true, MicroBatch: 1, GradAccum: 1, Recompute: "selective", Zero: 1, Offload: "optimizer"}},
		{name: "does not divide", fix: "tp=3", world: 8, code: exitcode.Layout, msgContains: "does not divide the 8 GPUs"},
		{name: "dp mismatch", fix: "tp=2,dp=2", world: 8, code: exitcode.Layout, msgContains: "tp=2 pp=1 cp=1 dp=2 uses 4 GPUs, but there are 8"},
		{name: "ep must divide dp·cp", fix: "tp=2,ep=3", world: 8, code: exitcode.Layout, msgContains: "ep=3 must divide"},
		{name: "global batch", fix: "tp=2", world: 8, gb: 6, code: exitcode.Layout, msgContains: "not a multiple of micro_batch×dp"},
		{name: "unknown key", fix: "tp=2,tensor=4", world: 8, code: exitcode.Usage, msgContains: `unknown key "tensor"`},
		{name: "bad value", fix: "tp=0", world: 8, code: exitcode.Usage, msgContains: `tp="0"`},
		{name: "bad recompute", fix: "recompute=some", world: 8, code: exitcode.Usage, msgContains: "accepted: none, selective, full"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := planflags.FixedLayout(tc.fix, tc.world, tc.gb)
			if tc.code != 0 {
				if err == nil || exitcode.Of(err) != tc.code || !strings.Contains(err.Error(), tc.msgContains) {
					t.Fatalf("got %v (code %d), want code %d with %q", err, exitcode.Of(err), tc.code, tc.msgContains)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v\nwant %+v", got, err, tc.want)
			}
		})
	}
}

func TestSubstituteTemplates(t *testing.T) {
	l := plan.Layout{TP: 2, PP: 4, VPP: 1, CP: 1, EP: 1, DP: 8, MicroBatch: 1, GradAccum: 16}
	vals := templateValues(l, "/ck/step-10", "/ck")
	meg := []string{"--tensor-model-parallel-size", "2"}
	tests := []struct {
		name    string
		in      []string
		want    []string
		unknown []string
	}{
		{name: "plain", in: []string{"python", "t.py", "--tp", "{tp}", "--pp={pp}", "--load", "{resume}"}, want: []string{"python", "t.py", "--tp", "2", "--pp=4", "--load", "/ck/step-10"}},
		{name: "all names", in: []string{"{tp}{pp}{vpp}{cp}{ep}{dp}{micro_batch}{grad_accum}", "{ckpt_dir}"}, want: []string{"241118116", "/ck"}},
		{name: "megatron as arguments", in: []string{"pretrain.py", "{megatron_args}", "--x"}, want: []string{"pretrain.py", "--tensor-model-parallel-size", "2", "--x"}},
		{name: "megatron inside a string", in: []string{"bash", "-c", "python p.py {megatron_args} --tp {tp}"}, want: []string{"bash", "-c", "python p.py --tensor-model-parallel-size 2 --tp 2"}},
		{name: "unknown kept", in: []string{`{"a": 1}`, "{tpp}", "{tpp}", "{Tp}"}, want: []string{`{"a": 1}`, "{tpp}", "{tpp}", "{Tp}"}, unknown: []string{"{tpp}"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, unk := substituteTemplates(tc.in, vals, meg)
			if !slices.Equal(got, tc.want) || !slices.Equal(unk, tc.unknown) {
				t.Errorf("got %q unknown %q, want %q unknown %q", got, unk, tc.want, tc.unknown)
			}
		})
	}
}

func TestBlockPlacement(t *testing.T) {
	a := &slurm.Allocation{Nodes: []string{"n1", "n2"}, TasksPerNode: 4, GPUsPerNode: 4}
	l := plan.Layout{TP: 2, PP: 2, CP: 1, DP: 2, EP: 1}
	slots, err := blockPlacement(a, l, map[string][]int{"n2": {4, 5, 6, 7}})
	if err != nil {
		t.Fatal(err)
	}
	if !sameOrderAsSlurm(a, slots) {
		t.Error("block placement must be Slurm's order")
	}
	if s := slots[5]; s.Node != "n2" || s.LocalRank != 1 || s.GPU != 5 || s.NodeRank != 1 || s.TP != 1 || s.DP != 0 || s.PP != 1 {
		t.Errorf("rank 5: %+v", s)
	}
	if got := hostfile(slots); got != "n1\nn1\nn1\nn1\nn2\nn2\nn2\nn2\n" {
		t.Errorf("hostfile %q", got)
	}
	if got := placementLine(slots, l); got != "4 of 4 TP groups (size 2) inside one node" {
		t.Errorf("placementLine %q", got)
	}
	slots[0].Node, slots[4].Node = "n2", "n1"
	if sameOrderAsSlurm(a, slots) {
		t.Error("a swapped placement is not Slurm's order")
	}
}

func TestVisibleDevicesFor(t *testing.T) {
	tests := []struct {
		name, cvd, step  string
		gpu, slot, local int
		want             string
		bad              bool
	}{
		{name: "identity", cvd: "0,1,2,3", step: "0,1,2,3", gpu: 2, slot: 2, local: 2, want: "0,1,2,3"},
		{name: "rail swap", cvd: "0,1,2,3", step: "0,1,2,3", gpu: 3, local: 0, want: "3,1,2,0"},
		{name: "cgroup renumbered", cvd: "0,1,2,3", step: "4,5,6,7", gpu: 6, local: 0, want: "2,1,0,3"},
		{name: "no step list", cvd: "4,5", step: "", gpu: 5, local: 0, want: "5,4"},
		{name: "not probed", cvd: "4,5", step: "4,5", gpu: -1, slot: 1, local: 1, want: "4,5"},
		{name: "not probed, rail order", cvd: "4,5", step: "4,5", gpu: -1, slot: 1, local: 0, want: "5,4"},
		{name: "gpu not held", cvd: "0,1", step: "0,1", gpu: 7, local: 0, bad: true},
		{name: "empty", cvd: "", step: "", gpu: 0, local: 0, bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := launch.VisibleDevicesFor(tc.cvd, tc.step, tc.gpu, tc.slot, tc.local)
			if tc.bad != (err != nil) || got != tc.want {
				t.Errorf("got %q, %v; want %q (bad=%v)", got, err, tc.want, tc.bad)
			}
		})
	}
}

// The controller's view of the checkpoint store: an incomplete checkpoint is
// never latest; the complete one is committed and resumed from.
func TestStoreAdapter(t *testing.T) {
	dir := t.TempDir()
	s, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if l, _, err := s.Latest(); l != "" || err != nil {
		t.Fatalf("empty store: %q %v", l, err)
	}
	mark := func(tag string, ranks ...int) { checkpointtest.SaveRanks(t, filepath.Join(dir, tag), tag, ranks...) }
	mark("step-10", 0, 1)
	mark("step-20", 0) // incomplete: rank 1 missing
	tag, changed, err := s.CommitComplete(2)
	if err != nil || tag != "step-10" || !changed {
		t.Fatalf("commit: %q %v %v", tag, changed, err)
	}
	if l, _, _ := s.Latest(); l != filepath.Join(dir, "step-10") {
		t.Errorf("latest %q", l)
	}
	if tag, changed, _ = s.CommitComplete(2); tag != "step-10" || changed {
		t.Errorf("second commit changed: %q %v", tag, changed)
	}
}

func TestCPUListString(t *testing.T) {
	if got := cpuListString([]int{0, 1, 2, 3, 8, 10, 11}); got != "0-3,8,10-11" {
		t.Errorf("cpuListString: %q", got)
	}
	if !wholeNode([]int{0, 1, 2, 3}, 4) || wholeNode([]int{4, 5}, 2) || !wholeNode(nil, 8) {
		t.Error("wholeNode")
	}
}
