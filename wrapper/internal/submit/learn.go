package submit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/trainrun/trainrun/internal/atomicfile"
	"github.com/trainrun/trainrun/internal/calib"
	"github.com/trainrun/trainrun/internal/safefs"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/internal/units"
)

// Learning from the jobs it submitted (issue 34, and the planner that
// learns): every job submit sends ends with its real run time in Slurm's
// record, whatever runs in it, trainrun run or not. submit writes down
// what it predicted for each job in the plan directory's ledger
// (LedgerFile); a later submission with the same --plan-dir reads Slurm's
// record of those jobs, and each one that completed as a whole run
// becomes an observation in the plan directory's observations file (the
// site-calibration format, calib.SitePath(planDir)): its plan, and its
// step time, measured as the run time less the predicted saves over the
// steps. The planner's calibration (plan.Calibrate) then corrects every
// candidate from them, near ones most: the same model on the same GPUs
// takes the measured step; another model on the same GPU type moves by
// the fitted factors; other types barely. The error band narrows with the
// evidence, and the time limit with it.

// LedgerFile is the ledger's name in the plan directory.
const LedgerFile = "submitted.jsonl"

// Submitted is one ledger line: a job submit sent, when, and what it
// predicted on each partition it listed.
type Submitted struct {
	Job   string                   `json:"job"`
	At    time.Time                `json:"at"`
	Plans map[string]SubmittedPlan `json:"plans"` // by partition
	// Skipped is why a learning pass did not learn from the job once it
	// completed (LearnRuns appends the line again with it): later passes
	// neither weigh nor report it again.
	Skipped string `json:"skipped,omitempty"`
}

// SubmittedPlan is what submit predicted for a job on one partition.
type SubmittedPlan struct {
	File   string  `json:"file"`    // the plan file's name in the plan directory
	StepS  float64 `json:"step_s"`  // the plan's step time
	StepsS float64 `json:"steps_s"` // the training's time without saves
	CkptS  float64 `json:"ckpt_s"`  // the saves'
	GPU    string  `json:"gpu"`
	Nodes  int     `json:"nodes"`
}

// SubmittedOf is the ledger line of job id, listed on cands[list[k]] with
// the plan file files[k] (a name in the plan directory).
func SubmittedOf(cands []Candidate, list []int, files []string, id string, at time.Time) Submitted {
	s := Submitted{Job: id, At: at.UTC(), Plans: map[string]SubmittedPlan{}}
	for k, i := range list {
		c := &cands[i]
		if c.Eval == nil || k >= len(files) {
			continue
		}
		s.Plans[c.Partition] = SubmittedPlan{File: filepath.Base(files[k]), StepS: c.Eval.Time.Step, StepsS: c.TrainS - c.CkptS,
			CkptS: c.CkptS, GPU: c.GPUType, Nodes: c.Nodes}
	}
	return s
}

// AppendSubmitted adds s to the plan directory's ledger (locked: a sweep's
// submissions may run at once).
func AppendSubmitted(dir string, s Submitted) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := atomicfile.AppendLine(filepath.Join(dir, LedgerFile), b, 0o600, true); err != nil {
		return fmt.Errorf("--plan-dir %s: the ledger of submitted jobs: %w", dir, err)
	}
	return nil
}

// Bounds on what learning reads: the ledger's last maxLedgerBytes (older
// jobs have long left Slurm's memory), plan files of at most maxPlanBytes.
const (
	maxLedgerBytes = 8 << 20
	maxPlanBytes   = 4 << 20
)

// readLedger reads the ledger's lines, the last line per job; a line it
// cannot parse (torn by a killed writer) is skipped.
func readLedger(dir string) (map[string]Submitted, error) {
	f, err := safefs.OpenFile(filepath.Join(dir, LedgerFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > maxLedgerBytes {
		if _, err := f.Seek(fi.Size()-maxLedgerBytes, 0); err != nil {
			return nil, err
		}
	}
	out := map[string]Submitted{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var s Submitted
		if json.Unmarshal(bytes.TrimSpace(sc.Bytes()), &s) == nil && s.Job != "" {
			out[s.Job] = s
		}
	}
	return out, sc.Err()
}

// Learned is what one learning pass did.
type Learned struct {
	Added   []calib.Record // observations written this time
	Skipped []string       // completed jobs not learned from, and why
}

// learnRatio bounds how far a run may be from its prediction and still be
// learned from: a job that completed in a quarter of its predicted time or
// took four times as long most likely did not train what submit planned
// (it stopped early, or waited on something else).
const learnRatio = 4

// LearnRuns writes an observation, into the plan directory's observations
// file, of each job of dir's ledger that Slurm's jobs (scontrol show job:
// a completed job stays there for MinJobAge) say completed as one whole
// run: state COMPLETED, exit code 0:0, no requeue, submitted when the
// ledger says. A job already in the file is not written again; one that
// was not learned from is marked so in the ledger, and reported once. The
// directory must be the user's own (submit creates it so): its records
// steer the user's plans.
func LearnRuns(dir string, jobs []slurm.Job, loc *time.Location) (Learned, error) {
	var l Learned
	if err := safefs.CheckOwnDir(dir, "--plan-dir"); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return l, nil
		}
		return l, err
	}
	ledger, err := readLedger(dir)
	if err != nil || len(ledger) == 0 {
		return l, err
	}
	known := map[string]bool{}
	recs, _, err := calib.Load(calib.SitePath(dir))
	if err != nil {
		return l, err
	}
	for _, r := range recs {
		known[r.Job] = true
	}
	for _, j := range jobs {
		s, ok := ledger[j.ID]
		if !ok || known[j.ID] || s.Skipped != "" || j.State != "COMPLETED" {
			continue
		}
		if sub, ok := submittedAt(s, j, loc); !ok {
			l.Skipped = append(l.Skipped, fmt.Sprintf("job %s: submitted %s, the ledger says %s: another job with its id", j.ID, sub, s.At.Format(time.RFC3339)))
			continue // not this job's record: its own may still come
		}
		rec, why := observationOfJob(dir, s, j, loc)
		if why != "" {
			l.Skipped = append(l.Skipped, fmt.Sprintf("job %s: %s", j.ID, why))
			s.Skipped = why
			if err := AppendSubmitted(dir, s); err != nil { // said once: the next pass passes it over
				return l, err
			}
			continue
		}
		if err := calib.Append(calib.SitePath(dir), rec); err != nil {
			return l, err
		}
		known[j.ID] = true
		l.Added = append(l.Added, rec)
	}
	return l, nil
}

// submittedAt says whether Slurm's job j is the ledger's job s: its
// SubmitTime (sub) at most ten minutes before the ledger's time, which is
// taken after sbatch returned, and at most a minute after (clocks apart).
func submittedAt(s Submitted, j slurm.Job, loc *time.Location) (sub string, ok bool) {
	if loc == nil {
		loc = time.Local
	}
	t, err := time.ParseInLocation("2006-01-02T15:04:05", j.Record["SubmitTime"], loc)
	return j.Record["SubmitTime"], err == nil && !t.After(s.At.Add(time.Minute)) && !t.Before(s.At.Add(-10*time.Minute))
}

// observationOfJob is the observation of a completed job (the ledger's:
// submittedAt), or why there is none.
func observationOfJob(dir string, s Submitted, j slurm.Job, loc *time.Location) (calib.Record, string) {
	if loc == nil {
		loc = time.Local
	}
	switch {
	case j.Record["ExitCode"] != "0:0":
		return calib.Record{}, fmt.Sprintf("exit code %s, not a whole run", j.Record["ExitCode"])
	case j.Restarts > 0:
		return calib.Record{}, fmt.Sprintf("requeued %d time(s): Slurm's record has its last run alone", j.Restarts)
	}
	st, err := time.ParseInLocation("2006-01-02T15:04:05", j.Record["StartTime"], loc)
	if err != nil || j.EndTime.IsZero() || !j.EndTime.After(st) {
		return calib.Record{}, fmt.Sprintf("no run time (StartTime %s, EndTime %s)", j.Record["StartTime"], j.Record["EndTime"])
	}
	p, ok := s.Plans[j.Partition]
	if !ok || p.StepS <= 0 || p.StepsS <= 0 || p.File != filepath.Base(p.File) || !strings.HasSuffix(p.File, ".json") {
		return calib.Record{}, fmt.Sprintf("the ledger has no plan for partition %s", j.Partition)
	}
	run := j.EndTime.Sub(st).Seconds()
	steps := run - p.CkptS
	ratio := steps / p.StepsS
	if steps <= 0 || ratio > learnRatio || ratio < 1.0/learnRatio {
		return calib.Record{}, fmt.Sprintf("ran %s, predicted %s: more than %d× off, most likely not the training planned", units.Seconds(run), units.Seconds(p.StepsS+p.CkptS), learnRatio)
	}
	b, err := safefs.ReadFile(filepath.Join(dir, p.File), maxPlanBytes)
	if err != nil {
		return calib.Record{}, fmt.Sprintf("its plan: %v", err)
	}
	return calib.Record{Plan: json.RawMessage(bytes.TrimSpace(b)), GPU: p.GPU, Nodes: p.Nodes, Job: j.ID, At: j.EndTime.UTC(),
		Observed: calib.Observed{StepS: p.StepS * ratio, Steps: int(math.Round(p.StepsS / p.StepS)),
			Spread: math.Min(1, 2/run)}, // Slurm's times are to the second: ±1 s at each end
		Source: "trainrun submit: the job's run time in Slurm (StartTime to EndTime) less its predicted saves, over its steps"}, ""
}
