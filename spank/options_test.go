package spank

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/plan/policy"
)

func policyConfig(t *testing.T, text string) *Config {
	t.Helper()
	p, err := policy.Parse(strings.NewReader(text), "trainrun.conf")
	if err != nil {
		t.Fatal(err)
	}
	return &Config{Policy: p}
}

const testPolicy = `CkptRoots=/lustre,/scratch
CkptSignal=USR2
PartitionName=locked UserOverride=none InjectEnv=no
PartitionName=open InjectEnv=no UserOverride=all
`

func TestOptionsTable(t *testing.T) {
	seen := map[string]bool{}
	for i, o := range Options {
		if !strings.HasPrefix(o.Name, "train-") {
			t.Errorf("option %q does not begin with train- (PRODUCT.md)", o.Name)
		}
		if !strings.HasPrefix(o.Env, "TRAINRUN_") {
			t.Errorf("--%s: twin %q does not begin with TRAINRUN_", o.Name, o.Env)
		}
		if seen[o.Name] || seen[o.Env] {
			t.Errorf("--%s: duplicate name or twin", o.Name)
		}
		seen[o.Name], seen[o.Env] = true, true
		if OptionIndex("--"+o.Name) != i {
			t.Errorf("OptionIndex(--%s) = %d, want %d", o.Name, OptionIndex(o.Name), i)
		}
		// The example of each option is valid under the default policy.
		c := &Config{Policy: policy.Default()}
		if err := Validate(c, "", i, o.Example); err != nil {
			t.Errorf("--%s=%s: %v", o.Name, o.Example, err)
		}
	}
}

func TestValidate(t *testing.T) {
	c := policyConfig(t, testPolicy)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfgPath, []byte(`{"model_type":"llama","num_hidden_layers":2,"hidden_size":64,"intermediate_size":128,"num_attention_heads":4,"num_key_value_heads":4,"vocab_size":1000,"max_position_embeddings":128}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, opt, value, partition string
		wantErr                     string // "" = valid
	}{
		{"preset model", "train-model", "llama3-70b", "", ""},
		{"preset model any case", "train-model", "Llama3_70B", "", ""},
		{"unknown model", "train-model", "llama9", "", `unknown model "llama9"`},
		{"config.json model", "train-model", cfgPath, "", ""},
		{"missing config.json", "train-model", "/nonexistent/config.json", "", "cannot read the model config"},
		{"layout", "train-layout", "tp=8,pp=4,recompute=selective", "", ""},
		{"layout bad key", "train-layout", "tq=2", "", `unknown key "tq"`},
		{"layout zero", "train-layout", "tp=0", "", `tp="0": want a positive integer`},
		{"layout no =", "train-layout", "tp8", "", `"tp8" is not key=value`},
		{"ckpt under root", "train-ckpt", "/lustre/me/%j", "", ""},
		{"ckpt outside roots", "train-ckpt", "/home/me/ckpt", "", "not under the site's CkptRoots=/lustre,/scratch"},
		{"ckpt relative", "train-ckpt", "ckpt", "", "want an absolute path"},
		{"tune", "train-tune", "4:10", "", ""},
		{"tune off", "train-tune", "none", "locked", ""},
		{"tune bad steps", "train-tune", "4:3", "", `STEPS "3" must be a whole number of at least 6`},
		{"tune bad K", "train-tune", "x", "", `want none, K or K:STEPS`},
		{"tune locked", "train-tune", "2", "locked", "does not let users override Tune"},
		{"calibration", "train-calibration", "/shared/cal", "", ""},
		{"calibration relative", "train-calibration", "cal", "", "absolute"},
		{"calibration locked", "train-calibration", "/shared/cal", "locked", "does not let users override Calibration"},
		{"ckpt dotdot", "train-ckpt", "/lustre/../etc", "", "want an absolute path"},
		{"ckpt locked partition", "train-ckpt", "/lustre/x", "locked", "does not let users override CkptDir"},
		{"signal", "train-ckpt-signal", "SIGTERM", "", ""},
		{"signal with lead", "train-ckpt-signal", "USR1@90s", "", ""},
		{"signal uncatchable", "train-ckpt-signal", "KILL", "", "SIGKILL cannot be caught"},
		{"signal bad lead", "train-ckpt-signal", "USR2@soon", "", "not a duration"},
		{"signal empty lead", "train-ckpt-signal", "USR2@", "", "duration"},
		{"signal same as policy on locked partition", "train-ckpt-signal", "USR2", "locked", ""},
		{"signal other on locked partition", "train-ckpt-signal", "TERM", "locked", "does not let users override CkptSignal"},
		{"nccl off", "train-nccl", "off", "", ""},
		{"nccl bad", "train-nccl", "maybe", "", "accepted: on, off"},
		{"nccl on where InjectEnv=no and locked", "train-nccl", "on", "locked", "does not let users override InjectEnv"},
		{"nccl on where InjectEnv=no and open", "train-nccl", "on", "open", ""},
		{"batch", "train-batch", "1024x8192", "", ""},
		{"batch without x", "train-batch", "1024", "", "want GLOBALxSEQLEN: the global batch in sequences, 'x', the sequence length in tokens (e.g. 1024x8192)"},
		{"batch zero", "train-batch", "0x4096", "", `global batch "0" is not a positive whole number; want GLOBALxSEQLEN, e.g. 1024x8192`},
		{"batch unit", "train-batch", "256x4k", "", `sequence length "4k" is not a positive whole number`},
		{"batch swapped separator", "train-batch", "256*4096", "", "want GLOBALxSEQLEN"},
		{"explain", "train-explain", "1", "", ""},
		{"explain twin bad", "train-explain", "perhaps", "", "accepted: 1, yes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := OptionIndex(tc.opt)
			if i < 0 {
				t.Fatalf("no option %s", tc.opt)
			}
			err := Validate(c, tc.partition, i, tc.value)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("rejected: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Errorf("accepted; want an error containing %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Errorf("err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	c := policyConfig(t, testPolicy)
	env := map[string]string{"TRAINRUN_CKPT_SIGNAL": "TERM@2m", "TRAINRUN_MODEL": "llama3-8b", "TRAINRUN_NCCL": "off"}
	getenv := func(k string) string { return env[k] }
	// An option given beats its twin; twins fill the rest.
	r, err := Resolve(c, "", map[string]string{"train-model": "llama3-70b", "train-ckpt": "/scratch/%u/%x"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if r.Model != "llama3-70b" || r.Signal != "TERM" || r.Lead != 2*time.Minute || r.NCCL || !r.Inject || r.CkptDir != "/scratch/%u/%x" {
		t.Errorf("got %+v", *r)
	}
	// Policy defaults when nothing is given.
	r, err = Resolve(c, "open", nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if r.Inject || r.Signal != "USR2" || r.Lead != 5*time.Minute {
		t.Errorf("partition open: got %+v, want InjectEnv=no, USR2, 5m", *r)
	}
	// Twin errors name the variable and value.
	env["TRAINRUN_NCCL"] = "sometimes"
	_, err = Resolve(c, "", nil, getenv)
	if err == nil || !strings.Contains(err.Error(), "TRAINRUN_NCCL=sometimes: accepted: on, off") {
		t.Errorf("err = %v", err)
	}
	// --train-batch and its twin TRAINRUN_BATCH.
	env["TRAINRUN_NCCL"] = "off"
	env["TRAINRUN_BATCH"] = " 256x4096"
	r, err = Resolve(c, "", nil, getenv)
	if err != nil || r.Batch() != "256x4096" || r.Global != 256 || r.SeqLen != 4096 {
		t.Errorf("TRAINRUN_BATCH=' 256x4096': %+v, %v", r, err)
	}
	r, err = Resolve(c, "", map[string]string{"train-batch": "1024x8192"}, getenv)
	if err != nil || r.Global != 1024 || r.SeqLen != 8192 {
		t.Errorf("--train-batch=1024x8192 over TRAINRUN_BATCH: %+v, %v", r, err)
	}
	env["TRAINRUN_BATCH"] = "256"
	if _, err = Resolve(c, "", nil, getenv); err == nil || !strings.Contains(err.Error(), "TRAINRUN_BATCH=256: want GLOBALxSEQLEN") {
		t.Errorf("TRAINRUN_BATCH=256: err = %v", err)
	}
	if _, err = Resolve(c, "", map[string]string{"train-batch": "x8192"}, func(string) string { return "" }); err == nil ||
		!strings.Contains(err.Error(), `--train-batch=x8192: global batch "" is not a positive whole number`) {
		t.Errorf("--train-batch=x8192: err = %v", err)
	}
	delete(env, "TRAINRUN_BATCH")
	// Idempotent: resolving twice gives the same.
	a, _ := Resolve(c, "", map[string]string{"train-layout": "tp=2"}, func(string) string { return "" })
	b, _ := Resolve(c, "", map[string]string{"train-layout": "tp=2"}, func(string) string { return "" })
	if !reflect.DeepEqual(a, b) {
		t.Errorf("not idempotent: %+v vs %+v", *a, *b)
	}
}
