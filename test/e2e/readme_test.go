//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"mvdan.cc/sh/v3/shell"
)

// TestREADMESlurmLines runs the README tour's lines that ask a live Slurm
// (partitions, submit --dry-run) exactly as printed, on the harness's
// two-partition cluster (hopper: h100, ampere: a100), from a directory
// holding the train.sh they name. wrapper/readme_test.go runs the others
// and counts these (issue 30).
func TestREADMESlurmLines(t *testing.T) {
	t.Parallel()
	bin := trainrun(t)
	b, err := os.ReadFile(filepath.Join(repoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, m := range regexp.MustCompile("(?s)```(?:sh|bash)\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		for _, l := range strings.Split(strings.ReplaceAll(m[1], "\\\n", " "), "\n") {
			l = strings.TrimSpace(l)
			if strings.HasPrefix(l, "trainrun partitions ") || strings.HasPrefix(l, "trainrun submit ") {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) != 3 {
		t.Fatalf("README: %d partitions/submit lines, want 3: %q", len(lines), lines)
	}
	c := heteroCluster(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "train.sh"), []byte("#!/bin/bash\nexec trainrun run -- python train.py\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	wants := map[string][]string{
		"trainrun partitions --free":  {"hopper", "ampere"},
		"trainrun partitions --model": {"hopper"},
		"trainrun submit":             {"hopper", "chosen: partition hopper"},
	}
	for _, line := range lines {
		t.Run(line, func(t *testing.T) {
			args, err := shell.Fields(line, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := c.Command(ctx, bin, args[1:]...)
			cmd.Dir = dir
			out, err := c.Exec(cmd)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			for k, ws := range wants {
				if !strings.HasPrefix(line, k) {
					continue
				}
				for _, w := range ws {
					if !strings.Contains(out, w) {
						t.Errorf("output lacks %q:\n%s", w, out)
					}
				}
			}
		})
	}
}
