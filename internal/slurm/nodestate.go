package slurm

import (
	"bufio"
	"bytes"
	"context"
	"strings"
)

// NodeStates reads each node's State from `scontrol show node -o LIST`
// (LIST a hostlist expression or a comma-separated list), e.g. "MIXED",
// "DOWN+NOT_RESPONDING", "IDLE*".
func (c Client) NodeStates(ctx context.Context, nodelist string) (map[string]string, error) {
	out, err := c.query(ctx, Scontrol, "show", "node", "-o", nodelist)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, r := range ParseRecords(string(out)) {
		if r["NodeName"] != "" {
			m[r["NodeName"]] = r["State"]
		}
	}
	return m, nil
}

// NodeFailed says whether a node's State (NodeStates) says it has failed:
// DOWN, FAIL or NOT_RESPONDING (a "*" suffix is scontrol's and sinfo's
// short form of it). DRAIN alone is not failed: the node keeps the jobs it
// runs.
func NodeFailed(state string) bool {
	s := strings.ToUpper(state)
	if strings.Contains(s, "*") {
		return true
	}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == '+' }) {
		switch f {
		case "DOWN", "FAIL", "FAILING", "NOT_RESPONDING":
			return true
		}
	}
	return false
}

// BatchScript is the job's batch script (`scontrol write batch_script ID -`).
func (c Client) BatchScript(ctx context.Context, jobID string) ([]byte, error) {
	return c.query(ctx, Scontrol, "write", "batch_script", jobID, "-")
}

// NoKill says whether the job asks Slurm not to kill it when one of its
// nodes fails (sbatch --no-kill, -k): in the batch script's #SBATCH lines
// (read until the first command, as sbatch does) or in SBATCH_NO_KILL.
// `scontrol show job` does not say (Slurm 22.05 prints no such field), and
// a --no-kill on sbatch's command line is not seen: known is false when
// the script gives no answer either way.
func NoKill(script []byte, getenv Getenv) (noKill, known bool) {
	if getenv != nil && getenv("SBATCH_NO_KILL") != "" {
		return true, true
	}
	sc := bufio.NewScanner(bytes.NewReader(script))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#!") {
			continue
		}
		if !strings.HasPrefix(line, "#") {
			break // sbatch stops reading options at the first command
		}
		rest, ok := strings.CutPrefix(line, "#SBATCH")
		if !ok {
			continue
		}
		for _, f := range strings.Fields(rest) {
			if strings.HasPrefix(f, "#") {
				break
			}
			if f == "--no-kill" || strings.HasPrefix(f, "--no-kill=") || f == "-k" {
				return true, true
			}
		}
	}
	return false, false
}
