"""Check trainrun's --format peft accelerate, TRL and transformers settings
against those projects' own sources (issue 37), on CPU and without
installing them: their classes are read with Python's ast module from the
trees given, never imported (accelerate's and transformers' packages import
half of the ecosystem at import time).

What is checked, per tree given:
  --accelerate DIR (a huggingface/accelerate tree):
    - every top-level key of the accelerate config is a field of the config
      file's dataclass (commands/config/config_args.py BaseConfig +
      ClusterConfig), and compute_environment, distributed_type and
      mixed_precision are members of utils/dataclasses.py's
      ComputeEnvironment, DistributedType and PrecisionType;
    - every fsdp_config key is an argument of `accelerate launch`
      (commands/launch.py: a config file's fsdp_config.x becomes --fsdp_x);
      sharding strategy, auto-wrap policy, backward prefetch and state-dict
      type are in utils/constants.py's FSDP_* lists; the booleans are
      booleans.
  --trl DIR (a huggingface/trl tree): the training_arguments keys that are
    not TrainingArguments' (max_length) are fields of TRL's SFTConfig
    (trl/trainer/sft_config.py).
  --transformers DIR (a huggingface/transformers tree):
    - every training_arguments key is a field of TrainingArguments
      (src/transformers/training_args.py) or of SFTConfig, and optim is an
      OptimizerNames value;
    - every bnb_config key is a parameter of BitsAndBytesConfig.__init__
      (src/transformers/utils/quantization_config.py), the quant type is nf4
      or fp4, and the dtypes name torch dtypes.

usage: python3 hf_check.py [--accelerate DIR] [--trl DIR] [--transformers DIR] < cases.json
cases.json: [{"bnb_config": {...}, "training_arguments": {...}, "accelerate": {...}}, ...]
prints one JSON object per case: {"checked": [...], "errors": [...]}.
"""
import argparse, ast, json, os, sys


def parse(path):
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), path)


def find_class(tree, name):
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise SystemExit(f"hf_check.py: no class {name} in the tree given")


def fields(cls):
    """The annotated attributes of a class body (a dataclass's fields)."""
    return {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


def enum_values(cls):
    out = set()
    for n in cls.body:
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str):
            out.add(n.value.value)
    return out


def list_constant(tree, name):
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets):
            return set(ast.literal_eval(n.value))
    raise SystemExit(f"hf_check.py: no list {name}")


def launch_args(tree):
    """The --options of accelerate launch's parser."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            for a in node.args:
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--"):
                    out.add(a.value[2:].replace("-", "_"))
    return out


class Accelerate:
    def __init__(self, root):
        src = os.path.join(root, "src", "accelerate")
        cfg = parse(os.path.join(src, "commands", "config", "config_args.py"))
        self.fields = fields(find_class(cfg, "BaseConfig")) | fields(find_class(cfg, "ClusterConfig"))
        dc = parse(os.path.join(src, "utils", "dataclasses.py"))
        self.enums = {k: enum_values(find_class(dc, c)) for k, c in
                      (("compute_environment", "ComputeEnvironment"), ("distributed_type", "DistributedType"), ("mixed_precision", "PrecisionType"))}
        self.args = launch_args(parse(os.path.join(src, "commands", "launch.py")))
        const = parse(os.path.join(src, "utils", "constants.py"))
        self.lists = {k: list_constant(const, c) for k, c in
                      (("fsdp_sharding_strategy", "FSDP_SHARDING_STRATEGY"), ("fsdp_auto_wrap_policy", "FSDP_AUTO_WRAP_POLICY"),
                       ("fsdp_backward_prefetch", "FSDP_BACKWARD_PREFETCH"), ("fsdp_state_dict_type", "FSDP_STATE_DICT_TYPE"))}

    def check(self, acc, errs):
        for k, v in acc.items():
            if k not in self.fields:
                errs.append(f"accelerate: {k} is not a field of the config file (ClusterConfig)")
            if k in self.enums and v not in self.enums[k]:
                errs.append(f"accelerate: {k}={v!r} is not one of {sorted(self.enums[k])}")
        for k, v in (acc.get("fsdp_config") or {}).items():
            if k not in self.args:
                errs.append(f"accelerate: fsdp_config.{k} is not an `accelerate launch` argument (--{k})")
            if k in self.lists and v not in self.lists[k]:
                errs.append(f"accelerate: fsdp_config.{k}={v!r} is not one of {sorted(self.lists[k])}")
            if k in ("fsdp_offload_params", "fsdp_cpu_ram_efficient_loading", "fsdp_sync_module_states", "fsdp_use_orig_params") and not isinstance(v, bool):
                errs.append(f"accelerate: fsdp_config.{k}={v!r} is not a boolean")


class TRL:
    def __init__(self, root):
        self.fields = fields(find_class(parse(os.path.join(root, "trl", "trainer", "sft_config.py")), "SFTConfig"))


class Transformers:
    def __init__(self, root):
        src = os.path.join(root, "src", "transformers")
        ta = parse(os.path.join(src, "training_args.py"))
        self.fields = fields(find_class(ta, "TrainingArguments"))
        self.optims = enum_values(find_class(ta, "OptimizerNames"))
        init = next(n for n in find_class(parse(os.path.join(src, "utils", "quantization_config.py")), "BitsAndBytesConfig").body
                    if isinstance(n, ast.FunctionDef) and n.name == "__init__")
        self.bnb = {a.arg for a in init.args.args + init.args.kwonlyargs} - {"self"}


TORCH_DTYPES = {"bfloat16", "float16", "float32"}


def check_case(case, acc, trl, tf):
    errs, checked = [], []
    tr = case.get("training_arguments") or {}
    if acc:
        acc.check(case.get("accelerate") or {}, errs)
        checked.append("accelerate")
    if trl:
        for k in tr:
            if (tf is None or k not in tf.fields) and k not in trl.fields and k in ("max_length",):
                errs.append(f"trl: {k} is not a field of SFTConfig")
        checked.append("trl")
    if tf:
        for k in tr:
            if k not in tf.fields and not (trl and k in trl.fields):
                errs.append(f"transformers: training_arguments.{k} is a field of neither TrainingArguments nor SFTConfig")
        if "optim" in tr and tr["optim"] not in tf.optims:
            errs.append(f"transformers: optim={tr['optim']!r} is not an OptimizerNames value")
        for k, v in (case.get("bnb_config") or {}).items():
            if k not in tf.bnb:
                errs.append(f"transformers: bnb_config.{k} is not a parameter of BitsAndBytesConfig")
            if k == "bnb_4bit_quant_type" and v not in ("nf4", "fp4"):
                errs.append(f"transformers: bnb_4bit_quant_type={v!r}: BitsAndBytesConfig takes nf4 or fp4")
            if k in ("bnb_4bit_compute_dtype", "bnb_4bit_quant_storage") and v not in TORCH_DTYPES:
                errs.append(f"transformers: {k}={v!r} is not a torch dtype name")
        checked.append("transformers")
    return {"checked": checked, "errors": errs}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--accelerate")
    ap.add_argument("--trl")
    ap.add_argument("--transformers")
    a = ap.parse_args()
    acc = Accelerate(a.accelerate) if a.accelerate else None
    trl = TRL(a.trl) if a.trl else None
    tf = Transformers(a.transformers) if a.transformers else None
    for case in json.load(sys.stdin):
        print(json.dumps(check_case(case, acc, trl, tf)))


if __name__ == "__main__":
    main()
