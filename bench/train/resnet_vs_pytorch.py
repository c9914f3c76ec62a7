#!/usr/bin/python3
"""ResNet-18 training images/s: `braid train` against PyTorch eager, same run.

    /usr/bin/python3 bench/train/resnet_vs_pytorch.py [--threads 1,2] [--cases 28:32,224:8]
        [--reps 3] [--measure 10] [--warmup 24] [--braid build/bin/braid]

Cases are SIZE:BATCH. 28: the small stem (3x3/1 conv, no max pool) on
Fashion-MNIST, examples/configs/resnet18_fashion.toml as braid trains it;
224: the ImageNet stem on 3x224x224 images, 1000 classes (braid: data.name =
synthetic; PyTorch: one random batch). Both sides: torchvision's ResNet-18,
SGD with momentum 0.9, lr 0.01, constant, no augmentation, no evaluation.

PyTorch runs as Debian's python3-torch (1.13, /usr/bin/python3) and, when
.venv-bench holds one, PyTorch 2.x from PyPI (scripts/setup --bench), each in
its own process with torch.set_num_threads(T); its data is a tensor in memory
(slices of a shuffled index), PyTorch's fastest way to feed it. braid runs
`braid train` as shipped (its loader on a background thread).

Each run times every step and its figure is the median of its last --measure
steps. braid first runs --warmup steps: its convolution autotuner measures
up to 8 candidates per layer shape and pass on the real work, and a shape met
once a step settles after about 20 steps (2 threads; fewer at 1). PyTorch
drops its first 3 (allocator and oneDNN caches). The runs alternate
(braid, then each PyTorch) --reps times, and the table shows the median of
each side's run figures and braid's ratio to each PyTorch. Results go to
bench/results/resnet_vs_pytorch-<time>.json.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FMNIST = "/usr/share/datasets/fashion-mnist"


# ---- the PyTorch side (run as `resnet_vs_pytorch.py --worker ...` under each interpreter) ----

def torch_worker(size, batch, threads, steps):
    import gzip
    import struct

    import numpy as np
    import torch
    import torchvision

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    if size == 28:
        m = torchvision.models.resnet18(num_classes=10)
        m.conv1 = torch.nn.Conv2d(1, 64, 3, 1, 1, bias=False)
        m.maxpool = torch.nn.Identity()

        def idx(path):
            with gzip.open(path, "rb") as f:
                data = f.read()
            dims = struct.unpack(">" + "I" * data[3], data[4:4 + 4 * data[3]])
            return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * data[3]).reshape(dims)

        x = torch.from_numpy((idx(f"{FMNIST}/train-images-idx3-ubyte.gz").astype(np.float32) / 255 - 0.2860) / 0.3530)
        x = x.unsqueeze(1).contiguous()
        y = torch.from_numpy(idx(f"{FMNIST}/train-labels-idx1-ubyte.gz").astype(np.int64))
        order = torch.randperm(x.shape[0])

        def batch_at(s):
            i = order[s * batch:(s + 1) * batch]
            return x[i], y[i]
    else:
        m = torchvision.models.resnet18(num_classes=1000)
        xb, yb = torch.randn(batch, 3, size, size), torch.randint(0, 1000, (batch,))

        def batch_at(s):
            return xb, yb
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    times = []
    for s in range(steps):
        t = time.perf_counter()
        xs, ys = batch_at(s)
        loss = torch.nn.functional.cross_entropy(m(xs), ys)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t)
    print(json.dumps({"step_s": times, "version": torch.__version__}))


# ---- the driver ----

def braid_run(braid, size, batch, threads, steps):
    with tempfile.TemporaryDirectory() as out:
        if size == 28:
            cfg = [os.path.join(ROOT, "examples/configs/resnet18_fashion.toml"), "--set", "data.augment=false"]
        else:
            cfg = [os.path.join(ROOT, "examples/configs/resnet50_imagenet.toml"), "--set", "model.depth=18",
                   "--set", "model.zero_init_residual=false", "--set", f"data.shape=3x{size}x{size}"]
        cmd = [braid, "train", *cfg, "--set", f"train.max_steps={steps}", "--set", f"train.batch_size={batch}",
               "--set", f"train.threads={threads}", "--set", "train.eval_every=0", "--set", "train.log_every=1",
               "--set", "train.progress=off", "--set", "optim.lr=0.01", "--set", "optim.weight_decay=0",
               "--set", "optim.schedule=constant", "--set", "optim.warmup_steps=0", "--set", f"train.out_dir={out}"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stdout}\n{p.stderr}")
        with open(os.path.join(out, "metrics.jsonl")) as f:
            rows = [json.loads(line) for line in f]
    return [r["step_ms"] / 1000 for r in rows if r.get("event") == "train"]


def torch_run(python, size, batch, threads, steps):
    cmd = [python, os.path.abspath(__file__), "--worker", "--size", str(size), "--batch", str(batch), "--threads",
           str(threads), "--steps", str(steps)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": "1"}
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])["step_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--size", type=int, default=28)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--braid", default=os.path.join(ROOT, "build/bin/braid"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--cases", default="28:32,224:8")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--measure", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=24)
    ap.add_argument("--steps", type=int, default=0, help=argparse.SUPPRESS)  # the worker's step count
    a = ap.parse_args()
    if a.worker:
        return torch_worker(a.size, a.batch, int(a.threads), a.steps)

    torches = {"torch 1.13": "/usr/bin/python3"}
    bench_py = os.path.join(ROOT, ".venv-bench/bin/python")
    if os.path.exists(bench_py):
        v = subprocess.run([bench_py, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
        if v.returncode == 0:
            torches[f"torch {v.stdout.strip()}"] = bench_py
    rows = []
    print(f"{'case':>7} {'thr':>3} | {'braid img/s':>11} | " +
          " | ".join(f"{n:>18} img/s  ratio" for n in torches), flush=True)
    for case in a.cases.split(","):
        size, batch = map(int, case.split(":"))
        for threads in map(int, a.threads.split(",")):
            runs = {"braid": []}
            runs.update({n: [] for n in torches})
            for _ in range(a.reps):
                steps = braid_run(a.braid, size, batch, threads, a.warmup + a.measure)[-a.measure:]
                runs["braid"].append(batch / statistics.median(steps))
                for n, py in torches.items():
                    steps = torch_run(py, size, batch, threads, 3 + a.measure)[-a.measure:]
                    runs[n].append(batch / statistics.median(steps))
            med = {n: statistics.median(v) for n, v in runs.items()}
            ratios = {n: med["braid"] / med[n] for n in torches}
            rows.append({"size": size, "batch": batch, "threads": threads, "images_per_s": med, "runs": runs,
                         "ratio": ratios})
            print(f"{size:>3}x{size:<3} {threads:>3} | {med['braid']:>11.1f} | " +
                  " | ".join(f"{med[n]:>24.1f} {ratios[n]:>6.2f}" for n in torches), flush=True)
    os.makedirs(os.path.join(ROOT, "bench/results"), exist_ok=True)
    stamp = datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(ROOT, f"bench/results/resnet_vs_pytorch-{stamp}.json")
    with open(path, "w") as f:
        json.dump({"measure": a.measure, "warmup": a.warmup, "reps": a.reps, "load_average": os.getloadavg(),
                   "cpu_count": os.cpu_count(), "rows": rows}, f, indent=2)
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
