#!/usr/bin/python3
"""Extract the trained FP32 weights of Silero VAD from its ONNX file and
write them as safetensors: FP32 as trained, and cast to BF16 (round to
nearest even, as torch's .to(torch.bfloat16) does), the dtype a BF16
checkpoint of the model holds.

Source: the npm package @ricky0123/vad-web 0.0.31 (ISC), file
dist/silero_vad_v5.onnx, which is Silero VAD v5 (MIT, snakers4/silero-vad):
  npm pack @ricky0123/vad-web@0.0.31 && tar xzf ricky0123-vad-web-0.0.31.tgz
  /usr/bin/python3 extract.py package/dist/silero_vad_v5.onnx
No onnx package is needed: the few protobuf fields read are parsed here.
"""
import json, os, struct, sys

def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1
        v |= (c & 0x7f) << s; s += 7
        if c < 0x80:
            return v, i

def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 1:
            v = b[i:i + 8]; i += 8
        elif wt == 5:
            v = b[i:i + 4]; i += 4
        elif wt == 2:
            n, i = varint(b, i); v = b[i:i + n]; i += n
        else:
            raise ValueError("wire type %d" % wt)
        yield f, wt, v

def tensor(b):
    t = {"dims": [], "type": 0, "name": "", "raw": b"", "floats": b""}
    for f, wt, v in fields(b):
        if f == 1:
            if wt == 2:
                j = 0
                while j < len(v):
                    d, j = varint(v, j); t["dims"].append(d)
            else:
                t["dims"].append(v)
        elif f == 2: t["type"] = v
        elif f == 8: t["name"] = v.decode()
        elif f == 9: t["raw"] = bytes(v)
        elif f == 4 and wt == 2: t["floats"] += bytes(v)
        elif f == 4 and wt == 5: t["floats"] += bytes(v)
    return t

def graph(b, out, prefix):
    for f, wt, v in fields(b):
        if f == 5 and wt == 2:  # initializer
            out.append(tensor(v))
        elif f == 1 and wt == 2:  # node: attributes may hold tensors and subgraphs
            for nf, nwt, nv in fields(v):
                if nf == 5 and nwt == 2:
                    for af, awt, av in fields(nv):
                        if af == 5 and awt == 2: out.append(tensor(av))
                        elif af in (6, 11) and awt == 2: graph(av, out, prefix)

def bf16(f32):
    out = bytearray()
    for (u,) in struct.iter_unpack("<I", f32):
        if (u & 0x7f800000) == 0x7f800000 and u & 0x7fffff:  # NaN stays NaN
            out += struct.pack("<H", (u >> 16) | 0x40)
            continue
        u += 0x7fff + ((u >> 16) & 1)
        out += struct.pack("<H", (u >> 16) & 0xffff)
    return bytes(out)

def save(path, tensors):
    hdr, off, blobs = {}, 0, []
    for name, dtype, shape, data in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data); blobs.append(data)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

model = open(sys.argv[1], "rb").read()
found = []
for f, wt, v in fields(model):
    if f == 7 and wt == 2:
        graph(v, found, "")
f32, seen = [], set()
for i, t in enumerate(found):
    data = t["raw"] or t["floats"]
    n = 1
    for d in t["dims"]: n *= d
    if t["type"] != 1 or n < 64 or len(data) != 4 * n:
        continue  # FP32 weights only; shapes and scalars are not weights
    name = t["name"] or "const.%d" % i
    while name in seen: name += "_"
    seen.add(name)
    f32.append((name, "F32", t["dims"], data))
here = os.path.dirname(os.path.abspath(__file__))
save(os.path.join(here, "silero_vad_v5.fp32.safetensors"), f32)
save(os.path.join(here, "silero_vad_v5.bf16.safetensors"), [(n, "BF16", s, bf16(d)) for n, _, s, d in f32])
print("%d FP32 tensors, %d parameters" % (len(f32), sum(len(d) // 4 for *_, d in f32)))
