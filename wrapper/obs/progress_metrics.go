package obs

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/trainrun/trainrun/internal/safefs"
)

// Progress is the whole progress file: the step line and, when the trainer
// passed report_progress(..., metrics=...), its metrics.
type Progress struct {
	Step, Tokens int64
	Time         time.Time
	Metrics      map[string]float64 // nil without a metrics line; NaN and ±Inf as the trainer reported them
}

// ParseProgressFile reads the progress file's content: "STEP TOKENS
// UNIX_TIME" and an optional second line, a JSON object of metric name to
// number (or "nan", "inf", "-inf"). A file with the first line alone (every
// client before metrics) is valid; a bad metrics line is an error that
// names it, the step line still returned.
func ParseProgressFile(b []byte) (Progress, error) {
	first, rest, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	step, tokens, at, ok := ParseProgress(first)
	if !ok {
		return Progress{}, fmt.Errorf("progress line %q: want STEP TOKENS UNIX_TIME", clipLine(first))
	}
	p := Progress{Step: step, Tokens: tokens, Time: at}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return p, nil
	}
	m, err := ParseMetrics(rest)
	p.Metrics = m
	return p, err
}

// ParseMetrics reads the metrics line of the progress file.
func ParseMetrics(line string) (map[string]float64, error) {
	var raw map[string]any
	if err := json.Unmarshal([]byte(line), &raw); err != nil {
		return nil, fmt.Errorf("metrics line %q: want a JSON object of name to number: %w", clipLine(line), err)
	}
	m := make(map[string]float64, len(raw))
	for k, v := range raw {
		switch x := v.(type) {
		case float64:
			m[k] = x
		case string:
			switch strings.ToLower(x) {
			case "nan":
				m[k] = math.NaN()
			case "inf", "+inf":
				m[k] = math.Inf(1)
			case "-inf":
				m[k] = math.Inf(-1)
			default:
				return nil, fmt.Errorf("metrics line: %s = %q: want a number, nan, inf or -inf", k, x)
			}
		default:
			return nil, fmt.Errorf("metrics line: %s = %v: want a number", k, v)
		}
	}
	return m, nil
}

// ReadProgressFile reads and parses path (the trainer writes it: no link,
// FIFO or huge file).
func ReadProgressFile(path string) (Progress, error) {
	b, err := safefs.ReadFile(path, maxProgressBytes)
	if err != nil {
		return Progress{}, err
	}
	return ParseProgressFile(b)
}

func clipLine(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
