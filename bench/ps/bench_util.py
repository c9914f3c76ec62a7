"""What the bench/ps drivers share: the commit a result was measured at, and
the JSON result file with the facts every run records."""
import json
import os
import subprocess
import time


def git_commit(root):
    """HEAD of the repository at `root`, short form; None outside a git checkout."""
    try:
        return subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def write_result(path, bench, root, t0, load_before, load_after, fields):
    """Writes {bench, commit, date, cpus, load averages, wall_s} + fields to `path` as JSON."""
    result = {"bench": bench, "commit": git_commit(root), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "cpus": os.cpu_count(), "loadavg_before": load_before, "loadavg_after": load_after,
              "wall_s": time.time() - t0, **fields}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
