// Package submit is trainrun submit's choice: the candidate
// partitions × sizes of a job, each planned with the planner, their
// predicted training time, and — once the caller has asked Slurm when each
// would start (sbatch --test-only) — the one that finishes first or costs
// least, with the reason every other lost. The choice does no I/O; the one
// reader is cluster.go's LoadPartitions, which asks Slurm (through a
// slurm.Client) for the partitions and nodes the choice and `trainrun partitions` work on.
package submit

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/trainrun/trainrun/internal/units"
	"github.com/trainrun/trainrun/plan"
)

// Partition is what the choice needs of one partition.
type Partition struct {
	Name        string
	GPU         plan.GPU      // the catalog type of its GPUs (GPUType)
	GPUsPerNode int           // GPUs on each node
	Nodes       int           // the most nodes one job may have (TotalNodes, capped by MaxNodes)
	MaxTime     time.Duration // 0 = unlimited
	Cost        float64       // price of one GPU-hour; < 0 = none (GPUHourCost=none)
	CkptLead    time.Duration // the policy's CkptLead (0 = none): an honest lead is at least this, as the job will use it
}

// Request is the job and the bounds of the search.
type Request struct {
	Model   plan.Model
	Job     plan.Job // Tokens > 0: the finish is predicted from it
	Search  plan.SearchOptions
	Cluster func(*plan.Cluster) // adjusts each candidate's cluster (the user's fabric flags); nil = none
	MinGPUs int                 // 0 = 1
	MaxGPUs int                 // 0 = no bound but the partition's
	// Checkpoint overhead: a save every CkptInterval, each writing the
	// model's weights and Adam state (ckptBytesPerParam) spread over the
	// job's nodes at CkptBW bytes/s per node. CkptInterval 0 = no overhead.
	CkptInterval time.Duration
	CkptBW       float64
	Sbatch       plan.SbatchOptions // margin and lead of the time limit
	// Kinds are the fine-tuning kinds tried in order on each candidate, the
	// first that fits taken (issue 37: --finetune-fallback, plan --cheapest's
	// plan.CheapestKinds); nil = the job's own kind only.
	Kinds []plan.Finetune
	// TrainLimit is the longest the training may take (--time-limit): a
	// candidate that trains longer does not qualify. 0 = no limit.
	TrainLimit time.Duration
	// Fix is the --fix string the pins came from, kept in the plans' inputs.
	Fix string
	// Honest limits (limits.go): AutoMargin takes the margin from the
	// plan's error band, AutoLead sizes the lead from MeasuredSave (the
	// longest of MeasuredSaves recent saves of the job's store), else from
	// the predicted save (CkptBW); Sbatch's values are then not used.
	AutoMargin    bool
	AutoLead      bool
	MeasuredSave  time.Duration
	MeasuredSaves int
}

// Candidate is one partition × size, planned; Start and Finish once Slurm
// has answered.
type Candidate struct {
	Partition   string
	GPUType     string
	Nodes       int
	GPUs        int
	GPUsPerNode int  // GPUs asked on each node (= GPUs on a partial node)
	Partial     bool // fewer GPUs than a node: --gpus-per-node=k, not exclusive
	Fits        bool
	Why         string
	Eval        *plan.Evaluation // nil when nothing fits
	Result      plan.Result
	TokensPerS  float64       // the whole job's
	TrainS      float64       // steps plus checkpoint saves
	CkptS       float64       // of which checkpoint saves
	TimeLimit   time.Duration // --time
	Margin      float64       // of TimeLimit: the share added to TrainS
	Lead        time.Duration // of TimeLimit: the checkpoint lead
	LimitWhy    string        // where Margin and Lead came from
	Capped      bool          // TimeLimit is the partition's MaxTime: the run continues by requeue
	Start       time.Time     // Slurm's predicted start (or trainrun's, earlier: StartWhy)
	SlurmStart  time.Time     // Slurm's, when trainrun's predictions moved Start earlier (starts.go)
	StartWhy    string        // why Start is not Slurm's
	Dropped     string        // a rule of trainrun's own took it out of the choice: why (sizing.go)
	StartErr    string        // sbatch --test-only refused: its message
	Finish      time.Time
	Cost        float64 // < 0 = unknown
	Finetune    string  // the --finetune spec it was planned with (Request.Kinds)
	// Inputs are what it was planned from, written into its plan file
	// ("inputs"), so that the job's run can be learned from (learn.go).
	Inputs plan.Inputs
}

// ckptBytesPerParam is what a checkpoint holds per parameter: BF16
// weights (2), FP32 master weights (4) and Adam's two FP32 moments (8).
const ckptBytesPerParam = 14

// Sizes are the GPU counts tried on a partition: fewer GPUs than a node
// (powers of two), then whole nodes 1, 2, 4, ... and the partition's
// largest, within [min, max].
func Sizes(p Partition, minGPUs, maxGPUs int) (sizes []struct{ Nodes, PerNode int }) {
	minGPUs = max(minGPUs, 1)
	if maxGPUs <= 0 {
		maxGPUs = math.MaxInt
	}
	add := func(n, k int) {
		if g := n * k; g >= minGPUs && g <= maxGPUs {
			sizes = append(sizes, struct{ Nodes, PerNode int }{n, k})
		}
	}
	for k := 1; k < p.GPUsPerNode; k *= 2 {
		add(1, k)
	}
	n := 1
	for ; n < p.Nodes; n *= 2 {
		add(n, p.GPUsPerNode)
	}
	if p.Nodes > 0 {
		add(p.Nodes, p.GPUsPerNode)
	}
	return sizes
}

// Candidates plans the job on every size of every partition.
func Candidates(parts []Partition, req Request) []Candidate {
	var out []Candidate
	for _, p := range parts {
		for _, s := range Sizes(p, req.MinGPUs, req.MaxGPUs) {
			out = append(out, plan1(p, s.Nodes, s.PerNode, req))
		}
	}
	return out
}

func plan1(p Partition, nodes, perNode int, req Request) Candidate {
	c := Candidate{Partition: p.Name, GPUType: p.GPU.Name, Nodes: nodes, GPUs: nodes * perNode, GPUsPerNode: perNode,
		Partial: perNode < p.GPUsPerNode, Cost: -1}
	cl := plan.ClusterFor(p.GPU, c.GPUs, p.GPUsPerNode)
	if c.Partial {
		cl = plan.ClusterFor(p.GPU, c.GPUs, perNode)
	}
	if req.Cluster != nil {
		req.Cluster(&cl)
	}
	job, msg := searchKinds(req, cl, &c)
	if msg != "" || c.Result.Plan == nil {
		c.Why = "does not fit: " + msg
		return c
	}
	e := *c.Result.Plan
	c.Eval, c.Fits = &e, true
	c.Inputs = plan.InputsOf(req.Model, job, cl, req.Fix)
	c.TokensPerS = e.TokensPerSPerGPU * float64(c.GPUs)
	steps := plan.TrainSeconds(job, e)
	if req.CkptInterval > 0 && req.CkptBW > 0 {
		saves := math.Floor(steps / req.CkptInterval.Seconds())
		perNode := req.Model.Params() * ckptBytesPerParam / float64(nodes)
		c.CkptS = saves * perNode / req.CkptBW
		if req.MeasuredSave > 0 {
			c.CkptS = saves * req.MeasuredSave.Seconds()
		}
	}
	c.TrainS = steps + c.CkptS
	c.Margin, c.Lead, c.LimitWhy = limitTerms(req, p, e, nodes)
	lim := TimeLimit(c.TrainS, plan.SbatchOptions{Margin: c.Margin, Lead: c.Lead})
	if p.MaxTime > 0 && lim > p.MaxTime {
		lim, c.Capped = p.MaxTime, true
	}
	c.TimeLimit = lim
	if p.Cost >= 0 {
		c.Cost = float64(c.GPUs) * c.TrainS / 3600 * p.Cost
	}
	overLimit(&c, req.TrainLimit)
	return c
}

// TimeLimit is the --time of a job predicted to train for trainS seconds:
// plus the margin and the checkpoint lead, rounded up to a minute (as
// plan.SbatchTimeLimit); at least a minute.
func TimeLimit(trainS float64, o plan.SbatchOptions) time.Duration {
	d := time.Duration(math.Ceil(trainS*(1+o.Margin)))*time.Second + o.Lead
	return max(time.Minute, ((d+time.Minute-1)/time.Minute)*time.Minute)
}

// Objectives of Choose.
const (
	Finish = "finish"
	Cost   = "cost"
)

// Choose picks the candidate by the objective among those that fit and
// that Slurm would start (Start set, no StartErr): the earliest Finish
// (ties: fewer GPUs, then partition order) or the lowest Cost (ties: the
// earlier finish). It sets Finish and every candidate's Why. It fails when
// no candidate qualifies, saying why each lost.
func Choose(cands []Candidate, objective string, now time.Time) (int, error) {
	if objective != Finish && objective != Cost {
		return -1, fmt.Errorf("--objective %q: accepted: finish, cost", objective)
	}
	var ok []int
	for i := range cands {
		c := &cands[i]
		if !c.Fits {
			continue
		}
		switch {
		case c.Dropped != "":
			c.Why = c.Dropped
		case c.StartErr != "":
			c.Why = "Slurm would not start it: " + c.StartErr
		case c.Start.IsZero():
			c.Why = "no start time from Slurm"
		case objective == Cost && c.Cost < 0:
			c.Finish = c.Start.Add(seconds(c.TrainS))
			c.Why = fmt.Sprintf("no price: the policy has no GPUHourCost= for partition %s", c.Partition)
		default:
			c.Finish = c.Start.Add(seconds(c.TrainS))
			ok = append(ok, i)
		}
	}
	if len(ok) == 0 {
		return -1, noneQualifies(cands)
	}
	less := func(a, b *Candidate) bool {
		if objective == Cost && a.Cost != b.Cost {
			return a.Cost < b.Cost
		}
		if !a.Finish.Equal(b.Finish) {
			return a.Finish.Before(b.Finish)
		}
		return a.GPUs < b.GPUs
	}
	sort.SliceStable(ok, func(x, y int) bool { return less(&cands[ok[x]], &cands[ok[y]]) })
	best := &cands[ok[0]]
	wait := func(c *Candidate) string {
		return fmt.Sprintf("start %s, train %s", rel(c.Start, now), units.Seconds(c.TrainS))
	}
	if objective == Cost {
		best.Why = fmt.Sprintf("chosen: lowest cost %.4g (finishes %s: %s)", best.Cost, best.Finish.Format(time.RFC3339), wait(best))
	} else {
		best.Why = fmt.Sprintf("chosen: earliest finish %s (%s)", best.Finish.Format(time.RFC3339), wait(best))
	}
	for _, i := range ok[1:] {
		c := &cands[i]
		switch {
		case objective == Cost && c.Cost != best.Cost:
			c.Why = fmt.Sprintf("costs %.4g, %.4g more than the chosen", c.Cost, c.Cost-best.Cost)
		case !c.Finish.Equal(best.Finish):
			c.Why = fmt.Sprintf("finishes %s after the chosen (%s)", units.Seconds(c.Finish.Sub(best.Finish).Seconds()), wait(c))
		default:
			c.Why = fmt.Sprintf("finishes at the same time with %d GPUs, the chosen has %d", c.GPUs, best.GPUs)
		}
	}
	return ok[0], nil
}

// noneQualifies says why each candidate lost, the candidates that lost for
// the same reason (sbatch's one message, say) named together.
func noneQualifies(cands []Candidate) error {
	if len(cands) == 0 {
		return fmt.Errorf("no candidate: no partition has a size within --min-gpus/--max-gpus")
	}
	var whys []string
	by := map[string][]string{}
	for _, c := range cands {
		if _, seen := by[c.Why]; !seen {
			whys = append(whys, c.Why)
		}
		by[c.Why] = append(by[c.Why], fmt.Sprintf("%s×%d", c.Partition, c.GPUs))
	}
	parts := make([]string, len(whys))
	for i, w := range whys {
		parts[i] = strings.Join(by[w], ", ") + ": " + w
	}
	return fmt.Errorf("no candidate qualifies: %s", strings.Join(parts, "; "))
}

func seconds(s float64) time.Duration { return time.Duration(math.Ceil(s)) * time.Second }

// rel is t relative to ref: "at once" or "in 1h02m".
func rel(t, ref time.Time) string {
	if d := t.Sub(ref); d > 0 {
		return "in " + units.Seconds(d.Seconds())
	}
	return "at once"
}
