package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/shell"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/run"
)

// The README's tour is tested (issue 30): every trainrun line of its
// blocks runs here, exactly as printed (split as a shell would, comments
// dropped), from a directory laid out like the repository's root, and must
// exit 0 and print what the README says it prints. A flag renamed or
// dropped in a documented command fails this test.

// readmeSection is the README text from the heading ## name to the next ##.
func readmeSection(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n## "+name+"\n")
	if i < 0 {
		t.Fatalf("README has no section %q", name)
	}
	s = s[i+1:]
	if j := strings.Index(s[3:], "\n## "); j >= 0 {
		s = s[:j+3]
	}
	return s
}

// readmeTour is what of the tour section this test runs: the tour itself
// with the batch example (up to the planner's paragraph), and the
// partitions/submit block.
func readmeTour(t *testing.T) string {
	t.Helper()
	s := readmeSection(t, "A tour")
	between := func(from, to string) string {
		i, j := strings.Index(s, from), strings.Index(s, to)
		if i < 0 || j < i {
			t.Fatalf("README's tour lacks %q ... %q", from, to)
		}
		return s[i:j]
	}
	return between("## A tour", "**What the planner assumes") +
		between("**The planner learns from your runs", "A record written by hand") +
		between("**Choosing the partition", "For each partition and a few sizes")
}

var fence = regexp.MustCompile("(?s)```(sh|bash)\n(.*?)```")

// readmeCommands are the trainrun command lines of the text's sh and
// bash blocks, continuation lines joined.
func readmeCommands(t *testing.T, text string) []string {
	t.Helper()
	var out []string
	for _, m := range fence.FindAllStringSubmatch(text, -1) {
		block := strings.ReplaceAll(m[2], "\\\n", " ")
		for _, line := range strings.Split(block, "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "trainrun ") || strings.HasPrefix(line, "exec trainrun ") {
				out = append(out, line)
			}
		}
	}
	return out
}

// readmeWants is what a tour line's output must hold (by the line's start).
var readmeWants = map[string][]string{
	"trainrun topo --machine list":                             {"hgx-h100", "ibmcloud-h100-vsi"},
	"trainrun topo --machine ibmcloud-h100-vsi":                {"<system", "</system>"},
	"trainrun topo --cluster":                                  {"leaf0", "spine"},
	"trainrun plan --list-models":                              {"llama3-70b", "mixtral-8x7b"},
	"trainrun plan --model llama3-8b --gpu h100-sxm:":          {"=== h100-sxm x 64 ===", "=== a100-80gb x 128 ==="},
	"trainrun env --machine hgx-h100":                          {"NCCL_", "RANK=3"},
	"trainrun policy check":                                    {"OK"},
	"trainrun ckpt list":                                       {"step-200"},
	"trainrun ckpt latest":                                     {"step-200"},
	"trainrun sweep":                                           {"4 trials", "--open-mode=append"},
	"trainrun calib import":                                    {"imported 1 observation"},
	"trainrun calib list":                                      {"llama3-8b", "12.910"},
	"trainrun plan --model llama3-8b --gpu h100-sxm --gpus 8 ": {"site calibration: 1 observation"},
}

// readmeWantsFor matches the longest key that starts line.
func readmeWantsFor(line string) []string {
	best := ""
	for k := range readmeWants {
		if strings.HasPrefix(line, k) && len(k) > len(best) {
			best = k
		}
	}
	return readmeWants[best]
}

func TestREADMETour(t *testing.T) {
	lines := readmeCommands(t, readmeTour(t))
	slurmLines := 0
	defer func() {
		if slurmLines != 3 {
			t.Errorf("%d README lines left to the e2e test, want 3 (partitions twice, submit)", slurmLines)
		}
	}()
	if len(lines) < 27 {
		t.Fatalf("the tour has %d trainrun lines; the parser lost some", len(lines))
	}
	// A directory like the repository's root: contrib/ (the tour names
	// its files), and a checkpoint store for the ckpt lines.
	root := t.TempDir()
	abs, err := filepath.Abs("../contrib")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, filepath.Join(root, "contrib")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	store := ckptFixture(t)
	env := cli{vars: map[string]string{"TRAINRUN_CKPT_DIR": store}}
	for _, line := range lines {
		if readmeNeedsSlurm(line) {
			slurmLines++
			continue // test/e2e/readme_test.go runs them, from the same README
		}
		t.Run(line, func(t *testing.T) {
			args, err := shell.Fields(strings.TrimPrefix(line, "exec "), func(string) string { return "" })
			if err != nil || len(args) < 2 || args[0] != "trainrun" {
				t.Fatalf("cannot split %q: %v", line, err)
			}
			if args[1] == "run" {
				// The batch script's line: it needs an allocation; its flags
				// must still be run's (e2e runs the contrib scripts).
				var o run.Options
				fs := newFlags("run", runSynopsis, &strings.Builder{})
				o.AddFlags(fs, func(string) string { return "" })
				if err := parseFlags(fs, args[2:]); err != nil {
					t.Errorf("the README's trainrun run line: %v", err)
				}
				return
			}
			code, out, errOut := env.run(args[1:]...)
			if code != exitcode.OK {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			if strings.TrimSpace(out) == "" {
				t.Errorf("printed nothing; stderr:\n%s", errOut)
			}
			for _, w := range readmeWantsFor(line) {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// readmeNeedsSlurm: the README lines that ask a live Slurm (partitions,
// submit); TestREADMESlurmLines in test/e2e runs them on the harness.
func readmeNeedsSlurm(line string) bool {
	return strings.HasPrefix(line, "trainrun partitions ") || strings.HasPrefix(line, "trainrun submit ")
}

// The README's exit-code table is the one trainrun prints.
func TestREADMEExitCodeTable(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "```text\n"+exitCodeTable()+"```") {
		t.Errorf("README.md lacks the exit-code table as trainrun prints it:\n%s", exitCodeTable())
	}
	for _, args := range [][]string{{"run", "--help"}, {"plan", "--help"}, {"--help"}} {
		if _, out, _ := (cli{}).run(args...); !strings.Contains(out, exitCodeTable()) {
			t.Errorf("trainrun %s lacks the exit-code table", strings.Join(args, " "))
		}
	}
}

// Every batch script the README and contrib/jobs show keeps its log across
// requeues (--open-mode=append), as the sweep's generated script does.
func TestREADMEAndContribJobsAppendTheirLog(t *testing.T) {
	scripts := map[string][]byte{}
	for _, m := range fence.FindAllStringSubmatch(readmeTour(t), -1) {
		if strings.Contains(m[2], "#SBATCH") {
			scripts["README batch example"] = []byte(m[2])
		}
	}
	files, _ := filepath.Glob("../contrib/jobs/*.sbatch")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		scripts[f] = b
	}
	if len(scripts) < 3 {
		t.Fatalf("found %d scripts", len(scripts))
	}
	for name, s := range scripts {
		if appends, _ := slurm.OpenModeAppend(s, nil); !appends {
			t.Errorf("%s: no '#SBATCH --open-mode=append': Slurm truncates its log at every requeue", name)
		}
	}
}
