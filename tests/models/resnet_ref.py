"""torchvision's ResNet as the reference for tests/models/resnet_test.cc.

    resnet_ref.py DIR...

DIR/case.json       {"depth": 18|34|50, "stem": "imagenet"|"small", "classes": K, "in_channels": C}
DIR/weights.safetensors  braid's model as a torchvision state_dict (models::to_torchvision)
DIR/input.safetensors    x [n, C, h, w], r [n, K]

Builds torchvision.models.resnet<depth>(num_classes=K); the small stem (and
C != 3) replaces conv1 with a 3x3/1 (7x7/2) bias-free conv and maxpool with
an identity, as people adapt it to CIFAR and MNIST. Loads the weights
(strict), then writes DIR/out.safetensors:
  eval_y              model.eval()(x), running statistics (f32)
  eval_grad.<param>   d sum(eval_y * r) / d param, every parameter (f32)
  train_y             model.train()(x), batch statistics (f32; updates the running ones)
  after.<bn>.running_mean / running_var   the running statistics after that forward
  train64_y           the same train-mode forward in f64, from the loaded weights
  grad64.<param>      d sum(train64_y * r) / d param in f64
and DIR/names.json: [[name, shape], ...] of torchvision's state_dict.

Train-mode gradients are compared in f64: with two examples per batch the
batch statistics make them ill-conditioned, and PyTorch's own f32 gradients
differ from its f64 ones by up to 20% of a tensor's largest element in some
layers of ResNet-50 (relu kinks the f32 rounding moves), so no f32 pair of
implementations agrees to 1e-4 there; in eval mode they do.
"""
import copy
import json
import os
import struct
import sys

import numpy as np
import torch
import torchvision

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64}


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
        a = np.frombuffer(raw[8 + n + b:8 + n + e], dtype=DTYPES[spec["dtype"]]).reshape(spec["shape"])
        out[name] = torch.from_numpy(a.copy())
    return out


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        a = np.ascontiguousarray(t.detach().numpy())
        header[name] = {"dtype": {np.float32: "F32", np.float64: "F64"}[a.dtype.type], "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def build(case):
    m = getattr(torchvision.models, "resnet%d" % case["depth"])(num_classes=case["classes"])
    c = case["in_channels"]
    if case["stem"] == "small":
        m.conv1 = torch.nn.Conv2d(c, 64, 3, 1, 1, bias=False)
        m.maxpool = torch.nn.Identity()
    elif c != 3:
        m.conv1 = torch.nn.Conv2d(c, 64, 7, 2, 3, bias=False)
    return m


def main():
    torch.set_num_threads(1)
    for d in sys.argv[1:]:
        run(d)


def run(d):
    with open(os.path.join(d, "case.json")) as f:
        case = json.load(f)
    m = build(case)
    with open(os.path.join(d, "names.json"), "w") as f:
        json.dump([[k, list(v.shape)] for k, v in m.state_dict().items()], f)
    m.load_state_dict(read_safetensors(os.path.join(d, "weights.safetensors")), strict=True)
    m64 = copy.deepcopy(m).double()
    inp = read_safetensors(os.path.join(d, "input.safetensors"))
    x, r = inp["x"], inp["r"]
    out = {}
    m.eval()
    y = m(x)
    (y * r).sum().backward()
    out["eval_y"] = y
    for k, p in m.named_parameters():
        out["eval_grad." + k] = p.grad
    m.train()
    with torch.no_grad():
        out["train_y"] = m(x)
    for k, v in m.state_dict().items():
        if k.endswith("running_mean") or k.endswith("running_var"):
            out["after." + k] = v
    m64.train()
    y = m64(x.double())
    (y * r.double()).sum().backward()
    out["train64_y"] = y
    for k, p in m64.named_parameters():
        out["grad64." + k] = p.grad
    write_safetensors(os.path.join(d, "out.safetensors"), out)


if __name__ == "__main__":
    main()
