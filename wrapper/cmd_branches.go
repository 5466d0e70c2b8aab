package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/trainrun/trainrun/wrapper/internal/array"
	"github.com/trainrun/trainrun/wrapper/internal/runname"

	"github.com/spf13/pflag"

	"github.com/trainrun/trainrun/internal/shell"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/jobdir"
	"github.com/trainrun/trainrun/wrapper/internal/run"
)

func init() {
	register(&command{name: "branches", short: "train branches on separate data from one checkpoint as a job array, then merge them", run: runBranches})
}

const branchesSynopsis = "branches --from CKPT --data NAME=SPEC,... [--merge 'CMD {branches} {out}'] [--weights W1,W2,...] [--time LIMIT] [--nodes N] [--gpus-per-node G] [--format table|json] [--dry-run] -- CMD {data}"

var branchesHelpTail = joinLines(
	"",
	"Branch-train-merge as Slurm jobs: one job array element per data branch, each a 'trainrun run --name",
	"branch-NAME --init-from CKPT' that starts from the same committed checkpoint CKPT (STORE/TAG) and",
	"trains on its data ({data} in CMD is the branch's SPEC, {branch} its NAME; exported as",
	"TRAINRUN_SWEEP_DATA and TRAINRUN_SWEEP_BRANCH), with its own store DIR/runs/branch-NAME/checkpoints,",
	"requeued and resumed as any run. The trainer saves a final checkpoint (the branch's result).",
	"",
	"--merge: a merge job submitted with --dependency=afterok:<array>, so it runs only after every",
	"branch finished. It runs the merge command under 'trainrun run --name merge' (one task), with",
	"{branches} the latest committed checkpoint of every branch (one argument each), {out} the merged",
	"checkpoint's directory in the merge's own store (DIR/runs/merge/checkpoints/merged), and {weights}",
	"the --weights (also TRAINRUN_MERGE_WEIGHTS). The merge command writes {out} through the",
	"checkpoint handshake and trainrun commits it. contrib/trainer/merge_checkpoints.py is one:",
	"  --merge 'python3 merge_checkpoints.py --weights {weights} --out {out} {branches}'",
	"",
	"DIR (--branches-dir, default ./trainrun-branches-NAME) holds sweep.json, branches.sbatch, merge.sbatch",
	"and logs/; 'trainrun sweep status DIR' shows the branches' states and metrics.",
	"",
)

type branchesOptions struct {
	sweepOptions
	from    string
	data    []string
	merge   string
	weights string
}

func (o *branchesOptions) addFlags(fs *pflag.FlagSet) {
	o.addArrayFlags(fs, "branch", "branches")
	fs.StringVar(&o.from, "from", "", "the committed checkpoint every branch starts from (STORE/TAG, e.g. trainrun-123/checkpoints/step-1000)")
	fs.StringArrayVar(&o.data, "data", nil, "NAME=SPEC,...: one branch per NAME, training on SPEC ({data} in CMD); repeatable")
	fs.StringVar(&o.merge, "merge", "", "merge command, run after every branch finished: 'CMD {branches} {out}' (see below)")
	fs.StringVar(&o.weights, "weights", "", "W1,W2,...: one merge weight per branch, in --data order ({weights}; default: equal)")
	fs.StringVar(&o.dir, "branches-dir", "", "the branches' directory, on a file system all nodes share (default ./trainrun-branches-NAME)")
	for name, usage := range map[string]string{
		"time":       "time limit of each branch and of the merge (30m, 1h30m, or Slurm's formats); default: planned as for trainrun sweep",
		"dry-run":    "print the branches, the sbatch command lines and the scripts; submit nothing, write nothing",
		"name":       "name of the branch set (the array's job name; default: the branch names and a hash)",
		"partition":  "partition of the jobs (default: Slurm's)",
		"sbatch-arg": "pass this flag on to sbatch for the branches and the merge, e.g. --sbatch-arg=--account=proj (repeat)",
	} {
		fs.Lookup(name).Usage = usage
	}
	o.metric = "loss"
}

// parseBranchData reads the --data lists: NAME=SPEC items separated by
// commas; a comma piece without "=" continues the previous SPEC.
func parseBranchData(items []string) (names, specs []string, err error) {
	seen := map[string]bool{}
	for _, item := range items {
		for _, piece := range strings.Split(item, ",") {
			n, spec, ok := strings.Cut(piece, "=")
			if !ok {
				if len(specs) == 0 {
					return nil, nil, usageErrorf("--data %q: want NAME=SPEC,NAME=SPEC,... e.g. --data code=/data/code,web=/data/web", item)
				}
				specs[len(specs)-1] += "," + piece
				continue
			}
			if !runname.RE.MatchString(n) || len(n) > 48 {
				return nil, nil, usageErrorf("--data %q: branch name %q: want letters, digits, '.', '_' or '-' (it names branch-%s)", item, n, n)
			}
			if seen[n] {
				return nil, nil, usageErrorf("--data: branch %q given twice", n)
			}
			seen[n] = true
			names, specs = append(names, n), append(specs, spec)
		}
	}
	if len(names) < 1 {
		return nil, nil, usageErrorf("no branches: give --data NAME=SPEC,NAME=SPEC,...")
	}
	return names, specs, nil
}

// branchesJSON is `trainrun branches --format json`.
type branchesJSON struct {
	Dir        string       `json:"branches_dir"`
	JobID      string       `json:"job_id,omitempty"`
	MergeJobID string       `json:"merge_job_id,omitempty"`
	From       string       `json:"from"`
	Branches   []branchJSON `json:"branches"`
}

type branchJSON struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	Data  string `json:"data"`
}

func runBranches(ctx context.Context, env *runEnv, args []string) error {
	var o branchesOptions
	fs := newFlags("branches", branchesSynopsis, env.stdout)
	o.addFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(env.stdout, "Usage: trainrun %s\n\nFlags:\n", branchesSynopsis)
		fs.PrintDefaults()
		fmt.Fprint(env.stdout, branchesHelpTail)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErrorf("no training command: put it after --, e.g. trainrun branches --from ckpt/step-1000 --data a=/d/a,b=/d/b --time 1h -- python train.py --data {data}")
	}
	if o.plan.Format != "table" && o.plan.Format != "json" {
		return usageErrorf("--format %q: accepted: table, json", o.plan.Format)
	}
	if o.from == "" {
		return usageErrorf("--from not given: the committed checkpoint every branch starts from (STORE/TAG)")
	}
	from, err := run.InitialCheckpoint(o.from)
	if err != nil {
		return err
	}
	s, err := o.manifest(fs.Args())
	if err != nil {
		return err
	}
	if err := o.sizeAndTime(ctx, env, fs, s); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	runFlags := append([]string{"--init-from=" + from}, o.forwardedRunFlags(fs)...)
	script := array.Script(exe, s, runFlags)
	req := o.sbatchRequest(s)
	req.Script = filepath.Join(s.Dir, "branches.sbatch")
	mergeScript, mreq := o.mergeJob(exe, s)
	out := branchesJSON{Dir: s.Dir, From: from}
	for _, t := range s.Trials {
		out.Branches = append(out.Branches, branchJSON{Index: t.Index, Name: t.Params["branch"], Data: t.Params["data"]})
	}
	if o.dryRun {
		return printBranches(env, o.plan.Format, s, out, []slurm.SbatchRequest{req, mreq}, script+"\n"+mergeScript, true)
	}
	scripts := map[string]string{req.Script: script}
	if mergeScript != "" {
		scripts[mreq.Script] = mergeScript
	}
	if err := array.WriteDir(s, scripts); err != nil {
		return err
	}
	return o.submitBranches(ctx, env, s, out, req, mreq, script+"\n"+mergeScript)
}

func (o *branchesOptions) submitBranches(ctx context.Context, env *runEnv, s *array.Manifest, out branchesJSON, req, mreq slurm.SbatchRequest, scripts string) error {
	if err := submitArray(ctx, env, s, req, "branches'"); err != nil {
		return err
	}
	out.JobID = s.JobID
	if o.merge != "" {
		var err error
		mreq.Dependency = "afterok:" + s.JobID
		if out.MergeJobID, err = env.slurm.Sbatch(ctx, mreq); err != nil {
			return withCode(exitcode.Slurm, fmt.Errorf("branches submitted as job array %s, but the merge job was not: %w (submit %s with --dependency=afterok:%s yourself)", s.JobID, err, mreq.Script, s.JobID))
		}
	}
	return printBranches(env, o.plan.Format, s, out, []slurm.SbatchRequest{req, mreq}, scripts, false)
}

// manifest is the branches as a sweep over (branch, data).
func (o *branchesOptions) manifest(argv []string) (*array.Manifest, error) {
	names, specs, err := parseBranchData(o.data)
	if err != nil {
		return nil, err
	}
	if o.weights != "" && len(strings.Split(o.weights, ",")) != len(names) {
		return nil, usageErrorf("--weights %q has %d weights for %d branches: give one per branch, in --data order", o.weights, len(strings.Split(o.weights, ",")), len(names))
	}
	if o.merge != "" && (!strings.Contains(o.merge, "{branches}") || !strings.Contains(o.merge, "{out}")) {
		return nil, usageErrorf("--merge %q: the merge command needs {branches} (the branches' checkpoints) and {out} (where the merged one goes)", o.merge)
	}
	name := o.name
	if name == "" {
		name = runname.Derive(append(append([]string{strings.Join(names, "-")}, o.from), argv...))
	}
	s, err := o.newManifest("branches", name, "trainrun-branches-", []string{"branch", "data"}, argv, len(names))
	if err != nil {
		return nil, err
	}
	for i, n := range names {
		s.Trials = append(s.Trials, array.Trial{Index: i, Params: map[string]string{"branch": n, "data": specs[i]}, Name: "branch-" + n})
	}
	return s, nil
}

// mergeJob is the merge's batch script and submission ("" without --merge).
func (o *branchesOptions) mergeJob(exe string, s *array.Manifest) (string, slurm.SbatchRequest) {
	if o.merge == "" {
		return "", slurm.SbatchRequest{}
	}
	weights := o.weights
	if weights == "" {
		weights = strings.TrimSuffix(strings.Repeat("1,", len(s.Trials)), ",")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/bash\n# trainrun branches %s: the merge, after every branch finished (--dependency=afterok); written by trainrun\nset -eu\n", s.Name)
	var refs []string
	for i, t := range s.Trials {
		fmt.Fprintf(&b, "B%d=$(%s ckpt latest --ckpt-dir %s)\n", i, shell.Quote(exe), shell.Quote(filepath.Join(jobdir.Run(s.Dir, t.Name), jobdir.Checkpoints)))
		refs = append(refs, fmt.Sprintf(`"$B%d"`, i))
	}
	fmt.Fprintf(&b, "export TRAINRUN_MERGE_WEIGHTS=%s\n", shell.Quote(weights))
	cmd := strings.NewReplacer("{branches}", strings.Join(refs, " "), "{out}", "'{ckpt_dir}/merged'", "{weights}", shell.Quote(weights)).Replace(o.merge)
	fmt.Fprintf(&b, "exec %s run --name merge --job-dir %s --fix tp=1 -- %s\n", shell.Quote(exe), shell.Quote(s.Dir), cmd)
	req := slurm.SbatchRequest{Script: filepath.Join(s.Dir, "merge.sbatch"), JobName: "merge-" + s.Name, Partition: o.partition,
		Nodes: 1, NtasksPerNode: 1, GPUsPerNode: 1, Time: time.Duration(s.TimeLimitS) * time.Second,
		Output: filepath.Join(s.Dir, "logs", "merge.out"), Requeue: true, Extra: o.sbatchArgs}
	return b.String(), req
}

func printBranches(env *runEnv, format string, s *array.Manifest, out branchesJSON, reqs []slurm.SbatchRequest, scripts string, dry bool) error {
	w := env.stdout
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintf(w, "branches %s: %d branches from %s, one job array --array=%s, %d node(s) x %d GPU(s) each, time limit %s (%s)\n",
		s.Name, len(s.Trials), out.From, s.Array, s.Nodes, s.GPUsPerNode, time.Duration(s.TimeLimitS)*time.Second, s.TimeSource)
	for _, br := range out.Branches {
		fmt.Fprintf(w, "  %d  %-16s %s\n", br.Index, br.Name, br.Data)
	}
	fmt.Fprintf(w, "branches dir  %s\n", s.Dir)
	if dry {
		for _, r := range reqs {
			if r.Script != "" {
				fmt.Fprintf(w, "dry run: would submit  sbatch --parsable %s\n", strings.Join(r.Argv(), " "))
			}
		}
		fmt.Fprintf(w, "\n%s", scripts)
		return nil
	}
	fmt.Fprintf(w, "job id        %s\n", s.JobID)
	if out.MergeJobID != "" {
		fmt.Fprintf(w, "merge job id  %s (after every branch: --dependency=afterok:%s)\n", out.MergeJobID, s.JobID)
	}
	fmt.Fprintf(w, "status        trainrun sweep status %s\n", s.Dir)
	return nil
}
