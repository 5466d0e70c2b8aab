package spank

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/topo"
)

// HandoffDirName is the per-job directory, under JobDir, where the drainers
// of `trainrun run --ckpt-local-dir` leave their records for the job epilog.
const HandoffDirName = "handoff"

// UnknownID stands for a uid or gid Slurm did not give.
const UnknownID = ^uint32(0)

// PrepareJobDir creates CACHE/job-N (owned by the plugin's user, root in
// slurmstepd, mode 0755) and CACHE/job-N/handoff, a tmpfs of its own
// (handoff_fs.go) owned by the job's uid:gid with mode 0700, and returns
// the latter. It is called once per step
// on every node and is idempotent. It follows no symbolic link it did not
// create: the user owns handoff/ but must not be able to make root write
// elsewhere, and job-N, which root owns, cannot be replaced by the user.
func PrepareJobDir(cacheDir string, jobID, uid, gid uint32) (string, error) {
	if cacheDir == "" || jobID == 0 {
		return "", fmt.Errorf("job directory: cache %q, job %d: need both", cacheDir, jobID)
	}
	if uid == UnknownID || gid == UnknownID {
		return "", fmt.Errorf("job directory: Slurm did not give the job's uid/gid")
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("cache directory %s: %w; check the plugstack.conf cache= argument", cacheDir, err)
	}
	if err := CheckCacheDir(cacheDir); err != nil {
		return "", err
	}
	job := JobDir(cacheDir, jobID)
	if err := mkdirOwned(job, 0o755, uint32(os.Geteuid()), uint32(os.Getegid()), false); err != nil {
		return "", err
	}
	unlock, err := lockDir(job)
	if err != nil {
		return "", err
	}
	defer unlock()
	h := filepath.Join(job, HandoffDirName)
	if err := mountHandoff(h, uid, gid); err != nil {
		return "", err
	}
	if err := mkdirOwned(h, 0o700, uid, gid, true); err != nil { // the mount's root: repairs a mode the user changed
		return "", err
	}
	return h, nil
}

// mkdirOwned makes dir (mode, owner uid:gid) or checks the one there: a
// directory, not a symbolic link. With chown, an existing directory is given
// to uid:gid (only root can have made it: its parent is root's); without, one
// owned by someone else is refused.
func mkdirOwned(dir string, mode os.FileMode, uid, gid uint32, chown bool) error {
	created := false
	if err := os.Mkdir(dir, mode); err == nil {
		created = true
	} else if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is a %s, not a directory; remove it (the plugin makes it)", dir, fileKind(fi))
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != uid || st.Gid != gid {
		if !chown && !created {
			return fmt.Errorf("%s is owned by uid %d, not %d; remove it (the plugin makes it)", dir, st.Uid, uid)
		}
		if err := os.Lchown(dir, int(uid), int(gid)); err != nil {
			return fmt.Errorf("chown %s to %d:%d: %w", dir, uid, gid, err)
		}
	}
	if fi.Mode().Perm() != mode.Perm() {
		// Not a symbolic link (Lstat above), and in a directory only root
		// can write: Chmod acts on this directory.
		if err := os.Chmod(dir, mode); err != nil {
			return fmt.Errorf("chmod %s: %w", dir, err)
		}
	}
	return nil
}

func fileKind(fi fs.FileInfo) string {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return "symbolic link"
	case fi.Mode().IsRegular():
		return "regular file"
	case fi.Mode()&fs.ModeNamedPipe != 0:
		return "FIFO (named pipe)"
	case fi.Mode()&fs.ModeSocket != 0:
		return "socket"
	case fi.Mode()&fs.ModeDevice != 0:
		return "device"
	case fi.IsDir():
		return "directory"
	}
	return fi.Mode().Type().String()
}

// thisNode is the node the epilog runs on: SLURMD_NODENAME (slurmd sets it
// in the environment of the prolog/epilog processes; seen on 22.05). ""
// when unknown: then every record in the (node-local) cache is this node's.
func thisNode() string { return os.Getenv("SLURMD_NODENAME") }

// JobEpilog finishes, on this node, the checkpoint drains that the job's
// shims could not (a shim SIGKILLed after KillWait, crashed or OOM-killed
// leaves its record drain-<node>.json in CACHE/job-N/handoff), then removes
// CACHE/job-N. For each record it runs `trainrun ckpt drain --json` (the
// last pass: every tag some rank marked done; the local copy removed once
// durable in the store's staging) as the job's user uid:gid with the user's
// supplementary groups, stdin closed, output captured, within
// c.DrainTimeout (its process group is killed at the deadline). Root never
// opens the paths a record names: the user wrote the record, so root only
// parses it (checkpoint.ReadHandoff) and passes the paths as arguments.
//
// logf gets one line per record: what was drained (tags, bytes, seconds) or
// what remains and where, and how to drain it by hand. The record is then
// removed, whatever the outcome. The error summarizes records not finished.
//
// uid or gid UnknownID (Slurm gave none) means: the owner of the handoff
// directory, which PrepareJobDir gave to the job's user.
func JobEpilog(c *Config, jobID, uid, gid uint32, logf func(string)) error {
	if c == nil || c.CacheDir == "" || jobID == 0 {
		return nil
	}
	logf = oneLineLog(logf) // the lines carry the user's bytes: names, errors, what trainrun printed (review t4, F6)
	pre := fmt.Sprintf("trainrun: epilog: job %d: ", jobID)
	hdir := filepath.Join(JobDir(c.CacheDir, jobID), HandoffDirName)
	node := thisNode()
	var failed, others = []string(nil), false // others: records of other nodes (a cache shared by several slurmd)
	fi, err := os.Lstat(hdir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		failed = append(failed, hdir)
		logf(pre + err.Error())
	case !fi.IsDir():
		failed = append(failed, hdir)
		logf(fmt.Sprintf("%s%s is a %s, not the handoff directory the plugin made; nothing drained from it", pre, hdir, fileKind(fi)))
	default:
		st := fi.Sys().(*syscall.Stat_t)
		if uid == UnknownID || gid == UnknownID {
			uid, gid = st.Uid, st.Gid
			logf(fmt.Sprintf("%snote: Slurm gave the epilog no job uid/gid; drains run as %d:%d, the owner of %s", pre, uid, gid, hdir))
		}
		if st.Uid != uid {
			failed = append(failed, hdir)
			logf(fmt.Sprintf("%s%s is owned by uid %d, not the job's user %d; nothing drained from it", pre, hdir, st.Uid, uid))
			break
		}
		ents, err := readDirCapped(hdir, maxHandoffEntries)
		if err != nil {
			failed = append(failed, hdir)
			logf(pre + err.Error() + "; the job's per-job files are removed")
			break
		}
		// One bound for all records together (drain_timeout=): with no node
		// name every record is this node's, and N of them must not hold
		// the epilog N times as long.
		deadline := time.Now().Add(drainTimeout(c))
		jobNodes := jobNodeSet()
		as := JobCred(uid, gid)
		for _, e := range ents {
			name := e.Name()
			path := filepath.Join(hdir, name)
			if !strings.HasPrefix(name, "drain-") || !strings.HasSuffix(name, ".json") {
				os.Remove(path) // not a record (or half a one): unknown, removed
				continue
			}
			if node != "" && name != checkpoint.HandoffFile(node) {
				if len(jobNodes) == 0 || jobNodes[strings.TrimSuffix(strings.TrimPrefix(name, "drain-"), ".json")] {
					continue // another node's of this job (or the job's nodes are unknown): its own epilog drains it
				}
				os.Remove(path) // a node not in the job: a bogus record
				continue
			}
			var h checkpoint.DrainHandoff
			err := asUser(as, func() error { // the user wrote it: read it as the user
				var err error
				h, err = checkpoint.ReadHandoff(path)
				return err
			})
			if err == nil && h.JobID != jobID {
				err = fmt.Errorf("drain handoff record %s is for job %d, not %d", path, h.JobID, jobID)
			}
			left := time.Until(deadline)
			switch {
			case err != nil:
				failed = append(failed, path)
				logf(pre + err.Error() + "; nothing drained from it")
			case left <= 0:
				failed = append(failed, path)
				logf(fmt.Sprintf("%snode %s: %s into %s: not drained, the epilog's bound of %s for all records is spent", pre, h.Node, h.LocalDir, h.CkptDir, drainTimeout(c)))
			default:
				line, ok := drainAsUser(c, h, uid, gid, left)
				logf(pre + line)
				if !ok {
					failed = append(failed, path)
				}
			}
			// Done with it, whatever the outcome (logged): unlink acts on the
			// name, in a directory the user cannot replace (job-N is root's).
			os.Remove(path)
		}
		// Records of other nodes left (a cache two slurmd of one host share):
		// the epilog that removes the last record removes the job dir. Each
		// epilog looks after removing its own, so one of them sees none.
		if m, _ := filepath.Glob(filepath.Join(hdir, "drain-*.json")); len(m) > 0 {
			others = true
		}
	}
	if !others {
		if err := CleanJob(c.CacheDir, jobID); err != nil {
			logf(pre + "cleaning per-job files: " + err.Error())
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("job %d: %d drain handoff(s) not finished (%s): see the lines above", jobID, len(failed), escapeControls(strings.Join(failed, ", ")))
	}
	return nil
}

// cappedBuffer keeps the first max bytes written to it.
type cappedBuffer struct {
	bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// maxHandoffEntries bounds the entries of a job's handoff directory the
// epilog reads (one record per node of the job is expected; the user can
// write the directory).
const maxHandoffEntries = 1024

// readDirCapped lists at most max entries of dir, or fails.
func readDirCapped(dir string, max int) ([]fs.DirEntry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(max + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(ents) > max {
		return nil, fmt.Errorf("%s holds more than %d entries; a job leaves one record per node", dir, max)
	}
	return ents, nil
}

// jobNodeSet is the job's nodes as slurmd gives them to the epilog
// (SLURM_JOB_NODELIST or SLURM_NODELIST, expanded within topo's caps);
// empty when unknown.
func jobNodeSet() map[string]bool {
	out := map[string]bool{}
	hosts, err := topo.ExpandHostlist(orStr(os.Getenv("SLURM_JOB_NODELIST"), os.Getenv("SLURM_NODELIST")))
	if err != nil {
		return out
	}
	for _, h := range hosts {
		out[h] = true
	}
	return out
}

func drainTimeout(c *Config) time.Duration {
	if c.DrainTimeout <= 0 {
		return DefaultDrainTimeout
	}
	return c.DrainTimeout
}

// drainAsUser runs one record's last pass as uid:gid within timeout and says
// what it did. The bound is absolute: a drain whose process group does not
// exit after the kill (a child in uninterruptible I/O) is left behind.
func drainAsUser(c *Config, h checkpoint.DrainHandoff, uid, gid uint32, timeout time.Duration) (line string, ok bool) {
	bin := c.Trainrun
	if bin == "" {
		bin = DefaultTrainrun
	}
	// --key=value: a path cannot be read as a flag.
	args := []string{"ckpt", "drain", "--json", "--ckpt-dir=" + h.CkptDir, "--local=" + h.LocalDir, "--node=" + h.Node}
	args = append(args, h.RanksArgs()...) // only this node's ranks' markers (issue 12)
	byHand := fmt.Sprintf("drain it as the user with: %s %s", bin, strings.Join(args, " "))
	where := fmt.Sprintf("node %s: %s into %s", h.Node, h.LocalDir, h.CkptDir)
	cred, note := credential(uid, gid)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SLURM_JOB_ID=" + strconv.FormatUint(uint64(h.JobID), 10),
		"SLURMD_NODENAME=" + h.Node, "SLURM_RESTART_COUNT=" + strconv.Itoa(h.Restart)}
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		cmd.Env = append(cmd.Env, "USER="+u.Username, "LOGNAME="+u.Username, "HOME="+u.HomeDir)
	}
	stdout, stderr := &cappedBuffer{max: 1 << 20}, &cappedBuffer{max: 4 << 10}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, stdout, stderr // nil stdin: /dev/null
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second // a grandchild holding the pipes open
	t0 := time.Now()
	err := cmd.Start()
	if err == nil {
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait() }()
		select {
		case err = <-waited:
		case <-time.After(timeout + 5*time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			return fmt.Sprintf("%s: drain killed after %s (the plugin's drain bound) and still not gone 5 s later (uninterruptible I/O?); left behind; what it did not finish is left in %s: %s",
				where, drainTimeout(c), h.LocalDir, byHand), false
		}
	}
	if ctx.Err() != nil && cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever of the group is left
	}
	said := oneLine(stderr.String())
	if said != "" {
		said = " (trainrun said: " + said + ")"
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("%s: drain killed after %s (the plugin's drain bound)%s; what it did not finish is left in %s: %s",
			where, drainTimeout(c), said, h.LocalDir, byHand), false
	}
	var rep checkpoint.DrainReport
	jerr := json.Unmarshal(lastLine(stdout.Bytes()), &rep)
	if err != nil && jerr != nil {
		return fmt.Sprintf("%s: running %s as uid %d failed: %v%s%s; nothing drained: %s", where, bin, uid, err, note, said, byHand), false
	}
	if jerr != nil {
		return fmt.Sprintf("%s: %s printed no report (%v)%s; check the trainrun= argument in plugstack.conf names trainrun: %s", where, bin, jerr, said, byHand), false
	}
	var b strings.Builder
	b.WriteString(where + ": ")
	if len(rep.Drained) == 0 {
		b.WriteString("nothing left to drain")
	} else {
		var tags []string
		var total int64
		for _, d := range rep.Drained {
			tags = append(tags, d.Tag)
			total += d.Bytes
		}
		fmt.Fprintf(&b, "drained %s (%d bytes) in %.2f s", strings.Join(tags, ", "), total, time.Since(t0).Seconds())
	}
	sort.Strings(rep.Left)
	if rep.Error != "" || err != nil {
		msg := rep.Error
		if msg == "" {
			msg = err.Error()
		}
		fmt.Fprintf(&b, "; failed: %s; left in %s: %s; %s", msg, h.LocalDir, orStr(strings.Join(rep.Left, ", "), "nothing"), byHand)
		return b.String() + note, false
	}
	if len(rep.Left) > 0 {
		fmt.Fprintf(&b, "; left in %s: %s (no rank marked them done: saves cut short, never resumed from)", h.LocalDir, strings.Join(rep.Left, ", "))
	}
	return b.String() + note + said, true
}

// credential is uid:gid with the user's supplementary groups (os/user; the
// primary group alone when the user cannot be looked up, said in note).
func credential(uid, gid uint32) (*syscall.Credential, string) {
	c := &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{gid}}
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return c, fmt.Sprintf(" (uid %d has no passwd entry: ran with group %d only)", uid, gid)
	}
	ids, err := u.GroupIds()
	if err != nil {
		return c, fmt.Sprintf(" (groups of %s unknown: %v; ran with group %d only)", u.Username, err, gid)
	}
	c.Groups = c.Groups[:0]
	for _, s := range ids {
		if g, err := strconv.ParseUint(s, 10, 32); err == nil {
			c.Groups = append(c.Groups, uint32(g))
		}
	}
	return c, ""
}

func lastLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

// oneLineLog wraps logf (nil: no log) so that every line it gets reaches
// slurmd's log as one line: a control character in it (a newline in a file
// name the user chose, quoted in a drain's error) is written as an escape,
// so the user cannot forge a line of the log.
func oneLineLog(logf func(string)) func(string) {
	if logf == nil {
		return func(string) {}
	}
	return func(s string) { logf(escapeControls(s)) }
}

// escapeControls writes every control character of s but tab (C0, DEL, C1,
// and bytes that are not UTF-8) as a Go escape.
func escapeControls(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r != '\t' && (unicode.IsControl(r) || r == utf8.RuneError) }) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r != '\t' && unicode.IsControl(r):
			b.WriteString(strings.Trim(strconv.QuoteRune(r), "'"))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, "\n", "; ")
	if len(s) > 1000 {
		s = s[:1000] + "..."
	}
	return s
}
