package golden

import (
	"path/filepath"
	"strings"
	"testing"
)

// fakeT records what Check reports.
type fakeT struct {
	testing.TB
	errs, fatals []string
}

func (f *fakeT) Helper()                        {}
func (f *fakeT) Name() string                   { return "TestX" }
func (f *fakeT) Errorf(format string, a ...any) { f.errs = append(f.errs, format) }
func (f *fakeT) Fatalf(format string, a ...any) { f.fatals = append(f.fatals, format) }
func (f *fakeT) Fatal(a ...any)                 { f.fatals = append(f.fatals, "fatal") }

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "out.txt")

	ft := &fakeT{}
	Check(ft, path, []byte("a\n"))
	if len(ft.fatals) != 1 {
		t.Errorf("a missing golden file: fatals %q, want one", ft.fatals)
	}

	*update = true
	ft = &fakeT{}
	Check(ft, path, []byte("a\nb\n"))
	*update = false
	if len(ft.errs)+len(ft.fatals) != 0 {
		t.Errorf("-update: %q %q", ft.errs, ft.fatals)
	}

	ft = &fakeT{}
	Check(ft, path, []byte("a\nb\n"))
	if len(ft.errs)+len(ft.fatals) != 0 {
		t.Errorf("same output: %q %q", ft.errs, ft.fatals)
	}
	ft = &fakeT{}
	Check(ft, path, []byte("a\nc\n"))
	if len(ft.errs) != 1 {
		t.Errorf("different output: errors %q, want one", ft.errs)
	}
}

func TestDiff(t *testing.T) {
	d := Diff([]byte("x\ny\nz\n"), []byte("x\nY\nz\n"))
	if !strings.Contains(d, "line 2") || !strings.Contains(d, `want "y"`) || !strings.Contains(d, `got  "Y"`) {
		t.Errorf("Diff:\n%s", d)
	}
	d = Diff([]byte("x\n"), []byte("x\ny\n"))
	if !strings.Contains(d, "line 2") || !strings.Contains(d, `want ""`) {
		t.Errorf("Diff, longer got:\n%s", d)
	}
	big := []byte(strings.Repeat("a", 20<<10))
	if d := Diff(nil, big); len(d) > 9<<10 || !strings.Contains(d, "clipped") {
		t.Errorf("Diff of a 20 KiB output: %d bytes", len(d))
	}
}
