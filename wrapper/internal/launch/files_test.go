package launch

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// What the controller writes, each shim reads back: its own entry, the
// common part, and the ranks of its node.
func TestWriteDirRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "launch")
	common := Common{JobID: "42", World: 4, Control: "10.0.0.1:4000", Token: "tok", Signal: "USR2", Env: map[string]string{"WORLD_SIZE": "4"}}
	var ranks []Rank
	for r := range 4 {
		node := []string{"n1", "n2"}[r/2]
		ranks = append(ranks, Rank{Rank: r, Node: node, LocalRank: r % 2, GPU: r % 2, GPUSlot: r % 2, Env: map[string]string{"RANK": string(rune('0' + r))}})
	}
	if err := WriteDir(dir, common, ranks); err != nil {
		t.Fatal(err)
	}
	c, me, err := Read(dir, "n2", 3)
	if err != nil {
		t.Fatal(err)
	}
	if c.Token != "tok" || c.Env["WORLD_SIZE"] != "4" || me.Rank != 3 || me.LocalRank != 1 || me.Env["RANK"] != "3" {
		t.Errorf("read %+v %+v", c, me)
	}
	if got, err := NodeRanks(dir, "n1"); err != nil || !slices.Equal(got, []int{0, 1}) {
		t.Errorf("NodeRanks(n1) = %v, %v", got, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, CommonFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("common.json holds the token: mode %v, %v; want 0600", fi.Mode(), err)
	}
	if _, _, err := Read(dir, "n3", 0); err == nil || !strings.Contains(err.Error(), "has no rank in this plan") {
		t.Errorf("unknown node: %v", err)
	}
	if _, _, err := Read(dir, "n1", 3); err == nil || !strings.Contains(err.Error(), "ranks on n1: 0,1") {
		t.Errorf("rank on the wrong node: %v", err)
	}
	if err := WriteDir(dir, common, []Rank{{Node: "../x"}}); err == nil {
		t.Error("a node name with a slash was written")
	}
}

// A shim of another build refuses launch files of another protocol,
// naming both versions and what to do.
func TestReadCommonProtocol(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "launch")
	if err := WriteCommon(dir, Common{JobID: "1", World: 1, Protocol: 99}); err != nil {
		t.Fatal(err)
	}
	if c, err := ReadCommon(dir); err != nil || c.Protocol != Protocol {
		t.Fatalf("written as %+v, %v: WriteCommon sets this build's protocol", c, err)
	}
	old := []byte(`{"job_id": "1", "world": 1, "ckpt_signal": "USR2", "env": {}}`)
	if err := WriteFileAtomic(filepath.Join(dir, CommonFile), old, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ReadCommon(dir)
	if err == nil || !strings.Contains(err.Error(), "launch protocol 0, this shim speaks") || !strings.Contains(err.Error(), "install both from one build") {
		t.Errorf("launch files of an older build: %v", err)
	}
}

func TestVisibleDevicesFor(t *testing.T) {
	for _, tc := range []struct {
		cvd, step       string
		gpu, slot, rank int
		want, bad       string
	}{
		{cvd: "0,1,2,3", step: "0,1,2,3", gpu: 2, rank: 0, want: "2,1,0,3"},
		{cvd: "0,1", step: "4,5", gpu: 5, rank: 0, want: "1,0"}, // cgroup-renumbered
		{cvd: "0,1,2,3", gpu: -1, slot: 3, rank: 1, want: "0,3,2,1"},
		{cvd: "", gpu: 0, bad: "empty"},
		{cvd: "0,1", step: "0,1", gpu: 7, bad: "holds GPUs 0,1"},
		{cvd: "0", step: "0", gpu: 0, rank: 3, bad: "LOCAL_RANK 3"},
	} {
		got, err := VisibleDevicesFor(tc.cvd, tc.step, tc.gpu, tc.slot, tc.rank)
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%+v: got %q, %v; want an error with %q", tc, got, err, tc.bad)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%+v: got %q, %v; want %q", tc, got, err, tc.want)
		}
	}
}

// A shim of a step started before its plan may read common.json before the
// controller wrote its address: it waits for the second write, bounded.
func TestWaitCommon(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "launch")
	if err := WriteCommon(dir, Common{JobID: "7", World: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := WaitCommon(dir, 30*time.Millisecond); err == nil || !strings.Contains(err.Error(), "names no controller after") {
		t.Errorf("no address ever: %v", err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		WriteCommon(dir, Common{JobID: "7", World: 2, Control: "10.0.0.1:4000", Token: "tok"})
	}()
	c, err := WaitCommon(dir, 10*time.Second)
	if err != nil || c.Control != "10.0.0.1:4000" || c.Token != "tok" {
		t.Errorf("after the second write: %+v, %v", c, err)
	}
	os.Remove(filepath.Join(dir, CommonFile))
	if _, err := WaitCommon(dir, time.Second); err == nil {
		t.Error("a missing common.json is waited for, not reported")
	}
}
