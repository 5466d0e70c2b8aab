package plan

import (
	"reflect"
	"strings"
	"testing"
)

func TestParsePins(t *testing.T) {
	tests := []struct {
		in   string
		want Pins
		err  string // substring of the error; "" = accepted
	}{
		{in: "", want: Pins{}},
		{in: " , ", want: Pins{}},
		{in: "tp=8, pp=4,vpp=2,cp=1,ep=1,dp=2,mbs=1,recompute=selective,zero=1,sp=true,offload=none",
			want: Pins{TP: pinInt(8), PP: pinInt(4), VPP: pinInt(2), CP: pinInt(1), EP: pinInt(1), DP: pinInt(2), MicroBatch: pinInt(1),
				Recompute: pinStr("selective"), Zero: pinInt(1), SP: pinBool(true), Offload: pinStr("none")}},
		// The keys one parser used to take and another refused (issue 20):
		// grad_accum (env, --train-layout) and zero/sp/offload (plan, run).
		{in: "tp=8,grad_accum=2", want: Pins{TP: pinInt(8), GradAccum: pinInt(2)}},
		{in: "grad-accum=3", want: Pins{GradAccum: pinInt(3)}},
		{in: "micro_batch=2", want: Pins{MicroBatch: pinInt(2)}},
		{in: "zero=0", want: Pins{Zero: pinInt(0)}},
		{in: "TP=2", want: Pins{TP: pinInt(2)}},
		{in: "bogus=1", err: `unknown key "bogus"; accepted: ` + PinKeys},
		{in: "tp", err: `"tp" is not key=value`},
		{in: "tp=", err: `"tp=" is not key=value`},
		{in: "=2", err: `"=2" is not key=value`},
		{in: "tp=0", err: `tp="0": want a positive integer`},
		{in: "tp=-1", err: `tp="-1": want a positive integer`},
		{in: "tp=x", err: `tp="x": want a positive integer`},
		{in: "tp=2,tp=4", err: "tp given twice (tp=2 and tp=4)"},
		{in: "mbs=1,micro_batch=2", err: "mbs given twice"},
		{in: "recompute=some", err: `recompute="some": accepted: none, selective, full`},
		{in: "offload=disk", err: `offload="disk": accepted: none, optimizer, params`},
		{in: "zero=4", err: `zero="4": accepted: 0, 1, 2, 3`},
		{in: "sp=maybe", err: `sp="maybe": accepted: true, false`},
		// The security finding: a degree that would wrap the product.
		{in: "tp=8,pp=2305843009213693953", err: "pp=2305843009213693953: larger than 1048576"},
		{in: "dp=99999999999999999999", err: `dp="99999999999999999999": want a positive integer`},
		{in: "mbs=65537", err: "mbs=65537: larger than 65536"},
		{in: "grad_accum=1048577", err: "grad_accum=1048577: larger than 1048576"},
	}
	for _, tc := range tests {
		got, err := ParsePins(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParsePins(%q) = %v, want an error with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParsePins(%q) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestPinsStringRoundTrip(t *testing.T) {
	for _, s := range []string{
		"",
		"tp=8,pp=4",
		"tp=2,pp=1,vpp=2,cp=2,ep=4,dp=8,mbs=2,grad_accum=16,recompute=full,zero=3,sp=false,offload=optimizer",
	} {
		p, err := ParsePins(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.String(); got != s {
			t.Errorf("ParsePins(%q).String() = %q", s, got)
		}
	}
}

func TestPinsLayout(t *testing.T) {
	tests := []struct {
		name      string
		fix       string
		world, gb int
		want      Layout
		err       string
	}{
		{name: "nothing pinned", fix: "", world: 4, want: Layout{TP: 1, PP: 1, VPP: 1, CP: 1, EP: 1, DP: 4, MicroBatch: 1, GradAccum: 1, Recompute: "none", Offload: "none"}},
		{name: "dp derived", fix: "tp=2,pp=2", world: 8, want: Layout{TP: 2, PP: 2, VPP: 1, CP: 1, EP: 1, DP: 2, MicroBatch: 1, GradAccum: 1, Recompute: "none", Offload: "none"}},
		{name: "grad accum from the batch", fix: "tp=4,mbs=2", world: 32, gb: 64, want: Layout{TP: 4, PP: 1, VPP: 1, CP: 1, EP: 1, DP: 8, MicroBatch: 2, GradAccum: 4, Recompute: "none", Offload: "none"}},
		{name: "grad accum pinned, no batch", fix: "tp=8,grad_accum=2", world: 16, want: Layout{TP: 8, PP: 1, VPP: 1, CP: 1, EP: 1, DP: 2, MicroBatch: 1, GradAccum: 2, Recompute: "none", Offload: "none"}},
		{name: "grad accum pinned, agrees", fix: "tp=8,grad_accum=2", world: 16, gb: 4, want: Layout{TP: 8, PP: 1, VPP: 1, CP: 1, EP: 1, DP: 2, MicroBatch: 1, GradAccum: 2, Recompute: "none", Offload: "none"}},
		{name: "grad accum pinned, disagrees", fix: "tp=8,grad_accum=2", world: 16, gb: 8, err: "grad_accum=2, but global batch 8 over micro_batch×dp = 2 gives 4"},
		{name: "everything", fix: "tp=2,pp=2,vpp=2,cp=2,ep=2,dp=2,mbs=1,recompute=selective,zero=1,sp=true,offload=optimizer", world: 16,
			want: Layout{TP: 2, PP: 2, VPP: 2, CP: 2, EP: 2, DP: 2, SP: true, MicroBatch: 1, GradAccum: 1, Recompute: "selective", Zero: 1, Offload: "optimizer"}},
		{name: "dp per expert group", fix: "tp=2,ep=2,dp=2", world: 8, want: Layout{TP: 2, PP: 1, VPP: 1, CP: 1, EP: 2, DP: 4, MicroBatch: 1, GradAccum: 1, Recompute: "none", Offload: "none"}},
		{name: "does not divide", fix: "tp=3", world: 8, err: "tp×pp×cp = 3 does not divide the 8 GPUs"},
		{name: "dp mismatch", fix: "tp=2,dp=2", world: 8, err: "tp=2 pp=1 cp=1 dp=2 uses 4 GPUs, but there are 8"},
		{name: "ep must divide dp·cp", fix: "tp=2,ep=3", world: 8, err: "ep=3 must divide dp×cp = 4"},
		{name: "global batch", fix: "tp=2", world: 8, gb: 6, err: "global batch 6 is not a multiple of micro_batch×dp = 1×4 = 4"},
		{name: "product past the cap", fix: "tp=1048576,pp=1048576", world: 8, err: "tp×pp×cp of [1048576 1048576 1]: more GPUs than a layout may use (at most 1048576)"},
		{name: "dp product past the cap", fix: "tp=1024,pp=1024,dp=1048576", world: 8, err: "tp×pp×cp×dp of [1048576 1048576]: more GPUs"},
		{name: "no GPUs", fix: "tp=1", world: 0, err: "0 GPUs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePins(tc.fix)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Layout(tc.world, tc.gb)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v\nwant %+v", got, err, tc.want)
			}
		})
	}
}

func TestPinsApply(t *testing.T) {
	base := Layout{TP: 8, PP: 4, DP: 2, MicroBatch: 1, Recompute: "full", Zero: 1}
	p, err := ParsePins("pp=2,dp=4,sp=true,offload=optimizer")
	if err != nil {
		t.Fatal(err)
	}
	want := Layout{TP: 8, PP: 2, DP: 4, MicroBatch: 1, Recompute: "full", Zero: 1, SP: true, Offload: "optimizer"}
	if got := p.Apply(base); got != want {
		t.Errorf("Apply: got %+v, want %+v", got, want)
	}
	if got := (Pins{}).Apply(base); got != base {
		t.Errorf("empty pins changed the layout: %+v", got)
	}
}

func TestSearchHonoursGradAccumPin(t *testing.T) {
	c := ClusterOf(mustGPU(t, "h100-sxm"), 16)
	j := Job{SeqLen: 4096, GlobalBatch: 256, Precision: BF16}
	for _, ga := range []int{4, 16} {
		r := Search(llama2_7b, j, c, SearchOptions{Pins: Pins{GradAccum: pinInt(ga)}})
		if r.Plan == nil {
			t.Fatalf("grad_accum=%d: no plan; rejected %v", ga, r.Rejected)
		}
		for _, e := range fitsAll(r) {
			if e.GradAccum != ga {
				t.Errorf("grad_accum=%d pinned: %s has grad_accum %d", ga, e.Layout.Config(), e.GradAccum)
			}
		}
	}
}

// FuzzParsePins: whatever the text, ParsePins returns pins or an error, never
// panics; accepted pins survive a String round trip, and Layout never panics
// or returns a layout that does not multiply to the GPUs it was given.
func FuzzParsePins(f *testing.F) {
	for _, s := range []string{
		"", "tp=8,pp=4", "tp=8,grad_accum=2", "zero=1,sp=true,offload=params", "tp=8,pp=2305843009213693953",
		"tp=1048576,pp=1048576,cp=1048576", "ep=3,tp=2", "recompute=full,mbs=16", "TP=2,,dp=4", "tp=2,tp=2", "=", ",,,",
	} {
		f.Add(s, 16, 64)
	}
	f.Fuzz(func(t *testing.T, s string, world, gb int) {
		p, err := ParsePins(s)
		if err != nil {
			return
		}
		q, err := ParsePins(p.String())
		if err != nil || !reflect.DeepEqual(p, q) {
			t.Fatalf("%q: round trip through %q gave %v, %v", s, p.String(), q, err)
		}
		world, gb = world%(1<<21), gb%(1<<30)
		l, err := p.Layout(world, gb)
		if err != nil {
			return
		}
		if n := l.TP * l.PP * l.CP * l.DP; n != world {
			t.Fatalf("%q on %d GPUs: layout %s uses %d", s, world, l.Config(), n)
		}
	})
}
