"""Rows that put each parallel plan through kill -9 and SIGSTOP of one rank
(docs/reliability.md, "Fault matrix"): the job must end within 2x the timeout
with an error naming the culprit rank and the op or wait, or, where the plan
promises to go on without the rank (an asynchronous parameter-server
worker), finish without it. Rows of item-sized regressions run by default;
the rest are labelled slow (matrix.py --list-slow)."""
import re
import signal

from jobs import Job, RowFailed, now
from rows import TIMEOUT, Result, error_lines, names, train
from rows_end import _ended, _signal_in_training

# parallel.* settings of each plan, and its ranks.
PLANS = {
    "zero3": (3, {"parallel.strategy": "zero", "parallel.zero_stage": 3}),
    "local_sgd": (3, {"parallel.strategy": "local_sgd", "local_sgd.period": 4}),
    "gossip": (3, {"parallel.strategy": "gossip"}),
    "hybrid": (3, {"parallel.strategy": "hybrid"}),
    "easgd": (3, {"parallel.strategy": "easgd", "easgd.tau": 2}),
    "tp2": (2, {"parallel.strategy": "allreduce", "parallel.tensor": 2}),
    "pp2": (2, {"parallel.strategy": "allreduce", "parallel.pipeline": 2, "parallel.microbatches": 2}),
}

# An error that names the op or wait it failed in: a collective's sequence
# number, a point-to-point transfer, a plan's exchange of a step or
# micro-batch, a parameter-server request.
OP = (r"#\d+|\b(send|recv) (to|from) rank|tag \d+|\bin step \d+|\bof step \d+|micro-batch \d+"
      r"|\b(push|pull)_(dense|sparse)\b|did not answer")


def named(rank):
    """names(rank), and the ways point-to-point waits name the peer."""
    r = str(rank)
    return rf"{names(rank)}|\b(recv from|send to) rank {r}\b|\(rank {r}\)|\brank {r}'s\b"


def culprit(text, rank, what, job=None):
    """The first error naming `rank` (named()) and the op."""
    for line in error_lines(text):
        if re.search(named(rank), line) and re.search(OP, line):
            return line
    raise RowFailed(f"{what}: no error naming rank {rank} with the op or wait; errors: {error_lines(text)}", job)


def _sets(plan):
    return {k.replace(".", "__"): v for k, v in PLANS[plan][1].items()}


def plan_stop(ctx, plan):
    """SIGSTOP of the last rank under one launcher: its peers time out and
    name it; the launcher then stops it."""
    name = f"{plan}_stop"
    n = PLANS[plan][0]
    job = Job(ctx.braid, ctx.workdir, name).one_launcher(
        ["-n", str(n)], train(ctx, f"{ctx.workdir}/{name}", 100000, **_sets(plan)))
    seconds, codes = _signal_in_training(job, n - 1, signal.SIGSTOP)
    return Result(name, f"SIGSTOP of rank {n - 1} ({n} ranks, {plan})", TIMEOUT, seconds,
                  f"ended, exit code {codes[0]}", culprit(job.text(), n - 1, name, job))


# Ranks whose error is known to name another rank than the culprit: hybrid's
# other ranks blame the coordinator (rank 0), which exited on the culprit's
# death before it could send the step's aggregate (docs/reliability.md).
BLAMES_ANOTHER = {"hybrid": {1}}


def plan_kill(ctx, plan):
    """kill -9 of the last rank, each rank under its own launcher: the others
    learn it through braid, not from the launcher."""
    name = f"{plan}_kill"
    n = PLANS[plan][0]
    job = Job(ctx.braid, ctx.workdir, name).per_rank(n, train(ctx, f"{ctx.workdir}/{name}", 100000, **_sets(plan)))
    seconds, codes = _signal_in_training(job, n - 1, signal.SIGKILL)
    said = [culprit(l.text(), n - 1, f"node {r}", job) for r, l in enumerate(job.launchers)
            if r != n - 1 and r not in BLAMES_ANOTHER.get(plan, ())]
    return Result(name, f"kill -9 of rank {n - 1} ({n} ranks, {plan}, a launcher each)", TIMEOUT, seconds,
                  f"ended, exit codes {codes}", said[0])


def _ps_job(ctx, name, consistency, steps=100000, stop_grace=3):
    prog = train(ctx, f"{ctx.workdir}/{name}", steps, parallel__strategy="ps", ps__consistency=consistency)
    return Job(ctx.braid, ctx.workdir, name).one_launcher(
        ["--servers", "1", "--workers", "2", "--stop-grace", str(stop_grace)], prog)


def ps_server_stop(ctx, consistency):
    """SIGSTOP of the parameter server: the workers must name server 0 (not
    themselves) within 2x the timeout."""
    name = f"ps_{consistency}_server_stop"
    job = _ps_job(ctx, name, consistency)
    seconds, codes = _signal_in_training(job, 0, signal.SIGSTOP)
    said = [e for e in error_lines(job.text()) if re.search(r"server 0 \(rank 0\) did not answer", e)]
    if not said:
        raise RowFailed(f"no worker named server 0; errors: {error_lines(job.text())}", job)
    if re.search(r"clock -1", job.text()):
        raise RowFailed("an error still says 'clock -1'", job)
    return Result(name, f"SIGSTOP of parameter server rank 0 (1 server, 2 workers, {consistency})", TIMEOUT,
                  seconds, f"ended, exit code {codes[0]}", said[0])


def ps_worker_stop(ctx, consistency):
    """SIGSTOP of worker 1 (rank 2). bsp cannot go on without it: the server
    names it and the job ends. asp goes on: worker 0 finishes, the server
    ends, and the launcher names and stops the stopped worker (before, it
    waited for it for ever); timed from the fault to the launcher's end, less
    the steps worker 0 still had to train."""
    name = f"ps_{consistency}_worker_stop"
    if consistency == "bsp":
        job = _ps_job(ctx, name, consistency)
        seconds, codes = _signal_in_training(job, 2, signal.SIGSTOP)
        said = [e for e in error_lines(job.text()) if re.search(r"workers? \[?(\d+, )*1\b", e)]
        if not said:
            raise RowFailed(f"no error named worker 1; errors: {error_lines(job.text())}", job)
        return Result(name, "SIGSTOP of worker 1, rank 2 (1 server, 2 workers, bsp)", TIMEOUT, seconds,
                      f"ended, exit code {codes[0]}", said[0])
    steps = 400
    job = _ps_job(ctx, name, consistency, steps=steps, stop_grace=1)
    try:
        job.wait_for(r"\] step 20/", 120)
        t0 = job.signal_rank(2, signal.SIGSTOP)
        trained = job.wait_for(rf"\] step {steps}/", 120)
        end = job.wait_all(2 * TIMEOUT + 20)
    finally:
        job.kill()
    codes = job.exit_codes()
    if codes[0] != 0:
        raise RowFailed(f"asp went on without worker 1 but the launcher exited {codes[0]}", job)
    said = re.search(r"braid launch: (worker rank 2 still running [^\n]*)", job.text())
    if not said:
        raise RowFailed("the launcher did not name the stopped worker rank 2", job)
    return Result(name, "SIGSTOP of worker 1, rank 2 (1 server, 2 workers, asp)", TIMEOUT, end - trained,
                  f"went on: worker 0 finished {trained - t0:.1f} s after the fault; launcher exit 0",
                  said.group(1))


# Rows run by default: one per fixed defect, a few seconds each.
DEFAULT = {"gossip_stop", "pp2_stop", "ps_asp_worker_stop", "ps_asp_server_stop"}

ROWS = {}
for _plan in PLANS:
    ROWS[f"{_plan}_stop"] = (lambda p: lambda ctx: plan_stop(ctx, p))(_plan)
    ROWS[f"{_plan}_kill"] = (lambda p: lambda ctx: plan_kill(ctx, p))(_plan)
for _c in ("bsp", "asp"):
    ROWS[f"ps_{_c}_server_stop"] = (lambda c: lambda ctx: ps_server_stop(ctx, c))(_c)
    ROWS[f"ps_{_c}_worker_stop"] = (lambda c: lambda ctx: ps_worker_stop(ctx, c))(_c)
SLOW = [r for r in ROWS if r not in DEFAULT]


def mpirun_stop(ctx):
    """SIGSTOP of rank 1 of 3 started by mpirun, over the mpi transport: the
    others time out and name it, and mpirun ends the job. (Before, the mpi
    transport's closing waited 5 s for sends to the stopped rank and 2 s for
    their cancellation: the error came 12 s after a 5 s timeout.)"""
    import os
    import shutil
    from jobs import Launcher, RowSkipped
    name = "mpirun_stop"
    mpirun = shutil.which("mpirun")
    if not mpirun:
        raise RowSkipped("no mpirun")
    job = Job(ctx.braid, ctx.workdir, name)
    argv = [mpirun, "--oversubscribe", "--allow-run-as-root", "-n", "3", "-x", "BRAID_FAULT_TAG",
            *train(ctx, f"{ctx.workdir}/{name}", 100000, parallel__transport="mpi")]
    env = job._env({})
    job.launchers.append(Launcher(argv, f"{ctx.workdir}/{name}.log", env))

    def signal_rank(rank, sig):
        want = {f"BRAID_FAULT_TAG={job.tag}".encode(), f"OMPI_COMM_WORLD_RANK={rank}".encode()}
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if want <= set(f.read().split(b"\0")):
                        os.kill(int(pid), sig)
                        return now()
            except (OSError, ValueError):
                continue
        raise RowFailed(f"rank {rank} of {name} not found", job)

    try:
        job.wait_for(r"\] step 20/|^step 20/", 120)
        seconds, codes = _ended(job, signal_rank(1, signal.SIGSTOP))
    finally:
        job.kill()
    return Result(name, "SIGSTOP of rank 1 (3 ranks under mpirun, mpi transport)", TIMEOUT, seconds,
                  f"ended, exit code {codes[0]}", culprit(job.text(), 1, name, job))


ROWS["mpirun_stop"] = mpirun_stop
DEFAULT.add("mpirun_stop")
