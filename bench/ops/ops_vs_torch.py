#!/usr/bin/python3
"""braid vs PyTorch on the issue-2 layers, forward+backward, in one run.

Runs build/bench/ops/braid_ops_bench (Google Benchmark) and the same layers in
PyTorch (Debian's python3-torch; run with /usr/bin/python3), each PyTorch
configuration in its own process:
  torch.set_num_threads(T) with OPENBLAS_NUM_THREADS in {1, T} (PyTorch's
  OpenMP pool and the pthread OpenBLAS pool beside it), OPENBLAS_CORETYPE in
  {the environment's (Haswell preset or auto-detected), SkylakeX}, and glibc's
  mmap threshold fixed or left moving (GLIBC_TUNABLES). The best configuration
  per layer is PyTorch's figure; the table says which one won.

braid's benchmark runs once beside every PyTorch configuration (interleaved,
so both sides meet the same machine load and get as many runs). Each figure is
the minimum and the median over all repetitions of the mean step time; on
shared cores the minimum is the primary figure (the least disturbed run) and
the median is reported beside it. For 1 thread the CPU time (process CPU
seconds per step, which time-slicing by other processes does not inflate) is
compared too: it is the steadiest figure on a loaded machine.

  /usr/bin/python3 bench/ops/ops_vs_torch.py [--bin build/bench/ops/braid_ops_bench]
        [--reps 7] [--out bench/results/ops.json] [--quick]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

LAYERS = ["mlp/batch:64", "mlp/batch:256", "conv1", "conv2", "maxpool"]
TUNABLES = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824"


def torch_worker(threads, reps, min_time):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    torch.manual_seed(0)

    def param(*shape):
        return (torch.rand(*shape) * 2 - 1).requires_grad_()

    def mlp(batch):
        x = torch.rand(batch, 784) * 2 - 1
        p = [param(256, 784), param(256), param(256, 256), param(256), param(10, 256), param(10)]
        seed = torch.ones(batch, 10)

        def step():
            for t in p:
                t.grad = None
            h = F.relu(F.linear(x, p[0], p[1]))
            h = F.relu(F.linear(h, p[2], p[3]))
            F.linear(h, p[4], p[5]).backward(seed)
        return step

    def conv(xs, ws, x_grad):
        x = torch.rand(*xs) * 2 - 1
        if x_grad:
            x.requires_grad_()
        w, b = param(*ws), param(ws[0])
        seed = torch.ones(F.conv2d(x.detach(), w.detach()).shape)

        def step():
            for t in (w, b, x):
                t.grad = None
            F.conv2d(x, w, b).backward(seed)
        return step

    def maxpool():
        x = param(64, 32, 26, 26)
        seed = torch.ones(64, 32, 13, 13)

        def step():
            x.grad = None
            F.max_pool2d(x, 2).backward(seed)
        return step

    steps = {"mlp/batch:64": mlp(64), "mlp/batch:256": mlp(256),
             "conv1": conv((64, 1, 28, 28), (32, 1, 3, 3), False),
             "conv2": conv((64, 32, 13, 13), (64, 32, 3, 3), True), "maxpool": maxpool()}
    out = {}
    for name, step in steps.items():
        for _ in range(20):  # as many warm-up steps as the braid side
            step()
        t0 = time.perf_counter()
        n = 0
        while time.perf_counter() - t0 < min_time / 4 or n < 3:
            step()
            n += 1
        per = (time.perf_counter() - t0) / n
        iters = max(3, int(min_time / max(per, 1e-7)))
        times, cpu = [], []
        for _ in range(reps):
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(iters):
                step()
            times.append((time.perf_counter() - t0) / iters * 1e6)
            cpu.append((time.process_time() - c0) / iters * 1e6)
        out[name] = {"wall": times, "cpu": cpu}
    print(json.dumps(out))


def summarize(times, cpu):
    return {"min_us": min(times), "median_us": statistics.median(times), "reps": len(times),
            "cpu_min_us": min(cpu)}


def run_braid(binary, threads, reps, min_time):
    """{layer: [mean step time in us per repetition]} for one thread count."""
    cmd = [binary, "--benchmark_format=json", f"--benchmark_repetitions={reps}",
           f"--benchmark_min_time={min_time}", f"--benchmark_filter=threads:{threads}/"]
    doc = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    runs = {}
    for b in doc["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        # BM_mlp/batch:64/threads:1/real_time -> mlp/batch:64
        parts = b["run_name"].split("/")
        layer = "/".join(p for p in parts if not p.startswith(("threads:", "real_time")))[3:]
        assert b["time_unit"] == "us"
        runs.setdefault(layer, {"wall": [], "cpu": []})
        runs[layer]["wall"].append(b["real_time"])
        runs[layer]["cpu"].append(b["cpu_time"])  # the benchmark thread's CPU time
    return runs, doc.get("context", {})


def torch_configs(threads, quick):
    base = os.environ.get("OPENBLAS_CORETYPE", "")
    cores = [base, "SkylakeX"] if not quick else [base]
    blas = sorted({1, threads})
    tun = [False, True] if not quick else [True]
    for core in cores:
        for bt in blas:
            for t in tun:
                yield {"threads": threads, "openblas_coretype": core or "auto", "openblas_threads": bt,
                       "glibc_tunables": t}


def run_torch(cfg, reps, min_time):
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = str(cfg["openblas_threads"])
    env["OMP_NUM_THREADS"] = str(cfg["threads"])
    if cfg["openblas_coretype"] != "auto":
        env["OPENBLAS_CORETYPE"] = cfg["openblas_coretype"]
    else:
        env.pop("OPENBLAS_CORETYPE", None)
    if cfg["glibc_tunables"]:
        env["GLIBC_TUNABLES"] = TUNABLES
    cmd = ["/usr/bin/python3", __file__, "--torch-worker", str(cfg["threads"]), "--reps", str(reps),
           "--min-time", str(min_time)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:  # e.g. a core type this CPU cannot run
        return None, p.stderr.strip().splitlines()[-1:] or [f"exit {p.returncode}"]
    return {k: summarize(v["wall"], v["cpu"]) for k, v in json.loads(p.stdout).items()}, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bench/ops/braid_ops_bench")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("--out", default="bench/results/ops.json")
    ap.add_argument("--quick", action="store_true", help="one PyTorch configuration per thread count")
    ap.add_argument("--torch-worker", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_worker:
        return torch_worker(a.torch_worker, a.reps, a.min_time)

    rows, failed, context = [], [], {}
    for threads in (1, 2):
        best, braid_times = {}, {}
        for cfg in torch_configs(threads, a.quick):
            res, err = run_torch(cfg, a.reps, a.min_time)
            if res is None:  # e.g. SIGILL: a core type this CPU cannot run
                failed.append({"config": cfg, "error": err})
                continue
            times, context = run_braid(a.bin, threads, a.reps, a.min_time)
            for layer, t in times.items():
                acc = braid_times.setdefault(layer, {"wall": [], "cpu": []})
                acc["wall"].extend(t["wall"])
                acc["cpu"].extend(t["cpu"])
            for layer, s in res.items():
                if layer not in best or s["min_us"] < best[layer][0]["min_us"]:
                    best[layer] = (s, cfg)
        for layer in LAYERS:
            if layer not in braid_times or layer not in best:
                continue
            b = summarize(braid_times[layer]["wall"], braid_times[layer]["cpu"])
            t, cfg = best[layer]
            row = {"layer": layer, "threads": threads, "braid": b, "torch": t, "torch_config": cfg,
                   "ratio_min": b["min_us"] / t["min_us"], "ratio_median": b["median_us"] / t["median_us"]}
            if threads == 1:  # with more threads the two sides count CPU time differently
                row["ratio_cpu"] = b["cpu_min_us"] / t["cpu_min_us"]
            rows.append(row)

    print(f"{'layer':<15}{'thr':>4}{'braid us':>11}{'torch us':>11}{'ratio':>7}{'(median)':>9}{'(cpu)':>7}"
          "  torch config")
    for r in rows:
        c = r["torch_config"]
        print(f"{r['layer']:<15}{r['threads']:>4}{r['braid']['min_us']:>11.1f}{r['torch']['min_us']:>11.1f}"
              f"{r['ratio_min']:>7.2f}{r['ratio_median']:>9.2f}{r.get('ratio_cpu', float('nan')):>7.2f}  coretype={c['openblas_coretype']} "
              f"openblas_threads={c['openblas_threads']} glibc_tunables={c['glibc_tunables']}")
    for f in failed:
        print("PyTorch configuration failed:", f["config"], f["error"])
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "braid_openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "auto"),
                   "load_average": os.getloadavg(), "braid_context": context, "rows": rows,
                   "failed_torch_configs": failed}, f, indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    sys.exit(main())
