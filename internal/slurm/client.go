package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/trainrun/trainrun/topo"
)

// Client asks Slurm. The zero Client runs nothing: every call fails with an
// *Error, as on a machine without Slurm (what unit tests of its callers get
// unless they pass a Runner). New is the real Slurm.
type Client struct {
	Run Runner
	// RunStderr runs the commands whose answer is on stderr (sbatch
	// --test-only) or whose warnings matter (sbatch); nil fails them.
	RunStderr StderrRunner
	Timeout   time.Duration  // per query; DefaultTimeout when zero
	Location  *time.Location // the zone scontrol prints times in; time.Local when nil
}

// New is a Client of the real Slurm.
func New() Client { return Client{Run: Exec, RunStderr: ExecStderr} }

func (c Client) query(ctx context.Context, name string, args ...string) ([]byte, error) {
	if c.Run == nil {
		return nil, &Error{Args: append([]string{name}, args...), Err: errors.New("slurm.Client has no Runner")}
	}
	ctx, cancel := context.WithTimeout(ctx, cmpOr(c.Timeout, DefaultTimeout))
	defer cancel()
	return c.Run(ctx, name, args...)
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Job is what `scontrol show job -o` says of a job that its environment
// does not.
type Job struct {
	ID        string        // JobId
	Name      string        // JobName
	State     string        // JobState: RUNNING, PENDING, CANCELLED, ...
	Partition string        // Partition
	TimeLimit time.Duration // TimeLimit; 0 = UNLIMITED
	EndTime   time.Time     // EndTime; zero = unknown
	Requeue   bool          // Requeue=1: the job may be requeued
	Restarts  int           // Restarts
	Record    Record        // every field
}

// Job runs `scontrol show job -o ID`.
func (c Client) Job(ctx context.Context, id string) (Job, error) {
	out, err := c.query(ctx, Scontrol, "show", "job", "-o", id)
	if err != nil {
		return Job{}, err
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return ParseJob(line, c.Location)
}

// ParseJob reads one line of `scontrol show job -o`; loc is the time zone
// scontrol prints times in (time.Local when nil).
func ParseJob(line string, loc *time.Location) (Job, error) {
	if loc == nil {
		loc = time.Local
	}
	f := ParseRecord(line)
	if f["JobId"] == "" {
		return Job{}, fmt.Errorf("scontrol show job printed no JobId: %q", clip(line, 200))
	}
	j := Job{ID: f["JobId"], Name: f["JobName"], State: f["JobState"], Partition: f["Partition"], Requeue: f["Requeue"] == "1", Record: f}
	if v, ok := f["TimeLimit"]; ok {
		d, err := ParseDuration(v)
		if err != nil {
			return Job{}, fmt.Errorf("scontrol show job: TimeLimit=%q: %w", v, err)
		}
		j.TimeLimit = d
	}
	if v, ok := f["EndTime"]; ok && v != "Unknown" && v != "None" && v != "" {
		t, err := time.ParseInLocation("2006-01-02T15:04:05", v, loc)
		if err != nil {
			return Job{}, fmt.Errorf("scontrol show job: EndTime=%q is not YYYY-MM-DDTHH:MM:SS", v)
		}
		j.EndTime = t
	}
	r, err := parseCount("scontrol show job: Restarts", f["Restarts"], maxRestarts)
	if err != nil {
		return Job{}, err
	}
	j.Restarts = r
	return j, nil
}

// NodeAddrs maps node names to their NodeAddr (`scontrol show node -o
// NODELIST`): the address Slurm itself uses to reach the node, so a
// rendezvous address works even where node names do not resolve.
func (c Client) NodeAddrs(ctx context.Context, nodelist string) (map[string]string, error) {
	out, err := c.query(ctx, Scontrol, "show", "node", "-o", nodelist)
	if err != nil {
		return nil, err
	}
	return ParseNodeAddrs(string(out)), nil
}

// ParseNodeAddrs reads NodeName and NodeAddr from `scontrol show node -o`.
func ParseNodeAddrs(out string) map[string]string {
	m := map[string]string{}
	for _, r := range ParseRecords(out) {
		if r["NodeName"] != "" && r["NodeAddr"] != "" {
			m[r["NodeName"]] = r["NodeAddr"]
		}
	}
	return m
}

// Limits are the stop-time limits of a partition and the cluster; a
// negative duration is unknown.
type Limits struct {
	GraceTime   time.Duration // the partition's GraceTime: SIGTERM to SIGKILL at preemption
	Preemptable bool          // the partition's PreemptMode is not OFF
	KillWait    time.Duration // the cluster's KillWait: SIGTERM to SIGKILL at a time limit
}

// Limits reads the partition's GraceTime and PreemptMode (`scontrol show
// partition -o P`, skipped when partition is empty) and the cluster's
// KillWait (`scontrol show config`), under one timeout. What cannot be read
// stays unknown (-1), and the error says why; the rest is still returned.
func (c Client) Limits(ctx context.Context, partition string) (Limits, error) {
	lim := Limits{GraceTime: -1, KillWait: -1}
	ctx, cancel := context.WithTimeout(ctx, cmpOr(c.Timeout, DefaultTimeout))
	defer cancel()
	var errs []error
	if partition != "" {
		out, err := c.query(ctx, Scontrol, "show", "partition", "-o", partition)
		if err != nil {
			errs = append(errs, err)
		} else {
			var err error
			lim.GraceTime, lim.Preemptable, err = ParsePartitionGrace(string(out))
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	out, err := c.query(ctx, Scontrol, "show", "config")
	if err != nil {
		errs = append(errs, err)
	} else {
		if lim.KillWait, err = ParseKillWait(string(out)); err != nil {
			errs = append(errs, err)
		}
	}
	return lim, joinErrs(errs)
}

func joinErrs(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}

// ParsePartitionGrace reads GraceTime (seconds) and PreemptMode from one
// `scontrol show partition -o` line; GraceTime is -1 when absent, and -1
// with an error when it is not a number of seconds Slurm can store.
func ParsePartitionGrace(line string) (time.Duration, bool, error) {
	r := ParseRecord(line)
	grace, err := time.Duration(-1), error(nil)
	if v, ok := r["GraceTime"]; ok {
		grace, err = parseSeconds("scontrol show partition: GraceTime", v, maxGraceSeconds)
	}
	v := r["PreemptMode"]
	return grace, v != "" && !strings.EqualFold(v, "OFF"), err
}

// ParseKillWait reads "KillWait = 30 sec" from `scontrol show config`.
func ParseKillWait(out string) (time.Duration, error) {
	return ParseConfigSeconds(out, "KillWait", maxKillWaitSeconds)
}

// ParseConfigSeconds reads "KEY = N sec" (KillWait, MessageTimeout) from
// `scontrol show config`: -1 when the key is absent, -1 and an error when
// its value is not a whole number of seconds up to max (the width Slurm
// stores it in: maxKillWaitSeconds, maxMsgTimeout).
func ParseConfigSeconds(out, key string, max int64) (time.Duration, error) {
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) != key {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 || len(f) > 2 || len(f) == 2 && f[1] != "sec" {
			return -1, fmt.Errorf("scontrol show config: %s = %q is not \"N sec\"", key, clip(strings.TrimSpace(v), 40))
		}
		return parseSeconds("scontrol show config: "+key, f[0], max)
	}
	return -1, nil
}

// Topology is the cluster model from `scontrol show topology`. Without a
// topology plugin Slurm prints "No topology information available" and
// fails; callers choose what that means (one switch, or an error).
func (c Client) Topology(ctx context.Context) (*topo.Cluster, error) {
	out, err := c.query(ctx, Scontrol, "show", "topology")
	if err != nil {
		return nil, err
	}
	return topo.ParseScontrolTopology(bytes.NewReader(out), "scontrol show topology")
}

// Requeue puts the job back in the queue (`scontrol requeue ID`).
//
// Requeueing, slurmctld has the batch step's processes sent SIGTERM, and
// scontrol requeue, run from the batch step, is one of them: killed by
// SIGTERM, it has been answered, and the job is requeued (Slurm 22.05, chaos
// seed 4734325054123725986: "scontrol requeue 10001: signal: terminated"
// beside "JOB 10001 ... CANCELLED ... DUE TO JOB REQUEUE" in the job's log;
// taken as a failure, it skipped the lost node's exclusion). A SIGTERM from
// anything else at that moment (scancel, a preemption) ends the job anyway.
func (c Client) Requeue(ctx context.Context, jobID string) error {
	_, err := c.query(ctx, Scontrol, "requeue", jobID)
	if code, ok := ExitCode(err); ok && code == 128+int(syscall.SIGTERM) {
		return nil
	}
	return err
}

// KillStep sends SIGKILL to every task of a step (`scancel --signal=KILL
// JOB.STEP`).
func (c Client) KillStep(ctx context.Context, jobID, stepID string) error {
	_, err := c.query(ctx, Scancel, "--signal=KILL", jobID+"."+stepID)
	return err
}

// Srun runs a short step to completion and returns its output. It is
// bounded by ctx only: a step waits for slurmstepd on every node, so the
// caller gives it its own deadline.
func (c Client) Srun(ctx context.Context, args ...string) ([]byte, error) {
	if c.Run == nil {
		return nil, &Error{Args: append([]string{Srun}, args...), Err: errors.New("slurm.Client has no Runner")}
	}
	return c.Run(ctx, Srun, args...)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// ExcludeNodes adds nodes to the job's ExcNodeList (`scontrol update
// jobid=ID ExcNodeList=...`), merged with what the job already excludes,
// and returns the list set. Slurm takes it only for a pending job (a
// running one answers "Job is no longer pending execution"): call it after
// Requeue, while the job is still COMPLETING, or read the job first (Job)
// and SetExcNodeList after the requeue.
func (c Client) ExcludeNodes(ctx context.Context, jobID string, nodes []string) (string, error) {
	j, err := c.Job(ctx, jobID)
	if err != nil {
		return "", err
	}
	all, err := MergeHostlists(j.Record["ExcNodeList"], nodes)
	if err != nil {
		return "", err
	}
	return all, c.SetExcNodeList(ctx, jobID, all)
}

// SetExcNodeList sets the job's ExcNodeList to the hostlist expression list.
func (c Client) SetExcNodeList(ctx context.Context, jobID, list string) error {
	_, err := c.query(ctx, Scontrol, "update", "jobid="+jobID, "ExcNodeList="+list)
	return err
}

// MergeHostlists adds nodes to the hostlist expression have ("" or
// "(null)": none) and compresses the union.
func MergeHostlists(have string, nodes []string) (string, error) {
	var all []string
	if have != "" && have != "(null)" {
		h, err := topo.ExpandHostlist(have)
		if err != nil {
			return "", fmt.Errorf("the job's ExcNodeList=%q: %w", have, err)
		}
		all = h
	}
	seen := map[string]bool{}
	var out []string
	for _, n := range append(all, nodes...) {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return topo.CompressHostlist(out), nil
}

// SrunHelp is `srun --help`: the options srun has here, SPANK plugins'
// included (pyxis's --container-image, trainrun's --train-*).
func (c Client) SrunHelp(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cmpOr(c.Timeout, DefaultTimeout))
	defer cancel()
	return c.Srun(ctx, "--help")
}
