//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// shellTrainer keeps the checkpoint handshake without torch: one rank,
// steps of 0.5 s, progress reported (rank 0), and on the checkpoint signal
// or SIGTERM it saves its step and a 1 MiB shard into
// TRAINRUN_CKPT_DIR/step-N/, marks done.$RANK and exits 0; it resumes from
// TRAINRUN_RESUME_DIR.
const shellTrainer = `#!/bin/bash
steps=$1
step=0
if [ -n "$TRAINRUN_RESUME_DIR" ]; then step=$(cat "$TRAINRUN_RESUME_DIR/rank$RANK"); fi
save=0
trap 'save=1' USR2 TERM
progress() {
	[ "$RANK" = 0 ] || return 0
	printf '%d %d %s\n' "$step" $((step * 4096)) "$(date +%s.%N)" > "$TRAINRUN_JOB_DIR/launch/progress.tmp"
	mv "$TRAINRUN_JOB_DIR/launch/progress.tmp" "$TRAINRUN_JOB_DIR/launch/progress"
}
while [ "$step" -lt "$steps" ]; do
	if [ "$save" = 1 ]; then
		d="$TRAINRUN_CKPT_DIR/step-$step"
		mkdir -p "$d/.trainrun"
		echo "$step" > "$d/rank$RANK"
		head -c 1048576 /dev/zero > "$d/shard$RANK.bin"
		sync
		touch "$d/.trainrun/done.$RANK"
		sync
		exit 0
	fi
	sleep 0.5 & wait $!
	step=$((step + 1))
	progress
done
`

// A time-limited job checkpoints on trainrun's clock, is requeued (once,
// or more on a slow machine) and finishes; the Pushgateway holds the run's final state with its counters
// carried across the two incarnations (each a new trainrun process), the
// textfile too, and `trainrun report --svg` draws both incarnations and the
// requeue wait between them.
func TestMetricsAcrossRequeue(t *testing.T) {
	t.Parallel() // mostly waits on Slurm's clocks: a cluster of its own
	cluster := ownCluster(t)
	bin := trainrun(t)
	ctx := context.Background()
	pg, err := cluster.StartPushgateway(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	dir := t.TempDir()
	trainer := filepath.Join(dir, "trainer.sh")
	if err := os.WriteFile(trainer, []byte(shellTrainer), 0o755); err != nil {
		t.Fatal(err)
	}
	jobDir := filepath.Join(dir, "job")
	textfile := filepath.Join(dir, "textfile", "trainrun.prom")
	os.MkdirAll(filepath.Dir(textfile), 0o755)
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=1 --time=1 --requeue --open-mode=append
exec %s run --probe none --fix tp=1 --job-dir %s --pushgateway %s --metrics-textfile %s -- %s 110
`, bin, jobDir, pg.URL, textfile, trainer)
	id, err := cluster.SubmitBatch(ctx, script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	if _, err := cluster.WaitJob(ctx, id, 4*time.Minute, "COMPLETED"); err != nil {
		t.Fatalf("%v\n%s", err, cluster.JobOutput(id))
	}
	log := cluster.JobOutput(id)
	job := strconv.Itoa(id)

	resp, err := http.Get(pg.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	series := func(src []byte, name, labels, value string) bool {
		re := `(?m)^` + name + `\{[^}]*job_id="` + job + `"[^}]*\} ` + value + `$`
		if labels != "" {
			re = `(?m)^` + name + `\{[^}]*` + labels + `[^}]*job_id="` + job + `"[^}]*\} ` + value + `$`
		}
		return regexp.MustCompile(re).Match(src)
	}
	// On a loaded machine the job may need more than one requeue: every
	// incarnation but the last ended by the time limit and a requeue.
	m := regexp.MustCompile(`(?m)^trainrun_restart_count\{[^}]*job_id="` + job + `"[^}]*\} (\d+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("the Pushgateway has no trainrun_restart_count for job %s:\n%s", job, b)
	}
	restarts := string(m[1])
	if n, _ := strconv.Atoi(restarts); n < 1 {
		t.Errorf("restart count %s: the job was not requeued\n%s", restarts, log)
	}
	for _, c := range []struct{ name, labels, value string }{
		{"trainrun_requeues_total", "", restarts},
		{"trainrun_interruptions_total", `cause="time-limit",`, restarts},
		{"trainrun_trainer_step", "", `110`},
	} {
		if !series(b, c.name, c.labels, c.value) {
			t.Errorf("the Pushgateway lacks %s{%sjob_id=%q} %s", c.name, c.labels, job, c.value)
		}
	}
	if !regexp.MustCompile(`(?m)^trainrun_state\{[^}]*job_id="` + job + `"[^}]*state="finished"\} 1$`).Match(b) {
		t.Errorf("the Pushgateway does not hold state finished")
	}
	if !series(b, "trainrun_checkpoints_committed_total", "", restarts) {
		t.Errorf("the Pushgateway does not count one committed checkpoint per requeue (%s)", restarts)
	}
	if t.Failed() {
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "trainrun_") && !strings.Contains(l, "_bucket") {
				lines = append(lines, l)
			}
		}
		t.Logf("Pushgateway:\n%s\njob log:\n%s", strings.Join(lines, "\n"), log)
	}
	tf, err := os.ReadFile(textfile)
	if err != nil || !regexp.MustCompile(`trainrun_state\{job_id="`+job+`",partition="[^"]*",state="finished"\} 1`).Match(tf) {
		t.Errorf("textfile %s does not hold the final state (%v)", textfile, err)
	}

	svg := filepath.Join(jobDir, "timeline.svg")
	out, err := exec.Command(bin, "report", "--svg", svg, jobDir).CombinedOutput()
	if err != nil {
		t.Fatalf("trainrun report: %v\n%s", err, out)
	}
	nInc, _ := strconv.Atoi(restarts)
	for _, want := range []string{fmt.Sprintf("%d incarnation(s)", nInc+1), "requeued after time-limit", "finished", "requeue waits: ", "checkpoints: "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	t.Logf("trainrun report:\n%s", out)
	if d := os.Getenv("TRAINRUN_E2E_ARTIFACTS"); d != "" {
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "requeue-report.txt"), out, 0o644)
		if b, err := os.ReadFile(svg); err == nil {
			os.WriteFile(filepath.Join(d, "requeue-timeline.svg"), b, 0o644)
		}
		if b, err := os.ReadFile(filepath.Join(jobDir, "events.jsonl")); err == nil {
			os.WriteFile(filepath.Join(d, "requeue-events.jsonl"), b, 0o644)
		}
		os.WriteFile(filepath.Join(d, "requeue-job.log"), []byte(log), 0o644)
	}
}
