#!/usr/bin/python3
"""When gradient compression pays (issue #19): every parallel.codec against
uncompressed all-reduce in the same run, training the Fashion-MNIST MLP (or
CNN) with W data-parallel workers.

Per codec and setting:
  ratio            f32 bytes in / bytes on the wire, from metrics.jsonl's codec
                   figures (rank 0's; the bucket hook's own count)
  codec_ms_per_mib encode + decode milliseconds per MiB of f32 gradient, from
                   the same figures (so measured inside training, under load)
  time_to_target_s launch-to-eval-line seconds until test top-1 >= --target
                   (0.85 MLP, 0.88 CNN), evaluations every --eval-steps steps
  final_top1       after the same step budget
  step_ms          train seconds / steps

Settings (the runner and the namespaces are bench/aggregation/zoo.py's):
  --net loopback  one `braid launch -n W` on this machine, over tcp on 127.0.0.1
                  (or --transport shm: shared memory)
  --net netns     W network namespaces, each host's egress shaped by tc tbf
                  (--rate, e.g. 100mbit; tests/comm/netns_lib.sh). Needs root.

Rows alternate within each repetition (forward, then backward: the machine
drifts); figures are medians over --reps. JSON to
bench/results/compression_<net>[_<rate>].json. Run it under the bench lock:

  flock /tmp/bench.lock /usr/bin/python3 bench/compression/compression_bench.py --net loopback
  flock /tmp/bench.lock /usr/bin/python3 bench/compression/compression_bench.py --net netns --rate 100mbit
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "aggregation"))
sys.path.insert(0, os.path.join(ROOT, "bench", "ps"))
import zoo  # noqa: E402
from bench_util import write_result  # noqa: E402

# (row, --set values); the first is the baseline. Options as in tests/parallel/codec_train.sh.
CODECS = [
    ("none", []),
    ("fp16", []),
    ("bf16", []),
    ("qsgd", ["codec.qsgd_levels=15"]),
    ("onebit", []),
    ("topk", ["codec.topk_ratio=0.05"]),
    ("powersgd", ["codec.powersgd_rank=4", "codec.warmup_steps=20"]),
]


def codec_figures(metrics):
    """ratio and encode+decode ms per MiB from a run's metrics.jsonl; None without codec records."""
    raw = wire = ms = 0.0
    if not os.path.exists(metrics):
        return None
    with open(metrics) as f:
        for line in f:
            r = json.loads(line)
            c = r.get("codec")
            if isinstance(c, dict) and c.get("raw_bytes"):
                raw += c["raw_bytes"]
                wire += c["wire_bytes"]
                ms += c["encode_ms"] + c["decode_ms"]
    if not raw or not wire:
        return None
    return {"ratio": raw / wire, "codec_ms_per_mib": ms / (raw / 2**20), "raw_bytes": raw, "wire_bytes": wire}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--net", choices=("loopback", "netns"), default="loopback")
    ap.add_argument("--rate", default="100mbit", help="netns: tbf rate")
    ap.add_argument("--transport", default="tcp", help="loopback: tcp or shm (netns: always tcp)")
    ap.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--codecs", default=",".join(c for c, _ in CODECS))
    ap.add_argument("--max-steps", type=int, default=1000, help="budget per worker (MLP, W=2: 469 steps an epoch)")
    ap.add_argument("--eval-steps", type=int, default=50)
    ap.add_argument("--target", type=float, default=0)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--run-timeout", type=float, default=1800)
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    a.target = {"mlp": a.target or 0.85, "cnn": a.target or 0.88}
    a.epochs = {"mlp": 1000, "cnn": 1000}  # zoo.one_run: the step budget decides
    a.batch = {"mlp": zoo.BATCH, "cnn": zoo.BATCH}
    if a.net == "netns":
        a.transport = "tcp"
    wanted = set(a.codecs.split(","))
    rows = [(c, s) for c, s in CODECS if c == "none" or c in wanted]
    suffix = f"_{a.rate}" if a.net == "netns" else ("" if a.transport == "tcp" else f"_{a.transport}")
    out = a.out or os.path.join(ROOT, "bench", "results", f"compression_{a.net}{suffix}.json")

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ctx = zoo.Netns(a.rate) if a.net == "netns" else None
    if ctx and a.workers > zoo.NETNS_HOSTS:
        raise SystemExit(f"compression_bench: --net netns has {zoo.NETNS_HOSTS} hosts")
    load_before = os.getloadavg()
    t0 = time.time()
    runs = {c: [] for c, _ in rows}
    keep = tempfile.mkdtemp(prefix="compression-")
    try:
        if ctx:
            ctx.start()
        for rep in range(a.reps):
            order = rows if rep % 2 == 0 else list(reversed(rows))
            for i, (codec, sets) in enumerate(order):
                run_dir = os.path.join(keep, f"{codec}-{rep}")
                sets = ["parallel.strategy=allreduce", f"parallel.codec={codec}", f"train.out_dir={run_dir}",
                        "train.log_every=50"] + sets + a.sets
                row = (codec, sets, False)  # (name, sets, ps_job) as zoo.py rows
                r = zoo.one_run(a, ctx, a.model, a.workers, row, sets, seed=rep, port=29700 + 10 * rep + i)
                if r["ok"]:
                    r.update(codec_figures(os.path.join(run_dir, "metrics.jsonl")) or {})
                runs[codec].append(r)
                print(f"{codec:9} rep {rep}: " + (f"top-1 {r['final_top1']}, to {a.target[a.model]}: "
                      f"{r['time_to_target_s']} s, step {r['step_ms']:.1f} ms, ratio {r.get('ratio', 1):.1f}x, "
                      f"codec {r.get('codec_ms_per_mib', 0):.2f} ms/MiB" if r["ok"] else f"FAILED {r['error']}"),
                      flush=True)
    finally:
        if ctx:
            ctx.stop()
        subprocess.run(["rm", "-rf", keep])

    table = {}
    for codec, _ in rows:
        s = zoo.summarize(runs[codec])
        ok = [r for r in runs[codec] if r["ok"]]
        for k in ("ratio", "codec_ms_per_mib"):
            s[k] = zoo.med(r.get(k) for r in ok)
        table[codec] = s
    base = table["none"].get("time_to_target_s")
    setting = f"tbf {a.rate} per host, {a.workers} namespaces" if ctx else f"loopback {a.transport}"
    print(f"\n# {a.model}, W={a.workers}, {setting}, {a.max_steps} steps, median of {a.reps}; "
          f"load {load_before[0]:.2f} on {os.cpu_count()} cpus")
    print(f"{'codec':9} {'ratio':>7} {'ms/MiB':>7} {'step ms':>8} {'to target s':>12} {'speed-up':>9} {'top-1':>7}")
    for codec, s in table.items():
        t = s.get("time_to_target_s")
        up = f"{base / t:.2f}x" if base and t else "-"
        print(f"{codec:9} {s.get('ratio') or 1:7.1f} {s.get('codec_ms_per_mib') or 0:7.2f} "
              f"{s.get('step_ms') or 0:8.1f} {t if t is None else round(t, 1)!s:>12} {up:>9} "
              f"{s.get('final_top1')!s:>7}")
    write_result(out, "compression", ROOT, t0, load_before, os.getloadavg(),
                 {"net": a.net, "rate": a.rate if ctx else None, "model": a.model, "workers": a.workers,
                  "max_steps": a.max_steps, "target": a.target[a.model], "reps": a.reps, "codecs": table,
                  "runs": runs})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
