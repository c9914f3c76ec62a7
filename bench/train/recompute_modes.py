#!/usr/bin/env python3
"""Activation recompute's memory and time: `braid train` on a small GPT at a long
context under parallel.recompute = none, selective and full, one process, the
modes taking turns for several rounds (docs/memory.md). Prints, per mode, the
measured peak activation bytes (metrics.jsonl, the last step), the dry-run
planner's prediction, the median step time over the rounds (the first step of
each run left out), the median CPU seconds of a whole run (setup and every
step; steadier than wall time where other work shares the cores) and each as
a ratio to no recompute.

usage: bench/train/recompute_modes.py [--braid build/bin/braid] [--context 4096]
       [--layers 4] [--dim 256] [--heads 4] [--batch 1] [--steps 4] [--rounds 3]
       [--threads 1] [--json out.json]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

FILES = ["/usr/share/games/fortunes/computers", "/usr/share/games/fortunes/science"]
MODES = ["none", "selective", "full"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--braid", default="build/bin/braid")
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    braid = os.path.abspath(a.braid)
    with tempfile.TemporaryDirectory(prefix="braid-recompute-") as out:
        subprocess.run([braid, "tokenize", "train", "--vocab-size", "300", "--out", f"{out}/tok", *FILES],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run([braid, "tokenize", "encode", "--tokenizer", f"{out}/tok", "--out", f"{out}/shards/train",
                        *FILES], check=True, stdout=subprocess.DEVNULL)
        config = f"{out}/gpt.toml"
        with open(config, "w") as f:
            f.write(f"""[train]
batch_size = {a.batch}
max_steps = {a.steps}
log_every = 1
eval_every = 0
threads = {a.threads}
progress = "lines"
[model]
name = "gpt"
n_layers = {a.layers}
n_heads = {a.heads}
d_model = {a.dim}
context = {a.context}
[optim]
name = "adamw"
lr = 0.001
[data]
name = "tokens"
path = "{out}/shards/train-*.tok"
""")
        planned, peak, steps, runs = {}, {m: [] for m in MODES}, {m: [] for m in MODES}, {m: [] for m in MODES}
        cpu = {m: [] for m in MODES}
        for m in MODES:
            dry = subprocess.run([braid, "train", config, "--dry-run", "--set", f"parallel.recompute={m}"],
                                 check=True, capture_output=True, text=True).stdout
            planned[m] = int(re.search(r"activations peak .*\((\d+) bytes", dry).group(1))
        for r in range(a.rounds):
            # Each round starts with another mode, so a mode is not always the
            # one running after the same neighbour.
            for m in MODES[r % len(MODES):] + MODES[:r % len(MODES)]:
                run_dir = f"{out}/{m}_{r}"
                # CPU seconds of the whole run as well as wall time per step: on a
                # machine other work shares, the CPU time moves less.
                proc = subprocess.Popen([braid, "train", config, "--set", f"train.out_dir={run_dir}", "--set",
                                         f"parallel.recompute={m}"], stdout=subprocess.DEVNULL)
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
                if proc.returncode != 0:
                    sys.exit(f"braid train under parallel.recompute = {m} failed ({proc.returncode})")
                cpu[m].append(usage.ru_utime + usage.ru_stime)
                with open(f"{run_dir}/metrics.jsonl") as f:
                    rows = [json.loads(line) for line in f if '"train"' in line]
                peak[m].append(rows[-1]["peak_activation_bytes"])
                steps[m].extend(row["step_ms"] for row in rows[1:])
                runs[m].append(statistics.median(row["step_ms"] for row in rows[1:]))
    result = {m: {"peak_activation_bytes": max(peak[m]), "planned_bytes": planned[m],
                  "step_ms": statistics.median(steps[m]), "run_medians_ms": runs[m],
                  "run_cpu_s": statistics.median(cpu[m])} for m in MODES}
    base = result["none"]
    print(f"gpt {a.layers} x {a.dim}, {a.heads} heads, context {a.context}, batch {a.batch}, {a.threads} thread(s), "
          f"{a.rounds} rounds of {a.steps} steps; load {os.getloadavg()[0]:.1f}")
    print(f"{'mode':<10} {'peak MiB':>9} {'planned':>9} {'x none':>7} {'step ms':>9} {'x none':>7} "
          f"{'run CPU s':>9} {'x none':>7}  runs' step medians (ms)")
    for m in MODES:
        r = result[m]
        r["memory_vs_none"] = r["peak_activation_bytes"] / base["peak_activation_bytes"]
        r["time_vs_none"] = r["step_ms"] / base["step_ms"]
        r["cpu_vs_none"] = r["run_cpu_s"] / base["run_cpu_s"]
        print(f"{m:<10} {r['peak_activation_bytes'] / 2**20:9.1f} {r['planned_bytes'] / 2**20:9.1f} "
              f"{r['memory_vs_none']:7.2f} {r['step_ms']:9.0f} {r['time_vs_none']:7.2f} "
              f"{r['run_cpu_s']:9.1f} {r['cpu_vs_none']:7.2f}  "
              + " ".join(f"{x:.0f}" for x in r["run_medians_ms"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"config": vars(a), "load": os.getloadavg()[0], "modes": result}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
