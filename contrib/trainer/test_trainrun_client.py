"""Tests of trainrun_client (stdlib unittest; no torch needed).

    python3 -m unittest discover -s contrib/trainer -p 'test_*.py'
"""

import errno
import json
import os
import signal
import tempfile
import time
import unittest

import trainrun_client


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        os.makedirs(os.path.join(self.dir, "job", "launch"))
        self.env = {"RANK": "1", "WORLD_SIZE": "2", "TRAINRUN_CKPT_DIR": os.path.join(self.dir, "ck"),
                    "TRAINRUN_RESUME_DIR": "", "TRAINRUN_CKPT_SIGNAL": "USR2", "TRAINRUN_JOB_DIR": os.path.join(self.dir, "job")}
        self.old = {s: signal.getsignal(s) for s in (signal.SIGUSR2, signal.SIGTERM)}

    def tearDown(self):
        for s, h in self.old.items():
            signal.signal(s, h)

    def request_file(self, text):
        with open(os.path.join(self.dir, "job", "launch", "ckpt-request"), "w") as f:
            f.write(text)

    def test_save_failed_disk_full(self):
        ck = trainrun_client.Checkpointer(self.env)
        d = ck.save_dir("step-20")
        part = os.path.join(d, "rank-1.pt")
        with open(part + ".tmp", "wb") as f:
            f.write(b"half a checkpoint")
        self.assertTrue(ck.save_failed("step-20", OSError(errno.ENOSPC, "No space left on device"), [part]))
        self.assertFalse(os.path.exists(part + ".tmp"), "the partial file is what filled the disk")
        self.assertTrue(os.path.exists(os.path.join(d, ".trainrun", "failed.1.disk-full")))
        self.assertFalse(os.path.exists(os.path.join(d, ".trainrun", "done.1")))
        self.assertTrue(ck.save_failed("step-30", OSError(errno.EDQUOT, "quota"), []))
        self.assertTrue(os.path.exists(os.path.join(ck.ckpt_dir, "step-30", ".trainrun", "failed.1.quota")))
        # Anything else is the trainer's to raise.
        self.assertFalse(ck.save_failed("step-40", OSError(errno.EACCES, "denied"), []))
        self.assertFalse(ck.save_failed("step-40", ValueError("bug"), []))
        self.assertFalse(os.path.exists(os.path.join(ck.ckpt_dir, "step-40", ".trainrun")))

    def test_no_signal_no_save(self):
        ck = trainrun_client.Checkpointer(self.env)
        self.assertFalse(ck.should_save())
        self.assertIsNone(ck.resume_dir)

    def test_ckpt_signal_stop(self):
        ck = trainrun_client.Checkpointer(self.env)
        self.request_file("1 stop\n")
        os.kill(os.getpid(), signal.SIGUSR2)
        self.assertTrue(ck.should_save())
        self.assertTrue(ck.stop)

    def test_ckpt_signal_continue(self):
        ck = trainrun_client.Checkpointer(self.env)
        self.request_file("3 continue\n")
        os.kill(os.getpid(), signal.SIGUSR2)
        self.assertTrue(ck.should_save())
        self.assertFalse(ck.stop)
        ck.reset()
        self.assertFalse(ck.should_save())

    def test_sigterm_always_stops(self):
        ck = trainrun_client.Checkpointer(self.env)
        self.request_file("3 continue\n")
        os.kill(os.getpid(), signal.SIGTERM)
        self.assertTrue(ck.should_save())
        self.assertTrue(ck.stop)

    def test_signal_held_during_section(self):
        ck = trainrun_client.Checkpointer(self.env)
        with ck.hold_signals():
            os.kill(os.getpid(), signal.SIGUSR2)
            self.assertFalse(ck.requested)
        self.assertTrue(ck.requested)

    def test_mark_done(self):
        ck = trainrun_client.Checkpointer(self.env)
        d = ck.save_dir("step-10")
        p = os.path.join(d, "rank-1.pt")
        with open(p, "wb") as f:
            f.write(b"w")
        marker = ck.mark_done("step-10", [p])
        self.assertEqual(marker, os.path.join(d, ".trainrun", "done.1"))
        self.assertTrue(os.path.exists(marker))
        self.assertFalse(ck.complete("step-10"))  # rank 0's marker is missing
        with self.assertRaises(ValueError):
            ck.save_dir("../x")

    def test_tiered_saves_and_marks_locally(self):
        self.env["TRAINRUN_CKPT_LOCAL_DIR"] = os.path.join(self.dir, "shm")
        ck = trainrun_client.Checkpointer(self.env)
        d = ck.save_dir("step-20")
        self.assertEqual(d, os.path.join(self.dir, "shm", "step-20"))
        p = os.path.join(d, "rank-1.pt")
        with open(p, "wb") as f:
            f.write(b"w")
        marker = ck.mark_done("step-20", [p])
        # The drain (checkpoint.Drain) reads the markers in the local copy.
        self.assertEqual(marker, os.path.join(self.dir, "shm", "step-20", ".trainrun", "done.1"))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "ck", "step-20")))

    def test_loader_error_after_stop_is_a_stop(self):
        ck = trainrun_client.Checkpointer(self.env)

        def broken():
            raise RuntimeError("DataLoader worker (pid 42) is killed by signal: Terminated")
            yield

        os.kill(os.getpid(), signal.SIGTERM)
        self.assertIsNone(ck.next_batch(broken()))
        ck2 = trainrun_client.Checkpointer(self.env)
        ck2.reset()
        with self.assertRaises(RuntimeError):
            ck2.next_batch(broken())


    def test_report_progress_rank0_only_atomic(self):
        env = dict(self.env, RANK="0")
        ck = trainrun_client.Checkpointer(env, install=False)
        self.assertTrue(ck.report_progress(12, tokens=49152))
        path = os.path.join(self.dir, "job", "launch", "progress")
        with open(path) as f:
            step, tokens, at = f.read().split()
        self.assertEqual((step, tokens), ("12", "49152"))
        self.assertGreater(float(at), 1.7e9)
        self.assertFalse(ck.report_progress(13))  # within min_interval
        self.assertTrue(ck.report_progress(14, min_interval=0))
        with open(path) as f:
            self.assertEqual(f.read().split()[0], "14")
        self.assertEqual(os.listdir(os.path.dirname(path)), ["progress"])  # no temporary left
        other = trainrun_client.Checkpointer(self.env, install=False)  # rank 1
        self.assertFalse(other.report_progress(15))

    def test_report_progress_metrics_second_line(self):
        env = dict(self.env, RANK="0")
        ck = trainrun_client.Checkpointer(env, install=False)
        self.assertTrue(ck.report_progress(7, tokens=10, metrics={"loss": 0.25, "acc": 1, "div": float("nan"), "up": float("inf")}))
        path = os.path.join(self.dir, "job", "launch", "progress")
        with open(path) as f:
            lines = f.read().split("\n")
        self.assertEqual(lines[0].split()[:2], ["7", "10"])  # the first line is what it always was
        self.assertEqual(json.loads(lines[1]), {"acc": 1.0, "div": "nan", "loss": 0.25, "up": "inf"})
        self.assertEqual(lines[2], "")
        # without metrics the file is the old single line
        self.assertTrue(ck.report_progress(8, min_interval=0))
        with open(path) as f:
            self.assertEqual(len(f.read().splitlines()), 1)

    def test_report_progress_bad_metrics(self):
        ck = trainrun_client.Checkpointer(dict(self.env, RANK="0"), install=False)
        for bad, word in (([1], "dict"), ({"loss": "low"}, "'loss'"), ({3: 1.0}, "3"), ({"x" * 5000: 1}, "bytes")):
            with self.assertRaises(ValueError) as cm:
                ck.report_progress(1, min_interval=0, metrics=bad)
            self.assertIn(word, str(cm.exception))
        other = trainrun_client.Checkpointer(self.env, install=False)  # rank 1 checks too
        with self.assertRaises(ValueError):
            other.report_progress(1, metrics={"loss": None})

    # Issue 12 (low): the client writes its temporary files without following
    # a link planted under their names, and refuses an empty tag.
    def test_planted_tmp_links_not_followed(self):
        victim = os.path.join(self.dir, "victim")
        with open(victim, "w") as f:
            f.write("precious")
        env = dict(self.env, RANK="0")
        ck = trainrun_client.Checkpointer(env, install=False)
        meta = os.path.join(ck.save_dir("step-5"), ".trainrun")
        os.makedirs(meta, exist_ok=True)
        os.symlink(victim, os.path.join(meta, "done.0.tmp%d" % os.getpid()))
        os.symlink(victim, os.path.join(meta, "done.0.tmp"))
        progress = os.path.join(self.dir, "job", "launch", "progress")
        os.symlink(victim, "%s.tmp%d" % (progress, os.getpid()))
        ck.mark_done("step-5")
        self.assertTrue(ck.report_progress(3, min_interval=0))
        with open(victim) as f:
            self.assertEqual(f.read(), "precious")
        self.assertFalse(os.path.islink(os.path.join(meta, "done.0")))
        self.assertFalse(os.path.islink(progress))
        self.assertEqual(os.stat(os.path.join(meta, "done.0")).st_mode & 0o777, 0o644)

    def test_empty_tag_refused(self):
        ck = trainrun_client.Checkpointer(self.env, install=False)
        for tag in ("", ".", "..", "a/b", ".trainrun"):
            with self.assertRaises(ValueError):
                ck.save_dir(tag)


class HeartbeatTest(unittest.TestCase):
    """Every rank's report_progress is a heartbeat on the shim's pipe."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.r, self.w = os.pipe()
        self.env = {"RANK": "3", "WORLD_SIZE": "4", "TRAINRUN_CKPT_DIR": os.path.join(self.dir, "ck"),
                    "TRAINRUN_HEARTBEAT_FD": str(self.w)}

    def tearDown(self):
        for fd in (self.r, self.w):
            try:
                os.close(fd)
            except OSError:
                pass

    def lines(self):
        os.set_blocking(self.r, False)
        try:
            return os.read(self.r, 1 << 20).decode().splitlines()
        except BlockingIOError:
            return []

    def test_lines(self):
        ck = trainrun_client.Checkpointer(self.env, install=False)
        ck.report_progress(7)  # rank 3: no progress file, but a heartbeat
        ck.mark_done("step-7")
        got = [l.split() for l in self.lines()]
        self.assertEqual([g[0] for g in got], ["-1", "7", "7", "7"])
        # save_dir (mark_done calls it) says save; mark_done ends it.
        self.assertEqual([g[2:] for g in got], [[], [], ["save"], []])
        self.assertLess(abs(float(got[1][1]) - time.time()), 5)

    def test_full_pipe_never_blocks(self):
        ck = trainrun_client.Checkpointer(self.env, install=False)
        t = time.monotonic()
        for i in range(200000):  # far more than a pipe holds
            ck.report_progress(i)
        self.assertLess(time.monotonic() - t, 30)
        self.assertIsNotNone(ck._hb_fd)

    def test_not_a_pipe_is_ignored(self):
        with open(os.path.join(self.dir, "f"), "w") as f:
            env = dict(self.env, TRAINRUN_HEARTBEAT_FD=str(f.fileno()))
            ck = trainrun_client.Checkpointer(env, install=False)
            ck.report_progress(1)
        self.assertEqual(os.path.getsize(os.path.join(self.dir, "f")), 0)

    def test_closed_reader(self):
        os.close(self.r)
        ck = trainrun_client.Checkpointer(self.env, install=False)
        ck.report_progress(1)  # EPIPE: silently off
        self.assertIsNone(ck._hb_fd)

    def test_stack_signal_registered(self):
        env = dict(self.env, TRAINRUN_STACK_SIGNAL="URG")
        trainrun_client.Checkpointer(env)
        try:
            with open("/proc/self/status") as f:
                cgt = [l for l in f if l.startswith("SigCgt:")][0]
            self.assertTrue(int(cgt.split()[1], 16) & (1 << (signal.SIGURG - 1)))
        finally:
            import faulthandler
            faulthandler.unregister(signal.SIGURG)

    def test_cost_per_call(self):
        """The heartbeat's cost per report_progress call, against a 100 ms step
        (a small model's; real LLM steps take seconds): under 1 %."""
        ck = trainrun_client.Checkpointer(dict(self.env), install=False)
        n = 20000
        t = time.perf_counter()
        for i in range(n):
            ck.report_progress(i)
            if i % 1000 == 0:
                self.lines()  # the shim reads
        per = (time.perf_counter() - t) / n
        print("\nheartbeat: %.2f us per report_progress call on a non-zero rank (%.4f %% of a 100 ms step)" % (per * 1e6, per / 0.1 * 100))
        self.assertLess(per, 0.001)  # 1 % of 100 ms; a loose bound, the figure is what counts


if __name__ == "__main__":
    unittest.main()


class _FakeDist:
    """The part of torch.distributed that record_collectives touches."""

    class ProcessGroup:
        pass

    class group:
        WORLD = object()

    class distributed_c10d:
        _pg_group_ranks = {}

    def __init__(self):
        self.calls = []

    def get_world_size(self, group=None):
        return 4

    def all_reduce(self, tensor, op=None, group=None, async_op=False):
        self.calls.append(("all_reduce", tensor))

    def barrier(self, group=None):
        raise RuntimeError("peer gone")


class _Tensor:
    shape, dtype = (2, 3), "torch.float32"


class CollectiveRecordTest(unittest.TestCase):
    def tearDown(self):
        trainrun_client._CollectiveRing.active = None

    def test_records_enter_done_and_group(self):
        d = tempfile.mkdtemp()
        log = os.path.join(d, "coll")
        ck = trainrun_client.Checkpointer({"RANK": "2", "WORLD_SIZE": "4", "TRAINRUN_COLLECTIVE_LOG": log}, install=False)
        dist = _FakeDist()
        sub = _FakeDist.ProcessGroup()
        dist.distributed_c10d._pg_group_ranks[sub] = {3: 1, 2: 0}
        self.assertTrue(ck.record_collectives(dist))
        self.assertTrue(ck.record_collectives(dist), "a second call keeps the one record")
        dist.all_reduce(_Tensor())
        dist.all_reduce(_Tensor(), group=sub)
        with self.assertRaises(RuntimeError):
            dist.barrier()
        self.assertEqual(len(dist.calls), 2, "the collectives themselves still run")
        with open(log, "rb") as f:
            raw = f.read()
        self.assertEqual(len(raw), 160 * 257)
        lines = [l.decode().strip() for l in raw.split(b"\n") if l.strip(b" \x00")]
        self.assertTrue(lines[0].startswith("trainrun-collectives 1 pid=%d rank=2" % os.getpid()), lines[0])
        f = [l.split(" ", 6) for l in lines[1:]]
        self.assertEqual([x[:5] for x in f], [["1", "1", "done", "all_reduce", "world:4"],
                                              ["2", "1", "done", "all_reduce", f[1][4]],
                                              ["3", "2", "failed", "barrier", "world:4"]])
        self.assertRegex(f[1][4], r"^g[0-9a-f]{8}:2$")
        self.assertEqual(f[0][6], "[2, 3] float32")

    def test_forked_child_records_nothing(self):
        d = tempfile.mkdtemp()
        log = os.path.join(d, "coll")
        ck = trainrun_client.Checkpointer({"RANK": "0", "TRAINRUN_COLLECTIVE_LOG": log}, install=False)
        dist = _FakeDist()
        ck.record_collectives(dist)
        pid = os.fork()
        if pid == 0:  # a data-loader worker: its collectives must not write the parent's record
            dist.all_reduce(_Tensor())
            os._exit(0)
        os.waitpid(pid, 0)
        with open(log, "rb") as f:
            self.assertNotIn(b"all_reduce", f.read())

    def test_without_the_variable_nothing(self):
        ck = trainrun_client.Checkpointer({"RANK": "0"}, install=False)
        dist = _FakeDist()
        fn = dist.all_reduce
        self.assertFalse(ck.record_collectives(dist))
        self.assertEqual(dist.all_reduce, fn)


class SkipAndNaNTest(unittest.TestCase):
    def test_should_skip(self):
        ck = trainrun_client.Checkpointer({"RANK": "0", "TRAINRUN_SKIP_STEPS": "57-63, 120"}, install=False)
        self.assertEqual([s for s in range(50, 125) if ck.should_skip(s)], list(range(57, 64)) + [120])
        self.assertFalse(trainrun_client.Checkpointer({"RANK": "0"}, install=False).should_skip(1))
        for bad in ("5-3", "x", "0"):
            with self.assertRaises(ValueError):
                trainrun_client.Checkpointer({"RANK": "0", "TRAINRUN_SKIP_STEPS": bad}, install=False)

    def test_first_nan_written_past_min_interval(self):
        d = tempfile.mkdtemp()
        os.makedirs(os.path.join(d, "launch"))
        ck = trainrun_client.Checkpointer({"RANK": "0", "TRAINRUN_JOB_DIR": d}, install=False)
        self.assertTrue(ck.report_progress(1, metrics={"loss": 1.0}, min_interval=60))
        self.assertFalse(ck.report_progress(2, metrics={"loss": 0.9}, min_interval=60))
        self.assertTrue(ck.report_progress(3, metrics={"loss": float("nan")}, min_interval=60), "the first NaN is news")
        self.assertFalse(ck.report_progress(4, metrics={"loss": float("nan")}, min_interval=60), "the next NaN waits")
        with open(os.path.join(d, "launch", "progress")) as f:
            self.assertIn('"nan"', f.read())
