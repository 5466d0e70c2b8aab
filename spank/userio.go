package spank

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/trainrun/trainrun/plan/policy"
)

// The rule (spank/doc.go): in root context trainrun opens nothing a user can
// name or create with root's credentials. This file is how.
//
//   - A file the user names (--train-model / TRAINRUN_MODEL's config.json) is
//     read by ReadUserFile: on a fresh OS thread that takes the job's
//     uid, gid and groups for file access (setgroups, setfsgid, setfsuid,
//     per thread) and is thrown away afterwards, never handed back to the
//     Go scheduler; opened O_NOFOLLOW|O_NONBLOCK (a FIFO cannot block the
//     step), refused unless a regular file, read through MaxUserFileBytes.
//     What it returns, errors included, is what the user could read anyway.
//   - The checkpoint store (TRAINRUN_RESUME_DIR: .trainrun/latest, the
//     listing, manifests) is read by a separate process, `trainrun
//     __resume-dir DIR` run as the job's user with a minimal environment,
//     killed at ResumeTimeout (ResumeDirAs). Nothing of it runs in
//     slurmstepd, so a FIFO, a huge manifest or a symlink in the store
//     costs the user's own process, never root's, and the step goes on
//     without TRAINRUN_RESUME_DIR.
//   - Go code never runs in a process slurmstepd forks: the helper is
//     started by os/exec (fork and exec with no Go in between).

// Cred is the job's user as slurmstepd knows it (S_JOB_UID, S_JOB_GID); the
// supplementary groups are the user's (os/user), else the primary group.
type Cred struct {
	UID, GID uint32
	Groups   []uint32
}

// JobCred is the credentials of uid:gid with the user's groups.
func JobCred(uid, gid uint32) *Cred {
	sc, _ := credential(uid, gid)
	return &Cred{UID: uid, GID: gid, Groups: sc.Groups}
}

// MaxUserFileBytes bounds a user-named file read in root context.
const MaxUserFileBytes = 1 << 20

// DefaultResumeTimeout bounds the TRAINRUN_RESUME_DIR helper.
const DefaultResumeTimeout = 10 * time.Second

// ResumeHelperArg is the hidden trainrun subcommand ResumeDirAs runs.
const ResumeHelperArg = "__resume-dir"

// ReadUserFile reads a regular file of at most limit bytes with as's file
// credentials (nil, or a process that is not root: its own). The open
// follows no symbolic link: a link is resolved with the user's
// credentials first, and the file it names is opened O_NOFOLLOW.
func ReadUserFile(as *Cred, path string, limit int64) ([]byte, error) {
	var data []byte
	err := asUser(as, func() error {
		var err error
		data, err = readRegular(path, limit)
		return err
	})
	return data, err
}

// asUser runs fn with as's file-system credentials on a thread of its own.
func asUser(as *Cred, fn func() error) error {
	if as == nil || os.Geteuid() != 0 || as.UID == 0 {
		return fn()
	}
	if as.UID == UnknownID || as.GID == UnknownID {
		//lint:ignore ST1005 "Slurm" is a proper noun, and the message is read by users as it is
		return errors.New("Slurm gave no uid/gid for the job, so no file of the user's is read")
	}
	done := make(chan error, 1)
	go func() {
		// Never unlocked: when this goroutine returns, the runtime ends
		// the thread with it, credentials and all.
		runtime.LockOSThread()
		if err := dropFS(as); err != nil {
			done <- err
			return
		}
		done <- fn()
	}()
	return <-done
}

// dropFS gives the calling thread as's groups, fsgid and fsuid. The raw
// system calls act on this thread only (glibc's and Go's setgroups would
// change every thread of slurmstepd).
func dropFS(as *Cred) error {
	groups := as.Groups
	if len(groups) == 0 {
		groups = []uint32{as.GID}
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(unsafe.Pointer(&groups[0])), 0); e != 0 {
		return fmt.Errorf("setgroups for uid %d: %v", as.UID, e)
	}
	unix.RawSyscall(unix.SYS_SETFSGID, uintptr(as.GID), 0, 0)
	unix.RawSyscall(unix.SYS_SETFSUID, uintptr(as.UID), 0, 0)
	// setfs[ug]id return the previous id and no error: read them back.
	g, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0)
	u, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0)
	if uint32(u) != as.UID || uint32(g) != as.GID {
		return fmt.Errorf("cannot take uid %d gid %d for file access (have %d:%d)", as.UID, as.GID, uint32(u), uint32(g))
	}
	return nil
}

// readRegular opens path O_NOFOLLOW|O_NONBLOCK (after resolving links with
// the caller's credentials), refuses anything but a regular file and reads at
// most limit bytes. Errors name the path and never quote its contents.
func readRegular(path string, limit int64) ([]byte, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, unwrapPath(err))
	}
	fd, err := unix.Open(real, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), real)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is a %s, not a regular file", path, fileKind(fi))
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// resumeReply is what the helper prints: ResumeDir's three results.
type resumeReply struct {
	Value string   `json:"value"`
	OK    bool     `json:"ok"`
	Notes []string `json:"notes,omitempty"`
}

// ResumeHelperMain is `trainrun __resume-dir DIR`: ResumeDir(DIR) as JSON on
// stdout. It runs as the job's user (ResumeDirAs starts it).
func ResumeHelperMain(args []string, stdout io.Writer) int {
	if len(args) != 1 || !filepath.IsAbs(args[0]) {
		fmt.Fprintln(os.Stderr, "usage: trainrun "+ResumeHelperArg+" /ABSOLUTE/STORE (run by the SPANK plugin)")
		return 2
	}
	v, ok, notes := ResumeDir(args[0])
	if err := json.NewEncoder(stdout).Encode(resumeReply{Value: v, OK: ok, Notes: notes}); err != nil {
		return 1
	}
	return 0
}

// ResumeDirAs is ResumeDir(dir) computed by `bin __resume-dir dir` running as
// as, within timeout (absolute: the helper's process group is killed at the
// deadline, and a helper stuck past it in uninterruptible I/O is left to
// exit on its own while the step goes on). Its reply is checked: the value
// is "" or a directory under dir; notes are capped in count and length.
func ResumeDirAs(bin string, as *Cred, dir string, timeout time.Duration) (string, bool, []string) {
	fail := func(why string) (string, bool, []string) {
		return "", false, []string{fmt.Sprintf("TRAINRUN_RESUME_DIR not set: the checkpoint store %s could not be read as the job's user (%s); 'trainrun ckpt latest --ckpt-dir %s' shows what a restart would resume from", dir, why, dir)}
	}
	if as == nil || as.UID == UnknownID || as.GID == UnknownID {
		return fail("Slurm gave no uid/gid for the job")
	}
	if timeout <= 0 {
		timeout = DefaultResumeTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, ResumeHelperArg, dir)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C", "GOMAXPROCS=2", "GOMEMLIMIT=256MiB"}
	stdout, stderr := &cappedBuffer{max: 64 << 10}, &cappedBuffer{max: 2 << 10}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, stdout, stderr
	groups := as.Groups
	if len(groups) == 0 {
		groups = []uint32{as.GID}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: &syscall.Credential{Uid: as.UID, Gid: as.GID, Groups: groups}, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return fail(fmt.Sprintf("cannot run %s: %v; check plugstack.conf's trainrun= argument", bin, err))
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var err error
	select {
	case err = <-waited:
	case <-time.After(timeout + 2*time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return fail(fmt.Sprintf("the helper did not exit %s after it was killed", 2*time.Second))
	}
	if ctx.Err() != nil {
		return fail(fmt.Sprintf("no answer within %s: a FIFO or a hung file system in the store?", timeout))
	}
	var rep resumeReply
	if jerr := json.Unmarshal(lastLine(stdout.Bytes()), &rep); jerr != nil {
		said := oneLine(stderr.String())
		return fail(fmt.Sprintf("%s %s gave no answer (%v; %v): check plugstack.conf's trainrun= argument names trainrun %s", bin, ResumeHelperArg, err, said, "0.1 or later"))
	}
	if rep.Value != "" {
		clean := filepath.Clean(rep.Value)
		if clean != rep.Value || !strings.HasPrefix(clean, filepath.Clean(dir)+"/") || strings.ContainsAny(clean, "\x00\n") {
			return fail(fmt.Sprintf("the helper answered %s, which is not a directory of the store", strconv.QuoteToASCII(limitStr(rep.Value, 200))))
		}
	}
	var notes []string
	for i, n := range rep.Notes {
		if i == 8 {
			notes = append(notes, fmt.Sprintf("(%d more notes)", len(rep.Notes)-8))
			break
		}
		notes = append(notes, limitStr(oneLine(n), 500))
	}
	return rep.Value, rep.OK, notes
}

func limitStr(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// UserName is the login name of uid from the passwd database (getpwuid),
// for %u: never SLURM_JOB_USER, which the job's environment can set. ""
// when unknown (a CkptDir with %u is then refused).
func UserName(uid uint32) string {
	if uid == UnknownID {
		return ""
	}
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return ""
	}
	return u.Username
}

// CheckCacheDir refuses a cache= directory root does not own, or one others
// may write: root writes and trusts files in it (the topology cache, per-job
// directories). A missing one is fine (PrepareJobDir makes it 0755).
func CheckCacheDir(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cache directory %s: %w", dir, err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("cache directory %s is a %s; remove it or fix plugstack.conf's cache= argument", dir, fileKind(fi))
	case st != nil && st.Uid != uint32(os.Geteuid()):
		return fmt.Errorf("cache directory %s is owned by uid %d, not %d; chown it (or remove it: the plugin makes it)", dir, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("cache directory %s has mode %04o: others can write it; chmod go-w %s", dir, fi.Mode().Perm(), dir)
	}
	return nil
}

// StepPartition is the partition whose policy a step gets: the one the job
// prolog recorded (JobPartition); without a record, policy.Unrecorded (the
// strictest settings), never the job's environment, which its user writes
// (review t4, F5: a user who made the record impossible to write got the
// policy of the partition they named). note, when not "", is for the log.
func StepPartition(cacheDir string, jobID uint32, envPart string) (part, note string) {
	if p, ok := JobPartition(cacheDir, jobID); ok {
		if p != envPart {
			note = fmt.Sprintf("the job's environment says partition %q, Slurm's prolog %q: the policy of %q applies", envPart, p, p)
		}
		return p, note
	}
	return policy.Unrecorded, fmt.Sprintf("no partition recorded by the job prolog in %s; the strictest policy applies (site-wide, with only the user overrides every partition allows), not that of the job environment's partition %q", cacheDir, envPart)
}

// JobPartition is the job's partition as the job prolog recorded it from
// slurmd's environment (spank_trainrun.c, slurm_spank_job_prolog) in
// JobDir/partition: root's file in root's directory, never the job's
// environment. ok is false without a usable record.
func JobPartition(cacheDir string, jobID uint32) (string, bool) {
	dir := JobDir(cacheDir, jobID)
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
		return "", false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != uint32(os.Geteuid()) {
		return "", false
	}
	p := filepath.Join(dir, "partition")
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
		return "", false
	}
	data, err := readRegular(p, 256)
	if err != nil {
		return "", false
	}
	part := strings.TrimSpace(string(data))
	if part == "" || strings.ContainsAny(part, "/\x00\n,") {
		return "", false
	}
	return part, true
}
