package main

import (
	"strings"
	"testing"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"mvdan.cc/sh/v3/shell"
)

// Every subcommand's --help is on stdout (so `| less` and `| grep` see it),
// exits 0, writes nothing to stderr and has an Examples section.
func TestHelpOnStdoutWithExamples(t *testing.T) {
	names := commandNames()
	for n := range examples {
		if strings.Contains(n, " ") { // subcommands: "ckpt list", "sweep status"
			names = append(names, n)
		}
	}
	if len(names) < 20 {
		t.Fatalf("only %d commands and subcommands: %v", len(names), names)
	}
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			args := append(strings.Fields(n), "--help")
			code, out, errOut := cli{}.run(args...)
			if code != exitcode.OK || errOut != "" || !strings.Contains(out, "Examples:") || !strings.Contains(out, "Usage: trainrun") {
				t.Errorf("trainrun %s: exit %d, stderr %q, stdout:\n%s", strings.Join(args, " "), code, errOut, out)
			}
		})
	}
}

// `trainrun help TOPIC` and `trainrun help COMMAND`; internal commands are
// not listed; a typo gets "did you mean".
func TestHelpTopics(t *testing.T) {
	topics := map[string]string{
		"exit-codes": "what to do: change --fix, --global-batch or the GPU count",
		"fix":        "grad_accum",
		"trainer":    "done.<RANK>",
	}
	for topic, want := range topics {
		code, out, _ := cli{}.run("help", topic)
		if code != exitcode.OK || !strings.Contains(out, want) {
			t.Errorf("help %s: exit %d, lacks %q:\n%s", topic, code, want, out)
		}
	}
	if code, out, _ := (cli{}).run("help", "plan"); code != exitcode.OK || !strings.Contains(out, "--list-models") {
		t.Errorf("help plan: exit %d:\n%s", code, out)
	}
	if code, _, errOut := (cli{}).run("help", "nonsense"); code != exitcode.Usage || !strings.Contains(errOut, "exit-codes") {
		t.Errorf("help nonsense: exit %d, %q", code, errOut)
	}
	_, top, _ := cli{}.run("--help")
	if strings.Contains(top, "exec-task") || !strings.Contains(top, "help TOPIC") {
		t.Errorf("top-level help lists an internal command or no topics:\n%s", top)
	}
	if code, _, errOut := (cli{}).run("pln"); code != exitcode.Usage || !strings.Contains(errOut, `did you mean "plan"`) {
		t.Errorf("pln: exit %d, %q", code, errOut)
	}
}

// Help names no file the repository lacks and no flag that does not exist.
func TestHelpPointsAtNothingMissing(t *testing.T) {
	for _, n := range commandNames() {
		_, out, _ := cli{}.run(n, "--help")
		if strings.Contains(out, "PRODUCT.md") {
			t.Errorf("%s --help points at PRODUCT.md, which is not in the repository", n)
		}
	}
	code, out, _ := cli{}.run("plan", "--list-models")
	// The config.json model types too (issue 30: qwen3, gemma, phi3 were refused, and nothing said which are read).
	if code != exitcode.OK || !strings.Contains(out, "llama3-70b") || !strings.Contains(out, "mixtral-8x7b") || !strings.Contains(out, "gemma3, gemma3_text") || !strings.Contains(out, "qwen3") {
		t.Errorf("plan --list-models: exit %d:\n%s", code, out)
	}
	if _, out2, _ := (cli{}).run("plan", "--model", "list"); out2 != out {
		t.Errorf("plan --model list differs from --list-models:\n%s", out2)
	}
}

// The examples that need neither Slurm nor a file run as printed.
func TestHelpExamplesRun(t *testing.T) {
	ran := 0
	for name, exs := range examples {
		for _, e := range exs {
			if !offlineExample(e.cmd) {
				continue
			}
			ran++
			t.Run(name+"/"+e.cmd, func(t *testing.T) {
				args, err := shell.Fields(e.cmd, func(string) string { return "" })
				if err != nil {
					t.Fatal(err)
				}
				code, out, errOut := cli{}.run(args[1:]...)
				if code != exitcode.OK || out == "" {
					t.Errorf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", e.cmd, code, out, errOut)
				}
			})
		}
	}
	if ran < 8 {
		t.Errorf("only %d examples ran", ran)
	}
}

func offlineExample(cmd string) bool {
	for _, p := range []string{"trainrun plan ", "trainrun topo --machine ", "trainrun env --machine "} {
		if strings.HasPrefix(cmd, p) {
			return true
		}
	}
	return false
}

// A flag whose usage states its default says it once (pflag added a
// second "(default -1)").
func TestHelpStatesEachDefaultOnce(t *testing.T) {
	for _, n := range commandNames() {
		_, out, _ := cli{}.run(n, "--help")
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "(default: ") && strings.Contains(l[strings.Index(l, "(default: ")+1:], "(default ") {
				t.Errorf("%s --help: %s", n, strings.TrimSpace(l))
			}
		}
	}
}
