package scale

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// BenchmarkScale is make bench-scale: per N (TRAINRUN_SCALE_N, default
// 1024,4096,16384) one simulated step, then the history, the report and
// the planner at size. It prints a table; the figures are in test/README.md.
func BenchmarkScale(b *testing.B) {
	ns := []int{1024, 4096, 16384}
	if s := os.Getenv("TRAINRUN_SCALE_N"); s != "" {
		ns = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < RanksPerNode {
				b.Fatalf("TRAINRUN_SCALE_N=%q: %q is not a number of ranks (at least %d); give e.g. 1024,4096", s, f, RanksPerNode)
			}
			ns = append(ns, n)
		}
	}
	why := straceAvailable()
	fmt.Printf("%7s %6s %10s %10s %17s %8s %9s %10s %18s %16s %8s %9s %9s  %s\n", "ranks", "nodes", "conn→go", "last→go", "(files/rel/→go)", "ctl RSS", "ctl CPU",
		"beats/s", "beat p50/p99/max", "launch files", "bcast", "commit", "list+cat", "commit metadata ops (strace)")
	for b.Loop() {
		for _, n := range ns {
			row, err := step(b, n, why)
			if err != nil {
				b.Fatal(err)
			}
			fmt.Println(row)
		}
		if why != "" {
			fmt.Println("commit ops not counted:", why)
		}
		for _, line := range atSize(b) {
			fmt.Println(line)
		}
	}
}

func step(b *testing.B, n int, why string) (string, error) {
	base := b.TempDir()
	if d := os.Getenv("TRAINRUN_SCALE_DIR"); d != "" {
		var err error
		if base, err = os.MkdirTemp(d, "scale-"); err != nil {
			return "", err
		}
		defer os.RemoveAll(base)
	}
	dir, store := filepath.Join(base, "launch"), filepath.Join(base, "ckpt")
	for _, tag := range tags {
		if err := os.MkdirAll(filepath.Join(store, tag, ".trainrun"), 0o755); err != nil {
			return "", err
		}
	}
	env := []string{"TRAINRUN_SCALE_WORLD=" + strconv.Itoa(n), "TRAINRUN_SCALE_LAUNCH=" + dir, "TRAINRUN_SCALE_STORE=" + store}
	var ctl ctlResult
	var sh shimResult
	var errs [2]error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); errs[0] = child("controller", env, &ctl) }()
	go func() { defer wg.Done(); errs[1] = child("shims", env, &sh) }()
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return "", err
	}
	if sh.Errors > 0 {
		return "", fmt.Errorf("%d ranks: %d shims failed, the first: %s", n, sh.Errors, sh.FirstErr)
	}
	var cm commitResult
	env = []string{"TRAINRUN_SCALE_STORE=" + store, "TRAINRUN_SCALE_TAG=" + tags[0], "TRAINRUN_SCALE_WORLD=" + strconv.Itoa(n)}
	if err := child("commit", env, &cm); err != nil {
		return "", err
	}
	ops := "-"
	if why == "" {
		c, err := countCommit(store, tags[1], n, "commit")
		if err != nil {
			return "", err
		}
		o, err := countCommit(store, tags[1], n, "observer")
		if err != nil {
			return "", err
		}
		ops = fmt.Sprintf("%d: %s; then list+cat %d: %s", c.meta(), c, o.meta(), o)
	}
	burst := float64(ctl.Beats) / (float64(max(ctl.BeatsLast-ctl.BeatsFirst, 1)) / 1e9)
	return fmt.Sprintf("%7d %6d %8.0fms %8.0fms %5.0f/%4.0f/%4.0fms %5.0fMiB %7dms %10.0f %5.1f/%5.1f/%5.1fms %5d %7.1fMiB %6.0fms %7.0fms %7.0fms  %s",
		n, n/RanksPerNode, ms(sh.GoLast-ctl.FirstConn), ms(sh.GoLast-ctl.LastConn),
		float64(ctl.WriteUS)/1e3, ms(ctl.Released-ctl.LastConn)-float64(ctl.WriteUS)/1e3, ms(sh.GoLast-ctl.Released), float64(ctl.MaxRSSKiB)/1024, ctl.UserMS+ctl.SysMS,
		burst, float64(ctl.BeatP50US)/1e3, float64(ctl.BeatP99US)/1e3, float64(ctl.BeatMaxUS)/1e3,
		ctl.LaunchFiles, float64(ctl.LaunchBytes)/(1<<20), float64(ctl.BcastUS)/1e3, float64(cm.CommitUS)/1e3,
		float64(cm.ListUS+cm.CompletedAtUS)/1e3, ops), nil
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }
