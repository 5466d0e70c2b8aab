package plan

import (
	"bytes"
	"strings"
	"testing"
)

// etp is a key of the one layout grammar: parsed, written back, applied,
// checked by Pins.Layout with Megatron-Core's folding rules.
func TestPinsETP(t *testing.T) {
	p, err := ParsePins("tp=2,pp=8,ep=64,ETP=1,mbs=1")
	if err != nil || p.ETP == nil || *p.ETP != 1 {
		t.Fatalf("ParsePins: %v, ETP %v", err, p.ETP)
	}
	if s := p.String(); s != "tp=2,pp=8,ep=64,etp=1,mbs=1" {
		t.Errorf("String() = %q", s)
	}
	l, err := p.Layout(512, 4096)
	if err != nil || l.ETP != 1 || l.EP != 64 || l.DP != 32 || l.GradAccum != 128 {
		t.Fatalf("Layout: %+v, %v", l, err)
	}
	if _, err := ParsePins("etp=0"); err == nil || !strings.Contains(err.Error(), `etp="0": want a positive integer`) {
		t.Errorf("etp=0: %v", err)
	}
	for _, tc := range []struct{ fix, msg string }{
		{"tp=2,pp=8,ep=64,mbs=1", "ep=64 must divide dp×cp = 32"}, // without etp, experts are sharded by TP
		{"tp=2,pp=8,ep=64,etp=3,mbs=1", "etp=3 must divide tp=2"},
		{"tp=4,pp=8,ep=64,etp=2,mbs=1", "ep×etp = 64×2 must divide tp×dp×cp = 64"},
	} {
		p, err := ParsePins(tc.fix)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Layout(512, 4096); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %q", tc.fix, err, tc.msg)
		}
	}
}

// The published DeepSeek-V3 layout (NeMo 25.04 on 512 H100: TP2 PP8 EP64
// ETP1) given with --fix is evaluated as published, and the search honours a
// pinned etp when it chooses ep.
func TestSearchHonoursETP(t *testing.T) {
	c := ClusterOf(mustGPU(t, "h100-sxm"), 512)
	j := Job{SeqLen: 4096, GlobalBatch: 4096, Precision: BF16, Stack: StackNeMo}
	fix := func(s string) SearchOptions {
		p, err := ParsePins(s)
		if err != nil {
			t.Fatal(err)
		}
		return SearchOptions{Pins: p, TopK: 3}
	}
	r := Search(deepseekV3, j, c, fix("tp=2,pp=8,ep=64,etp=1,mbs=1,recompute=selective"))
	if r.Plan == nil {
		t.Fatalf("no plan for the published layout: %+v", r.Rejected)
	}
	if l := r.Plan.Layout; l.ETP != 1 || l.EP != 64 || l.DP != 32 || !strings.Contains(l.Config(), "ep=64,etp=1") {
		t.Errorf("plan %s", l.Config())
	}
	a, err := MegatronArgs(deepseekV3, j, *r.Plan)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(a, " ")
	if !strings.Contains(args, "--expert-model-parallel-size 64 --expert-tensor-parallel-size 1") {
		t.Errorf("Megatron flags lack the expert TP size: %s", args)
	}
	var js bytes.Buffer
	if err := RenderJSON(&js, r); err != nil || !strings.Contains(js.String(), `"ep": 64,`) || !strings.Contains(js.String(), `"etp": 1`) {
		t.Errorf("JSON lacks etp (%v):\n%.400s", err, js.String())
	}
	if r := Search(deepseekV3, j, c, fix("tp=2,pp=8,ep=64,mbs=1,recompute=selective")); r.Plan != nil {
		t.Errorf("ep=64 without etp on dp 32 was planned: %s", r.Plan.Layout.Config())
	}
	// etp pinned, ep searched: every candidate obeys the folding rule, and
	// some use an ep that only folding allows (ep > dp·cp).
	r = Search(deepseekV3, j, c, fix("tp=2,pp=8,etp=1,mbs=1,recompute=selective"))
	if r.Plan == nil {
		t.Fatalf("no plan with etp=1: %+v", r.Rejected)
	}
	var folded []string
	for _, e := range append([]Evaluation{*r.Plan}, r.Alternatives...) {
		l := e.Layout
		if l.ETP != 1 || (l.TP*l.DP*l.CP)%(l.EP*l.ETP) != 0 {
			t.Errorf("candidate %s breaks etp=1", l.Config())
		}
		if l.EP > l.DP*l.CP {
			folded = append(folded, l.Config())
		}
	}
	if len(folded) == 0 {
		t.Errorf("no candidate with ep > dp·cp: the search did not use folding (plan %s)", r.Plan.Layout.Config())
	}
}
