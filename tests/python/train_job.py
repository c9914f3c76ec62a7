"""One rank of a job the tests start with python -m braid.launch: braid.train
on a config with overrides; the leader writes the summary as JSON.

    train_job.py CONFIG SUMMARY_JSON [--python-mlp HIDDEN] KEY=VALUE...
"""
import json
import sys

import braid
from braid import nn

args = sys.argv[1:]
config, summary = args[0], args[1]
sets = args[2:]
model = None
if sets and sets[0] == "--python-mlp":
    hidden = int(sets[1])
    sets = sets[2:]

    class PyMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(784, hidden)
            self.fc2 = nn.Linear(hidden, hidden)
            self.fc3 = nn.Linear(hidden, 10)

        def forward(self, x):
            return self.fc3(braid.relu(self.fc2(braid.relu(self.fc1(x.flatten(1))))))

    def model(shape, classes):
        # The weights the CLI's mlp draws for train.seed 0, in a module written in Python.
        ref = nn.build_model("mlp", {"hidden": hidden}, input_shape=shape, classes=classes, seed=0).state_dict()
        m = PyMLP()
        m.load_state_dict({f"fc{i}.{p}": ref[f"{2 * i - 1}.{p}"] for i in (1, 2, 3) for p in ("weight", "bias")})
        return m

s = braid.train(config, *sets, model=model)
if s.get("leader"):
    with open(summary, "w") as f:
        json.dump(s, f)
