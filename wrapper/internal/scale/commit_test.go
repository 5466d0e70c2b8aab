package scale

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
)

// commitResult is one commit in the commit child.
type commitResult struct {
	CommitUS      int64 // Store.Commit of the tag: markers, fsync and hash, manifest, pointer
	ListUS        int64 // then List and CompletedAt, as the controller's observer does per commit
	CompletedAtUS int64
}

// runCommit commits tag in store for world ranks, then lists the store and
// reads the tag's completion time. Under strace TRAINRUN_SCALE_ONLY says
// which half it does, so that each is counted alone: commit, or observer
// (of a committed tag).
func runCommit(store, tag string, world int) (*commitResult, error) {
	st, err := checkpoint.Open(store)
	if err != nil {
		return nil, err
	}
	var res commitResult
	only := os.Getenv("TRAINRUN_SCALE_ONLY")
	t := time.Now()
	if only != "observer" {
		if _, err := st.Commit(context.Background(), tag, world); err != nil {
			return nil, err
		}
	}
	res.CommitUS = time.Since(t).Microseconds()
	if only == "commit" {
		return &res, nil
	}
	t = time.Now()
	if _, err := st.List(); err != nil {
		return nil, err
	}
	res.ListUS = time.Since(t).Microseconds()
	t = time.Now()
	checkpoint.CompletedAt(st.TagDir(tag))
	res.CompletedAtUS = time.Since(t).Microseconds()
	return &res, nil
}

// traced are the system calls strace counts: every call that names a path
// (%file), the directory reads and the fsyncs (the metadata operations a
// Lustre or GPFS metadata server serves), and the data calls apart.
const traced = "%file,getdents64,fsync,fdatasync,fstat,read,pread64,write,pwrite64"

// dataCalls are the traced calls that move bytes, not metadata.
var dataCalls = map[string]bool{"read": true, "pread64": true, "write": true, "pwrite64": true}

// sysCounts is a count per system call.
type sysCounts map[string]int

func (c sysCounts) meta() int {
	n := 0
	for k, v := range c {
		if !dataCalls[k] {
			n += v
		}
	}
	return n
}

func (c sysCounts) String() string {
	var ks []string
	for k := range c {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	for _, k := range ks {
		if c[k] != 0 {
			fmt.Fprintf(&b, " %s=%d", k, c[k])
		}
	}
	return strings.TrimSpace(b.String())
}

// straceAvailable says why the counts cannot be taken ("" when they can).
func straceAvailable() string {
	if _, err := exec.LookPath("strace"); err != nil {
		return "strace is not installed (Debian: apt-get install strace)"
	}
	if err := exec.Command("strace", "-f", "-c", "-o", os.DevNull, "true").Run(); err != nil {
		return "strace cannot trace here (ptrace denied: a container without CAP_SYS_PTRACE, or kernel.yama.ptrace_scope): " + err.Error()
	}
	return ""
}

// countCommit is the commit's system calls (what is observer: the List and
// CompletedAt the controller's observer does after it): a commit child
// under strace less a child that does nothing (the Go runtime's and the
// test binary's own start).
func countCommit(store, tag string, world int, what string) (sysCounts, error) {
	env := []string{"TRAINRUN_SCALE_STORE=" + store, "TRAINRUN_SCALE_TAG=" + tag, "TRAINRUN_SCALE_WORLD=" + strconv.Itoa(world), "TRAINRUN_SCALE_ONLY=" + what}
	c, err := straced("commit", env)
	if err != nil {
		return nil, err
	}
	base, err := straced("noop", nil)
	if err != nil {
		return nil, err
	}
	for k, v := range base {
		c[k] -= v
	}
	return c, nil
}

func straced(role string, env []string) (sysCounts, error) {
	out := filepath.Join(os.TempDir(), fmt.Sprintf("trainrun-scale-strace-%d-%s", os.Getpid(), role))
	defer os.Remove(out)
	if err := child(role, env, nil, "strace", "-f", "-c", "-o", out, "-e", "trace="+traced); err != nil {
		return nil, err
	}
	return parseStraceSummary(out)
}

// parseStraceSummary reads strace -c's table: "% time seconds usecs/call
// calls [errors] syscall", one row per call, then a total.
func parseStraceSummary(path string) (sysCounts, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c := sysCounts{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 || fs[len(fs)-1] == "total" {
			continue
		}
		if n, err := strconv.Atoi(fs[3]); err == nil {
			c[fs[len(fs)-1]] += n
		}
	}
	if len(c) == 0 {
		return nil, fmt.Errorf("strace summary %s: no rows", path)
	}
	return c, sc.Err()
}
