package obs

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadHangsAndText(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"10", "2", "notes"} {
		os.MkdirAll(filepath.Join(dir, "hangs", n), 0o755)
	}
	os.WriteFile(filepath.Join(dir, "hangs", "2", "summary.txt"), []byte("hang 2: rank 1 stopped\n\nrank 1 did not enter collective #9\n"), 0o644)
	hs := ReadHangs(dir)
	if len(hs) != 2 || hs[0].N != 2 || hs[1].N != 10 || len(hs[0].Summary) != 2 || hs[0].Files != 1 {
		t.Fatalf("ReadHangs = %+v", hs)
	}
	var w bytes.Buffer
	(&Report{Hangs: hs}).writeHangs(&w)
	for _, s := range []string{"hangs: 2, evidence kept", filepath.Join(dir, "hangs", "2"), "rank 1 did not enter collective #9", "no summary.txt"} {
		if !strings.Contains(w.String(), s) {
			t.Errorf("text lacks %q:\n%s", s, w.String())
		}
	}
	if ReadHangs(t.TempDir()) != nil {
		t.Error("a run without hangs/ lists hangs")
	}
}
