"""braid.distributed under python -m braid.launch: the collectives' values,
a stopped rank's peers raising braid.TimeoutError that names it, and the
launcher's command line."""
import json
import sys

import pytest

from braid import launch as braid_launch
from conftest import HERE, launch

JOB = str(HERE / "collectives_job.py")


@pytest.mark.parametrize("ranks", [2, 3])
def test_collectives(ranks):
    p = launch(["-n", str(ranks)], JOB, "values")
    for r in range(ranks):
        assert f"[rank {r}] ok {r}" in p.stdout


def test_stopped_rank_raises_timeout_naming_it():
    # rank 2 stops itself; ranks 0 and 1 time out (3 s) and name it.
    p = launch(["-n", "3", "--finish-grace", "2", "--stop-grace", "1"], JOB, "stop", "3", check=False, timeout=120)
    reports = [json.loads(line.split("] ", 1)[1]) for line in p.stdout.splitlines() if '"missing"' in line]
    assert len(reports) == 2, p.stdout + p.stderr
    for rep in reports:
        assert rep["builtin"] and rep["op"] == "allreduce" and rep["seq"] == 2 and rep["rank"] in (0, 1)
        assert 2 in rep["missing"], rep
        assert "rank 2" in rep["message"] and "#2" in rep["message"]
    assert p.returncode != 0  # the launcher names the stopped rank and fails the job
    assert "rank 2" in p.stderr


def test_launch_command_line():
    cmd = braid_launch.command(["-n", "4", "train.py", "--lr", "0.1"])
    assert cmd[1:5] == ["launch", "-n", "4", "--"] and cmd[5:] == [sys.executable, "-u", "train.py", "--lr", "0.1"]
    cmd = braid_launch.command(["--servers=1", "--workers", "2", "-m", "pkg.mod", "x"])
    assert cmd[2:6] == ["--servers=1", "--workers", "2", "--"] and cmd[-3:] == ["-m", "pkg.mod", "x"]
    assert braid_launch.command(["-n4", "s.py"])[2:4] == ["-n4", "--"]
    with pytest.raises(SystemExit, match="unknown option"):
        braid_launch.command(["--bogus", "s.py"])
    with pytest.raises(SystemExit, match="no script"):
        braid_launch.command(["-n", "2"])
