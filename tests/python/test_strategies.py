"""Every parallel.strategy of `braid train` launched from Python (python -m
braid.launch, braid.train in each rank) on 2 ranks gives the CLI's result on
the same config: the same final loss and test figures, bit for bit
(train.deterministic; both run the same C++). A model written in Python trains
under the plans that can take it, and is refused with the reason by those
that need braid's own layers."""
import json

import pytest

from conftest import CLI, FASHION, HERE, SOURCE, cli_train, launch, needs

pytestmark = needs(FASHION)

MLP = str(SOURCE / "examples/configs/fashion_mlp.toml")
SMALL = ["model.hidden=32", "train.batch_size=32", "train.max_steps=20", "train.epochs=1",
         "train.deterministic=true", "train.progress=off"]
JOB = str(HERE / "train_job.py")

# name: (launch arguments, parallel settings)
STRATEGIES = {
    "allreduce": (["-n", "2"], ["parallel.strategy=allreduce"]),
    "allreduce_fp16_codec": (["-n", "2"], ["parallel.strategy=allreduce", "parallel.codec=fp16"]),
    "zero3": (["-n", "2"], ["parallel.strategy=zero", "parallel.zero_stage=3"]),
    "ps_bsp": (["--servers", "1", "--workers", "2"], ["parallel.strategy=ps", "ps.consistency=bsp"]),
    "skeleton": (["-n", "2"], ["parallel.strategy=skeleton"]),
    "local_sgd": (["-n", "2"], ["parallel.strategy=local_sgd", "local_sgd.period=4"]),
    "bmuf": (["-n", "2"], ["parallel.strategy=bmuf", "local_sgd.period=4"]),
    "easgd": (["-n", "2"], ["parallel.strategy=easgd", "easgd.tau=4"]),
    "admm": (["-n", "2"], ["parallel.strategy=admm", "admm.tau=4"]),
    "gossip": (["-n", "2"], ["parallel.strategy=gossip"]),
    "hybrid": (["-n", "2"], ["parallel.strategy=hybrid"]),
    "ensemble": (["-n", "2"], ["parallel.strategy=ensemble"]),
    "tensor2": (["-n", "2"], ["parallel.strategy=allreduce", "parallel.tensor=2"]),
    "pipeline2": (["-n", "2"], ["parallel.strategy=allreduce", "parallel.pipeline=2", "parallel.microbatches=2"]),
}


def figures(summary):
    if "ensemble" in summary:
        e = summary["ensemble"]
        return {"steps": summary["steps"], "top1": e["top1"], "loss": e["loss"]}
    return {"steps": summary["steps"], "final_loss": summary["final_loss"], "top1": summary["eval"]["top1"],
            "loss": summary["eval"]["loss"]}


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_strategy_from_python_matches_cli(name, tmp_path):
    launch_args, sets = STRATEGIES[name]
    cli = cli_train(launch_args, MLP, SMALL + sets + [f"train.out_dir={tmp_path}/cli"], tmp_path / "cli.json")
    launch(launch_args, JOB, MLP, tmp_path / "py.json", *SMALL, *sets, f"train.out_dir={tmp_path}/py")
    py = json.loads((tmp_path / "py.json").read_text())
    assert figures(py) == figures(cli)


# fashion_mlp.toml without [model], for a model written in Python.
NO_MODEL = """
[train]
epochs = 1
batch_size = 32
max_steps = 20
deterministic = true
progress = "off"
[optim]
name = "sgd"
lr = 0.05
momentum = 0.9
schedule = "cosine"
[data]
name = "fashion_mnist"
path = "/usr/share/datasets/fashion-mnist"
"""


# The plans that take a model as a set of parameters; the first five run by
# default, the rest under `ctest -L slow`.
PYTHON_MODEL_PLANS = {
    "allreduce": STRATEGIES["allreduce"],
    "zero2": (["-n", "2"], ["parallel.strategy=zero", "parallel.zero_stage=2"]),
    "local_sgd": STRATEGIES["local_sgd"],
    "ps_bsp": STRATEGIES["ps_bsp"],
    "ensemble": STRATEGIES["ensemble"],
}
PYTHON_MODEL_PLANS_SLOW = {name: STRATEGIES[name] for name in
                           ["allreduce_fp16_codec", "skeleton", "bmuf", "easgd", "admm", "gossip", "hybrid"]}
PYTHON_MODEL_PLANS_SLOW["zero1"] = (["-n", "2"], ["parallel.strategy=zero", "parallel.zero_stage=1"])


def python_model_matches_cli(launch_args, sets, tmp_path):
    cli = cli_train(launch_args, MLP, SMALL + sets + [f"train.out_dir={tmp_path}/cli"], tmp_path / "cli.json")
    (tmp_path / "nomodel.toml").write_text(NO_MODEL)
    launch(launch_args, JOB, tmp_path / "nomodel.toml", tmp_path / "py.json", "--python-mlp", "32", *sets,
           f"train.out_dir={tmp_path}/py")
    py = json.loads((tmp_path / "py.json").read_text())
    # Another module tree computing the same function with the same weights:
    # equal up to the order of a few float sums.
    got, want = figures(py), figures(cli)
    assert got["steps"] == want["steps"]
    for k in ("final_loss", "loss"):
        if k in want:
            assert got[k] == pytest.approx(want[k], rel=1e-5), k
    assert got["top1"] == pytest.approx(want["top1"], abs=3e-4)


@pytest.mark.parametrize("name", sorted(PYTHON_MODEL_PLANS))
def test_python_model_under_plans_matches_cli_mlp(name, tmp_path):
    python_model_matches_cli(*PYTHON_MODEL_PLANS[name], tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PYTHON_MODEL_PLANS_SLOW))
def test_python_model_under_more_plans_matches_cli_mlp(name, tmp_path):
    python_model_matches_cli(*PYTHON_MODEL_PLANS_SLOW[name], tmp_path)


REFUSED = {
    "tensor": (["parallel.strategy=allreduce", "parallel.tensor=2"], "parallel.tensor = 2 needs a model built as"),
    "pipeline": (["parallel.strategy=allreduce", "parallel.pipeline=2"], "parallel.pipeline = 2 needs a model built as"),
    "zero3": (["parallel.strategy=zero", "parallel.zero_stage=3"], "parallel.zero_stage = 3 needs a model built as"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_python_model_refused_where_a_plan_needs_braid_layers(name, tmp_path):
    sets, reason = REFUSED[name]
    (tmp_path / "nomodel.toml").write_text(NO_MODEL)
    p = launch(["-n", "2"], JOB, tmp_path / "nomodel.toml", tmp_path / "py.json", "--python-mlp", "32", *sets,
               f"train.out_dir={tmp_path}/py", check=False)
    assert p.returncode != 0
    assert "braid.ConfigError: " + reason in p.stderr
