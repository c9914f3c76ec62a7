"""Data parallelism over all-reduce, as PyTorch DDP does it, with a model
written in Python: every rank keeps the whole model and trains on its own
shard of the data; braid's plan averages the gradients in ~1 MiB buckets
during backward, each bucket's all-reduce starting as soon as its gradients
are final, and checks before the first step that every rank trains the same
model (examples/data_parallel.cc is the C++ counterpart).

    python -m braid.launch -n 2 examples/python/data_parallel.py [steps [out_dir]]
    mpirun -n 2 python examples/python/data_parallel.py          # unchanged under mpirun or srun
"""
import sys

import braid
from braid import nn

max_steps = int(sys.argv[1]) if len(sys.argv) > 1 else 0
out_dir = sys.argv[2] if len(sys.argv) > 2 else "runs/data_parallel_py"  # a run there before is continued


class MLP(nn.Module):
    """784-256-256-10 in Python: its forward runs inside braid's training step."""

    def __init__(self, classes):
        super().__init__()
        g = braid.Generator(0)  # the same weights on every rank (rank 0's are broadcast anyway)
        self.hidden1 = nn.Linear(784, 256, generator=g)
        self.hidden2 = nn.Linear(256, 256, generator=g)
        self.out = nn.Linear(256, classes, generator=g)

    def forward(self, x):
        h = braid.relu(self.hidden1(x.flatten(1)))
        return self.out(braid.relu(self.hidden2(h)))


config = {
    "train": {"epochs": 1, "max_steps": max_steps, "batch_size": 64, "log_every": 100, "progress": "lines",
              "out_dir": out_dir},
    "optim": {"name": "sgd", "lr": 0.05, "momentum": 0.9},
    "data": {"name": "fashion_mnist", "path": "/usr/share/datasets/fashion-mnist"},
    "parallel": {"strategy": "allreduce"},
}
trainer = braid.Trainer(config, model=lambda input_shape, classes: MLP(classes), report="lines")
s = trainer.fit()
comm = trainer.comm
print(f"rank {comm.rank} of {comm.size} ({trainer.plan.describe().split(';')[0]}): trained {s['steps']} steps: "
      f"final loss {s['final_loss']:.4f}, test accuracy {s.get('eval', {}).get('top1', float('nan')):.4f}", flush=True)
