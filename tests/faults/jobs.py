"""Jobs for the fault matrix (matrix.py): `braid launch` processes whose
output goes to a log, the ranks they start, and the clock that times a fault.

A job is one launcher (all ranks on one "node") or one launcher per rank
(`--nnodes N -n 1`, as on N hosts: a rank's death is then seen by its own
launcher only, and the other ranks must notice it through the library).
Every process of a job carries BRAID_FAULT_TAG in its environment, which is
how a rank's process is found to be killed or stopped.
"""
import os
import re
import signal
import socket
import subprocess
import time


def now():
    return time.monotonic()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Launcher:
    """One `braid launch` process; its stdout and stderr go to `log`."""

    def __init__(self, argv, log, env):
        self.log = log
        self.ended_at = None  # now() when its exit was first seen
        with open(log, "wb") as f:
            # Its own session: killing it (and, through PR_SET_PDEATHSIG, its
            # ranks) cannot reach the test driver.
            self.proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)

    def text(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def poll(self):
        if self.ended_at is None and self.proc.poll() is not None:
            self.ended_at = now()
        return self.ended_at is not None

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class Job:
    """The launchers of one run, started together."""

    _count = 0

    def __init__(self, braid, workdir, name):
        Job._count += 1
        self.braid = braid
        self.dir = workdir
        self.name = name
        self.tag = f"{name}-{os.getpid()}-{Job._count}"
        self.launchers = []

    def _env(self, extra):
        env = dict(os.environ, BRAID_FAULT_TAG=self.tag)
        env.pop("BRAID_TOKEN", None)
        env.update(extra or {})
        return env

    def one_launcher(self, launch_args, program, env=None):
        """`braid launch LAUNCH_ARGS -- PROGRAM`: every rank under one launcher."""
        argv = [self.braid, "launch", *launch_args, "--", *program]
        self.launchers.append(Launcher(argv, f"{self.dir}/{self.name}.log", self._env(env)))
        return self

    def per_rank(self, n, program, env_of=lambda rank: {}, wrap_of=lambda rank: [],
                 host_of=lambda rank: "127.0.0.1"):
        """One `braid launch -n 1` per rank, joined through node 0's store.
        wrap_of(rank) prefixes that launcher's command (`ip netns exec NS`)."""
        port = free_port()
        for r in range(n):
            argv = [*wrap_of(r), self.braid, "launch", "--nnodes", str(n), "--node-rank", str(r),
                    "--master-addr", host_of(0), "--master-port", str(port), "-n", "1", "--", *program]
            env = self._env({"BRAID_TOKEN": f"token-{self.tag}", "BRAID_HOST": host_of(r), **env_of(r)})
            self.launchers.append(Launcher(argv, f"{self.dir}/{self.name}.node{r}.log", env))
        return self

    def text(self):
        return "\n".join(l.text() for l in self.launchers)

    def pid_of_rank(self, rank):
        """The process running RANK of this job (not its launcher), or None."""
        want = {f"BRAID_FAULT_TAG={self.tag}".encode(), f"RANK={rank}".encode()}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = set(f.read().split(b"\0"))
            except OSError:
                continue
            if want <= env:
                return int(pid)
        return None

    def signal_rank(self, rank, sig):
        pid = self.pid_of_rank(rank)
        if pid is None:
            raise RowFailed(f"rank {rank} of {self.name} not found", self)
        os.kill(pid, sig)
        return now()

    def wait_for(self, pattern, seconds, launcher=0):
        """now() when a launcher's log first matches the regex `pattern`
        (polled every 20 ms), or RowFailed after `seconds`."""
        rx = re.compile(pattern, re.M)
        end = now() + seconds
        while now() < end:
            if rx.search(self.launchers[launcher].text()):
                return now()
            if self.launchers[launcher].poll():
                if rx.search(self.launchers[launcher].text()):
                    return now()
                raise RowFailed(f"{self.name} ended before its log showed /{pattern}/", self)
            time.sleep(0.02)
        raise RowFailed(f"{self.name}: no /{pattern}/ within {seconds} s", self)

    def wait_all(self, seconds):
        """now() when every launcher has exited; a launcher still running
        after `seconds` is a hang: the job is killed and the row fails."""
        end = now() + seconds
        # A list, not a generator: every launcher is polled each round, so
        # each one's end time is its own.
        while not all([l.poll() for l in self.launchers]):
            if now() >= end:
                self.kill()
                raise RowFailed(f"{self.name}: still running {seconds} s after the fault (a hang)", self)
            time.sleep(0.02)
        return max(l.ended_at for l in self.launchers)

    def exit_codes(self):
        return [l.proc.returncode for l in self.launchers]

    def kill(self):
        for l in self.launchers:
            l.kill()


class RowFailed(Exception):
    """A row's assertion failed; carries the job whose logs explain it."""

    def __init__(self, message, job=None):
        super().__init__(message)
        self.job = job


class RowSkipped(Exception):
    """The row cannot run here (no network namespaces); ctest shows SKIP."""
