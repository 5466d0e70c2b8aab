package run

import (
	"fmt"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// withCode gives err the exit code code (exitcode.With).
func withCode(code int, err error) error { return exitcode.With(code, err) }

// usageErrorf is an error with the usage exit code: the user's input is wrong.
func usageErrorf(format string, a ...any) error {
	return exitcode.With(exitcode.Usage, fmt.Errorf(format, a...))
}
