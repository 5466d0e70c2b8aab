//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The bench's jobs under `trainrun run` (issue 34: "with sizing and
// migration on and off"). schedScript sleeps its true duration; migration
// lives in trainrun run's controller, so these two policies run each job
// under it instead, with a light trainer (schedTrainer: Python and
// trainrun's client, no torch, one sleeping process per GPU) whose step time
// is the truth table's for the GPU type and size it got. Both submit like
// trainrun-sizing (--min-gpus 8 --max-gpus 16, late-bound); they differ in
// --migrate alone.

// schedRunSteps is every job's --train-steps: its tokens in this many equal
// steps, so a step is 0.1-0.3 s at this trace's minute scale (the real
// global batch, 64 × 4096 tokens, would make a job 1-7 steps long). The
// controller predicts another partition's step time from the plans' ratio,
// which the step's size does not change.
const schedRunSteps = 100

// schedRunSaveAt is the step at which a job's first incarnation asks
// trainrun for one checkpoint that continues (trainrun ckpt request --then
// continue), as a periodic save would: the controller measures it, and a
// move's cost then counts that save, not its 30 s default for a job with
// none measured (which no job of this trace could recoup).
const schedRunSaveAt = 10

// The migration settings, scaled to the trace (jobs of 10-60 s, limits
// of 1-2 minutes): checked every 3 s (default 5m), at most one move per job
// per 30 s (default 1h); and the time limit's checkpoint asked 10 s before
// it (CkptLead, default 5m; submit's lead is at least 10 s, but the
// controller ignores an exported lead above half the limit and would fall
// back to 5m, asking at once in every incarnation).
const (
	schedMigrateEvery = "3s"
	schedMigrateMin   = "30s"
	schedCkptLead     = "10s"
)

// schedRunPolicies are trainrun-sizing-run (--migrate no) and
// trainrun-sizing-migrate (--migrate yes); sizing is trainrun-sizing's
// submit (tr, sched_bench_test.go) with the job requeueable and its output
// appended across incarnations.
func schedRunPolicies(tr func(size ...string) func(s *schedRun, j schedJob, env string) (string, error)) []schedPolicy {
	mk := func(name, migrate string) schedPolicy {
		sub := tr("--min-gpus", "8", "--max-gpus", "16", "--requeue", "--open-mode=append")
		return schedPolicy{name, func(s *schedRun, j schedJob, env string) (string, error) {
			script, err := writeSchedRunFiles(s.dir)
			if err != nil {
				return "", err
			}
			schedRunDirs[name] = s.dir
			r := *s
			r.script = script
			env += fmt.Sprintf(",BENCH_BIN=%s,BENCH_DIR=%s,BENCH_STEPS=%d,BENCH_MIGRATE=%s,BENCH_MIGRATE_EVERY=%s",
				s.bin, s.dir, schedRunSteps, migrate, schedMigrateEvery)
			return sub(&r, j, env)
		}}
	}
	return []schedPolicy{mk("trainrun-sizing-run", "no"), mk("trainrun-sizing-migrate", "yes")}
}

// schedRunDirs is each run policy's directory of the trace last replayed
// (its jobs' outputs and incarnations, for schedRunCaption).
var schedRunDirs = map[string]string{}

// writeSchedRunFiles writes the job script, the trainer and the policy of
// trainrun run into dir (once) and returns the script's path.
func writeSchedRunFiles(dir string) (string, error) {
	script := filepath.Join(dir, "run-job.sh")
	if _, err := os.Stat(script); err == nil {
		return script, nil
	}
	conf := "MigrateMinInterval=" + schedMigrateMin + "\nCkptLead=" + schedCkptLead + "\n" + schedPolicyConf()
	client := filepath.Join(repoRoot(), "contrib", "trainer")
	for name, text := range map[string]string{"run.conf": conf, "trainer.py": strings.NewReplacer("CLIENT_DIR", strconv.Quote(client), "SAVE_AT", strconv.Itoa(schedRunSaveAt)).Replace(schedTrainer), "run-job.sh": schedRunScript} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
			return "", err
		}
	}
	return script, nil
}

// schedRunScript is the job under trainrun run: the same node → type and
// truth lookups as schedScript, on every incarnation (a moved job gets the
// step time of where it landed); the first incarnation's start is kept in
// BENCH_OUT/IDX.start, each incarnation is a line of BENCH_OUT/IDX.inc, and
// the trainer's rank 0 writes the result line when the last step is done.
const schedRunScript = `#!/bin/bash
now=$(date +%s.%N)
[ -s "$BENCH_OUT/$BENCH_IDX.start" ] || echo "$now" > "$BENCH_OUT/$BENCH_IDX.start"
first=$(cat "$BENCH_OUT/$BENCH_IDX.start")
typ=$(awk -v n="$SLURMD_NODENAME" '$1==n {print $2}' "$BENCH_NODES")
gpus=$(( SLURM_JOB_NUM_NODES * 8 ))
rate=$(awk -v m="$BENCH_MODEL" -v t="$typ" -v g="$gpus" '$1==m && $2==t && $3==g {print $4}' "$BENCH_TRUTH")
echo "$now $SLURM_JOB_ID ${SLURM_JOB_PARTITION:-?} $typ $gpus restart=${SLURM_RESTART_COUNT:-0} rate=${rate:-nofit} submit-lead=${TRAINRUN_SUBMIT_LEAD:-}" >> "$BENCH_OUT/$BENCH_IDX.inc"
if [ -z "$rate" ]; then echo "$first $now $typ $gpus nofit" > "$BENCH_OUT/$BENCH_IDX.tmp"; mv "$BENCH_OUT/$BENCH_IDX.tmp" "$BENCH_OUT/$BENCH_IDX"; exit 1; fi
echo "$first - $typ $gpus running" > "$BENCH_OUT/$BENCH_IDX.run"
export BENCH_FIRST=$first BENCH_TYPE=$typ BENCH_GPUS=$gpus
export BENCH_STEP_S=$(awk -v t="$BENCH_TOKENS" -v r="$rate" -v n="$BENCH_STEPS" 'BEGIN{printf "%.6f", t/n/r}')
exec "$BENCH_BIN" run --policy "$BENCH_DIR/run.conf" --ckpt-dir "$BENCH_DIR/ckpt-$SLURM_JOB_ID" \
  --migrate "$BENCH_MIGRATE" --migrate-every "$BENCH_MIGRATE_EVERY" --train-steps "$BENCH_STEPS" \
  -- /usr/bin/python3 "$BENCH_DIR/trainer.py"
`

// schedTrainer is one rank: BENCH_STEPS steps of BENCH_STEP_S seconds each
// (slept to a fixed schedule, never spun), progress through trainrun's
// client, a checkpoint (the step number, per rank) when asked, resumed from
// rank 0's step. Without torch.distributed the ranks agree on the tag
// through a file: rank 0 names it after its step (step-N: trainrun reads a
// checkpoint's progress from its tag), the others wait for the name.
// Rank 0 writes the result line after the last step.
const schedTrainer = `import os, subprocess, sys, time
sys.path.insert(0, CLIENT_DIR)
from trainrun_client import Checkpointer

ck = Checkpointer()


def agree(n):
    """The tag of this incarnation's n-th checkpoint: rank 0's step."""
    p = os.path.join(os.environ["BENCH_OUT"], "%s.tag-%s-%d" % (os.environ["BENCH_IDX"], inc, n))
    if ck.rank == 0:
        with open(p + ".tmp", "w") as f:
            f.write("step-%d" % step)
        os.replace(p + ".tmp", p)
        return "step-%d" % step
    for _ in range(1000):
        try:
            with open(p) as f:
                return f.read()
        except OSError:
            time.sleep(0.01)
    raise SystemExit("rank %d: rank 0 named no tag for checkpoint %d in 10 s (%s)" % (ck.rank, n, p))


steps, dt = int(os.environ["BENCH_STEPS"]), float(os.environ["BENCH_STEP_S"])
per_step = float(os.environ["BENCH_TOKENS"]) / steps
step = 0
if ck.resume_dir:
    with open(os.path.join(ck.resume_dir, "step.0")) as f:
        step = int(f.read())
inc = "%s-%s" % (os.environ.get("SLURM_RESTART_COUNT", "0"), os.environ.get("TRAINRUN_RESTART_COUNT", "0"))
saves, t0, start = 0, time.time(), step
while step < steps:
    wait = t0 + (step - start + 1) * dt - time.time()
    if wait > 0:
        time.sleep(wait)
    step += 1
    ck.report_progress(step, tokens=int(step * per_step), min_interval=0.5 if step < steps else 0)
    if ck.rank == 0 and step == SAVE_AT and not ck.resume_dir:
        # One save asked through trainrun, as a periodic save would be: the
        # move's cost then reads a measured save, not the 30 s default.
        subprocess.Popen([os.environ["BENCH_BIN"], "ckpt", "request", "--then", "continue", "--ckpt-dir", ck.ckpt_dir],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if step < steps and ck.should_save():
        saves += 1
        tag = agree(saves)
        path = os.path.join(ck.save_dir(tag), "step.%d" % ck.rank)
        with open(path, "w") as f:
            f.write(str(step))
        ck.mark_done(tag, [path])
        if ck.stop:
            sys.exit(0)
        ck.reset()
if ck.rank == 0:
    out = os.path.join(os.environ["BENCH_OUT"], os.environ["BENCH_IDX"])
    with open(out + ".tmp", "w") as f:
        f.write("%s %.3f %s %s ok\n" % (os.environ["BENCH_FIRST"], time.time(), os.environ["BENCH_TYPE"], os.environ["BENCH_GPUS"]))
    os.replace(out + ".tmp", out)
`

// schedRunCaption is the table's note on the run policies that ran: what
// their rows include, and what happened (moves from the jobs' logs,
// incarnations from BENCH_OUT/IDX.inc).
func schedRunCaption(rows []schedRow) string {
	var b strings.Builder
	for _, r := range rows {
		dir, ok := schedRunDirs[r.name]
		if !ok {
			continue
		}
		if b.Len() == 0 {
			fmt.Fprintf(&b, "trainrun-sizing-run/-migrate: trainrun-sizing's submit (late-bound), each job under `trainrun run` (probe auto, health, one sleeping Python rank per GPU with trainrun_client's checkpoint handshake, %d steps, one save asked at step %d); that overhead is in both rows. CkptLead=%s in both; -migrate adds --migrate yes, every %s, MigrateMinInterval=%s (scaled to this trace; defaults 5m, 5m, 1h)\n", schedRunSteps, schedRunSaveAt, schedCkptLead, schedMigrateEvery, schedMigrateMin)
		}
		st := schedRunStats(dir)
		fmt.Fprintf(&b, "%s: %d migration(s) (%s), %d job(s) ran more than one incarnation (%d incarnations in all)\n", r.name, st.moves, cmpOr(strings.Join(st.routes, ", "), "none"), st.multi, st.incs)
		for _, c := range st.checks[:min(len(st.checks), 8)] {
			fmt.Fprintf(&b, "  %s\n", c)
		}
		keepSchedRunLogs(r.name, dir)
	}
	return b.String()
}

type schedRunStat struct {
	moves, multi, incs int
	routes             []string // "from→to ×n"
	checks             []string // the controller's verdicts that stayed, digits dropped, "×n what"
}

// schedVerdict is a "migration check:" or "--migrate yes: not checking:"
// line's verdict with its figures dropped ("" when the line is neither), so
// that alike verdicts count together.
func schedVerdict(l string) string {
	for _, p := range []string{"migration check: ", "--migrate yes: not checking: "} {
		if i := strings.Index(l, p); i >= 0 {
			v := strings.Map(func(r rune) rune {
				if r >= '0' && r <= '9' {
					return '#'
				}
				return r
			}, l[i:])
			for strings.Contains(v, "##") {
				v = strings.ReplaceAll(v, "##", "#")
			}
			return v
		}
	}
	return ""
}

// schedRunStats counts a run policy's moves (the controller's "migration:
// moving from A to B" lines in the jobs' outputs) and incarnations.
func schedRunStats(dir string) schedRunStat {
	var st schedRunStat
	routes := map[string]int{}
	verdicts := map[string]int{}
	outs, _ := filepath.Glob(filepath.Join(dir, "slurm-*.out"))
	for _, o := range outs {
		b, _ := os.ReadFile(o)
		for _, l := range strings.Split(string(b), "\n") {
			if v := schedVerdict(l); v != "" {
				verdicts[v]++
			}
			i := strings.Index(l, "migration: moving from ")
			if i < 0 {
				continue
			}
			f := strings.Fields(strings.TrimSuffix(l[i+len("migration: moving from "):], ":"))
			if len(f) >= 3 {
				st.moves++
				routes[f[0]+"→"+strings.TrimSuffix(f[2], ":")]++
			}
		}
	}
	for k, n := range routes {
		st.routes = append(st.routes, fmt.Sprintf("%s ×%d", k, n))
	}
	sort.Strings(st.routes)
	var vs []string
	for v := range verdicts {
		vs = append(vs, v)
	}
	sort.Slice(vs, func(a, b int) bool {
		return verdicts[vs[a]] > verdicts[vs[b]] || verdicts[vs[a]] == verdicts[vs[b]] && vs[a] < vs[b]
	})
	for _, v := range vs {
		st.checks = append(st.checks, fmt.Sprintf("×%d %s", verdicts[v], v))
	}
	incs, _ := filepath.Glob(filepath.Join(dir, "out", "*.inc"))
	for _, p := range incs {
		b, _ := os.ReadFile(p)
		n := strings.Count(string(b), "\n")
		st.incs += n
		if n > 1 {
			st.multi++
		}
	}
	return st
}

// TestBenchSchedRunJob: the bench's job kind under trainrun run, on trace
// 1's cluster, with its first three jobs and trainrun-sizing-migrate: every
// job ends with an ok result line, none where it does not fit, and each ran
// at least its true time on the type and size its line names (the trainer
// slept its steps; a resumed incarnation does not skip any).
func TestBenchSchedRunJob(t *testing.T) {
	if os.Getenv("TRAINRUN_BENCH_SCHED") == "" {
		t.Skip("make bench-sched runs it before the bench (TRAINRUN_BENCH_SCHED=1): about 45 s on the whole cluster")
	}
	bin := trainrun(t)
	tr := benchTraces()[0]
	schedTruth, schedGPU, schedParts, schedTraceName = tr.truth, map[string]string{}, tr.parts, tr.name
	for _, p := range tr.parts {
		schedGPU[p.name] = p.typ
	}
	jobs := tr.jobs()[:3]
	var pol schedPolicy
	for _, p := range schedPolicies() {
		if p.name == "trainrun-sizing-migrate" {
			pol = p
		}
	}
	row := runSchedPolicy(t, bin, pol, jobs)
	dir := schedRunDirs[pol.name]
	t.Cleanup(func() {
		if t.Failed() {
			outs, _ := filepath.Glob(filepath.Join(dir, "slurm-*.out"))
			for _, o := range outs {
				b, _ := os.ReadFile(o)
				t.Logf("%s:\n%s", o, b)
			}
		}
	})
	if row.done != len(jobs) || row.noFit != 0 || row.timedOut != 0 {
		t.Fatalf("%d of %d jobs done, %d not fit, %d timed out; want all done", row.done, len(jobs), row.noFit, row.timedOut)
	}
	for _, j := range jobs {
		b, err := os.ReadFile(filepath.Join(dir, "out", strconv.Itoa(j.idx)))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b))
		st, _ := strconv.ParseFloat(f[0], 64)
		en, _ := strconv.ParseFloat(f[1], 64)
		g, _ := strconv.Atoi(f[3])
		d, ok := trueSeconds(j.model, f[2], g, j.tokens)
		if !ok || en-st < d {
			t.Errorf("job %d: %q: ran %.1f s, its true time on %d %s is %.1f s (fits: %v)", j.idx, strings.TrimSpace(string(b)), en-st, g, f[2], d, ok)
		}
		if logs, _ := filepath.Glob(filepath.Join(dir, "slurm-*.out")); len(logs) != len(jobs) {
			t.Errorf("%d job outputs, want %d", len(logs), len(jobs))
		}
		inc, _ := os.ReadFile(filepath.Join(dir, "out", strconv.Itoa(j.idx)+".inc"))
		t.Logf("job %d (%s, %d GPUs asked): %s; incarnations:\n%s", j.idx, j.model, j.gpus, strings.TrimSpace(string(b)), inc)
	}
	// Each job's asked save (schedRunSaveAt) was committed and measured.
	logs, _ := filepath.Glob(filepath.Join(dir, "slurm-*.out"))
	for _, l := range logs {
		if b, _ := os.ReadFile(l); !strings.Contains(string(b), "checkpoint step-") || !strings.Contains(string(b), "request to its commit") {
			t.Errorf("%s: no measured save of a step-N checkpoint:\n%s", l, b)
		}
	}
	t.Log(schedRunCaption([]schedRow{row}))
}

// keepSchedRunLogs copies a run policy's job outputs and incarnation files
// under $TRAINRUN_BENCH_RUN_LOGS/<trace>-<policy>/ when that is set (the
// test's own directory goes with the test).
func keepSchedRunLogs(name, dir string) {
	to := os.Getenv("TRAINRUN_BENCH_RUN_LOGS")
	if to == "" {
		return
	}
	to = filepath.Join(to, schedTraceName+"-"+name)
	if err := os.MkdirAll(to, 0o755); err != nil {
		return
	}
	outs, _ := filepath.Glob(filepath.Join(dir, "slurm-*.out"))
	incs, _ := filepath.Glob(filepath.Join(dir, "out", "*"))
	for _, p := range append(outs, incs...) {
		if b, err := os.ReadFile(p); err == nil {
			_ = os.WriteFile(filepath.Join(to, filepath.Base(p)), b, 0o644)
		}
	}
}
