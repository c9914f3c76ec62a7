#!/usr/bin/python3
"""The skeleton-network model partition on Fashion-MNIST: the MLP trained by
W workers (`braid launch`) under parallel.strategy = skeleton at several
skeleton fractions (fraction 1 is full model averaging after every local
step) and under synchronous all-reduce. Prints, per plan, the merged model's
test accuracy, the bytes each rank sent per step (bandwidth-optimal count,
docs/skeleton.md) and the group's samples/s, medians over --reps seeds, with
ratios against full averaging and all-reduce; writes
bench/results/skeleton_bench.json (or --out).

    /usr/bin/python3 bench/skeleton/skeleton_bench.py --build build --workers 4 --epochs 2 --reps 3
"""
import argparse, json, os, re, statistics, subprocess, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def plans(fractions, every):
    out = [(f"skeleton {f:g}", ["parallel.strategy=skeleton", f"parallel.skeleton_fraction={f}",
                               f"parallel.skeleton_every={every}"]) for f in fractions]
    return out + [("allreduce", ["parallel.strategy=allreduce"])]


def run(build, workers, epochs, seed, sets):
    braid = os.path.join(build, "bin", "braid")
    with tempfile.TemporaryDirectory() as tmp:
        summary = os.path.join(tmp, "summary.json")
        cmd = [braid, "launch", "-n", str(workers), "--", braid, "train",
               os.path.join(ROOT, "examples", "configs", "fashion_mlp.toml"), "--summary-json", summary]
        for s in sets + [f"train.epochs={epochs}", f"train.seed={seed}", f"train.out_dir={tmp}",
                         "train.log_every=100000", "train.threads=1", "train.progress=off"]:
            cmd += ["--set", s]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=3600).stdout
        with open(summary) as f:
            j = json.load(f)
    params = int(re.search(r"model mlp: ([0-9]+) parameters", out).group(1))
    agg = j.get("aggregation")
    if agg:
        sent, full = agg["bytes_per_step"], agg["full_averaging_bytes_per_step"]
    else:  # all-reduce: every step averages the whole f32 gradient
        full = 2.0 * (workers - 1) / workers * 4 * params
        sent = full
    return {"top1": j["eval"]["top1"], "samples_per_s": j["global_samples_per_s"], "bytes_per_step": sent,
            "full_averaging_bytes_per_step": full, "steps": j["steps"], "aggregation": agg}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--every", type=int, default=20, help="parallel.skeleton_every")
    p.add_argument("--fractions", default="0.05,0.1,0.25,1.0")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "skeleton_bench.json"))
    a = p.parse_args()
    todo = plans([float(f) for f in a.fractions.split(",")], a.every)
    runs = {name: [] for name, _ in todo}
    for rep in range(a.reps):
        order = todo if rep % 2 == 0 else list(reversed(todo))  # drift of the machine spreads over all plans
        for name, sets in order:
            runs[name].append(run(a.build, a.workers, a.epochs, 1 + rep, sets))
    med = {name: {k: statistics.median(r[k] for r in rs) for k in ("top1", "samples_per_s", "bytes_per_step")}
           for name, rs in runs.items()}
    full = statistics.median(r["full_averaging_bytes_per_step"] for rs in runs.values() for r in rs)
    ar = med["allreduce"]
    print(f"Fashion-MNIST MLP, {a.workers} workers x batch 64, {a.epochs} epoch(s), skeleton_every {a.every}, "
          f"{a.reps} seed(s); bytes: sent per rank per step, bandwidth-optimal count")
    width = 7 * a.reps - 1
    print(f"{'plan':14} {'top-1':>7} {'per seed':>{width}} {'bytes/step':>11} {'vs full avg':>11} "
          f"{'samples/s':>10} {'vs allreduce':>12}")
    for name, _ in todo:
        m = med[name]
        seeds = " ".join(f"{r['top1']:.4f}" for r in runs[name])
        print(f"{name:14} {m['top1']:7.4f} {seeds:>{width}} {m['bytes_per_step']:11.0f} "
              f"{m['bytes_per_step'] / full:10.3f}x {m['samples_per_s']:10.0f} "
              f"{m['samples_per_s'] / ar['samples_per_s']:11.2f}x")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"args": vars(a), "medians": med, "full_averaging_bytes_per_step": full, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
