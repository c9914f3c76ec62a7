#!/usr/bin/python3
"""Data-parallel scaling, braid vs PyTorch DDP, in the same run.

For each model (MLP, CNN) at batch 64 per worker, 1 thread per worker:
  braid:   1 process            vs  braid launch -n 2 ... parallel.strategy=allreduce (shm)
  PyTorch: 1 process            vs  2 processes under DDP (gloo)
and prints samples/s and the scaling 2-process / 1-process for both.

This machine's speed drifts by tens of percent over tens of seconds (other
tenants of the host), so each repetition runs the four measurements of a model
back to back (braid 1, braid 2, PyTorch 1, PyTorch 2, and in the reverse order
every other repetition, so a steady drift favours neither) and the scaling is
the median over repetitions of each repetition's own 2-process / 1-process
ratio; the samples/s columns are medians too. JSON (every run's figures) to bench/results/dp_vs_pytorch.json.

    /usr/bin/python3 bench/dp/dp_vs_pytorch.py --build build --steps 300 --reps 3
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def braid_rate(build, model, world, steps):
    braid = os.path.join(build, "bin", "braid")
    config = os.path.join(ROOT, "examples", "configs", f"fashion_{model}.toml")
    with tempfile.TemporaryDirectory() as tmp:
        summary = os.path.join(tmp, "summary.json")
        train = [braid, "train", config, "--set", f"train.max_steps={steps}", "--set", "train.threads=1",
                 "--set", "train.eval_every=0", "--set", f"train.out_dir={tmp}/run", "--set", "train.progress=lines",
                 "--set", "train.log_every=100000", "--set", "train.checkpoint_every=100000000",
                 "--summary-json", summary]
        if world > 1:
            cmd = [braid, "launch", "-n", str(world), "--"] + train + ["--set", "parallel.strategy=allreduce"]
        else:
            cmd = train
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(summary) as f:
            s = json.load(f)
        return s.get("global_samples_per_s", s["samples_per_s"])


def torch_rate(model, world, steps):
    out = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench", "dp", "pytorch_ddp.py"), "--model", model,
                          "--world", str(world), "--steps", str(steps)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["samples_per_s"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--models", default="mlp,cnn")
    args = p.parse_args()
    results = []
    print(f"{'model':5} {'peer':8} {'1 proc':>10} {'2 procs':>10} {'scaling':>8}  (per repetition)")
    for model in args.models.split(","):
        steps = args.steps if model == "mlp" else max(50, args.steps // 3)
        runs = [("braid", 1, lambda: braid_rate(args.build, model, 1, steps)),
                ("braid", 2, lambda: braid_rate(args.build, model, 2, steps)),
                ("pytorch", 1, lambda: torch_rate(model, 1, steps)),
                ("pytorch", 2, lambda: torch_rate(model, 2, steps))]
        rates = {(peer, world): [] for peer, world, _ in runs}
        for rep in range(args.reps):
            for peer, world, fn in (runs if rep % 2 == 0 else runs[::-1]):
                rates[(peer, world)].append(fn())
        row = {"model": model, "batch_per_worker": 64, "threads_per_worker": 1, "steps": steps}
        for peer in ("braid", "pytorch"):
            one, two = rates[(peer, 1)], rates[(peer, 2)]
            ratios = [b / a for a, b in zip(one, two)]
            row[peer] = {"one": statistics.median(one), "two": statistics.median(two),
                         "scaling": statistics.median(ratios), "one_runs": one, "two_runs": two,
                         "scaling_runs": ratios}
            print(f"{model:5} {peer:8} {row[peer]['one']:10.0f} {row[peer]['two']:10.0f} "
                  f"{row[peer]['scaling']:7.2f}x  ({' '.join(f'{r:.2f}' for r in ratios)})", flush=True)
        results.append(row)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "dp_vs_pytorch.json"), "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
