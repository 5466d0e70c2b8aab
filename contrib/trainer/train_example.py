#!/usr/bin/python3
"""Example trainer for `trainrun run` (PyTorch, CPU, gloo).

    trainrun run --fix tp=2,pp=2 -- /usr/bin/python3 train_example.py --steps 20

It shows what a framework does with trainrun's environment:

* builds the tensor-, context-, data- and pipeline-parallel groups from RANK
  and TRAINRUN_TP/CP/EP/DP/PP exactly as Megatron-LM does (RankGenerator,
  order "tp-cp-ep-dp-pp": TP varies fastest);
* checks that every group's members run where the plan (TRAINRUN_PLAN) says,
  from what each rank reports of itself (node, GPU), and all-reduces in each
  group;
* trains a tiny model with DistributedDataParallel over the data-parallel
  group for a fixed number of steps with a fixed seed;
* checkpoints through trainrun_client (on TRAINRUN_CKPT_SIGNAL, SIGTERM, or
  every --save-every steps) and resumes from TRAINRUN_RESUME_DIR bit-exactly:
  an interrupted run ends with the same weights as an uninterrupted one.

--report DIR writes DIR/rank-<RANK>.json with what the rank saw; --out FILE
(rank 0) writes the final weights' SHA-256.
"""

import argparse
import contextlib
import datetime
import hashlib
import io
import json
import os
import socket
import sys
import time
import zlib

sys.dont_write_bytecode = True  # no __pycache__ beside the example in a read-only or shared checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trainrun_client  # noqa: E402

# Install the handlers before the slow imports: a checkpoint request or
# Slurm's SIGTERM may arrive while torch loads.
ck = trainrun_client.Checkpointer()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

# The last collectives, for trainrun's hang evidence (hangs/<n>/).
ck.record_collectives(dist)


# --- Megatron-LM's rank groups (megatron/core/parallel_state.py) -------------

def _prefix_product(a, init=1):
    r = [init]
    for v in a:
        init = init * v
        r.append(init)
    return r


def _decompose(index, shape):
    stride = _prefix_product(shape)
    return [(index // d) % s for s, d in zip(shape, stride)]


def masked_orthogonal_rank_groups(world_size, parallel_size, mask):
    """Megatron's generate_masked_orthogonal_rank_groups."""
    masked_shape = [s for s, m in zip(parallel_size, mask) if m]
    unmasked_shape = [s for s, m in zip(parallel_size, mask) if not m]
    global_stride = _prefix_product(parallel_size)
    masked_stride = [d for d, m in zip(global_stride, mask) if m]
    unmasked_stride = [d for d, m in zip(global_stride, mask) if not m]
    group_size = _prefix_product(masked_shape)[-1]
    groups = []
    for group_index in range(world_size // group_size):
        g = _decompose(group_index, unmasked_shape)
        ranks = []
        for rank_in_group in range(group_size):
            r = _decompose(rank_in_group, masked_shape)
            ranks.append(sum(x * y for x, y in zip(r, masked_stride)) + sum(x * y for x, y in zip(g, unmasked_stride)))
        groups.append(ranks)
    return groups


class RankGenerator:
    """Megatron's RankGenerator: sizes in the order of `order`, groups for a token like "tp" or "tp-pp"."""

    def __init__(self, tp, ep, dp, pp, cp, order="tp-cp-ep-dp-pp"):
        self.sizes = {"tp": tp, "ep": ep, "dp": dp, "pp": pp, "cp": cp}
        self.order = order.split("-")
        self.world_size = tp * dp * pp * cp * ep

    def get_ranks(self, token):
        parts = token.split("-")
        mask = [name in parts for name in self.order]
        return masked_orthogonal_rank_groups(self.world_size, [self.sizes[n] for n in self.order], mask)


# --- the tiny model and its deterministic data ---------------------------------

def make_model():
    torch.manual_seed(1234)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))


def batch_for(step, dp_rank, size=8, data=0):
    g = torch.Generator().manual_seed(100003 * step + dp_rank + 7919 * data)
    x = torch.randn(size, 16, generator=g)
    y = x.sum(dim=1, keepdim=True).sin()
    return x, y


class StepData:
    """Batches indexed by step so a resumed run sees the same data. With
    grad_accum > 1 (TRAINRUN_RESHARD=dp: the global batch is kept at any dp)
    a step is a list of micro batches indexed by their place in the global
    batch, dp_rank·grad_accum + m, so dp 3 × 2 and dp 2 × 3 train on the same
    six."""

    def __init__(self, start, steps, dp_rank, data=0, grad_accum=0):
        self.step, self.steps, self.dp_rank, self.data, self.ga = start, steps, dp_rank, data, grad_accum

    def __iter__(self):
        return self

    def __next__(self):
        if self.step >= self.steps:
            raise StopIteration
        if self.ga:
            b = [batch_for(self.step, self.dp_rank * self.ga + m, data=self.data) for m in range(self.ga)]
        else:
            b = batch_for(self.step, self.dp_rank, data=self.data)
        self.step += 1
        return b


def load_rank_state(path):
    """A rank's checkpoint, loaded as data only: a checkpoint someone else
    wrote (--init-from, branches --from, a shared store) is a pickle, and a
    full unpickle runs whatever code it names (trainrun_client.load_checkpoint)."""
    return trainrun_client.load_checkpoint(path)


def weights_sha256(model):
    h = hashlib.sha256()
    for k, v in sorted(model.state_dict().items()):
        h.update(k.encode())
        h.update(v.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def inject_failure(step, rank, world, env=os.environ):
    """TRAINRUN_EXAMPLE_FAIL=KIND:STEP[:RANK] makes rank RANK (default the
    last) fail as a real trainer would once it finished step STEP, for the
    tests of trainrun's failure classes: oom (torch's CUDA out-of-memory
    error), nccl (the NCCL watchdog's timeout, then an abort as the watchdog
    does) or value (a plain ValueError, the trainer's own bug). With
    TRAINRUN_EXAMPLE_FAIL_MARK=PATH it fails once: the file says it did."""
    spec = env.get("TRAINRUN_EXAMPLE_FAIL", "")
    if not spec:
        return
    parts = spec.split(":")
    if len(parts) not in (2, 3) or parts[0] not in ("oom", "nccl", "value"):
        sys.exit("TRAINRUN_EXAMPLE_FAIL=%r: want KIND:STEP[:RANK], KIND oom, nccl or value" % spec)
    kind, at = parts[0], int(parts[1])
    who = int(parts[2]) if len(parts) == 3 else world - 1
    mark = env.get("TRAINRUN_EXAMPLE_FAIL_MARK", "")
    if step != at or rank != who or mark and os.path.exists(mark):
        return
    if mark:
        with open(mark, "w") as f:
            f.write("%s at step %d on rank %d\n" % (kind, step, rank))
    if kind == "oom":
        oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", RuntimeError)
        raise oom("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.21 GiB is free. "
                  "Of the allocated memory 75.30 GiB is allocated by PyTorch (injected by TRAINRUN_EXAMPLE_FAIL)")
    if kind == "nccl":
        sys.stderr.write("[rank%d]:[E ProcessGroupNCCL.cpp:616] [Rank %d] Watchdog caught collective operation timeout: "
                         "WorkNCCL(SeqNum=%d, OpType=ALLREDUCE, NumelIn=1048576, Timeout(ms)=600000) ran for 600047 milliseconds before timing out "
                         "(injected by TRAINRUN_EXAMPLE_FAIL)\n" % (rank, rank, step))
        sys.stderr.flush()
        os.abort()
    raise ValueError("bad learning-rate schedule at step %d (injected by TRAINRUN_EXAMPLE_FAIL)" % step)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--save-every", type=int, default=0, help="also checkpoint every N steps (0: only when asked)")
    ap.add_argument("--sleep", type=float, default=0.0, help="seconds per step, to make a short job last")
    ap.add_argument("--sleep-micro", type=float, default=0.0,
                    help="with TRAINRUN_RESHARD=dp: also seconds per micro batch (grad accum x this per step), the compute a larger dp divides")
    ap.add_argument("--report", default="", help="directory for rank-<RANK>.json")
    ap.add_argument("--out", default="", help="rank 0 writes the final weights' SHA-256 here")
    ap.add_argument("--ballast-kb", type=int, default=0, help="also save a fixed BF16 tensor of this many KiB in each checkpoint (weights-like bytes for the store's compression)")
    ap.add_argument("--save-wait-term", type=float, default=0.0,
                    help="a checkpoint for a stop waits up to this many seconds for Slurm's SIGTERM before saving (tests a time limit that strikes while a checkpoint is in flight)")
    # 0.02: at 0.05 (with momentum 0.9) a one-rank run diverged after about
    # 100 steps (loss 2.7 at step 150, 1e11 at 500), so a long run compared
    # weights that had gone to inf; 0.02 stays near 0.5 for 1000 steps at 1-8
    # data-parallel ranks.
    ap.add_argument("--lr", type=float, default=0.02, help="SGD learning rate (a hyperparameter to sweep)")
    ap.add_argument("--momentum", type=float, default=0.9, help="SGD momentum (a hyperparameter to sweep)")
    ap.add_argument("--report-loss", action="store_true",
                    help="report the training loss as the metric \"loss\" (report_progress(metrics=...)), the final step's at the end: trainrun sweep status shows it and picks the best trial")
    ap.add_argument("--data", default="", help="name of the data to train on: each name draws its own batches (a branch of trainrun branches; default: the base data)")
    ap.add_argument("--save-final", action="store_true", help="also checkpoint the final step (a branch's result for the merge)")
    ap.add_argument("--collective-timeout", type=float, default=120.0,
                    help="seconds gloo waits in a collective before failing (NCCL's default is 30 min; a long one makes a stopped rank hang the others)")
    ap.add_argument("--expect-tp", type=int, default=0, help="fail unless TRAINRUN_TP equals this (checks template substitution)")
    ap.add_argument("--nan-at-step", type=int, default=0,
                    help="a bad batch: the inputs of optimizer step N (the step reported as N) are NaN, so the loss and then the weights are (tests --loss-spike-action rollback; a skipped step draws no NaN)")
    args = ap.parse_args()

    env = os.environ
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    tp, pp, cp, ep, dp = (int(env.get("TRAINRUN_" + k, "1")) for k in ("TP", "PP", "CP", "EP", "DP"))
    if args.expect_tp and args.expect_tp != tp:
        sys.exit("rank %d: --expect-tp %d but TRAINRUN_TP=%d" % (rank, args.expect_tp, tp))
    with ck.hold_signals():  # a signal during the rendezvous would fail it with EINTR
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=args.collective_timeout))

    # Where am I, and where does the plan say I should be?
    me = {"rank": rank, "node": env.get("SLURMD_NODENAME") or socket.gethostname(),
          "gpu": int(env.get("TRAINRUN_GPU", "-1")), "local_rank": int(env.get("LOCAL_RANK", "-1"))}
    everyone = [None] * world
    dist.all_gather_object(everyone, me)
    with open(env["TRAINRUN_PLAN"]) as f:
        planned = {r["rank"]: r for r in json.load(f)["ranks"]}

    # Megatron's dense groups: ep folds into dp (RankGenerator with ep=1).
    gen = RankGenerator(tp=tp, ep=1, dp=dp, pp=pp, cp=cp)
    checks, problems, groups = {}, [], {}
    for token, axis in (("tp", "tp"), ("cp", "cp"), ("dp", "dp"), ("pp", "pp")):
        mine = None
        for ranks in gen.get_ranks(token):
            g = dist.new_group(ranks)  # every rank creates every group, as Megatron does
            if rank in ranks:
                mine, groups[token] = ranks, g
        others = [a for a in ("tp", "cp", "dp", "pp") if a != axis]
        for pos, m in enumerate(mine):
            p = planned[m]
            if p[axis] != pos or any(p[o] != planned[rank][o] for o in others):
                problems.append("%s group %s: rank %d has plan coordinates %s" % (token, mine, m, {a: p[a] for a in ("tp", "cp", "dp", "pp")}))
            if everyone[m]["node"] != p["node"] or p["gpu"] >= 0 and everyone[m]["gpu"] != p["gpu"]:
                problems.append("%s group %s: rank %d runs on %s GPU %d, plan says %s GPU %d" % (
                    token, mine, m, everyone[m]["node"], everyone[m]["gpu"], p["node"], p["gpu"]))
        t = torch.tensor([1.0, float(rank)])
        dist.all_reduce(t, group=groups[token])
        ok = int(t[0].item()) == len(mine) and int(t[1].item()) == sum(mine)
        if not ok:
            problems.append("%s group %s: all_reduce gave %s" % (token, mine, t.tolist()))
        checks[token] = {"ranks": mine, "nodes": sorted({everyone[m]["node"] for m in mine}), "all_reduce_ok": ok}

    # Train with DDP over the data-parallel group; resume if asked.
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    start = 0
    # TRAINRUN_RESHARD=dp: this trainer resumes at another dp size (trainrun
    # run --shrink): the data-parallel replicas are equal, so a rank loads
    # the checkpoint of the rank with its tp/cp/pp coordinates at dp 0.
    reshard = env.get("TRAINRUN_RESHARD") == "dp"
    if ck.resume_dir:
        src = rank
        if reshard:
            first = load_rank_state(os.path.join(ck.resume_dir, "rank-0.pt"))
            old_dp = int(first.get("dp", dp))
            p = planned[rank]
            src = p["tp"] + tp * (p["cp"] + cp * (old_dp * p["pp"]))
            if old_dp != dp and rank == 0:
                print("train_example: resharding from dp %d to dp %d (grad accum %s)" % (old_dp, dp, env.get("TRAINRUN_GRAD_ACCUM", "1")), flush=True)
        state = load_rank_state(os.path.join(ck.resume_dir, "rank-%d.pt" % src))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=groups["dp"])
    dp_rank = checks["dp"]["ranks"].index(rank)

    ballast = {}
    if args.ballast_kb:
        g = torch.Generator().manual_seed(17 + rank)
        ballast["ballast"] = (torch.randn(args.ballast_kb * 512, generator=g) * 0.02).to(torch.bfloat16)

    def save(step):
        tag = "step-%d" % step
        if step == start and ck.resume_dir:
            # Stopped again before any progress: a new tag, never the committed one.
            tag = "step-%d.r%d" % (step, ck.restart_count)
        d = ck.save_dir(tag)
        path = os.path.join(d, "rank-%d.pt" % rank)
        buf = io.BytesIO()
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "dp": dp, **ballast}, buf)
        try:
            with open(path + ".tmp", "wb") as f:
                f.write(buf.getvalue())
                f.flush()
                os.fsync(f.fileno())  # a full disk answers here at the latest
            os.replace(path + ".tmp", path)
            ck.mark_done(tag, [path])
        except OSError as e:
            if not ck.save_failed(tag, e, [path]):  # a full or failing disk: keep training
                raise
            return None
        return tag

    ga = max(int(env.get("TRAINRUN_GRAD_ACCUM", "1") or 1), 1) if reshard else 0
    data = StepData(start, args.steps, dp_rank, data=zlib.crc32(args.data.encode()) if args.data else 0, grad_accum=ga)
    step, stopped, saved, last_loss = start, False, None, None
    while True:
        try:
            batch = ck.next_batch(data)
        except StopIteration:
            break
        if ck.should_save():  # collective: all ranks agree on the step
            if ck.stop and args.save_wait_term:
                deadline = time.time() + args.save_wait_term
                while not getattr(ck, "_term", False) and time.time() < deadline:
                    time.sleep(0.1)
            if step != start or not ck.resume_dir or ck.stop:
                saved = save(step) or saved
            if ck.stop:
                stopped = True
                break
            ck.reset()  # checkpoint asked with --then continue: keep training
        if batch is None:
            continue
        if ga:  # micro batches: accumulate, all-reduce on the last (DDP no_sync before it)
            opt.zero_grad()
            total = 0.0
            for m, (x, y) in enumerate(batch):
                ctx = ddp.no_sync() if m < ga - 1 else contextlib.nullcontext()
                with ctx:
                    loss = torch.nn.functional.mse_loss(ddp(x), y) / ga
                    loss.backward()
                total += loss.item()
            opt.step()
            step += 1
            last_loss = total
            ck.report_progress(step, metrics={"loss": last_loss} if args.report_loss else None)
            if args.save_every and step % args.save_every == 0 and step < args.steps:
                saved = save(step) or saved
            if args.sleep or args.sleep_micro:
                time.sleep(args.sleep + args.sleep_micro * ga)
            continue
        x, y = batch
        if ck.should_skip(step + 1):
            # TRAINRUN_SKIP_STEPS: a loss spike's steps that trainrun rolled
            # back over: the batch is drawn, no update is made.
            step += 1
            ck.report_progress(step)
        else:
            if args.nan_at_step and step + 1 == args.nan_at_step:
                x = x * float("nan")
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            loss.backward()
            opt.step()
            step += 1
            last_loss = loss.item()
            # rank 0: observed step time for trainrun's metrics (and the loss, with --report-loss)
            ck.report_progress(step, metrics={"loss": last_loss} if args.report_loss else None)
            inject_failure(step, rank, world)
        if args.save_every and step % args.save_every == 0 and step < args.steps:
            saved = save(step) or saved
        if args.sleep:
            time.sleep(args.sleep)

    if args.save_final and not stopped and step > start:
        saved = save(step)
    digest = weights_sha256(model)
    if args.report_loss and last_loss is not None and not stopped:
        ck.report_progress(step, min_interval=0, metrics={"loss": last_loss})  # the final value, past min_interval
    report = dict(me, env={k: v for k, v in env.items() if k in (
        "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
        "CUDA_VISIBLE_DEVICES") or k.startswith("TRAINRUN_")},
        groups=checks, problems=problems, start_step=start, end_step=step, stopped=stopped, saved=saved,
        resumed_from=ck.resume_dir, weights_sha256=digest)
    if args.report:
        os.makedirs(args.report, exist_ok=True)
        with open(os.path.join(args.report, "rank-%d.json" % rank), "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)
    if rank == 0:
        print("train_example: steps %d..%d of %d, %s, weights %s" % (
            start, step, args.steps, "stopped for a checkpoint (%s)" % saved if stopped else "finished", digest[:16]), flush=True)
        if args.report_loss and last_loss is not None:
            print("train_example: lr %r momentum %r final loss %r" % (args.lr, args.momentum, last_loss), flush=True)
        if args.out and not stopped:
            with open(args.out, "w") as f:
                f.write(digest + "\n")
    dist.barrier()
    dist.destroy_process_group()
    if problems:
        sys.exit("rank %d: placement check failed:\n  %s" % (rank, "\n  ".join(problems)))


if __name__ == "__main__":
    main()
