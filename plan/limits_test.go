package plan

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// hfWith is testdata/hf/llama3-70b.json (Meta's config.json) with one
// field's value replaced.
func hfWith(t testing.TB, field, value string) []byte {
	b, err := os.ReadFile("testdata/hf/llama3-70b.json")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, `"`+field+`"`) {
			line = `  "` + field + `": ` + value + map[bool]string{true: ",", false: ""}[strings.HasSuffix(line, ",")]
		}
		out = append(out, line)
	}
	return []byte(strings.Join(out, "\n"))
}

// Issue 12 finding 6: num_hidden_layers 2^24 was accepted and took 18 s and
// 520 MB to plan. Every capped field is refused one past its cap, naming it.
func TestConfigLimitsRefuse(t *testing.T) {
	for _, tc := range []struct{ field, value, name string }{
		{"num_hidden_layers", "16777216", "layers"},
		{"num_hidden_layers", "1025", "layers"},
		{"hidden_size", "1099511627776", "hidden"}, // 2^40, the old ceiling
		{"num_attention_heads", "2048", "heads"},
		{"intermediate_size", "2097152", "ffn"},
		{"vocab_size", "8388608", "vocab"},
	} {
		m, err := ParseHFConfig(bytes.NewReader(hfWith(t, tc.field, tc.value)), "config.json")
		if err == nil {
			t.Errorf("%s=%s accepted (%d layers): want an error naming the limit", tc.field, tc.value, m.Layers)
			continue
		}
		if !strings.Contains(err.Error(), tc.name+" = ") && !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), "config.json") {
			t.Errorf("%s=%s: error %q does not name the file and the field", tc.field, tc.value, err)
		}
	}
	// at the cap it is accepted
	if _, err := ParseHFConfig(bytes.NewReader(hfWith(t, "num_hidden_layers", "1024")), "config.json"); err != nil {
		t.Errorf("1024 layers refused: %v", err)
	}
}

func TestConfigSizeLimit(t *testing.T) {
	big := append([]byte(`{"model_type": "llama", "x": "`), bytes.Repeat([]byte("a"), MaxConfigBytes)...)
	big = append(big, `"}`...)
	_, err := ParseHFConfig(bytes.NewReader(big), "big.json")
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("a %d-byte config.json: %v; want an error naming the size limit", len(big), err)
	}
	if strings.Contains(err.Error(), "aaaa") {
		t.Errorf("the error quotes the file's contents: %.200s", err)
	}
}

// The layout-degree overflow of issue 12: tp=8,pp=2^61+1 multiplied to 8.
func TestDegreeOverflowRefused(t *testing.T) {
	for _, s := range []string{"tp=8,pp=2305843009213693953", "tp=1048576,pp=2", "dp=1048577", "tp=1024,pp=1024,dp=1024,cp=1024,ep=1024", "mbs=9999999"} {
		if l, err := parseDegrees(s); err == nil {
			t.Errorf("parseDegrees(%q) = %+v: want an error naming the limit", s, l)
		}
	}
	if _, err := parseDegrees("tp=8,pp=16,dp=8192"); err != nil {
		t.Errorf("a 1M-GPU layout refused: %v", err)
	}
}

func TestBatchLimits(t *testing.T) {
	for _, s := range []string{"16777217x8192", "1024x67108865", "9223372036854775807x1"} {
		if _, _, err := ParseBatch(s); err == nil {
			t.Errorf("ParseBatch(%q) accepted", s)
		}
	}
}

func TestDivisors(t *testing.T) {
	for n := 1; n <= 3000; n++ {
		var want []int
		for i := 1; i <= n; i++ {
			if n%i == 0 {
				want = append(want, i)
			}
		}
		got := divisors(n)
		if len(got) != len(want) {
			t.Fatalf("divisors(%d) = %v, want %v", n, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("divisors(%d) = %v, want %v", n, got, want)
			}
		}
	}
}

// worstModel is the costliest model the caps accept for the search: the
// most layers, and head and expert counts with many divisors.
func worstModel() Model {
	return Model{Name: "worst", Layers: MaxLayers, Hidden: 960, Heads: 960, KVHeads: 960, HeadDim: 1,
		FFN: 3840, FFNType: FFNSwiGLU, Vocab: 32000, Experts: 3840, TopK: 8, MoEFFN: 3840}
}

// TestWorstConfigPlansInBoundedTime: the worst accepted model on 3,840 GPUs
// is searched to the end (the bound, 10 s of CPU for a root process, is
// BenchmarkPlanWorstConfig's to measure; this only checks it finishes).
func TestWorstConfigPlansInBoundedTime(t *testing.T) {
	if err := CheckModelLimits(worstModel()); err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		t.Skip("-short")
	}
	start := time.Now()
	_ = Search(worstModel(), Job{SeqLen: 8192, GlobalBatch: 7680, Precision: BF16}, ClusterOf(mustGPU(t, "h100-sxm"), 3840), SearchOptions{})
	t.Logf("worst model searched in %v", time.Since(start))
}

func BenchmarkPlanWorstConfig(b *testing.B) {
	c := ClusterOf(mustGPU(b, "h100-sxm"), 3840)
	j := Job{SeqLen: 8192, GlobalBatch: 7680, Precision: BF16}
	b.ReportAllocs()
	for b.Loop() {
		_ = Search(worstModel(), j, c, SearchOptions{})
	}
}

// parseDegrees reads a layout with ParsePins (per-degree caps) and
// multiplies its GPU degrees as Pins.Layout does (checkedProduct, capped at
// MaxLayoutGPUs): the one grammar's two checks.
func parseDegrees(s string) (Layout, error) {
	p, err := ParsePins(s)
	if err != nil {
		return Layout{}, err
	}
	l := p.Apply(Layout{TP: 1, PP: 1, VPP: 1, CP: 1, EP: 1, DP: 1, MicroBatch: 1})
	_, err = checkedProduct("tp×pp×cp×ep×dp", l.TP, l.PP, l.CP, l.EP, l.DP)
	return l, err
}
