package planjson

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/trainrun/trainrun/internal/safefs"
	"github.com/trainrun/trainrun/internal/safefs/safefstest"
	"github.com/trainrun/trainrun/plan"
)

func goodPlan() []byte {
	b, _ := json.Marshal(File{Plan: &plan.Evaluation{Layout: plan.Layout{TP: 1, PP: 1, CP: 1, DP: 16, MicroBatch: 1, GradAccum: 1, Recompute: "none", Offload: "none"}}})
	return b
}

func TestDecodeRefusesOutOfRangeFields(t *testing.T) {
	if _, err := Decode(goodPlan()); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*plan.Layout){
		"recompute with a newline": func(l *plan.Layout) { l.Recompute = "none\nEVIL=1" },
		"unknown recompute":        func(l *plan.Layout) { l.Recompute = "some" },
		"offload":                  func(l *plan.Layout) { l.Offload = "disk" },
		"zero":                     func(l *plan.Layout) { l.Zero = 4 },
		"negative tp":              func(l *plan.Layout) { l.TP = -1 },
		"huge dp":                  func(l *plan.Layout) { l.DP = 1 << 40 },
	} {
		pf, _ := Decode(goodPlan())
		edit(&pf.Plan.Layout)
		b, _ := json.Marshal(pf)
		if _, err := Decode(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A plan directory another user created, or a plan file that is not the
// user's own, is refused; so are a FIFO (it would block) and a file larger
// than the cap (it would be read whole).
func TestReadSubmittedRefusesWhatOthersPlanted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "trainrun-submit")
	if err := safefs.MkdirOwn(dir, "--plan-dir"); err != nil {
		t.Fatal(err)
	}
	p := writePlan(t, dir)
	if _, err := ReadSubmitted(p); err != nil {
		t.Fatalf("the user's own plan: %v", err)
	}
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, MaxBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]string{"fifo": fifo, "too large": big, "symbolic link": link} {
		if _, err := ReadSubmitted(q); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Another user's file in the user's directory.
	safefstest.AsNobody(t, p)
	if _, err := ReadSubmitted(p); err == nil || !strings.Contains(err.Error(), "uid 65534") {
		t.Errorf("nobody's plan file: %v", err)
	}
	// The user's file in a directory another user created, mode 0777.
	foreign := filepath.Join(t.TempDir(), "trainrun-submit")
	if err := os.Mkdir(foreign, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(foreign, 0o777)
	safefstest.AsNobody(t, foreign)
	q := writePlan(t, foreign)
	if _, err := ReadSubmitted(q); err == nil || !strings.Contains(err.Error(), "TRAINRUN_PLAN's directory") {
		t.Errorf("a plan in nobody's 0777 directory: %v", err)
	}
}

func writePlan(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(p, goodPlan(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// FuzzDecode: any bytes are refused or decode to a plan whose layout keeps
// its ranges; no panic.
func FuzzDecode(f *testing.F) {
	f.Add(goodPlan())
	f.Add([]byte(`{"plan":null}`))
	f.Add([]byte(`{"plan":{"tp":1,"recompute":"none\nEVIL=1"}}`))
	f.Add([]byte(`{"plan":{"dp":-1}}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		pf, err := Decode(b)
		if err != nil || pf.Plan == nil {
			return
		}
		if err := Check(pf.Plan.Layout); err != nil {
			t.Fatalf("Decode accepted a layout Check refuses: %v", err)
		}
		for _, s := range []string{pf.Plan.Layout.Recompute, pf.Plan.Layout.Offload} {
			if strings.ContainsAny(s, "\n\x00=") {
				t.Fatalf("accepted %q", s)
			}
		}
	})
}
