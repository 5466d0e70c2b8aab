package obs

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/trainrun/trainrun/internal/safefs"
)

// ProgressFile is the progress file's name in JOBDIR/launch (see the
// package doc for the protocol).
const ProgressFile = "progress"

// ParseProgress reads one progress line "STEP TOKENS UNIX_TIME". ok is
// false for anything else: a trainer's half-written or foreign file is
// ignored, never guessed at.
func ParseProgress(line string) (step, tokens int64, at time.Time, ok bool) {
	f := strings.Fields(line)
	if len(f) != 3 {
		return 0, 0, time.Time{}, false
	}
	step, err1 := strconv.ParseInt(f[0], 10, 64)
	tokens, err2 := strconv.ParseInt(f[1], 10, 64)
	sec, err3 := strconv.ParseFloat(f[2], 64)
	if err1 != nil || err2 != nil || err3 != nil || step < 0 || tokens < 0 || sec <= 0 || !(sec < maxProgressUnix) {
		return 0, 0, time.Time{}, false
	}
	whole, frac := math.Modf(sec)
	return step, tokens, time.Unix(int64(whole), int64(frac*1e9)), true
}

// maxProgressUnix bounds a progress line's time (the year 5138): larger
// values, Inf and NaN would overflow time.Unix into nonsense.
const maxProgressUnix = 1e11

// maxProgressBytes bounds the progress file: one line of three numbers.
const maxProgressBytes = 4096

// ProgressReader polls the progress file and turns a new line into an
// event.
type ProgressReader struct {
	Path string
	last string
	// Metrics are the metrics line of the last event Poll returned (nil
	// without one, or when it did not parse): the loss history's input.
	Metrics map[string]float64
}

// NewProgressReader reads path's present line as already seen: the file
// outlives an incarnation (the launch directory is the job's), and the
// previous incarnation's last step is not progress of this one.
func NewProgressReader(path string) *ProgressReader {
	p := &ProgressReader{Path: path}
	if b, err := safefs.ReadFile(path, maxProgressBytes); err == nil {
		p.last = strings.TrimSpace(string(b))
	}
	return p
}

// Poll returns a progress event when the file holds a new valid line.
func (p *ProgressReader) Poll() (Event, bool) {
	b, err := safefs.ReadFile(p.Path, maxProgressBytes) // the trainer writes it: no link, FIFO or huge file
	if err != nil {
		return Event{}, false
	}
	line := strings.TrimSpace(string(b))
	if line == p.last {
		return Event{}, false
	}
	p.last = line
	first, rest, _ := strings.Cut(line, "\n") // a second line holds the trainer's metrics (ParseMetrics)
	step, tokens, at, ok := ParseProgress(first)
	if !ok {
		return Event{}, false
	}
	p.Metrics = nil
	if rest = strings.TrimSpace(rest); rest != "" {
		p.Metrics, _ = ParseMetrics(rest)
	}
	return Event{Kind: KindProgress, Time: at, Step: step, Tokens: tokens}, true
}
