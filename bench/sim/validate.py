#!/usr/bin/python3
"""braid sim against real runs, then projected to 1,024 ranks.

Part 1, --validate: each plan below is predicted by `braid sim` and run for
real on this machine, in the same invocation; the table prints predicted and
measured step time (the trainer's own per-step step_ms, the first fifth left
out, median per run, median over --reps runs) and the error. Plans marked `netns` run on 4 network
namespaces joined by a bridge with each host's egress shaped by tc tbf
(tests/comm/netns_lib.sh; needs root), one rank per namespace over TCP; the
prediction for them describes the same thing: 4 hosts, the --rate link, and
the machine's cores shared by the 4 "hosts" (0.5 core each on 2 cores), and
messages between them costing the CPU loopback TCP costs here (--link-cpu tcp).

Part 2, --project: the plans at 64, 256 and 1,024 ranks on a described
cluster (hosts of 8 ranks with 16 cores, 100 Gbit/s and 5 us between hosts),
the plan `braid sim --sweep` recommends at each size, and the scaling curve
drawn as a PNG (python3-matplotlib).

  /usr/bin/python3 bench/sim/validate.py --build build --reps 3
  /usr/bin/python3 bench/sim/validate.py --build build --only project
Results: bench/results/sim_validate.json, bench/results/sim_projection.png.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NETNS_HOSTS = 4

# name, config, world, servers, --set overrides, where it runs
PLANS = [
    ("mlp allreduce, overlap, shm", "fashion_mlp", 2, 0, [], "local"),
    ("mlp allreduce, no overlap, shm", "fashion_mlp", 2, 0, ["parallel.overlap=false"], "local"),
    ("cnn allreduce, 256 KiB buckets, shm", "fashion_cnn", 2, 0, ["parallel.bucket_kb=256"], "local"),
    ("mlp allreduce, tcp loopback", "fashion_mlp", 2, 0, ["parallel.transport=tcp"], "local"),
    ("mlp allreduce, 4 processes, shm", "fashion_mlp", 4, 0, [], "local"),
    ("mlp ps bsp, 1 server 2 workers", "fashion_mlp", 3, 1, ["parallel.strategy=ps", "ps.consistency=bsp"], "local"),
    ("mlp ps asp, 1 server 2 workers", "fashion_mlp", 3, 1, ["parallel.strategy=ps", "ps.consistency=asp"], "local"),
    ("mlp pipeline 2, 4 micro-batches", "fashion_mlp", 2, 0, ["parallel.pipeline=2", "parallel.microbatches=4"], "local"),
    ("transformer tensor 2", "char_transformer", 2, 0, ["parallel.tensor=2"], "local"),
    ("mlp allreduce + fp16 codec", "fashion_mlp", 2, 0, ["parallel.codec=fp16"], "local"),
    ("mlp allreduce, 4 hosts, tbf tcp", "fashion_mlp", 4, 0, [], "netns"),
    ("cnn allreduce, 4 hosts, tbf tcp", "fashion_cnn", 4, 0, ["parallel.bucket_kb=256"], "netns"),
]

PROJECT_PLANS = [
    ("allreduce", "fashion_cnn", []),
    ("allreduce + fp16", "fashion_cnn", ["parallel.codec=fp16"]),
    ("pipeline 2 x data", "fashion_cnn", ["parallel.pipeline=2", "parallel.microbatches=4"]),
    ("local_sgd period 8", "fashion_cnn", ["parallel.strategy=local_sgd", "local_sgd.period=8", "local_sgd.warmup=0"]),
    ("ps bsp (1 server per 8, to 256)", "fashion_cnn", ["parallel.strategy=ps", "ps.consistency=bsp"]),
]


def config_path(name):
    return os.path.join(ROOT, "examples", "configs", f"{name}.toml")


def sim(braid, config, world, servers, sets, extra, timeout=3600):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [braid, "sim", config_path(config), "--world", str(world), "--servers", str(servers), "--json", f.name]
        for kv in sets:
            cmd += ["--set", kv]
        p = subprocess.run(cmd + extra, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd + extra)} failed:\n{p.stdout}\n{p.stderr}")
        return json.load(open(f.name)), p.stdout


def median_step(path):
    """The median step_ms after the first fifth of the steps (as braid sim --validate reads them)."""
    steps = [json.loads(l)["step_ms"] for l in open(path) if '"step_ms"' in l]
    if len(steps) < 5:
        raise RuntimeError(f"{path}: {len(steps)} steps logged")
    return statistics.median(steps[len(steps) // 5:]) / 1e3


def netns_run(braid, ns, config, sets, steps, port):
    tmp = tempfile.mkdtemp(prefix="simval-")
    train = [braid, "train", config_path(config)]
    for kv in sets + [f"train.max_steps={steps}", "train.log_every=1", "train.eval_every=0",
                      "train.checkpoint_every=0"]:
        train += ["--set", kv]
    procs = []
    for i in reversed(range(NETNS_HOSTS)):
        cmd = ["ip", "netns", "exec", ns.host(i), "env", "BRAID_TOKEN=simval", f"BRAID_HOST={ns.ip(i)}",
               "BRAID_TRANSPORT=tcp", braid, "launch", "-n", "1", "--nnodes", str(NETNS_HOSTS), "--node-rank", str(i),
               "--master-addr", ns.ip(0), "--master-port", str(port), "--"] + train + ["--set", f"train.out_dir={tmp}/run"]
        procs.append(subprocess.Popen(cmd, stdout=open(f"{tmp}/h{i}.log", "w"), stderr=subprocess.STDOUT))
    for p in procs:
        p.wait(timeout=1800)
    if any(p.returncode for p in procs):
        raise RuntimeError(f"netns run failed; logs in {tmp}")
    return median_step(f"{tmp}/run/metrics.jsonl")


def validate(a, results):
    braid = os.path.join(a.build, "bin", "braid")
    ns = None
    rows = []
    try:
        for name, config, world, servers, sets, where in PLANS:
            if a.plans and not any(s in name for s in a.plans.split(",")):
                continue
            if where == "local":
                out, _ = sim(braid, config, world, servers, sets,
                             ["--validate", "--reps", str(a.reps), "--validate-steps", str(a.steps)])
                predicted, measured = out["validated_prediction_s"], out["measured_step_s"]
                runs = [(r["predicted_s"], r["measured_s"]) for r in out["runs"]]
            else:
                if ns is None:
                    sys.path.insert(0, os.path.join(ROOT, "bench", "aggregation"))
                    from zoo import Netns  # the namespaces' set-up, shared with the aggregation bench
                    ns = Netns(a.rate)
                    ns.start()
                # The link as TCP sees a tbf of --rate: 0.956 of it (bench/netns/README.md).
                unit = {"g": 1e9, "m": 1e6}[a.rate.lower().rstrip("bit")[-1]]
                bits = float(a.rate.lower().rstrip("bit")[:-1]) * unit
                link = f"{0.956 * bits / 8 / 1e6:.1f}MB/s,60us"
                # One rank per namespace, one thread each; the namespaces share this machine's cores.
                sets = sets + ["train.threads=1"]
                # The namespaces' TCP is this machine's: its CPU per message and byte, and its wake-up.
                out, _ = sim(braid, config, world, servers, sets + ["parallel.transport=tcp"],
                             ["--hosts", str(NETNS_HOSTS), "--cores", str(os.cpu_count() / NETNS_HOSTS), "--link", link,
                              "--link-cpu", "tcp"])
                predicted = out["prediction"]["step_s"]
                runs = [(predicted, netns_run(braid, ns, config, sets, a.steps, 29500 + i)) for i in range(a.reps)]
                measured = statistics.median(m for _, m in runs)
            err = (predicted - measured) / measured
            measured_runs = [m * 1e3 for _, m in runs]
            rows.append({"plan": name, "where": where, "predicted_ms": predicted * 1e3, "measured_ms": measured * 1e3,
                         "error": err, "sim_plan": out["prediction"]["plan"],
                         "runs_ms": [[p * 1e3, m * 1e3] for p, m in runs]})
            print(f"{name:42s} predicted {predicted * 1e3:8.3f} ms  measured {measured * 1e3:8.3f} ms  "
                  f"error {100 * err:+6.1f} %  (runs measured {min(measured_runs):.3f}-{max(measured_runs):.3f} ms)",
                  flush=True)
    finally:
        if ns is not None:
            ns.stop()
    results["validate"] = rows
    within = sum(abs(r["error"]) <= 0.15 for r in rows)
    print(f"\n{within} of {len(rows)} predictions within 15 % of the measurement")


def plot(curves, sizes):
    """The scaling curve as a PNG (drawn before the sweeps, which take minutes at 1,024 ranks)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, pts in curves.items():
        ax.plot([p["ranks"] for p in pts], [p["samples_per_s"] for p in pts], marker="o", label=name)
    base = curves["allreduce"][0]
    ax.plot(sizes, [base["samples_per_s"] * n / sizes[0] for n in sizes], "k--", lw=0.8, label="linear from 8")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("ranks (hosts of 8, 100 Gbit/s between hosts)")
    ax.set_ylabel("predicted samples/s (Fashion-MNIST CNN)")
    ax.set_title("braid sim: projected scaling")
    ax.grid(True, which="both", lw=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    png = os.path.join(ROOT, "bench", "results", "sim_projection.png")
    fig.savefig(png, dpi=110)
    print(f"plot: {png}")


def project(a, results):
    braid = os.path.join(a.build, "bin", "braid")
    cluster = ["--ranks-per-host", "8", "--cores", "16", "--link", "100Gbit/s,5us"]
    sizes = [8, 64, 256, 1024]
    curves, best = {}, {}
    for name, config, sets in PROJECT_PLANS:
        curves[name] = []
        for n in sizes:
            if "ps" in name and n > 256:
                continue  # S x W messages through shared interfaces: ~1 minute at 256 ranks, far more at 1,024
            servers = max(1, n // 8) if "ps" in name else 0
            t0 = time.monotonic()
            out, _ = sim(braid, config, n, servers, sets, cluster)
            p = out["prediction"]
            curves[name].append({"ranks": n, "samples_per_s": p["samples_per_s"], "step_ms": p["step_s"] * 1e3,
                                 "exposed_comm_ms": p["exposed_comm_s"] * 1e3, "sim_seconds": time.monotonic() - t0})
            print(f"{name:26s} {n:5d} ranks: {p['samples_per_s']:12.0f} samples/s, step {p['step_s'] * 1e3:8.3f} ms "
                  f"(exposed comm {p['exposed_comm_s'] * 1e3:.3f} ms; simulated in {time.monotonic() - t0:.1f} s)",
                  flush=True)
    plot(curves, sizes)
    for n in sizes[1:]:
        _, text = sim(braid, "fashion_cnn", n, 0, [], cluster + ["--sweep"])
        lines = text.splitlines()
        i = next(k for k, l in enumerate(lines) if l.startswith("sweep:"))
        table = [l.strip() for l in lines[i + 2:] if l.strip()]
        synchronous = next(l for l in table if "(other updates)" not in l)
        best[n] = {"first": table[0], "first_synchronous": synchronous, "top": table[:10]}
        print(f"{n} ranks, the sweep's first plan: {table[0]}\n    first synchronous: {synchronous}", flush=True)
    results["projection"] = {"cluster": "hosts of 8 ranks, 16 cores; 100 Gbit/s, 5 us between hosts",
                             "curves": curves, "sweep_best": best}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=120, help="steps per real run")
    ap.add_argument("--rate", default="1gbit", help="netns plans: tbf rate")
    ap.add_argument("--plans", default="", help="only plans whose name contains one of these (comma-separated)")
    ap.add_argument("--only", choices=("validate", "project"), default=None)
    ap.add_argument("--out", default=None, help="results JSON (default: bench/results/sim_validate.json, or "
                    "sim_projection.json with --only project)")
    a = ap.parse_args()
    results = {"load_before": os.getloadavg()}
    if a.only != "project":
        validate(a, results)
    if a.only != "validate":
        project(a, results)
    out = a.out or os.path.join(ROOT, "bench", "results",
                                "sim_validate.json" if a.only != "project" else "sim_projection.json")
    json.dump(results, open(out, "w"), indent=2)
    print(f"results: {out}")


if __name__ == "__main__":
    main()
