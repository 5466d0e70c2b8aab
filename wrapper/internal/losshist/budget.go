package losshist

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/trainrun/trainrun/internal/atomicfile"
	"github.com/trainrun/trainrun/internal/safefs"
)

// BudgetFile is the run's training budget beside its history, in the
// store's .trainrun directory: what `trainrun run` knew of it (--tokens,
// or --train-steps and the plan's --global-batch × --seq-len), so that
// `trainrun forecast` forecasts at the run's own budget without --tokens.
const BudgetFile = "budget.json"

// Budget is a run's training budget: its tokens, its optimizer steps, or
// both (0: not known), and where they came from, in words.
type Budget struct {
	Tokens float64 `json:"tokens,omitempty"`
	Steps  int64   `json:"steps,omitempty"`
	From   string  `json:"from"`
}

// BudgetPath is the budget file of the store at ckptDir.
func BudgetPath(ckptDir string) string { return filepath.Join(ckptDir, ".trainrun", BudgetFile) }

// WriteBudget records b in the store at ckptDir (atomically; the latest
// run's budget replaces an earlier one).
func WriteBudget(ckptDir string, b Budget) error {
	p := BudgetPath(ckptDir)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("run budget: %w", err)
	}
	return atomicfile.WriteJSON(p, b, 0o644)
}

// ReadBudget reads the store's budget; ok is false when it has none.
func ReadBudget(ckptDir string) (b Budget, ok bool, err error) {
	raw, err := safefs.ReadFile(BudgetPath(ckptDir), 64<<10)
	if errors.Is(err, fs.ErrNotExist) {
		return Budget{}, false, nil
	}
	if err != nil {
		return Budget{}, false, fmt.Errorf("run budget: %w", err)
	}
	if err := json.Unmarshal(raw, &b); err != nil || !(b.Tokens >= 0) || math.IsInf(b.Tokens, 0) || b.Steps < 0 || b.Tokens == 0 && b.Steps == 0 {
		return Budget{}, false, fmt.Errorf("run budget %s: want {\"tokens\": N, \"steps\": N, \"from\": ...} with a positive tokens or steps (written by trainrun run; remove it, or pass --tokens)", BudgetPath(ckptDir))
	}
	return b, true, nil
}

// In is the budget in the history's unit: steps when the trainer reports
// no tokens (bySteps; Points), else tokens; where only the steps are
// known, at the tokens per step the history shows (its last report with
// tokens). ok is false when the budget cannot be put in that unit; how
// says how it was (for a message).
func (b Budget) In(es []Entry, bySteps bool) (v float64, how string, ok bool) {
	switch {
	case bySteps && b.Steps > 0:
		return float64(b.Steps), fmt.Sprintf("%d steps (%s)", b.Steps, b.From), true
	case bySteps:
		return 0, "", false
	case b.Tokens > 0:
		return b.Tokens, fmt.Sprintf("%.4g tokens (%s)", b.Tokens, b.From), true
	}
	for i := len(es) - 1; i >= 0; i-- {
		if e := es[i]; e.Tokens > 0 && e.Step > 0 {
			perStep := float64(e.Tokens) / float64(e.Step)
			return float64(b.Steps) * perStep, fmt.Sprintf("%d steps (%s) at the %.4g tokens per step the history shows", b.Steps, b.From, perStep), true
		}
	}
	return 0, "", false
}
