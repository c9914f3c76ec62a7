"""PyTorch side of bench/train_vs_pytorch: the same models, init distribution,
optimizer and data as `braid train`, one process per configuration.

The whole dataset is decoded into one tensor up front and batches are slices
of a shuffled index (no DataLoader, no worker processes): PyTorch's fastest
way to feed a small in-memory dataset. Prints one JSON object.
--precision bf16 runs forward and loss (and evaluation) under
torch.autocast("cpu", dtype=torch.bfloat16), backward and the step outside
it, as PyTorch's documentation recommends; weights stay f32.
"""
import argparse
import contextlib
import gzip
import json
import resource
import struct
import time

import numpy as np
import torch
import torch.nn as nn

FMNIST = "/usr/share/datasets/fashion-mnist"


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(split):
    x = idx(f"{FMNIST}/{split}-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    x = (x - 0.2860) / 0.3530  # braid's data.normalize
    y = idx(f"{FMNIST}/{split}-labels-idx1-ubyte.gz").astype(np.int64)
    return torch.from_numpy(x).unsqueeze(1).contiguous(), torch.from_numpy(y)


def model(name):
    # torch's default Linear/Conv2d init draws U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    # for weight and bias: the distribution braid's layers use (braid/nn/init.h).
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                             nn.Linear(256, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(1600, 128), nn.ReLU(), nn.Linear(128, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["mlp", "cnn"], required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--eval", action="store_true")
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    x, y = load("train")
    m = model(a.model)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def autocast():
        if a.precision == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    n = x.shape[0]
    steps = 0
    samples = 0
    t0 = time.perf_counter()
    done = False
    for epoch in range(a.epochs):
        perm = torch.randperm(n)
        for i in range(0, n, a.batch):
            idx_b = perm[i:i + a.batch]
            xb, yb = x[idx_b], y[idx_b]
            opt.zero_grad(set_to_none=True)
            with autocast():
                loss = loss_fn(m(xb), yb)
            loss.backward()
            opt.step()
            steps += 1
            samples += xb.shape[0]
            if a.max_steps and steps >= a.max_steps:
                done = True
                break
        if done:
            break
    loss_value = float(loss)
    seconds = time.perf_counter() - t0
    out = {"framework": "pytorch", "model": a.model, "batch": a.batch, "threads": a.threads, "steps": steps, "precision": a.precision,
           "samples_per_s": samples / seconds, "train_seconds": seconds, "final_loss": loss_value,
           "torch": torch.__version__}
    if a.eval:
        xt, yt = load("t10k")
        m.eval()
        with torch.no_grad(), autocast():
            out["top1"] = float((m(xt).argmax(1) == yt).float().mean())
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


if __name__ == "__main__":
    main()
