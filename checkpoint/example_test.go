package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/trainrun/trainrun/checkpoint"
)

// fakeTrainerSave stands in for the trainer's side of the handshake: each rank
// writes its files into dir/<tag>/, then creates dir/<tag>/.trainrun/done.<RANK>.
func fakeTrainerSave(dir, tag string, ranks ...int) {
	for _, r := range ranks {
		p := filepath.Join(dir, tag, "model_rank"+strconv.Itoa(r)+".pt")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("weights of rank "+strconv.Itoa(r)), 0o644)
		marker := checkpoint.DoneMarkerPath(filepath.Join(dir, tag), r)
		os.MkdirAll(filepath.Dir(marker), 0o755)
		os.WriteFile(marker, nil, 0o644)
	}
}

// The controller's use of the store over one incarnation of a job.
func Example_controller() {
	ckptDir, _ := os.MkdirTemp("", "ckpt")
	defer os.RemoveAll(ckptDir)
	const world = 2

	s, _ := checkpoint.Open(ckptDir)
	if _, done, _ := s.Finished(); done {
		fmt.Println("finished before: never requeue")
		return
	}
	// Before any trainer runs: finish interrupted commits, drop debris.
	s.Recover(context.Background(), world, true)
	resume := ""
	r, err := s.Latest(context.Background(), checkpoint.Sizes)
	switch {
	case errors.Is(err, checkpoint.ErrNoCheckpoint):
		fmt.Println("first start")
	case err == nil:
		resume = r.Dir // TRAINRUN_RESUME_DIR
		for _, bad := range r.Skipped {
			s.Quarantine(bad.Tag)
		}
	}
	s.History().Append(checkpoint.Event{Type: "start", JobID: "4242", Restart: 0, WorldSize: world, ResumeFrom: r.Tag})

	// The trainer saves on its own schedule; the controller commits.
	fakeTrainerSave(ckptDir, "step-100", 0, 1)
	fakeTrainerSave(ckptDir, "step-200", 0) // rank 1 still writing
	latest, changed, _ := s.CommitComplete(context.Background(), world)
	fmt.Println("latest:", latest, changed)

	fakeTrainerSave(ckptDir, "step-200", 1)
	latest, changed, _ = s.CommitComplete(context.Background(), world)
	fmt.Println("latest:", latest, changed)
	s.Prune(checkpoint.Retention{KeepLast: 1})

	s.History().Append(checkpoint.Event{Type: "end", JobID: "4242", Restart: 0, Cause: checkpoint.CauseFinished,
		LastCommitted: latest, Progress: checkpoint.StepOf(latest)})
	s.MarkFinished(checkpoint.Finished{JobID: "4242", Tag: latest})

	list, _ := s.List()
	for _, in := range list {
		fmt.Println(in.Tag, in.State, in.Latest)
	}
	incs, _ := s.History().Load()
	fmt.Println(len(incs), "incarnation, ended", incs[0].Cause, "at", incs[0].LastCommitted, "resume was", resume == "")
	// Output:
	// first start
	// latest: step-100 true
	// latest: step-200 true
	// step-200 committed true
	// 1 incarnation, ended finished at step-200 resume was true
}

// The tiered path: trainers on two nodes save into node-local storage and go
// back to training; each node's shim drains what its ranks finished; the
// controller commits once every node's drain is in.
func Example_tiered() {
	root, _ := os.MkdirTemp("", "tiered")
	defer os.RemoveAll(root)
	ckptDir := filepath.Join(root, "lustre")
	os.MkdirAll(ckptDir, 0o755)
	s, _ := checkpoint.Open(ckptDir)
	nodes := map[string][]int{"gpu001": {0, 1}, "gpu002": {2, 3}}
	for node, ranks := range nodes { // TRAINRUN_CKPT_LOCAL_DIR on each node
		fakeTrainerSave(filepath.Join(root, "shm-"+node), "step-500", ranks...)
	}
	for _, node := range []string{"gpu001", "gpu002"} {
		done, err := checkpoint.DrainAll(context.Background(), filepath.Join(root, "shm-"+node), s,
			checkpoint.DrainAllOptions{DrainOptions: checkpoint.DrainOptions{Node: node}, Ranks: nodes[node], RemoveLocal: true})
		complete, _ := s.Complete("step-500", 4)
		fmt.Println(node, "drained", done, err, "complete:", complete)
	}
	latest, _, _ := s.CommitComplete(context.Background(), 4)
	m, err := s.Verify(context.Background(), latest, checkpoint.Checksums)
	fmt.Println(latest, len(m.Files), "files verified:", err == nil)
	// Output:
	// gpu001 drained [step-500] <nil> complete: false
	// gpu002 drained [step-500] <nil> complete: true
	// step-500 4 files verified: true
}
