#!/usr/bin/python3
"""What a checkpoint costs the step loop: `braid train` with and without saves.

    /usr/bin/python3 bench/train/checkpoint_stall.py [--steps 40] [--every 5]
        [--reps 2] [--threads 2] [--ranks 1] [--braid build/bin/braid]

One process trains ResNet-18 (small stem, 11.2M parameters) on synthetic
3x32x32 images with Adam, so a save holds 134 MB (weights and two moments),
in four modes, alternating, --reps times:

    none            no save at all
    whole           train.checkpoint_format = whole (gathered, written before the next step)
    sharded-sync    train.checkpoint_format = sharded, train.checkpoint_async = false
    sharded-async   train.checkpoint_format = sharded (the default train.checkpoint_async = true)

Every step is logged (train.log_every = 1); the time between two step
records is one step plus whatever ran after the first (a save). For each mode
the table gives the median step without a save before it, the median of the
steps that follow a save (the step plus the save's stall), their difference
(the stall per save), and the mean step over the run. The sharded modes also
print the trainer's own figure of the stall (`the step loop stalled X ms`)
and of the background write. --ranks N > 1 runs N ranks under `braid launch`
with ZeRO-1 (parallel.strategy = zero): the whole format then gathers the
optimizer state on data rank 0 and writes it there, the sharded one writes
each rank's part on each rank. Results go to
bench/results/checkpoint_stall-<time>.json.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFIG = """
[train]
epochs = 1
batch_size = 16
eval_every = 0
log_every = 1
progress = "lines"
threads = {threads}
max_steps = {steps}
checkpoint_every = {every}
out_dir = "{out}"
{extra}

[model]
name = "resnet"
depth = 18
stem = "small"
norm = "batch"

[optim]
name = "adam"
lr = 0.001
schedule = "constant"

[data]
name = "synthetic"
shape = "3x32x32"
classes = 10
examples = 20000
{parallel}"""

MODES = {
    "none": "",
    "whole": 'checkpoint_format = "whole"',
    "sharded-sync": 'checkpoint_format = "sharded"\ncheckpoint_async = false',
    "sharded-async": 'checkpoint_format = "sharded"',
}


def run(braid, mode, args, tmp):
    out = os.path.join(tmp, f"{mode}-{os.getpid()}-{datetime.datetime.now().timestamp()}")
    every = args.every if mode != "none" else 10**9
    cfg = os.path.join(tmp, f"{mode}.toml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(threads=args.threads, steps=args.steps, every=every, out=out, extra=MODES[mode],
                              parallel='\n[parallel]\nstrategy = "zero"\nzero_stage = 1\n' if args.ranks > 1 else ""))
    cmd = [braid, "train", cfg]
    if args.ranks > 1:
        cmd = [braid, "launch", "-n", str(args.ranks), "--"] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{mode}: braid train failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    times = {}
    with open(os.path.join(out, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("event") == "train":
                times[r["step"]] = r["time"]
    steps = sorted(times)
    gaps = {s: times[s] - times[s - 1] for s in steps if s - 1 in times and s > args.warmup}
    after_save = [g for s, g in gaps.items() if mode != "none" and (s - 1) % args.every == 0]
    plain = [g for s, g in gaps.items() if not (mode != "none" and (s - 1) % args.every == 0)]
    # World rank 0's lines (the launcher prefixes "[rank 0] ").
    text = "\n".join(l for l in (p.stdout + p.stderr).splitlines() if args.ranks == 1 or l.startswith("[rank 0]"))
    stalls = [float(x) for x in re.findall(r"the step loop stalled ([0-9.]+) ms", text)]
    writes = [float(x) for x in re.findall(r"written in ([0-9.]+) ms", text)]
    staged = re.findall(r"staging ([0-9.]+) MB", text)
    subprocess.run(["rm", "-rf", out])
    return {"plain_ms": 1e3 * statistics.median(plain),
            "after_save_ms": 1e3 * statistics.median(after_save) if after_save else None,
            "mean_ms": 1e3 * statistics.mean(gaps.values()),
            "trainer_stall_ms": statistics.median(stalls) if stalls else None,
            "write_ms": statistics.median(writes) if writes else None,
            "staged_mb": float(staged[0]) if staged else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=6, help="steps left out (the convolution autotuner)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ranks", type=int, default=1, help="ranks under braid launch, ZeRO-1")
    ap.add_argument("--braid", default=os.path.join(ROOT, "build/bin/braid"))
    args = ap.parse_args()
    results = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory(prefix="ckpt_stall_", dir=os.environ.get("TMPDIR", "/tmp")) as tmp:
        for rep in range(args.reps):
            for mode in MODES:
                r = run(args.braid, mode, args, tmp)
                results[mode].append(r)
                print(f"rep {rep} {mode:14s} {json.dumps(r)}", flush=True)

    def med(mode, key):
        vals = [r[key] for r in results[mode] if r[key] is not None]
        return statistics.median(vals) if vals else None

    fmt = lambda v: "-" if v is None else f"{v:8.1f}"
    print(f"\nResNet-18, Adam, batch 16, {args.ranks} rank(s) x {args.threads} threads, a save every {args.every} steps; "
          f"medians of {args.reps} runs")
    print(f"{'mode':14s} {'step ms':>8s} {'after save':>10s} {'stall':>8s} {'mean step':>9s} {'trainer stall':>13s} {'write ms':>8s}")
    table = {}
    for mode in MODES:
        plain, after = med(mode, "plain_ms"), med(mode, "after_save_ms")
        stall = after - plain if after is not None else None
        table[mode] = {"step_ms": plain, "after_save_ms": after, "stall_ms": stall, "mean_ms": med(mode, "mean_ms"),
                       "trainer_stall_ms": med(mode, "trainer_stall_ms"), "write_ms": med(mode, "write_ms"),
                       "staged_mb": med(mode, "staged_mb")}
        t = table[mode]
        print(f"{mode:14s} {fmt(plain)} {fmt(after):>10s} {fmt(stall)} {fmt(t['mean_ms']):>9s} "
              f"{fmt(t['trainer_stall_ms']):>13s} {fmt(t['write_ms'])}")
    os.makedirs(os.path.join(ROOT, "bench/results"), exist_ok=True)
    path = os.path.join(ROOT, "bench/results",
                        f"checkpoint_stall-{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}.json")
    with open(path, "w") as f:
        json.dump({"args": vars(args), "runs": results, "table": table, "load": os.getloadavg()}, f, indent=1)
    print(f"\n{path}")


if __name__ == "__main__":
    main()
