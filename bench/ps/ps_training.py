#!/usr/bin/env python3
"""Training throughput through parameter servers vs all-reduce, with and
without a straggler.

Fashion-MNIST MLP (examples/configs/fashion_mlp.toml), batch 64 per worker, 1
thread per worker, --steps steps per worker, one evaluation at the end. Rows:

  allreduce       braid launch -n W -- braid train ... parallel.strategy=allreduce
  ps bsp/asp/ssp  braid launch --servers 1 --workers W -- braid train ... parallel.strategy=ps
  ps bsp+backup   bsp with ps.backup_workers=1, at W+1 workers (with W = 2 one
                  backup would apply every clock from a single gradient), next
                  to allreduce and plain bsp at that W

each (a) as is and (b) with worker 1 sleeping --straggler-ms per step (default:
twice the measured all-reduce step time, i.e. worker 1 about 3x slower).
The servers run the trainer's optimizer (ps.updater=momentum, the config's
sgd + momentum 0.9), so accuracies are comparable.

Columns:
  global     braid's own figure: worker 0's samples/s x W (--summary-json)
  sum        sum over workers of each one's samples/s: worker w's training
             time is worker 0's plus how much later the server logged w's
             `done` (ps rows; all-reduce workers move in lockstep). Differs from `global` only when workers run at
             different speeds (asp, ssp, backup workers under a straggler):
             there `global` counts the straggler at worker 0's speed.
  x ar       global / all-reduce global at the same W and straggler setting
  top1       test accuracy of worker 0's final weights
  dropped    late gradients the server dropped (bsp with backup workers)
  stale      the server's max staleness: updates between a worker's pull and its push

Median of --reps runs (each figure its own median). JSON to
bench/results/ps_training.json.

  /usr/bin/python3 bench/ps/ps_training.py --build build --steps 600 --reps 3
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from bench_util import write_result

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCH = 64


def one_run(args, strategy, workers, sets):
    """One job: samples/s (global, sum, makespan), worker 0's ms/step and top-1, the server's counters."""
    braid = os.path.join(args.build, "bin", "braid")
    config = os.path.join(ROOT, "examples", "configs", "fashion_mlp.toml")
    with tempfile.TemporaryDirectory() as tmp:
        summary = os.path.join(tmp, "summary.json")
        train = [braid, "train", config, "--set", f"train.max_steps={args.steps}", "--set", "train.threads=1",
                 "--set", f"train.batch_size={BATCH}", "--set", f"train.out_dir={tmp}/run",
                 "--set", "train.progress=lines", "--set", "train.log_every=100000",
                 "--set", "train.checkpoint_every=100000000", "--summary-json", summary]
        # One evaluation, after the last step (eval_every > epochs run).
        train += ["--set", "train.eval_every=1000000" if args.eval else "train.eval_every=0"]
        train += ["--set", f"parallel.strategy={strategy}"]
        for kv in sets:
            train += ["--set", kv]
        if strategy == "ps":
            cmd = [braid, "launch", "--servers", "1", "--workers", str(workers), "--"]
        else:
            cmd = [braid, "launch", "-n", str(workers), "--"]
        cmd += train
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        if p.returncode != 0:
            raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        with open(summary) as f:
            s = json.load(f)
    log = p.stdout + p.stderr
    # Each worker's training time: worker 0's, plus how much later the server saw worker w's `done`
    # (sent right after its last step and final pull). All-reduce workers move in lockstep.
    train_s = [s["train_seconds"]] * workers
    if strategy == "ps":
        done = {}
        for h, m_, sec, w in re.findall(r"\[(\d\d):(\d\d):(\d\d\.\d+)\] \[info\] .*ps server 0: worker (\d+) finished", log):
            done[int(w)] = int(h) * 3600 + int(m_) * 60 + float(sec)
        if len(done) == workers:
            later = [(done[w] - done[0] + 43200) % 86400 - 43200 for w in range(workers)]  # s; a midnight between
            train_s = [max(s["train_seconds"] + d, 1e-3) for d in later]
    per_worker = [args.steps * BATCH / t for t in train_s]
    # The server's own account: "ps server 0: done: U updates from G gradients, D late gradients dropped, max staleness M".
    m = re.search(r"done: (\d+) updates from (\d+) gradients, (\d+) late gradients dropped, max staleness (\d+)",
                  log)
    server = dict(zip(("updates", "gradients", "dropped", "max_staleness"), map(int, m.groups()))) if m else None
    out = {"global": s["global_samples_per_s"], "sum": sum(per_worker), "server": server,
           "makespan": workers * args.steps * BATCH / max(train_s),
           "step_ms": 1e3 * s["train_seconds"] / max(s["steps"], 1),
           "worker_sps": per_worker, "top1": s.get("eval", {}).get("top1")}
    return out


def median_run(args, strategy, workers, sets):
    runs = [one_run(args, strategy, workers, sets) for _ in range(args.reps)]
    med = {k: statistics.median(r[k] for r in runs) for k in ("global", "sum", "makespan", "step_ms")}
    tops = [r["top1"] for r in runs if r["top1"] is not None]
    med["top1"] = statistics.median(tops) if tops else None
    servers = [r["server"] for r in runs if r["server"]]
    for k in ("dropped", "max_staleness"):
        med[k] = statistics.median(x[k] for x in servers) if servers else None
    med["runs"] = runs
    return med


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--straggler-ms", type=float, default=0,
                    help="worker 1's sleep per step; 0: twice the all-reduce step time measured first")
    ap.add_argument("--no-eval", dest="eval", action="store_false", help="skip the final test-set evaluation")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "ps_training.json"))
    args = ap.parse_args()
    W = args.workers
    updater = ["ps.updater=momentum"]
    # (label, strategy, workers, sets, baseline label)
    rows = [("allreduce", "allreduce", W, [], None),
            ("ps bsp", "ps", W, updater + ["ps.consistency=bsp"], "allreduce"),
            ("ps asp", "ps", W, updater + ["ps.consistency=asp"], "allreduce"),
            ("ps ssp s=2", "ps", W, updater + ["ps.consistency=ssp", "ps.staleness=2"], "allreduce"),
            (f"allreduce W={W + 1}", "allreduce", W + 1, [], None),
            (f"ps bsp W={W + 1}", "ps", W + 1, updater + ["ps.consistency=bsp"], f"allreduce W={W + 1}"),
            (f"ps bsp+1 backup W={W + 1}", "ps", W + 1, updater + ["ps.consistency=bsp", "ps.backup_workers=1"],
             f"allreduce W={W + 1}")]

    load_before = os.getloadavg()
    t0 = time.time()
    results = {}
    straggler_ms = args.straggler_ms
    print(f"# Fashion-MNIST MLP, batch {BATCH}/worker, 1 thread/worker, {args.steps} steps/worker, 1 ps server, "
          f"median of {args.reps}; load average {load_before[0]:.2f} at start, {os.cpu_count()} cpus", flush=True)
    header = f"{'run':26} {'straggler':>9} {'global':>8} {'sum':>8} {'x ar':>6} {'ms/step':>8} {'top1':>6} {'dropped':>7} {'stale':>5}"
    print(header, flush=True)
    for label, strategy, workers, sets, base in rows:
        for slow in (False, True):
            if slow and not straggler_ms:
                straggler_ms = round(2 * results[("allreduce", False)]["step_ms"], 1)
            extra = ["train.straggler_rank=1", f"train.straggler_ms={straggler_ms}"] if slow else []
            r = median_run(args, strategy, workers, sets + extra)
            r.update(label=label, strategy=strategy, workers=workers, servers=1 if strategy == "ps" else 0,
                     sets=sets, straggler_ms=straggler_ms if slow else 0)
            b = results.get((base, slow)) if base else r
            r["x_allreduce"] = r["global"] / b["global"]
            r["sum_x_allreduce"] = r["sum"] / b["sum"]
            results[(label, slow)] = r
            top1 = f"{r['top1']:.4f}" if r["top1"] is not None else "-"
            drop = "-" if r["dropped"] is None else f"{r['dropped']:g}"
            stale = "-" if r["max_staleness"] is None else f"{r['max_staleness']:g}"
            print(f"{label:26} {(f'{straggler_ms:g} ms' if slow else '-'):>9} {r['global']:8.0f} {r['sum']:8.0f} "
                  f"{r['x_allreduce']:6.2f} {r['step_ms']:8.2f} {top1:>6} {drop:>7} {stale:>5}", flush=True)
    load_after = os.getloadavg()
    print(f"# load average {load_after[0]:.2f} at the end; global = worker 0's rate x W; sum = per-worker rates "
          f"summed (estimate); x ar = global / all-reduce's at the same W and straggler; ms/step = worker 0's; "
          f"dropped = late gradients the server dropped; stale = the server's max staleness (updates between a "
          f"worker's pull and its push)")
    write_result(args.out, "ps_training", ROOT, t0, load_before, load_after,
                 {"model": "fashion_mlp", "batch_per_worker": BATCH, "threads_per_worker": 1,
                  "steps_per_worker": args.steps, "reps": args.reps, "straggler_rank": 1,
                  "straggler_ms": straggler_ms, "rows": list(results.values())})


if __name__ == "__main__":
    sys.exit(main())
