#!/usr/bin/env python3
"""The pipeline bubble measured from the trace: a gpt of 8 blocks on P ranks
(braid launch, train.trace = true), M micro-batches, under 1F1B, interleaved
(V = 2) and ZB-H1, beside the schedules' formulas.

Per step and rank: the step's span (the first forward/backward span's start
on any rank to the last one's end) less the rank's own forward and backward
spans ("forward", "backward", "backward B", "backward W") is its idle time.
Steps after the first are averaged (the first meets cold caches and the
autotuner). Prints a table and writes JSON.

usage: pipeline_bubble.py BRAID [--stages 4] [--microbatches 8] [--steps 6] [--out FILE]
"""
import argparse, glob, json, os, subprocess, sys, tempfile

FORTUNES = ["/usr/share/games/fortunes/computers", "/usr/share/games/fortunes/science"]
NAMES = {"forward", "backward", "backward B", "backward W"}


def formula(schedule, p, m, v, f=1.0, b=1.0, w=1.0):
    if schedule == "interleaved":
        return (p - 1) / (v * m)
    if schedule == "zero_bubble":
        return (p - 1) * (f + b - w) / (m * (f + b + w))
    return (p - 1) / m


def run(braid, work, schedule, p, m, steps, threads):
    out = os.path.join(work, schedule)
    sets = {"train.out_dir": out, "train.trace": "true", "train.max_steps": str(steps),
            "parallel.pipeline": str(p), "parallel.microbatches": str(m), "parallel.schedule": schedule,
            "train.threads": str(threads)}
    if schedule == "interleaved":
        sets["parallel.virtual_stages"] = "2"
    cmd = [braid, "launch", "-n", str(p), "--", braid, "train", os.path.join(work, "gpt.toml")]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ranks = []
    for f in sorted(glob.glob(os.path.join(out, "trace", "rank-*.json"))):
        events = [e for e in json.load(open(f))["traceEvents"]
                  if e.get("ph") == "X" and e.get("cat") == "step" and e.get("name") in NAMES]
        ranks.append(sorted(events, key=lambda e: e["ts"]))
    # Mean span per kind on each rank (steps after the first), ms.
    kinds = []
    for r in ranks:
        per = len(r) // steps
        k = {}
        for e in r[per:]:
            k.setdefault(e["name"], []).append(e["dur"] / 1e3)
        kinds.append({n: round(sum(v) / len(v), 2) for n, v in k.items()})
    print(f"  {schedule}: mean span ms per rank {kinds}", flush=True)
    per_step = len(ranks[0]) // steps
    fractions = []
    for s in range(1, steps):
        spans = [r[s * per_step:(s + 1) * per_step] for r in ranks]
        first = min(e["ts"] for r in spans for e in r)
        last = max(e["ts"] + e["dur"] for r in spans for e in r)
        for r in spans:
            busy = sum(e["dur"] for e in r)
            fractions.append((last - first - busy) / (last - first))
        busy_ms = sum(e["dur"] for e in spans[0]) / 1e3
    return sum(fractions) / len(fractions), min(fractions), max(fractions), (last - first) / 1e3, busy_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("braid")
    ap.add_argument("--stages", type=int, default=4)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        tok = os.path.join(work, "tok")
        subprocess.run([a.braid, "tokenize", "train", "--vocab-size", "300", "--out", tok] + FORTUNES, check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([a.braid, "tokenize", "encode", "--tokenizer", tok, "--out", os.path.join(work, "shards/train")]
                       + FORTUNES, check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(work, "gpt.toml"), "w") as f:
            f.write(f"""[train]
batch_size = {4 * a.microbatches}
log_every = 1000
eval_every = 0
progress = "off"
[model]
name = "gpt"
n_layers = 8
n_heads = 4
d_model = 128
context = 64
tie_embeddings = false
[optim]
name = "sgd"
lr = 0.1
[data]
name = "tokens"
path = "{work}/shards/train-*.tok"
""")
        rows = []
        for schedule in ["1f1b", "interleaved", "zero_bubble"]:
            mean, lo, hi, step_ms, busy_ms = run(a.braid, work, schedule, a.stages, a.microbatches, a.steps, a.threads)
            v = 2 if schedule == "interleaved" else 1
            # The formulas as a fraction of the step: idle / (work + idle).
            r = formula(schedule, a.stages, a.microbatches, v)
            rows.append({"schedule": schedule, "stages": a.stages, "microbatches": a.microbatches, "chunks": v,
                         "idle_fraction": mean, "idle_min": lo, "idle_max": hi, "step_ms": step_ms,
                         "busy_ms_rank0": busy_ms, "formula_fraction_equal_costs": r / (1 + r)})
            print(f"{schedule:12s} idle {mean:.3f} of the step (ranks/steps {lo:.3f}-{hi:.3f}), "
                  f"formula {r / (1 + r):.3f}; step {step_ms:.1f} ms, rank 0 busy {busy_ms:.1f} ms", flush=True)
    if a.out:
        json.dump({"host_cores": os.cpu_count(), "rows": rows}, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    sys.exit(main())
