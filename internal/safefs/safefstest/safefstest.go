// Package safefstest helps tests of code that must refuse what another
// local user planted (internal/safefs's callers).
package safefstest

import (
	"os"
	"testing"
)

// Nobody is the uid and gid AsNobody gives files (Debian's nobody/nogroup).
const Nobody = 65534

// AsNobody makes p another uid's (nobody's), as another local user who
// created it first would have it; without root the test is skipped.
func AsNobody(t testing.TB, p string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to another uid")
	}
	if err := os.Lchown(p, Nobody, Nobody); err != nil {
		t.Fatal(err)
	}
}
