package slurm

import (
	"context"
	"testing"
)

// NodeStates reads State from scontrol's records: the captured DOWN node
// (a stopped slurmd, Slurm 22.05) and a healthy one.
func TestNodeStates(t *testing.T) {
	down := readTestdata(t, "show-node-down-o.txt")
	healthy := readTestdata(t, "show-node-o.txt")
	fake := &Canned{Out: map[string]string{"scontrol show node -o n1,n2": healthy + down}}
	m, err := Client{Run: fake.Run}.NodeStates(context.Background(), "n1,n2")
	if err != nil {
		t.Fatal(err)
	}
	if m["n1"] != "MIXED" || m["n2"] != "DOWN+NOT_RESPONDING" {
		t.Fatalf("NodeStates = %v, want n1 MIXED, n2 DOWN+NOT_RESPONDING (the last record of a node wins)", m)
	}
	if NodeFailed(m["n1"]) || !NodeFailed(m["n2"]) {
		t.Errorf("NodeFailed(n1 %s)=%v NodeFailed(n2 %s)=%v", m["n1"], NodeFailed(m["n1"]), m["n2"], NodeFailed(m["n2"]))
	}
}

func TestNodeFailed(t *testing.T) {
	for st, want := range map[string]bool{
		"MIXED": false, "ALLOCATED": false, "IDLE+DRAIN": false, "MIXED+DRAIN": false, "": false,
		"MIXED+NOT_RESPONDING": true, "DOWN+NOT_RESPONDING": true, "DOWN": true, "IDLE*": true, "ALLOCATED+FAIL": true, "down": true,
	} {
		if got := NodeFailed(st); got != want {
			t.Errorf("NodeFailed(%q) = %v, want %v", st, got, want)
		}
	}
}

// NoKill reads the #SBATCH lines up to the first command (the captured
// script has --no-kill), or SBATCH_NO_KILL.
func TestNoKill(t *testing.T) {
	script := readTestdata(t, "write-batch-script.txt")
	if ok, known := NoKill([]byte(script), nil); !ok || !known {
		t.Errorf("captured script: NoKill = %v %v, want true", ok, known)
	}
	none := func(string) string { return "" }
	for s, want := range map[string]bool{
		"#!/bin/bash\n#SBATCH --nodes=3 --time=3\nsleep 1\n":          false,
		"#!/bin/bash\n#SBATCH -N3 -k\n":                               true,
		"#!/bin/bash\n#SBATCH -N3 # --no-kill in a comment\n":         false,
		"#!/bin/bash\necho hi\n#SBATCH --no-kill\n":                   false, // after a command: sbatch ignores it
		"#!/bin/bash\n# a comment\n\n#SBATCH --no-kill=off\necho x\n": true,
		"#!/bin/bash\n#SBATCH --no-killer\n":                          false,
	} {
		if ok, _ := NoKill([]byte(s), none); ok != want {
			t.Errorf("NoKill(%q) = %v, want %v", s, ok, want)
		}
	}
	if ok, _ := NoKill([]byte("#!/bin/bash\n"), func(k string) string { return map[string]string{"SBATCH_NO_KILL": "1"}[k] }); !ok {
		t.Error("SBATCH_NO_KILL=1 not seen")
	}
}

// BatchScript asks scontrol for the script on stdout.
func TestBatchScript(t *testing.T) {
	fake := &Canned{Out: map[string]string{"scontrol write batch_script 7 -": "#!/bin/bash\n"}}
	if b, err := (Client{Run: fake.Run}).BatchScript(context.Background(), "7"); err != nil || string(b) != "#!/bin/bash\n" {
		t.Errorf("BatchScript = %q %v; calls %v", b, err, fake.Calls)
	}
}
