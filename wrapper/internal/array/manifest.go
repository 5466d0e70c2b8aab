package array

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/trainrun/trainrun/internal/atomicfile"
	"github.com/trainrun/trainrun/internal/safefs"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// Manifest is SWEEPDIR/sweep.json: the array's trials and how they were sized.
type Manifest struct {
	Name        string    `json:"name"`
	Dir         string    `json:"sweep_dir"`
	JobID       string    `json:"job_id,omitempty"`
	Created     time.Time `json:"created"`
	Keys        []string  `json:"keys"`
	Metric      string    `json:"metric"`
	Maximize    bool      `json:"maximize,omitempty"`
	EarlyStop   string    `json:"early_stop,omitempty"` // asha:ETA:MIN_STEPS or forecast:P:MIN_STEPS:STEPS (issue 32)
	Command     []string  `json:"command"`
	Array       string    `json:"array"`
	TimeLimitS  int64     `json:"time_limit_s"`
	TimeSource  string    `json:"time_source"`
	Cost        string    `json:"cost,omitempty"`
	Proxy       []string  `json:"proxy_flags,omitempty"` // --proxy-scale: the scaled model's shape flags, given to each trial's run
	Nodes       int       `json:"nodes"`
	GPUsPerNode int       `json:"gpus_per_node"`
	Steps       int       `json:"steps,omitempty"` // --steps: each trial's budget, given to its run as TRAINRUN_TRAIN_STEPS (issue 32)
	Trials      []Trial   `json:"trials"`
}

// Trial is one element of the array: its parameters and trainrun run command.
type Trial struct {
	Index  int               `json:"index"`
	Params map[string]string `json:"params"`
	Name   string            `json:"name"`
	Argv   []string          `json:"argv"` // the trial's trainrun run command line
}

// ManifestFile is the manifest's name in SWEEPDIR.
const ManifestFile = "sweep.json"

// ReadManifest reads DIR/sweep.json; its Dir becomes dir's absolute path
// (the directory may have moved since it was written).
func ReadManifest(dir string) (*Manifest, error) {
	p := filepath.Join(dir, ManifestFile)
	b, err := safefs.ReadFile(p, 64<<20)
	if err != nil {
		return nil, exitcode.With(exitcode.Usage, fmt.Errorf("%s: %v (is %s the directory 'trainrun sweep' printed?)", p, err, dir))
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, exitcode.With(exitcode.Usage, fmt.Errorf("%s: %v", p, err))
	}
	m.Dir, _ = filepath.Abs(dir) // the directory may have moved since
	return &m, nil
}

// WriteDir creates s.Dir with its manifest and scripts (path:
// content); a directory that already holds a sweep is refused (a second
// submission of the same sweep is almost always a mistake).
func WriteDir(s *Manifest, scripts map[string]string) error {
	if _, err := os.Stat(filepath.Join(s.Dir, ManifestFile)); err == nil {
		return exitcode.With(exitcode.Usage, fmt.Errorf("%s already holds a sweep (%s): see it with 'trainrun sweep status %s', or start another with --sweep-dir DIR or --name NAME", s.Dir, ManifestFile, s.Dir))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return exitcode.With(exitcode.Usage, fmt.Errorf("sweep dir %s: %w", s.Dir, err))
	}
	for _, d := range []string{s.Dir, filepath.Join(s.Dir, "logs")} {
		if err := safefs.MkdirOwn(d, "sweep directory"); err != nil {
			return exitcode.With(exitcode.Usage, err)
		}
	}
	for p, script := range scripts {
		if err := atomicfile.WriteFile(p, []byte(script), 0o755); err != nil {
			return err
		}
	}
	return atomicfile.WriteJSON(filepath.Join(s.Dir, ManifestFile), s, 0o644)
}
