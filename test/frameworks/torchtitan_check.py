"""Parse trainrun's torchtitan overrides with torchtitan's own config
dataclasses and tyro registry (config/configs.py, the activation-checkpoint
union of distributed/activation_checkpoint.py, ConfigManager.register_tyro_rules
of config/manager.py), on CPU and without the trainer: the sections a plan sets,
under the same tyro.cli call ConfigManager.parse_args makes (manager.py:40-42).

usage: python3 torchtitan_check.py TORCHTITAN_DIR < cases.json
cases.json: [[arg, ...], ...]; prints one JSON object per case: the parsed
values, or {"error": ...}.
"""
import dataclasses, importlib.util, json, logging, sys, types

root = sys.argv[1]


def pkg(name, path=None):
    m = types.ModuleType(name)
    if path:
        m.__path__ = [path]
    sys.modules[name] = m
    return m


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    sys.modules[name] = m
    spec.loader.exec_module(m)
    return m


import torch  # noqa: E402
import torch.utils.checkpoint as ckpt  # noqa: E402

# Stubs for what only runs a model (torch 1.13 lacks them); parsing never calls them.
for attr in ("create_selective_checkpoint_contexts", "CheckpointPolicy"):
    if not hasattr(ckpt, attr):
        setattr(ckpt, attr, object)
try:
    importlib.import_module("torch._functorch.partitioners")
    importlib.import_module("torch._functorch.config")
except ImportError:
    fc = pkg("torch._functorch")
    fc.config = pkg("torch._functorch.config")
    part = pkg("torch._functorch.partitioners")
    part.get_default_op_list = lambda: None
cw = "torch.distributed.algorithms._checkpoint.checkpoint_wrapper"
if cw not in sys.modules:
    try:
        importlib.import_module(cw)
    except Exception:
        m = pkg(cw)
        m.checkpoint_wrapper = None
import torch.distributed.algorithms._checkpoint.checkpoint_wrapper as cwm  # noqa: E402
for attr in ("checkpoint_wrapper",):
    if not hasattr(cwm, attr):
        setattr(cwm, attr, None)

tt = f"{root}/torchtitan"
pkg("torchtitan", tt)
pkg("torchtitan.tools", f"{tt}/tools")
pkg("torchtitan.tools.logging").logger = logging.getLogger("torchtitan")
pkg("torchtitan.observability", f"{tt}/observability")
pkg("torchtitan.observability.structured_logger")
pkg("torchtitan.config", f"{tt}/config")
pkg("torchtitan.distributed", f"{tt}/distributed")
configs = load("torchtitan.config.configs", f"{tt}/config/configs.py")
configurable = load("torchtitan.config.configurable", f"{tt}/config/configurable.py")
sys.modules["torchtitan.config"].Configurable = configurable.Configurable
manager = load("torchtitan.config.manager", f"{tt}/config/manager.py")
ac = load("torchtitan.distributed.activation_checkpoint", f"{tt}/distributed/activation_checkpoint.py")

import tyro  # noqa: E402


@dataclasses.dataclass(kw_only=True, slots=True)
class Config:
    """The sections of Trainer.Config (trainer.py:70-116) a plan sets."""
    training: configs.TrainingConfig = dataclasses.field(default_factory=configs.TrainingConfig)
    parallelism: configs.ParallelismConfig = dataclasses.field(default_factory=configs.ParallelismConfig)
    activation_checkpoint: ac.ActivationCheckpointingConfig = dataclasses.field(default_factory=ac.SelectiveAC.Config)
    compile: configs.CompileConfig = dataclasses.field(default_factory=configs.CompileConfig)


registry = tyro.constructors.ConstructorRegistry()
manager.ConfigManager.register_tyro_rules(registry)
out = []
for args in json.load(sys.stdin):
    try:
        c = tyro.cli(Config, args=args, default=Config(), registry=registry, console_outputs=False)
        d = {"training": {f.name: getattr(c.training, f.name) for f in dataclasses.fields(c.training)},
             "parallelism": {f.name: getattr(c.parallelism, f.name) for f in dataclasses.fields(c.parallelism)},
             "compile": c.compile.enable,
             "activation_checkpoint": None if c.activation_checkpoint is None else type(c.activation_checkpoint).__qualname__}
        out.append(d)
    except BaseException as e:  # tyro exits on a parse error
        out.append({"error": f"{type(e).__name__}: {e}"})
print(json.dumps(out, default=str))
