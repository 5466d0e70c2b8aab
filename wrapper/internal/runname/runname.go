// Package runname is a run's identity inside its job: `trainrun run --name
// NAME`, or a name derived from the command line, which names the run's own
// directory (JOBDIR/runs/NAME) and its "already finished" rule. sweep and
// branches name their trials with it.
package runname

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// RE is what a run name may be: one path element (JOBDIR/runs/NAME).
var RE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Check accepts a --name that is safe as one path element.
func Check(name string) error {
	if !RE.MatchString(name) {
		return exitcode.With(exitcode.Usage, fmt.Errorf("--name %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit (it names a directory, JOBDIR/runs/NAME)", name))
	}
	return nil
}

// Derive is the default run name: the program (or, for an
// interpreter, the script) and a short hash of the whole command line, so
// the same command gets the same name after a requeue and a different
// command a different one.
func Derive(argv []string) string {
	stem := ""
	for i, a := range argv {
		if i > 0 && strings.HasPrefix(a, "-") {
			if a == "-m" && i+1 < len(argv) { // python -m module
				stem = argv[i+1]
				break
			}
			continue
		}
		b := filepath.Base(a)
		stem = strings.TrimSuffix(b, filepath.Ext(b))
		if i > 0 || !isInterpreter(b) {
			break
		}
	}
	stem = strings.Trim(unsafeNameRE.ReplaceAllString(stem, "_"), "._-")
	if len(stem) > 32 {
		stem = stem[:32]
	}
	if stem == "" {
		stem = "run"
	}
	sum := sha256.Sum256([]byte(strings.Join(argv, "\x00")))
	return stem + "-" + hex.EncodeToString(sum[:4])
}

var unsafeNameRE = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func isInterpreter(base string) bool {
	for _, p := range []string{"python", "bash", "sh", "torchrun", "env", "uv", "deepspeed", "accelerate"} {
		if base == p || strings.HasPrefix(base, p+"3") || strings.HasPrefix(base, p+"2") {
			return true
		}
	}
	return false
}
