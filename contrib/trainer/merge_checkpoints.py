#!/usr/bin/python3
"""Merge checkpoints by weighted parameter averaging (branch-train-merge).

    merge_checkpoints.py --out DIR [--weights W1,W2,...] CKPT1 CKPT2 ...

Each CKPT is a checkpoint directory holding the same files rank-<R>.pt (as
contrib/trainer/train_example.py saves them: torch.save of a dict whose
"model" entry is a state dict; a file that is a state dict itself works
too). For every file, every floating-point tensor of the state dict becomes
sum(w_i * x_i) / sum(w_i), computed in float64 in the order given and cast
back to its dtype (with equal weights: exactly the element-wise mean);
other entries are taken from the first checkpoint. The optimizer state is
dropped: it belongs to no single merged model.

The output is written through trainrun's checkpoint handshake: when DIR is
inside $TRAINRUN_CKPT_DIR (run it under `trainrun run`, e.g. as the merge
job of `trainrun branches`, with --out {ckpt_dir}/TAG), the files are
fsynced and the done marker written with trainrun_client, and trainrun
commits DIR; `trainrun ckpt verify TAG` then accepts it. Elsewhere it is a
plain directory. Standard library and torch only.
"""

import argparse
import io
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trainrun_client  # noqa: E402

import torch  # noqa: E402


def parse_weights(s, n):
    if not s:
        return [1.0] * n
    try:
        w = [float(x) for x in s.split(",")]
    except ValueError:
        sys.exit("merge_checkpoints: --weights %r: want numbers separated by commas, one per checkpoint" % s)
    if len(w) != n:
        sys.exit("merge_checkpoints: --weights %r has %d weights for %d checkpoints: give one per checkpoint" % (s, len(w), n))
    if any(x < 0 for x in w) or sum(w) <= 0:
        sys.exit("merge_checkpoints: --weights %r: want non-negative weights with a positive sum" % s)
    return w


def merge_state(states, weights):
    """The weighted average of state dicts with the same keys and shapes."""
    keys = list(states[0].keys())
    for i, s in enumerate(states[1:], 1):
        if list(s.keys()) != keys:
            raise ValueError("checkpoint %d has keys %s, the first has %s" % (i, sorted(s.keys()), sorted(keys)))
    total = float(sum(weights))
    out = {}
    for k in keys:
        v0 = states[0][k]
        if not (torch.is_tensor(v0) and v0.is_floating_point()):
            out[k] = v0
            continue
        acc = torch.zeros(v0.shape, dtype=torch.float64)
        for s, w in zip(states, weights):
            if s[k].shape != v0.shape:
                raise ValueError("%s: shape %s against %s" % (k, tuple(s[k].shape), tuple(v0.shape)))
            acc = acc + s[k].to(torch.float64) * w
        out[k] = (acc / total).to(v0.dtype)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="the merged checkpoint's directory")
    ap.add_argument("--weights", default=os.environ.get("TRAINRUN_MERGE_WEIGHTS", ""),
                    help="one weight per checkpoint, W1,W2,... (default: equal; env TRAINRUN_MERGE_WEIGHTS)")
    ap.add_argument("ckpts", nargs="+", help="checkpoint directories to merge")
    args = ap.parse_args()
    weights = parse_weights(args.weights, len(args.ckpts))
    files = sorted(f for f in os.listdir(args.ckpts[0]) if f.endswith(".pt"))
    if not files:
        sys.exit("merge_checkpoints: %s holds no .pt files" % args.ckpts[0])
    for c in args.ckpts[1:]:
        other = sorted(f for f in os.listdir(c) if f.endswith(".pt"))
        if other != files:
            sys.exit("merge_checkpoints: %s holds %s, %s holds %s: the checkpoints must have the same files" % (c, other, args.ckpts[0], files))

    ck = trainrun_client.Checkpointer(install=False)
    out = os.path.abspath(args.out)
    store = os.path.abspath(ck.ckpt_dir) if ck.ckpt_dir else ""
    tag = os.path.relpath(out, store) if store and os.path.dirname(out) == store else ""
    d = ck.save_dir(tag) if tag else out
    os.makedirs(d, exist_ok=True)
    paths = []
    for f in files:
        # weights_only: the checkpoints may be other people's, and a full
        # unpickle runs the code a planted rank-*.pt names.
        loaded = [trainrun_client.load_checkpoint(os.path.join(c, f)) for c in args.ckpts]
        wrapped = isinstance(loaded[0], dict) and isinstance(loaded[0].get("model"), dict)
        states = [x["model"] if wrapped else x for x in loaded]
        merged = merge_state(states, weights)
        obj = {"model": merged, "step": max(int(x.get("step", 0)) for x in loaded),
               "merged_from": [os.path.abspath(c) for c in args.ckpts], "weights": weights} if wrapped else merged
        buf = io.BytesIO()
        torch.save(obj, buf)
        p = os.path.join(d, f)
        with open(p + ".tmp", "wb") as fh:
            fh.write(buf.getvalue())
        os.replace(p + ".tmp", p)
        paths.append(p)
    if tag:
        ck.mark_done(tag, paths)  # fsyncs the files, then the done marker: trainrun commits it
    print("merge_checkpoints: merged %d checkpoints (weights %s) into %s%s" % (
        len(args.ckpts), ",".join("%g" % w for w in weights), d, " for trainrun to commit" if tag else ""), flush=True)


if __name__ == "__main__":
    main()
