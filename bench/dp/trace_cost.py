#!/usr/bin/python3
"""What the timeline costs: braid's 2-process data-parallel MLP and CNN (the
runs of bench/dp/dp_vs_pytorch.py) with train.trace off and on, alternated
within each repetition (off, on, then on, off), so a drift of the machine's
speed favours neither. A run's figure is its median step time (every step
logged in both arms, the first fifth left out), which a descheduled moment
does not move the way it moves a whole run's samples/s. Prints the median
step of each arm and the median of each repetition's on/off ratio (above 1:
tracing is slower); JSON to bench/results/trace_cost.json.

    flock /tmp/bench.lock /usr/bin/python3 bench/dp/trace_cost.py --build build --steps 600 --reps 9
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def step_ms(build, model, steps, trace):
    braid = os.path.join(build, "bin", "braid")
    config = os.path.join(ROOT, "examples", "configs", f"fashion_{model}.toml")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [braid, "launch", "-n", "2", "--", braid, "train", config, "--set", f"train.max_steps={steps}",
               "--set", "train.threads=1", "--set", "train.eval_every=0", "--set", f"train.out_dir={tmp}/run",
               "--set", "train.progress=lines", "--set", "train.log_every=1",
               "--set", "train.checkpoint_every=100000000", "--set", "parallel.strategy=allreduce",
               "--set", f"train.trace={'true' if trace else 'false'}"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(os.path.join(tmp, "run", "metrics.jsonl")) as f:
            times = [json.loads(line)["step_ms"] for line in f if '"step_ms"' in line]
        events = 0
        if trace:
            with open(os.path.join(tmp, "run", "trace.json")) as f:
                events = len(json.load(f)["traceEvents"])
        return statistics.median(times[len(times) // 5:]), events


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--reps", type=int, default=9)
    p.add_argument("--models", default="mlp,cnn")
    args = p.parse_args()
    results = []
    print(f"{'model':5} {'off ms':>9} {'on ms':>9} {'on/off':>7}  events  (per repetition)")
    for model in args.models.split(","):
        steps = args.steps if model == "mlp" else max(50, args.steps // 3)
        off, on, ratios, events = [], [], [], 0
        for rep in range(args.reps):
            order = [False, True] if rep % 2 == 0 else [True, False]
            got = {}
            for trace in order:
                got[trace], n = step_ms(args.build, model, steps, trace)
                events = max(events, n)
            off.append(got[False])
            on.append(got[True])
            ratios.append(got[True] / got[False])
        row = {"model": model, "steps": steps, "world": 2, "figure": "median step ms",
               "off": statistics.median(off), "on": statistics.median(on),
               "on_over_off": statistics.median(ratios), "off_runs": off, "on_runs": on, "ratios": ratios,
               "trace_events": events}
        print(f"{model:5} {row['off']:9.3f} {row['on']:9.3f} {row['on_over_off']:7.3f}  {events:6d}  "
              f"({' '.join(f'{r:.3f}' for r in ratios)})", flush=True)
        results.append(row)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "trace_cost.json"), "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
