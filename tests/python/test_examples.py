"""Every Python example of examples/python runs a few steps the way its
docstring says to run it, and reports each process's steps with a finite
loss well below the untrained model's (ln 10 = 2.30 for Fashion-MNIST, ln 2
= 0.69 for the binary sparse data), as tests/examples does for the C++ ones."""
import re
import sys

import pytest

from conftest import CLI, FASHION, FORTUNES, SOURCE, launch, needs, run

EX = SOURCE / "examples/python"


def losses(text, steps):
    found = [float(x) for x in re.findall(rf"trained {steps} steps.*?final loss ([0-9.]+)", text)]
    return found


@needs(FASHION)
def test_train_mlp(tmp_path):
    p = run([sys.executable, EX / "train_mlp.py", "200", tmp_path], timeout=300)
    [loss] = losses(p.stdout, 200)
    assert loss < 1.2 and (tmp_path / "model.safetensors").exists()
    acc = float(re.search(r"test accuracy ([0-9.]+)", p.stdout).group(1))
    assert acc > 0.7


@needs(FASHION)
def test_data_parallel(tmp_path):
    p = launch(["-n", "2"], EX / "data_parallel.py", "100", tmp_path)
    found = losses(p.stdout, 100)
    assert len(found) == 2 and all(l < 1.2 for l in found), p.stdout


@needs(FASHION)
def test_parameter_server(tmp_path):
    p = launch(["--servers", "1", "--workers", "2"], EX / "parameter_server.py", "100", tmp_path)
    found = losses(p.stdout, 100)
    assert len(found) == 2 and all(l < 1.2 for l in found), p.stdout


def test_sparse_embeddings(tmp_path):
    data = tmp_path / "sparse.libsvm"
    run([sys.executable, SOURCE / "scripts/make_sparse_data.py", "--out", data, "--examples", "6000",
         "--features", "20000"])
    p = launch(["--servers", "1", "--workers", "2"], EX / "sparse_embeddings.py", data, "2", tmp_path / "run")
    m = re.search(r"trained (\d+) steps.*test loss ([0-9.]+), top-1 ([0-9.]+)", p.stdout)
    assert m and int(m.group(1)) > 0 and float(m.group(2)) < 0.69, p.stdout


@pytest.mark.slow
@needs(FORTUNES)
def test_train_gpt_on_two_processes(tmp_path):
    run([SOURCE / "examples/fortunes_shards.sh", tmp_path / "fortunes", CLI])
    p = launch(["-n", "2"], EX / "train_gpt.py", "30", "allreduce", f"data.path={tmp_path}/fortunes/train-*.tok",
               f"train.out_dir={tmp_path}/run", "train.eval_steps=0", "train.eval_every=0", timeout=1500)
    m = re.search(r"trained 30 steps: final loss ([0-9.]+).*first/last step loss ([0-9.]+)/([0-9.]+)", p.stdout)
    assert m and float(m.group(3)) < float(m.group(2)) - 0.5, p.stdout  # it learns: from ~8.3 (ln 4096)
