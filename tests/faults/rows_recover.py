"""Rows the job must recover from, losing at most one checkpoint interval
and finishing training.
  - Under `braid launch --max-restarts 1` a killed or stopped rank's group
    ends (the time: from the fault until every rank has exited, the culprit
    named), then restarts and resumes from its last checkpoint (the outcome
    says how long after the fault the resumed group took its first step:
    process start-up, data loading and joining, which no timeout governs).
  - A damaged newest checkpoint is refused, named with the reason, in favour
    of the one before (the time: from the start of the resumed run until its
    first step)."""
import os
import re
import signal

from jobs import Job, RowFailed, now
from rows import TIMEOUT, Result, culprit_in, steps_logged, train

FIRST_STEP_AFTER_RESUME = r"resumed from [^\n]*\(step \d+[\s\S]*?\] step \d+/"


def _resumed_step(job):
    m = re.search(r"resumed from (\S+) \(step (\d+)", job.text())
    if not m:
        raise RowFailed("the group did not resume from a checkpoint", job)
    return m.group(1), int(m.group(2))


def _finished(job, steps):
    job.wait_all(180)
    if job.exit_codes() != [0] or f"] step {steps}/{steps} " not in job.text():
        raise RowFailed(f"training did not finish (exit {job.exit_codes()})", job)


def restart(ctx, name, fault, launch, victim, sig, steps=300, every=50, at=130, culprit=None, **more):
    """Runs `steps` steps checkpointing every `every`; at step `at` sends
    `sig` to `victim`; the launcher restarts the group once."""
    job = Job(ctx.braid, ctx.workdir, name).one_launcher(
        ["--max-restarts", "1", *launch], train(ctx, f"{ctx.workdir}/{name}", steps, every, **more))
    try:
        job.wait_for(rf"\] step {at}/", 120)
        t0 = job.signal_rank(victim, sig)
        ended = job.wait_for(r"restarting the group", 2 * TIMEOUT + 60)
        resumed_at = job.wait_for(FIRST_STEP_AFTER_RESUME, 120)
        _finished(job, steps)
    finally:
        job.kill()
    text = job.text()
    before = text.split("restarting the group")[0]
    hit = max(steps_logged(before))
    stem, resumed = _resumed_step(job)
    lost = hit - resumed
    if not 0 <= lost <= every:
        raise RowFailed(f"the fault came after step {hit}, the group resumed at {resumed}: lost {lost} "
                        f"steps, more than the checkpoint interval {every}", job)
    said = culprit(before) if culprit else culprit_in(before, victim, name, job)
    return Result(name, fault, TIMEOUT, ended - t0,
                  f"restarted; training again {resumed_at - t0:.2f} s after the fault, from step {resumed} (fault "
                  f"after step {hit}: {lost} of {every} steps lost); finished", said)


def _launcher_named(rank, how):
    def find(text):
        m = re.search(rf"braid launch: ((server )?rank {rank} failed first: {how}[^;\n]*)", text)
        if not m:
            raise RowFailed(f"the launcher did not name rank {rank}")
        return m.group(1)
    return find


def worker_kill_restart(ctx):
    return restart(ctx, "worker_kill_restart", "kill -9 of rank 1, --max-restarts 1 (3 ranks)", ["-n", "3"], 1,
                   signal.SIGKILL, culprit=_launcher_named(1, "killed by signal 9"))


def rank0_kill_restart(ctx):
    return restart(ctx, "rank0_kill_restart", "kill -9 of rank 0, --max-restarts 1 (3 ranks)", ["-n", "3"], 0,
                   signal.SIGKILL, culprit=_launcher_named(0, "killed by signal 9"))


def sigstop_restart(ctx):
    return restart(ctx, "sigstop_restart", "SIGSTOP of rank 1, --max-restarts 1 (3 ranks)", ["-n", "3"], 1,
                   signal.SIGSTOP)


def server_kill_restart(ctx):
    """bsp: one step is one server update; the server checkpoints its shard
    every `every` updates and the workers their step every `every` steps."""
    every = 50
    r = restart(ctx, "server_kill_restart", "kill -9 of parameter server rank 0, --max-restarts 1 "
                "(1 server, 2 workers)", ["--servers", "1", "--workers", "2"], 0, signal.SIGKILL, every=every,
                culprit=_launcher_named(0, "killed by signal 9"), parallel__strategy="ps", ps__consistency="bsp",
                ps__checkpoint_every=every)
    # The weights live on the server: its shard must be as recent.
    text = open(f"{ctx.workdir}/server_kill_restart.log", errors="replace").read()
    hit = max(steps_logged(text.split("restarting the group")[0]))
    update = re.search(r"ps server 0: recovered its shard from .* \(update (\d+)", text)
    if not update or hit - int(update.group(1)) > every:
        raise RowFailed(f"server 0 recovered {update.group(0) if update else 'nothing'} after step {hit}")
    r.outcome += f"; the server recovered update {update.group(1)}"
    return r


def _damaged(ctx, name, fault, damage, reason):
    """Two ranks checkpoint at steps 20 and 40; `damage` hurts step 40; a
    resumed run must name it and why (`reason`), resume at 20, finish at 60."""
    out = f"{ctx.workdir}/{name}"
    first = Job(ctx.braid, ctx.workdir, f"{name}-first").one_launcher(["-n", "2"], train(ctx, out, 40, 20))
    _finished(first, 40)
    damage(f"{out}/ckpt-00000040")
    t0 = now()
    job = Job(ctx.braid, ctx.workdir, name).one_launcher(["-n", "2"], train(ctx, out, 60, 20))
    try:
        end = job.wait_for(FIRST_STEP_AFTER_RESUME, 2 * TIMEOUT + 60)
        _finished(job, 60)
    finally:
        job.kill()
    skipped = re.search(r"skipping unusable checkpoint: (.*ckpt-00000040.*)", job.text())
    if not skipped or not re.search(reason, skipped.group(1)):
        raise RowFailed(f"the damaged checkpoint was not refused with /{reason}/", job)
    stem, resumed = _resumed_step(job)
    if resumed != 20:
        raise RowFailed(f"resumed from {stem} (step {resumed}), not step 20", job)
    return Result(name, fault, TIMEOUT, end - t0,
                  "recovered at step 20 (20 of 20 steps lost); finished", skipped.group(1))


def _truncate(stem):
    path = stem + ".safetensors"
    os.truncate(path, os.path.getsize(path) // 2)


def _flip_tensor_byte(stem):
    path = stem + ".safetensors"
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)  # inside the tensor data, past the JSON header
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0x5A]))


def _edit_sidecar(stem):
    """Valid JSON, one number changed: the batch to resume at."""
    path = stem + ".json"
    text = open(path).read()
    edited, n = re.subn(r'^(  "batch": )(\d+)', lambda m: f"{m.group(1)}{int(m.group(2)) + 1}", text, flags=re.M)
    if n != 1:
        raise RowFailed(f"no top-level batch in {path}")
    open(path, "w").write(edited)


def ckpt_truncated(ctx):
    return _damaged(ctx, "ckpt_truncated", "newest checkpoint's tensor file cut to half (2 ranks)", _truncate,
                    r"truncated or altered")


def ckpt_tampered(ctx):
    return _damaged(ctx, "ckpt_tampered", "one byte of the newest checkpoint's tensors flipped (2 ranks)",
                    _flip_tensor_byte, r"truncated or altered")


def ckpt_sidecar_tampered(ctx):
    return _damaged(ctx, "ckpt_sidecar_tampered", "the newest checkpoint's sidecar edited: batch + 1 (2 ranks)",
                    _edit_sidecar, r"does not match its own crc32")


ROWS = {"worker_kill_restart": worker_kill_restart, "rank0_kill_restart": rank0_kill_restart,
        "server_kill_restart": server_kill_restart, "sigstop_restart": sigstop_restart,
        "ckpt_truncated": ckpt_truncated, "ckpt_tampered": ckpt_tampered,
        "ckpt_sidecar_tampered": ckpt_sidecar_tampered}
