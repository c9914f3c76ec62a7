#!/usr/bin/env bash
# One prepared run for a lent GPU (issue 52; docs/gpu.md, "The device
# window"): everything worth measuring in one call of about 8 minutes, then the
# machine goes back. Each step has its own time cap, writes its log (and JSON
# where it has figures) under OUT, and records ran / skipped (with the reason)
# / failed in OUT/steps.tsv; a failed step does not stop the next. The last
# step writes OUT/summary.json and OUT/summary.md (the ratios braid : PyTorch).
#
#   bench/gpu/window.sh [--dry-run] [--out DIR] [--bin DIR] [--rounds N] [--steps N] [--small] [--budget-s 480]
#   bench/gpu/window.sh --prepare [--bin DIR]   # on a build machine with nvcc: sm_90 binaries, stripped
#
# --bin DIR (or DIR.tar.xz) holds the binaries it runs (braid_cuda_test,
# gpt2_bench, gpu_gemm_bench, gpu_step_overhead where CUPTI was found) and the
# shared libraries the device image lacks: made by --prepare here, carried to
# the device as the tarball, so no device time goes to compiling. --dry-run
# runs nowhere near a GPU: every step is skipped with its reason and the whole
# output layout is written (tests/cuda/window_dry_run.sh checks it in CI).
#
# Steps: env (GPU name, clocks, driver, toolkit, torch), gpu_tests
# (braid_cuda_test), sanitizer (compute-sanitizer memcheck on the op-table
# kernels), micro (GEMM against cuBLAS; attention, layer norm and elementwise
# GB/s microbenchmarks where built), gpt2 (gpt2_bench and gpt2_torch.py
# alternating: braid eager, braid graphs, torch eager, torch.compile; compile
# time logged apart), summary.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dry=0 prepare=0 rounds=2 steps=20 small=0 budget=480
out=$root/window-out
bin=$root/build-sm90/ship
python=${PYTHON:-}
if [ -z "$python" ]; then
  # The lent machines' plain python3 holds PyTorch; here scripts/setup --bench makes .venv-bench.
  if [ -x "$root/.venv-bench/bin/python" ]; then python=$root/.venv-bench/bin/python; else python=python3; fi
fi
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) dry=1 ;;
    --prepare) prepare=1 ;;
    --out) out=$2; shift ;;
    --bin) bin=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --steps) steps=$2; shift ;;
    --small) small=1 ;;
    --budget-s) budget=$2; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "window.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

if [ $prepare = 1 ]; then
  # Hopper only (sm_90): one architecture compiles in a third of the time of
  # three, and the lent GPUs are H100/H200. Release, no Python, stripped.
  build=$(dirname "$bin")
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRAID_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DBRAID_PYTHON=OFF -DBRAID_NATIVE=OFF || exit 1
  ninja -C "$build" braid_cuda_test gpt2_bench gpu_gemm_bench $(ninja -C "$build" -t targets all 2>/dev/null |
    grep -o '^gpu_step_overhead' | head -1) || exit 1
  mkdir -p "$bin/lib"
  for t in braid_cuda_test gpt2_bench gpu_gemm_bench gpu_step_overhead; do
    f=$(find "$build" -type f -name "$t" -perm -u+x | head -1)
    [ -n "$f" ] || continue
    strip -o "$bin/$t" "$f"
    # The shared libraries the device image lacks (fmt, spdlog, OpenBLAS,
    # oneDNN, ...) travel beside the binaries; the C library, the CUDA driver
    # and the CUDA libraries (cuBLAS, cuDNN, NCCL: the image has the same
    # CUDA 13) are the device's own.
    ldd "$f" | awk '/=> \//{print $3}' | grep -vE '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libcuda|libcudart|libcublas[A-Za-z]*|libcudnn[a-z_]*|libnccl|libstdc\+\+|libgcc_s)\.so' |
      while read -r lib; do cp -Lu "$lib" "$bin/lib/"; done
  done
  strip "$bin"/lib/*.so* 2>/dev/null
  # One compressed file for the device call's carry (64 MiB at most: the
  # libraries alone are ~85 MiB, OpenBLAS and oneDNN most of it).
  tar cJf "$bin.tar.xz" -C "$(dirname "$bin")" "$(basename "$bin")" || exit 1
  du -sh "$bin" "$bin.tar.xz"; ls -l "$bin" "$bin/lib"
  exit 0
fi

# --bin may name the tarball --prepare made: unpacked beside the output.
if [ "${bin%.tar.xz}" != "$bin" ] && [ -f "$bin" ]; then
  mkdir -p "$out.ship" && tar xJf "$bin" -C "$out.ship" && bin=$out.ship/$(basename "${bin%.tar.xz}")
fi
# The libraries --prepare bundled, then the device's CUDA libraries: its
# toolkit's and those PyTorch's wheels bring (cuDNN, NCCL).
cuda_libs=$("$python" -c 'import glob, os, nvidia; print(":".join(sorted(glob.glob(os.path.join(os.path.dirname(nvidia.__path__[0] + "/x"), "*", "lib")))))' 2>/dev/null)
export LD_LIBRARY_PATH=$bin/lib:/usr/local/cuda/lib64${cuda_libs:+:$cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$out/logs" "$out/json"
: >"$out/steps.tsv"
start=$(date +%s)
gpu=0
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && gpu=1

# record STEP STATUS SECONDS REASON
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$out/steps.tsv"; }

# step NAME CAP_SECONDS COMMAND...: runs COMMAND under the cap, its output in
# logs/NAME.log; skipped (the reason in the log) in a dry run or without a GPU.
step() {
  local name=$1 cap=$2
  shift 2
  local log=$out/logs/$name.log
  if [ $dry = 1 ]; then
    echo "skipped: dry run (would run, capped at ${cap}s: $*)" >"$log"
    record "$name" skipped 0 "dry run"
    return 0
  fi
  if [ $gpu = 0 ]; then
    echo "skipped: no GPU visible (nvidia-smi lists none)" >"$log"
    record "$name" skipped 0 "no GPU visible"
    return 0
  fi
  # No step runs past the window's budget: its cap shrinks to what is left.
  local left=$((budget - ($(date +%s) - start)))
  if [ "$left" -lt 15 ]; then
    echo "skipped: the window's ${budget}s are spent" >"$log"
    record "$name" skipped 0 "the window's ${budget}s are spent"
    return 0
  fi
  [ "$cap" -gt "$left" ] && cap=$left
  local t0=$(date +%s) rc
  timeout --kill-after=10 "$cap" "$@" >"$log" 2>&1
  rc=$?
  local dt=$(($(date +%s) - t0))
  if [ $rc = 0 ]; then record "$name" ran "$dt" ""; elif [ $rc = 124 ]; then record "$name" failed "$dt" "over its ${cap}s cap"; else record "$name" failed "$dt" "exit $rc"; fi
  return 0
}

# skip NAME REASON: a step that cannot run in this build.
skip() {
  echo "skipped: $2" >"$out/logs/$1.log"
  record "$1" skipped 0 "$2"
}

need() {  # need BINARY: its path, or empty
  [ -x "$bin/$1" ] && echo "$bin/$1"
}

# 1. The environment: which GPU, at which clocks, with which software.
env_report() {
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,clocks.sm,memory.total,power.limit --format=csv
  nvidia-smi -q -d CLOCK | head -40
  command -v nvcc >/dev/null && nvcc --version | tail -2
  "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
  git -C "$root" log -1 --format='braid %H %cd' 2>/dev/null || true
}
step env 30 bash -c "$(declare -f env_report); python='$python' root='$root' env_report"

# 2. The GPU tests (every op against the CPU backend, training runs).
if t=$(need braid_cuda_test); [ -n "$t" ] || [ $dry = 1 ]; then
  step gpu_tests 150 "${t:-$bin/braid_cuda_test}" --gtest_brief=1
else
  skip gpu_tests "no $bin/braid_cuda_test (run window.sh --prepare on a machine with nvcc first)"
fi

# 3. compute-sanitizer's memcheck on the kernels the op table drives (f32 cases).
if ! command -v compute-sanitizer >/dev/null 2>&1 && [ $dry = 0 ]; then
  skip sanitizer "compute-sanitizer is not on PATH"
elif t=$(need braid_cuda_test); [ -n "$t" ] || [ $dry = 1 ]; then
  step sanitizer 90 compute-sanitizer --tool memcheck --error-exitcode 1 "${t:-$bin/braid_cuda_test}" \
    --gtest_filter='DeviceOps.EveryOpMatchesTheCpuBackendInF32'
else
  skip sanitizer "no $bin/braid_cuda_test"
fi

# 4. Microbenchmarks: braid's matmul against cuBLAS on the same operands.
if t=$(need gpu_gemm_bench); [ -n "$t" ] || [ $dry = 1 ]; then
  step micro_gemm 45 "${t:-$bin/gpu_gemm_bench}" 5
else
  skip micro_gemm "no $bin/gpu_gemm_bench"
fi
for m in attention layer_norm elementwise; do
  skip "micro_$m" "no $m microbenchmark is built yet (issue 52, deliverable 3: the fused kernels come with theirs)"
done

# 5. GPT-2 124M, braid and PyTorch alternating, `rounds` rounds.
shape=()
[ $small = 1 ] && shape=(--small)
for r in $(seq 1 "$rounds"); do
  if t=$(need gpt2_bench); [ -n "$t" ] || [ $dry = 1 ]; then
    step "gpt2_braid_eager_r$r" 90 "${t:-$bin/gpt2_bench}" --device cuda --steps "$steps" --warmup 5 "${shape[@]}"
  else
    skip "gpt2_braid_eager_r$r" "no $bin/gpt2_bench"
  fi
  skip "gpt2_braid_graphs_r$r" "train.cuda_graphs is not built yet (issue 52, deliverable 4)"
  step "gpt2_torch_eager_r$r" 90 "$python" "$root/bench/gpu/gpt2_torch.py" --mode eager --device cuda \
    --steps "$steps" --warmup 5 "${shape[@]}"
  step "gpt2_torch_compile_r$r" 150 "$python" "$root/bench/gpu/gpt2_torch.py" --mode compile --device cuda \
    --steps "$steps" --warmup 5 "${shape[@]}"
done
# Each run's JSON line (the last line of its log that parses) into json/.
for log in "$out"/logs/gpt2_*.log; do
  name=$(basename "$log" .log)
  grep '^{' "$log" | tail -1 >"$out/json/$name.json" || true
  [ -s "$out/json/$name.json" ] || echo '{"skipped": true}' >"$out/json/$name.json"
done

# 6. The summary: medians over rounds and the ratios the issue's targets name.
python3 - "$out" "$(($(date +%s) - start))" "$dry" <<'EOF'
import glob, json, os, statistics, sys
out, seconds, dry = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
runs = {}
for path in sorted(glob.glob(os.path.join(out, "json", "gpt2_*.json"))):
    name = os.path.basename(path)[len("gpt2_"):-len(".json")].rsplit("_r", 1)[0]
    try:
        j = json.load(open(path))
    except ValueError:
        j = {}
    if j.get("tokens_per_s"):
        runs.setdefault(name, []).append(j)
def med(name, key):
    v = [r[key] for r in runs.get(name, []) if r.get(key) is not None]
    return statistics.median(v) if v else None
summary = {"dry_run": dry, "seconds": seconds, "steps": [], "gpt2": {}, "ratios": {}}
for line in open(os.path.join(out, "steps.tsv")):
    step, status, secs, reason = (line.rstrip("\n").split("\t") + [""] * 4)[:4]
    summary["steps"].append({"step": step, "status": status, "seconds": int(secs or 0), "reason": reason})
for name in ("braid_eager", "braid_graphs", "torch_eager", "torch_compile"):
    summary["gpt2"][name] = {k: med(name, k) for k in ("tokens_per_s", "step_ms", "mfu_formula", "mfu_counted",
                                                        "peak_memory_bytes", "warmup_seconds")}
def ratio(a, b):
    x, y = summary["gpt2"][a]["tokens_per_s"], summary["gpt2"][b]["tokens_per_s"]
    return x / y if x and y else None
for a, b, target in (("braid_eager", "torch_eager", 1.3), ("braid_eager", "torch_compile", 1.05),
                     ("braid_graphs", "torch_compile", 1.05)):
    summary["ratios"][f"{a} / {b}"] = {"ratio": ratio(a, b), "target": target}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
fmt = lambda v, f="{:.3g}": "-" if v is None else f.format(v)
with open(os.path.join(out, "summary.md"), "w") as md:
    md.write(f"# GPU window{' (dry run)' if dry else ''}: {seconds} s\n\n| step | status | s | reason |\n| --- | --- | --- | --- |\n")
    for s in summary["steps"]:
        md.write(f"| {s['step']} | {s['status']} | {s['seconds']} | {s['reason']} |\n")
    md.write("\n| GPT-2 124M | tokens/s | step ms | MFU (6N+attn) | MFU (counted) | warm-up s |\n| --- | --- | --- | --- | --- | --- |\n")
    for name, g in summary["gpt2"].items():
        md.write(f"| {name} | {fmt(g['tokens_per_s'], '{:,.0f}')} | {fmt(g['step_ms'])} | {fmt(g['mfu_formula'], '{:.1%}')} "
                 f"| {fmt(g['mfu_counted'], '{:.1%}')} | {fmt(g['warmup_seconds'])} |\n")
    md.write("\n| ratio | measured | target |\n| --- | --- | --- |\n")
    for k, r in summary["ratios"].items():
        md.write(f"| {k} | {fmt(r['ratio'])} | {r['target']} |\n")
print(open(os.path.join(out, "summary.md")).read())
EOF
rc=$?
record summary "$([ $rc = 0 ] && echo ran || echo failed)" 0 ""
# A failed step fails the window (after everything has had its turn).
! grep -q $'\tfailed\t' "$out/steps.tsv"
