package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/plan"
)

// TestPlanCheapest: the workstation-or-cluster question. Llama-3-70B
// with QLoRA fits one GPU of several types; a time limit pushes the slow
// ones to more GPUs; priced types come first, by cost.
func TestPlanCheapest(t *testing.T) {
	out, stderr, code := runPlanCmd(t, "plan", "--model", "llama3-70b", "--seq-len", "4096", "--global-batch", "8", "--finetune", "qlora:16",
		"--cheapest", "--tokens", "100M", "--time-limit", "48", "--gpu", "l40s,a100-80gb,h100-sxm,h200", "--gpu-hour-cost", "l40s=0.9,a100-80gb=1.6,h100-sxm=2.5", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Options []plan.CheapestOption `json:"options"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(doc.Options) != 4 {
		t.Fatalf("%d options, want one per type asked: %s", len(doc.Options), out)
	}
	for i, op := range doc.Options {
		if !op.Fits || op.TrainHours <= 0 || op.TrainHours > 48 || op.GPUHours != op.TrainHours*float64(op.GPUs) || op.Finetune != "qlora:16" || op.Limits == "" {
			t.Errorf("option %d: %+v: want a fitting qlora:16 option within 48 h with its GPU-hours and limits", i, op)
		}
		priced := op.GPU != "h200"
		if priced != (op.Cost > 0) || (priced && i == 3) || (!priced && i != 3) {
			t.Errorf("option %d (%s): cost %.2f: priced types first, the unpriced h200 last", i, op.GPU, op.Cost)
		}
		if i > 0 && priced && op.Cost < doc.Options[i-1].Cost {
			t.Errorf("option %d costs %.2f, less than the one before (%.2f): want ascending cost", i, op.Cost, doc.Options[i-1].Cost)
		}
	}
	// One L40S would take over 48 h: the limit asks for two.
	for _, op := range doc.Options {
		if op.GPU == "l40s" && op.GPUs < 2 {
			t.Errorf("l40s: %d GPU within 48 h at %.0f tokens/s", op.GPUs, op.TokensPerS)
		}
	}
	table, _, code := runPlanCmd(t, "plan", "--model", "llama3-70b", "--seq-len", "4096", "--global-batch", "8", "--finetune", "lora:16", "--cheapest", "--gpu", "l40s,a100-80gb,h100-sxm")
	if code != 0 || !strings.Contains(table, "l40s") || !strings.Contains(table, "GPU-h") || !strings.Contains(table, "s/step") {
		t.Errorf("table (exit %d):\n%s", code, table)
	}
}

func TestPlanCheapestErrors(t *testing.T) {
	base := []string{"plan", "--model", "llama3-8b", "--seq-len", "2048", "--global-batch", "8", "--cheapest"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--time-limit", "24"}, "--time-limit 24 needs --tokens"},
		{[]string{"--tokens", "1B", "--time-limit", "soon"}, `--time-limit "soon": give hours`},
		{[]string{"--gpu-hour-cost", "l40s=-1"}, "the price must be a number from 0 to 1e9"},
		{[]string{"--gpu-hour-cost", "nosuch=1"}, "want TYPE=PRICE with a known GPU type"},
		{[]string{"--gpus", "8"}, "leave out --gpus"},
		{[]string{"--format", "megatron"}, "--format table or json"},
		{[]string{"--finetune", "lora:2048"}, "--finetune lora:2048: LoRA rank 2048 exceeds the 1024-wide projections of llama3-8b"},
		{[]string{"--finetune", "lora:8:gate", "--ffn-type", "gelu"}, "has no gate projection"},
	} {
		_, stderr, code := runPlanCmd(t, append(append([]string{}, base...), c.args...)...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

// TestPlanCheapestPartitions: with a policy, the site's partitions are the
// targets, priced by their GPUHourCost=.
func TestPlanCheapestPartitions(t *testing.T) {
	pol := policyFile(t, "PartitionName=ws GPUType=l40s GPUHourCost=0.9\nPartitionName=big GPUType=h100-sxm GPUHourCost=2.5\nPartitionName=old GPUType=a100-80gb\nPartitionName=any\n")
	out, stderr, code := runPlanCmd(t, "plan", "--model", "llama3-70b", "--seq-len", "4096", "--global-batch", "8", "--finetune", "lora:16",
		"--cheapest", "--tokens", "50M", "--time-limit", "36", "--policy", pol, "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Options []plan.CheapestOption `json:"options"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, op := range doc.Options {
		parts = append(parts, op.Partition+":"+op.GPU)
		if op.Partition == "ws" && op.PricePerGPUH != 0.9 || op.Partition == "old" && op.Cost != 0 {
			t.Errorf("%s: price %.2f cost %.2f: want the partition's GPUHourCost, none for old", op.Partition, op.PricePerGPUH, op.Cost)
		}
	}
	if got := strings.Join(parts, " "); got != "big:h100-sxm ws:l40s old:a100-80gb" {
		t.Errorf("targets %q, want the three typed partitions, priced by cost first (the GPUType=auto one left out)", got)
	}
}

// Issue 37: plan --cheapest --site compares this Slurm's partitions (two
// nodes of 8 H100s, two of 8 A100s whose 40 GB the policy names), each
// capped at its size and priced by the policy; a partition whose GPUs
// cannot be planned is left out, said on stderr.
func TestPlanCheapestSite(t *testing.T) {
	f := &fakeSched{t: t}
	base := []string{"plan", "--model", "llama3-70b", "--seq-len", "4096", "--global-batch", "8", "--finetune", "qlora:16", "--cheapest", "--site", "--format", "json"}
	priced := policyFile(t, "PartitionName=hopper GPUHourCost=3\nPartitionName=ampere GPUType=a100-40gb GPUHourCost=1\n")
	out, stderr, code := runSched(t, f, with(base, "--policy", priced, "--max-gpus", "64")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Options []plan.CheapestOption `json:"options"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	parts := map[string]plan.CheapestOption{}
	for _, op := range doc.Options {
		parts[op.Partition] = op
	}
	h, a := parts["hopper"], parts["ampere"]
	if len(doc.Options) != 2 || h.GPU != "h100-sxm" || a.GPU != "a100-40gb" || !h.Fits || !a.Fits || h.PricePerGPUH != 3 || a.PricePerGPUH != 1 || h.GPUs > 16 || a.GPUs > 16 {
		t.Fatalf("want hopper (h100-sxm, 3/GPU-h) and ampere (a100-40gb, 1/GPU-h), each at most 16 GPUs: %+v", doc.Options)
	}
	// Without the policy the A100's memory is unknown: ampere is left out.
	out, stderr, code = runSched(t, f, base...)
	if code != 0 || !strings.Contains(stderr, "left out") || !strings.Contains(stderr, "ampere") || strings.Contains(out, `"partition": "ampere"`) || !strings.Contains(out, `"partition": "hopper"`) {
		t.Errorf("no policy: exit %d\nstderr %s\nstdout %s", code, stderr, out)
	}
	if _, stderr, code = runSched(t, f, with(base, "--gpu", "l40s")...); code != 2 || !strings.Contains(stderr, "--site compares the Slurm partitions") {
		t.Errorf("--site --gpu: exit %d, %s", code, stderr)
	}
	// No Slurm: the query's failure, not a plan.
	if _, stderr, code = runPlanCmd(t, base...); code == 0 {
		t.Errorf("--site without Slurm: exit 0, %s", stderr)
	}
}
