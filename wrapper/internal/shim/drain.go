package shim

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/safefs"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// Tiered checkpoints (--ckpt-local-dir): the trainer saves into node-local
// storage (TRAINRUN_CKPT_LOCAL_DIR/<tag>/, marking done there) and returns to
// training; the shim of local rank 0 on each node drains the node's part into
// the durable store's staging area in the background (checkpoint.DrainAll),
// and the controller commits the checkpoint once every node's drain put its
// ranks' done markers into staging. The shim finishes every drain before it
// exits, also after Slurm's SIGTERM (the shim catches it and waits for the
// trainer), so the step, and with it the job's nodes, ends only after the
// drains.

// expandLocalDir replaces %n (node name), %j (job id), %r (restart count)
// and %% in a --ckpt-local-dir value.
func expandLocalDir(dir, node, jobID, restart string) string {
	var b strings.Builder
	for i := 0; i < len(dir); i++ {
		if dir[i] != '%' || i+1 == len(dir) {
			b.WriteByte(dir[i])
			continue
		}
		i++
		switch dir[i] {
		case 'n':
			b.WriteString(node)
		case 'j':
			b.WriteString(jobID)
		case 'r':
			b.WriteString(restart)
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(dir[i])
		}
	}
	return b.String()
}

// ensureLocalDir makes the node-local checkpoint directory before any
// trainer of the node writes into it: created fresh (0700) or, existing,
// the user's own and not writable by others. Every rank's shim calls it, so
// whichever runs first creates it; a directory another local user created
// first (a predictable /dev/shm/trainrun-%j) fails the rank instead of
// receiving, and injecting, its checkpoints (issue 12, finding 2).
func ensureLocalDir(dir, node string) error {
	if err := safefs.MkdirOwn(dir, "--ckpt-local-dir"); err != nil {
		return fmt.Errorf("on %s: %w", node, err)
	}
	return nil
}

// drainPoll is how often the node's drainer looks for finished local saves.
const drainPoll = 100 * time.Millisecond

// DrainFinishWait bounds how long the drainer waits, after the local
// trainer exited, for the node's other ranks to finish a save some rank has
// already marked done.
var DrainFinishWait = 60 * time.Second

// nodeDrainer drains one node's node-local checkpoints into the store.
type nodeDrainer struct {
	root  string // the node's TRAINRUN_CKPT_LOCAL_DIR
	store *checkpoint.Store
	node  string
	ranks []int // the node's ranks: a tag is drained once all of them marked it done
	log   io.Writer
	stop  chan struct{}
	done  chan struct{}
}

// startNodeDrainer removes what earlier incarnations left in root (their
// saves are from before the controller's Recover and cannot be committed any
// more), then drains in the background until finish is called.
func startNodeDrainer(root, ckptDir, node string, ranks []int, started time.Time, log io.Writer) (*nodeDrainer, error) {
	st, err := checkpoint.Open(ckptDir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint store %s: %w", ckptDir, err)
	}
	if err := safefs.MkdirOwn(root, "--ckpt-local-dir"); err != nil { // issue 12, finding 2
		return nil, fmt.Errorf("on %s: %w; it must be your own writable node-local storage (/dev/shm, local NVMe)", node, err)
	}
	if ents, err := os.ReadDir(root); err == nil {
		for _, e := range ents {
			if fi, err := e.Info(); err == nil && fi.ModTime().Before(started) && checkpoint.CheckTag(e.Name()) == nil {
				os.RemoveAll(filepath.Join(root, e.Name()))
			}
		}
	}
	d := &nodeDrainer{root: root, store: st, node: node, ranks: ranks, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	go d.loop()
	return d, nil
}

func (d *nodeDrainer) pass(ctx context.Context) error {
	t0 := time.Now()
	tags, err := checkpoint.DrainAll(ctx, d.root, d.store, checkpoint.DrainAllOptions{
		DrainOptions: checkpoint.DrainOptions{Node: d.node}, Ranks: d.ranks, RemoveLocal: true})
	for _, tag := range tags {
		fmt.Fprintf(d.log, "trainrun: exec-task: %s: drained checkpoint %s from %s into the store (%.2f s)\n", d.node, tag, d.root, time.Since(t0).Seconds())
	}
	return err
}

func (d *nodeDrainer) loop() {
	defer close(d.done)
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	warned := false
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			if err := d.pass(context.Background()); err != nil && !warned {
				warned = true
				fmt.Fprintf(d.log, "trainrun: exec-task: %s: drain: %v (retrying)\n", d.node, err)
			}
		}
	}
}

// pending lists local tags that some rank marked done but that are not all
// drained yet.
func (d *nodeDrainer) pending() []string {
	tags, _ := checkpoint.MarkedTags(d.root)
	var out []string
	for _, tag := range tags {
		marks, _ := checkpoint.DoneRanks(filepath.Join(d.root, tag))
		if len(onlyNodeRanks(marks, d.ranks)) > 0 { // this node's ranks only (issue 12)
			out = append(out, tag)
		}
	}
	return out
}

// finish stops the background loop and drains what the node saved: it waits
// (up to wait) for saves some rank of the node has marked done and others
// have not yet, and returns the tags it could not drain.
func (d *nodeDrainer) finish(wait time.Duration) []string {
	close(d.stop)
	<-d.done
	deadline := time.Now().Add(wait)
	for {
		err := d.pass(context.Background())
		left := d.pending()
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				fmt.Fprintf(d.log, "trainrun: exec-task: %s: drain: %v\n", d.node, err)
			}
			return left
		}
		time.Sleep(drainPoll)
	}
}

// writeDrainHandoff leaves the node's drain record for the job epilog in
// TRAINRUN_HANDOFF_DIR (set by the SPANK plugin; without it, nothing): if
// this shim dies before its drain finishes (SIGKILL after KillWait, a crash,
// OOM), the epilog runs `trainrun ckpt drain` as the job's user with these
// paths. It returns the record's path ("" = none written).
func writeDrainHandoff(env Env, c *launch.Common, node, localDir string, ranks []int) string {
	dir := env.Getenv("TRAINRUN_HANDOFF_DIR")
	if dir == "" {
		return ""
	}
	job, _ := strconv.ParseUint(c.JobID, 10, 32)
	restart, _ := strconv.Atoi(slurm.TaskFromEnv(env.Getenv).Restart)
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	path, err := checkpoint.WriteHandoff(dir, checkpoint.DrainHandoff{
		Version: checkpoint.HandoffVersion, JobID: uint32(job), Restart: restart, Node: node,
		LocalDir: abs(localDir), CkptDir: abs(c.CkptDir), Ranks: ranks,
	})
	if err != nil {
		fmt.Fprintf(env.Stderr, "trainrun: exec-task: %s: no handoff to the job epilog (%v): a drain this shim cannot finish is lost\n", node, err)
		return ""
	}
	return path
}

// onlyNodeRanks is marks restricted to the node's ranks (all of marks when
// ranks is empty): a marker of a rank that runs elsewhere is not pending here.
func onlyNodeRanks(marks, ranks []int) []int {
	if len(ranks) == 0 {
		return marks
	}
	var out []int
	for _, m := range marks {
		for _, r := range ranks {
			if m == r {
				out = append(out, m)
				break
			}
		}
	}
	return out
}
