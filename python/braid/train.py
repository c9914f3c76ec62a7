"""Training from Python with braid's trainer (docs/python.md, "Training").

``braid.train(config, *overrides)`` runs what ``braid train CONFIG --set ...``
runs, in this process (start several with ``python -m braid.launch``): the
config is a TOML file's path or a dict (flat ``{"train.epochs": 2}`` or by
section ``{"train": {"epochs": 2}}``), overrides are "key=value" strings or
dicts, and keyword arguments name sections: ``braid.train(cfg, train={"epochs":
2}, parallel={"strategy": "zero"})``. Every parallel.strategy of the CLI is
reachable. It returns the run's summary as a dict (what --summary-json
writes).

``braid.Trainer`` is the same run as an object: its model, optimizer and plan,
callbacks with per-step metrics as dicts, fit(), evaluate(), train_step(),
predict(), save(). ``model=`` trains a braid.nn.Module written in Python (or a
function (input_shape, classes) -> Module, called with braid's default
generator at train.seed's state, so the layers it builds draw the weights
``braid train`` would and an ensemble's members differ) in place of model.*.

Ctrl-C stops a run at the next step boundary (after the step's update) with
KeyboardInterrupt; checkpoints written before stay valid."""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable

from . import _braid

_t = _braid.trainer

Plan = _t.Plan


def _overrides(overrides: Iterable, sections: dict) -> list:
    out = list(overrides)
    for section, values in sections.items():
        if not isinstance(values, dict):
            raise TypeError(f"braid.train: keyword {section}= takes a dict of that section's keys, "
                            f"e.g. {section}={{...}}")
        out.append({section: values})
    return out


def config(config: Any = None, *overrides, **sections) -> dict:
    """The effective configuration as a nested dict (defaults < file or dict <
    environment < overrides), as ``braid inspect config`` shows it."""
    return _t.config(_path(config), _overrides(overrides, sections))


def _path(config):
    return os.fspath(config) if isinstance(config, os.PathLike) else config


class Trainer:
    """A whole training run as ``braid train`` builds it: data, model, plan
    (joining the job when launched), optimizer and schedule.

    callbacks: objects with any of on_train_begin(start_step, total_steps),
    on_step(metrics), on_log(metrics), on_eval(metrics), on_checkpoint(stem,
    step), on_message(text), on_train_end(steps), or plain functions (called
    as on_step). Metrics are dicts (step, epoch, batch, loss, lr,
    samples_per_s, step_ms, ...). report: 'auto', 'bar', 'lines' or 'off' for
    the leader's console output ('' = train.progress), and its metrics files."""

    def __init__(self, config: Any, *overrides, model: Any = None,
                 callbacks: Iterable[Any] | Callable | None = None, report: str | None = None, **sections):
        self._t = _t.Trainer(_path(config), _overrides(overrides, sections), model)
        if report is not None:
            self._t.report(report)
        if callbacks is not None:
            for cb in ([callbacks] if callable(callbacks) and not hasattr(callbacks, "on_step") else callbacks):
                self._t.add_callback(cb)

    def add_callback(self, callback) -> None:
        self._t.add_callback(callback)

    def fit(self) -> dict:
        """Runs the whole schedule (resuming first as train.resume says); the summary as a dict."""
        return self._t.fit()

    def evaluate(self) -> dict:
        """One pass over the test set: loss, top1, top5, examples."""
        return self._t.evaluate()

    def evaluate_ensemble(self) -> dict:
        """Under parallel.strategy = ensemble: every member scored alone and as an ensemble (collective)."""
        return self._t.evaluate_ensemble()

    def train_step(self, input, target) -> float:
        """One step of the plan on a batch (forward, backward, gradient sync, clip,
        update); its loss. For loops of your own over braid's plan."""
        return self._t.train_step(input, target)

    def predict(self, input):
        """The model's whole outputs for a batch (eval mode, no gradients), on the host."""
        return self._t.predict(input)

    def save(self) -> str:
        """Writes a checkpoint of the current state now; its stem."""
        return self._t.save()

    model = property(lambda self: self._t.model, doc="This rank's model (its shard under tensor or pipeline plans).")
    optimizer = property(lambda self: self._t.optimizer)
    plan = property(lambda self: self._t.plan, doc="The braid.Plan: mesh, data rank and world, gradient sync.")
    mesh = property(lambda self: self._t.plan.mesh)
    leader = property(lambda self: self._t.leader, doc="True on the rank that reports for the job.")
    step = property(lambda self: self._t.step)
    device = property(lambda self: self._t.device)
    comm = property(lambda self: self._t.comm, doc="The job's world communicator (None for one process).")
    out_dir = property(lambda self: self._t.out_dir)
    config = property(lambda self: self._t.config)


def train(config: Any, *overrides, model: Any = None, callbacks: Iterable[Any] | Callable | None = None,
          report: str = "", **sections) -> dict:
    """Trains as ``braid train`` does and returns the summary dict. Under
    parallel.strategy = ensemble the summary also holds the members' and the
    ensemble's test figures ("ensemble"); model.name = sparse_linear runs
    through its parameter servers (python -m braid.launch --servers S --workers W)."""
    ovr = _overrides(overrides, sections)
    if model is None and _t.config(_path(config), ovr)["model"]["name"] == "sparse_linear":
        return _t.train_sparse(_path(config), ovr)
    t = Trainer(config, *overrides, model=model, callbacks=callbacks, report=report, **sections)
    summary = t.fit()
    if t.config["parallel"]["strategy"] == "ensemble":
        summary["ensemble"] = t.evaluate_ensemble()
    return summary
