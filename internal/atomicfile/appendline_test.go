package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestAppendLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.jsonl")
	for _, l := range []string{`{"a":1}`, `{"b":2}`} {
		if err := AppendLine(p, []byte(l), 0o644, true); err != nil {
			t.Fatal(err)
		}
	}
	// a torn line from a killed writer: the next line starts afresh
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"torn`)
	f.Close()
	if err := AppendLine(p, []byte(`{"c":3}`), 0o644, false); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if want := "{\"a\":1}\n{\"b\":2}\n{\"torn\n{\"c\":3}\n"; string(b) != want {
		t.Errorf("file:\n%q\nwant\n%q", b, want)
	}
	// a link at the path is refused
	l := filepath.Join(filepath.Dir(p), "link.jsonl")
	if err := os.Symlink(p, l); err != nil {
		t.Fatal(err)
	}
	if err := AppendLine(l, []byte(`{}`), 0o644, false); err == nil {
		t.Error("AppendLine followed a link")
	}
}
