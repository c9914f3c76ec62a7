"""braid.nn: modules composable in Python, losses and the model families.

Every module is braid's C++ module (braid/nn); ``Module`` can be subclassed in
Python with a ``forward(x)`` method, and such a model trains under braid's
trainer and the plans that can take it (docs/python.md, "Models in Python").
Attributes that are modules, or leaf tensors that require grad, are registered
(as torch registers submodules and nn.Parameter)."""

from __future__ import annotations

from . import _braid

_nn = _braid.nn

Module = _nn.Module
Sequential = _nn.Sequential
Linear = _nn.Linear
Conv2d = _nn.Conv2d
MaxPool2d = _nn.MaxPool2d
AvgPool2d = _nn.AvgPool2d
GlobalAvgPool2d = _nn.GlobalAvgPool2d
BatchNorm2d = _nn.BatchNorm2d
LayerNorm = _nn.LayerNorm
Dropout = _nn.Dropout
Embedding = _nn.Embedding
MultiHeadAttention = _nn.MultiHeadAttention
TransformerBlock = _nn.TransformerBlock
TokenPositionEmbedding = _nn.TokenPositionEmbedding
ReLU = _nn.ReLU
GELU = _nn.GELU
Tanh = _nn.Tanh
Flatten = _nn.Flatten
WeightNorm = _nn.WeightNorm
build_model = _nn.build_model


def Parameter(t: _braid.Tensor) -> _braid.Tensor:
    """A leaf that requires grad: assigned to a Module attribute, it is registered."""
    return t.detach().requires_grad_(True)


def _save(self, path: str) -> None:
    """Writes the module's state_dict as a safetensors file."""
    _braid.save(self.state_dict(), path)


def _load(self, path: str, strict: bool = True) -> None:
    """Loads a safetensors file written by save() (or by torch's safetensors) in place."""
    self.load_state_dict(_braid.load(path), strict)


def _modules(self):
    """Every module of the tree, depth first, with its dotted name ('' for this one)."""
    out = [("", self)]
    for name, child in self.children():
        out += [(name + ("." + n if n else ""), m) for n, m in _modules(child)]
    return out


Module.save = _save
Module.load = _load
Module.named_modules = _modules


class _Loss:
    """A loss as a callable object (torch.nn's style): loss(output, target)."""

    fn = None

    def __call__(self, output, target):
        return type(self).fn(output, target)

    def __repr__(self):
        return f"braid.nn.{type(self).__name__}()"


class CrossEntropyLoss(_Loss):
    fn = staticmethod(_braid.cross_entropy)


class NLLLoss(_Loss):
    fn = staticmethod(_braid.nll_loss)


class MSELoss(_Loss):
    fn = staticmethod(_braid.mse_loss)


class BCEWithLogitsLoss(_Loss):
    fn = staticmethod(_braid.bce_with_logits)


class functional:  # noqa: N801  (a namespace, as torch.nn.functional)
    relu = staticmethod(_braid.relu)
    gelu = staticmethod(_braid.gelu)
    tanh = staticmethod(_braid.tanh)
    sigmoid = staticmethod(_braid.sigmoid)
    softmax = staticmethod(_braid.softmax)
    log_softmax = staticmethod(_braid.log_softmax)
    linear = staticmethod(_braid.linear)
    conv2d = staticmethod(_braid.conv2d)
    max_pool2d = staticmethod(_braid.max_pool2d)
    avg_pool2d = staticmethod(_braid.avg_pool2d)
    layer_norm = staticmethod(_braid.layer_norm)
    batch_norm = staticmethod(_braid.batch_norm)
    dropout = staticmethod(_braid.dropout)
    embedding = staticmethod(_braid.embedding)
    cross_entropy = staticmethod(_braid.cross_entropy)
    nll_loss = staticmethod(_braid.nll_loss)
    mse_loss = staticmethod(_braid.mse_loss)
    binary_cross_entropy_with_logits = staticmethod(_braid.bce_with_logits)
