package checkpoint

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/trainrun/trainrun/internal/safefs"
)

// Kind says which protocol marks a checkpoint complete.
type Kind string

const (
	// KindTrainrun: the handshake's done.<RANK> markers (the strong guarantee).
	KindTrainrun Kind = "trainrun"
	// KindMegatron: Megatron-LM's iter_NNNNNNN/ directories and its tracker
	// latest_checkpointed_iteration.txt, written by rank 0 after every rank saved.
	KindMegatron Kind = "megatron"
	// KindDCP: PyTorch Distributed Checkpoint; FileSystemWriter.finish renames
	// .metadata into place last, after fsync.
	KindDCP Kind = "dcp"
	// KindHF: a Hugging Face Trainer checkpoint-N/ directory.
	KindHF Kind = "hf"
	// KindLightning: a PyTorch Lightning *.ckpt file.
	KindLightning Kind = "lightning"
)

// The native guarantees are weaker than the handshake's, and the store says so
// (NativeNote): a native marker proves that the framework *believed* its save
// had finished. It does not prove that every rank's files were durable
// (Megatron's tracker and DCP's .metadata are written by rank 0 after a
// barrier, not after each rank's fsync; Hugging Face writes trainer_state.json
// after the weights without fsync; Lightning writes one file in place).
// Committing a native checkpoint fsyncs and hashes what is there at that
// moment, so corruption *after* commit is detected like any other.
var NativeNote = map[Kind]string{
	KindMegatron:  "complete per Megatron's tracker file (rank 0 writes it after a barrier; per-rank durability is not proven)",
	KindDCP:       "complete per DCP's .metadata (written last by the coordinator; per-rank durability is not proven)",
	KindHF:        "complete per Hugging Face's trainer_state.json and weight files (no fsync by the trainer)",
	KindLightning: "a single Lightning file: cannot tell a finished save from a torn one; never committed or pruned by trainrun",
}

const megatronTracker = "latest_checkpointed_iteration.txt"

// megatronTrackerIter reads Megatron's tracker: the iteration, or -1 for
// "release", and ok=false when there is none.
func megatronTrackerIter(storeDir string) (int64, bool) {
	b, err := safefs.ReadFile(filepath.Join(storeDir, megatronTracker), maxSmallFile)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if s == "release" {
		return -1, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// detectNative says whether dir (the checkpoint <tag> in storeDir) is a native
// checkpoint, of which kind, and whether its framework considers it complete.
// kind is "" when dir is not recognisably a checkpoint.
func detectNative(storeDir, tag, dir string) (kind Kind, complete bool) {
	if iter, ok := megatronIter(tag); ok {
		tracked, has := megatronTrackerIter(storeDir)
		switch {
		case !has:
			return KindMegatron, false
		case tag == "release":
			return KindMegatron, tracked == -1
		default:
			return KindMegatron, tracked >= 0 && iter <= tracked
		}
	}
	if exists(filepath.Join(dir, ".metadata")) {
		return KindDCP, true
	}
	hasConfig := exists(filepath.Join(dir, "config.json")) || exists(filepath.Join(dir, "adapter_config.json"))
	hasState := exists(filepath.Join(dir, "trainer_state.json"))
	if hasConfig || hasState {
		return KindHF, hasConfig && hasState && hfWeightsComplete(dir)
	}
	return "", false
}

// megatronIter parses Megatron's directory names: iter_%07d and "release".
func megatronIter(tag string) (int64, bool) {
	if tag == "release" {
		return -1, true
	}
	rest, ok := strings.CutPrefix(tag, "iter_")
	if !ok || len(rest) < 7 || strings.TrimLeft(rest, "0123456789") != "" {
		return 0, false // digits only: "iter_-000001" is no save of Megatron's
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil
}

// hfWeightsComplete: a sharded save lists its shards in an index file, and
// every listed shard must exist; otherwise some weight file must.
func hfWeightsComplete(dir string) bool {
	for _, idx := range []string{"model.safetensors.index.json", "pytorch_model.bin.index.json"} {
		b, err := safefs.ReadFile(filepath.Join(dir, idx), maxManifestBytes)
		if err != nil {
			continue
		}
		var ix struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if json.Unmarshal(b, &ix) != nil || len(ix.WeightMap) == 0 {
			return false
		}
		for _, f := range ix.WeightMap {
			if !exists(filepath.Join(dir, f)) {
				return false
			}
		}
		return true
	}
	for _, pat := range []string{"model*.safetensors", "pytorch_model*.bin", "adapter_model.safetensors", "adapter_model.bin"} {
		if m, _ := filepath.Glob(filepath.Join(dir, pat)); len(m) > 0 {
			return true
		}
	}
	return false
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
