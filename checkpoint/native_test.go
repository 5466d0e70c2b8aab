package checkpoint

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeTree creates files (path -> content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, p)
		must(t, os.MkdirAll(filepath.Dir(full), 0o755))
		must(t, os.WriteFile(full, []byte(c), 0o644))
	}
}

// The layouts are the frameworks' own file names: Megatron-LM
// (megatron/training/checkpointing.py: iter_%07d, mp_rank_XX, the tracker),
// torch.distributed.checkpoint (.metadata, __R_0.distcp), the Hugging Face
// Trainer (checkpoint-N with config.json, safetensors shards and their index,
// trainer_state.json) and Lightning (ModelCheckpoint's epoch=E-step=S.ckpt).
func TestNativeLayouts(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	writeTree(t, s.Dir(), map[string]string{
		"latest_checkpointed_iteration.txt":               "100\n",
		"iter_0000100/mp_rank_00/model_optim_rng.pt":      "m100",
		"iter_0000100/mp_rank_01/model_optim_rng.pt":      "m100b",
		"iter_0000200/mp_rank_00/model_optim_rng.pt":      "m200", // being saved: tracker still says 100
		"dcp-10/.metadata":                                "meta",
		"dcp-10/__0_0.distcp":                             "d0",
		"dcp-20/__0_0.distcp":                             "d0", // no .metadata yet: not recognisable, left out
		"checkpoint-500/config.json":                      "{}",
		"checkpoint-500/model.safetensors":                "w",
		"checkpoint-500/trainer_state.json":               "{}",
		"checkpoint-600/config.json":                      "{}",
		"checkpoint-600/model-00001-of-00002.safetensors": "w1",
		"checkpoint-600/model.safetensors.index.json":     `{"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`,
		"checkpoint-600/trainer_state.json":               "{}",
		"epoch=0-step=100.ckpt":                           "lightning",
		"tensorboard/events.out":                          "not a checkpoint",
	})
	list, err := s.List()
	must(t, err)
	got := map[string]string{}
	for _, in := range list {
		got[in.Tag] = string(in.Kind) + " " + string(in.State)
		if in.Note == "" {
			t.Errorf("%s: no note stating the weaker guarantee", in.Tag)
		}
	}
	want := map[string]string{
		"iter_0000100":          "megatron native",
		"iter_0000200":          "megatron native-incomplete",
		"dcp-10":                "dcp native",
		"checkpoint-500":        "hf native",
		"checkpoint-600":        "hf native-incomplete",
		"epoch=0-step=100.ckpt": "lightning native",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("List =\n%v\nwant\n%v", got, want)
	}
	// A native checkpoint can be committed (hashed, fsynced, made latest)...
	m, err := s.Commit(t.Context(), "iter_0000100", 0)
	must(t, err)
	if m.Kind != KindMegatron || m.WorldSize != 0 || len(m.Files) != 2 {
		t.Fatalf("manifest = %+v", m)
	}
	// ...but not before its framework marks it complete.
	for _, tag := range []string{"iter_0000200", "checkpoint-600"} {
		if _, err := s.Commit(t.Context(), tag, 0); err == nil || !strings.Contains(err.Error(), "completion marker is missing") {
			t.Errorf("Commit(%s) = %v", tag, err)
		}
	}
	_, err = s.Commit(t.Context(), "checkpoint-500", 0)
	must(t, err)
	r, err := s.Latest(t.Context(), Checksums)
	must(t, err)
	if r.Tag != "checkpoint-500" { // step 500 > 100
		t.Fatalf("Latest = %s", r.Tag)
	}
	if _, err := s.Commit(t.Context(), "tensorboard", 0); err == nil || !strings.Contains(err.Error(), "no done markers") {
		t.Fatalf("Commit(tensorboard) = %v", err)
	}
}
