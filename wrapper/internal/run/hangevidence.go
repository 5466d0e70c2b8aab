package run

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/trainrun/trainrun/wrapper/internal/collrec"
	"github.com/trainrun/trainrun/wrapper/internal/jobdir"
)

// A hang's evidence, kept (issue 31, part B). onHang numbers the hang (the
// next free hangs/<n>/ of the run's directory, so a requeued job keeps the
// earlier ones) and asks every stalled rank's shim for its evidence
// (wrapper/internal/shim/evidence.go: stacks, last collectives, process
// state, py-spy, nvidia-smi); killHung, stackWait later, sums the ranks'
// collective records up into hangs/<n>/summary.txt and the log before the
// step is killed. PyTorch's own flight recorder (NCCL only) is switched on
// through the environment (flightRecorderEnv) and dumps into hangs/ on its
// watchdog's timeout.

// maxEvidence bounds the ranks asked for evidence (the suspects first):
// each writes a few files into the shared job directory.
const maxEvidence = 64

// newHangDir makes the run's next hangs/<n>/ and returns n; 0 when it
// cannot (the shims then dump stacks into the log only, as before).
func (r *runner) newHangDir() int {
	if r.dirs.jobDir == "" {
		return 0
	}
	root := r.dirs.in(jobdir.Hangs)
	n := 0
	if ents, err := os.ReadDir(root); err == nil {
		for _, e := range ents {
			if v, err := strconv.Atoi(e.Name()); err == nil && v > n {
				n = v
			}
		}
	}
	for range 100 { // another controller of the same run directory cannot exist, but be safe
		n++
		if err := os.MkdirAll(root, 0o755); err != nil {
			r.logf("warning: hang evidence: %v", err)
			return 0
		}
		if err := os.Mkdir(jobdir.Hang(r.dirs.jobDir, n), 0o755); err == nil {
			return n
		} else if !os.IsExist(err) {
			r.logf("warning: hang evidence: %v", err)
			return 0
		}
	}
	return 0
}

// summariseHang reads the asked ranks' collective records of hang n,
// logs what they show (which rank did not enter the collective the others
// wait in) and writes hangs/<n>/summary.txt.
func (r *runner) summariseHang(n int, asked []int, what string) {
	if n <= 0 {
		return
	}
	dir := jobdir.Hang(r.dirs.jobDir, n)
	ranks := make([]collrec.Rank, 0, len(asked))
	for _, rank := range asked {
		cr := collrec.Rank{Rank: rank}
		es, err := collrec.ReadFile(filepath.Join(dir, fmt.Sprintf("rank-%d.collectives.txt", rank)))
		switch {
		case err != nil:
			cr.Missing = fmt.Sprintf("its shim wrote nothing within %s: the node or the shim does not answer", stackWait)
		case len(es) == 0:
			cr.Missing = "the trainer does not call trainrun_client's record_collectives, or made no collective yet"
		}
		cr.Entries = es
		cr.State = procStateOf(filepath.Join(dir, fmt.Sprintf("rank-%d.proc.txt", rank)))
		ranks = append(ranks, cr)
	}
	findings := collrec.Summarise(ranks)
	var b bytes.Buffer
	fmt.Fprintf(&b, "hang %d: %s\n", n, what)
	for _, f := range findings {
		r.logf("hang: collectives: %s", f.Text)
		fmt.Fprintf(&b, "%s\n", f.Text)
	}
	fmt.Fprintf(&b, "\nper rank: rank-R.stack.txt (Python stacks), rank-R.collectives.txt (last collectives), rank-R.proc.txt (state, wchan, kernel stack), rank-R.py-spy.txt and node-NODE.nvidia-smi.txt where installed\n")
	if err := os.WriteFile(filepath.Join(dir, "summary.txt"), b.Bytes(), 0o644); err != nil {
		r.logf("warning: hang evidence: %v", err)
	}
	r.logf("hang: evidence of %d rank(s) in %s", len(asked), dir)
}

// procStateOf is the "state X" line of a shim's rank-R.proc.txt ("" when
// there is none).
func procStateOf(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "state "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// flightRecorderKeys are PyTorch's flight-recorder variables
// (https://pytorch.org/docs/2.4/torch_nccl_environment_variables.html; the
// TORCH_FR_* names replace the TORCH_NCCL_* ones in newer releases,
// pytorch/torchtitan#1748): a trace buffer, a dump on the watchdog's
// timeout, and where the dump goes (the rank is appended to the prefix).
func flightRecorderEnv(hangsDir string) [][2]string {
	prefix := filepath.Join(hangsDir, "nccl_trace_rank_")
	return [][2]string{
		{"TORCH_NCCL_TRACE_BUFFER_SIZE", "2000"}, {"TORCH_FR_BUFFER_SIZE", "2000"},
		{"TORCH_NCCL_DUMP_ON_TIMEOUT", "1"},
		{"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", prefix}, {"TORCH_FR_DUMP_TEMP_FILE", prefix},
	}
}

// addFlightRecorderEnv sets the flight recorder's variables for every rank
// unless the user's environment sets them (theirs win).
func (r *runner) addFlightRecorderEnv(renv *rankEnv) {
	if r.dirs.jobDir == "" || renv.Common == nil {
		return
	}
	if !r.cfg.dryRun { // the recorder writes into it on its own watchdog's timeout, before any hang of ours
		if err := os.MkdirAll(r.dirs.in(jobdir.Hangs), 0o755); err != nil {
			r.logf("warning: hang evidence: %v", err)
		}
	}
	for _, kv := range flightRecorderEnv(r.dirs.in(jobdir.Hangs)) {
		if _, set := os.LookupEnv(kv[0]); set {
			continue // the task inherits the user's value
		}
		if _, set := renv.Common[kv[0]]; !set {
			renv.Common[kv[0]] = kv[1]
		}
	}
}
