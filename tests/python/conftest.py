"""Fixtures of the Python tests: where the build and the CLI are, and a
runner for jobs started with python -m braid.launch (tests/python/README in
docs/python.md, "Tests")."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = Path(os.environ.get("BRAID_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD = Path(os.environ.get("BRAID_BUILD_DIR", SOURCE / "build"))
CLI = BUILD / "bin" / "braid"
FASHION = Path("/usr/share/datasets/fashion-mnist")
FORTUNES = Path("/usr/share/games/fortunes")
HERE = Path(__file__).resolve().parent


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a long test, run by `ctest -L slow` (not by the default run)")


def run(cmd, timeout=240, env=None, check=True, cwd=None):
    """Runs cmd, returning the CompletedProcess; on failure shows its output."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, env=full_env, cwd=cwd)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd} exited {p.returncode}\n--- stdout\n{p.stdout[-4000:]}\n--- stderr\n{p.stderr[-4000:]}")
    return p


def launch(args, script, *script_args, timeout=240, env=None, check=True):
    """python -m braid.launch ARGS script SCRIPT_ARGS."""
    return run([sys.executable, "-m", "braid.launch", *args, script, *script_args], timeout=timeout, env=env,
               check=check)


def cli_train(launch_args, config, sets, summary, timeout=240):
    """The CLI's run of the same job: braid launch ARGS -- braid train CONFIG --set ..."""
    cmd = [CLI, "launch", *launch_args, "--", CLI, "train", config]
    for s in sets:
        cmd += ["--set", s]
    cmd += ["--summary-json", summary]
    run(cmd, timeout=timeout)
    return json.loads(Path(summary).read_text())


@pytest.fixture
def tmp(tmp_path):
    return tmp_path


def needs(path):
    return pytest.mark.skipif(not Path(path).exists(), reason=f"{path} is not installed (scripts/setup)")
