package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/topo/snapshot"
)

// `trainrun env` on GB200 NVL72 trays (the built-in gb200-nvl72 capture,
// 4 GPUs per tray, one NVLink clique) for a job of four trays with TP=8:
// each TP group spans two trays. Without a block model the clique this tray
// reports is taken for every tray, and --explain says so; with Slurm's
// topology/block naming two racks whose trays Slurm interleaves (gb0 gb1
// gb2 gb3: racks A B A B), every TP group stays inside one rack.
func TestEnvGB200CliqueAcrossTrays(t *testing.T) {
	// A plan file for the layout with its per-step traffic (what `trainrun
	// plan --format json` writes): placement weighs bytes, so without
	// traffic every order ties.
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(planFile, []byte(`{"plan": {"tp": 8, "pp": 1, "vpp": 1, "cp": 1, "ep": 1, "dp": 2, "micro_batch": 1, "grad_accum": 1,
		"traffic": {"tp_bytes": 1e9, "dp_bytes": 1e8}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir() // unpacked once: --machine would unpack it per rank
	if err := snapshot.Unpack("gb200-nvl72", root); err != nil {
		t.Fatal(err)
	}
	rankNode := regexp.MustCompile(`(?m)^# rank (\d+) of 16 on (\S+) `)
	nodesOf := func(t *testing.T, extra ...string) map[int]string {
		t.Helper()
		got := map[int]string{}
		for r := 0; r < 16; r++ {
			args := append([]string{"env", "--root", root, "--nodelist", "gb[0-3]", "--plan", planFile,
				"--node-addr", "10.20.0.11", "--rank", fmt.Sprint(r), "--explain"}, extra...)
			out, errs, code := runWithEnv(t, nil, args...)
			if code != 0 {
				t.Fatalf("rank %d: exit %d: %s", r, code, errs)
			}
			m := rankNode.FindStringSubmatch(out)
			if m == nil || m[1] != fmt.Sprint(r) {
				t.Fatalf("rank %d: no rank header in\n%s", r, out)
			}
			got[r] = m[2]
			if r == 0 && len(extra) == 0 && !strings.Contains(out, "# placement: NVLink clique 4c0b5d92-7a3e-4f1a-9d6e-2b8f1c3a5e70.32766 of this node taken for all 4 nodes") {
				t.Fatalf("no clique note in --explain:\n%s", out)
			}
			if r == 0 && len(extra) > 0 && strings.Contains(out, "taken for all") {
				t.Fatalf("the block model governs, yet the local clique was assumed:\n%s", out)
			}
		}
		return got
	}
	t.Run("one clique", func(t *testing.T) {
		got := nodesOf(t)
		for tp := 0; tp < 2; tp++ {
			trays := map[string]bool{}
			for r := 8 * tp; r < 8*tp+8; r++ {
				trays[got[r]] = true
			}
			if len(trays) != 2 {
				t.Fatalf("TP group %d on %v, want two trays", tp, trays)
			}
		}
	})
	t.Run("two racks interleaved", func(t *testing.T) {
		conf := filepath.Join(t.TempDir(), "topology.conf")
		if err := os.WriteFile(conf, []byte("BlockName=rackA Nodes=gb[0,2]\nBlockName=rackB Nodes=gb[1,3]\nBlockSizes=2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		rack := map[string]string{"gb0": "A", "gb2": "A", "gb1": "B", "gb3": "B"}
		got := nodesOf(t, "--topology-conf", conf)
		for r := 0; r < 16; r++ {
			if peer := r ^ 4; rack[got[r]] != rack[got[peer]] {
				t.Fatalf("rank %d on %s and its TP peer %d on %s are in different racks (%v)", r, got[r], peer, got[peer], got)
			}
		}
	})
}
