#!/usr/bin/python3
"""Batch norm across data-parallel replicas on Fashion-MNIST: the CNN with a
batch norm after each convolution, trained by W workers (`braid launch`) with
a small batch per worker, normalising with each worker's own batch (local),
with the whole batch across workers (sync_batch) or with ghost batches, plus
the CNN without normalisation. Prints the final test accuracy of each, the
median over --reps seeds, and writes bench/results/bn_accuracy.json.

    /usr/bin/python3 bench/norm/bn_accuracy.py --build build --workers 4 --batch 16 --epochs 1 --reps 1
"""
import argparse, json, os, re, statistics, subprocess, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLANS = [("none", ["model.norm=none"]), ("local BN", ["model.norm=batch"]),
         ("sync BN", ["model.norm=sync_batch"]), ("ghost BN", ["model.norm=ghost_batch"])]


def run(build, workers, batch, epochs, seed, ghost, sets):
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [os.path.join(build, "bin", "braid"), "launch", "-n", str(workers), "--",
               os.path.join(build, "bin", "braid"), "train", os.path.join(ROOT, "examples", "configs", "fashion_cnn.toml")]
        for s in sets + [f"train.batch_size={batch}", f"train.epochs={epochs}", f"train.seed={seed}",
                         f"model.ghost_batch={ghost}", f"train.out_dir={tmp}", "train.log_every=1000",
                         "train.threads=1"]:
            cmd += ["--set", s]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=3600).stdout
    m = re.search(r"final test accuracy: top-1 ([0-9.]+)", out)
    rate = re.search(r"([0-9]+) samples/s in all", out)
    if not m:
        raise RuntimeError(f"{cmd}: no final accuracy in\n{out}")
    return {"top1": float(m.group(1)), "samples_per_s": float(rate.group(1)) if rate else None}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--ghost", type=int, default=4)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--reps", type=int, default=1)
    a = p.parse_args()
    runs = {name: [] for name, _ in PLANS}
    for rep in range(a.reps):
        order = PLANS if rep % 2 == 0 else list(reversed(PLANS))
        for name, sets in order:
            runs[name].append(run(a.build, a.workers, a.batch, a.epochs, 1 + rep, a.ghost, sets))
    print(f"{a.workers} workers x batch {a.batch}, {a.epochs} epoch(s), ghost batch {a.ghost}, {a.reps} seed(s)")
    print(f"{'plan':10} {'top-1 (median)':>15} {'per seed':>24} {'samples/s':>10}")
    for name, _ in PLANS:
        t = [r["top1"] for r in runs[name]]
        s = [r["samples_per_s"] for r in runs[name] if r["samples_per_s"]]
        print(f"{name:10} {statistics.median(t):15.4f} {' '.join(f'{v:.4f}' for v in t):>24} "
              f"{statistics.median(s) if s else 0:10.0f}")
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "bn_accuracy.json"), "w") as f:
        json.dump({"args": vars(a), "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
