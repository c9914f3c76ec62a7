"""What every row of the fault matrix shares: its result, the training
command its jobs run, and how a log is searched for the culprit's name.
The rows themselves are in rows_end.py (faults the job must end on, naming
the culprit) and rows_recover.py (faults it must recover from)."""
import re
from dataclasses import dataclass

from jobs import RowFailed

# parallel.timeout_s (and, for the wrong token, parallel.join_timeout_s) of
# every row, in seconds: short, so the whole matrix runs in a few minutes.
TIMEOUT = 3.0


@dataclass
class Result:
    row: str
    fault: str
    timeout: float   # the configured timeout the row is held to (seconds)
    seconds: float   # from the fault until every rank recovered or ended
    outcome: str     # "ended: ..." or "recovered: ..."
    culprit: str     # the words that name the culprit, from the ranks' output


@dataclass
class Context:
    braid: str       # the braid binary
    config: str      # examples/configs/fashion_mlp.toml
    workdir: str     # a fresh folder for the row's logs and runs
    tests: str       # the repository's tests/ folder (netns_lib.sh)


def train(ctx, out, steps, every=0, timeout=TIMEOUT, **more):
    """`braid train` of the Fashion-MNIST MLP, data parallel, a progress line
    per step (the step a fault hit is read from them), one thread per rank."""
    sets = {"parallel.strategy": "allreduce", "train.max_steps": steps, "train.checkpoint_every": every,
            "train.resume": "auto", "train.out_dir": out, "train.progress": "lines", "train.log_every": 1,
            "train.threads": 1, "train.eval_every": 0, "parallel.timeout_s": timeout}
    sets.update({k.replace("__", "."): v for k, v in more.items()})
    argv = [ctx.braid, "train", ctx.config]
    for k, v in sets.items():
        argv += ["--set", f"{k}={v}"]
    return argv


def names(rank):
    """A regex for the ways braid's errors name a rank as the culprit: the
    peer of a lost connection or a timed-out wait, a rank that did not answer
    the survey of a failed collective, a rank that never published its
    address, a rank the launcher saw fail."""
    r = str(rank)
    return (rf"(connection to rank {r} lost|waiting for rank {r}\b|ranks? (\d+, )*{r}(, \d+)* did not answer"
            rf"|ranks \[(\d+, )*{r}(, \d+)*\] never published|rank {r} failed first)")


def error_lines(text):
    """The errors the ranks printed (`braid: error: ...`), without prefixes."""
    return [m.group(1) for m in re.finditer(r"braid: error: (.*)", text)]


def culprit_in(text, rank, what, job=None):
    """The first error in `text` that names `rank` together with the op (a
    collective's sequence number, #N) or the wait; RowFailed otherwise."""
    for line in error_lines(text):
        if re.search(names(rank), line) and re.search(r"#\d+|never published|rejected the token", line):
            return brief(line, rank)
    raise RowFailed(f"{what}: no error naming rank {rank} with the op or wait; errors: {error_lines(text)}", job)


def brief(line, rank, width=280):
    """`line` cut to about `width` characters for the table, keeping its start
    (the op) and the words that name `rank`."""
    if len(line) <= width:
        return line
    m = re.search(names(rank), line)
    head = line[:width // 2]
    if m.end() <= width - 2:
        return line[:width - 2] + " …"
    return f"{head} … {line[max(m.start() - 40, width // 2):m.end() + 60]} …"


def steps_logged(text):
    """Step numbers of the progress lines, in order."""
    return [int(s) for s in re.findall(r"\] step (\d+)/", text)]
