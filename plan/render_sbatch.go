package plan

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/trainrun/trainrun/internal/units"
)

// SbatchOptions shape the #SBATCH header.
type SbatchOptions struct {
	JobName string        // "" = the model's name
	Margin  float64       // fraction added to the predicted training time (0.10 = +10 %)
	Lead    time.Duration // checkpoint lead before the time limit, added to the limit
	Signal  string        // signal name for --signal, as TRAINRUN_CKPT_SIGNAL (e.g. "USR2")
}

// DefaultSbatchOptions: +10 % on the prediction, a 10-minute checkpoint
// lead, SIGUSR2 (trainrun's default checkpoint signal; NCCL 2.12 catches USR1).
func DefaultSbatchOptions() SbatchOptions {
	return SbatchOptions{Margin: 0.10, Lead: 10 * time.Minute, Signal: "USR2"}
}

// SbatchTimeLimit is the --time the header asks for: the predicted training
// time plus the margin plus the checkpoint lead, rounded up to a minute; 0
// when no token count was given.
func SbatchTimeLimit(j Job, e Evaluation, o SbatchOptions) time.Duration {
	s := TrainSeconds(j, e)
	if s <= 0 {
		return 0
	}
	d := time.Duration(math.Ceil(s*(1+o.Margin))) * time.Second
	d += o.Lead
	return ((d + time.Minute - 1) / time.Minute) * time.Minute
}

// slurmDuration spells d as Slurm's days-hours:minutes:seconds.
func slurmDuration(d time.Duration) string {
	s := int64(d / time.Second)
	days, s := s/86400, s%86400
	h, s := s/3600, s%3600
	m, s := s/60, s%60
	if days > 0 {
		return fmt.Sprintf("%d-%02d:%02d:%02d", days, h, m, s)
	}
	return fmt.Sprintf("%02d:%02d:%02d", h, m, s)
}

// RenderSbatch writes the #SBATCH header the plan would ask for: whole nodes
// of c.GPUsPerNode GPUs, or one partial node for a job smaller than a node
// (small jobs ask for what they need), one task per GPU, a time limit from
// --tokens, the checkpoint signal and --requeue.
func RenderSbatch(w io.Writer, m Model, j Job, c Cluster, e Evaluation, o SbatchOptions) error {
	var b strings.Builder
	gpus := LayoutGPUs(e.Layout)
	perNode := min(c.GPUsPerNode, gpus)
	if perNode <= 0 {
		return fmt.Errorf("sbatch: %d GPUs per node", c.GPUsPerNode)
	}
	nodes := (gpus + perNode - 1) / perNode
	name := o.JobName
	if name == "" {
		name = m.Name
	}
	b.WriteString("#!/bin/bash\n")
	fmt.Fprintf(&b, "# trainrun plan: %s on %d x %s: %s\n", m.Name, gpus, c.GPU.Name, e.Layout.Config())
	fmt.Fprintf(&b, "# predicted %.3f s/step, %s tokens/s per GPU, MFU %.1f %%\n", e.Time.Step, fmtCount(e.TokensPerSPerGPU), 100*e.MFU)
	b.WriteString("#SBATCH --job-name=" + shellQuote(name) + "\n")
	fmt.Fprintf(&b, "#SBATCH --nodes=%d\n", nodes)
	fmt.Fprintf(&b, "#SBATCH --gpus-per-node=%d\n", perNode)
	fmt.Fprintf(&b, "#SBATCH --ntasks-per-node=%d\n", perNode)
	if limit := SbatchTimeLimit(j, e, o); limit > 0 {
		fmt.Fprintf(&b, "# --time: %s tokens predicted to take %s, +%.0f %% margin, +%s checkpoint lead\n",
			fmtTokens(j.Tokens), units.Seconds(TrainSeconds(j, e)), 100*o.Margin, o.Lead)
		b.WriteString("# (a partition MaxTime below it ends each job at the limit: trainrun checkpoints, requeues and resumes)\n")
		fmt.Fprintf(&b, "#SBATCH --time=%s\n", slurmDuration(limit))
	} else {
		b.WriteString("# no --tokens given: no time limit derived, the partition's default applies\n")
	}
	if o.Signal != "" && o.Lead > 0 {
		// Without "B:" Slurm signals the step's tasks, which forward it to the
		// trainers: the checkpoint request of the handshake, even if
		// trainrun's own clock (the main path) were late. With "B:" an
		// unprepared batch shell would die of it.
		fmt.Fprintf(&b, "#SBATCH --signal=%s@%d\n", strings.TrimPrefix(o.Signal, "SIG"), int(o.Lead/time.Second))
	}
	b.WriteString("#SBATCH --requeue\n")
	// Slurm opens slurm-J.out afresh when a requeued job starts again:
	// without this, every earlier incarnation's log is lost (issue 30).
	b.WriteString("#SBATCH --open-mode=append\n")
	b.WriteString(sbatchCommand(m, j))
	_, err := io.WriteString(w, b.String())
	return err
}

// sbatchCommand is the header's last lines: the command that runs the job,
// commented out, for the user to complete (the trainer and the store are
// theirs). --model names the preset, or the config.json the model came from.
func sbatchCommand(m Model, j Job) string {
	model := "PATH/config.json"
	if _, err := LookupModel(m.Name); err == nil {
		model = m.Name
	}
	args := fmt.Sprintf("--model %s --seq-len %d --global-batch %d", model, j.SeqLen, j.GlobalBatch)
	if j.Tokens > 0 {
		args += " --tokens " + fmtTokens(j.Tokens)
	}
	return "# the job: trainrun run plans the same layout in the allocation (complete the trainer and the store):\n" +
		"# exec trainrun run " + args + " --ckpt-dir /path/to/ckpt -- python train.py {megatron_args} --load {resume} --save {ckpt_dir}\n"
}
