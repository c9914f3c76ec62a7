#!/usr/bin/python3
"""braid's local SGD against an independent implementation: PyTorch's
post-local SGD (2 processes, gloo on loopback; the first W steps' gradients
all-reduced as DDP's post_localSGD_hook does before its switch, then
torch.distributed.algorithms.model_averaging's PeriodicModelAverager with the
same period and warm-up) and braid's local_sgd strategy train the same MLP
from the same weights on the same batches with SGD + momentum; every rank's
final weights must agree to float32 tolerance (both leave the replicas apart
after the last step, so the test also checks where the averagings fell).

    local_sgd_vs_torch.py BRAID_LOCAL_SGD_REFERENCE [--steps K] [--period H] [--warmup W]

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
    from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_np import read_safetensors, write_safetensors  # noqa: E402

RANKS, ROWS, INPUTS, LR = 2, 16, 8, 0.05


def model():
    return torch.nn.Sequential(torch.nn.Linear(INPUTS, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def torch_rank(rank, port, init, x, y, period, warmup, result):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=RANKS)
    net = model()
    net.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in init.items()})
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=0.9)
    averager = PeriodicModelAverager(period=period, warmup_steps=warmup)
    per = ROWS // RANKS
    for s in range(x.shape[0]):
        opt.zero_grad()
        xs = torch.from_numpy(x[s, rank * per:(rank + 1) * per].copy())
        ys = torch.from_numpy(y[s, rank * per:(rank + 1) * per].copy())
        torch.nn.functional.cross_entropy(net(xs), ys).backward()
        if s < warmup:  # post-local SGD before its switch: DDP's gradient all-reduce
            for p in net.parameters():
                dist.all_reduce(p.grad)
                p.grad /= RANKS
        opt.step()
        averager.average_parameters(net.parameters())
    write_safetensors(result + f".{rank}", {f"r{rank}.{k}": v.detach().numpy() for k, v in net.state_dict().items()})
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("braid_reference")
    ap.add_argument("--steps", type=int, default=13)
    ap.add_argument("--period", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--tol", type=float, default=1e-5)
    a = ap.parse_args()
    torch.manual_seed(1234)
    init = {k: v.detach().numpy().copy() for k, v in model().state_dict().items()}
    rng = np.random.default_rng(7)
    x = rng.standard_normal((a.steps, ROWS, INPUTS)).astype(np.float32)
    y = rng.integers(0, 4, (a.steps, ROWS)).astype(np.int64)
    with tempfile.TemporaryDirectory() as tmp:
        inputs, theirs = os.path.join(tmp, "in.safetensors"), os.path.join(tmp, "torch.safetensors")
        write_safetensors(inputs, {**init, "data.x": x, "data.y": y})
        mp.spawn(torch_rank, args=(free_port(), init, x, y, a.period, a.warmup, theirs), nprocs=RANKS, join=True)
        expected = {}
        for r in range(RANKS):
            expected.update(read_safetensors(theirs + f".{r}"))
        ours = os.path.join(tmp, "braid.safetensors")
        subprocess.run([a.braid_reference, inputs, ours, "--ranks", str(RANKS), "--period", str(a.period),
                        "--warmup", str(a.warmup), "--lr", str(LR)], check=True)
        got = read_safetensors(ours)
        worst = max(float(np.abs(got[k] - expected[k]).max()) for k in expected)
        apart = max(float(np.abs(expected["r0." + k] - expected["r1." + k]).max()) for k in init)
        moved = max(float(np.abs(expected["r0." + k] - init[k]).max()) for k in init)
        print(f"max |braid - torch post-local SGD| = {worst:.2e} over both ranks after {a.steps} steps (period "
              f"{a.period}, warm-up {a.warmup}); weights moved up to {moved:.2e}, replicas apart by {apart:.2e}")
        if apart == 0.0:
            print("FAIL: the replicas ended equal; the check would not see a misplaced averaging")
            return 1
        if worst > a.tol:
            print(f"FAIL: differences above {a.tol}")
            return 1
        print("PASS")
        return 0


if __name__ == "__main__":
    sys.exit(main())
