#!/usr/bin/python3
"""Population-based training against random search at equal compute: the
same N members (`braid launch -n N -- braid pbt`), each starting from random
hyper-parameters drawn from the config's [pbt] ranges, trained for the same
epochs with exploit/explore on (PBT) and off (N independent runs: random
search). Per run, the member best on the validation split is the one chosen;
prints its test accuracy and the best test accuracy of any member, medians
over --reps seeds (alternating the order), and writes
bench/results/pbt_vs_random.json.

    /usr/bin/python3 bench/pbt/pbt_vs_random.py --members 4 --epochs 4 --reps 3
"""
import argparse, json, os, statistics, subprocess, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(build, config, members, epochs, seed, exploit, extra):
    braid = os.path.join(build, "bin", "braid")
    with tempfile.TemporaryDirectory() as tmp:
        summary = os.path.join(tmp, "summary.json")
        cmd = [braid, "launch", "-n", str(members), "--", braid, "pbt", config, "--summary-json", summary]
        for s in [f"train.epochs={epochs}", f"train.seed={seed}", f"train.out_dir={tmp}/run",
                  f"pbt.exploit={'true' if exploit else 'false'}", "train.log_every=100000"] + extra:
            cmd += ["--set", s]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=7200)
        if done.returncode != 0:
            raise RuntimeError(f"{cmd} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
        finals = json.load(open(summary))
    chosen = max(finals, key=lambda f: f["validation"])
    return {"chosen_test": chosen["test"], "chosen_validation": chosen["validation"],
            "best_test": max(f["test"] for f in finals), "members": finals}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--config", default=os.path.join(ROOT, "examples", "configs", "fashion_pbt.toml"))
    p.add_argument("--members", type=int, default=4)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--set", action="append", default=[], help="extra config override")
    a = p.parse_args()
    plans = [("random search", False), ("pbt", True)]
    runs = {name: [] for name, _ in plans}
    for rep in range(a.reps):
        for name, exploit in (plans if rep % 2 == 0 else list(reversed(plans))):
            runs[name].append(run(a.build, a.config, a.members, a.epochs, 1 + rep, exploit, a.set))
    print(f"{a.members} members x {a.epochs} epochs each, {a.reps} seed(s)")
    print(f"{'plan':14} {'chosen by validation: test top-1':>33} {'best member test top-1':>23}  per seed (chosen)")
    for name, _ in plans:
        chosen = [r["chosen_test"] for r in runs[name]]
        best = [r["best_test"] for r in runs[name]]
        print(f"{name:14} {statistics.median(chosen):33.4f} {statistics.median(best):23.4f}  "
              f"{' '.join(f'{v:.4f}' for v in chosen)}")
    d = statistics.median(r["chosen_test"] for r in runs["pbt"]) - \
        statistics.median(r["chosen_test"] for r in runs["random search"])
    print(f"pbt - random search (chosen member): {100 * d:+.2f} points")
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "pbt_vs_random.json"), "w") as f:
        json.dump({"args": vars(a), "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
