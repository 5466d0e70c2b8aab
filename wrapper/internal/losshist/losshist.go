// Package losshist keeps a run's loss history: rank 0's metrics at each
// reported step, with the tokens seen, in <ckpt-dir>/.trainrun/metrics.jsonl,
// across requeues and restarts, bounded for long runs.
package losshist

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/trainrun/trainrun/internal/atomicfile"
	"github.com/trainrun/trainrun/internal/forecast"
)

// File is the history's name in the store's .trainrun directory.
const File = "metrics.jsonl"

// Path is the history of the store at ckptDir.
func Path(ckptDir string) string { return filepath.Join(ckptDir, ".trainrun", File) }

// Entry is one line: a step's report. Metrics holds the finite values only
// (JSON has no NaN; a NaN loss is a divergence the log reports, not a point
// to fit).
type Entry struct {
	Step    int64              `json:"step"`
	Tokens  int64              `json:"tokens"`
	Time    float64            `json:"time"` // Unix seconds
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

// MaxLines bounds the file: past it the history is compacted (Compact),
// keeping its recent half whole and every other entry of the older half.
// Repeated, that keeps the recent steps dense and older ones ever sparser,
// about log-spaced, which is what a fit in log tokens needs.
const MaxLines = 20000

// Writer appends to a history.
type Writer struct {
	path  string
	lines int
	max   int
}

// Open prepares the history at path (its directory must exist: the store's
// .trainrun); the file itself is created on the first Append.
func Open(path string) *Writer {
	w := &Writer{path: path, max: MaxLines}
	if b, err := os.ReadFile(path); err == nil {
		w.lines = bytes.Count(b, []byte("\n"))
	}
	return w
}

// Append records one report. A step at or below one already recorded (a
// restart redoing steps from its checkpoint) is appended too: readers keep
// the newest report of each step and drop what the restart superseded
// (Read), and compaction rewrites the file that way.
func (w *Writer) Append(e Entry) error {
	m := make(map[string]float64, len(e.Metrics))
	for k, v := range e.Metrics {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			m[k] = v
		}
	}
	e.Metrics = m
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := atomicfile.AppendLine(w.path, b, 0o644, true); err != nil {
		return fmt.Errorf("loss history: %w", err)
	}
	w.lines++
	if w.lines > w.max {
		n, err := Compact(w.path, w.max/2)
		if err != nil {
			return err
		}
		w.lines = n
	}
	return nil
}

// Read returns the history at path in step order. A restart that redid
// steps supersedes everything its predecessor recorded from its first step
// on: the entries after the checkpoint it resumed from belong to a
// trajectory that no longer exists. A line that does not parse (torn by a
// killed writer) is skipped. A missing file is an empty history.
func Read(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e Entry
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Step < 0 {
			continue
		}
		for len(out) > 0 && out[len(out)-1].Step >= e.Step {
			out = out[:len(out)-1] // redone: the new report replaces
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}

// Compact rewrites the history at path atomically with at most keep
// entries: the superseded ones dropped, the newest half kept whole, the
// older part thinned evenly. It returns the lines written.
func Compact(path string, keep int) (int, error) {
	es, err := Read(path)
	if err != nil {
		return 0, err
	}
	es = thin(es, keep)
	var buf bytes.Buffer
	for _, e := range es {
		b, _ := json.Marshal(e)
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if err := atomicfile.WriteFile(path, buf.Bytes(), 0o644, atomicfile.Durable()); err != nil {
		return 0, fmt.Errorf("compact loss history: %w", err)
	}
	return len(es), nil
}

// thin keeps the newest keep/2 entries and keep/2 evenly spaced ones of the
// rest (the first always, so the start of the curve survives).
func thin(es []Entry, keep int) []Entry {
	if len(es) <= keep || keep < 4 {
		return es
	}
	recent := keep / 2
	old, tail := es[:len(es)-recent], es[len(es)-recent:]
	k := keep - recent
	out := make([]Entry, 0, keep)
	for i := range k {
		out = append(out, old[i*len(old)/k])
	}
	return append(out, tail...)
}

// Points turns a history into the forecast's points: the loss is the
// metric named metric ("loss" by default), the learning rate "lr" when
// reported. A trainer that reports no tokens (report_progress(step)
// without tokens=) gets its steps in their place (bySteps true): at a fixed
// batch they are tokens in another unit, and budgets are then in steps.
func Points(es []Entry, metric string) (p []forecast.Point, bySteps bool) {
	if metric == "" {
		metric = "loss"
	}
	bySteps = true
	for _, e := range es {
		if _, ok := e.Metrics[metric]; ok && e.Tokens > 0 {
			bySteps = false
		}
	}
	for _, e := range es {
		v, ok := e.Metrics[metric]
		if !ok {
			continue
		}
		x := float64(e.Tokens)
		if bySteps {
			x = float64(e.Step)
		}
		p = append(p, forecast.Point{Step: e.Step, Tokens: x, Loss: v, LR: e.Metrics["lr"]})
	}
	return p, bySteps
}

// Recorder feeds a run's progress reports into its history: the
// controller's one-line hook.
type Recorder struct {
	ckptDir string
	w       *Writer
	warn    func(error)
	bad     bool
}

// NewRecorder records into the store at ckptDir ("": nothing is
// recorded); warn hears the first failure.
func NewRecorder(ckptDir string, warn func(error)) *Recorder {
	if ckptDir == "" {
		return nil
	}
	return &Recorder{ckptDir: ckptDir, warn: warn}
}

// open makes the store's .trainrun directory when the store exists and
// it does not yet (the store makes it at its first commit; the history
// starts before), refusing a link in its place.
func (r *Recorder) open() error {
	meta := filepath.Dir(Path(r.ckptDir))
	fi, err := os.Lstat(meta)
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(r.ckptDir); err != nil {
			return err
		}
		if err := os.Mkdir(meta, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		fi, err = os.Lstat(meta)
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("loss history: %s is not a directory (a link?): not writing through it", meta)
	}
	r.w = Open(Path(r.ckptDir))
	return nil
}

// Record keeps one report (step, tokens, when, the metrics) when it has
// metrics; a nil Recorder records nothing.
func (r *Recorder) Record(step, tokens int64, at time.Time, metrics map[string]float64) {
	if r == nil || len(metrics) == 0 {
		return
	}
	var err error
	if r.w == nil {
		err = r.open()
	}
	if err == nil {
		err = r.w.Append(Entry{Step: step, Tokens: tokens, Time: float64(at.UnixNano()) / 1e9, Metrics: metrics})
	}
	if err != nil && !r.bad {
		r.bad = true
		if r.warn != nil {
			r.warn(err)
		}
	}
}
