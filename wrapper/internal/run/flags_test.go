package run

import (
	"io"

	"github.com/spf13/pflag"
)

// testFlags is trainrun run's flag set as the command makes it (wrapper's
// newFlags), its usage text to w.
func testFlags(w io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	fs.SetOutput(w)
	fs.SortFlags = false
	return fs
}

// givenFlags are the flags set on fs's command line (wrapper's givenFlags).
func givenFlags(fs *pflag.FlagSet) map[string]bool {
	given := map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { given[f.Name] = true })
	return given
}
