// Package rungs keeps a sweep's early-stopping records (trainrun sweep
// --early-stop): each trial's metric at each rung it reached, and which
// trials stopped, as small files in the sweep directory that every trial's
// controller reads and writes (no daemon: the file system is the
// coordinator; each record is one atomic file, so no locks).
//
//	<sweep-dir>/early-stop/rung-<K>/trial-<I>   "STEP VALUE"
//	<sweep-dir>/early-stop/stopped/trial-<I>    "RUNG STEP VALUE"
package rungs

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/trainrun/trainrun/internal/atomicfile"
	"github.com/trainrun/trainrun/internal/safefs"
)

const dirName = "early-stop"

func rungDir(sweepDir string, rung int) string {
	return filepath.Join(sweepDir, dirName, fmt.Sprintf("rung-%d", rung))
}

func stoppedPath(sweepDir string, trial int) string {
	return filepath.Join(sweepDir, dirName, "stopped", fmt.Sprintf("trial-%d", trial))
}

// Record writes trial's metric value at rung (reached at step). A trial
// that reaches the rung again (a restart redoing steps) replaces its own
// record.
func Record(sweepDir string, rung, trial int, step int64, value float64) error {
	d := rungDir(sweepDir, rung)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("early stop: %w", err)
	}
	line := fmt.Sprintf("%d %s\n", step, strconv.FormatFloat(value, 'g', -1, 64))
	return atomicfile.WriteFile(filepath.Join(d, fmt.Sprintf("trial-%d", trial)), []byte(line), 0o644)
}

// Values are the metrics every trial recorded at rung (a record that does
// not parse is skipped: a foreign file, never a guess).
func Values(sweepDir string, rung int) ([]float64, error) {
	d := rungDir(sweepDir, rung)
	ents, err := os.ReadDir(d)
	if err != nil {
		return nil, fmt.Errorf("early stop: %w", err)
	}
	var out []float64
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "trial-") || strings.Contains(e.Name(), ".tmp") {
			continue
		}
		b, err := safefs.ReadFile(filepath.Join(d, e.Name()), 4<<10) // "STEP VALUE": a few bytes; bounded, no symlink followed
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) != 2 {
			continue
		}
		// An infinite value is no trial's metric (a -Inf would outrank every
		// trial and stop them all); NaN stays: Continue ranks it last.
		if v, err := strconv.ParseFloat(f[1], 64); err == nil && !math.IsInf(v, 0) {
			out = append(out, v)
		}
	}
	return out, nil
}

// MarkStopped records that trial stopped at rung.
func MarkStopped(sweepDir string, trial, rung int, step int64, value float64) error {
	p := stoppedPath(sweepDir, trial)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("early stop: %w", err)
	}
	return atomicfile.WriteFile(p, []byte(fmt.Sprintf("%d %d %s\n", rung, step, strconv.FormatFloat(value, 'g', -1, 64))), 0o644)
}

// Stopped says whether trial stopped early.
func Stopped(sweepDir string, trial int) bool {
	_, err := os.Stat(stoppedPath(sweepDir, trial))
	return err == nil
}

// The forecast rule's records (sweep --early-stop forecast): each trial's
// latest forecast of its metric at the budget, or once it trained the
// budget its observed value (a band of zero width).
//
//	<sweep-dir>/early-stop/forecast/trial-<I>   "STEP LO MID HI"

// ForecastRecord is one trial's latest forecast.
type ForecastRecord struct {
	Trial       int
	Step        int64
	Lo, Mid, Hi float64
}

func forecastPath(sweepDir string, trial int) string {
	return filepath.Join(sweepDir, dirName, "forecast", fmt.Sprintf("trial-%d", trial))
}

// RecordForecast replaces trial's forecast record.
func RecordForecast(sweepDir string, r ForecastRecord) error {
	p := forecastPath(sweepDir, r.Trial)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("early stop: %w", err)
	}
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return atomicfile.WriteFile(p, []byte(fmt.Sprintf("%d %s %s %s\n", r.Step, g(r.Lo), g(r.Mid), g(r.Hi))), 0o644)
}

// Forecasts are every trial's forecast records (a record that does not
// parse, or whose values are not finite with Lo <= Mid <= Hi, is skipped).
func Forecasts(sweepDir string) ([]ForecastRecord, error) {
	d := filepath.Dir(forecastPath(sweepDir, 0))
	ents, err := os.ReadDir(d)
	if err != nil {
		return nil, fmt.Errorf("early stop: %w", err)
	}
	var out []ForecastRecord
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), "trial-")
		trial, err := strconv.Atoi(n)
		if !ok || err != nil {
			continue
		}
		b, err := safefs.ReadFile(filepath.Join(d, e.Name()), 4<<10)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) != 4 {
			continue
		}
		r := ForecastRecord{Trial: trial}
		var perr error
		r.Step, perr = strconv.ParseInt(f[0], 10, 64)
		v := [3]float64{}
		for i := range v {
			var err error
			if v[i], err = strconv.ParseFloat(f[i+1], 64); err != nil || math.IsInf(v[i], 0) || math.IsNaN(v[i]) {
				perr = fmt.Errorf("bad")
			}
		}
		if perr != nil || !(v[0] <= v[1] && v[1] <= v[2]) {
			continue
		}
		r.Lo, r.Mid, r.Hi = v[0], v[1], v[2]
		out = append(out, r)
	}
	return out, nil
}
