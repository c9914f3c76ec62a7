#!/usr/bin/python3
"""ZeRO against plain data parallelism on this machine, in one run: the char
transformer and a wide MLP, N = 2 and 4 processes (`braid launch -n N`),
strategies allreduce (stage 0) and zero stages 1, 2, 3, all with AdamW.

Each configuration runs bench/model_parallel's mp_step on every rank, which
prints its step time and the host allocator's per-category bytes (parameters,
gradients, optimizer state) after the timed steps and at their peak. The
configurations run in a round, the round repeats --reps times (reversed every
other round), and figures are medians over rounds. Printed per model and N:
samples/s and its ratio to plain data parallelism, model state per rank
(resident and peak) against plain data parallelism's / N, and the largest
layer's parameters (stage 3's allowance). All figures to
bench/results/zero_bench.json.

    /usr/bin/python3 bench/zero/zero_bench.py --build build --steps 8 --reps 3
"""
import argparse, json, os, statistics, subprocess, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = {
    "transformer": (os.path.join(ROOT, "examples", "configs", "char_transformer.toml"),
                    ["model.d_model=256", "model.n_heads=8", "model.n_layers=8", "model.context=64",
                     "model.dropout=0", "train.batch_size=32"]),
    "mlp": (os.path.join(ROOT, "examples", "configs", "fashion_mlp.toml"),
            ["model.hidden=1024", "train.batch_size=256", "optim.name=adamw", "optim.lr=0.001"]),
}
STRATEGIES = [("DP", ["parallel.strategy=allreduce"])] + [
    (f"ZeRO-{s}", ["parallel.strategy=zero", f"parallel.zero_stage={s}"]) for s in (1, 2, 3)] + [
    ("ZeRO-3 no prefetch", ["parallel.strategy=zero", "parallel.zero_stage=3", "parallel.zero_prefetch=false"])]


def run(build, model, world, sets, steps, warmup):
    config, model_sets = MODELS[model]
    with tempfile.TemporaryDirectory() as tmp:
        args = [os.path.join(build, "bin", "mp_step"), config, str(steps), str(warmup)]
        for s in model_sets + sets + [f"train.out_dir={tmp}", "train.eval_every=0", "optim.schedule=constant"]:
            args += ["--set", s]
        cmd = [os.path.join(build, "bin", "braid"), "launch", "-n", str(world), "--"] + args
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=900).stdout
    ranks = [json.loads(line.split("MP_STEP ", 1)[1]) for line in out.splitlines() if "MP_STEP " in line]
    if len(ranks) != world:
        raise RuntimeError(f"{cmd}: {len(ranks)} of {world} ranks reported:\n{out}")
    step = max(r["step_ms"] for r in ranks)
    mib = 2 ** 20
    return {"step_ms": step, "samples_per_s": ranks[0]["batch"] * world * 1000 / step,
            "state_mib": max(r["param_bytes"] + r["grad_bytes"] + r["optim_bytes"] for r in ranks) / mib,
            "state_peak_mib": max(r["state_peak"] for r in ranks) / mib,
            "param_peak_mib": max(r["param_peak"] for r in ranks) / mib,
            "peak_mib": max(r["peak_bytes"] for r in ranks) / mib,
            "layer_mib": ranks[0]["largest_layer_bytes"] / mib}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--models", default="transformer,mlp")
    p.add_argument("--worlds", default="2,4")
    a = p.parse_args()
    confs = [(m, n, name, sets) for m in a.models.split(",") for n in map(int, a.worlds.split(","))
             for name, sets in STRATEGIES]
    rounds = []
    for rep in range(a.reps):
        order = confs if rep % 2 == 0 else list(reversed(confs))
        rounds.append({f"{m} N={n} {name}": run(a.build, m, n, sets, a.steps, a.warmup) for m, n, name, sets in order})
    table = {}
    for key in rounds[0]:
        table[key] = {k: statistics.median(r[key][k] for r in rounds) for k in rounds[0][key]}
        # The ratio to plain DP: the median of each round's own ratio (the
        # machine drifts between rounds more than within one).
        dp_key = " ".join(key.split(" ")[:2]) + " DP"  # "<model> N=<n> DP"
        table[key]["vs_dp"] = statistics.median(r[key]["samples_per_s"] / r[dp_key]["samples_per_s"] for r in rounds)
    print(f"{'model / N / plan':36} {'step ms':>8} {'samples/s':>9} {'vs DP':>6} {'state MiB':>9} {'peak state':>10} "
          f"{'DP/N':>7} {'DP/N+layer':>10} {'peak MiB':>8}")
    for m in a.models.split(","):
        for n in map(int, a.worlds.split(",")):
            dp = table[f"{m} N={n} DP"]
            for name, _ in STRATEGIES:
                r = table[f"{m} N={n} {name}"]
                print(f"{m + ' N=' + str(n) + ' ' + name:36} {r['step_ms']:8.1f} {r['samples_per_s']:9.1f} "
                      f"{r['vs_dp']:6.2f} {r['state_mib']:9.2f} {r['state_peak_mib']:10.2f} "
                      f"{dp['state_mib'] / n:7.2f} {dp['state_mib'] / n + r['layer_mib']:10.2f} {r['peak_mib']:8.1f}")
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "zero_bench.json"), "w") as f:
        json.dump({"models": MODELS, "steps": a.steps, "reps": a.reps, "rounds": rounds, "medians": table}, f, indent=1)


if __name__ == "__main__":
    main()
