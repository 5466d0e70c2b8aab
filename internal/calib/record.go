package calib

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/trainrun/trainrun/internal/atomicfile"
	"github.com/trainrun/trainrun/internal/safefs"
)

// Record is one observation line: the plan a run trained (the object
// `trainrun plan --format json` prints), what was measured, and where.
// Fields only grow (PRODUCT.md, "Observations").
type Record struct {
	Plan     json.RawMessage   `json:"plan"`
	Observed Observed          `json:"observed"`
	Argv     []string          `json:"argv,omitempty"` // trainrun plan arguments that reproduce the plan (records written by hand)
	GPU      string            `json:"gpu,omitempty"`
	Nodes    int               `json:"nodes,omitempty"`
	Stack    string            `json:"stack,omitempty"`
	Software map[string]string `json:"software,omitempty"`
	Job      string            `json:"job,omitempty"` // Slurm job id (and run name)
	At       time.Time         `json:"at"`
	Source   string            `json:"source,omitempty"` // where a hand-written record's figure comes from
	Tune     *Trial            `json:"tune,omitempty"`   // set when the layout ran as a trial of trainrun run --tune
}

// Trial says that a record is one candidate of trainrun run --tune: which of
// the candidates it was, whether the run went on with it, and, for one that
// failed (out of memory, a crash, a hang, over the budget), why: such a
// record has no step time and is not a measurement the planner reads.
type Trial struct {
	Index     int     `json:"index"`             // 1-based, in the planner's order
	Of        int     `json:"of"`                // candidates in the tune
	Steps     int     `json:"steps"`             // steps asked of each candidate
	Chosen    bool    `json:"chosen"`            // the run trained with this layout
	Failed    string  `json:"failed,omitempty"`  // why the candidate was dropped ("" = measured)
	Predicted float64 `json:"predicted_s"`       // the planner's step time for it, seconds
	Seconds   float64 `json:"seconds,omitempty"` // the trial's wall time, launch to end
}

// Measured says whether the record carries a step time the planner can use:
// every record but a failed tune trial.
func (r Record) Measured() bool { return r.Tune == nil || r.Tune.Failed == "" }

// Observed is the measurement.
type Observed struct {
	StepS      float64  `json:"step_s"`           // median steady step time, seconds
	Steps      int      `json:"steps"`            // steps behind the median
	Spread     float64  `json:"spread"`           // (p90 − p10) / median of the step times
	PeakMemGiB *float64 `json:"peak_mem_gib"`     // where the trainer reports it (metric peak_mem_gib)
	Warmup     int      `json:"warmup,omitempty"` // steps left out at the start
}

// StoreFile is the observations file's name, in a checkpoint store's
// .trainrun directory and at the top of a site calibration.
const StoreFile = "observations.jsonl"

// RunStorePath is a run's own observations file.
func RunStorePath(ckptDir string) string { return filepath.Join(ckptDir, ".trainrun", StoreFile) }

// SitePath is a site calibration's observations file.
func SitePath(dir string) string { return filepath.Join(dir, StoreFile) }

// maxStoreBytes bounds a store read into memory: ~10 KiB a record, 25,000 records.
const maxStoreBytes = 256 << 20

// Validate says what is wrong with a record, naming the field and value.
func (r Record) Validate() error {
	switch s := r.Observed.StepS; {
	case len(bytes.TrimSpace(r.Plan)) == 0 || string(bytes.TrimSpace(r.Plan)) == "null":
		return errors.New(`"plan" is missing: give the object trainrun plan --format json prints for the layout that ran`)
	case !r.Measured() && s == 0:
		return nil // a failed tune trial: recorded, with no step time
	case math.IsNaN(s) || math.IsInf(s, 0) || s <= 0:
		return fmt.Errorf(`"observed.step_s" %v: give the median steady step time in seconds, > 0`, s)
	case r.Observed.Steps < 0:
		return fmt.Errorf(`"observed.steps" %d: must be ≥ 0`, r.Observed.Steps)
	}
	return nil
}

// Append adds one record to the JSON-lines file at path durably (one
// O_APPEND write, then fsync), creating its directory. A link at path is
// refused: the file may be in a directory other users can write to.
func Append(path string, r Record) error {
	if err := r.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("observation: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("observations %s: %w", path, err)
	}
	// Runs of a team append to one site calibration at once: locked.
	if err := atomicfile.AppendLine(path, b, 0o644, true); err != nil {
		return fmt.Errorf("observations: %w", err)
	}
	return nil
}

// Key identifies a record's content, for imports that must not count one
// observation twice. The time is left out: a record written by hand gets the
// time of its import.
func (r Record) Key() string {
	r.At = time.Time{}
	b, _ := json.Marshal(r)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// Load reads every record of a JSON-lines file; a missing file is none. A
// line that does not parse or validate is returned in bad with its number
// (a torn last line from a kill is one), not guessed at.
func Load(path string) (recs []Record, bad []error, err error) {
	b, err := safefs.ReadFile(path, maxStoreBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("observations %s: %w", path, err)
	}
	recs, bad = Parse(b, path)
	return recs, bad, nil
}

// Parse reads records from JSON lines (or one JSON array of records); name
// labels the errors.
func Parse(b []byte, name string) (recs []Record, bad []error) {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '[' {
		var all []Record
		if err := json.Unmarshal(t, &all); err != nil {
			return nil, []error{fmt.Errorf("%s: %w", name, err)}
		}
		for i, r := range all {
			if err := r.Validate(); err != nil {
				bad = append(bad, fmt.Errorf("%s: record %d: %w", name, i+1, err))
				continue
			}
			recs = append(recs, r)
		}
		return recs, bad
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			bad = append(bad, fmt.Errorf("%s:%d: %w", name, n, err))
			continue
		}
		if err := r.Validate(); err != nil {
			bad = append(bad, fmt.Errorf("%s:%d: %w", name, n, err))
			continue
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		bad = append(bad, fmt.Errorf("%s: %w", name, err))
	}
	return recs, bad
}

// Steady summarises a trainer's progress samples (step number, time) into
// the median steady step time: the first warm-up steps (compilation, data
// loader start, the first NCCL calls) are left out, then each pair of
// consecutive samples gives the mean step time between them.
type Steady struct {
	samples []sample
}

type sample struct {
	step int64
	at   time.Time
}

// Add records that the trainer reported step at time at. A step that goes
// back (a restart resumed from a checkpoint) starts a new series.
func (s *Steady) Add(step int64, at time.Time) {
	if n := len(s.samples); n > 0 && step <= s.samples[n-1].step {
		s.samples = s.samples[:0]
	}
	s.samples = append(s.samples, sample{step, at})
}

// Span is how many steps the samples cover: the last reported step minus
// the first (0 with fewer than two samples).
func (s *Steady) Span() int64 {
	if len(s.samples) < 2 {
		return 0
	}
	return s.samples[len(s.samples)-1].step - s.samples[0].step
}

// warmupSteps is how many steps after the first report are warm-up.
const warmupSteps = 2

// MinSteps is how many steady steps a summary needs.
const MinSteps = 3

// Summary returns the observed step time, or ok false with why not.
func (s *Steady) Summary() (Observed, bool, string) {
	if len(s.samples) == 0 {
		return Observed{}, false, "the trainer reported no progress (Checkpointer.report_progress), so no step time was measured"
	}
	first := s.samples[0].step
	var per []float64
	steps := 0
	for i := 1; i < len(s.samples); i++ {
		a, b := s.samples[i-1], s.samples[i]
		if a.step < first+warmupSteps {
			continue
		}
		ds := b.step - a.step
		dt := b.at.Sub(a.at).Seconds()
		if ds <= 0 || dt <= 0 {
			continue
		}
		for range ds {
			per = append(per, dt/float64(ds))
		}
		steps += int(ds)
	}
	if steps < MinSteps {
		return Observed{}, false, fmt.Sprintf("the trainer reported %d step(s) after %d warm-up steps, fewer than the %d needed for a steady step time", steps, warmupSteps, MinSteps)
	}
	sort.Float64s(per)
	med := per[len(per)/2]
	if len(per)%2 == 0 {
		med = (per[len(per)/2-1] + per[len(per)/2]) / 2
	}
	p10, p90 := per[int(0.1*float64(len(per)-1))], per[int(math.Ceil(0.9*float64(len(per)-1)))]
	return Observed{StepS: med, Steps: steps, Spread: (p90 - p10) / med, Warmup: warmupSteps}, true, ""
}
