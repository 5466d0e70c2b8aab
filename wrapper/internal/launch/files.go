package launch

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/trainrun/trainrun/internal/atomicfile"
	"github.com/trainrun/trainrun/internal/safefs"
	"github.com/trainrun/trainrun/wrapper/internal/container"
)

// The launch directory (JOBDIR/launch) is how the controller hands each task
// its environment: the shim `trainrun exec-task`, exec'd by slurmstepd as an
// ordinary process, reads common.json and its node's file and finds its entry
// by SLURM_PROCID. One file per node (not per rank) keeps a 16k-rank job to a
// few thousand small files on the shared file system.
const (
	CommonFile = "common.json" // the launch's common part
	NodeDir    = "node"        // one file per node: node/<node>.json
)

// Protocol is the version of the launch files and the control channel. The
// controller writes it; a shim of another build (trainrun-shim installed
// apart from trainrun) refuses the launch instead of misreading it. Raise it
// with any change a shim of the previous build would misread.
const Protocol = 3

// Common is common.json: what every task of the launch shares.
type Common struct {
	Protocol int    `json:"protocol"`
	JobID    string `json:"job_id"`
	World    int    `json:"world"`
	Control  string `json:"control,omitempty"` // host:port of the controller; empty = none
	Token    string `json:"token,omitempty"`   // proves a shim belongs to this launch
	Signal   string `json:"ckpt_signal"`       // TRAINRUN_CKPT_SIGNAL, e.g. "USR2"
	// LocalDir is --ckpt-local-dir as given (%n, %j, %r expanded by each
	// node's shim); CkptDir is the durable store the shims drain into.
	LocalDir string            `json:"ckpt_local_dir,omitempty"`
	CkptDir  string            `json:"ckpt_dir,omitempty"`
	Env      map[string]string `json:"env"`
	// Argv is the training command with its templates filled, when the step
	// was started before the plan (its srun line carries the command as
	// given); empty: the shim's own command line is the command.
	Argv []string `json:"argv,omitempty"`
	// Container is the runtime prefix (--container-runtime): the shim
	// starts the trainer through it; nil: directly (or inside pyxis's
	// container, which the shim itself runs in).
	Container *container.Run `json:"container,omitempty"`
}

// Rank is one rank's entry in node/<node>.json.
type Rank struct {
	Rank      int               `json:"rank"`
	Node      string            `json:"node"`
	LocalRank int               `json:"local_rank"`
	GPU       int               `json:"gpu"`
	GPUSlot   int               `json:"gpu_slot"`
	CPUs      string            `json:"cpus,omitempty"`
	Env       map[string]string `json:"env"`
}

type node struct {
	Node  string `json:"node"`
	Ranks []Rank `json:"ranks"`
}

// WriteDir writes common.json and one file per node (the ranks grouped by
// their Node, in the order given), each atomically.
func WriteDir(dir string, common Common, ranks []Rank) error {
	if err := WriteCommon(dir, common); err != nil {
		return err
	}
	byNode := map[string]*node{}
	for _, r := range ranks {
		n := byNode[r.Node]
		if n == nil {
			n = &node{Node: r.Node}
			byNode[r.Node] = n
		}
		n.Ranks = append(n.Ranks, r)
	}
	for name, n := range byNode {
		if strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
			return fmt.Errorf("node name %q cannot be a file name", name)
		}
		if err := WriteJSONAtomic(filepath.Join(dir, NodeDir, name+".json"), n, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// WriteCommon makes the launch directory and writes common.json alone: what
// the shims of a step started before its plan need to reach the controller
// (WriteDir then writes it again, whole, with the nodes' files).
func WriteCommon(dir string, common Common) error {
	common.Protocol = Protocol
	// Created fresh, or accepted only as the user's own and not writable by
	// others (issue 12, finding 3: a launch directory another uid created
	// first would let it plant launch files).
	for _, d := range []string{dir, filepath.Join(dir, NodeDir)} {
		if err := safefs.MkdirOwn(d, "launch directory"); err != nil {
			return err
		}
	}
	return WriteJSONAtomic(filepath.Join(dir, CommonFile), common, 0o600)
}

// ReadCommon reads common.json.
func ReadCommon(dir string) (*Common, error) {
	var c Common
	if err := safefs.CheckOwnDir(dir, "launch directory"); err != nil {
		return nil, err
	}
	if err := ReadJSON(filepath.Join(dir, CommonFile), &c); err != nil {
		return nil, err
	}
	if c.Protocol != Protocol {
		return nil, fmt.Errorf("%s: launch protocol %d, this shim speaks %d: the trainrun that started the step and the shim (trainrun-shim or trainrun exec-task) come from different builds; install both from one build",
			filepath.Join(dir, CommonFile), c.Protocol, Protocol)
	}
	return &c, nil
}

// WaitCommon reads common.json until it names the controller. The
// controller of a step started before its plan writes it twice: without its
// address before srun starts (the address needs an scontrol query, which
// runs while Slurm starts the tasks), then whole. A shim that reads the
// first one polls every few ms, for at most within. Each read opens the file
// anew, which NFS's close-to-open consistency makes see the second write.
func WaitCommon(dir string, within time.Duration) (*Common, error) {
	deadline := time.Now().Add(within)
	for {
		c, err := ReadCommon(dir)
		if err != nil || c.Control != "" {
			return c, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s names no controller after %s: the controller that started the step did not open its control channel (its log in the job output says why)",
				filepath.Join(dir, CommonFile), within)
		}
		time.Sleep(commonPoll)
	}
}

// commonPoll is how often WaitCommon reads common.json again.
const commonPoll = 5 * time.Millisecond

// Read finds a task's entry: rank from SLURM_PROCID on node SLURMD_NODENAME.
func Read(dir, nodeName string, rank int) (*Common, *Rank, error) {
	c, err := ReadCommon(dir)
	if err != nil {
		return nil, nil, err
	}
	var n node
	if err := ReadJSON(filepath.Join(dir, NodeDir, nodeName+".json"), &n); err != nil {
		if os.IsNotExist(err) {
			return c, nil, fmt.Errorf("rank %d started on node %s, which has no rank in this plan (%s): srun placed the task elsewhere than the hostfile says",
				rank, nodeName, filepath.Join(dir, NodeDir))
		}
		return nil, nil, err
	}
	for i := range n.Ranks {
		if n.Ranks[i].Rank == rank {
			return c, &n.Ranks[i], nil
		}
	}
	return c, nil, fmt.Errorf("rank %d started on node %s but the plan puts it elsewhere (ranks on %s: %s): srun did not follow the hostfile",
		rank, nodeName, nodeName, rankList(n.Ranks))
}

// NodeRanks lists the ranks the launch puts on node.
func NodeRanks(dir, nodeName string) ([]int, error) {
	var n node
	if err := ReadJSON(filepath.Join(dir, NodeDir, nodeName+".json"), &n); err != nil {
		return nil, err
	}
	var out []int
	for _, r := range n.Ranks {
		out = append(out, r.Rank)
	}
	return out, nil
}

func rankList(rs []Rank) string {
	var s []string
	for _, r := range rs {
		s = append(s, strconv.Itoa(r.Rank))
	}
	return strings.Join(s, ",")
}

// WriteJSONAtomic writes v as indented JSON with WriteFileAtomic.
func WriteJSONAtomic(path string, v any, mode os.FileMode) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, append(b, '\n'), mode)
}

// WriteFileAtomic replaces path through a temporary file and a rename
// (internal/atomicfile): a reader on another node sees the old file or the
// whole new one, never a part (the writer's close and the rename reach the
// file server before any shim opens it: NFS's close-to-open, Lustre's POSIX
// coherence). Not fsynced: every file written here is made again by the
// next step or run (launch files, the hostfile, the probe's facts, the
// summary), so a crash loses nothing and the step's start need not wait on
// a dozen fsyncs.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	return atomicfile.WriteFile(path, data, mode)
}

// MaxFileBytes bounds one launch or probe file (a node's file for a few
// ranks with their environments is kilobytes).
const MaxFileBytes = 64 << 20

// ReadJSON reads a file of the job directory into v: it must be a plain
// file of the user's own, not writable by others (issue 12, finding 3: the
// shim merges launch files into the trainer's environment, so a file
// another uid planted would choose its PATH and LD_PRELOAD). A syntax error
// names the file.
func ReadJSON(path string, v any) error {
	b, err := safefs.ReadOwnFile(path, "launch file", MaxFileBytes)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// MergedEnv is the environment of one rank as KEY=VALUE lines in key order.
func MergedEnv(common, rank map[string]string) []string {
	m := map[string]string{}
	for k, v := range common {
		m[k] = v
	}
	for k, v := range rank {
		m[k] = v
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + m[k]
	}
	return out
}

// VisibleDevicesFor reorders the step's CUDA_VISIBLE_DEVICES so that device
// number localRank is the rank's GPU, keeping the node's other GPUs visible
// (CUDA IPC and NVLink peer access between the node's ranks need them, and
// frameworks call torch.cuda.set_device(LOCAL_RANK)). cvd is the list Slurm
// gave the step (global indices, or 0..n-1 when cgroups renumber them);
// stepGPUs is SLURM_STEP_GPUS / SLURM_JOB_GPUS, the node's indices in the same
// order. gpu is the node's index the plan chose; when it is -1 (the node was
// not probed) the rank takes the step's slot-th GPU.
func VisibleDevicesFor(cvd, stepGPUs string, gpu, slot, localRank int) (string, error) {
	list := SplitList(cvd)
	ids := SplitList(stepGPUs)
	if len(list) == 0 {
		return "", fmt.Errorf("CUDA_VISIBLE_DEVICES is empty: the step holds no GPUs on this node")
	}
	if len(ids) != len(list) {
		ids = list // no separate numbering known: CUDA_VISIBLE_DEVICES holds the node's indices
	}
	if localRank >= len(list) {
		return "", fmt.Errorf("LOCAL_RANK %d but only %d GPUs are visible (%s)", localRank, len(list), cvd)
	}
	pos := -1
	if gpu < 0 {
		if slot < 0 || slot >= len(ids) {
			return "", fmt.Errorf("GPU slot %d but the step holds only GPUs %s on this node", slot, strings.Join(ids, ","))
		}
		pos = slot
	} else {
		want := strconv.Itoa(gpu)
		for i, id := range ids {
			if id == want {
				pos = i
			}
		}
		if pos < 0 {
			return "", fmt.Errorf("the plan gives this rank GPU %d but the step holds GPUs %s on this node", gpu, strings.Join(ids, ","))
		}
	}
	list[localRank], list[pos] = list[pos], list[localRank]
	return strings.Join(list, ","), nil
}

// SplitList splits a comma-separated list, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
