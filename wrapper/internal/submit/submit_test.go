package submit

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/plan"
)

func gpu(t testing.TB, name string) plan.GPU {
	g, err := plan.LookupGPU(name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGPUType(t *testing.T) {
	cases := []struct {
		gres, policy string
		features     []string
		fallback     string
		want, err    string
	}{
		{gres: "h100", want: "h100-sxm"},
		{gres: "H100", policy: "a100-80gb", want: "h100-sxm"}, // an unambiguous GRES wins
		{gres: "b200", want: "b200"},
		{gres: "h200", want: "h200"},
		{gres: "a100_80gb", want: "a100-80gb"},
		{gres: "a100-40gb", want: "a100-40gb"},
		{gres: "a100", policy: "a100-40gb", want: "a100-40gb"},
		{gres: "a100", features: []string{"ib", "80gb"}, want: "a100-80gb"},
		{gres: "a100", features: []string{"gpumem=40G"}, want: "a100-40gb"},
		{gres: "a100", features: []string{"40gb", "80gb"}, err: "ambiguous"},
		{gres: "a100", err: `GRES type "a100" is ambiguous (a100-40gb or a100-80gb)`},
		{gres: "a100", err: "set GPUType= on the policy's line 'PartitionName=p'"},
		{gres: "a100", fallback: "a100-80gb", want: "a100-80gb"},
		{gres: "", policy: "h100-pcie", want: "h100-pcie"},
		{gres: "", err: "no GRES type (Gres=gpu:N"},
		{gres: "", fallback: "l40s", want: "l40s"},
		{gres: "t4", err: `GRES type "t4" is not a GPU type the planner knows`},
		{gres: "", policy: "t4", err: "the policy's GPUType=t4"},
	}
	for _, tc := range cases {
		got, err := GPUType("p", tc.gres, tc.policy, tc.features, tc.fallback)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("GPUType(%q, policy %q, %v) = %q, %v; want an error with %q", tc.gres, tc.policy, tc.features, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("GPUType(%q, policy %q, %v) = %q, %v; want %q", tc.gres, tc.policy, tc.features, got, err, tc.want)
		}
	}
}

func TestSizes(t *testing.T) {
	p := Partition{GPUsPerNode: 8, Nodes: 6}
	str := func(min, max int) string {
		var b []string
		for _, s := range Sizes(p, min, max) {
			b = append(b, fmt.Sprintf("%dx%d", s.Nodes, s.PerNode))
		}
		return strings.Join(b, " ")
	}
	for _, tc := range []struct {
		min, max int
		want     string
	}{
		{0, 0, "1x1 1x2 1x4 1x8 2x8 4x8 6x8"},
		{4, 16, "1x4 1x8 2x8"},
		{9, 0, "2x8 4x8 6x8"},
		{64, 0, ""},
	} {
		if got := str(tc.min, tc.max); got != tc.want {
			t.Errorf("Sizes(8 GPUs × 6 nodes, %d..%d) = %q, want %q", tc.min, tc.max, got, tc.want)
		}
	}
}

func req70b(t testing.TB) Request {
	m, err := plan.LookupModel("llama3-70b")
	if err != nil {
		t.Fatal(err)
	}
	return Request{Model: m, Job: plan.Job{SeqLen: 4096, GlobalBatch: 256, Precision: plan.BF16, Tokens: 2e9},
		Search: plan.SearchOptions{TopK: 1}, CkptInterval: time.Hour, CkptBW: 5e9, Sbatch: plan.SbatchOptions{Margin: 0.1, Lead: 10 * time.Minute}}
}

// Memory-bound jobs fall to the cards they fit on through the planner: 70B
// on 8 GPUs fits 80 GB cards, not 40 GB ones.
func TestCandidatesFitByMemory(t *testing.T) {
	parts := []Partition{{Name: "hopper", GPU: gpu(t, "h100"), GPUsPerNode: 8, Nodes: 2, Cost: -1},
		{Name: "ampere", GPU: gpu(t, "a100-40gb"), GPUsPerNode: 8, Nodes: 2, Cost: 2}}
	r := req70b(t)
	r.MinGPUs, r.MaxGPUs = 8, 8
	cs := Candidates(parts, r)
	if len(cs) != 2 {
		t.Fatalf("%d candidates, want one size (8 GPUs) per partition", len(cs))
	}
	h, a := cs[0], cs[1]
	if !h.Fits || h.Eval == nil || h.TokensPerS <= 0 || h.TrainS <= 0 || h.CkptS <= 0 || h.TimeLimit < seconds(h.TrainS) || h.Cost != -1 {
		t.Errorf("hopper: %+v", h)
	}
	if a.Fits || !strings.Contains(a.Why, "does not fit") || a.Cost != -1 {
		t.Errorf("ampere (40 GB): fits %v, why %q", a.Fits, a.Why)
	}
	// The prediction is the planner's: tokens ÷ throughput, plus saves.
	steps := plan.TrainSeconds(r.Job, *h.Eval)
	if d := h.TrainS - steps - h.CkptS; d < -1e-6 || d > 1e-6 || h.CkptS > steps {
		t.Errorf("train %g = steps %g + saves %g?", h.TrainS, steps, h.CkptS)
	}
}

// Partial nodes: a job smaller than a node is planned on k GPUs of one node.
func TestCandidatesPartial(t *testing.T) {
	m, _ := plan.LookupModel("llama3-8b")
	r := Request{Model: m, Job: plan.Job{SeqLen: 4096, GlobalBatch: 64, Precision: plan.BF16, Tokens: 1e8}, MinGPUs: 4, MaxGPUs: 4}
	cs := Candidates([]Partition{{Name: "hopper", GPU: gpu(t, "h100"), GPUsPerNode: 8, Nodes: 2, Cost: -1}}, r)
	if len(cs) != 1 || !cs[0].Partial || cs[0].GPUs != 4 || cs[0].GPUsPerNode != 4 || cs[0].Nodes != 1 || !cs[0].Fits {
		t.Fatalf("%+v", cs)
	}
	if l := cs[0].Eval.Layout; l.TP*l.PP*l.CP*l.DP != 4 {
		t.Errorf("layout %s on 4 GPUs", l.Config())
	}
}

func cand(part string, gpus int, start time.Time, trainS, cost float64) Candidate {
	return Candidate{Partition: part, GPUs: gpus, Fits: true, Start: start, TrainS: trainS, Cost: cost}
}

func TestChoose(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	busy := now.Add(time.Hour)
	cases := []struct {
		name      string
		cands     []Candidate
		objective string
		want      int
		wantWhy   []string // substrings, per candidate
	}{
		{"both idle: the faster", []Candidate{cand("ampere", 16, now, 3000, -1), cand("hopper", 16, now, 1000, -1)}, Finish, 1,
			[]string{"finishes 33m20s after the chosen (start at once, train 50m00s)", "chosen: earliest finish 2026-12-01T12:16:40Z"}},
		{"fast one busy, short job: the idle slower one", []Candidate{cand("hopper", 16, busy, 600, -1), cand("ampere", 16, now, 1800, -1)}, Finish, 1,
			[]string{"start in 1h00m", "chosen"}},
		{"fast one busy, long job: still the faster", []Candidate{cand("hopper", 16, busy, 36000, -1), cand("ampere", 16, now, 108000, -1)}, Finish, 0,
			[]string{"chosen", "finishes 19h00m after the chosen"}},
		{"cost flips it", []Candidate{cand("hopper", 16, now, 1000, 10), cand("ampere", 16, now, 3000, 4)}, Cost, 1,
			[]string{"costs 10, 6 more than the chosen", "chosen: lowest cost 4"}},
		{"cost without a price loses", []Candidate{cand("hopper", 16, now, 1000, -1), cand("ampere", 16, now, 3000, 4)}, Cost, 1,
			[]string{"no GPUHourCost= for partition hopper", "chosen"}},
		{"a tie goes to fewer GPUs", []Candidate{cand("a", 16, now, 100, -1), cand("a", 8, now, 100, -1)}, Finish, 1,
			[]string{"same time with 16 GPUs", "chosen"}},
		{"refused by Slurm", []Candidate{{Partition: "h", Fits: true, StartErr: "allocation failure: x"}, cand("a", 8, now, 100, -1)}, Finish, 1,
			[]string{"Slurm would not start it: allocation failure: x", "chosen"}},
		{"unfit", []Candidate{{Partition: "h", Why: "does not fit: y"}, cand("a", 8, now, 100, -1)}, Finish, 1,
			[]string{"does not fit: y", "chosen"}},
	}
	for _, tc := range cases {
		got, err := Choose(tc.cands, tc.objective, now)
		if err != nil || got != tc.want {
			t.Errorf("%s: chose %d (%v), want %d", tc.name, got, err, tc.want)
			continue
		}
		for i, w := range tc.wantWhy {
			if !strings.Contains(tc.cands[i].Why, w) {
				t.Errorf("%s: candidate %d why %q, want %q", tc.name, i, tc.cands[i].Why, w)
			}
		}
	}
	if _, err := Choose([]Candidate{{Partition: "h", Why: "does not fit: y", GPUs: 8}}, Finish, now); err == nil || !strings.Contains(err.Error(), "h×8: does not fit: y") {
		t.Errorf("nothing qualifies: %v", err)
	}
	refused := []Candidate{{Partition: "h", GPUs: 8, Fits: true, StartErr: "sbatch: error: x"}, {Partition: "h", GPUs: 16, Fits: true, StartErr: "sbatch: error: x"}}
	if _, err := Choose(refused, Finish, now); err == nil || err.Error() != "no candidate qualifies: h×8, h×16: Slurm would not start it: sbatch: error: x" {
		t.Errorf("all refused alike: %v", err)
	}
	if _, err := Choose(nil, "fastest", now); err == nil || !strings.Contains(err.Error(), `--objective "fastest"`) {
		t.Errorf("bad objective: %v", err)
	}
}

// Mutated inputs: random candidates (any start, any time, unfit, refused,
// priced or not) never panic, and the chosen one is the best of those that
// qualify under its objective.
func TestChooseMutated(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		n := rng.IntN(12)
		cs := make([]Candidate, n)
		for i := range cs {
			cs[i] = cand(fmt.Sprint("p", rng.IntN(4)), 1<<rng.IntN(6), now.Add(time.Duration(rng.IntN(7200))*time.Second), rng.Float64()*1e5, -1)
			switch rng.IntN(6) {
			case 0:
				cs[i].Fits = false
			case 1:
				cs[i].StartErr = "refused"
			case 2:
				cs[i].Start = time.Time{}
			}
			if rng.IntN(2) == 0 {
				cs[i].Cost = rng.Float64() * 100
			}
		}
		obj := []string{Finish, Cost}[rng.IntN(2)]
		got, err := Choose(cs, obj, now)
		if err != nil {
			for _, c := range cs {
				if c.Fits && c.StartErr == "" && !c.Start.IsZero() && (obj == Finish || c.Cost >= 0) {
					t.Fatalf("iter %d: %v although %+v qualifies", iter, err, c)
				}
			}
			continue
		}
		best := cs[got]
		for i, c := range cs {
			if !c.Fits || c.StartErr != "" || c.Start.IsZero() || obj == Cost && c.Cost < 0 {
				if i == got {
					t.Fatalf("iter %d: chose a candidate that does not qualify: %+v", iter, c)
				}
				continue
			}
			if obj == Finish && c.Finish.Before(best.Finish) || obj == Cost && c.Cost < best.Cost {
				t.Fatalf("iter %d (%s): chose %+v over the better %+v", iter, obj, best, c)
			}
			if c.Why == "" {
				t.Fatalf("iter %d: candidate %d has no reason", iter, i)
			}
		}
	}
}

// The time limit is train time + margin + lead, at most the partition's
// MaxTime (the run then continues by requeue).
func TestTimeLimit(t *testing.T) {
	if got := TimeLimit(3000, plan.SbatchOptions{Margin: 0.5, Lead: 10 * time.Minute}); got != 85*time.Minute {
		t.Errorf("TimeLimit(3000 s) = %v, want 75m+10m", got)
	}
	if got := TimeLimit(1, plan.SbatchOptions{}); got != time.Minute {
		t.Errorf("TimeLimit(1 s) = %v, want 1m", got)
	}
	r := req70b(t)
	r.MinGPUs, r.MaxGPUs = 16, 16
	cs := Candidates([]Partition{{Name: "short", GPU: gpu(t, "h100"), GPUsPerNode: 8, Nodes: 2, MaxTime: 30 * time.Minute, Cost: 1}}, r)
	if len(cs) != 1 || !cs[0].Capped || cs[0].TimeLimit != 30*time.Minute || cs[0].Cost <= 0 {
		t.Errorf("%+v", cs)
	}
}

// Any GRES type, policy type and features give a catalog type or an error
// naming the partition, never a panic or a type outside the catalog.
func FuzzGPUType(f *testing.F) {
	for _, s := range []string{"h100", "a100", "a100_80gb", "", "t4", "gpu:x", "A100-PCIE"} {
		f.Add(s, "", "80gb")
	}
	f.Add("a100", "a100-40gb", "")
	f.Fuzz(func(t *testing.T, gres, policy, feature string) {
		got, err := GPUType("p", gres, policy, []string{feature}, "")
		if err != nil {
			if !strings.Contains(err.Error(), "partition p") {
				t.Fatalf("error without the partition: %v", err)
			}
			return
		}
		if _, lerr := plan.LookupGPU(got); lerr != nil {
			t.Fatalf("GPUType(%q, %q, %q) = %q, not in the catalog", gres, policy, feature, got)
		}
	})
}

// Issue 37: with Kinds (--finetune-fallback) a candidate takes the first
// fine-tuning kind that fits, as plan --cheapest does: a 70B job fits one
// L40S only with a frozen base (LoRA with the base streamed from the host, or
// QLoRA); TrainLimit (--time-limit) takes the candidates that
// would train too long out of the choice, so --objective cost picks the
// cheapest that finishes in time.
func TestCandidatesKindsAndLimit(t *testing.T) {
	m, err := plan.LookupModel("llama3-70b")
	if err != nil {
		t.Fatal(err)
	}
	parts := []Partition{{Name: "ws", GPU: gpu(t, "l40s"), GPUsPerNode: 1, Nodes: 1, Cost: 1},
		{Name: "hopper", GPU: gpu(t, "h100"), GPUsPerNode: 8, Nodes: 1, Cost: 4}}
	r := Request{Model: m, Job: plan.Job{SeqLen: 4096, GlobalBatch: 8, Precision: plan.BF16, Tokens: 2e7},
		Search: plan.SearchOptions{TopK: 1}, MinGPUs: 1, MaxGPUs: 8}
	ws := func(cs []Candidate) Candidate {
		for _, c := range cs {
			if c.Partition == "ws" {
				return c
			}
		}
		t.Fatalf("no ws candidate in %+v", cs)
		return Candidate{}
	}
	if c := ws(Candidates(parts, r)); c.Fits || c.Finetune != "full" || !strings.Contains(c.Why, "does not fit") {
		t.Errorf("full 70B on one L40S without Kinds: fits %v, finetune %q, why %q", c.Fits, c.Finetune, c.Why)
	}
	r.Kinds = plan.CheapestKinds(plan.Finetune{Kind: plan.FinetuneFull})
	cs := Candidates(parts, r)
	l40 := ws(cs)
	if !l40.Fits || (l40.Finetune != "lora:16" && l40.Finetune != "qlora:16") || l40.Eval == nil || l40.Eval.Finetune == nil || l40.Eval.Finetune.Spec != l40.Finetune {
		t.Fatalf("70B on one L40S with the fallback kinds: fits %v, finetune %q, why %q", l40.Fits, l40.Finetune, l40.Why)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for i := range cs {
		cs[i].Start = now
	}
	best, err := Choose(cs, Cost, now)
	if err != nil || cs[best].Partition != "ws" {
		t.Fatalf("cost without a limit chose %+v, %v; want the L40S (1 GPU-hour price, %s)", cs[best], err, dur(l40.TrainS))
	}
	// A limit between the L40S's training time and the fastest H100 size's.
	var fastest float64
	for _, c := range cs {
		if c.Partition == "hopper" && c.Fits && (fastest == 0 || c.TrainS < fastest) {
			fastest = c.TrainS
		}
	}
	if fastest == 0 || fastest >= l40.TrainS/2 {
		t.Fatalf("no H100 size trains in under half the L40S's %s (fastest %s)", dur(l40.TrainS), dur(fastest))
	}
	r.TrainLimit = time.Duration((fastest + l40.TrainS) / 2 * float64(time.Second))
	t.Logf("one L40S with %s trains in %s; the fastest H100 size in %s; limit %s", l40.Finetune, dur(l40.TrainS), dur(fastest), r.TrainLimit.Round(time.Second))
	cs = Candidates(parts, r)
	if c := ws(cs); c.Fits || !strings.Contains(c.Why, "too slow") || !strings.Contains(c.Why, "--time-limit") {
		t.Errorf("L40S over the limit: fits %v, why %q", c.Fits, c.Why)
	}
	for i := range cs {
		cs[i].Start = now
	}
	best, err = Choose(cs, Cost, now)
	if err != nil || cs[best].Partition != "hopper" || cs[best].TrainS > r.TrainLimit.Seconds() {
		t.Fatalf("cost with a %s limit chose %+v, %v; want an H100 size within it", r.TrainLimit, cs[best], err)
	}
}

func dur(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
}
