package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/internal/golden"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

const examplePolicy = "../contrib/trainrun.conf.example"

func runPolicyCLI(args ...string) (code int, stdout, stderr string) {
	return cli{}.run(args...)
}

func TestPolicyCheckExample(t *testing.T) {
	code, out, errOut := runPolicyCLI("policy", "check", examplePolicy)
	want := examplePolicy + ": OK: 29 site-wide settings, 3 partitions (preempt, roce, debug)\n"
	if code != exitcode.OK || out != want || errOut != "" {
		t.Errorf("exit %d\nstdout %q\nwant   %q\nstderr %q", code, out, want, errOut)
	}
}

// Each kind of bad file exits 2 and names the line and key.
func TestPolicyCheckRejects(t *testing.T) {
	tests := []struct {
		name, conf string
		want       []string // stderr lines, the file name written as FILE
	}{
		{"unknown key", "CkptLead=5m\nCkptSignl=USR2\n", []string{`FILE:2: CkptSignl: unknown key "CkptSignl"; accepted: PartitionName, CkptSignal,`, "FILE: 1 error"}},
		{"bad value", "MaxRequeue=lots\n", []string{`FILE:1: MaxRequeue: bad value "lots": not a whole number; accepted: a whole number; 0 = never requeue`, "FILE: 1 error"}},
		{"duplicate partition", "PartitionName=gpu CkptKeep=2\nPartitionName=gpu CkptKeep=3\n", []string{`FILE:2: PartitionName: partition "gpu" is defined again (first on line 1)`, "FILE: 1 error"}},
		{"duplicate key on a line", "PartitionName=gpu CkptKeep=2 CkptKeep=3\n", []string{"FILE:1: CkptKeep: given twice on one line (first on line 1)", "FILE: 1 error"}},
		{"site-only key on a partition", "PartitionName=gpu Pushgateway=http://pg:9091\n", []string{"FILE:1: Pushgateway: only valid site-wide (on a line without PartitionName=), not for partition gpu", "FILE: 1 error"}},
		{"GPU type not in the catalog", "Fabric=ib\nPartitionName=vm GPUType=t4\n", []string{`FILE:2: GPUType: bad value "t4": unknown GPU type "t4"`, "FILE: 1 error"}},
		{"several errors, all listed", "Bogus=1\nPartitionName=gpu Fabric=fast\n", []string{`FILE:1: Bogus: unknown key "Bogus"`, `FILE:2: Fabric: bad value "fast"`, "FILE: 2 errors"}},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".conf")
			if err := os.WriteFile(path, []byte(tc.conf), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, sub := range []string{"check", "show"} {
				code, out, errOut := runPolicyCLI("policy", sub, path)
				if code != exitcode.Usage || out != "" {
					t.Errorf("%s: exit %d (want %d), stdout %q", sub, code, exitcode.Usage, out)
				}
				lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
				if len(lines) != len(tc.want) {
					t.Fatalf("%s: stderr\n%s\nwant %d lines", sub, errOut, len(tc.want))
				}
				for i, w := range tc.want {
					if w = strings.ReplaceAll(w, "FILE", path); !strings.HasPrefix(lines[i], w) {
						t.Errorf("%s: line %d\n got %s\nwant %s", sub, i+1, lines[i], w)
					}
				}
			}
		})
	}
}

func TestPolicyUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"no subcommand", []string{"policy"}, exitcode.Usage, "policy needs a subcommand: check or show"},
		{"unknown subcommand", []string{"policy", "lint", "x"}, exitcode.Usage, `unknown policy subcommand "lint"`},
		{"no file", []string{"policy", "check"}, exitcode.Usage, "policy check takes one FILE, got 0 arguments"},
		{"missing file", []string{"policy", "check", "no/such/trainrun.conf"}, exitcode.Usage, "policy file: open no/such/trainrun.conf: no such file or directory"},
		{"bad flag", []string{"policy", "show", "--partion", "gpu", examplePolicy}, exitcode.Usage, "unknown flag: --partion"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runPolicyCLI(tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d (want %d), stderr %q, want it to contain %q", code, tc.code, errOut, tc.want)
			}
		})
	}
}

// policy show output, as a user reads it, for the example file.
func TestPolicyShowGolden(t *testing.T) {
	for _, part := range []string{"", "preempt", "roce", "debug", "nosuch"} {
		name := part
		if name == "" {
			name = "site"
		}
		t.Run(name, func(t *testing.T) {
			args := []string{"policy", "show", examplePolicy}
			if part != "" {
				args = []string{"policy", "show", "--partition", part, examplePolicy}
			}
			code, out, errOut := runPolicyCLI(args...)
			if code != exitcode.OK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			golden.CheckString(t, filepath.Join("testdata", "policy", "show-"+name+".golden"), out)
		})
	}
}

// Issue 30: CkptSignal=USR1 is valid but noted (NCCL 2.12 catches it), once
// per line that sets it; the default and USR2 are not.
func TestPolicyCheckNotesUSR1(t *testing.T) {
	dir := t.TempDir()
	for conf, notes := range map[string]int{
		"CkptSignal=USR1\nPartitionName=gpu CkptKeep=2\n":                     1,
		"CkptLead=5m\nPartitionName=gpu CkptSignal=USR1\nPartitionName=cpu\n": 1,
		"CkptSignal=USR2\nPartitionName=gpu\n":                                0,
	} {
		path := filepath.Join(dir, "p.conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, _ := runPolicyCLI("policy", "check", path)
		if n := strings.Count(out, "note: CkptSignal=USR1"); code != exitcode.OK || n != notes || notes > 0 && !strings.Contains(out, "NVIDIA/nccl#704") {
			t.Errorf("%q: exit %d, %d notes (want %d):\n%s", conf, code, n, notes, out)
		}
	}
}
