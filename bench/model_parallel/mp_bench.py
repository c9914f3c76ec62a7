#!/usr/bin/python3
"""Model parallelism on this machine: the char transformer single-process,
DP=2, TP=2 and PP=2 (GPipe and 1F1B at M = 1, 2, 4, 8 micro-batches), in one run.

For each configuration it runs build/bin/mp_step (through `braid launch -n 2`
for two ranks) and reads each rank's JSON line: step time, samples/s, the
bytes of parameters + gradients + optimizer state it holds, and its peak
bytes in use. Pipeline runs also report each stage's busy time (forward and
backward compute, waits excluded) and its part of the step (first forward to
the loss broadcast); the bubble is 1 - busy / that, averaged over the stages,
printed beside the ideal (P - 1) / (M + P - 1).

The machine drifts, so the configurations run in a round, the round repeats
--reps times (reversed every other round), and every figure is the median
over rounds. All figures to bench/results/mp_bench.json.

    /usr/bin/python3 bench/model_parallel/mp_bench.py --build build --steps 20 --reps 3
"""
import argparse, json, os, statistics, subprocess, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "examples", "configs", "char_transformer.toml")
# Large enough that splitting it is worth it on two cores: 8 blocks of width 256.
MODEL = ["model.d_model=256", "model.n_heads=8", "model.n_layers=8", "model.context=64", "model.dropout=0",
         "train.batch_size=32", "train.grad_clip=1.0"]


def configurations():
    yield "single", 1, []
    yield "DP=2", 2, ["parallel.data=2"]
    yield "TP=2", 2, ["parallel.tensor=2"]
    for schedule in ("gpipe", "1f1b"):
        for m in (1, 2, 4, 8):
            yield f"PP=2 {schedule} M={m}", 2, ["parallel.pipeline=2", f"parallel.schedule={schedule}",
                                                f"parallel.microbatches={m}"]


def run(build, world, sets, steps, warmup):
    with tempfile.TemporaryDirectory() as tmp:
        args = [os.path.join(build, "bin", "mp_step"), CONFIG, str(steps), str(warmup)]
        for s in MODEL + sets + [f"train.out_dir={tmp}", "train.eval_every=0"]:
            args += ["--set", s]
        cmd = args if world == 1 else [os.path.join(build, "bin", "braid"), "launch", "-n", str(world), "--"] + args
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=900).stdout
    ranks = [json.loads(line.split("MP_STEP ", 1)[1]) for line in out.splitlines() if "MP_STEP " in line]
    if len(ranks) != world:
        raise RuntimeError(f"{cmd}: {len(ranks)} of {world} ranks reported:\n{out}")
    return sorted(ranks, key=lambda r: r["rank"])


def summarize(ranks):
    step = max(r["step_ms"] for r in ranks)
    s = {"step_ms": step, "samples_per_s": ranks[0]["batch"] * 1000 / step,
         "state_mib": max(r["param_bytes"] + r["grad_bytes"] + r["optim_bytes"] for r in ranks) / 2**20,
         "param_optim_mib": max(r["param_bytes"] + r["optim_bytes"] for r in ranks) / 2**20,
         "peak_mib": max(r["peak_bytes"] for r in ranks) / 2**20}
    if "data 2" in ranks[0]["mesh"]:  # two replicas each take a batch: the step covers twice the samples
        s["samples_per_s"] *= 2
    if "busy_ms" in ranks[0]:
        s["bubble"] = statistics.mean(1 - r["busy_ms"] / r["stage_ms"] for r in ranks)
        s["max_live"] = [r.get("max_live_microbatches") for r in ranks]
        s["activation_peak_mib"] = [(r["peak_bytes"] - r["param_bytes"] - r["grad_bytes"] - r["optim_bytes"]) / 2**20
                                    for r in ranks]
    return s


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--only", default="", help="comma-separated configuration names (default: all)")
    args = p.parse_args()
    confs = [c for c in configurations() if not args.only or c[0] in args.only.split(",")]
    rounds = []
    for rep in range(args.reps):
        order = confs if rep % 2 == 0 else list(reversed(confs))
        rounds.append({name: summarize(run(args.build, world, sets, args.steps, args.warmup))
                       for name, world, sets in order})
    table = {}
    for name, _, _ in confs:
        runs = [r[name] for r in rounds]
        med = {k: statistics.median(x[k] for x in runs) for k in runs[0] if isinstance(runs[0][k], (int, float))}
        for k in runs[0]:
            if not isinstance(runs[0][k], (int, float)):
                med[k] = runs[-1][k]
        table[name] = med
    single = table.get("single")
    print(f"{'configuration':18} {'step ms':>8} {'samples/s':>9} {'param+opt MiB/rank':>19} {'vs single':>9} "
          f"{'peak MiB/rank':>13} {'bubble':>7} {'ideal':>6}  activations")
    for name, m in table.items():
        ratio = f"{m['param_optim_mib'] / single['param_optim_mib']:.0%}" if single else ""
        bubble = ideal = ""
        extra = ""
        if "bubble" in m:
            micro = int(name.split("M=")[1])
            bubble, ideal = f"{m['bubble']:.1%}", f"{1 / (micro + 1):.1%}"
            extra = f"live {m['max_live']} act MiB {[round(a, 1) for a in m['activation_peak_mib']]}"
        print(f"{name:18} {m['step_ms']:8.1f} {m['samples_per_s']:9.1f} {m['param_optim_mib']:19.2f} {ratio:>9} "
              f"{m['peak_mib']:13.1f} {bubble:>7} {ideal:>6}  {extra}")
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "mp_bench.json"), "w") as f:
        json.dump({"model": MODEL, "steps": args.steps, "reps": args.reps, "rounds": rounds, "medians": table}, f,
                  indent=1)


if __name__ == "__main__":
    main()
