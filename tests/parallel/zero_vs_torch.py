#!/usr/bin/python3
"""braid's ZeRO against an independent implementation: PyTorch's
torch.distributed.optim.ZeroRedundancyOptimizer (2 processes, gloo on
loopback, DDP averaging the gradients) and braid's ZeRO stage 1 (and 2, 3)
train the same MLP from the same weights on the same batches with Adam; the
final weights must agree to float32 tolerance.

    zero_vs_torch.py BRAID_ZERO_REFERENCE [--steps K] [--stages 1,2,3]

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
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_np import read_safetensors, write_safetensors  # noqa: E402

RANKS, ROWS, INPUTS, LR = 2, 16, 8, 1e-2


def model():
    return torch.nn.Sequential(torch.nn.Linear(INPUTS, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16),
                               torch.nn.ReLU(), torch.nn.Linear(16, 4))


def torch_rank(rank, port, init, x, y, result):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=RANKS)
    net = model()
    net.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in init.items()})
    ddp = DistributedDataParallel(net)
    opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.Adam, lr=LR)
    per = ROWS // RANKS
    for s in range(x.shape[0]):
        opt.zero_grad()
        xs = torch.from_numpy(x[s, rank * per:(rank + 1) * per].copy())
        ys = torch.from_numpy(y[s, rank * per:(rank + 1) * per].copy())
        torch.nn.functional.cross_entropy(ddp(xs), ys).backward()
        opt.step()
    if rank == 0:
        write_safetensors(result, {k: v.detach().numpy() for k, v in net.state_dict().items()})
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("braid_reference")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--stages", default="1,2,3")
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
        mp.spawn(torch_rank, args=(free_port(), init, x, y, theirs), nprocs=RANKS, join=True)
        expected = read_safetensors(theirs)
        moved = max(float(np.abs(expected[k] - init[k]).max()) for k in init)
        worst_all = 0.0
        for stage in [int(s) for s in a.stages.split(",")]:
            ours = os.path.join(tmp, f"braid{stage}.safetensors")
            subprocess.run([a.braid_reference, inputs, ours, "--ranks", str(RANKS), "--stage", str(stage),
                            "--lr", str(LR)], check=True)
            got = read_safetensors(ours)
            worst = max(float(np.abs(got[k] - expected[k]).max()) for k in expected)
            worst_all = max(worst_all, worst)
            print(f"stage {stage}: max |braid - torch ZeroRedundancyOptimizer| = {worst:.2e} after {a.steps} Adam "
                  f"steps on {RANKS} ranks (weights moved up to {moved:.2e})")
        if worst_all > a.tol:
            print(f"FAIL: differences above {a.tol}")
            return 1
        print("PASS")
        return 0


if __name__ == "__main__":
    sys.exit(main())
