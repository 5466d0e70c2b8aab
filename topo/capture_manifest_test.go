package topo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The capture lists exactly what it copied: every listed path exists in the
// copy, and every file of the copy is listed (an admin reviews this list
// before sending a capture of a node that fails).
func TestCaptureManifestListsEverything(t *testing.T) {
	src := machineTree(t, "azure-ndv5")
	dst := filepath.Join(t.TempDir(), "capture")
	rec, _ := LoadRecordedNVML(src)
	if err := Capture(src, dst, rec); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dst, CaptureManifest))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		p, _, _ := strings.Cut(l, " ")
		if _, err := os.Lstat(filepath.Join(dst, p)); err != nil {
			t.Errorf("listed but not in the capture: %s", l)
		}
		listed[p] = true
	}
	for _, want := range []string{"etc/nccl.conf", "opt/microsoft/ndv5/topo.xml", "proc/net/route", "nvml.json"} {
		if !listed[want] {
			t.Errorf("%s not listed", want)
		}
	}
	filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dst, p)
		if rel != CaptureManifest && !listed[rel] {
			t.Errorf("in the capture but not listed: %s", rel)
		}
		return nil
	})
	if !strings.Contains(string(b), "review or redact before sending") {
		t.Errorf("manifest header lacks the privacy line")
	}
}
