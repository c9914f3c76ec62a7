"""The trainer from Python: braid.train against `braid train` on the same
config, callbacks with metrics as dicts, a model written in Python, config
errors, and Ctrl-C stopping a run at a step boundary."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import braid
from braid import nn
from conftest import CLI, FASHION, SOURCE, cli_train, needs

pytestmark = needs(FASHION)

MLP = str(SOURCE / "examples/configs/fashion_mlp.toml")
SMALL = ["model.hidden=32", "train.batch_size=32", "train.max_steps=20", "train.epochs=1",
         "train.deterministic=true", "train.progress=off", "train.threads=1"]


def test_train_matches_cli(tmp_path):
    cli = cli_train(["-n", "1"], MLP, SMALL + [f"train.out_dir={tmp_path}/cli", "parallel.strategy=none"],
                    tmp_path / "cli.json")
    py = braid.train(MLP, *SMALL, f"train.out_dir={tmp_path}/py", {"parallel": {"strategy": "none"}})
    assert py["steps"] == cli["steps"] == 20
    assert py["final_loss"] == cli["final_loss"]
    assert py["eval"]["top1"] == cli["eval"]["top1"] and py["eval"]["loss"] == cli["eval"]["loss"]
    # The checkpoint is the CLI's format: braid.load reads it.
    state = braid.load(py["last_checkpoint"] + ".safetensors")
    assert any(k.startswith("model.") for k in state)


class Recorder:
    def __init__(self):
        self.steps, self.evals, self.checkpoints, self.begin = [], [], [], None

    def on_train_begin(self, start, total):
        self.begin = (start, total)

    def on_step(self, m):
        self.steps.append(m)

    def on_eval(self, m):
        self.evals.append(m)

    def on_checkpoint(self, stem, step):
        self.checkpoints.append((stem, step))


def test_trainer_callbacks_and_object_api(tmp_path):
    rec = Recorder()
    plain = []
    t = braid.Trainer({"train": {"epochs": 1, "max_steps": 12, "batch_size": 16, "out_dir": str(tmp_path),
                                 "checkpoint_every": 6, "progress": "off", "threads": 1},
                       "model": {"name": "mlp", "hidden": 16},
                       "data": {"name": "fashion_mnist", "path": str(FASHION)}},
                      callbacks=[rec, plain.append])
    assert t.leader and t.comm.size == 1 and t.plan.data_world == 1 and "data 1" in t.plan.describe()
    assert isinstance(t.model, nn.Sequential) and t.optimizer.name == "sgd"
    s = t.fit()
    assert rec.begin == (0, 12) and [m["step"] for m in rec.steps] == list(range(1, 13))
    assert plain == rec.steps
    m = rec.steps[-1]
    assert set(m) >= {"step", "epoch", "batch", "loss", "lr", "samples_per_s", "step_ms", "examples"}
    assert m["examples"] == 16 and np.isfinite(m["loss"])
    assert [c[1] for c in rec.checkpoints] == [6, 12] and len(rec.evals) == 1
    assert s["steps"] == 12 and "eval" in s
    e = t.evaluate()
    assert e["examples"] == 10000
    x, _ = braid.data.FashionMnist(str(FASHION), train=False)[0]
    assert t.predict(x.reshape(1, 1, 28, 28)).shape == (1, 10)
    loss = t.train_step(braid.zeros(4, 1, 28, 28), braid.tensor([0, 1, 2, 3]))
    assert np.isfinite(loss) and t.step == 13


class PyMLP(nn.Module):
    """The CLI's mlp (Flatten, Linear, ReLU, Linear, ReLU, Linear) written in Python."""

    def __init__(self, hidden, classes):
        super().__init__()
        self.fc1 = nn.Linear(784, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, classes)

    def forward(self, x):
        h = braid.relu(self.fc1(x.flatten(1)))
        return self.fc3(braid.relu(self.fc2(h)))


def same_weights_as_cli(hidden, seed):
    """A PyMLP holding the weights build_model('mlp') draws for train.seed."""
    ref = nn.build_model("mlp", {"hidden": hidden}, input_shape=(1, 28, 28), classes=10, seed=seed)
    m = PyMLP(hidden, 10)
    sd = ref.state_dict()
    m.load_state_dict({"fc1.weight": sd["1.weight"], "fc1.bias": sd["1.bias"], "fc2.weight": sd["3.weight"],
                       "fc2.bias": sd["3.bias"], "fc3.weight": sd["5.weight"], "fc3.bias": sd["5.bias"]})
    return m


# fashion_mlp.toml without [model]: a Python model reads no model.* key, and a
# key the run does not use is refused.
NO_MODEL = {"train": {"epochs": 1, "batch_size": 32, "max_steps": 20, "deterministic": True, "progress": "off",
                      "threads": 1},
            "optim": {"name": "sgd", "lr": 0.05, "momentum": 0.9, "schedule": "cosine"},
            "data": {"name": "fashion_mnist", "path": str(FASHION)}, "parallel": {"strategy": "none"}}


def test_python_model_trains_like_the_cli_model(tmp_path):
    cli = braid.train(MLP, *SMALL, f"train.out_dir={tmp_path}/cli", "parallel.strategy=none")
    py = braid.train(NO_MODEL, f"train.out_dir={tmp_path}/py", model=lambda shape, classes: same_weights_as_cli(32, 0))
    assert py["final_loss"] == pytest.approx(cli["final_loss"], rel=1e-6)
    assert py["eval"]["top1"] == pytest.approx(cli["eval"]["top1"], abs=2e-4)
    # A module instance works too; model.* keys set in the config are then refused (unused).
    with pytest.raises(braid.ConfigError, match="model.hidden"):
        braid.Trainer(MLP, *SMALL, f"train.out_dir={tmp_path}/x", model=PyMLP(8, 10))
    with pytest.raises(braid.ValueError, match="not a braid.nn.Module"):
        braid.Trainer(MLP, "train.progress=off", f"train.out_dir={tmp_path}/y", model=lambda s, c: 42)


def test_config_errors(tmp_path):
    with pytest.raises(braid.ConfigError, match="train.epochz"):
        braid.train(MLP, "train.epochz=1")
    with pytest.raises(braid.ConfigError, match="easgd.tau"):
        braid.train(MLP, *SMALL, f"train.out_dir={tmp_path}", "easgd.tau=3")  # a key the run would not use
    with pytest.raises(braid.ConfigError, match="expects"):
        braid.train(MLP, "train.epochs=many")
    with pytest.raises(braid.ConfigError, match="does not exist"):
        braid.train(str(tmp_path / "missing.toml"))
    with pytest.raises(TypeError):
        braid.train(MLP, train=3)
    cfg = braid.config(MLP, "optim.lr=0.5", train={"epochs": 3})
    assert cfg["optim"]["lr"] == 0.5 and cfg["train"]["epochs"] == 3 and cfg["model"]["name"] == "mlp"


INTERRUPT = r"""
import sys, braid
steps = []
t = braid.Trainer(sys.argv[1], "train.max_steps=100000", "train.epochs=100", "train.progress=off",
                  "train.threads=1",
                  f"train.out_dir={sys.argv[2]}", callbacks=[lambda m: (steps.append(m["step"]),
                  print("step", m["step"], flush=True) if m["step"] == 5 else None)])
try:
    t.fit()
except KeyboardInterrupt:
    # Stopped between steps (while their callbacks ran): every step taken was
    # a whole one, update included, and the trainer still works.
    print("interrupted", t.step, steps[-1], t.optimizer.steps, t.evaluate()["examples"], flush=True)
"""


def test_ctrl_c_stops_at_a_step_boundary(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", INTERRUPT, MLP, str(tmp_path)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        if line.startswith("step 5"):
            break
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0, out
    words = out.split()
    i = words.index("interrupted")
    step, seen, updates, examples = (int(w) for w in words[i + 1:i + 5])
    assert step >= 5 and step - seen in (0, 1) and updates == step and examples == 10000
