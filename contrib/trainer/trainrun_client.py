"""trainrun_client: the trainer's side of trainrun's checkpoint handshake.

Dependency-free (Python standard library; uses torch.distributed when it is
importable and initialised). Copy this file next to your training script.

The handshake (PRODUCT.md, "The checkpoint handshake with the trainer"):

1. trainrun asks for a checkpoint with TRAINRUN_CKPT_SIGNAL (default SIGUSR2).
   Slurm's own SIGTERM (preemption, time limit) reaches every process of the
   step directly; it means the same thing. The handler only sets a flag:
   saving inside a signal handler can hang or corrupt (Lightning#21406).
2. Every rank calls should_save() once per step. The ranks agree with an
   all_reduce(MAX), so all of them checkpoint at the same step even when the
   signal reached them at different moments. Afterwards `stop` says whether
   the job must end (SIGTERM, or a request to stop) or training continues
   (`trainrun ckpt request --then continue`: trainrun writes "ID continue"
   into $TRAINRUN_JOB_DIR/launch/ckpt-request before signalling); call
   reset() after a checkpoint that continues.
3. Each rank saves into TRAINRUN_CKPT_DIR/<tag>/ (save_dir(tag)), then calls
   mark_done(tag, paths): its files are fsynced, then the empty file
   <tag>/.trainrun/done.<RANK> is created durably. The checkpoint is complete
   when all WORLD_SIZE markers exist; trainrun verifies and commits it.
   A save the disk refuses (ENOSPC, EDQUOT, EIO): save_failed(tag, exc,
   paths) removes the rank's partial files and creates
   <tag>/.trainrun/failed.<RANK>.<CAUSE>; trainrun discards the checkpoint,
   the previous latest stays, training goes on and the next save retries.
4. After a checkpoint asked for because the job must stop, the trainer exits
   0; trainrun decides whether the job is requeued.
5. On restart, resume_dir is the latest committed checkpoint (None on a
   first start).
6. Optionally, report_progress(step, tokens, metrics={"loss": ...}) after each
   optimizer step gives trainrun the observed step time and MFU (its metrics
   and `trainrun report`) and the trainer's numbers (`trainrun sweep status`).
   Every rank should call it: rank 0 writes $TRAINRUN_JOB_DIR/launch/progress,
   and on every rank the call is also the liveness signal of trainrun's hang
   detection (below).

Liveness (hang detection, `trainrun run --hang-timeout`): the shim passes
the write end of a pipe as file descriptor $TRAINRUN_HEARTBEAT_FD. Every
rank writes one line "STEP UNIX_TIME [save|train]" to it: "-1 T" when the
Checkpointer is made, "STEP T" on each report_progress call, "STEP T save"
from save_dir() until mark_done(). The write is non-blocking (a full pipe
drops the line) and costs a few microseconds; nothing goes to shared
storage. A rank armed this way that stops making progress is reported,
asked for a stack dump and restarted. Stack dumps: the Checkpointer
registers Python's faulthandler on $TRAINRUN_STACK_SIGNAL (SIGURG, whose
default action is to ignore it) so that all threads' Python stacks go to
the rank's stderr when trainrun asks.

Tiered checkpoints: when TRAINRUN_CKPT_LOCAL_DIR is set (trainrun run
--ckpt-local-dir), save_dir(tag) is TRAINRUN_CKPT_LOCAL_DIR/<tag>/ on node-local
storage and mark_done() marks done there; the trainer returns to training at
once, and trainrun drains each node's part into TRAINRUN_CKPT_DIR and commits
it when every node's drain finished. Resume still reads resume_dir, in the
durable store.

Data-loader workers: Slurm's SIGTERM reaches them too. Forked workers inherit
the flag-setting handler and survive; workers started another way may die of
it, and the next batch then raises. next_batch() turns such an error into a
stop request when a stop was signalled, so the loop saves the last complete
step instead of crashing. Call it before should_save() so the ranks agree
after every rank has tried to fetch its batch.

Other languages: install a handler for TRAINRUN_CKPT_SIGNAL and SIGTERM that
sets a flag; agree across ranks at a step boundary; write the checkpoint under
$TRAINRUN_CKPT_DIR/<tag>/ (or $TRAINRUN_CKPT_LOCAL_DIR/<tag>/ when set); fsync;
create <tag>/.trainrun/done.$RANK there (fsync it and the directory); exit 0. Resume from $TRAINRUN_RESUME_DIR when it is set.
"""

import errno
import faulthandler
import json
import math
import os
import signal
import stat
import sys
import time

__all__ = ["Checkpointer"]


def _signum(name):
    name = (name or "USR2").strip().upper()
    if name.isdigit():
        return int(name)
    if not name.startswith("SIG"):
        name = "SIG" + name
    return int(getattr(signal, name))


def _write_new(path, data, mode=0o644, fsync=False):
    """Write data to path atomically without following a symbolic link: a
    fresh temporary file (O_CREAT|O_EXCL|O_NOFOLLOW, so a link or file
    planted under its name is never opened through), fchmod to mode (not
    the umask's choice), write, optionally fsync, rename over path."""
    tmp = "%s.tmp%d" % (path, os.getpid())
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, mode)
    except FileExistsError:
        os.unlink(tmp)  # a stale temporary file, or a planted link: unlink removes the link itself
        fd = os.open(tmp, flags, mode)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if fsync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)


# The progress file is read with a 4 KiB limit: the metrics line must fit.
_MAX_METRICS_BYTES = 3900


def _metrics_line(metrics):
    """The progress file's second line for metrics (a dict of name to
    number), or "" without metrics. A name that is not a string or a value
    that is not a number raises ValueError naming it."""
    if not metrics:
        return ""
    if not isinstance(metrics, dict):
        raise ValueError("report_progress: metrics must be a dict of name to number, got %r" % type(metrics).__name__)
    out = {}
    for k, v in metrics.items():
        if not isinstance(k, str) or not k:
            raise ValueError("report_progress: metric name %r: want a non-empty string" % (k,))
        try:
            x = float(v)  # int, float, numpy and 0-d torch numbers
        except (TypeError, ValueError):
            raise ValueError("report_progress: metric %r = %r: want a number" % (k, v)) from None
        if isinstance(v, (str, bytes)):
            raise ValueError("report_progress: metric %r = %r: want a number, not a string" % (k, v))
        out[k] = x if math.isfinite(x) else ("nan" if x != x else ("inf" if x > 0 else "-inf"))
    line = json.dumps(out, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"
    if len(line.encode()) > _MAX_METRICS_BYTES:
        raise ValueError("report_progress: %d metrics take %d bytes, more than the %d the progress file holds; report fewer" % (
            len(out), len(line.encode()), _MAX_METRICS_BYTES))
    return line


def _fsync_path(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Checkpointer:
    """Signal flag, cross-rank agreement, durable done markers, resume path."""

    def __init__(self, env=None, install=True):
        env = os.environ if env is None else env
        self.rank = int(env.get("RANK", "0"))
        self.world_size = int(env.get("WORLD_SIZE", "1"))
        self.ckpt_dir = env.get("TRAINRUN_CKPT_DIR") or None
        self.local_dir = env.get("TRAINRUN_CKPT_LOCAL_DIR") or None
        self.resume_dir = env.get("TRAINRUN_RESUME_DIR") or None
        self.restart_count = int(env.get("TRAINRUN_RESTART_COUNT", "0") or 0)
        self.signum = _signum(env.get("TRAINRUN_CKPT_SIGNAL", "USR2"))
        self.job_dir = env.get("TRAINRUN_JOB_DIR") or None
        self.requested = False  # set by the handler; read at step boundaries only
        self.requested_by = None
        self.requested_at = None
        self.stop = False  # after should_save(): the job must end after this checkpoint
        self._term = False
        self._owner = os.getpid()
        self._progress_at = 0.0
        self.signals = {self.signum, signal.SIGTERM}
        self._hb_fd, self._hb_step = _heartbeat_fd(env), -1
        self._beat(-1)
        self._collective_log = env.get("TRAINRUN_COLLECTIVE_LOG") or None
        self.skip_steps = _parse_steps(env.get("TRAINRUN_SKIP_STEPS", ""))
        self._nonfinite = False  # the last metrics written held a NaN or an infinity
        self._stack_file = None
        if install and env.get("TRAINRUN_STACK_SIGNAL"):
            try:
                # A hang's evidence (trainrun's hangs/<n>/): with
                # TRAINRUN_STACK_FILE the dump goes to that node-local
                # file, which the shim copies into hangs/<n>/ and the log.
                target = sys.stderr
                if env.get("TRAINRUN_STACK_FILE"):
                    self._stack_file = target = open(env["TRAINRUN_STACK_FILE"], "a")
                faulthandler.register(_signum(env["TRAINRUN_STACK_SIGNAL"]), file=target, all_threads=True)
            except (AttributeError, ValueError, RuntimeError, OSError):
                pass  # no stack dumps; training is unaffected
        if install:
            for s in self.signals:
                signal.signal(s, self._handler)
                # SA_RESTART: without it a signal makes blocking calls inside
                # C++ extensions fail with EINTR (torch's TCPStore raises
                # "Interrupted system call").
                signal.siginterrupt(s, False)

    def should_skip(self, step):
        """True when trainrun asks the trainer to skip optimizer step `step`
        (the number it reports after it through report_progress): the steps
        of a loss spike trainrun rolled back over, from $TRAINRUN_SKIP_STEPS
        ("57-63,120-121": inclusive ranges and single steps). A skipped step
        still draws its batch and counts, so the data after it is the same as
        without the skip; it just makes no update. Every rank gets the same
        list."""
        return any(lo <= step <= hi for lo, hi in self.skip_steps)

    def record_collectives(self, dist=None):
        """Keep a record of this process's last collectives for trainrun's
        hang evidence: wraps torch.distributed's collective functions (the
        module's attributes, so calls through `dist.all_reduce(...)`) to note
        (sequence number, op, group, sizes) on entry and on return in a small
        ring of fixed slots mapped from $TRAINRUN_COLLECTIVE_LOG (node-local;
        set by trainrun's shim). On a hang the shim copies it into
        hangs/<n>/rank-R.collectives.txt, even from a stopped process, and
        trainrun names the rank that did not enter the collective the others
        wait in. Collectives issued from C++ (DDP's gradient all-reduce) are
        not seen. Without the variable, or called twice, it does nothing;
        it returns whether it records. Call it once after importing
        torch.distributed, before the first collective."""
        if not self._collective_log or _CollectiveRing.active is not None:
            return _CollectiveRing.active is not None
        if dist is None:
            dist = sys.modules.get("torch.distributed")
        if dist is None:
            return False
        try:
            ring = _CollectiveRing(self._collective_log, self.rank)
        except (OSError, ValueError) as e:
            print("trainrun_client: rank %d: no record of collectives (%s): %s" % (self.rank, self._collective_log, e), file=sys.stderr, flush=True)
            return False
        _CollectiveRing.active = ring
        for name in _COLLECTIVES:
            fn = getattr(dist, name, None)
            if fn is not None and not getattr(fn, "_trainrun_recorded", False):
                setattr(dist, name, _recorded(fn, name, ring, dist))
        return True

    def hold_signals(self):
        """Context manager that defers the signals during a section where an
        interrupted system call would fail (torch.distributed.init_process_group:
        poll() is never restarted). A signal that arrives meanwhile is
        delivered, and sets the flag, when the section ends."""
        return _Held(self.signals)

    def _handler(self, signum, frame):
        # A forked data-loader worker inherits this handler: it must neither
        # die nor act, so only the process that installed it sets the flag.
        if os.getpid() != self._owner:
            return
        if signum == signal.SIGTERM:
            self._term = True
        if not self.requested:
            self.requested, self.requested_by, self.requested_at = True, signum, time.time()

    def request(self, stop=True):
        """Ask for a checkpoint from the program itself."""
        self.requested = True
        self._term = self._term or stop

    def reset(self):
        """After a checkpoint that continues training: wait for the next request."""
        self.requested, self.requested_by, self.requested_at, self.stop = False, None, None, False

    def _local_code(self):
        """0: nothing asked; 1: checkpoint and continue; 2: checkpoint and stop."""
        if not self.requested:
            return 0
        if self._term:
            return 2
        then = "stop"
        if self.job_dir:
            try:
                with open(os.path.join(self.job_dir, "launch", "ckpt-request")) as f:
                    then = (f.read().split() + ["", "stop"])[1] or "stop"
            except OSError:
                pass
        return 1 if then == "continue" else 2

    def next_batch(self, iterator):
        """next(iterator), or None when the loader broke after a stop signal
        (its workers died of Slurm's SIGTERM). Raises StopIteration at the end
        of the data, and re-raises any error that is not explained by a stop."""
        try:
            return next(iterator)
        except StopIteration:
            raise
        except Exception:
            if self.requested:
                return None
            time.sleep(0.2)  # a SIGTERM that killed the workers may still be on its way to us
            if self.requested:
                return None
            raise

    def should_save(self):
        """True on every rank when any rank was asked for a checkpoint (a
        collective: every rank calls it at the same step). Sets self.stop:
        True when the job must end after this checkpoint."""
        code = self._local_code()
        dist = _dist()
        if dist is not None:
            import torch
            t = torch.tensor([code], dtype=torch.int32)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            code = int(t.item())
        if code and not self.requested:
            self.requested = True
        self.stop = code == 2
        return code > 0

    def should_stop(self):
        """should_save() for trainers that always stop after a requested checkpoint."""
        return self.should_save()

    def save_dir(self, tag):
        """Where this rank saves checkpoint tag, created: the node-local
        TRAINRUN_CKPT_LOCAL_DIR/<tag>/ when set (trainrun drains it into the
        store), else TRAINRUN_CKPT_DIR/<tag>/."""
        root = self.local_dir or self.ckpt_dir
        if not root:
            raise RuntimeError("TRAINRUN_CKPT_DIR is not set: run under 'trainrun run' or set it")
        if not tag or "/" in tag or "\0" in tag or tag.startswith("."):
            # "" would name the store's root itself, "." and ".." worse.
            raise ValueError("checkpoint tag %r: one non-empty path component not starting with '.', e.g. step-1200" % tag)
        d = os.path.join(root, tag)
        self._beat(self._hb_step, "save")
        os.makedirs(d, exist_ok=True)
        return d

    def mark_done(self, tag, paths=()):
        """Make this rank's files durable, then create <tag>/.trainrun/done.<RANK>."""
        d = self.save_dir(tag)
        dirs = {d}
        for p in paths:
            _fsync_path(p)
            dirs.add(os.path.dirname(os.path.abspath(p)))
        for x in dirs:
            _fsync_path(x)
        meta = os.path.join(d, ".trainrun")
        os.makedirs(meta, exist_ok=True)
        marker = os.path.join(meta, "done.%d" % self.rank)
        _write_new(marker, b"", fsync=True)
        _fsync_path(meta)
        _fsync_path(d)
        self._beat(self._hb_step)
        return marker

    # errno -> the cause trainrun reports for a save the disk refused
    DISK_FAULTS = {errno.ENOSPC: "disk-full", errno.EDQUOT: "quota", errno.EIO: "io-error"}

    def save_failed(self, tag, exc, paths=()):
        """A save of tag failed with exc. When the disk refused it (ENOSPC,
        EDQUOT, EIO), remove this rank's partial files (paths, and their
        .tmp twins), create <tag>/.trainrun/failed.<RANK>.<CAUSE> (an empty
        file: a full disk still has inodes) and return True: keep training;
        trainrun discards the checkpoint once every rank answered, keeps the
        previous latest, and the next save retries. Any other error: False
        (the caller re-raises it).

            try:
                save(tag)
            except OSError as e:
                if not ck.save_failed(tag, e, [path]):
                    raise
        """
        cause = self.DISK_FAULTS.get(getattr(exc, "errno", None))
        if cause is None:
            return False
        for p in paths:
            for q in (p, p + ".tmp"):
                try:
                    os.remove(q)
                except OSError:
                    pass
        self._beat(self._hb_step)  # out of the save phase: the rank trains on
        root = self.local_dir or self.ckpt_dir
        if not root:
            return False  # no store to mark (save_dir would have refused): the caller re-raises
        meta = os.path.join(root, tag, ".trainrun")
        try:
            os.makedirs(meta, exist_ok=True)
            _write_new(os.path.join(meta, "failed.%d.%s" % (self.rank, cause)), b"")
        except OSError as e2:
            print("trainrun_client: rank %d: cannot mark the failed save of %s: %s" % (self.rank, tag, e2), file=sys.stderr, flush=True)
        print("trainrun_client: rank %d: save of %s failed (%s): %s; the previous checkpoint stays, training goes on" % (
            self.rank, tag, cause, exc), file=sys.stderr, flush=True)
        return True

    def report_progress(self, step, tokens=0, min_interval=1.0, metrics=None):
        """Tell trainrun the optimizer step just finished, for its observed
        step time, MFU and stuck-job metrics, and (metrics) the trainer's own
        numbers, e.g. {"loss": 2.31}: `trainrun sweep status` shows the last
        ones and picks the best trial by one of them. Only rank 0 writes (the
        others return False at once); at most once per min_interval seconds,
        so report the final step with min_interval=0.

        Protocol: $TRAINRUN_JOB_DIR/launch/progress holds the line
        "STEP TOKENS UNIX_TIME", replaced atomically (temporary file, rename);
        with metrics, a second line holds them as one JSON object of name to
        number (NaN and infinities as the strings "nan", "inf", "-inf").
        Readers of the first line alone see what they always saw. TOKENS
        counts tokens trained since the run's first start (0 if unknown). Not
        fsynced: it is a live signal, not state.

        On every rank the call is also a heartbeat to its shim (see the
        module's "Liveness"); it never blocks."""
        extra = _metrics_line(metrics)  # bad metrics fail on every rank, not only rank 0
        self._beat(step)
        if self.rank != 0 or not self.job_dir:
            return False
        now = time.time()
        # The first NaN or infinity after finite values is written at once,
        # past min_interval: trainrun judges the loss (--loss-spike), and the
        # step it first sees bad bounds the steps a rollback skips.
        nonfinite = bool(metrics) and any(isinstance(v, float) and not math.isfinite(v) for v in metrics.values())
        if now - self._progress_at < min_interval and not (nonfinite and not self._nonfinite):
            return False
        self._progress_at, self._nonfinite = now, nonfinite
        path = os.path.join(self.job_dir, "launch", "progress")
        try:
            _write_new(path, ("%d %d %.3f\n" % (int(step), int(tokens), now) + extra).encode())
        except OSError:
            return False
        return True

    def complete(self, tag):
        """True when every rank's done marker of tag exists in the store
        (with TRAINRUN_CKPT_LOCAL_DIR: once trainrun drained and committed
        it)."""
        meta = os.path.join(self.ckpt_dir or "", tag, ".trainrun")
        return all(os.path.exists(os.path.join(meta, "done.%d" % r)) for r in range(self.world_size))


    def _beat(self, step, phase=None):
        """One heartbeat line to the shim: non-blocking, dropped when the
        pipe is full, silent when there is no pipe (or in a forked child)."""
        if self._hb_fd is None or os.getpid() != self._owner:
            return
        self._hb_step = int(step)
        line = "%d %.3f\n" % (self._hb_step, time.time()) if phase is None else "%d %.3f %s\n" % (self._hb_step, time.time(), phase)
        try:
            os.write(self._hb_fd, line.encode())
        except BlockingIOError:
            pass  # the shim is behind: drop this one, the next says more
        except OSError:
            self._hb_fd = None  # the shim is gone: stop trying


def load_checkpoint(path):
    """torch.load of a checkpoint file as data only. A checkpoint is a
    pickle, and one someone else wrote (--init-from, branches --from, a
    shared store) may name any code to run on a full unpickle. torch >= 2
    has weights_only=True for this; torch 1.13's (Debian 12's) refuses even
    the floats every optimizer state holds, so there the pickle's globals
    are checked against what state dicts need instead."""
    import torch
    if int(torch.__version__.split(".")[0]) >= 2:
        return torch.load(path, map_location="cpu", weights_only=True)
    # torch 1.x's load replaces a pickle_module it is given by pickle itself
    # (serialization.py: "else: pickle_module = pickle"), so its zip reader
    # is called here with the restricted one: the format torch.save writes
    # since 1.6; an older file is refused.
    ser = torch.serialization
    with open(path, "rb") as f:
        if not ser._is_zipfile(f):
            raise ValueError("%s: not torch.save's zip format; refused rather than loaded in full" % path)
        with ser._open_zipfile_reader(f) as z:
            return ser._load(z, "cpu", _StatePickle(torch), encoding="utf-8")


class _StatePickle:
    """A pickle module for torch.load whose Unpickler admits only the
    globals a state dict of tensors, numbers, strings, lists and dicts
    names (the pattern of Python's pickle docs, "Restricting Globals")."""

    def __init__(self, torch):
        import pickle

        allowed = {("collections", "OrderedDict"), ("torch", "Size"),
                   ("torch._utils", "_rebuild_tensor_v2"), ("torch._utils", "_rebuild_parameter"),
                   ("torch._utils", "_rebuild_parameter_with_state"), ("torch._tensor", "_rebuild_from_type_v2"),
                   ("torch", "Tensor"), ("torch.nn.parameter", "Parameter")}

        class Unpickler(pickle.Unpickler):
            def find_class(self, module, name):
                if (module, name) in allowed or module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
                    return super().find_class(module, name)
                raise pickle.UnpicklingError("checkpoint names %s.%s: not a tensor state, refused (it could run code)" % (module, name))

        self.Unpickler = Unpickler
        self.load = lambda f, **kw: Unpickler(f, **kw).load()
        self.__name__ = "trainrun_state_pickle"


def _heartbeat_fd(env):
    """The heartbeat pipe from TRAINRUN_HEARTBEAT_FD, made non-blocking; None
    unless it names an open pipe (a child process that inherited the variable
    but not the descriptor must not write into whatever file has that number).
    The variable is removed from os.environ so that children do not inherit it."""
    v = env.get("TRAINRUN_HEARTBEAT_FD")
    if env is os.environ:
        os.environ.pop("TRAINRUN_HEARTBEAT_FD", None)
    try:
        fd = int(v)
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return None
        os.set_blocking(fd, False)
        os.set_inheritable(fd, False)  # close-on-exec: a program the trainer runs cannot write beats (review t4, F10)
        return fd
    except (TypeError, ValueError, OSError):
        return None


def _parse_steps(v):
    """TRAINRUN_SKIP_STEPS as (lo, hi) pairs; a malformed part is an error
    (training on steps it was told to skip would poison it again)."""
    out = []
    for part in (v or "").split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if hi else a
        except ValueError:
            raise ValueError("TRAINRUN_SKIP_STEPS=%r: %r is not a step or a range LO-HI" % (v, part)) from None
        if a < 1 or b < a:
            raise ValueError("TRAINRUN_SKIP_STEPS=%r: %r is not a step (1, 2, ...) or a range LO-HI with LO <= HI" % (v, part))
        out.append((a, b))
    return out


# The collectives record_collectives wraps.
_COLLECTIVES = ("all_reduce", "all_gather", "all_gather_object", "all_gather_into_tensor", "broadcast",
                "broadcast_object_list", "barrier", "reduce", "reduce_scatter", "reduce_scatter_tensor",
                "all_to_all", "all_to_all_single", "gather", "gather_object", "scatter", "send", "recv",
                "isend", "irecv", "monitored_barrier")


class _CollectiveRing:
    """Fixed slots in a file mapped in memory (trainrun's
    wrapper/internal/collrec reads it): slot 0 the header, the others one
    collective each, "SEQ GSEQ STATE OP GROUP UNIX_TIME DETAIL", space-padded
    and newline-ended, rewritten in place from enter to done. Writing a slot
    is a memory copy: no system call per collective."""

    SLOT, SLOTS = 160, 256
    active = None

    def __init__(self, path, rank):
        import mmap
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            os.ftruncate(fd, self.SLOT * (self.SLOTS + 1))
            self.mm = mmap.mmap(fd, self.SLOT * (self.SLOTS + 1))
        finally:
            os.close(fd)
        self.owner, self.seq, self.gseq = os.getpid(), 0, {}
        self.forked = False  # a forked child (a data-loader worker) records nothing: the map is the parent's
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._in_child)
        import threading
        self.lock = threading.Lock()
        self._put(0, "trainrun-collectives 1 pid=%d rank=%d slots=%d" % (self.owner, rank, self.SLOTS))

    def _in_child(self):
        self.forked = True

    def _put(self, slot, text):
        b = text.encode("utf-8", "replace")[:self.SLOT - 1]
        off = slot * self.SLOT
        self.mm[off:off + self.SLOT] = b + b" " * (self.SLOT - 1 - len(b)) + b"\n"

    def enter(self, op, group, detail):
        with self.lock:
            self.seq += 1
            g = self.gseq[group] = self.gseq.get(group, 0) + 1
            rec = [self.seq, g, op, group, detail]
            self._write(rec, "enter")
            return rec

    def _write(self, rec, state):
        seq, g, op, group, detail = rec
        self._put(1 + (seq - 1) % self.SLOTS, "%d %d %s %s %s %.3f %s" % (seq, g, state, op, group, time.time(), detail or "-"))

    def leave(self, rec, state):
        with self.lock:
            self._write(rec, state)


def _group_key(dist, group):
    """A key equal on every member of the group: world:N, or gCRC:N over the
    sorted member ranks."""
    world = getattr(getattr(dist, "group", None), "WORLD", None)
    if group is None or group is world:
        return "world:%d" % dist.get_world_size()
    try:
        ranks = sorted(dist.distributed_c10d._pg_group_ranks[group].keys())
    except (AttributeError, KeyError, TypeError):
        return "g?:%d" % dist.get_world_size(group)
    import zlib
    return "g%08x:%d" % (zlib.crc32(",".join(map(str, ranks)).encode()), len(ranks))


def _describe(a):
    """Sizes of a collective's argument: a tensor's shape and dtype, a list's length."""
    shape = getattr(a, "shape", None)
    if shape is not None:
        return "%s %s" % (list(shape), str(getattr(a, "dtype", "")).replace("torch.", ""))
    if isinstance(a, (list, tuple)):
        return "list[%d]" % len(a)
    return None


def _recorded(fn, name, ring, dist):
    pg_type = getattr(dist, "ProcessGroup", ())

    def wrapper(*args, **kwargs):
        if ring.forked:
            return fn(*args, **kwargs)
        group = kwargs.get("group")
        parts = []
        for a in list(args) + [v for k, v in kwargs.items() if k != "group"]:
            if group is None and pg_type and isinstance(a, pg_type):
                group = a
                continue
            d = _describe(a)
            if d:
                parts.append(d)
            elif _is_reduce_op(a):
                parts.append(_op_name(dist, a))
        try:
            key = _group_key(dist, group)
        except Exception:  # noqa: BLE001 (never fail the collective for its record)
            key = "g?"
        rec = ring.enter(name, key, " ".join(parts)[:80])
        try:
            out = fn(*args, **kwargs)
        except BaseException:
            ring.leave(rec, "failed")
            raise
        ring.leave(rec, "issued" if kwargs.get("async_op") or name in ("isend", "irecv") else "done")
        return out

    wrapper._trainrun_recorded = True
    wrapper.__name__, wrapper.__doc__ = getattr(fn, "__name__", name), getattr(fn, "__doc__", None)
    return wrapper


def _op_name(dist, a):
    """A ReduceOp's name (torch 1.13's ReduceOp objects have none of their own)."""
    name = getattr(a, "name", None)
    if isinstance(name, str):
        return name
    for n in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"):
        try:
            if getattr(dist.ReduceOp, n, None) == a:
                return n
        except Exception:  # noqa: BLE001 (a type that does not compare)
            pass
    return type(a).__name__


def _is_reduce_op(a):
    """A ReduceOp argument (its name goes into the record)."""
    return type(a).__name__ in ("ReduceOp", "RedOpType")


class _Held:
    def __init__(self, signals):
        self.signals = signals

    def __enter__(self):
        self.old = signal.pthread_sigmask(signal.SIG_BLOCK, self.signals)
        return self

    def __exit__(self, *exc):
        signal.pthread_sigmask(signal.SIG_SETMASK, self.old)
        return False


def _dist():
    # Only a program that already uses torch.distributed pays for it: the
    # client never imports torch itself.
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    if dist.is_available() and dist.is_initialized():
        return dist
    return None
