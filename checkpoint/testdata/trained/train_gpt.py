#!/usr/bin/python3
"""Train a small byte-level GPT on CPU and save what the codec benchmark reads.

Run from the repository root:  /usr/bin/python3 checkpoint/testdata/trained/train_gpt.py
Corpus: the Python standard library's own sources (Lib/*.py of the interpreter
that runs this), read as bytes. Outputs, next to this script:
  weights.bf16.safetensors  the trained weights in BF16 (what a checkpoint stores)
  adam.fp32.safetensors     AdamW's exp_avg and exp_avg_sq in FP32
  model.pt                  torch.save of a few BF16/FP32 tensors (the zip format)
  train.log                 the loss curve (proof the weights left initialisation)
"""
import glob, math, os, sys, time
import torch
import torch.nn as nn
from torch.nn import functional as F

torch.manual_seed(17)
torch.set_num_threads(2)
HERE = os.path.dirname(os.path.abspath(__file__))
D, LAYERS, HEADS, CTX, BATCH = int(os.environ.get("D", 64)), 2, 4, 32, 8
STEPS = int(os.environ.get("STEPS", 200))

lib = os.path.dirname(os.__file__)
data = b"".join(open(p, "rb").read() for p in sorted(glob.glob(os.path.join(lib, "*.py"))))
data = torch.frombuffer(bytearray(data), dtype=torch.uint8).long()

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, HEADS, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
    def forward(self, x):
        mask = torch.triu(torch.ones(x.size(1), x.size(1), dtype=torch.bool), 1)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))

class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(256, D), nn.Embedding(CTX, D)
        self.blocks = nn.Sequential(*[Block() for _ in range(LAYERS)])
        self.ln, self.head = nn.LayerNorm(D), nn.Linear(D, 256, bias=False)
    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.size(1)))
        return self.head(self.ln(self.blocks(x)))

model = GPT()
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
log = open(os.path.join(HERE, "train.log"), "w")
t0 = time.time()
for step in range(STEPS + 1):
    ix = torch.randint(len(data) - CTX - 1, (BATCH,))
    x = torch.stack([data[i:i + CTX] for i in ix])
    y = torch.stack([data[i + 1:i + CTX + 1] for i in ix])
    loss = F.cross_entropy(model(x).view(-1, 256), y.view(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if step % 10 == 0:
        print(f"step {step} loss {loss.item():.4f} t {time.time() - t0:.0f}s", file=log, flush=True)

import json, struct  # noqa: E402

def save_file(tensors, path):
    """The safetensors format, written by hand (the package is not installed):
    u64 little-endian header length, JSON header, then the raw tensors."""
    names = sorted(tensors)
    dt = {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32"}
    hdr, off, blobs = {}, 0, []
    for n in names:
        t = tensors[n].contiguous()
        b = t.view(torch.uint8).numpy().tobytes() if t.dim() else t.reshape(1).view(torch.uint8).numpy().tobytes()
        hdr[n] = {"dtype": dt[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
sd = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
save_file(sd, os.path.join(HERE, "weights.bf16.safetensors"))
adam = {}
names = {p: n for n, p in model.named_parameters()}
for p, st in opt.state.items():
    n = names[p]
    if True:
        adam[n + ".exp_avg"] = st["exp_avg"].contiguous()
        adam[n + ".exp_avg_sq"] = st["exp_avg_sq"].contiguous()
save_file(adam, os.path.join(HERE, "adam.fp32.safetensors"))
torch.save({"bf16": sd["blocks.0.mlp.0.weight"], "fp32": adam["blocks.0.mlp.0.weight.exp_avg_sq"],
            "step": STEPS}, os.path.join(HERE, "model.pt"))
print("done", file=log)
