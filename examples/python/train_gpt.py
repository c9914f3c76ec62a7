"""The README's Python quick start: a small GPT (examples/configs/gpt_small.toml)
on the fortune cookies corpus, trained by braid's trainer from Python with
every rank's progress reported to this script as dicts.

    examples/fortunes_shards.sh runs/fortunes                 # the corpus as token shards, once
    python -m braid.launch -n 2 examples/python/train_gpt.py [steps [strategy [key=value ...]]]
"""
import os
import sys

import braid

CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "gpt_small.toml")

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
strategy = sys.argv[2] if len(sys.argv) > 2 else "allreduce"
overrides = sys.argv[3:]  # e.g. data.path=runs/fortunes/train-*.tok train.out_dir=runs/gpt_py
losses = []
summary = braid.train(CONFIG, f"train.max_steps={steps}", *overrides,
                      parallel={"strategy": strategy}, callbacks=[lambda m: losses.append(m["loss"])])
if summary["leader"]:
    test = f", test loss {summary['eval']['loss']:.4f}" if "eval" in summary else ""
    print(f"trained {summary['steps']} steps: final loss {summary['final_loss']:.4f}{test}; "
          f"first/last step loss {losses[0]:.3f}/{losses[-1]:.3f}", flush=True)
