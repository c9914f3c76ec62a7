"""braid from Python: tensors, autograd, modules, optimizers, data, the trainer,
every plan of ``braid train`` and the collectives (docs/python.md).

The work runs in braid's C++ core (the extension ``braid._braid``); the
bindings are thin and release the GIL while C++ runs.

    import braid
    x = braid.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    (x * x).sum().backward()
    x.grad                      # 2x
    braid.train("examples/configs/char_transformer.toml", "train.max_steps=20")
"""

from __future__ import annotations

from . import _braid
from ._braid import (  # noqa: F401  (re-exported)
    ConfigError,
    DesyncError,
    Device,
    Error,
    Generator,
    IndexError,
    IoError,
    NumericError,
    OutOfMemoryError,
    PeerError,
    Tensor,
    TimeoutError,
    ValueError,
    abs,
    add,
    arange,
    available_cores,
    avg_pool2d,
    batch_norm,
    bce_with_logits,
    cast,
    cat,
    clamp,
    conv2d,
    cross_entropy,
    default_generator,
    div,
    dropout,
    dtype,
    embedding,
    empty,
    eq,
    exp,
    from_dlpack,
    from_numpy,
    full,
    gather,
    gelu,
    grad,
    gt,
    index_select,
    is_grad_enabled,
    layer_norm,
    linear,
    load,
    load_metadata,
    log,
    log_softmax,
    lt,
    manual_seed,
    masked_fill,
    matmul,
    max_pool2d,
    maximum,
    minimum,
    mse_loss,
    mul,
    neg,
    nll_loss,
    no_grad,
    num_threads,
    ones,
    pow,
    relu,
    save,
    set_num_threads,
    sigmoid,
    sign,
    slice,
    softmax,
    split,
    sqrt,
    stack,
    sub,
    tanh,
    where,
    zeros,
)

__version__ = "0.1.0"

float32 = dtype.float32
float64 = dtype.float64
float16 = dtype.float16
bfloat16 = dtype.bfloat16
int32 = dtype.int32
int64 = dtype.int64
uint8 = dtype.uint8
bool_ = dtype.bool
float = float32  # noqa: A001  (torch's spelling: braid.float is float32)
long = int64

_NUMPY_NAME = {float32: "float32", float64: "float64", float16: "float16", int32: "int32", int64: "int64",
               uint8: "uint8", bool_: "bool_"}


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (a number, nested lists, a numpy
    array, a braid or torch tensor). Python floats become float32 and ints
    int64, as torch does; a numpy array keeps its dtype unless one is given.
    """
    import numpy as _np  # only here: `import braid` itself needs no numpy (the build's stub generator runs without)

    if isinstance(data, Tensor):
        out = data.detach().clone()
        if dtype is not None:
            out = out.to(dtype)
    else:
        is_array = isinstance(data, _np.ndarray)
        if dtype == bfloat16:
            out = from_numpy(_np.array(data, dtype=_np.float32)).to(bfloat16)
        else:
            np_dtype = getattr(_np, _NUMPY_NAME[_braid_dtype(dtype)]) if dtype is not None else None
            arr = _np.array(data, dtype=np_dtype, copy=True)
            if dtype is None and not is_array:
                if arr.dtype == _np.float64:
                    arr = arr.astype(_np.float32)
                elif arr.dtype.kind == "i":
                    arr = arr.astype(_np.int64)
            arr = _np.ascontiguousarray(arr)
            if not arr.flags.writeable:
                arr = arr.copy()
            out = from_numpy(arr)
    if device is not None and str(device) != "cpu":
        out = out.to(device)
    if requires_grad:
        out.requires_grad_(True)
    return out


def _braid_dtype(d):
    if isinstance(d, dtype):
        return d
    probe = empty(0, dtype=d)
    return probe.dtype


def as_tensor(data, dtype=None) -> Tensor:
    """Shares memory with a writable numpy array of a braid dtype (no copy);
    copies anything else (braid.tensor)."""
    import numpy as _np

    if isinstance(data, Tensor):
        return data if dtype is None else data.to(dtype)
    if isinstance(data, _np.ndarray) and data.flags.writeable and dtype is None:
        try:
            return from_numpy(data)
        except ValueError:
            pass
    return tensor(data, dtype=dtype)


def randn(*shape, generator: Generator | None = None, dtype=float32, requires_grad: bool = False) -> Tensor:
    """Standard normal draws from ``generator`` (default: braid.default_generator())."""
    t = empty(*shape, dtype=dtype)
    _braid.randn_(t, generator or default_generator())
    return t.requires_grad_(requires_grad)


def rand(*shape, generator: Generator | None = None, dtype=float32, requires_grad: bool = False) -> Tensor:
    """Uniform draws in [0, 1) from ``generator`` (default: braid.default_generator())."""
    t = empty(*shape, dtype=dtype)
    _braid.rand_(t, generator or default_generator())
    return t.requires_grad_(requires_grad)


from . import data, distributed, nn, optim  # noqa: E402
from .distributed import Mesh  # noqa: E402
from .train import Plan, Trainer, config, train  # noqa: E402
