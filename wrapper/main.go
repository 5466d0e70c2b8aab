package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/spank"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// command is one subcommand. Each lives in its own cmd_*.go file and registers
// itself from init, so subcommands can be added without touching this file.
type command struct {
	name  string
	short string // one line for the command list
	// hidden commands are internal (started by trainrun itself): not listed.
	hidden bool
	// run parses its own flags from args. Nothing below main calls os.Exit.
	run func(ctx context.Context, env *runEnv, args []string) error
}

// runEnv is what a subcommand may touch of the outside world; tests build one
// with buffers and call the command in-process.
type runEnv struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	getenv         func(string) string
	// slurm asks Slurm. The zero value (what tests get unless they set
	// it) runs nothing: every query fails, as on a machine without Slurm.
	slurm slurm.Client
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("trainrun: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

func main() {
	if code, ok := resumeHelper(os.Args[1:]); ok { // run by the SPANK plugin as the job's user
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := &runEnv{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin, getenv: os.Getenv, slurm: slurm.New()}
	os.Exit(dispatch(ctx, env, os.Args[1:]))
}

// dispatch runs the subcommand named by args[0] and maps its error to an exit code.
func dispatch(ctx context.Context, env *runEnv, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		usage(env.stdout)
		if len(args) == 0 {
			return exitcode.Usage
		}
		return exitcode.OK
	}
	if args[0] == "help" {
		return runHelp(ctx, env, args[1:])
	}
	if args[0] == "--version" || args[0] == "version" {
		fmt.Fprintln(env.stdout, "trainrun", version)
		return exitcode.OK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.stderr, "trainrun: unknown command %q%s; run 'trainrun --help' for the list\n", args[0], didYouMean(args[0], commandNames()))
		return exitcode.Usage
	}
	err := c.run(ctx, env, args[1:])
	if err == nil {
		return exitcode.OK
	}
	code := exitCodeOf(err)
	if !errors.Is(err, exitcode.ErrHelpShown) && !errors.Is(err, exitcode.ErrSilent) {
		fmt.Fprintf(env.stderr, "trainrun: %s: %v\n", c.name, err)
	}
	return code
}

var version = "0.1.0-dev"

func usage(w io.Writer) {
	fmt.Fprintln(w, "trainrun: a Slurm-native launcher for large-model training")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: trainrun COMMAND [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, n := range commandNames() {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].short)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Help topics ('trainrun help TOPIC'):")
	for _, n := range topicNames() {
		fmt.Fprintf(w, "  %-10s %s\n", n, helpTopics[n].short)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'trainrun COMMAND --help' (or 'trainrun help COMMAND') for a command's flags and examples.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Examples:")
	fmt.Fprintln(w, "  trainrun topo --machine list")
	fmt.Fprintln(w, "  trainrun plan --model llama3-70b --gpu h100-sxm --gpus 64 --seq-len 8192 --global-batch 512")
	fmt.Fprintln(w, "  trainrun help exit-codes")
	fmt.Fprintln(w)
	fmt.Fprint(w, exitCodeTable())
}

// joinLines is a small helper for multi-line help texts.
func joinLines(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

// resumeHelper runs `trainrun __resume-dir DIR`, the hidden helper the SPANK
// plugin starts as the job's user to read the checkpoint store for
// TRAINRUN_RESUME_DIR (spank.ResumeDirAs), so root slurmstepd never opens
// the store itself. ok is false for every other command line.
func resumeHelper(args []string) (code int, ok bool) {
	if len(args) == 0 || args[0] != spank.ResumeHelperArg {
		return 0, false
	}
	return spank.ResumeHelperMain(args[1:], os.Stdout), true
}
