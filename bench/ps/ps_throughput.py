#!/usr/bin/env python3
"""Parameter-server push/pull throughput: runs bin/ps_throughput as the one
worker of `braid launch --servers S --workers 1` for each dense size (a job's
dense size is fixed by its first hello, so one job per size) and once for the
sparse key counts, for each S, and prints one table.

  bench/ps/ps_throughput.py --build build --servers 1,2 --dense-mib 1,4,16,64 --keys 1000,10000,100000

JSON (with the load average before and after, the machine is shared) to
bench/results/ps_throughput.json unless --out says otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from bench_util import write_result

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def job(args, servers, extra):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [args.braid, "launch", "--servers", str(servers), "--workers", "1", "--",
               args.program, "--reps", str(args.reps), "--json", out] + extra
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
        with open(out) as f:
            return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="build folder with bin/braid and bin/ps_throughput")
    ap.add_argument("--servers", default="1,2")
    ap.add_argument("--dense-mib", default="1,4,16,64")
    ap.add_argument("--keys", default="1000,10000,100000")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "ps_throughput.json"))
    args = ap.parse_args()
    args.braid = os.path.join(args.build, "bin", "braid")
    args.program = os.path.join(args.build, "bin", "ps_throughput")

    load_before = os.getloadavg()
    t0 = time.time()
    runs = []
    for s in (int(x) for x in args.servers.split(",")):
        run = {"servers": s, "dense": [], "sparse": []}
        for mib in args.dense_mib.split(","):
            r = job(args, s, ["--dense-mib", mib, "--no-sparse"])
            run["transport"] = r["transport"]
            run["dense"] += r["dense"]
        if args.keys:
            run["sparse"] = job(args, s, ["--dense-mib", "0", "--keys", args.keys])["sparse"]
        runs.append(run)
    load_after = os.getloadavg()

    print(f"# ps push/pull, 1 worker, asp + sgd, median of {args.reps} reps; "
          f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after, {os.cpu_count()} cpus")
    print(f"{'S':>2} {'dense':>6} {'push ms':>9} {'pull ms':>9} {'push GB/s':>10} {'pull GB/s':>10}")
    for run in runs:
        for d in run["dense"]:
            print(f"{run['servers']:>2} {d['bytes'] >> 20:>4}Mi {d['push_s'] * 1e3:>9.2f} {d['pull_s'] * 1e3:>9.2f} "
                  f"{d['push_GBps']:>10.2f} {d['pull_GBps']:>10.2f}")
    print(f"{'S':>2} {'keys':>6} {'push ms':>9} {'pull ms':>9} {'push Mkey/s':>12} {'pull Mkey/s':>12} "
          f"{'push GB/s':>10} {'pull GB/s':>10}   (dim {runs[0]['sparse'][0]['dim'] if runs and runs[0]['sparse'] else '-'})")
    for run in runs:
        for r in run["sparse"]:
            print(f"{run['servers']:>2} {r['keys']:>6} {r['push_s'] * 1e3:>9.2f} {r['pull_s'] * 1e3:>9.2f} "
                  f"{r['push_keys_per_s'] / 1e6:>12.2f} {r['pull_keys_per_s'] / 1e6:>12.2f} "
                  f"{r['push_GBps']:>10.3f} {r['pull_GBps']:>10.3f}")
    write_result(args.out, "ps_throughput", ROOT, t0, load_before, load_after, {"reps": args.reps, "runs": runs})


if __name__ == "__main__":
    sys.exit(main())
