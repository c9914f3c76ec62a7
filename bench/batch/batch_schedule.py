#!/usr/bin/python3
"""Batch-size schedules on Fashion-MNIST: W data-parallel workers (`braid
launch`) train the MLP or the CNN for the same epochs with a total batch of
256 throughout, 4096 throughout (with a warm-up epoch and --large-lr: the
MLP at 4096 reached 0.817 with lr 0.1, 0.795 with 0.2 and diverged with 0.4
and 1.6, the linear and square-root scalings of 0.1 at 256), and growing from 256 towards 4096 by the epoch rule and by the
gradient-noise rule (learning rate following the batch linearly). Prints the
final test accuracy (median over --reps seeds, alternating the order),
samples/s, the points each plan is from batch 256, and writes
bench/results/batch_schedule.json.

    /usr/bin/python3 bench/batch/batch_schedule.py --model mlp --workers 2 --epochs 5 --reps 3
"""
import argparse, json, os, re, statistics, subprocess, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def plans(workers, small, large, lr, big_lr):
    per_small, per_large = small // workers, large // workers
    return [
        (f"batch {small}", [f"train.batch_size={per_small}", f"optim.lr={lr}"]),
        (f"batch {large}", [f"train.batch_size={per_large}", f"optim.lr={big_lr}",
                            f"optim.warmup_steps={max(1, 60000 // large)}"]),
        (f"epoch rule {small}->{large}", [f"train.batch_size={per_small}", f"optim.lr={lr}",
                                          "train.batch_schedule=epoch", f"train.batch_max={per_large}"]),
        (f"noise rule {small}->{large}", [f"train.batch_size={per_small}", f"optim.lr={lr}",
                                          "train.batch_schedule=noise", f"train.batch_max={per_large}"]),
    ]


def run(build, model, workers, epochs, seed, sets):
    braid = os.path.join(build, "bin", "braid")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [braid, "launch", "-n", str(workers), "--", braid, "train",
               os.path.join(ROOT, "examples", "configs", f"fashion_{model}.toml")]
        for s in sets + [f"train.epochs={epochs}", f"train.seed={seed}", f"train.out_dir={tmp}",
                         "train.log_every=100000", "train.progress=lines"]:
            cmd += ["--set", s]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=7200)
    out = done.stdout + done.stderr
    if done.returncode != 0 and "is nan" in out:
        return {"top1": 0.0, "samples_per_s": None, "batches": [], "diverged": True}
    acc = re.search(r"final test accuracy: top-1 ([0-9.]+)", out)
    rate = re.search(r"([0-9]+) samples/s in all", out)
    batches = [int(b) for b in re.findall(r"batch size (\d+) per rank", out)]
    if not acc:
        raise RuntimeError(f"{cmd}: no final accuracy in\n{out}")
    return {"top1": float(acc.group(1)), "samples_per_s": float(rate.group(1)) if rate else None,
            "batches": batches}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--small", type=int, default=256, help="total batch of the reference run")
    p.add_argument("--large", type=int, default=4096, help="total batch the schedules grow to")
    p.add_argument("--lr", type=float, default=0.1, help="learning rate at the small batch")
    p.add_argument("--large-lr", type=float, default=0.1, help="learning rate of the fixed large batch")
    p.add_argument("--reps", type=int, default=1)
    a = p.parse_args()
    table = plans(a.workers, a.small, a.large, a.lr, a.large_lr)
    runs = {name: [] for name, _ in table}
    for rep in range(a.reps):
        for name, sets in (table if rep % 2 == 0 else list(reversed(table))):
            runs[name].append(run(a.build, a.model, a.workers, a.epochs, 1 + rep, sets))
    print(f"{a.model}: {a.workers} workers, {a.epochs} epochs, {a.reps} seed(s); total batches")
    print(f"{'plan':24} {'top-1 (median)':>15} {'vs small':>9} {'samples/s':>10}  per-rank batches grown to")
    ref = statistics.median(r["top1"] for r in runs[table[0][0]])
    for name, _ in table:
        t = statistics.median(r["top1"] for r in runs[name])
        s = [r["samples_per_s"] for r in runs[name] if r["samples_per_s"]]
        grown = runs[name][0]["batches"]
        print(f"{name:24} {t:15.4f} {100 * (t - ref):+8.2f}p {statistics.median(s) if s else 0:10.0f}  "
              f"{' '.join(map(str, grown)) or '-'}")
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", f"batch_schedule_{a.model}.json"), "w") as f:
        json.dump({"args": vars(a), "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
