package shim

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// The lean shim (no cgo) hands the probe to trainrun next to it where the
// node has an NVIDIA driver, and probes itself otherwise.
func TestNVMLProber(t *testing.T) {
	dir := t.TempDir()
	driver := filepath.Join(dir, "nvidiactl")
	shimBin := filepath.Join(dir, "trainrun-shim")
	full := filepath.Join(dir, "trainrun")
	for _, f := range []string{shimBin, full} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	oldDriver, oldExe := nvidiaDriver, executable
	t.Cleanup(func() { nvidiaDriver, executable = oldDriver, oldExe })
	nvidiaDriver, executable = driver, func() (string, error) { return shimBin, nil }

	if got := nvmlProber(false); got != "" {
		t.Errorf("no NVIDIA driver: probe with %q, want itself", got)
	}
	if err := os.WriteFile(driver, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := nvmlProber(false); got != full {
		t.Errorf("driver, no NVML in this build: probe with %q, want %q", got, full)
	}
	if got := nvmlProber(true); got != "" {
		t.Errorf("a build with NVML: probe with %q, want itself", got)
	}
	executable = func() (string, error) { return full, nil } // trainrun itself without cgo
	if got := nvmlProber(false); got != "" {
		t.Errorf("trainrun itself: probe with %q, want itself (no recursion)", got)
	}
	executable = func() (string, error) { return shimBin, nil }
	os.Chmod(full, 0o644)
	if got := nvmlProber(false); got != "" {
		t.Errorf("trainrun not executable: probe with %q, want itself", got)
	}
}

// probeWith runs the other binary's probe, and probes here when it fails.
func TestProbeWithFallsBack(t *testing.T) {
	dir := t.TempDir()
	topoDir := filepath.Join(dir, "topo")
	os.Mkdir(topoDir, 0o755)
	ok := filepath.Join(dir, "ok")
	os.WriteFile(ok, []byte("#!/bin/sh\n[ \"$1 $2\" = \"exec-task --probe\" ] || exit 9\necho '{\"node\":\"from-trainrun\"}' > \"$3/n9.json\"\n"), 0o755)
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("#!/bin/sh\nexit 3\n"), 0o755)
	var stderr bytes.Buffer
	env := Env{Getenv: func(k string) string {
		if k == "SLURMD_NODENAME" {
			return "n9"
		}
		return ""
	}, Stdout: &stderr, Stderr: &stderr}
	read := func() launch.NodeFacts {
		t.Helper()
		var f launch.NodeFacts
		b, err := os.ReadFile(filepath.Join(topoDir, "n9.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	if err := probeWith(env, topoDir, ok); err != nil {
		t.Fatal(err)
	}
	if f := read(); f.Node != "from-trainrun" {
		t.Errorf("delegated probe: node %q", f.Node)
	}
	if err := probeWith(env, topoDir, bad); err != nil {
		t.Fatal(err)
	}
	if f := read(); f.Node != "n9" || f.Hostname == "" {
		t.Errorf("fallback probe: %+v", f)
	}
	if !strings.Contains(stderr.String(), "probing without NVML") {
		t.Errorf("the failed delegation is not reported: %q", stderr.String())
	}
}
