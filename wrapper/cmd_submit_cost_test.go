package main

import (
	"strings"
	"testing"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// Issue 37: submit --objective cost with plan --cheapest's logic. A full
// fine-tune of a 70B model on one GPU fits nowhere as asked; with
// --finetune-fallback each candidate takes the first kind that fits (LoRA,
// then QLoRA), the cheapest is chosen and the JSON and the table say which
// kind SCRIPT must train; --time-limit takes the candidates that would train
// longer out of the choice.
func TestSubmitCostFallbackAndLimit(t *testing.T) {
	f := &fakeSched{t: t}
	priced := policyFile(t, "PartitionName=hopper GPUHourCost=4\nPartitionName=ampere GPUType=a100-40gb GPUHourCost=1\n")
	base := []string{"submit", "--dry-run", "--model", "llama3-70b", "--seq-len", "4096", "--global-batch", "16",
		"--tokens", "5e7", "--max-gpus", "1", "--policy", priced, "--objective", "cost"}
	_, errOut, code := runSched(t, f, append(append(base, "--format", "json"), "--", "job.sh")...)
	if code != exitcode.NoFit || !strings.Contains(errOut, "does not fit") {
		t.Fatalf("full 70B on one GPU without the fallback: exit %d, %s", code, errOut)
	}
	s := decodeSubmit(t, mustRun(t, f, append(append(base, "--format", "json", "--finetune-fallback"), "--", "job.sh")...))
	if s.Chosen == nil || (s.Chosen.Finetune != "lora:16" && s.Chosen.Finetune != "qlora:16") {
		t.Fatalf("chosen %+v, want a frozen-base kind", s.Chosen)
	}
	var cheapest float64
	for _, c := range s.Candidates {
		if !c.Fits {
			continue
		}
		if c.Finetune == "" || c.Finetune == "full" || c.Cost == nil {
			t.Errorf("candidate %+v: want the fallback kind and a cost", c)
			continue
		}
		if cheapest == 0 || *c.Cost < cheapest {
			cheapest = *c.Cost
		}
	}
	for _, c := range s.Candidates {
		if c.Partition == s.Chosen.Partition && c.GPUs == s.Chosen.GPUs && (c.Cost == nil || *c.Cost != cheapest) {
			t.Errorf("chosen %+v is not the cheapest (%g)", c, cheapest)
		}
	}
	out := mustRun(t, f, append(append(base, "--finetune-fallback"), "--", "job.sh")...)
	if !strings.Contains(out, "fine-tuning: --finetune "+s.Chosen.Finetune) || !strings.Contains(out, "SCRIPT must train this kind") {
		t.Errorf("table output does not name the kind:\n%s", out)
	}
	// A limit below every candidate's training time: none qualifies, each says why.
	_, errOut, code = runSched(t, f, append(append(base, "--finetune-fallback", "--time-limit", "1m"), "--", "job.sh")...)
	if code != exitcode.NoFit || !strings.Contains(errOut, "too slow") || !strings.Contains(errOut, "over the --time-limit 1m") {
		t.Errorf("--time-limit 1m: exit %d, %s", code, errOut)
	}
	if _, errOut, code = runSched(t, f, append(append(base, "--time-limit", "soon"), "--", "job.sh")...); code != exitcode.Usage || !strings.Contains(errOut, `--time-limit "soon"`) {
		t.Errorf("--time-limit soon: exit %d, %s", code, errOut)
	}
}
