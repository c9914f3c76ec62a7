"""Training through parameter servers: the servers hold the weights and the
optimizer (momentum here); each worker trains on its shard of the data,
pushes its gradients and pulls fresh weights every step under bsp
(synchronous SGD; asp and ssp let workers run apart). The launcher runs
`braid ps server` as the servers and this program as the workers
(examples/parameter_server.cc is the C++ counterpart).

    python -m braid.launch --servers 1 --workers 2 examples/python/parameter_server.py [steps [out_dir]]
"""
import sys

import braid

max_steps = int(sys.argv[1]) if len(sys.argv) > 1 else 0
out_dir = sys.argv[2] if len(sys.argv) > 2 else "runs/parameter_server_py"  # a run there before is continued
summary = braid.train(
    {"train": {"epochs": 1, "max_steps": max_steps, "batch_size": 64, "log_every": 100, "progress": "lines",
               "out_dir": out_dir},
     "model": {"name": "mlp", "hidden": 256},
     "optim": {"name": "sgd", "lr": 0.05, "momentum": 0.9},
     "data": {"name": "fashion_mnist", "path": "/usr/share/datasets/fashion-mnist"},
     "parallel": {"strategy": "ps"},
     "ps": {"consistency": "bsp", "updater": "momentum"}},
    report="lines")
print(f"worker: trained {summary['steps']} steps: final loss {summary['final_loss']:.4f}, "
      f"test accuracy {summary.get('eval', {}).get('top1', float('nan')):.4f}", flush=True)
