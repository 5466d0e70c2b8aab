// Package planjson reads the plan JSON files `trainrun run` is handed
// (`--plan FILE`, and TRAINRUN_PLAN, which `trainrun submit` exports): the
// file is read through safefs with a size cap, and the layout's fields are
// checked before any of them reaches a rank's environment (review t4, F2:
// a recompute of "none\nEVIL=1" reached every rank's TRAINRUN_RECOMPUTE).
package planjson

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/trainrun/trainrun/internal/safefs"
	"github.com/trainrun/trainrun/plan"
)

// MaxBytes bounds a plan file: `trainrun plan --format json` writes a few
// KiB (its candidates and rejections included, well under 1 MiB).
const MaxBytes = 4 << 20

// File is the subset of `trainrun plan --format json` that `run` needs.
type File struct {
	Plan   *plan.Evaluation `json:"plan"`
	Inputs *Inputs          `json:"inputs"` // nil: the file has none (an older plan, or one written by hand)
}

// Inputs is the part of a plan file's "inputs" (PRODUCT.md: "The plan JSON
// carries its inputs") that run's framework flags ({megatron_args} and its
// kin) need; Model is nil when the inputs name none.
type Inputs struct {
	Model       *plan.Model `json:"model"`
	SeqLen      int         `json:"seq_len"`
	GlobalBatch int         `json:"global_batch"`
	Precision   string      `json:"precision"`
	Stack       string      `json:"stack"`
	Finetune    string      `json:"finetune"`
	GPU         string      `json:"gpu"` // the catalog GPU it was planned for (a resize predicts on it when the run has no other)
}

// ReadFile reads a plan file the user named (--plan): a regular file (no
// FIFO, device or final symbolic link) of at most MaxBytes.
func ReadFile(path string) ([]byte, error) {
	return safefs.ReadFile(path, MaxBytes)
}

// ReadSubmitted reads the plan TRAINRUN_PLAN names, which `trainrun
// submit` wrote: it must be the user's own file, not writable by group or
// others, in a directory of the user's own that others cannot write, since
// another user who could replace it would choose the job's layout.
func ReadSubmitted(path string) ([]byte, error) {
	if err := safefs.CheckOwnDir(filepath.Dir(path), "TRAINRUN_PLAN's directory"); err != nil {
		return nil, err
	}
	return safefs.ReadOwnFile(path, "TRAINRUN_PLAN", MaxBytes)
}

// Decode parses b and checks the plan's layout (Check); a "plan" of null
// (nothing fitted) decodes to a nil Plan without error.
func Decode(b []byte) (*File, error) {
	var pf File
	if err := json.Unmarshal(b, &pf); err != nil {
		return nil, fmt.Errorf("not the JSON of 'trainrun plan --format json': %v", err)
	}
	if pf.Plan != nil {
		if err := Check(pf.Plan.Layout); err != nil {
			return nil, err
		}
	}
	return &pf, nil
}

// The values PRODUCT.md gives the layout's string fields.
var (
	recomputes = []string{"", "none", "selective", "full"}
	offloads   = []string{"", "none", "optimizer", "params", "nvme"}
)

// maxDegree bounds every count of a layout: far above any real job, far
// below what overflows a product of them.
const maxDegree = 1 << 20

// Check refuses a layout whose fields are out of their ranges: a string
// field not one of its values, a degree or count negative or absurd.
func Check(l plan.Layout) error {
	if !slices.Contains(recomputes, l.Recompute) {
		return fmt.Errorf("recompute %q: accepted none, selective, full", l.Recompute)
	}
	if !slices.Contains(offloads, l.Offload) {
		return fmt.Errorf("offload %q: accepted none, optimizer, params, nvme", l.Offload)
	}
	if l.Zero < 0 || l.Zero > 3 {
		return fmt.Errorf("zero=%d: accepted 0-3", l.Zero)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"tp", l.TP}, {"pp", l.PP}, {"vpp", l.VPP}, {"cp", l.CP}, {"ep", l.EP}, {"etp", l.ETP}, {"dp", l.DP},
		{"micro_batch", l.MicroBatch}, {"grad_accum", l.GradAccum}, {"recompute_layers", l.RecomputeLayers}} {
		if f.v < 0 || f.v > maxDegree {
			return fmt.Errorf("%s=%d: accepted 0-%d", f.name, f.v, maxDegree)
		}
	}
	return nil
}

// The environment names of a job's size range (issue 34): trainrun submit
// exports them when --min-gpus < --max-gpus leaves a range of whole-node
// sizes; the job's controller may grow or shrink data parallelism within
// it at a requeue.
const (
	MinGPUsEnv = "TRAINRUN_MIN_GPUS"
	MaxGPUsEnv = "TRAINRUN_MAX_GPUS"
)
