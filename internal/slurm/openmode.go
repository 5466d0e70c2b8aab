package slurm

import (
	"bufio"
	"bytes"
	"strings"
)

// OpenModeAppend says whether the job's output files are appended to
// (sbatch --open-mode=append) rather than truncated when a requeued job
// starts again: from SBATCH_OPEN_MODE or the batch script's #SBATCH lines
// (read until the first command, as sbatch does). `scontrol show job` does
// not say; an --open-mode on sbatch's command line and slurm.conf's
// JobFileAppend=1 are not seen (known is false then).
func OpenModeAppend(script []byte, getenv Getenv) (appends, known bool) {
	if getenv != nil {
		if v := strings.ToLower(getenv("SBATCH_OPEN_MODE")); v != "" {
			return strings.HasPrefix(v, "a"), true
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(script))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#!") {
			continue
		}
		if !strings.HasPrefix(line, "#") {
			break
		}
		rest, ok := strings.CutPrefix(line, "#SBATCH")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		for i, f := range fields {
			if strings.HasPrefix(f, "#") {
				break
			}
			v, ok := strings.CutPrefix(f, "--open-mode=")
			if !ok && f == "--open-mode" && i+1 < len(fields) {
				v, ok = fields[i+1], true
			}
			if ok {
				appends, known = strings.HasPrefix(strings.ToLower(v), "a"), true
			}
		}
	}
	return appends, known
}

// IsBatch says whether the job runs a batch script (sbatch; BatchFlag=1),
// not an interactive allocation (salloc, or srun alone), which Slurm cannot
// requeue ("Only batch jobs are accepted or processed"). An unknown record
// counts as batch, as before this was checked.
func (j Job) IsBatch() bool { return j.Record["BatchFlag"] != "0" }
