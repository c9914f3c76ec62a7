"""Driver of bench/train_vs_pytorch: runs braid and PyTorch on the same
configurations back to back and reports samples/s, their ratio and peak RSS.

PyTorch runs in each environment below and its best is the reference:
  default      the environment as it is (OPENBLAS_CORETYPE=Haswell preset here)
  skylakex     OPENBLAS_CORETYPE=SkylakeX (AVX-512 OpenBLAS kernels; dies with
               SIGILL on this machine: recorded as failed, the others still run)
  mmap         GLIBC_TUNABLES raising glibc's mmap/trim thresholds (avoids the
               page-fault storms glibc's moving mmap threshold causes
               with large, short-lived buffers)
  blas1        OPENBLAS_NUM_THREADS=1 (PyTorch's pool does the threading; the
               OpenBLAS pool beside it no longer spins on the same cores)
braid runs as shipped (`braid train`, data through its prefetching loader),
once beside each PyTorch configuration; its best run is its figure.
Peak RSS is each process's maximum resident set (/usr/bin/time %M).
MFU (model FLOPs utilisation) = samples/s x training FLOPs per sample (3x the
forward's multiply-adds x 2, counted analytically below) / the GEMM peak
measured here with the same thread count (a 2048^3 f32 matrix product, best of 5).
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TORCH_ENVS = {
    "default": {},
    "skylakex": {"OPENBLAS_CORETYPE": "SkylakeX"},
    "mmap": {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824"},
    # torch.set_num_threads sizes PyTorch's OpenMP pool only; Debian's pthread
    # OpenBLAS keeps its own pool of one thread per core beside it.
    "blas1": {"OPENBLAS_NUM_THREADS": "1"},
}


# Forward FLOPs per example (2 per multiply-add) of the two models in examples/configs.
FORWARD_FLOPS = {
    "mlp": 2 * (784 * 256 + 256 * 256 + 256 * 10),
    "cnn": 2 * (26 * 26 * 32 * 9 + 11 * 11 * 64 * 32 * 9 + 1600 * 128 + 128 * 10),
}

GEMM_PEAK = """
import sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
n = 2048
a, b = torch.randn(n, n), torch.randn(n, n)
torch.mm(a, b)
best = min((lambda t0: (torch.mm(a, b), time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(5))
print(2 * n ** 3 / best / 1e9)
"""


def gemm_peak_gflops(threads):
    """The f32 GEMM peak of this machine at `threads` threads (PyTorch's BLAS, best of 5).
    OPENBLAS_NUM_THREADS too: torch.set_num_threads does not size OpenBLAS's own
    pool, so a "1 thread" peak would otherwise run on every core."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
    p = subprocess.run(["/usr/bin/python3", "-c", GEMM_PEAK, str(threads)], capture_output=True, text=True, check=True,
                       env=env)
    return float(p.stdout.strip().splitlines()[-1])


def mfu(samples_per_s, model, peak_gflops):
    return samples_per_s * 3 * FORWARD_FLOPS[model] / (peak_gflops * 1e9)


def timed(cmd, env):
    """Runs cmd under /usr/bin/time; returns (stdout, peak RSS in MB)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        full = ["/usr/bin/time", "-f", "%M", "-o", tf.name] + cmd
        p = subprocess.run(full, env={**os.environ, **env}, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed (exit {p.returncode}):\n{p.stdout}\n{p.stderr}")
        return p.stdout, int(tf.read().strip().splitlines()[-1]) / 1024


def run_braid(braid, model, batch, threads, max_steps):
    with tempfile.TemporaryDirectory() as out:
        summary = os.path.join(out, "summary.json")
        cmd = [braid, "train", os.path.join(ROOT, f"examples/configs/fashion_{model}.toml"),
               "--set", "train.epochs=1", "--set", f"train.batch_size={batch}", "--set", f"train.threads={threads}",
               "--set", "train.eval_every=0", "--set", "train.progress=off", "--set", f"train.out_dir={out}",
               "--set", f"train.max_steps={max_steps}", "--set", "optim.schedule=constant", "--summary-json", summary]
        _, rss = timed(cmd, {})
        with open(summary) as f:
            s = json.load(f)
    return {"samples_per_s": s["samples_per_s"], "train_seconds": s["train_seconds"], "steps": s["steps"],
            "final_loss": s["final_loss"], "peak_rss_mb": rss}


def run_torch(model, batch, threads, max_steps, env):
    cmd = ["/usr/bin/python3", os.path.join(ROOT, "bench/train/torch_train.py"), "--model", model, "--batch",
           str(batch), "--threads", str(threads), "--max-steps", str(max_steps)]
    out, rss = timed(cmd, env)
    r = json.loads(out.strip().splitlines()[-1])
    r["peak_rss_mb"] = rss
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--braid", default=os.path.join(ROOT, "build/bin/braid"))
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--batches", default="64,256")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--torch-envs", default=",".join(TORCH_ENVS))
    ap.add_argument("--max-steps", type=int, default=0, help="0: one full epoch")
    a = ap.parse_args()
    rows = []
    peaks = {t: gemm_peak_gflops(t) for t in map(int, a.threads.split(","))}
    print("GEMM peak (f32, 2048^3): " + ", ".join(f"{t} thread(s) {g:.0f} GFLOP/s" for t, g in peaks.items()))
    print(f"{'model':5} {'batch':>5} {'thr':>3} | {'braid/s':>9} {'MFU':>5} {'rss MB':>7} | {'torch best/s':>12} "
          f"{'MFU':>5} {'env':>8} {'rss MB':>7} | {'ratio':>5}")
    for model in a.models.split(","):
        for batch in map(int, a.batches.split(",")):
            for threads in map(int, a.threads.split(",")):
                # braid runs once beside every PyTorch configuration (interleaved,
                # so both meet the same machine load) and its best run counts, as
                # PyTorch's best configuration does: best of as many runs each.
                braid_runs = []
                torch_runs = {}
                for e in a.torch_envs.split(","):
                    braid_runs.append(run_braid(a.braid, model, batch, threads, a.max_steps))
                    try:
                        torch_runs[e] = run_torch(model, batch, threads, a.max_steps, TORCH_ENVS[e])
                    except RuntimeError as err:  # e.g. SIGILL: OpenBLAS SkylakeX kernels on this CPU
                        torch_runs[e] = {"samples_per_s": 0.0, "peak_rss_mb": 0.0, "error": str(err).splitlines()[0]}
                        print(f"  pytorch [{e}] failed: {torch_runs[e]['error']}", flush=True)
                b = max(braid_runs, key=lambda r: r["samples_per_s"])
                b["runs_samples_per_s"] = [r["samples_per_s"] for r in braid_runs]
                best_env = max(torch_runs, key=lambda e: torch_runs[e]["samples_per_s"])
                best = torch_runs[best_env]
                ratio = b["samples_per_s"] / best["samples_per_s"] if best["samples_per_s"] > 0 else float("nan")
                b["mfu"] = mfu(b["samples_per_s"], model, peaks[threads])
                best["mfu"] = mfu(best["samples_per_s"], model, peaks[threads])
                rows.append({"model": model, "batch": batch, "threads": threads, "braid": b, "torch": torch_runs,
                             "torch_best_env": best_env, "ratio_vs_best": ratio, "gemm_peak_gflops": peaks[threads],
                             "train_flops_per_sample": 3 * FORWARD_FLOPS[model]})
                print(f"{model:5} {batch:>5} {threads:>3} | {b['samples_per_s']:>9.0f} {b['mfu']:>5.1%} "
                      f"{b['peak_rss_mb']:>7.0f} | {best['samples_per_s']:>12.0f} {best['mfu']:>5.1%} {best_env:>8} "
                      f"{best['peak_rss_mb']:>7.0f} | {ratio:>5.2f}", flush=True)
    os.makedirs(os.path.join(ROOT, "bench/results"), exist_ok=True)
    stamp = datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(ROOT, f"bench/results/train_vs_pytorch-{stamp}.json")
    with open(path, "w") as f:
        json.dump({"max_steps": a.max_steps, "load_average": os.getloadavg(), "cpu_count": os.cpu_count(),
                   "openblas_coretype_env": os.environ.get("OPENBLAS_CORETYPE"), "rows": rows}, f, indent=2)
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
