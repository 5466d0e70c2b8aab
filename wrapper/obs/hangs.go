package obs

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Hang is one hang's evidence directory of a run (issue 31; N 0: the
// flight recorder's dumps in hangs/ itself, listed in Summary): the
// controller wrote hangs/<N>/summary.txt (which ranks stopped, which rank
// did not enter the collective the others wait in) beside every asked
// rank's stacks and records.
type Hang struct {
	N       int
	Dir     string
	Summary []string // summary.txt's findings (its first lines, at most maxHangLines)
	Files   int      // evidence files in Dir
}

const maxHangLines = 8

// ReadHangs lists the run directory dir's hangs, oldest first; none when
// there is no hangs/ (a run without hangs, or older than issue 31).
func ReadHangs(dir string) []Hang {
	root := filepath.Join(dir, "hangs")
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var out []Hang
	var traces []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "nccl_trace_rank_") {
			traces = append(traces, filepath.Join(root, e.Name()))
		}
		n, err := strconv.Atoi(e.Name())
		if err != nil || !e.IsDir() {
			continue
		}
		h := Hang{N: n, Dir: filepath.Join(root, e.Name())}
		if fs, err := os.ReadDir(h.Dir); err == nil {
			h.Files = len(fs)
		}
		if f, err := os.Open(filepath.Join(h.Dir, "summary.txt")); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() && len(h.Summary) < maxHangLines {
				if l := strings.TrimSpace(sc.Text()); l != "" {
					h.Summary = append(h.Summary, l)
				}
			}
			f.Close()
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].N < out[j].N })
	if len(traces) > 0 { // PyTorch's NCCL flight recorder dumped on its watchdog's timeout
		out = append(out, Hang{N: 0, Dir: root, Files: len(traces), Summary: []string{fmt.Sprintf("PyTorch NCCL flight recorder dumps (on its watchdog's timeout): %s", strings.Join(traces[:min(len(traces), 4)], ", "))}})
	}
	return out
}

// writeHangs prints the hangs section of the text report.
func (r *Report) writeHangs(w io.Writer) {
	if len(r.Hangs) == 0 {
		return
	}
	n := 0
	for _, h := range r.Hangs {
		if h.N > 0 {
			n++
		}
	}
	fmt.Fprintf(w, "\nhangs: %d, evidence kept (stacks, last collectives, process state per rank)\n", n)
	for _, h := range r.Hangs {
		if h.N == 0 {
			fmt.Fprintf(w, "  -  %s\n", h.Summary[0])
			continue
		}
		fmt.Fprintf(w, "  %d  %s (%d files)\n", h.N, h.Dir, h.Files)
		if len(h.Summary) == 0 {
			fmt.Fprintf(w, "       no summary.txt (the step was killed before the controller summed the evidence up)\n")
		}
		for _, l := range h.Summary {
			fmt.Fprintf(w, "       %s\n", l)
		}
	}
}
