package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// DeepSpeed's config rules, as facts read from its source (DeepSpeedVersion:
// deepspeed/runtime/config.py, pipe/engine.py), checked on trainrun's
// ds_config so that CI keeps them without DeepSpeed (whose loader needs
// pydantic, not installed here).
func TestDeepSpeedConfigRules(t *testing.T) {
	base := func(f func(*Evaluation)) Evaluation {
		e := Evaluation{Layout: Layout{TP: 1, PP: 1, CP: 1, EP: 1, DP: 16, MicroBatch: 2, GradAccum: 8, Recompute: "none", Zero: 3, Offload: "none"}}
		if f != nil {
			f(&e)
		}
		return e
	}
	j := Job{SeqLen: 4096, GlobalBatch: 256, Precision: BF16}
	cases := []struct {
		name string
		j    Job
		e    Evaluation
		want map[string]any // dotted key → value
		err  string
	}{
		{"batch = micro × accumulation × dp (config.py:937 _batch_assertion)", j, base(nil),
			map[string]any{"train_batch_size": 256.0, "train_micro_batch_size_per_gpu": 2.0, "gradient_accumulation_steps": 8.0, "zero_optimization.stage": 3.0, "bf16.enabled": true}, ""},
		{"fp16 with dynamic loss scaling", Job{GlobalBatch: 256, Precision: FP16}, base(nil), map[string]any{"fp16.enabled": true, "fp16.loss_scale": 0.0}, ""},
		{"optimizer offload to the host", j, base(func(e *Evaluation) { e.Offload = "optimizer"; e.Zero = 2 }),
			map[string]any{"zero_optimization.offload_optimizer.device": "cpu", "zero_optimization.stage": 2.0}, ""},
		{"parameter offload (ZeRO-3)", j, base(func(e *Evaluation) { e.Offload = "params" }),
			map[string]any{"zero_optimization.offload_param.device": "cpu"}, ""},
		{"ZeRO-2/3 with a pipeline (pipe/engine.py:76-77)", j, base(func(e *Evaluation) { e.PP, e.DP = 2, 8; e.GradAccum = 16 }), nil, "zero=3 with pp=2"},
		{"nvme needs its mount (zero/offload_config.py nvme_path)", j, base(func(e *Evaluation) { e.Offload = "nvme" }), nil, "nvme_path"},
		{"no FP8 in a ds_config", Job{GlobalBatch: 256, Precision: FP8}, base(nil), nil, "precision fp8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			err := RenderDeepSpeed(&b, c.j, c.e)
			if c.err != "" {
				var fe *FormatError
				if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.err) || b.Len() != 0 {
					t.Fatalf("want a FormatError with %q and no output, got %v %q", c.err, err, b.String())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			for k, want := range c.want {
				var v any = doc
				for _, part := range strings.Split(k, ".") {
					m, _ := v.(map[string]any)
					v = m[part]
				}
				if v != want {
					t.Errorf("%s = %v, want %v in\n%s", k, v, want, b.String())
				}
			}
			if _, both := doc["fp16"]; both && doc["bf16"] != nil {
				t.Errorf("bf16 and fp16 both set:\n%s", b.String())
			}
		})
	}
}
