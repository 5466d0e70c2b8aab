"""Megatron-LM's own parameter count for many argument lists, in one process.

usage: MEGATRON=DIR MEGATRON_CHECK=DIR python3 megatron_params.py MANIFEST
MANIFEST: as run_check.py's. Prints, for each case in order, {"params": N} (Megatron's
total, in units of 1e9 rounded to 0.01 by Megatron's own print) or {"error": ...}.

Each case: megatron.training.arguments parse_args and validate_args, the vocabulary padded
with megatron.training.vocab_utils as pretrain_gpt.py does, and the totals that
megatron.training.theoretical_memory_usage.compute_weight_and_optimizer_memory prints:
Megatron's own account of the model its arguments build (MLA, MoE, shared experts, gated
MLPs, tied embeddings, norms). The import-time stubs come from the megatron-check tool in
MEGATRON_CHECK (not part of this repository).
"""
import contextlib
import io
import json
import os
import re
import sys

sys.path[:0] = [os.environ["MEGATRON_CHECK"], os.environ["MEGATRON"]]
cases = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
base_env = dict(os.environ)
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    import stubs  # noqa: F401  (megatron-check's stubs for GPU-only modules)
    import torch
    from packaging.version import Version
    import megatron.core.utils as mcu
    import megatron.training.arguments as A
    from megatron.training.vocab_utils import calculate_padded_vocab_size
    from megatron.training.theoretical_memory_usage import compute_weight_and_optimizer_memory
# A current container's versions, as the megatron-check tool sets them (only
# comparisons read them).
mcu._torch_version, mcu._te_version = Version("2.9.0"), Version("2.10.0")

for c in cases:
    os.environ.clear()
    os.environ.update(base_env)
    os.environ.update(c.get("env", {}))
    os.environ["WORLD_SIZE"], os.environ["RANK"] = str(c["world"]), "0"
    arch = int(c["arch"])
    A.get_device_arch_version = lambda _arch=arch: _arch
    torch.cuda.get_device_capability = lambda *a, _arch=arch, **k: (_arch, 0)  # --moe-grouped-gemm asks
    argv = [l.rstrip("\n") for l in open(c["argv"]) if l.strip()]
    out, log, printed = {}, io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            sys.argv = ["pretrain_gpt.py"] + argv
            args = A.parse_args(ignore_unknown_args=False)
            A.validate_args(args, {})
            args.padded_vocab_size = calculate_padded_vocab_size(
                args.vocab_size, args.make_vocab_size_divisible_by, args.tensor_model_parallel_size, False)
            with contextlib.redirect_stdout(printed):
                compute_weight_and_optimizer_memory(args, verbose=True)
        total = re.search(r"Total number of parameters in billions:\s*([0-9.]+)", printed.getvalue())
        out["params"] = float(total.group(1)) * 1e9 if total else None
        if not total:
            out["error"] = "no total in Megatron's output: " + printed.getvalue()[-300:]
    except BaseException as e:  # noqa: BLE001  (argparse exits; report whatever stopped it)
        tail = log.getvalue().strip().splitlines()[-1:]
        out["error"] = "%s: %s %s" % (type(e).__name__, e, tail)
    print(json.dumps(out), flush=True)
