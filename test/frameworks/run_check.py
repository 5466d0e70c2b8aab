"""Runs the megatron-check tool's check.py (MEGATRON_CHECK) on many argument lists in one
process, on this CPU machine as if on the planned GPUs.

usage: MEGATRON_CHECK=DIR MLM_DIR=DIR python3 run_check.py MANIFEST
MANIFEST: one JSON object a line, {"world": N, "arch": A, "argv": FILE, "env": {KEY: VALUE}};
prints check.py's JSON line for each, in order.

One process: Megatron's modules are imported once instead of once per case. Each case gets
its rank environment (env) in os.environ, and validate_args' question
torch.cuda.get_device_capability() (--moe-grouped-gemm: arguments.py "Unsupported compute
capability for GroupedGEMM kernels"), which a CPU-only torch cannot answer, gets the arch.
"""
import contextlib
import io
import json
import os
import runpy
import sys

import torch

check = os.path.join(os.environ["MEGATRON_CHECK"], "check.py")
cases = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
base_env = dict(os.environ)
for c in cases:
    os.environ.clear()
    os.environ.update(base_env)
    os.environ.update(c.get("env", {}))
    arch = int(c["arch"])
    torch.cuda.get_device_capability = lambda *a, _arch=arch, **k: (_arch, 0)
    sys.argv = [check, str(c["world"]), str(arch), c["argv"]]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(check, run_name="__main__")
        line = out.getvalue().strip().splitlines()[-1]
    except BaseException as e:  # noqa: BLE001  (report it as this case's result)
        line = json.dumps({"ok": False, "stage": "harness", "error": "%s: %s" % (type(e).__name__, e)})
    print(line, flush=True)
