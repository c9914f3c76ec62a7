"""Sparse embeddings through parameter servers: logistic regression over
hashed sparse features (libsvm input) as an embedding bag whose table lives
on the servers; each step a worker pulls only the rows its batch touches and
pushes their gradients (asynchronous, AdaGrad on the servers). The trainer's
sparse path (model.name = sparse_linear) runs it, as `braid train
examples/configs/sparse_ps.toml` does (examples/sparse_embeddings.cc writes
the same loop against the parameter-server client in C++).

    python3 scripts/make_sparse_data.py --out /tmp/sparse.libsvm
    python -m braid.launch --servers 1 --workers 2 examples/python/sparse_embeddings.py /tmp/sparse.libsvm [epochs [out_dir]]
"""
import os
import sys

import braid

CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "sparse_ps.toml")

path = sys.argv[1]
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
out_dir = sys.argv[3] if len(sys.argv) > 3 else "runs/sparse_embeddings_py"
summary = braid.train(CONFIG, f"data.path={path}", f"train.epochs={epochs}",
                      f"train.out_dir={out_dir}")
if summary["leader"]:
    e = summary.get("eval", {})
    print(f"trained {summary['steps']} steps: {summary['samples_per_s']:.0f} samples/s per worker, "
          f"{summary['rows_pulled']} table rows pulled; test loss {e.get('loss', float('nan')):.4f}, "
          f"top-1 {e.get('top1', float('nan')):.4f}", flush=True)
