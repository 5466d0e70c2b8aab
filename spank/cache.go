package spank

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/trainrun/trainrun/internal/atomicfile"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/topo/nvml"
)

// NodeTopology returns this node's topology, read from sysfs once per boot:
// the first step on a node discovers it and writes DIR/node-BOOTID.json
// (atomically), later steps read that file. root is the machine root ("" =
// /). fromCache says which happened. A cache that cannot be written is not
// an error: the next step discovers again.
func NodeTopology(cacheDir, root string) (n *topo.Node, fromCache bool, err error) {
	var path string
	if id := bootID(root); id != "" && cacheDir != "" {
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

// bootID is the kernel's boot id ("" when unreadable or odd), the key of
// the per-boot caches.
func bootID(root string) string {
	boot, err := os.ReadFile(filepath.Join(orStr(root, "/"), "proc/sys/kernel/random/boot_id"))
	id := strings.TrimSpace(string(boot))
	if err != nil || id == "" || strings.ContainsAny(id, "/.") {
		return ""
	}
	return id
}

// addrCache is one node name's addresses as resolved at Resolved.
type addrCache struct {
	Host     string    `json:"host"`
	Addrs    []string  `json:"addrs"`
	Resolved time.Time `json:"resolved"`
}

// negativeAddrTTL is how long a name that did not resolve stays unresolved
// before a step asks DNS again.
const negativeAddrTTL = 10 * time.Minute

// maxAddrFiles bounds the address cache files in the cache directory.
const maxAddrFiles = 64

// NodeAddrs returns host's IPv4 addresses (this node's name as Slurm knows
// it; NCCL's bootstrap interface is the one holding them), resolved once per
// boot and kept in DIR/addr-HASH-BOOTID.json: a lookup costs a DNS round
// trip, up to resolve's timeout when DNS is down, and every step would pay
// it. A name that did not resolve is asked again after negativeAddrTTL.
// The node list reaches slurmstepd from the job's environment, so the file
// is named by a hash of the name, never the name, and at most
// maxAddrFiles of them are kept (past that, names are resolved uncached).
func NodeAddrs(cacheDir, root, host string, resolve func(string) []string, now time.Time) []string {
	id := bootID(root)
	if id == "" || cacheDir == "" || host == "" || strings.ContainsAny(host, "/\x00") || strings.HasPrefix(host, ".") {
		return resolve(host)
	}
	sum := sha256.Sum256([]byte(host))
	path := filepath.Join(cacheDir, "addr-"+hex.EncodeToString(sum[:8])+"-"+id+".json")
	data, err := os.ReadFile(path)
	if err != nil {
		if n, _ := filepath.Glob(filepath.Join(cacheDir, "addr-*")); len(n) >= maxAddrFiles {
			return resolve(host)
		}
	}
	if err == nil {
		var c addrCache
		if json.Unmarshal(data, &c) == nil && c.Host == host && (len(c.Addrs) > 0 || now.Sub(c.Resolved) < negativeAddrTTL) {
			return c.Addrs
		}
	}
	addrs := resolve(host)
	_ = writeAtomic(path, addrCache{Host: host, Addrs: addrs, Resolved: now})
	return addrs
}

func writeAtomic(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, data, 0o600, nil) // root's caches: nobody else reads them
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory renamed over it, so a reader sees the old file or the whole new
// one, and durably (atomicfile.Durable: the file and the directory are
// fsynced), so a node that crashes right after a step started does not keep
// an empty cache file that the next step would trust. With owner, the file
// is given to the job's user (mode 0600 then: per-job files are the job's
// to read, no one else's).
func writeFileAtomic(path string, data []byte, mode os.FileMode, owner *Cred) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	opts := []atomicfile.Option{atomicfile.Durable()}
	if owner != nil && os.Geteuid() == 0 {
		mode = 0o600
		opts = append(opts, atomicfile.Owner(int(owner.UID), int(owner.GID)))
	}
	return atomicfile.WriteFile(path, data, mode, opts...)
}

// JobDir is where per-job files live; the job epilog removes it.
func JobDir(cacheDir string, jobID uint32) string {
	return filepath.Join(cacheDir, "job-"+strconv.FormatUint(uint64(jobID), 10))
}

// WriteStepEnv records what a step's tasks got on this node (for `cat` when
// a user asks what the plugin set), under JobDir, given to owner (the job's
// user; nil = root's, 0600).
func WriteStepEnv(cacheDir string, st Step, tasks []TaskEnv, owner *Cred) error {
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
	return writeFileAtomic(filepath.Join(dir, fmt.Sprintf("step-%d.node-%d.env", st.StepID, st.NodeID)), []byte(b.String()), 0o600, owner)
}

// CleanJob removes the job's per-job files (job epilog).
func CleanJob(cacheDir string, jobID uint32) error {
	if cacheDir == "" || jobID == 0 {
		return nil
	}
	if err := unmountHandoff(filepath.Join(JobDir(cacheDir, jobID), HandoffDirName)); err != nil {
		return err
	}
	return os.RemoveAll(JobDir(cacheDir, jobID))
}
