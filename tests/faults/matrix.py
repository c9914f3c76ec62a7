#!/usr/bin/env python3
"""The fault matrix (docs/reliability.md, "Fault matrix"): 2-4 rank jobs
under `braid launch`, one fault each. A row passes when, within 2x its
configured timeout of the fault, every rank has either recovered (and the job
finishes, at most one checkpoint interval lost) or exited with a message that
names the culprit rank and the op or wait it failed in.

  matrix.py --braid build/bin/braid [--row NAME]... [--markdown] [--keep]

Prints a table of the rows run. Exit status: 0 when every row passed, 1 when
one failed (its logs are printed), 77 when every row asked for was skipped
(ctest: SKIP_RETURN_CODE).
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from jobs import RowFailed, RowSkipped  # noqa: E402
from rows import Context  # noqa: E402
import rows_end  # noqa: E402
import rows_plans  # noqa: E402
import rows_recover  # noqa: E402

ROWS = {**rows_end.ROWS, **rows_recover.ROWS, **rows_plans.ROWS}
CULPRIT_CHARS = 320  # of the culprit message shown in the table


def show_logs(job):
    for launcher in job.launchers if job else []:
        lines = launcher.text().splitlines()
        print(f"--- {launcher.log} (last 40 of {len(lines)} lines)")
        print("\n".join(lines[-40:]))


def run_row(name, ctx):
    """(status, result or reason): status is PASS, FAIL or SKIP."""
    try:
        r = ROWS[name](ctx)
    except RowSkipped as e:
        return "SKIP", str(e)
    except RowFailed as e:
        show_logs(e.job)
        return "FAIL", str(e)
    if r.seconds > 2 * r.timeout:
        return "FAIL", f"{r.seconds:.2f} s from the fault to the end, more than 2 x {r.timeout:g} s ({r.outcome})"
    return "PASS", r


def short(text):
    return text if len(text) <= CULPRIT_CHARS else text[:CULPRIT_CHARS - 1] + "…"


def table(results, markdown, workdir):
    head = ["row", "fault", "timeout", "time to end", "outcome", "culprit message"]
    # Paths under the run's temporary folder print as "RUN/...".
    rows = [[r.row, r.fault, f"{r.timeout:g} s", f"{r.seconds:.2f} s", r.outcome,
             short(r.culprit.replace(workdir, "RUN"))] for r in results]
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for row in rows:
            out.append("| " + " | ".join(c.replace("|", "\\|") if i < 5 else f"`{c}`"
                                         for i, c in enumerate(row)) + " |")
        return "\n".join(out)
    return "\n".join("  ".join(c for c in row[:5]) + "\n    " + row[5] for row in [head] + rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--braid", help="the braid binary (required unless --list)")
    ap.add_argument("--config", default=os.path.join(HERE, "..", "..", "examples", "configs", "fashion_mlp.toml"))
    ap.add_argument("--row", action="append", choices=sorted(ROWS), help="rows to run (default: all)")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown (docs/reliability.md)")
    ap.add_argument("--keep", action="store_true", help="keep the logs and runs (their folder is printed)")
    ap.add_argument("--list", action="store_true", help="print the rows' names (CMake makes a test of each)")
    ap.add_argument("--list-slow", action="store_true", help="print the rows labelled slow (left out of the default run)")
    a = ap.parse_args()
    if a.list:
        print(";".join(ROWS))
        return 0
    if a.list_slow:
        print(";".join(rows_plans.SLOW))
        return 0
    if not a.braid:
        ap.error("--braid is required")
    workdir = tempfile.mkdtemp(prefix="braid-faults-")
    ctx = Context(braid=os.path.abspath(a.braid), config=os.path.abspath(a.config), workdir=workdir,
                  tests=os.path.join(HERE, ".."))
    passed, status = [], {}
    t0 = time.monotonic()
    try:
        for name in a.row or list(ROWS):
            s, r = run_row(name, ctx)
            status[name] = s
            print(f"{s} {name}: " + (f"{r.seconds:.2f} s, {r.outcome}" if s == "PASS" else r), flush=True)
            if s == "PASS":
                passed.append(r)
    finally:
        if a.keep:
            print(f"logs and runs in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\nfault matrix: {len(passed)} of {len(status)} rows passed in {time.monotonic() - t0:.0f} s\n")
    print(table(passed, a.markdown, workdir))
    if "FAIL" in status.values():
        return 1
    return 77 if status and all(s == "SKIP" for s in status.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
