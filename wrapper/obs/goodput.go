package obs

import (
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/internal/units"
)

// Goodput is how much of the GPU time a run was given went into training
// it kept: productive step time (the steps each incarnation ran that the
// next one did not redo, at that incarnation's observed step time) over
// allocated GPU time (each incarnation's start to its end, times its GPUs;
// queue waits are not allocated). Steps redone are those run after the
// checkpoint the next incarnation resumed from.
type Goodput struct {
	Ratio                float64        `json:"ratio"` // -1: unknown (no step time observed)
	ProductiveGPUSeconds float64        `json:"productive_gpu_seconds"`
	AllocatedGPUSeconds  float64        `json:"allocated_gpu_seconds"`
	StepsRun             int64          `json:"steps_run"`
	StepsRedone          int64          `json:"steps_redone"`
	Restarts             map[string]int `json:"restarts"` // by cause: hang, node, crash, preempted, time-limit, disk, ...
}

// FailedSave is a checkpoint the disk refused (a ckpt-fail event whose
// cause is a disk fault).
type FailedSave struct {
	Restart int       `json:"restart"`
	Time    time.Time `json:"time"`
	Cause   string    `json:"cause"`
	Message string    `json:"message"`
}

// diskCauses are the ckpt-fail causes of a disk fault (checkpoint.DiskCauses).
var diskCauses = map[string]bool{"disk-full": true, "quota": true, "io-error": true}

// RestartCause is why incarnation in ended in a restart: its failure's cause
// when it failed, else its interruption's.
func (in Incarnation) RestartCause() string {
	switch {
	case in.Fault != "":
		return in.Fault
	case in.Cause == EndCrash || in.Cause == "":
		return FaultCrash
	case in.Interrupt != "":
		return in.Interrupt
	}
	return "other"
}

var stepNum = regexp.MustCompile(`(?i)step[-_]?(\d+)`)

// startStep is the step an incarnation resumed from: the committed
// checkpoint's recorded step, else the number in its tag, else 0.
func (r *Report) startStep(in Incarnation) int64 {
	if in.ResumeFrom == "" {
		return 0
	}
	tag := filepath.Base(in.ResumeFrom)
	for _, c := range r.Checkpoints {
		if c.Tag == tag && c.Step > 0 {
			return c.Step
		}
	}
	if m := stepNum.FindStringSubmatch(tag); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n
	}
	return 0
}

// stepSeconds is incarnation i's observed step time (0: fewer than two
// progress samples in it).
func (r *Report) stepSeconds(in Incarnation) float64 {
	var first, last *Event
	for k := range r.Progress {
		p := &r.Progress[k]
		if p.Restart != in.Restart || p.Time.Before(in.Start) {
			continue
		}
		if first == nil || p.Time.Before(first.Time) {
			first = p
		}
		if last == nil || p.Time.After(last.Time) {
			last = p
		}
	}
	if first == nil || last.Step <= first.Step {
		return 0
	}
	return last.Time.Sub(first.Time).Seconds() / float64(last.Step-first.Step)
}

func (r *Report) buildGoodput() Goodput {
	g := Goodput{Ratio: -1, Restarts: map[string]int{}}
	n := len(r.Incarnations)
	secs := make([]float64, n)
	var known []float64
	for i, in := range r.Incarnations {
		if secs[i] = r.stepSeconds(in); secs[i] > 0 {
			known = append(known, secs[i])
		}
	}
	sort.Float64s(known)
	var kept int64
	for i, in := range r.Incarnations {
		gpus := 1.0
		if in.GPUs > 0 {
			gpus = float64(in.GPUs)
		}
		end := in.End
		if end.IsZero() {
			end = in.StoppedAt
		}
		if !end.IsZero() && end.After(in.Start) {
			g.AllocatedGPUSeconds += end.Sub(in.Start).Seconds() * gpus
		}
		s := r.startStep(in)
		e := max(in.LastStep, s)
		for _, c := range r.Checkpoints { // progress is sampled: a checkpoint may be newer
			if c.Restart == in.Restart && !c.Time.Before(in.Start) && (end.IsZero() || !c.Time.After(end)) && c.Step > e { // a restart inside the job shares the restart count
				e = c.Step
			}
		}
		keep := e
		if i+1 < n {
			keep = min(e, r.startStep(r.Incarnations[i+1]))
			g.Restarts[in.RestartCause()]++
		}
		g.StepsRun += e - s
		kept += max(0, keep-s)
		st := secs[i]
		if st == 0 && len(known) > 0 {
			st = known[len(known)/2] // the run's median where this one reported too little
		}
		g.ProductiveGPUSeconds += float64(max(0, keep-s)) * st * gpus
	}
	g.StepsRedone = max(0, g.StepsRun-kept)
	if len(known) > 0 && g.AllocatedGPUSeconds > 0 {
		g.Ratio = min(1, g.ProductiveGPUSeconds/g.AllocatedGPUSeconds)
	}
	return g
}

// writeFaults prints the goodput, the restarts by cause, the failed nodes
// and the failed saves (after the report's time line).
func (r *Report) writeFaults(w io.Writer) {
	g := r.Goodput
	if g.Ratio >= 0 {
		fmt.Fprintf(w, "goodput: %.0f%% (productive step time %s of %s allocated GPU time), %d of %d steps run were redone\n",
			100*g.Ratio, units.Duration(time.Duration(g.ProductiveGPUSeconds*1e9)), units.Duration(time.Duration(g.AllocatedGPUSeconds*1e9)), g.StepsRedone, g.StepsRun)
	} else {
		fmt.Fprintf(w, "goodput: unknown (no step time observed: see Checkpointer.report_progress), %d of %d steps run were redone\n", g.StepsRedone, g.StepsRun)
	}
	total := 0
	var parts []string
	for _, c := range sortedKeys(g.Restarts) {
		total += g.Restarts[c]
		parts = append(parts, fmt.Sprintf("%s %d", c, g.Restarts[c]))
	}
	if total > 0 {
		fmt.Fprintf(w, "restarts: %d (%s)\n", total, strings.Join(parts, ", "))
	}
	r.writeFailureClasses(w)
	r.writeHealth(w)
	r.writeBadput(w)
	for _, in := range r.Incarnations {
		for _, f := range in.FailedNodes {
			fmt.Fprintf(w, "failed node: %s (%s, restart %d): %s; drain it if it fails again: %s\n",
				f.Node, f.Cause, in.Restart, f.Detail, slurm.DrainHint([]string{f.Node}, "trainrun"))
		}
	}
	if len(r.FailedSaves) > 0 {
		fmt.Fprintf(w, "failed saves: %d\n", len(r.FailedSaves))
		for _, f := range r.FailedSaves {
			fmt.Fprintf(w, "  restart %d, %s (%s): %s\n", f.Restart, f.Time.UTC().Format("15:04:05Z"), f.Cause, f.Message)
		}
	}
}

func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
