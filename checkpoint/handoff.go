package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// HandoffVersion is the version of DrainHandoff this code writes and reads.
const HandoffVersion = 1

// handoffMaxBytes bounds what ReadHandoff reads: a record is a few hundred
// bytes, and root reads records a user wrote.
const handoffMaxBytes = 64 << 10

// DrainHandoff is the record a node's drainer (local rank 0's shim of
// `trainrun run --ckpt-local-dir`) leaves in the directory the SPANK plugin
// names in TRAINRUN_HANDOFF_DIR, as drain-<NODE>.json, while it runs. The
// shim removes it once everything the node saved is drained; when the shim
// dies first (SIGKILL after KillWait, a crash, OOM), the job epilog finds it
// and finishes the drain (`trainrun ckpt drain` as the job's user).
//
// The user writes the record: the epilog, which runs as root, only parses
// it (ReadHandoff) and passes its paths as arguments to a process running
// as the user; it never opens them itself.
type DrainHandoff struct {
	Version  int    `json:"version"`
	JobID    uint32 `json:"job_id"`
	Restart  int    `json:"restart"`
	Node     string `json:"node"`
	LocalDir string `json:"local_dir"` // the node's TRAINRUN_CKPT_LOCAL_DIR
	CkptDir  string `json:"ckpt_dir"`  // the durable store
	Ranks    []int  `json:"ranks"`     // the node's ranks
}

// HandoffFile is the record's file name for node.
func HandoffFile(node string) string { return "drain-" + node + ".json" }

// Check says what is wrong with a record, naming the field and the value.
func (h DrainHandoff) Check() error {
	if h.Version != HandoffVersion {
		return fmt.Errorf("version %d: this trainrun reads version %d records; use the same trainrun release in jobs and in the plugin", h.Version, HandoffVersion)
	}
	if err := checkNode(h.Node); err != nil {
		return fmt.Errorf("node: %v", err)
	}
	for _, p := range []struct{ key, v string }{{"local_dir", h.LocalDir}, {"ckpt_dir", h.CkptDir}} {
		if p.v == "" || !filepath.IsAbs(p.v) || filepath.Clean(p.v) != p.v || strings.ContainsAny(p.v, "\x00\n") {
			return fmt.Errorf("%s %q: want a clean absolute path", p.key, p.v)
		}
	}
	if len(h.Ranks) > maxNodeRanks {
		return fmt.Errorf("ranks: %d ranks on one node, more than %d", len(h.Ranks), maxNodeRanks)
	}
	seen := map[int]bool{}
	for _, r := range h.Ranks {
		if r < 0 || r > maxRank {
			return fmt.Errorf("ranks: %d is not a rank", r)
		}
		if seen[r] {
			return fmt.Errorf("ranks: %d is listed twice", r)
		}
		seen[r] = true
	}
	return nil
}

// maxNodeRanks bounds the ranks one record lists (a node runs a few dozen).
const maxNodeRanks = 4096

// RanksArgs is the `trainrun ckpt drain` flag that names the record's ranks
// (none when it lists none): the drain then carries only the node's own
// ranks' done markers (issue 12, finding 2).
func (h DrainHandoff) RanksArgs() []string {
	if len(h.Ranks) == 0 {
		return nil
	}
	s := make([]string, len(h.Ranks))
	for i, r := range h.Ranks {
		s[i] = strconv.Itoa(r)
	}
	return []string{"--ranks=" + strings.Join(s, ",")}
}

// WriteHandoff writes h atomically as dir/drain-<node>.json (mode 0600) and
// returns its path.
func WriteHandoff(dir string, h DrainHandoff) (string, error) {
	if err := h.Check(); err != nil {
		return "", fmt.Errorf("drain handoff record: %w", err)
	}
	b, err := json.MarshalIndent(h, "", " ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, HandoffFile(h.Node))
	f, err := os.CreateTemp(dir, ".tmp-drain-")
	if err != nil {
		return "", fmt.Errorf("drain handoff record in %s: %w", dir, err)
	}
	_, werr := f.Write(append(b, '\n'))
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("drain handoff record %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("drain handoff record %s: %w", path, err)
	}
	return path, nil
}

// ReadHandoff parses and checks one record. It opens path without
// following a symbolic link and without blocking (a FIFO planted there does
// not hang the reader), reads only a regular file and at most 64 KiB: the
// epilog, running as root, reads files the job's user wrote.
func ReadHandoff(path string) (DrainHandoff, error) {
	var h DrainHandoff
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return h, fmt.Errorf("drain handoff record %s is a symbolic link; records are plain files the job's shim writes", path)
		}
		return h, fmt.Errorf("drain handoff record: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return h, fmt.Errorf("drain handoff record %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return h, fmt.Errorf("drain handoff record %s is not a regular file (%s)", path, fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, handoffMaxBytes+1))
	if err != nil {
		return h, fmt.Errorf("drain handoff record %s: %w", path, err)
	}
	if len(b) > handoffMaxBytes {
		return h, fmt.Errorf("drain handoff record %s is larger than %d bytes; records are a few hundred", path, handoffMaxBytes)
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("drain handoff record %s is not a valid record (%v)", path, err)
	}
	if err := h.Check(); err != nil {
		return h, fmt.Errorf("drain handoff record %s: %w", path, err)
	}
	if want := HandoffFile(h.Node); filepath.Base(path) != want {
		return h, fmt.Errorf("drain handoff record %s names node %q, whose record is %s", path, h.Node, want)
	}
	return h, nil
}

// DrainReport is what `trainrun ckpt drain --json` prints: one object, also
// when the drain fails. The job epilog reads it to log what a last pass did.
type DrainReport struct {
	Node    string         `json:"node"`
	Local   string         `json:"local_dir"`
	Store   string         `json:"ckpt_dir"`
	Drained []DrainedEntry `json:"drained"`
	// Left are the checkpoint directories still in the local directory
	// after the pass: not drained (an error, or no rank marked them done).
	Left    []string `json:"left"`
	Seconds float64  `json:"seconds"`
	Error   string   `json:"error,omitempty"`
}

// DrainedEntry is one checkpoint a drain copied into staging.
type DrainedEntry struct {
	Tag     string  `json:"tag"`
	Files   int     `json:"files"`
	Bytes   int64   `json:"bytes"`
	Copied  int64   `json:"copied"`
	Seconds float64 `json:"seconds"`
}
