package plan

import (
	"bytes"
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

// FuzzParseDegrees: no layout string panics or overflows; an accepted one
// is within the limits.
func FuzzParseDegrees(f *testing.F) {
	for _, s := range []string{"tp=8,pp=2", "tp=8,pp=2305843009213693953", "tp=2,pp=2,vpp=4,cp=2,ep=8,dp=16,mbs=2,grad_accum=8,recompute=full"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := parseDegrees(s)
		if err != nil {
			return
		}
		if err := CheckLayoutLimits(l); err != nil {
			t.Fatalf("parseDegrees(%q) accepted %+v: %v", s, l, err)
		}
	})
}
