#!/usr/bin/python3
"""Ensembles and distillation on Fashion-MNIST (examples/configs/fashion_mlp.toml,
MLP 784-256-256-10, SGD momentum, cosine schedule), fixed epochs, against
single models at the same budgets. Per K in --members and per seed:

  ensemble   braid launch -n K -- braid train ... parallel.strategy=ensemble,
             train.epochs=E, each member on the whole training set; its
             members' and the ensemble's test top-1; then a student
             (distill.hidden, default 64) distilled for distill.epochs = E
             on the K ranks, data parallel with the members' global batch
  teacher    bench/ensemble/teacher_cost.cc on the same members: the soft
             targets precomputed once (forward + one all-reduce) against
             per batch (a forward and an all-reduce per student step, each epoch)
  shards     the same K members with ensemble.data=shard (each E epochs of
             its 1/K shard: the compute of one model's E epochs), no student

and the single models (parallel.strategy=none): the member's architecture
for E epochs (one member's budget) and for K x E epochs (the whole
ensemble's budget), and the student's architecture for E epochs from the
labels alone (the student's budget). Every process runs one intra-op thread.
Prints medians over seeds and writes bench/results/ensemble_distill.json.

    flock /tmp/bench.lock /usr/bin/python3 bench/ensemble/ensemble_distill.py --members 2 4 --epochs 4 --reps 3
"""
import argparse, json, os, statistics, subprocess, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(cmd, what):
    t0 = time.time()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=7200)
    if done.returncode != 0:
        raise RuntimeError(f"{what}: {' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout, time.time() - t0


def sets(pairs):
    out = []
    for p in pairs:
        out += ["--set", p]
    return out


def single(a, tmp, name, epochs, hidden, seed):
    summary = os.path.join(tmp, f"{name}.json")
    cmd = [a.braid, "train", a.config, "--summary-json", summary] + sets(
        a.set + ["parallel.strategy=none", f"train.epochs={epochs}", f"model.hidden={hidden}", f"train.seed={seed}",
                 f"train.out_dir={tmp}/{name}", "train.threads=1", "train.progress=off", "train.eval_every=1000"])
    _, wall = run(cmd, name)
    s = json.load(open(summary))
    return {"top1": s["eval"]["top1"], "loss": s["eval"]["loss"], "epochs": epochs, "hidden": hidden,
            "wall_seconds": wall}


def ensemble(a, tmp, k, seed, data, distill):
    out_dir = f"{tmp}/ens-{k}-{data}"
    summary = f"{out_dir}.json"
    common = ["parallel.strategy=ensemble", f"train.epochs={a.epochs}", f"train.seed={seed}",
              f"train.out_dir={out_dir}", "train.threads=1", "train.progress=off", "train.eval_every=1000",
              f"ensemble.data={data}"] + a.set
    cmd = [a.braid, "launch", "-n", str(k), "--", a.braid, "train", a.config, "--summary-json", summary] + sets(
        common + [f"distill.epochs={a.epochs if distill else 0}", f"distill.hidden={a.student_hidden}",
                  f"distill.temperature={a.temperature}", f"distill.alpha={a.alpha}"])
    _, wall = run(cmd, f"ensemble of {k} ({data})")
    s = json.load(open(summary))
    e = s["ensemble"]
    r = {"members": [m["top1"] for m in e["members"]], "member_losses": [m["loss"] for m in e["members"]],
         "mean_member_top1": e["mean_member_top1"], "best_member_top1": e["best_member_top1"],
         "ensemble_top1": e["top1"], "ensemble_loss": e["loss"], "wall_seconds": wall,
         "bytes_sent_training": s["aggregation"]["bytes_sent_training"], "bytes_sent": s["aggregation"]["bytes_sent"]}
    if distill:
        st = s["student"]
        r["student"] = {"top1": st["eval"]["top1"], "loss": st["eval"]["loss"], "hidden": st["hidden"],
                        "parameters": st["parameters"], "steps": st["steps"], "teacher_top1_train": st["teacher"]["top1_train"]}
        tc = [a.teacher_cost, a.config, "--reps", "3"] + sets(common + [f"distill.temperature={a.temperature}"])
        out, _ = run([a.braid, "launch", "-n", str(k), "--"] + tc, "teacher cost")
        line = [l for l in out.splitlines() if "{" in l][-1]
        r["teacher_cost"] = json.loads(line[line.index("{"):])
    return r


def med(rows, f):
    return statistics.median(f(r) for r in rows)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--config", default=os.path.join(ROOT, "examples", "configs", "fashion_mlp.toml"))
    p.add_argument("--members", type=int, nargs="+", default=[2, 4])
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256, help="the members' model.hidden")
    p.add_argument("--student-hidden", type=int, default=64)
    p.add_argument("--temperature", type=float, default=2.0)
    p.add_argument("--alpha", type=float, default=0.5)
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--set", action="append", default=[], help="extra config override for every run")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "ensemble_distill.json"))
    a = p.parse_args()
    a.braid = os.path.join(a.build, "bin", "braid")
    a.teacher_cost = os.path.join(a.build, "bin", "teacher_cost")
    a.set = [f"model.hidden={a.hidden}"] + a.set
    res = {"config": os.path.relpath(a.config, ROOT), "epochs": a.epochs, "hidden": a.hidden,
           "student_hidden": a.student_hidden, "temperature": a.temperature, "alpha": a.alpha, "reps": a.reps,
           "threads_per_process": 1, "single": {}, "ensembles": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.reps):
            seed = 1 + rep
            for name, epochs, hidden in [(f"member_budget_e{a.epochs}", a.epochs, a.hidden),
                                         (f"student_budget_e{a.epochs}_h{a.student_hidden}", a.epochs, a.student_hidden)] + \
                                        [(f"ensemble_budget_e{k * a.epochs}", k * a.epochs, a.hidden) for k in a.members]:
                res["single"].setdefault(name, []).append(single(a, tmp, f"{name}-{seed}", epochs, hidden, seed))
            for k in a.members:
                slot = res["ensembles"].setdefault(str(k), {"whole": [], "shard": []})
                slot["whole"].append(ensemble(a, tmp, k, seed, "whole", distill=True))
                slot["shard"].append(ensemble(a, tmp, k, seed, "shard", distill=False))
    single_med = {n: med(v, lambda r: r["top1"]) for n, v in res["single"].items()}
    res["medians"] = {"single": single_med, "ensembles": {}}
    print(f"Fashion-MNIST MLP hidden {a.hidden}, {a.epochs} epochs per member, {a.reps} seed(s), medians of test top-1")
    for n, v in single_med.items():
        print(f"  one model, {n:32} {v:.4f}")
    for k in a.members:
        w, s = res["ensembles"][str(k)]["whole"], res["ensembles"][str(k)]["shard"]
        m = {"mean_member": med(w, lambda r: r["mean_member_top1"]), "best_member": med(w, lambda r: r["best_member_top1"]),
             "ensemble": med(w, lambda r: r["ensemble_top1"]), "student": med(w, lambda r: r["student"]["top1"]),
             "shard_mean_member": med(s, lambda r: r["mean_member_top1"]), "shard_ensemble": med(s, lambda r: r["ensemble_top1"]),
             "teacher_precomputed_s": med(w, lambda r: r["teacher_cost"]["precomputed_seconds"]),
             "teacher_online_s_per_epoch": med(w, lambda r: r["teacher_cost"]["online_seconds_per_epoch"])}
        res["medians"]["ensembles"][str(k)] = m
        print(f"  K = {k}: members {m['mean_member']:.4f} (best {m['best_member']:.4f}), ensemble {m['ensemble']:.4f} "
              f"({100 * (m['ensemble'] - m['mean_member']):+.2f} points); one model at K x E epochs "
              f"{single_med[f'ensemble_budget_e{k * a.epochs}']:.4f}")
        print(f"         student h{a.student_hidden} {m['student']:.4f} vs the same model from labels "
              f"{single_med[f'student_budget_e{a.epochs}_h{a.student_hidden}']:.4f}; shards: members "
              f"{m['shard_mean_member']:.4f}, ensemble {m['shard_ensemble']:.4f} (one model at E epochs "
              f"{single_med[f'member_budget_e{a.epochs}']:.4f})")
        print(f"         teacher: precomputed {m['teacher_precomputed_s']:.2f} s once, per batch "
              f"{m['teacher_online_s_per_epoch']:.2f} s every epoch")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
