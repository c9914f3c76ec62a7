"""safetensors files from numpy arrays and back, for the scripts that compare
braid with PyTorch (zero_vs_torch.py, local_sgd_vs_torch.py) through files the
braid side reads with braid/base/safetensors.h."""
import json
import struct

import numpy as np


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        dtype = {np.float32: "F32", np.int64: "I64"}[a.dtype.type]
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        b, e = spec["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + b:8 + n + e], dtype=np.float32).reshape(spec["shape"])
    return out
