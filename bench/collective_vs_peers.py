#!/usr/bin/env python3
"""braid's all-reduce side by side with Open MPI's MPI_Allreduce and Gloo's ring
all-reduce, on the same sizes, in the same run, with the same timing loop
(warm-up, adaptive iteration count, slowest rank's mean per op). Prints one
table with latency and bus bandwidth per size and the braid/peer ratios.

  bench/collective_vs_peers.py --build build --ranks 2 --sizes 4K..64M --transports shm,tcp

braid runs under `braid launch` for process transports (tcp, shm, mpi) and as
threads for inproc. Open MPI runs with its defaults (shared memory on one
host); Gloo over its tcp transport on loopback. --tuned-peers runs the peers
with GLIBC_TUNABLES raising the mmap threshold (glibc's moving threshold
otherwise turns their large, short-lived buffers into page-fault storms); the
table says which was used.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

TUNABLES = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824"


def parse_size(s):
    units = {"": 1, "B": 1, "K": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20, "G": 1 << 30}
    num = s.rstrip("KMGiB")
    return int(num) * units[s[len(num):]]


def expand(spec, factor):
    if ".." in spec:
        lo, hi = (parse_size(x) for x in spec.split(".."))
        out = []
        while lo <= hi:
            out.append(lo)
            lo *= factor
        return out
    return [parse_size(x) for x in spec.split(",")]


def json_line(text, who):
    for line in text.splitlines():
        i = line.find("{")
        if i >= 0 and '"results"' in line:
            return json.loads(line[i:])
    raise SystemExit(f"{who}: no JSON result in output:\n{text[-3000:]}")


def run(cmd, who, env=None, timeout=1800):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if p.returncode != 0:
        raise SystemExit(f"{who} failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p.stdout


def braid(args, transport, sizes):
    cmd = [args.braid, "bench", "collective", "--op", "allreduce", "--transport", transport,
           "--algorithm", args.algorithm, "--sizes", sizes, "--seconds", str(args.seconds), "--json"]
    if transport == "inproc":
        cmd += ["--ranks", str(args.ranks)]
    else:
        cmd = [args.braid, "launch", "-n", str(args.ranks), "--"] + cmd
    return json_line(run(cmd, f"braid {transport}"), f"braid {transport}")


def peer_env(args):
    env = dict(os.environ)
    if args.tuned_peers:
        env["GLIBC_TUNABLES"] = TUNABLES
    return env


def mpi(args, sizes):
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", str(args.ranks),
           os.path.join(args.build, "bin", "bench_mpi_allreduce"), "--sizes", sizes, "--seconds", str(args.seconds)]
    return json_line(run(cmd, "Open MPI", env=peer_env(args)), "Open MPI")


def gloo(args, sizes):
    exe = os.path.join(args.build, "bin", "bench_gloo_allreduce")
    with tempfile.TemporaryDirectory() as store:
        procs = []
        for r in range(args.ranks):
            env = peer_env(args)
            env.update(RANK=str(r), WORLD_SIZE=str(args.ranks), GLOO_STORE_DIR=store)
            procs.append(subprocess.Popen([exe, "--sizes", sizes, "--seconds", str(args.seconds)],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
        outs = [p.communicate(timeout=1800) for p in procs]
        if any(p.returncode for p in procs):
            raise SystemExit(f"Gloo failed: {[o[1][-1000:] for o in outs]}")
    return json_line(outs[0][0], "Gloo")


def by_size(result):
    return {r["bytes"]: r for r in result["results"]}


def human(b):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift}{unit}"
    return str(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="build folder holding bin/braid and the peer programs")
    ap.add_argument("--braid", help="braid binary (default BUILD/bin/braid)")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--sizes", default="4K..64M")
    ap.add_argument("--factor", type=int, default=4)
    ap.add_argument("--transports", default="shm,tcp", help="braid transports, comma separated (inproc, shm, tcp, mpi)")
    ap.add_argument("--algorithm", default="auto")
    ap.add_argument("--seconds", type=float, default=0.25, help="timed seconds per size")
    ap.add_argument("--tuned-peers", action="store_true", help="run the peers with a raised glibc mmap threshold")
    ap.add_argument("--skip-peers", default="", help="comma list of peers not to run (mpi, gloo)")
    args = ap.parse_args()
    args.braid = args.braid or os.path.join(args.build, "bin", "braid")
    sizes = expand(args.sizes, args.factor)
    size_list = ",".join(str(s) for s in sizes)

    columns = {}
    for t in [t for t in args.transports.split(",") if t]:
        columns[f"braid-{t}"] = by_size(braid(args, t, size_list))
    skip = set(args.skip_peers.split(","))
    if "mpi" not in skip:
        columns["openmpi"] = by_size(mpi(args, size_list))
    if "gloo" not in skip:
        columns["gloo"] = by_size(gloo(args, size_list))

    names = list(columns)
    print(f"# all-reduce f32 sum, {args.ranks} ranks, one host; busbw = 2(p-1)/p x bytes/time (GB/s); "
          f"peers: glibc {'tuned (' + TUNABLES + ')' if args.tuned_peers else 'defaults'}")
    head = f"{'size':>6} " + " ".join(f"{n + ' us':>16} {n + ' GB/s':>18}" for n in names)
    ratios = [(b, p) for b in names if b.startswith("braid") for p in names if not p.startswith("braid")]
    head += "".join(f" {b.split('-')[1] + '/' + p:>14}" for b, p in ratios)
    print(head)
    for s in sizes:
        row = f"{human(s):>6} "
        row += " ".join(f"{columns[n][s]['latency_us']:>16.1f} {columns[n][s]['busbw_GBps']:>18.3f}" for n in names)
        # ratio of times: > 1 means braid is faster
        row += "".join(f" {columns[p][s]['latency_us'] / columns[b][s]['latency_us']:>14.2f}" for b, p in ratios)
        print(row)
    print("# ratio columns: peer time / braid time (> 1: braid faster)")


if __name__ == "__main__":
    sys.exit(main())
