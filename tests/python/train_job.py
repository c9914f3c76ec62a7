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
        # Built with braid's default generator, which the trainer sets to
        # train.seed's state (each ensemble member's own): the same weights
        # as the CLI's mlp, whose layers are drawn in the same order.
        return PyMLP()

s = braid.train(config, *sets, model=model)
if s.get("leader"):
    with open(summary, "w") as f:
        json.dump(s, f)
