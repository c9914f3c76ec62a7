#!/usr/bin/env python3
"""Per-call overhead from Python: a small op (a + b on 16 floats) and a
module call (Linear 16 -> 16 on a [4, 16] batch), braid against PyTorch 2.x
in the same process, same run (docs/python.md, "Overhead").

Both are timed the same way: timeit of a lambda, 100 000 calls a repeat, the
best of --repeats repeats (the least disturbed by other work on the machine);
each library at its default thread count. The figure includes the lambda's
own call, alike on both sides.

    PYTHONPATH=build/python .venv-bench/bin/python bench/python/call_overhead.py [--json OUT]

.venv-bench (scripts/setup --bench) has PyTorch 2.x; braid's extension
imports there from the build tree (it needs only numpy, through the buffer
protocol, not numpy's headers).
"""
import argparse
import json
import os
import platform
import timeit

import braid
import torch


def best_us(fn, number, repeats):
    return min(timeit.repeat(fn, number=number, repeat=repeats)) / number * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--number", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()

    ba, bb = braid.ones(16), braid.full([16], 2.0)
    ta, tb = torch.ones(16), torch.full([16], 2.0)
    braid.manual_seed(0)
    blin, tlin = braid.nn.Linear(16, 16), torch.nn.Linear(16, 16)
    bx, tx = braid.ones(4, 16), torch.ones(4, 16)
    cases = {
        "a + b (16 floats)": (lambda: ba + bb, lambda: ta + tb),
        "Linear(16, 16) module call ([4, 16])": (lambda: blin(bx), lambda: tlin(tx)),
    }
    rows = {}
    print(f"per call, best of {a.repeats} x {a.number} calls; torch {torch.__version__} ({torch.get_num_threads()} "
          f"threads), Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}")
    for name, (b_fn, t_fn) in cases.items():
        # Alternate, so a burst of load hits both alike.
        b_us, t_us = [], []
        for _ in range(3):
            b_us.append(best_us(b_fn, a.number, a.repeats))
            t_us.append(best_us(t_fn, a.number, a.repeats))
        b, t = min(b_us), min(t_us)
        rows[name] = {"braid_us": b, "torch_us": t, "torch_over_braid": t / b}
        print(f"  {name:38s} braid {b:6.3f} us   torch {t:6.3f} us   ({t / b:.2f}x)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"torch": torch.__version__, "python": platform.python_version(),
                       "load_average": os.getloadavg()[0], "cases": rows}, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
