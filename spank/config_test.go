package spank

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    Config
		wantErr string
	}{
		{name: "none", args: nil, want: Config{CacheDir: DefaultCacheDir, Trainrun: DefaultTrainrun, DrainTimeout: DefaultDrainTimeout, ResumeTimeout: DefaultResumeTimeout}},
		{name: "all keys", args: []string{"policy=/etc/slurm/trainrun.conf", "cache=/var/lib/trainrun/", "topology=/etc/slurm/topology.conf", "trainrun=/opt/trainrun/bin/trainrun"},
			want: Config{PolicyPath: "/etc/slurm/trainrun.conf", CacheDir: "/var/lib/trainrun", TopologyConf: "/etc/slurm/topology.conf", Trainrun: "/opt/trainrun/bin/trainrun", DrainTimeout: DefaultDrainTimeout, ResumeTimeout: DefaultResumeTimeout}},
		{name: "unknown key", args: []string{"polcy=/x"}, wantErr: `unknown key "polcy" in "polcy=/x"; accepted keys: cache, drain_timeout, policy, resume_timeout, topology, trainrun`},
		{name: "timeouts", args: []string{"drain_timeout=90s", "resume_timeout=3s"}, want: Config{CacheDir: DefaultCacheDir, Trainrun: DefaultTrainrun, DrainTimeout: 90 * time.Second, ResumeTimeout: 3 * time.Second}},
		{name: "timeout out of range", args: []string{"drain_timeout=2h"}, wantErr: `drain_timeout="2h": want a duration from 1s to 1h`},
		{name: "timeout not a duration", args: []string{"resume_timeout=/x"}, wantErr: `resume_timeout="/x": want a duration`},
		{name: "relative trainrun", args: []string{"trainrun=bin/trainrun"}, wantErr: `trainrun="bin/trainrun": want an absolute path (path of the trainrun binary`},
		{name: "not key=value", args: []string{"/etc/trainrun.conf"}, wantErr: `argument "/etc/trainrun.conf" is not key=value`},
		{name: "repeated", args: []string{"policy=/a", "policy=/b"}, wantErr: `key "policy" given twice`},
		{name: "relative path", args: []string{"policy=trainrun.conf"}, wantErr: `policy="trainrun.conf": want an absolute path`},
		{name: "empty value", args: []string{"cache="}, wantErr: `cache="": want an absolute path`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseArgs(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *c != tc.want {
				t.Errorf("got %+v, want %+v", *c, tc.want)
			}
		})
	}
}

// TestLoadBrokenPolicy: every problem of the file is named with its line
// and key, in one message (it becomes the one log line).
func TestLoadBrokenPolicy(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "trainrun.conf")
	if err := os.WriteFile(p, []byte("CkptSignal=USR2\nCkptLeed=5m\nPartitionName=gpu MaxRequeue=-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig([]string{"policy=" + p})
	if err == nil {
		t.Fatal("a broken policy loaded")
	}
	msg := err.Error()
	for _, want := range []string{p + ":2: CkptLeed: unknown key", p + ":3: MaxRequeue", "2 error(s)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("message spans lines (it must be one log line):\n%s", msg)
	}
	if _, err := LoadConfig([]string{"policy=" + filepath.Join(dir, "missing.conf")}); err == nil || !strings.Contains(err.Error(), "missing.conf") {
		t.Errorf("missing policy: err = %v", err)
	}
	if err := os.WriteFile(p, []byte("CkptSignal=TERM\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig([]string{"policy=" + p})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Policy.Effective("").CkptSignal.Value; got != "TERM" {
		t.Errorf("CkptSignal = %q, want TERM", got)
	}
}
