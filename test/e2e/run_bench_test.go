//go:build e2e

package e2e

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkRunOverhead measures, inside one allocation of 2 nodes × 8 GPUs,
// the wall time of a bare `srun true` (one task per GPU) against `trainrun
// run -- true` with the topology probe (a first start), without it (a
// restart reusing the probe's cache, or --probe none), with the probe but
// trainrun's own exec-task as the shim instead of the lean trainrun-shim
// (TRAINRUN_SHIM=exec-task), and as before both changes (also
// TRAINRUN_EARLY_STEP=0: a probe step, then the main one after the plan),
// alternating so that all see the same machine load. It reports medians and
// their ratios.
//
//	go test -tags e2e -run '^$' -bench RunOverhead -benchtime 1x ./test/e2e/
func BenchmarkRunOverhead(b *testing.B) {
	bin := trainrun(b)
	const rounds = 7
	// A job directory per start: a second `trainrun run` in one that saw
	// the run finish exits at once ("finished: not restarting"), which made
	// every iteration after the first measure nothing (make bench's
	// -benchtime 10x reported 5 ms for trainrun run).
	//
	// Each round runs every variant once, starting one variant later than
	// the round before, so that none always follows the same one; the
	// samples of every iteration (make bench: 10 jobs of 7 rounds) are
	// pooled. A single job's medians of 7 moved by 0.15x between two runs
	// on a busy 2-core VM.
	jobScript := func(dir string) string {
		return fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=8 --gpus-per-node=8 --time=10
t() { local s=$(date +%%s%%N); "$@" >/dev/null 2>&1 || echo "FAILED $*"; echo "$(( ($(date +%%s%%N) - s) / 1000 ))"; }
variant() {
  case $1 in
  srun) echo "srun $(t srun --ntasks=16 --ntasks-per-node=8 true)";;
  probe) echo "probe $(t env TRAINRUN_JOB_DIR=%[2]s/p$2 %[3]s run --probe all --fix tp=8 -- true)";;
  noprobe) echo "noprobe $(t env TRAINRUN_JOB_DIR=%[2]s/n$2 %[3]s run --probe none --fix tp=8 -- true)";;
  exectask) echo "exectask $(t env TRAINRUN_SHIM=exec-task TRAINRUN_JOB_DIR=%[2]s/e$2 %[3]s run --probe all --fix tp=8 -- true)";;
  sequential) echo "sequential $(t env TRAINRUN_SHIM=exec-task TRAINRUN_EARLY_STEP=0 TRAINRUN_JOB_DIR=%[2]s/s$2 %[3]s run --probe all --fix tp=8 -- true)";;
  esac
}
vs=(srun probe noprobe exectask sequential)
for i in $(seq %[1]d); do
  for k in 0 1 2 3 4; do variant ${vs[$(( (i + k) %% 5 ))]} $i; done
done
`, rounds, dir, bin)
	}
	us := map[string][]float64{}
	for i := 0; i < b.N; i++ {
		state, exit, out, id := runJob(b, jobScript(b.TempDir()), 5*time.Minute)
		if state != "COMPLETED" || exit != 0 || strings.Contains(out, "FAILED") {
			b.Fatalf("job %d: %s exit %d\n%s", id, state, exit, out)
		}
		n := 0
		for _, m := range regexp.MustCompile(`(?m)^(srun|probe|noprobe|exectask|sequential) (\d+)$`).FindAllStringSubmatch(out, -1) {
			v, _ := strconv.ParseFloat(m[2], 64)
			us[m[1]] = append(us[m[1]], v/1000)
			n++
		}
		if n != 5*rounds {
			b.Fatalf("job %d: %d samples, want %d:\n%s", id, n, 5*rounds, out)
		}
	}
	med := func(k string) float64 {
		v := us[k]
		sort.Float64s(v)
		return v[len(v)/2]
	}
	s, p, n, e, q := med("srun"), med("probe"), med("noprobe"), med("exectask"), med("sequential")
	b.ReportMetric(float64(len(us["srun"])), "samples")
	b.ReportMetric(s, "srun-ms")
	b.ReportMetric(p, "trainrun-probe-ms")
	b.ReportMetric(n, "trainrun-noprobe-ms")
	b.ReportMetric(p/s, "ratio-probe")
	b.ReportMetric(n/s, "ratio-noprobe")
	b.ReportMetric(e/s, "ratio-probe-exectask")
	b.ReportMetric(q/s, "ratio-probe-before")
}
