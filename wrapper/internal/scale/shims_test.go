package scale

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// RanksPerNode is the simulated node's GPU count: one probe per 8 ranks.
const RanksPerNode = 8

// ShardBytes is each simulated rank's checkpoint file (one per rank, as
// PyTorch DCP writes them).
const ShardBytes = 4 << 10

// The two checkpoints the shims write at the end: one to time the commit
// of, one to count its system calls under strace.
var tags = []string{"step-100", "step-200"}

func nodeOf(rank int) string { return fmt.Sprintf("n%05d", rank/RanksPerNode) }

// shimResult is what the shims' process saw, in Unix nanoseconds.
type shimResult struct {
	GoFirst, GoLast int64 // the go messages' arrival
	CkptLast        int64 // the last arrival of the first broadcast (ckpt 1)
	Errors          int
	FirstErr        string
}

// runShims plays world shims in one process, each as trainrun exec-task
// does in a step started before its plan: read common.json, connect and
// say wait, probe when asked (the first rank of a node), on go read the
// launch files and say hello; then answer the controller's ckpt 1 with one
// beat (its send time in Step), and on ckpt 2 write a shard and a done
// marker into both checkpoints of store, say exit 0 and hang up.
//
// The ranks start TRAINRUN_SCALE_STAGGER apart (default 50µs: 16,384 over
// 0.8 s, about how srun's tasks start across a job's nodes): 16,384
// goroutines dialling at once on 2 cores leave some unscheduled for longer
// than the server's HelloTimeout between their connect and their first
// line, which a shim in its own process on its own node is not.
func runShims(world int, dir, store string) (*shimResult, error) {
	if err := raiseNoFile(world + 256); err != nil {
		return nil, err
	}
	// srun starts the shims after the controller wrote common.json: here
	// both children start at once, so wait for the file first.
	for t := time.Now(); time.Since(t) < 30*time.Second; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, launch.CommonFile)); err == nil {
			break
		}
	}
	common, err := launch.WaitCommon(dir, 30*time.Second)
	if err != nil {
		return nil, err
	}
	stagger, err := time.ParseDuration(cmp.Or(os.Getenv("TRAINRUN_SCALE_STAGGER"), "50us"))
	if err != nil {
		return nil, fmt.Errorf("TRAINRUN_SCALE_STAGGER: %w (give a duration, e.g. 50us, or 0)", err)
	}
	start := time.Now()
	var res shimResult
	var mu sync.Mutex
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if res.Errors++; res.FirstErr == "" {
			res.FirstErr = err.Error()
		}
		if res.Errors <= 3 { // at once: the controller may give up on the rest
			fmt.Fprintf(os.Stderr, "scale shims: after %s: %v\n", time.Since(start).Round(time.Millisecond), err)
		}
	}
	var goFirst, goLast, ckptLast atomic.Int64
	goFirst.Store(1 << 62)
	io := make(chan struct{}, 64) // shims reading or writing files at once: a blocked file call takes a thread
	var wg, released sync.WaitGroup
	released.Add(world)
	for r := 0; r < world; r++ {
		if stagger > 0 {
			time.Sleep(stagger)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := shim(r, common, dir, store, io, &released, &goFirst, &goLast, &ckptLast); err != nil {
				fail(fmt.Errorf("rank %d: %w", r, err))
			}
		}()
	}
	wg.Wait()
	res.GoFirst, res.GoLast, res.CkptLast = goFirst.Load(), goLast.Load(), ckptLast.Load()
	return &res, nil
}

func shim(rank int, common *launch.Common, dir, store string, io chan struct{}, released *sync.WaitGroup, goFirst, goLast, ckptLast *atomic.Int64) error {
	node := nodeOf(rank)
	here := sync.OnceFunc(released.Done) // once, on every path: a failed shim must not hold the others
	defer here()
	probe := func() error {
		return launch.WriteFileAtomic(filepath.Join(dir, "probe", node+".json"), []byte(`{"node":"`+node+`","gpus":8}`+"\n"), 0o644)
	}
	c, ok, err := launch.DialWait(common.Control, launch.Msg{Token: common.Token, Rank: rank, Node: node, StepID: "0"}, probe)
	if err != nil {
		return err
	}
	defer c.Close()
	now := time.Now().UnixNano()
	storeMin(goFirst, now)
	storeMax(goLast, now)
	if !ok {
		return fmt.Errorf("aborted")
	}
	// Every shim of this process shares its 2 cores: those released
	// first would read their launch files while the last go is still
	// in flight, and the last go's arrival would time the readers, not the
	// controller. A shim on its own node reads alone.
	here()
	released.Wait()
	// Then at most len(io) at once read and say hello: 16,384 goroutines
	// made runnable together starve some past the client's 2 s write
	// deadline between setting it and writing (measured: 2 of 16,384).
	io <- struct{}{}
	_, _, err = launch.Read(dir, node, rank)
	if err == nil {
		err = c.Send(launch.Msg{Kind: launch.Hello, Token: common.Token, Rank: rank, PID: os.Getpid(), Node: node, StepID: "0"})
	}
	<-io
	if err != nil {
		return err
	}
	var werr error
	c.Receive(func(m launch.Msg) {
		switch m.CkptID {
		case 1:
			storeMax(ckptLast, time.Now().UnixNano())
			werr = c.Send(launch.Msg{Kind: launch.Beat, Rank: rank, Step: time.Now().UnixMicro(), State: "R", Phase: launch.PhaseTrain})
		case 2:
			io <- struct{}{}
			werr = writeParts(store, rank)
			<-io
			if werr == nil {
				werr = c.Send(launch.Msg{Kind: launch.Exit, Rank: rank})
			}
			c.Close()
		}
	})
	return werr
}

// writeParts is what a trainer does at a save: its shard, then its done
// marker (without the fsyncs a trainer does: the commit fsyncs every file
// again, and the benchmark times the commit, not the disk under the shims).
func writeParts(store string, rank int) error {
	for _, tag := range tags {
		d := filepath.Join(store, tag)
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("__%d_0.distcp", rank)), make([]byte, ShardBytes), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(checkpoint.DoneMarkerPath(d, rank), nil, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func storeMax(a *atomic.Int64, v int64) {
	for o := a.Load(); v > o && !a.CompareAndSwap(o, v); o = a.Load() {
	}
}

func storeMin(a *atomic.Int64, v int64) {
	for o := a.Load(); v < o && !a.CompareAndSwap(o, v); o = a.Load() {
	}
}
