package spank

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/topo/nvml"
)

// NodeTopology returns this node's topology, read from sysfs once per boot:
// the first step on a node discovers it and writes DIR/node-BOOTID.json
// (atomically), later steps read that file. root is the machine root ("" =
// /). fromCache says which happened. A cache that cannot be written is not
// an error: the next step discovers again.
func NodeTopology(cacheDir, root string) (n *topo.Node, fromCache bool, err error) {
	r := orStr(root, "/")
	boot, err := os.ReadFile(filepath.Join(r, "proc/sys/kernel/random/boot_id"))
	id := strings.TrimSpace(string(boot))
	if err != nil || id == "" || strings.ContainsAny(id, "/.") {
		id = ""
	}
	var path string
	if id != "" && cacheDir != "" {
		path = filepath.Join(cacheDir, "node-"+id+".json")
		if data, err := os.ReadFile(path); err == nil {
			var cached topo.Node
			if json.Unmarshal(data, &cached) == nil && cached.Source != "" {
				return &cached, true, nil
			}
		}
	}
	opts := topo.Options{Root: root}
	if root == "" || root == "/" {
		// As trainrun env on this machine: NVML where the driver loads
		// (NVLink facts), sysfs always. Once per boot, in the parent.
		if src, err := nvml.Open(); err != nil {
			opts.NVMLUnavailable = strings.TrimPrefix(err.Error(), topo.ErrNVMLUnavailable.Error()+": ")
		} else {
			defer src.Close()
			opts.NVML = src
		}
	}
	n, err = topo.Discover(opts)
	if err != nil {
		return nil, false, err
	}
	if path != "" {
		_ = writeAtomic(path, n)
	}
	return n, false, nil
}

func writeAtomic(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, data, 0o644)
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory renamed over it, so a reader sees the old file or the whole new
// one.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr != nil || cerr != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing %s: %v %v", path, werr, cerr)
	}
	if err := os.Chmod(f.Name(), mode); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// JobDir is where per-job files live; the job epilog removes it.
func JobDir(cacheDir string, jobID uint32) string {
	return filepath.Join(cacheDir, "job-"+strconv.FormatUint(uint64(jobID), 10))
}

// WriteStepEnv records what a step's tasks got on this node (for `cat` when
// a user asks what the plugin set), under JobDir.
func WriteStepEnv(cacheDir string, st Step, tasks []TaskEnv) error {
	var b strings.Builder
	for i, t := range tasks {
		fmt.Fprintf(&b, "# local task %d, rank %d\n", i, t.Rank)
		for _, kv := range t.Vars {
			b.WriteString(kv + "\n")
		}
	}
	dir := JobDir(cacheDir, st.JobID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, fmt.Sprintf("step-%d.node-%d.env", st.StepID, st.NodeID)), []byte(b.String()), 0o644)
}

// CleanJob removes the job's per-job files (job epilog).
func CleanJob(cacheDir string, jobID uint32) error {
	if cacheDir == "" || jobID == 0 {
		return nil
	}
	return os.RemoveAll(JobDir(cacheDir, jobID))
}
