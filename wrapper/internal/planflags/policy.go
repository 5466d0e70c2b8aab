package planflags

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// The site's trainrun.conf, as every command that takes --policy reads it.

// LoadPolicy opens and parses a trainrun.conf. A file with errors gives
// policy.Errors (every error, each naming file, line and key).
func LoadPolicy(path string) (*policy.Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, withCode(exitcode.Usage, fmt.Errorf("policy file: %w", err))
	}
	defer f.Close()
	p, err := policy.Parse(f, path)
	if err != nil {
		return nil, withCode(exitcode.Usage, err)
	}
	return p, nil
}

// ReportPolicyErrors prints a file's errors one per line and returns the
// exit error; other errors are returned for dispatch to print.
func ReportPolicyErrors(w io.Writer, path string, err error) error {
	var list policy.Errors
	if !errors.As(err, &list) {
		return err
	}
	for _, e := range list {
		fmt.Fprintln(w, e)
	}
	noun := "errors"
	if len(list) == 1 {
		noun = "error"
	}
	fmt.Fprintf(w, "%s: %d %s\n", path, len(list), noun)
	return withCode(exitcode.Usage, exitcode.ErrSilent)
}
