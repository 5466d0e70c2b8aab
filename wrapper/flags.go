package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// newFlags makes a subcommand's flag set. Its usage text goes to w (the
// command's stdout: help is output a user pages or greps); a parse error
// becomes ExitUsage and -h/--help becomes errHelpShown.
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

// parseFlags parses args and maps pflag's errors onto the exit-code table.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		writeExamples(fs.Output(), fs.Name())
		return errHelpShown
	}
	if err != nil {
		return usageErrorf("%v (run 'trainrun %s --help')", err, fs.Name())
	}
	return nil
}
