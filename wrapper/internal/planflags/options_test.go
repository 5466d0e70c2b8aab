package planflags

import (
	"strings"
	"testing"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

func TestModelNameOfPath(t *testing.T) {
	cases := []struct{ in, want string }{
		{"/models/Meta-Llama-3-70B/config.json", "Meta-Llama-3-70B"},
		{"/tmp/qwen2.5-72b.json", "qwen2.5-72b"},
		{"cfg/mixtral.JSON", "mixtral.JSON"},
	}
	for _, c := range cases {
		if got := modelNameOfPath(c.in); got != c.want {
			t.Errorf("modelNameOfPath(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParseTokens(t *testing.T) {
	cases := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"1e12", 1e12, true}, {"2T", 2e12, true}, {"300B", 300e9, true}, {"1.5t", 1.5e12, true}, {"500M", 500e6, true},
		{"4096", 4096, true}, {"10k", 10e3, true}, {"", 0, false}, {"T", 0, false}, {"-1T", 0, false}, {"2X", 0, false}, {"inf", 0, false},
	}
	for _, c := range cases {
		got, err := ParseTokens(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseTokens(%q) = %g, %v; want %g ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestParseFinetune(t *testing.T) {
	cases := []struct {
		in   string
		want string // canonical spec; "" = refused
	}{
		{"full", "full"}, {"lora", "lora:16"}, {"lora:64", "lora:64"}, {"LoRA:8", "lora:8"}, {"lora:0", ""}, {"lora:x", ""},
		{"qlora", "qlora:16"}, {"qlora:64:adamw32", "qlora:64:adamw32"}, {"lora:8:q_proj,v_proj", "lora:8:q,v"},
		{"lora:8:all", "lora:8"}, {"prefix", "prefix:20"}, {"prompt:100", "prompt:100"}, {"ia3", "ia3"},
		{"lora:9223372036854775807", ""}, {"lora:65537", ""}, {"prefix:0", ""}, {"ia3:4", ""}, {"lora:8:qq", ""}, {"qlora:8:adamw", ""},
	}
	for _, c := range cases {
		got, err := ParseFinetune(c.in)
		if (err == nil) != (c.want != "") || (err == nil && got.String() != c.want) {
			t.Errorf("ParseFinetune(%q) = %s, %v; want %q", c.in, got, err, c.want)
		}
		if err != nil && !strings.Contains(err.Error(), "--finetune") {
			t.Errorf("ParseFinetune(%q): %v does not name the flag", c.in, err)
		}
	}
}

func TestParseFix(t *testing.T) {
	p, err := ParseFix("tp=8, pp=4,vpp=2,cp=1,ep=1,dp=2,mbs=1,recompute=selective,zero=1,sp=true,offload=none")
	if err != nil {
		t.Fatal(err)
	}
	if *p.TP != 8 || *p.PP != 4 || *p.VPP != 2 || *p.CP != 1 || *p.EP != 1 || *p.DP != 2 || *p.MicroBatch != 1 ||
		*p.Recompute != "selective" || *p.Zero != 1 || !*p.SP || *p.Offload != "none" {
		t.Errorf("parsed %+v", p)
	}
	if p, _ := ParseFix(""); p.TP != nil || p.Zero != nil || p.SP != nil {
		t.Errorf("empty --fix pins something: %+v", p)
	}
	for _, bad := range []string{"tp", "tp=0", "tp=2,tp=4", "zero=4", "sp=maybe", "recompute=some", "offload=disk", "foo=1"} {
		if _, err := ParseFix(bad); err == nil || exitcode.Of(err) != exitcode.Usage {
			t.Errorf("ParseFix(%q): err %v, want a usage error", bad, err)
		}
	}
}
