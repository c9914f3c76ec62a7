"""braid.optim: braid's optimizers (braid/optim) over model.parameters(),
learning-rate schedules and gradient clipping. Updates run in C++ with the GIL
released; the same updates as torch.optim's (docs/training.md)."""

from . import _braid

_o = _braid.optim

Optimizer = _o.Optimizer
SGD = _o.SGD
Adam = _o.Adam
AdamW = _o.AdamW
AdaGrad = _o.AdaGrad
RMSProp = _o.RMSProp
LARS = _o.LARS
LAMB = _o.LAMB
LBFGS = _o.LBFGS
LRSchedule = _o.LRSchedule
make_schedule = _o.make_schedule
grad_norm = _o.grad_norm
clip_grad_norm = _o.clip_grad_norm
