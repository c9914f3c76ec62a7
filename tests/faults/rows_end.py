"""Rows whose fault ends the job: every rank must be gone within 2x the
timeout, and each rank that outlived the fault must have said which rank was
at fault and in which op or wait (matrix.py checks the time)."""
import re
import signal

from jobs import Job, RowFailed, RowSkipped, now
from netns import Netns
from rows import TIMEOUT, Result, culprit_in, error_lines, train

# Seconds past 2x the timeout after which a job still running is a hang.
SLACK = 20


def _training(job, launcher=0):
    """Waits until rank 0 has logged 20 steps: every rank is in the loop."""
    job.wait_for(r"\] step 20/", 120, launcher)


def _ended(job, t0):
    end = job.wait_all(2 * TIMEOUT + SLACK)
    codes = job.exit_codes()
    if 0 in codes:
        raise RowFailed(f"a launcher exited 0 after the fault (exit codes {codes})", job)
    return end - t0, codes


def _signal_in_training(job, rank, sig):
    """Once every rank trains, sends `sig` to `rank` and waits for every
    launcher to end (_ended); whatever happens, nothing of the job outlives it."""
    try:
        _training(job)
        return _ended(job, job.signal_rank(rank, sig))
    finally:
        job.kill()


def kill_per_rank(ctx, name, victim, n=3):
    """kill -9 of one rank of n, each under its own launcher (as on n hosts):
    only its own launcher sees it die; the others must notice through braid."""
    job = Job(ctx.braid, ctx.workdir, name).per_rank(n, train(ctx, f"{ctx.workdir}/{name}", 100000))
    seconds, codes = _signal_in_training(job, victim, signal.SIGKILL)
    said = [culprit_in(l.text(), victim, f"node {r}", job) for r, l in enumerate(job.launchers) if r != victim]
    return Result(name, f"kill -9 of rank {victim} ({n} ranks, a launcher each)", TIMEOUT, seconds,
                  f"ended, exit codes {codes}", said[0])


def worker_kill(ctx):
    return kill_per_rank(ctx, "worker_kill", 1)


def rank0_kill(ctx):
    return kill_per_rank(ctx, "rank0_kill", 0)


def server_kill(ctx):
    """kill -9 of the parameter server: `braid launch` stops the workers."""
    name = "server_kill"
    prog = train(ctx, f"{ctx.workdir}/{name}", 100000, parallel__strategy="ps", ps__consistency="bsp")
    job = Job(ctx.braid, ctx.workdir, name).one_launcher(["--servers", "1", "--workers", "2"], prog)
    seconds, codes = _signal_in_training(job, 0, signal.SIGKILL)
    said = re.search(r"braid launch: (server rank 0 failed first: killed by signal 9[^;]*)", job.text())
    if not said:
        raise RowFailed("the launcher did not name server rank 0", job)
    return Result(name, "kill -9 of parameter server rank 0 (1 server, 2 workers)", TIMEOUT, seconds,
                  f"ended, exit code {codes[0]}", said.group(1))


def sigstop(ctx):
    """SIGSTOP of rank 1: alive, connections open, silent. Its peers can only
    time out; the launcher then stops the group, the stopped rank included."""
    name = "sigstop"
    job = Job(ctx.braid, ctx.workdir, name).one_launcher(["-n", "3"], train(ctx, f"{ctx.workdir}/{name}", 100000))
    seconds, codes = _signal_in_training(job, 1, signal.SIGSTOP)
    return Result(name, "SIGSTOP of rank 1 (3 ranks, one launcher)", TIMEOUT, seconds,
                  f"ended, exit code {codes[0]}", culprit_in(job.text(), 1, name, job))


def wrong_token(ctx):
    """Rank 1's launcher has another BRAID_TOKEN: the store (served by node
    0's launcher) refuses rank 1, and rank 0 waits for it until
    parallel.join_timeout_s. Timed from the refusal, which node 0's launcher
    logs (process start-up and data loading come before it)."""
    name = "wrong_token"
    prog = train(ctx, f"{ctx.workdir}/{name}", 100000, parallel__join_timeout_s=TIMEOUT)
    job = Job(ctx.braid, ctx.workdir, name).per_rank(
        2, prog, env_of=lambda r: {"BRAID_TOKEN": "not-the-job-token"} if r == 1 else {})
    try:
        t0 = job.wait_for(r"store: rejecting .*: wrong token", 120)
        seconds, codes = _ended(job, t0)
    finally:
        job.kill()
    refused = [e for e in error_lines(job.launchers[1].text()) if "rejected the token" in e]
    if not refused:
        raise RowFailed("rank 1 did not say that its token was refused", job)
    said = culprit_in(job.launchers[0].text(), 1, "node 0", job)
    return Result(name, "rank 1 with a wrong BRAID_TOKEN (2 ranks, a launcher each)", TIMEOUT, seconds,
                  f"ended, exit codes {codes}", f"{said} / {refused[0]}")


def link_down(ctx):
    """Two ranks in two network namespaces (a launcher each); host 1's veth
    goes down mid-run. Nothing is reset: both ranks learn it from timeouts."""
    name = "link_down"
    net = Netns(ctx.tests, 2)
    why = net.start()
    if why:
        raise RowSkipped(why)
    try:
        job = Job(ctx.braid, ctx.workdir, name).per_rank(
            2, train(ctx, f"{ctx.workdir}/{name}", 100000),
            wrap_of=lambda r: ["ip", "netns", "exec", net.host(r)], host_of=net.ip)
        try:
            _training(job)
            net.link_down(1)
            t0 = now()
            seconds, codes = _ended(job, t0)
        finally:
            job.kill()
    finally:
        net.stop()
    said = [culprit_in(l.text(), 1 - h, f"host {h}", job) for h, l in enumerate(job.launchers)]
    return Result(name, "veth of host 1 down (2 ranks in 2 network namespaces)", TIMEOUT, seconds,
                  f"ended, exit codes {codes}", said[0])


ROWS = {"worker_kill": worker_kill, "rank0_kill": rank0_kill, "server_kill": server_kill, "sigstop": sigstop,
        "link_down": link_down, "wrong_token": wrong_token}
