"""``python -m braid.launch [options] script.py [args]``: runs ranks of a
Python program as torchrun does, through braid's own launcher (``braid
launch``, docs/communication.md): each rank gets RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and BRAID_TOKEN, the launcher
serves the rendezvous store, relays output with a [rank R] prefix, stops the
others within seconds when one fails and names it, and restarts the group on
request. braid.distributed.init() (and braid.train) read those variables.

    python -m braid.launch -n 4 train.py --lr 0.1
    python -m braid.launch --servers 1 --workers 2 train.py   # parameter-server job
    python -m braid.launch -n 2 -m mypackage.train           # a module
    python -m braid.launch -n 2 -c 'import braid; braid.train("cfg.toml")'

Every option of ``braid launch`` is accepted (-n, --servers, --workers,
--nnodes, --node-rank, --master-addr, --master-port, --max-restarts,
--stop-grace, --finish-grace, --server-program, --server-arg). Under mpirun or
srun no launcher is needed: ``mpirun -n 4 python train.py``."""

from __future__ import annotations

import os
import shutil
import sys

# braid launch's options that take a value (the rest, none here, are flags).
_VALUED = {"-n", "--nproc-per-node", "--servers", "--workers", "--nnodes", "--node-rank", "--master-addr",
           "--master-port", "--max-restarts", "--stop-grace", "--finish-grace", "--server-program", "--server-arg"}


def cli_path() -> str:
    """The braid CLI the launcher runs: $BRAID_CLI, the copy installed beside this
    package (a wheel, or the build tree's link), else `braid` on PATH."""
    if os.environ.get("BRAID_CLI"):
        return os.environ["BRAID_CLI"]
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "braid")
    if os.path.exists(here):
        return here
    found = shutil.which("braid")
    if found:
        return found
    raise FileNotFoundError("braid.launch: no braid CLI beside the package and none on PATH (set BRAID_CLI)")


def command(argv: list[str]) -> list[str]:
    """`braid launch OPTIONS -- python -u SCRIPT ARGS` for our argv."""
    options: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            print(__doc__)
            raise SystemExit(0)
        if a == "--":
            i += 1
            break
        if a in ("-m", "-c"):  # a module, or a program given as a string: python's own options
            break
        if a.startswith("-n") and a[2:].isdigit():  # -n4
            options.append(a)
            i += 1
            continue
        if a.startswith("-"):
            name = a.split("=", 1)[0]
            if name not in _VALUED:
                raise SystemExit(f"braid.launch: unknown option {a} (python -m braid.launch --help)")
            options.append(a)
            if "=" not in a:
                if i + 1 >= len(argv):
                    raise SystemExit(f"braid.launch: {a} needs a value")
                options.append(argv[i + 1])
                i += 1
            i += 1
            continue
        break
    program = argv[i:]
    if not program:
        raise SystemExit("braid.launch: no script given (python -m braid.launch -n 2 script.py ARGS)")
    # -u: each rank's lines reach the launcher as they are printed.
    return [cli_path(), "launch", *options, "--", sys.executable, "-u", *program]


def main(argv: list[str] | None = None) -> None:
    cmd = command(sys.argv[1:] if argv is None else argv)
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    main()
