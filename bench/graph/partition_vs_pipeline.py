#!/usr/bin/python3
"""The char transformer's training step captured as a graph, cut into two
ranks at the pipeline plan's stage boundary and run as two processes
(`braid graph --run`), against the pipeline plan itself (`braid train` with
parallel.pipeline = 2, one micro-batch, so both run the same schedule: the
forward through stage 0 then stage 1, the backward back), in one run.

Same model, batches and optimizer on both sides; no gradient clipping and no
dropout (a captured step has neither a clip nor a schedule). Each side
reports milliseconds per step, the batch included: the graph run the median
over its steps, braid train the median of its log windows after the first.
The machine drifts, so the two alternate, --reps rounds, and the figures are
medians over rounds; the ratio is pipeline / graph (> 1: the graph is faster).

    /usr/bin/python3 bench/graph/partition_vs_pipeline.py --build build --steps 40 --reps 3
"""
import argparse, json, os, re, statistics, subprocess, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "examples", "configs", "char_transformer.toml")
MODEL = ["model.d_model=256", "model.n_heads=8", "model.n_layers=8", "model.context=64", "model.dropout=0",
         "train.batch_size=32", "train.grad_clip=0", "optim.schedule=constant", "optim.warmup_steps=0"]


def sets(extra):
    out = []
    for s in MODEL + extra:
        out += ["--set", s]
    return out


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p.stdout + p.stderr


def graph_ms(braid, steps):
    out = run([braid, "launch", "-n", "2", "--", braid, "graph", CONFIG, "--run", str(steps), "--print-every", str(steps)]
              + sets([]))
    m = re.search(r"graph run: 2 ranks, \d+ steps, ([0-9.]+) ms/step", out)
    if not m:
        raise SystemExit("no 'graph run' line in:\n" + out[-3000:])
    return float(m.group(1))


def pipeline_ms(braid, steps, out_dir):
    out = run([braid, "launch", "-n", "2", "--", braid, "train", CONFIG]
              + sets(["parallel.pipeline=2", "parallel.microbatches=1", f"train.max_steps={steps}",
                      "train.log_every=5", "train.epochs=1", "train.eval_every=0", f"train.out_dir={out_dir}",
                      "train.checkpoint_every=0"]))
    windows = [float(x) for x in re.findall(r"([0-9.]+) ms/step", out)]
    if len(windows) < 2:
        raise SystemExit("too few ms/step lines in:\n" + out[-3000:])
    return statistics.median(windows[1:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "graph_partition_vs_pipeline.json"))
    a = ap.parse_args()
    braid = os.path.join(a.build, "bin", "braid")
    rounds = {"graph": [], "pipeline": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.reps):
            order = ["graph", "pipeline"] if r % 2 == 0 else ["pipeline", "graph"]
            for side in order:
                ms = graph_ms(braid, a.steps) if side == "graph" else pipeline_ms(braid, a.steps, os.path.join(tmp, f"pp{r}"))
                rounds[side].append(ms)
                print(f"round {r + 1}: {side:8s} {ms:8.2f} ms/step", flush=True)
    g, p = statistics.median(rounds["graph"]), statistics.median(rounds["pipeline"])
    print(f"{'side':10s} {'ms/step':>10s}\n{'graph':10s} {g:10.2f}\n{'pipeline':10s} {p:10.2f}")
    print(f"ratio pipeline / graph: {p / g:.3f} (within 10 %: {abs(p / g - 1) <= 0.10})")
    with open(a.out, "w") as f:
        json.dump({"model": MODEL, "steps": a.steps, "reps": a.reps, "rounds_ms": rounds, "graph_ms": g,
                   "pipeline_ms": p, "ratio": p / g}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
