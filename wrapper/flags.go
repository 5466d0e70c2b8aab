package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// newFlags makes a subcommand's flag set. Its usage text goes to w (the
// command's stdout: help is output a user pages or greps); a parse error
// becomes exitcode.Usage and -h/--help becomes exitcode.ErrHelpShown.
func newFlags(name, synopsis string, w io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(w)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(w, "Usage: trainrun %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// tableFormat is the one output convention (issue 30): --format table|json
// on every command that prints data. A command whose table had another
// name (text, matrix, shell) keeps it as an alias for one release: this maps
// "table" onto it, so the command's code reads one value.
func tableFormat(v, old string) string {
	if v == "table" {
		return old
	}
	return v
}

// oneDefault keeps --help from stating a default twice: a flag whose usage
// says "(default: ...)" itself (an environment twin, the policy) gets no
// second "(default -1)" from pflag, which prints DefValue unless it is the
// type's zero.
func oneDefault(f *pflag.Flag) {
	if !strings.Contains(f.Usage, "(default: ") {
		return
	}
	switch f.Value.Type() {
	case "string":
		f.DefValue = ""
	case "bool":
		f.DefValue = "false"
	case "duration":
		f.DefValue = "0s"
	case "int", "int64", "uint64", "float64":
		f.DefValue = "0"
	}
}

// parseFlags parses args and maps pflag's errors onto the exit-code table.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	fs.VisitAll(oneDefault)
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		writeExamples(fs.Output(), fs.Name())
		return exitcode.ErrHelpShown
	}
	if err != nil {
		return usageErrorf("%v (run 'trainrun %s --help')", err, fs.Name())
	}
	return nil
}
