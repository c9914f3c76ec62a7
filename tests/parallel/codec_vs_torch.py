#!/usr/bin/python3
"""braid's gradient codecs against PyTorch's DDP communication hooks (2
processes, gloo on loopback), fed the same bucket of gradients for a few steps:

  fp16_compress_hook  braid's fp16 codec must give bit-identical averages
  powerSGD_hook       with the same starting Q (set in PyTorch's state before
                      its first compressed step), braid's averages and error
                      memories must match to float32 tolerance, through the
                      plain all-reduce warm-up, the first compressed step and
                      warm-started ones

The hooks are called with a stand-in for DDP's GradBucket (buffer, index,
gradients as views of the buffer, is_last), which is all they read. The
bucket mixes matrices worth compressing (two of one shape, so PyTorch's
grouping by shape matters), a vector and a matrix too small to compress.

    codec_vs_torch.py BRAID_CODEC_REFERENCE [--steps T] [--warmup S]

Exit 0 when they agree, 1 when not, 77 when PyTorch is missing (skipped).
"""
import argparse
import os
import socket
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook as psgd
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_np import read_safetensors, write_safetensors  # noqa: E402

RANKS, RANK = 2, 2
SHAPES = [(16, 12), (12,), (8, 20), (3, 5), (16, 12)]


class Bucket:
    """What the hooks read of dist.GradBucket."""

    def __init__(self, flat):
        self.flat = flat

    def buffer(self):
        return self.flat

    def index(self):
        return 0

    def is_last(self):
        return True

    def gradients(self):
        out, at = [], 0
        for s in SHAPES:
            n = int(np.prod(s))
            out.append(self.flat[at:at + n].view(*s))
            at += n
        return out


def q_size():
    total = 0
    for s in SHAPES:
        n, m = s[0], int(np.prod(s)) // s[0]
        r = min(n, m, RANK)
        if (n + m) * r * 2 < n * m:
            total += m * r
    return total


def p_size():
    total = 0
    for s in SHAPES:
        n, m = s[0], int(np.prod(s)) // s[0]
        r = min(n, m, RANK)
        if (n + m) * r * 2 < n * m:
            total += n * r
    return total


def torch_rank(rank, port, grads, q0, steps, warmup, result):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=RANKS)
    out = {}
    for s in range(steps):
        b = Bucket(torch.from_numpy(grads[f"g.{rank}.{s}"].copy()))
        default_hooks.fp16_compress_hook(None, b).wait()
        out[f"fp16.{rank}.{s}"] = b.flat.numpy().copy()
    state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=RANK, start_powerSGD_iter=warmup,
                               min_compression_rate=2, use_error_feedback=True, warm_start=True)
    state.p_memory_dict[0] = torch.zeros(p_size())
    state.q_memory_dict[0] = torch.from_numpy(q0.copy())
    n = grads["g.0.0"].size
    for s in range(steps):
        b = Bucket(torch.from_numpy(grads[f"g.{rank}.{s}"].copy()))
        psgd.powerSGD_hook(state, b).wait()
        out[f"powersgd.{rank}.{s}"] = b.flat.numpy().copy()
        err = state.error_dict.get(0)
        out[f"err.{rank}.{s}"] = err.numpy().copy() if err is not None else np.zeros(n, np.float32)
    write_safetensors(result + f".{rank}", out)
    dist.barrier()  # neither rank leaves while the other still runs a hook's last all-reduce
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("braid_reference")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()
    rng = np.random.default_rng(11)
    n = sum(int(np.prod(s)) for s in SHAPES)
    grads = {f"g.{r}.{s}": rng.standard_normal(n).astype(np.float32) for r in range(RANKS) for s in range(a.steps)}
    q0 = rng.standard_normal(q_size()).astype(np.float32)
    shapes = np.array([[s[0], int(np.prod(s)) // s[0]] for s in SHAPES], dtype=np.int64)
    with tempfile.TemporaryDirectory() as tmp:
        inputs, theirs = os.path.join(tmp, "in.safetensors"), os.path.join(tmp, "torch.safetensors")
        write_safetensors(inputs, {**grads, "q0": q0, "shapes": shapes})
        mp.spawn(torch_rank, args=(free_port(), grads, q0, a.steps, a.warmup, theirs), nprocs=RANKS, join=True)
        expected = {}
        for r in range(RANKS):
            expected.update(read_safetensors(theirs + f".{r}"))
        ours = os.path.join(tmp, "braid.safetensors")
        subprocess.run([a.braid_reference, inputs, ours, "--ranks", str(RANKS), "--steps", str(a.steps),
                        "--warmup", str(a.warmup)], check=True)
        got = read_safetensors(ours)
        fp16_same = all(np.array_equal(got[k], v) for k, v in expected.items() if k.startswith("fp16."))
        worst = max(float(np.abs(got[k] - v).max()) for k, v in expected.items() if not k.startswith("fp16."))
        mem = max(float(np.abs(v).max()) for k, v in expected.items() if k.startswith("err."))
        print(f"fp16_compress_hook: braid's averages {'bit-identical' if fp16_same else 'DIFFER'} over "
              f"{RANKS} ranks x {a.steps} steps")
        print(f"powerSGD_hook (rank {RANK}, warm-up {a.warmup}): max |braid - torch| = {worst:.2e} over averages "
              f"and error memories (memories reach {mem:.2e})")
        if not fp16_same:
            return 1
        if mem == 0.0:
            print("FAIL: PyTorch's error memory stayed zero; the comparison would not see it")
            return 1
        if worst > a.tol:
            print(f"FAIL: differences above {a.tol}")
            return 1
        print("PASS")
        return 0


if __name__ == "__main__":
    sys.exit(main())
