package plan

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseHFConfig: no config.json panics, and an accepted one is within
// the limits (plan/limits.go), so planning it is bounded. Seeds: every
// config of testdata/hf (published configs, sources in its README).
func FuzzParseHFConfig(f *testing.F) {
	files, _ := filepath.Glob("testdata/hf/*.json")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"model_type": "llama", "num_hidden_layers": 16777216}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseHFConfig(bytes.NewReader(data), "config.json")
		if err != nil {
			return
		}
		if err := CheckModelLimits(m); err != nil {
			t.Fatalf("accepted a model beyond the limits: %v", err)
		}
	})
}

// FuzzParseNCCLConf: no /etc/nccl.conf panics (the plugin reads it as root).
func FuzzParseNCCLConf(f *testing.F) {
	f.Add([]byte("NCCL_IB_HCA=mlx5_0\n# comment\nNCCL_SOCKET_IFNAME = eth0\n"))
	f.Add([]byte("=\n\x00\nNCCL_X"))
	f.Fuzz(func(t *testing.T, data []byte) {
		conf, err := ParseNCCLConf(data)
		if err == nil && len(conf) > len(data) {
			t.Fatalf("%d keys from %d bytes", len(conf), len(data))
		}
	})
}

// FuzzParseJobOpts: the plugin's --train-batch, --train-stack,
// --train-precision and --train-finetune reach a root process (slurmstepd's
// plugin) as user text: no panic, an accepted batch is within the limits,
// and every accepted value reads back as itself from its canonical form.
func FuzzParseJobOpts(f *testing.F) {
	for _, s := range []string{"1024x8192", "lora:16", "qlora:64:q,v:adamw32", "prefix:30", "fsdp:compile", "bf16", "full", "9223372036854775807x1", "lora:-1", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if gb, sl, err := ParseBatch(s); err == nil {
			if CheckBatchLimits(gb, sl) != nil {
				t.Fatalf("%q: accepted %dx%d past the limits", s, gb, sl)
			}
			if g2, s2, err := ParseBatch(fmt.Sprintf("%dx%d", gb, sl)); err != nil || g2 != gb || s2 != sl {
				t.Fatalf("%q: %dx%d reads back as %dx%d (%v)", s, gb, sl, g2, s2, err)
			}
		}
		if st, err := ParseStack(s); err == nil {
			if back, err := ParseStack(string(st)); err != nil || back != st {
				t.Fatalf("%q: stack %q reads back as %q (%v)", s, st, back, err)
			}
		}
		if p, err := ParsePrecision(s); err == nil {
			if back, err := ParsePrecision(string(p)); err != nil || back != p {
				t.Fatalf("%q: precision %q reads back as %q (%v)", s, p, back, err)
			}
		}
		if f, err := ParseFinetuneSpec(s); err == nil {
			if back, err := ParseFinetuneSpec(f.String()); err != nil || back != f || f.Rank > MaxLoRARank || f.Tokens > MaxVirtualTokens {
				t.Fatalf("%q: spec %+v reads back as %+v (%v)", s, f, back, err)
			}
		}
		if r, err := ParseFinetune(s); err == nil {
			canon := "full"
			if r > 0 {
				canon = fmt.Sprintf("lora:%d", r)
			}
			if back, err := ParseFinetune(canon); err != nil || back != r || r < 0 {
				t.Fatalf("%q: rank %d reads back as %d (%v)", s, r, back, err)
			}
		}
	})
}
