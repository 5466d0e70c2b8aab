package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// newFlags makes a subcommand's flag set. Its usage text goes to w; a parse
// error becomes exitcode.Usage and -h/--help becomes exitcode.ErrHelpShown.
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

// parseFlags parses args and maps pflag's errors onto the exit-code table.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		return exitcode.ErrHelpShown
	}
	if err != nil {
		return usageErrorf("%v (run 'trainrun %s --help')", err, fs.Name())
	}
	return nil
}
