#!/usr/bin/python3
"""D-PSGD (parallel.strategy = gossip) and timeout-hybrid synchronisation
(parallel.strategy = hybrid) on Fashion-MNIST against synchronous all-reduce:
the MLP trained by W workers (`braid launch`, tcp on loopback) under each plan,
with and without a straggler (data rank 1 sleeping --straggler-ms after
every backward). Prints, per plan, the evaluated model's test accuracy, the
group's samples/s, the bytes rank 0 sent per step (docs/aggregation.md), and
the plan's own figures (gossip: spectral gap, consensus distance before the
final average; hybrid: gradients late / applied stale / dropped, the
coordinator's wait per step), medians over --reps seeds; writes
bench/results/gossip_bench.json (or --out).

    flock /tmp/bench.lock /usr/bin/python3 bench/gossip/gossip_bench.py --build build --workers 4 --epochs 2 --reps 3
"""
import argparse, json, os, statistics, subprocess, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def plans(straggler_ms, timeout_ms):
    slow = ["train.straggler_rank=1", f"train.straggler_ms={straggler_ms}"]
    hybrid = ["parallel.strategy=hybrid", f"hybrid.timeout_ms={timeout_ms}"]
    return [
        ("allreduce", ["parallel.strategy=allreduce"]),
        ("gossip ring", ["parallel.strategy=gossip", "gossip.topology=ring"]),
        ("gossip exponential", ["parallel.strategy=gossip", "gossip.topology=exponential"]),
        ("gossip ring, no avg", ["parallel.strategy=gossip", "gossip.topology=ring", "gossip.final_average=false"]),
        ("hybrid no deadline", ["parallel.strategy=hybrid", "hybrid.timeout_ms=0"]),
        ("allreduce + slow", ["parallel.strategy=allreduce"] + slow),
        ("gossip ring + slow", ["parallel.strategy=gossip", "gossip.topology=ring"] + slow),
        ("hybrid drop + slow", hybrid + slow),
        ("hybrid stale + slow", hybrid + ["hybrid.late=stale", "hybrid.max_lag=2"] + slow),
    ]


def run(build, workers, epochs, seed, sets):
    braid = os.path.join(build, "bin", "braid")
    with tempfile.TemporaryDirectory() as tmp:
        summary = os.path.join(tmp, "summary.json")
        cmd = [braid, "launch", "-n", str(workers), "--", braid, "train",
               os.path.join(ROOT, "examples", "configs", "fashion_mlp.toml"), "--summary-json", summary]
        for s in sets + [f"train.epochs={epochs}", f"train.seed={seed}", f"train.out_dir={tmp}",
                         "train.log_every=100000", "train.threads=1", "train.progress=off",
                         "parallel.transport=tcp", "train.checkpoint_every=100000"]:
            cmd += ["--set", s]
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=3600)
        with open(summary) as f:
            j = json.load(f)
    agg = j.get("aggregation") or {}
    return {"top1": j["eval"]["top1"], "samples_per_s": j["global_samples_per_s"], "steps": j["steps"],
            "bytes_per_step": agg.get("bytes_per_step"), "aggregation": agg}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--straggler-ms", type=float, default=20)
    p.add_argument("--timeout-ms", type=float, default=5)
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "gossip_bench.json"))
    a = p.parse_args()
    todo = plans(a.straggler_ms, a.timeout_ms)
    runs = {name: [] for name, _ in todo}
    for rep in range(a.reps):
        order = todo if rep % 2 == 0 else list(reversed(todo))  # drift of the machine spreads over all plans
        for name, sets in order:
            runs[name].append(run(a.build, a.workers, a.epochs, 1 + rep, sets))

    def med(rs, key, sub=None):
        vals = [(r["aggregation"] if sub else r).get(key) for r in rs]
        vals = [v for v in vals if v is not None]
        return statistics.median(vals) if vals else None

    print(f"Fashion-MNIST MLP, {a.workers} workers x batch 64, {a.epochs} epoch(s), {a.reps} seed(s), tcp loopback; "
          f"'+ slow': data rank 1 sleeps {a.straggler_ms:g} ms per step; hybrid deadline {a.timeout_ms:g} ms")
    print(f"{'plan':22} {'top-1':>7} {'samples/s':>10} {'bytes/step':>11}  figures")
    table = {}
    for name, _ in todo:
        rs = runs[name]
        row = {"top1": med(rs, "top1"), "samples_per_s": med(rs, "samples_per_s"),
               "bytes_per_step": med(rs, "bytes_per_step")}
        agg = rs[0]["aggregation"]
        if "spectral_gap" in agg:
            row["consensus_distance"] = med(rs, "consensus_distance", True)
            extra = f"gap {agg['spectral_gap']:.3f}, consensus distance {row['consensus_distance']:.3g} at the end"
        elif "late" in agg:
            for k in ("arrived_per_step", "late", "stale_applied", "dropped", "waited_ms_per_step", "max_lag"):
                row[k] = med(rs, k, True)
            extra = (f"{row['arrived_per_step']:.2f} in/step, late {row['late']:.0f}, stale {row['stale_applied']:.0f}, "
                     f"dropped {row['dropped']:.0f}, max lag {row['max_lag']:.0f}, "
                     f"waited {row['waited_ms_per_step']:.1f} ms/step")
        else:
            extra = ""
        table[name] = row
        seeds = " ".join(f"{r['top1']:.4f}" for r in rs)
        b = f"{row['bytes_per_step']:11.0f}" if row["bytes_per_step"] is not None else f"{'-':>11}"
        print(f"{name:22} {row['top1']:7.4f} {row['samples_per_s']:10.0f} {b}  {extra} [{seeds}]")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"args": vars(a), "medians": table, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
