#!/usr/bin/python3
"""Causal attention, forward+backward: braid's fused op against braid's
composed path and PyTorch 2.x's F.scaled_dot_product_attention(is_causal=True),
in one run.

Each (shape, threads) runs every implementation in its own process, in turn,
--reps times (the order alternates every round, so each side meets the same
machine load); a process times --iters iterations after --warmup and reports
the median iteration. The figure per implementation is the median over the
rounds, of wall time and of process CPU time (on a shared machine the CPU time
of a 1-thread run is what time-slicing by other processes does not inflate).

  braid fused:    scaled_dot_product_attention on slices of a packed
                  [B, T, 3 H D] projection viewed as [B, T, H, D]
  braid composed: matmul, masked_fill, softmax, matmul on [B H, T, D]
  torch sdpa:     q, k, v [B, T, H, D] leaves, transpose(1, 2) (as nanoGPT),
                  F.scaled_dot_product_attention(is_causal=True)

  /usr/bin/python3 bench/ops/attention_vs_torch.py [--bin build/bench/ops/braid_attention_bench]
        [--python .venv-bench/bin/python] [--reps 5] [--out bench/results/attention.json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPES = [(8, 6, 256, 64), (1, 12, 2048, 64)]  # (B, H, T, D): the small GPT, one long sequence

TORCH_WORKER = r"""
import json, statistics, sys, time
import torch
import torch.nn.functional as F
b, h, t, d, threads, iters, warmup = (int(x) for x in sys.argv[1:8])
torch.set_num_threads(threads)
torch.manual_seed(0)
q, k, v = ((torch.rand(b, t, h, d) * 2 - 1).requires_grad_() for _ in range(3))
g = torch.rand(b, h, t, d) * 2 - 1
wall, cpu = [], []
for i in range(warmup + iters):
    for x in (q, k, v):
        x.grad = None
    t0, c0 = time.perf_counter(), time.process_time()
    F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True).backward(g)
    if i >= warmup:
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
print(json.dumps({"impl": "torch", "seconds": wall, "cpu_seconds": cpu, "version": torch.__version__}))
"""


def run(cmd, env):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, timeout=3600).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bench", "ops", "braid_attention_bench"))
    p.add_argument("--python", default=os.path.join(ROOT, ".venv-bench", "bin", "python"))
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "attention.json"))
    a = p.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1")  # each side sets its own pool size
    results = []
    for b, h, t, d in SHAPES:
        # Long sequences: fewer iterations (one takes seconds on one thread).
        iters, warmup = (5, 2) if t <= 512 else (2, 1)
        for threads in [int(x) for x in a.threads.split(",")]:
            shape = ["--b", str(b), "--h", str(h), "--t", str(t), "--d", str(d)]
            impls = {
                "fused": [a.bin, "--impl", "fused", *shape, "--threads", str(threads), "--iters", str(iters),
                          "--warmup", str(warmup)],
                "composed": [a.bin, "--impl", "composed", *shape, "--threads", str(threads), "--iters", str(iters),
                             "--warmup", str(warmup)],
                "torch": [a.python, "-c", TORCH_WORKER, str(b), str(h), str(t), str(d), str(threads), str(iters),
                          str(warmup)],
            }
            runs = {name: [] for name in impls}
            version = None
            for rep in range(a.reps):
                order = list(impls) if rep % 2 == 0 else list(reversed(impls))
                for name in order:
                    r = run(impls[name], env)
                    version = r.get("version", version)
                    runs[name].append((statistics.median(r["seconds"]), statistics.median(r["cpu_seconds"]),
                                       r.get("peak_bytes")))
            row = {"b": b, "h": h, "t": t, "d": d, "threads": threads, "torch_version": version}
            for name, rs in runs.items():
                row[name] = {"wall_ms": 1e3 * statistics.median(x[0] for x in rs),
                             "cpu_ms": 1e3 * statistics.median(x[1] for x in rs)}
                if rs[0][2] is not None:
                    row[name]["peak_mb"] = rs[0][2] / 2**20
            results.append(row)
            f, c, tt = row["fused"], row["composed"], row["torch"]
            print(f"B={b} H={h} T={t} D={d} threads={threads}: fused {f['wall_ms']:.1f} ms "
                  f"(cpu {f['cpu_ms']:.1f}), composed {c['wall_ms']:.1f} ms (cpu {c['cpu_ms']:.1f}), "
                  f"torch {tt['wall_ms']:.1f} ms (cpu {tt['cpu_ms']:.1f}); "
                  f"composed/fused {c['wall_ms'] / f['wall_ms']:.2f}x, torch/fused {tt['wall_ms'] / f['wall_ms']:.2f}x "
                  f"(cpu {tt['cpu_ms'] / f['cpu_ms']:.2f}x); peak MiB fused {f.get('peak_mb', 0):.0f}, "
                  f"composed {c.get('peak_mb', 0):.0f}", flush=True)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as fh:
        json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
