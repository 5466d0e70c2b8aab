package run

import (
	"context"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/internal/slurm"
)

// `trainrun run` warns when a requeue would truncate the job's log, and not
// when the script appends, the job cannot be requeued or is interactive.
func TestOutputTruncationWarning(t *testing.T) {
	script := map[string]string{
		"1": "#!/bin/bash\n#SBATCH --requeue\nexec trainrun run -- true\n",
		"2": "#!/bin/bash\n#SBATCH --requeue --open-mode=append\nexec trainrun run -- true\n",
	}
	sc := slurm.Client{Run: func(_ context.Context, name string, args ...string) ([]byte, error) {
		if name == slurm.Scontrol && len(args) == 4 && args[0] == "write" && args[1] == "batch_script" {
			return []byte(script[args[2]]), nil
		}
		return nil, &slurm.Error{Args: args, Stderr: "no"}
	}}
	job := func(line string) slurm.Job {
		j, err := slurm.ParseJob(line, nil)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	none := func(string) string { return "" }
	if w := outputTruncationWarning(context.Background(), sc, job("JobId=1 BatchFlag=1 Requeue=1 StdOut=/home/u/slurm-1.out"), none); !strings.Contains(w, "/home/u/slurm-1.out") || !strings.Contains(w, "--open-mode=append") {
		t.Errorf("truncating job: %q", w)
	}
	for _, line := range []string{"JobId=2 BatchFlag=1 Requeue=1", "JobId=1 BatchFlag=1 Requeue=0", "JobId=1 BatchFlag=0 Requeue=1"} {
		if w := outputTruncationWarning(context.Background(), sc, job(line), none); w != "" {
			t.Errorf("%s: %q", line, w)
		}
	}
	if w := outputTruncationWarning(context.Background(), sc, job("JobId=1 BatchFlag=1 Requeue=1"), func(k string) string {
		if k == "SBATCH_OPEN_MODE" {
			return "append"
		}
		return ""
	}); w != "" {
		t.Errorf("SBATCH_OPEN_MODE=append: %q", w)
	}
}
