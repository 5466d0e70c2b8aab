// Package golden is the module's one golden-file check and its one -update
// flag, for tests: every package that compares output with a file under
// testdata/ imports it, so `go test ./... -update` rewrites them all and a
// second definition of the flag cannot panic a test binary.
//
//	golden.Check(t, filepath.Join("testdata", "plan.txt"), out)
//
// Check compares; under -update it writes got first. Review the rewritten
// files with git diff: a golden file is a statement of what the output must
// be, not a record of what it was.
package golden

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files (under testdata/) with what the tests produce, instead of comparing")

// Update says whether -update was given, for tests that write generated
// files of their own kind (a Go source, a captured command output).
func Update() bool { return *update }

// Check compares got with the file at path (relative to the package's
// directory). Under -update it writes got to path first, creating its
// directory.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run '%s' -update writes it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (if the change is intended, go test -run '%s' -update rewrites it; review the diff)\n%s",
			path, t.Name(), Diff(want, got))
	}
}

// CheckString is Check for a string.
func CheckString(t testing.TB, path, got string) {
	t.Helper()
	Check(t, path, []byte(got))
}

// Diff describes how got differs from want: the first line that differs,
// with its number, and got in full (clipped to 8 KiB).
func Diff(want, got []byte) string {
	wl, gl := bytes.Split(want, []byte("\n")), bytes.Split(got, []byte("\n"))
	i := 0
	for i < len(wl) && i < len(gl) && bytes.Equal(wl[i], gl[i]) {
		i++
	}
	line := func(ls [][]byte) string {
		if i < len(ls) {
			l := ls[i]
			if len(l) > 200 {
				return fmt.Sprintf("%q... (%d bytes)", l[:200], len(l))
			}
			return fmt.Sprintf("%q", l)
		}
		return "(end of file)"
	}
	g := got
	if len(g) > 8<<10 {
		g = append(g[:8<<10:8<<10], []byte("\n[... clipped]")...)
	}
	return fmt.Sprintf("first difference at line %d:\n  want %s\n  got  %s\n--- got:\n%s", i+1, line(wl), line(gl), g)
}
