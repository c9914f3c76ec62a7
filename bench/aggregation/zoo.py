#!/usr/bin/python3
"""The aggregation zoo (issue #18): every way braid combines data-parallel
replicas, trained on Fashion-MNIST (MLP and CNN) by W workers against
synchronous all-reduce, with and without a straggler.

Rows (parallel.strategy and its keys; --rows picks, --row-set changes a key):

  allreduce            the baseline: gradients all-reduced every step
  local_sgd            local_sgd.period H, local_sgd.warmup
  bmuf                 local_sgd.period, bmuf.momentum (0.5; -1 = 1 - 1/W), bmuf.lr, bmuf.nesterov
  easgd_sync/_async    easgd.beta, easgd.tau, easgd.mode (async: center on 1 parameter server)
  admm_sync/_async     admm.rho, admm.tau, admm.mode (async: z on 1 server), admm.barrier, admm.max_delay
                       (the async rows: train.budget=job, one step budget for all workers together)
  gossip_ring/_torus/_exponential   gossip.topology
  gossip_async         gossip.mode=async (ring): mix with the neighbours' latest weights, never wait
  hybrid_drop/_stale   hybrid.timeout_ms (default: half the all-reduce step), hybrid.late
  hybrid_ar_drop/_stale  the same with hybrid.via=allreduce (no coordinator)
  ps_bsp/_asp/_ssp     parallel.strategy=ps, ps.consistency, ps.updater=momentum, 1 server

Per row and setting: the time to reach a test-accuracy target (--target-mlp
0.85, --target-cnn 0.88), read off rank 0's `eval after|in epoch E (step S):
... top-1 X` lines (one evaluation per epoch and every --eval-steps steps,
train.eval_steps; within an epoch EASGD and ADMM are evaluated on the center
/ z rank 0 last saw, the other plans that train replicas apart on rank 0's
replica; synchronous all-reduce splits the test set over its replicas) as the
launch's elapsed time when the line arrived; the final
accuracy after a fixed budget (the same epochs, or --max-steps, per worker
for every row); the bytes a worker sent per step (the strategy's own count
from --summary-json, else an estimate: all-reduce 2(W-1)/W x 4 x parameters,
ps a push of 4 x parameters); and all of it again with data rank 1 sleeping
--straggler-ms per step (default: twice the all-reduce step just measured).

Two settings:
  --net loopback  one `braid launch` on this machine (BRAID_TRANSPORT =
                  --transport, default tcp over 127.0.0.1), every row
  --net netns     4 network namespaces, each host's egress shaped by tc tbf
                  (RATE, default 1gbit; tests/comm/netns_lib.sh), one
                  `braid launch -n 1 --nnodes W --node-rank i` per host over
                  tcp (parameter-server rows: host 0 `--servers 1 --workers 1`,
                  the others `--servers 0 --workers 1`). Needs root.

Strategies (or keys) the binary does not know are skipped with a note (checked
with `braid inspect config --set ...`). Runs are repeated --reps times, the rows
alternating within each repetition (forward, then backward order: the machine
drifts); each figure is the median over repetitions. JSON to
bench/results/aggregation_zoo_<net>.json (--out). Run it under the bench lock:

  flock /tmp/bench.lock /usr/bin/python3 bench/aggregation/zoo.py --build build --net loopback --models mlp
  flock /tmp/bench.lock /usr/bin/python3 bench/aggregation/zoo.py --build build --net netns --reps 3
"""
import argparse
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "ps"))
from bench_util import git_commit, write_result  # noqa: E402

BATCH = 64
TRAIN_EXAMPLES = 60000  # Fashion-MNIST
NETNS_HOSTS = 4
PS_UPDATER = "ps.updater=momentum"  # the trainer's sgd + momentum 0.9 (asp/ssp: 1 - W (1 - 0.9), ps.async_momentum)


def row_table():
    """(name, strategy sets, needs a parameter-server job). The first is the baseline."""
    return [
        ("allreduce", ["parallel.strategy=allreduce"], False),
        ("local_sgd", ["parallel.strategy=local_sgd", "local_sgd.period=8", "local_sgd.warmup=0"], False),
        ("bmuf", ["parallel.strategy=bmuf", "local_sgd.period=8", "bmuf.momentum=0.5", "bmuf.lr=1",
                  "bmuf.nesterov=true"], False),
        ("easgd_sync", ["parallel.strategy=easgd", "easgd.mode=sync", "easgd.beta=0.9", "easgd.tau=4"], False),
        # The asynchronous rows count one budget for the whole job (train.budget=job): a fast worker
        # takes the steps a straggler has not, as a parameter server's global step would.
        ("easgd_async", ["parallel.strategy=easgd", "easgd.mode=async", "easgd.beta=0.9", "easgd.tau=4",
                         "train.budget=job"], True),
        ("admm_sync", ["parallel.strategy=admm", "admm.mode=sync", "admm.rho=0.01", "admm.tau=8"], False),
        ("admm_async", ["parallel.strategy=admm", "admm.mode=async", "admm.rho=0.01", "admm.tau=8", "admm.barrier=0",
                        "admm.max_delay=2", "train.budget=job"], True),
        ("gossip_ring", ["parallel.strategy=gossip", "gossip.topology=ring"], False),
        ("gossip_torus", ["parallel.strategy=gossip", "gossip.topology=torus"], False),
        ("gossip_exponential", ["parallel.strategy=gossip", "gossip.topology=exponential"], False),
        ("gossip_async", ["parallel.strategy=gossip", "gossip.topology=ring", "gossip.mode=async"], False),
        ("hybrid_drop", ["parallel.strategy=hybrid", "hybrid.late=drop"], False),  # + hybrid.timeout_ms
        ("hybrid_stale", ["parallel.strategy=hybrid", "hybrid.late=stale"], False),
        # The same rules with no coordinator: every rank closes each step in one all-reduce at the deadline.
        ("hybrid_ar_drop", ["parallel.strategy=hybrid", "hybrid.via=allreduce", "hybrid.late=drop"], False),
        ("hybrid_ar_stale", ["parallel.strategy=hybrid", "hybrid.via=allreduce", "hybrid.late=stale"], False),
        ("ps_bsp", ["parallel.strategy=ps", "ps.consistency=bsp", PS_UPDATER], True),
        ("ps_asp", ["parallel.strategy=ps", "ps.consistency=asp", PS_UPDATER], True),
        ("ps_ssp", ["parallel.strategy=ps", "ps.consistency=ssp", "ps.staleness=2", PS_UPDATER], True),
    ]


def key_of(kv):
    return kv.split("=", 1)[0]


def merge_sets(base, extra):
    """base with every key of extra replaced (or appended)."""
    keys = {key_of(kv) for kv in extra}
    return [kv for kv in base if key_of(kv) not in keys] + list(extra)


def unknown_reason(braid, sets):
    """None if the binary accepts these --set values, else its error line."""
    cmd = [braid, "inspect", "config"]
    for kv in sets:
        cmd += ["--set", kv]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if p.returncode == 0:
        return None
    err = (p.stderr.strip() or p.stdout.strip()).splitlines()
    if not err:
        return f"braid inspect config failed ({p.returncode})"
    why = err[-1].replace("braid: error: ", "")
    return why.split(" is not one of")[0] + " is not one of its choices" if " is not one of" in why else why


# ---------------------------------------------------------------- network namespaces

class Netns:
    """NETNS_HOSTS namespaces joined by a bridge, tbf RATE out of each (tests/comm/netns_lib.sh)."""

    def __init__(self, rate):
        self.lib = os.path.join(ROOT, "tests", "comm", "netns_lib.sh")
        self.tag = f"bz{os.getpid() % 100000}"
        self.rate = rate
        self.up = False

    def _bash(self, body):
        return subprocess.run(["bash", "-c", f'. "{self.lib}"; NETNS_TAG={self.tag}; {body}'], capture_output=True,
                              text=True)

    def start(self):
        if os.geteuid() != 0:
            raise SystemExit("zoo: --net netns needs root (network namespaces, tc)")
        # netns_up sets a trap that removes them when its shell exits: cleared here, removed by stop().
        p = self._bash(f'netns_ready || {{ echo "$NETNS_WHY" >&2; exit 1; }}; '
                       f'netns_up {NETNS_HOSTS} {self.rate} || exit 1; trap - EXIT')
        if p.returncode != 0:
            raise SystemExit(f"zoo: cannot set up network namespaces: {p.stderr.strip()}")
        self.up = True

    def stop(self):
        if self.up:
            self._bash(f"NETNS_N={NETNS_HOSTS}; netns_down")
            self.up = False

    def host(self, i):
        return f"{self.tag}h{i}"

    @staticmethod
    def ip(i):
        return f"10.77.0.{i + 1}"


# ---------------------------------------------------------------- one run

EVAL_RE = re.compile(r"eval (?:after|in) epoch (\d+) \(step (\d+)\): loss (\S+) top-1 ([0-9.]+)"
                     r".*\((\d+) examples, ([0-9.]+) s\)")
PS_DONE_RE = re.compile(r"done: (\d+) updates from (\d+) gradients, (\d+) late gradients dropped, max staleness (\d+)")


def read_lines(stream, t0, lines):
    """Appends (seconds since t0, line) for every line of stream as it arrives."""
    for line in stream:
        lines.append((time.monotonic() - t0, line.rstrip("\n")))


def one_run(a, ctx, model, workers, row, sets, seed, port):
    """One job; its eval points with arrival times, the summary and the strategy's report."""
    braid = os.path.join(a.build, "bin", "braid")
    name, _, ps_job = row
    tmp = tempfile.mkdtemp(prefix="zoo-")
    try:
        summary = os.path.join(tmp, "summary.json")
        train = [braid, "train", os.path.join(ROOT, "examples", "configs", f"fashion_{model}.toml"),
                 "--summary-json", summary]
        budget = ([f"train.epochs={a.epochs[model]}"] if not a.max_steps
                  else [f"train.max_steps={a.max_steps}", "train.epochs=1000"])
        common = budget + [f"train.batch_size={a.batch[model]}", "train.threads=1", f"train.seed={seed}",
                           f"train.out_dir={tmp}/run", "train.eval_every=1", f"train.eval_steps={a.eval_steps}",
                           "train.progress=lines",
                           "train.log_every=100000", "train.checkpoint_every=100000000"]
        for kv in merge_sets(common, sets):
            train += ["--set", kv]
        procs, others = [], []
        # The transport by environment, so that parameter servers (`braid ps server`, no --set) use it too.
        transport = "tcp" if a.net == "netns" else a.transport
        env = dict(os.environ, BRAID_TRANSPORT=transport) if transport != "auto" else None
        t0 = time.monotonic()
        if a.net == "netns":
            ns = ctx
            for i in reversed(range(workers)):  # host 0 last: it prints rank 0's lines
                cmd = ["ip", "netns", "exec", ns.host(i), "env", "BRAID_TOKEN=zoo", f"BRAID_HOST={ns.ip(i)}",
                       f"BRAID_TRANSPORT={transport}",
                       braid, "launch", *(["--servers", str(int(i == 0)), "--workers", "1"] if ps_job else ["-n", "1"]),
                       "--nnodes", str(workers), "--node-rank", str(i),
                       "--master-addr", ns.ip(0), "--master-port", str(port), "--"] + train
                if i == 0:
                    main = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                            start_new_session=True)
                else:
                    f = open(os.path.join(tmp, f"h{i}.out"), "w")
                    others.append(f)
                    procs.append(subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True))
            procs.insert(0, main)
            shown = " ".join(cmd) + f"  (and node ranks 1..{workers - 1} in their namespaces)"
        else:
            launch = ([braid, "launch", "--servers", "1", "--workers", str(workers), "--"] if ps_job
                      else [braid, "launch", "-n", str(workers), "--"])
            cmd = launch + train
            main = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    start_new_session=True, env=env)
            procs.append(main)
            shown = (f"BRAID_TRANSPORT={transport} " if env else "") + " ".join(cmd)
        lines = []
        reader = threading.Thread(target=read_lines, args=(main.stdout, t0, lines), daemon=True)
        reader.start()
        timed_out = False
        deadline = t0 + a.run_timeout
        try:
            for p in procs:
                p.wait(timeout=max(deadline - time.monotonic(), 1))
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:  # timed out, or interrupted (Ctrl-C, SIGTERM): stop the jobs started here
            for p in procs:
                if p.poll() is None:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)  # each job is its own process group (session)
                    except ProcessLookupError:
                        pass
                    p.wait()
        reader.join(timeout=10)
        wall = time.monotonic() - t0
        for f in others:
            f.close()
        rcs = [p.returncode for p in procs]
        log = "\n".join(l for _, l in lines)
        if timed_out or any(rcs) or not os.path.exists(summary):
            tail = log[-2500:]
            for i in range(1, len(procs)):
                path = os.path.join(tmp, f"h{i}.out")
                if os.path.exists(path) and rcs[i]:
                    tail += f"\n--- host {i} ---\n" + open(path).read()[-1500:]
            why = "timed out" if timed_out else f"exit codes {rcs}"
            # braid stops a run whose loss is not finite: a property of the strategy, not a failure of the bench.
            nan = re.search(r"loss is (\S+) at step (\d+)", tail)
            return {"ok": False, "error": why, "diverged_at_step": int(nan.group(2)) if nan else None,
                    "log_tail": tail, "command": shown, "wall_s": wall}
        with open(summary) as f:
            s = json.load(f)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    m = re.search(r"model \w+: (\d+) parameters", log)
    params = int(m.group(1)) if m else None
    t_train0 = next((t for t, l in lines if re.search(r"\btraining: \d+ steps", l)), None)
    evals, eval_s = [], 0.0
    for t, l in lines:
        e = EVAL_RE.search(l)
        if e:
            eval_s += float(e.group(6))  # this evaluation's own time and the earlier ones'
            since = t - t_train0 if t_train0 is not None else None
            evals.append({"epoch": int(e.group(1)), "step": int(e.group(2)), "top1": float(e.group(4)),
                          "eval_s": float(e.group(6)), "elapsed_s": t, "since_train_start_s": since,
                          "training_s": since - eval_s if since is not None else None})
    target = a.target[model]
    hit = next((e for e in evals if e["top1"] >= target), None)
    agg = s.get("aggregation") or {}
    allreduce_bytes = 2.0 * (workers - 1) / workers * 4 * params if params else None
    if "bytes_per_step" in agg:
        sent, source = agg["bytes_per_step"], "reported"
    elif row[0] == "allreduce":
        sent, source = allreduce_bytes, "estimate: ring all-reduce 2(W-1)/W x 4 x parameters"
    elif row[1][0] == "parallel.strategy=ps":
        sent = 4.0 * params if params else None
        source = "estimate: one push of 4 x parameters (the pull brings as much back)"
    else:
        sent, source = None, None
    ps = PS_DONE_RE.search(log)
    joined = re.search(r"joined a group of \d+ ranks over (\w+)", log)
    top1 = (s.get("eval") or {}).get("top1")
    return {"ok": True, "seed": seed, "wall_s": wall, "train_seconds": s["train_seconds"], "steps": s["steps"],
            "epochs": s["epochs"], "step_ms": 1e3 * s["train_seconds"] / max(s["steps"], 1),
            "global_samples_per_s": s["global_samples_per_s"], "final_top1": top1, "evals": evals,
            "time_to_target_s": hit["elapsed_s"] if hit else None,
            "time_to_target_since_train_start_s": hit["since_train_start_s"] if hit else None,
            "training_time_to_target_s": hit["training_s"] if hit else None,
            "epoch_to_target": hit["epoch"] if hit else None, "params": params,
            "bytes_per_step": sent, "bytes_source": source, "allreduce_bytes_per_step": allreduce_bytes,
            "aggregation": agg, "reports": [l.split("] ", 1)[-1] for _, l in lines if "bytes sent" in l],
            "ps_server": dict(zip(("updates", "gradients", "dropped", "max_staleness"), map(int, ps.groups())))
            if ps else None, "transport": joined.group(1) if joined else None, "command": shown}


# ---------------------------------------------------------------- figures

def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(runs):
    ok = [r for r in runs if r["ok"]]
    diverged = sum(not r["ok"] and r.get("diverged_at_step") is not None for r in runs)
    failed = len(runs) - len(ok) - diverged
    if not ok:
        return {"ok": False, "failed": failed, "diverged": diverged}

    def ttt(key):  # a run that missed the target, or diverged, counts as infinitely slow
        t = statistics.median([r[key] if r[key] is not None else math.inf for r in ok] + [math.inf] * diverged)
        return None if math.isinf(t) else t

    out = {"ok": True, "reps": len(ok), "failed": failed, "diverged": diverged,
           "time_to_target_s": ttt("time_to_target_s"),
           "training_time_to_target_s": ttt("training_time_to_target_s"),
           "reached": sum(r["time_to_target_s"] is not None for r in ok),
           "epoch_to_target": med(r["epoch_to_target"] for r in ok) if ttt("time_to_target_s") is not None else None}
    for k in ("final_top1", "bytes_per_step", "allreduce_bytes_per_step", "wall_s", "train_seconds", "step_ms",
              "global_samples_per_s"):
        out[k] = med(r[k] for r in ok)
    agg = [r["aggregation"] for r in ok]
    for k in ("late", "dropped", "stale_applied", "arrived_per_step", "spectral_gap", "consensus_distance",
              "residual", "averagings", "exchanges", "rounds"):
        vals = [x.get(k) for x in agg if isinstance(x.get(k), (int, float))]
        if vals:
            out[k] = statistics.median(vals)
    srv = [r["ps_server"] for r in ok if r["ps_server"]]
    if srv:
        out["ps_dropped"] = statistics.median(x["dropped"] for x in srv)
        out["ps_max_staleness"] = statistics.median(x["max_staleness"] for x in srv)
    out["bytes_source"] = ok[0]["bytes_source"]
    return out


def notes_of(s):
    n = []
    if "late" in s:
        n.append(f"late {s['late']:g}, dropped {s.get('dropped', 0):g}, stale {s.get('stale_applied', 0):g}")
    if "spectral_gap" in s:
        n.append(f"gap {s['spectral_gap']:.3f}")
    if "ps_dropped" in s:
        n.append(f"server dropped {s['ps_dropped']:g}, max staleness {s['ps_max_staleness']:g}")
    if s.get("bytes_source", "reported") not in (None, "reported"):
        n.append("bytes est.")
    if s.get("diverged"):
        n.append(f"{s['diverged']} run(s) diverged (loss not finite; not in top-1)")
    if s.get("failed"):
        n.append(f"{s['failed']} run(s) failed")
    return "; ".join(n)


def print_group(title, rows, stats):
    print(f"\n## {title}", flush=True)
    print(f"{'row':20} {'to target':>9} {'x ar':>6} {'training':>9} {'x ar':>6} {'ep':>3} {'top-1':>7} {'d pts':>6} "
          f"{'bytes/step':>11} {'x ar':>6} {'wall s':>7}  notes")
    base = stats.get(rows[0][0])
    for name, *_ in rows:
        s = stats.get(name)
        if s is None:
            continue
        if not s["ok"]:
            print(f"{name:20} {'diverged' if s['diverged'] and not s['failed'] else 'failed':>9}"
                  f"{'':>48}{notes_of(s)}")
            continue
        times = ""
        for key in ("time_to_target_s", "training_time_to_target_s"):
            t = s[key]
            bt = base[key] if base and base["ok"] else None
            times += (f"{t:8.1f}s" if t is not None else f"{'n/r':>9}") + " "
            times += (f"{t / bt:6.2f}" if t is not None and bt else f"{'-':>6}") + " "
        ep = f"{s['epoch_to_target']:3g}" if s["epoch_to_target"] is not None else f"{'-':>3}"
        top = f"{s['final_top1']:7.4f}" if s["final_top1"] is not None else f"{'-':>7}"
        d = (f"{100 * (s['final_top1'] - base['final_top1']):+6.2f}"
             if base and base["ok"] and s["final_top1"] is not None and base["final_top1"] is not None else f"{'-':>6}")
        b = f"{s['bytes_per_step']:11.0f}" if s["bytes_per_step"] is not None else f"{'-':>11}"
        br = (f"{s['bytes_per_step'] / s['allreduce_bytes_per_step']:6.3f}"
              if s["bytes_per_step"] is not None and s["allreduce_bytes_per_step"] else f"{'-':>6}")
        print(f"{name:20} {times}{ep} {top} {d} {b} {br} {s['wall_s']:7.1f}  {notes_of(s)}", flush=True)


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="build folder with bin/braid")
    ap.add_argument("--net", choices=("loopback", "netns"), default="loopback")
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--workers", default="2,4", help="W values, comma-separated (netns: at most 4)")
    ap.add_argument("--rows", default="all", help="comma-separated row names or prefixes (e.g. easgd,ps_bsp); "
                                                  "allreduce, the baseline, is always run")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--epochs-mlp", type=int, default=2)
    ap.add_argument("--epochs-cnn", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=0, help="budget in steps per worker instead of epochs")
    ap.add_argument("--eval-steps", type=int, default=50,
                    help="also evaluate every N steps within epochs (train.eval_steps; 0 = at epoch ends only)")
    ap.add_argument("--batch-mlp", type=int, default=BATCH)
    ap.add_argument("--batch-cnn", type=int, default=BATCH)
    ap.add_argument("--target-mlp", type=float, default=0.85)
    ap.add_argument("--target-cnn", type=float, default=0.88)
    ap.add_argument("--straggler-ms", type=float, default=0,
                    help="data rank 1's sleep per step; 0: twice the median all-reduce step of the same model and W")
    ap.add_argument("--no-straggler", action="store_true", help="skip the runs with a straggler")
    ap.add_argument("--hybrid-timeout-ms", type=float, default=0,
                    help="hybrid.timeout_ms; 0: half the first all-reduce step of the same model and W")
    ap.add_argument("--transport", default="tcp",
                    help="loopback: BRAID_TRANSPORT for every rank (tcp, shm; auto: unset, i.e. shm); netns: tcp")
    ap.add_argument("--rate", default=os.environ.get("RATE", "1gbit"), help="netns: tbf rate (env RATE)")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="a --set for every run (repeatable)")
    ap.add_argument("--row-set", action="append", default=[], metavar="ROW:KEY=VALUE",
                    help="a --set for the rows named ROW or starting with it, e.g. local_sgd:local_sgd.period=16")
    ap.add_argument("--run-timeout", type=float, default=1800, help="seconds before a run is killed")
    ap.add_argument("--list", action="store_true", help="print the rows, their keys and whether the binary "
                                                        "knows them, then stop")
    ap.add_argument("--out", default=None, help="default: bench/results/aggregation_zoo_<net>.json")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    braid = os.path.join(a.build, "bin", "braid")
    if not os.access(braid, os.X_OK):
        raise SystemExit(f"zoo: no {braid}")
    a.epochs = {"mlp": a.epochs_mlp, "cnn": a.epochs_cnn}
    a.batch = {"mlp": a.batch_mlp, "cnn": a.batch_cnn}
    a.target = {"mlp": a.target_mlp, "cnn": a.target_cnn}
    models = [m for m in a.models.split(",") if m]
    workers = [int(w) for w in a.workers.split(",") if w]
    if a.net == "netns" and max(workers) > NETNS_HOSTS:
        raise SystemExit(f"zoo: --net netns has {NETNS_HOSTS} hosts")
    out = a.out or os.path.join(ROOT, "bench", "results", f"aggregation_zoo_{a.net}.json")

    # Rows: chosen, with --row-set applied, then checked against the binary and the setting.
    wanted = [w for w in a.rows.split(",") if w]
    rows, skipped = [], []
    for row in row_table():
        name, sets, ps_job = row
        if name != "allreduce" and "all" not in wanted and not any(name.startswith(w) for w in wanted):
            continue
        for rs in a.row_set:
            sel, kv = rs.split(":", 1)
            if name.startswith(sel):
                sets = merge_sets(sets, [kv])
        row = (name, sets, ps_job)
        why = unknown_reason(braid, sets + a.sets + ["hybrid.timeout_ms=1"] * name.startswith("hybrid"))
        if why:
            skipped.append({"row": name, "why": f"unknown to this binary: {why}"})
        else:
            rows.append(row)
    if a.list:
        for name, sets, ps_job in rows:
            print(f"{name:20} {' '.join(sets)}{'  [--servers 1 --workers W]' if ps_job else ''}")
        for s in skipped:
            print(f"{s['row']:20} skipped: {s['why']}")
        return 0

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally: clauses stop the jobs, remove namespaces
    ctx = Netns(a.rate) if a.net == "netns" else None
    load_before = os.getloadavg()
    t_start = time.time()
    version = subprocess.run([braid, "version"], capture_output=True, text=True).stdout.strip()
    setting = (f"{NETNS_HOSTS} network namespaces, tbf {a.rate} burst 256kb latency 50ms out of each, tcp"
               if a.net == "netns" else f"one machine, transport {a.transport}")
    budget = f"{a.max_steps} steps/worker" if a.max_steps else None
    print(f"# aggregation zoo, --net {a.net}: {setting}; {os.cpu_count()} cpus, load {load_before[0]:.2f}; "
          f"1 thread/rank; median of {a.reps}; {version}", flush=True)
    for s in skipped:
        print(f"# skipped {s['row']}: {s['why']}", flush=True)
    groups = []
    port = 29600
    try:
        if ctx:
            ctx.start()
        for model in models:
            for W in workers:
                per_epoch = math.ceil(TRAIN_EXAMPLES / (W * a.batch[model]))
                step_budget = budget or f"{a.epochs[model]} epochs = {a.epochs[model] * per_epoch} steps/worker"
                cal = {"step_ms": None}
                straggler_ms = a.straggler_ms
                for slow in ([False] if a.no_straggler else [False, True]):
                    if slow and not straggler_ms:
                        base = [r for r in groups[-1]["runs"]["allreduce"] if r["ok"]]
                        if not base:
                            print("# no all-reduce step time to size the straggler: skipped", flush=True)
                            continue
                        straggler_ms = round(2 * statistics.median(r["step_ms"] for r in base), 1)
                    runs = {name: [] for name, *_ in rows}
                    timeout_ms = a.hybrid_timeout_ms
                    for rep in range(a.reps):
                        order = rows if rep % 2 == 0 else list(reversed(rows))
                        for row in order:
                            name, sets = row[0], row[1] + a.sets
                            if name.startswith("hybrid") and "hybrid.timeout_ms" not in {key_of(kv) for kv in sets}:
                                if not timeout_ms:
                                    timeout_ms = round(0.5 * cal["step_ms"], 1) if cal["step_ms"] else 5.0
                                sets = sets + [f"hybrid.timeout_ms={timeout_ms}"]
                            if slow:
                                sets = sets + ["train.straggler_rank=1", f"train.straggler_ms={straggler_ms}"]
                            port = 29600 + (port - 29600 + 1) % 300
                            r = one_run(a, ctx, model, W, row, sets, 1 + rep, port)
                            r["sets"] = sets
                            runs[name].append(r)
                            if name == "allreduce" and r["ok"] and cal["step_ms"] is None:
                                cal["step_ms"] = r["step_ms"]
                            state = (f"top-1 {r['final_top1']:.4f}, target at {r['time_to_target_s']:.1f} s"
                                     if r["ok"] and r["time_to_target_s"] is not None
                                     else f"top-1 {r['final_top1']}, target not reached" if r["ok"]
                                     else f"diverged: loss not finite at step {r['diverged_at_step']}"
                                     if r.get("diverged_at_step") is not None
                                     else f"FAILED ({r['error']}; command and log in the JSON):\n    | "
                                     + "\n    | ".join(r["log_tail"].strip().splitlines()[-4:]))
                            print(f"  {model} W={W}{' straggler' if slow else ''} rep {rep + 1} {name}: "
                                  f"{r['wall_s']:.1f} s, {state}", flush=True)
                    stats = {name: summarize(rs) for name, rs in runs.items()}
                    g = {"model": model, "workers": W, "straggler_ms": straggler_ms if slow else 0,
                         "straggler_rank": 1 if slow else None, "target": a.target[model], "budget": step_budget,
                         "batch_per_worker": a.batch[model], "hybrid_timeout_ms": timeout_ms or None,
                         "stats": stats, "runs": runs}
                    groups.append(g)
                    print_group(f"{model.upper()}, W={W}, {step_budget}, target {100 * a.target[model]:g} %"
                                f"{f', data rank 1 sleeps {straggler_ms:g} ms/step' if slow else ', no straggler'}"
                                f"{f', hybrid timeout {timeout_ms:g} ms' if timeout_ms else ''}", rows, stats)
    finally:
        if ctx:
            ctx.stop()
    load_after = os.getloadavg()
    print("\n# to target: the launch's elapsed time (start to the line's arrival) at rank 0's first per-epoch "
          "evaluation at or above the target; n/r = not reached in the budget; ep = that epoch. training: the same "
          "from rank 0's `training:` line, less the evaluations' own time (no start-up, no evaluation). x ar: / "
          "all-reduce's (same model, W, straggler). top-1: the final model after the budget; d pts: minus "
          "all-reduce's, in points. bytes/step: sent per worker per step (the strategy's count; est. = "
          "estimated); x ar: / the ring all-reduce's 2(W-1)/W x 4 x parameters.", flush=True)
    for s in skipped:
        print(f"# skipped {s['row']}: {s['why']}")
    write_result(out, "aggregation_zoo", ROOT, t_start, load_before, load_after,
                 {"net": a.net, "setting": setting, "rate": a.rate if a.net == "netns" else None,
                  "transport": "tcp" if a.net == "netns" else a.transport, "braid": version, "build": a.build,
                  "build_source_commit": git_commit(os.path.dirname(a.build)),
                  "threads_per_rank": 1, "reps": a.reps, "args": {k: v for k, v in vars(a).items()},
                  "rows": [{"name": n, "sets": s, "ps_job": p} for n, s, p in rows],
                  "skipped": skipped, "groups": groups})
    print(f"  -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
