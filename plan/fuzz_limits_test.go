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
