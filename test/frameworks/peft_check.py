"""Load trainrun's --format peft configs into Hugging Face PEFT's own config
classes (LoraConfig, PrefixTuningConfig, PromptTuningConfig, IA3Config), on
CPU and without transformers or accelerate: peft/config.py needs only
PushToHubMixin and http_user_agent from transformers.utils and hf_hub_download
from huggingface_hub, which are stubbed (never called while a config is built);
peft.utils is reduced to its peft_types.py and CONFIG_NAME.

Each class is called with the planned keyword arguments directly (not
PeftConfig.from_peft_type, which drops unknown keys with a warning), with
warnings as errors, so an unknown or mistyped key fails.

usage: python3 peft_check.py PEFT_DIR < cases.json
cases.json: [{"peft_config": {...}, "accelerate": {...}}, ...]; prints one JSON
object per case: the class, to_dict() of the built config, and the accelerate
keys PEFT's examples/sft/configs/fsdp_config*.yaml do not have; or {"error"}.
"""
import dataclasses, importlib.util, json, os, sys, types, warnings

root = sys.argv[1]
src = os.path.join(root, "src", "peft")


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


tr = pkg("transformers")
tu = pkg("transformers.utils")
tr.utils = tu


class PushToHubMixin:  # only its push_to_hub, never called here
    pass


tu.PushToHubMixin = PushToHubMixin
tu.http_user_agent = lambda *a, **k: ""
hh = pkg("huggingface_hub")
hh.hf_hub_download = lambda *a, **k: None

try:
    import packaging.version  # noqa: F401
except ImportError:  # Debian's python3-torch box lacks it; config.py asks only Version(v).dev
    pv = pkg("packaging.version")
    pkg("packaging").version = pv

    class Version:
        def __init__(self, v):
            self.dev = v.split(".dev")[1] if ".dev" in v else None

    pv.Version = Version

peft = pkg("peft", src)
init = open(os.path.join(src, "__init__.py")).read()
peft.__version__ = init.split('__version__ = "')[1].split('"')[0]
utils = pkg("peft.utils", os.path.join(src, "utils"))
types_mod = load("peft.utils.peft_types", os.path.join(src, "utils", "peft_types.py"))
utils.PeftType, utils.TaskType = types_mod.PeftType, types_mod.TaskType
utils.CONFIG_NAME = "adapter_config.json"
config = load("peft.config", os.path.join(src, "config.py"))
pkg("peft.tuners", os.path.join(src, "tuners"))

classes = {}
for peft_type, sub, cls in [("LORA", "lora", "LoraConfig"), ("PREFIX_TUNING", "prefix_tuning", "PrefixTuningConfig"),
                            ("PROMPT_TUNING", "prompt_tuning", "PromptTuningConfig"), ("IA3", "ia3", "IA3Config")]:
    pkg("peft.tuners." + sub, os.path.join(src, "tuners", sub))
    mod = load("peft.tuners.%s.config" % sub, os.path.join(src, "tuners", sub, "config.py"))
    classes[peft_type] = getattr(mod, cls)


def yaml_keys(path):
    """Top-level and fsdp_config keys of PEFT's example accelerate configs."""
    top, fsdp, section = set(), set(), None
    for line in open(path):
        if not line.strip() or line.lstrip().startswith("#") or ":" not in line:
            continue
        key = line.split(":")[0]
        if not line.startswith(" "):
            top.add(key.strip())
            section = key.strip()
        elif section == "fsdp_config":
            fsdp.add(key.strip())
    return top, fsdp


known_top, known_fsdp = set(), set()
cfgdir = os.path.join(root, "examples", "sft", "configs")
for name in sorted(os.listdir(cfgdir)):
    if name.startswith("fsdp_config") and name.endswith(".yaml"):
        t, f = yaml_keys(os.path.join(cfgdir, name))
        known_top |= t
        known_fsdp |= f


def plain(v):
    if isinstance(v, (set, frozenset)):
        return sorted(v)
    if hasattr(v, "value"):
        return v.value
    return v


for case in json.load(sys.stdin):
    try:
        kw = dict(case["peft_config"])
        cls = classes[kw.pop("peft_type")]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            cfg = cls(**kw)
        d = {f.name: plain(getattr(cfg, f.name)) for f in dataclasses.fields(cfg) if f.name in case["peft_config"] or f.name == "peft_type"}
        acc = case.get("accelerate", {})
        unknown = sorted(set(acc) - known_top) + sorted("fsdp_config." + k for k in set(acc.get("fsdp_config", {})) - known_fsdp)
        print(json.dumps({"class": cls.__name__, "config": d, "unknown_accelerate_keys": unknown}))
    except Exception as e:  # noqa: BLE001 - reported to the Go test
        print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}))
