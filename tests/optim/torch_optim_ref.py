"""Reference optimizer trajectories from PyTorch for tests/optim/optim_test.cc.

Reads one JSON object on stdin:
  {"X": [[..]], "Y": [[..]], "W": [[..]], "b": [..],
   "cases": [{"name": "sgd", "options": {...}, "steps": 20}, ...]}
The problem is least squares: loss = 0.5 * mean((X @ W + b - Y)^2).
Writes {"trajectories": [[[W..., b...] after step 1], ...] per case]} on stdout.
LARS and LAMB are not in torch.optim; they are written here in torch from the
formulas in braid/optim/lars.h and lamb.h.
"""
import json
import sys

import torch


def loss_fn(X, Y, W, b):
    return 0.5 * ((X @ W + b - Y) ** 2).mean()


class LARS(torch.optim.Optimizer):
    def __init__(self, params, lr, momentum=0.9, weight_decay=0.0, eta=0.001, eps=1e-8):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, eta=eta, eps=eps))

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g["params"]:
                w_norm, g_norm = p.norm().item(), p.grad.norm().item()
                trust = g["eta"] * w_norm / (g_norm + g["weight_decay"] * w_norm + g["eps"]) if w_norm > 0 and g_norm > 0 else 1.0
                st = self.state[p]
                if "buf" not in st:
                    st["buf"] = torch.zeros_like(p)
                buf = st["buf"]
                buf.mul_(g["momentum"]).add_(p.grad + g["weight_decay"] * p, alpha=g["lr"] * trust)
                p.sub_(buf)


class LAMB(torch.optim.Optimizer):
    def __init__(self, params, lr, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g["params"]:
                st = self.state[p]
                if "m" not in st:
                    st["m"], st["v"], st["t"] = torch.zeros_like(p), torch.zeros_like(p), 0
                st["t"] += 1
                t = st["t"]
                st["m"].mul_(g["beta1"]).add_(p.grad, alpha=1 - g["beta1"])
                st["v"].mul_(g["beta2"]).addcmul_(p.grad, p.grad, value=1 - g["beta2"])
                r = (st["m"] / (1 - g["beta1"] ** t)) / ((st["v"] / (1 - g["beta2"] ** t)).sqrt() + g["eps"]) + g["weight_decay"] * p
                w_norm, r_norm = p.norm().item(), r.norm().item()
                trust = w_norm / r_norm if w_norm > 0 and r_norm > 0 else 1.0
                p.sub_(r, alpha=g["lr"] * trust)


def make(name, params, o):
    if name == "sgd":
        return torch.optim.SGD(params, **o)
    if name == "adam":
        return torch.optim.Adam(params, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"], weight_decay=o["weight_decay"])
    if name == "adamw":
        return torch.optim.AdamW(params, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"], weight_decay=o["weight_decay"])
    if name == "adagrad":
        return torch.optim.Adagrad(params, **o)
    if name == "rmsprop":
        return torch.optim.RMSprop(params, **o)
    if name == "lars":
        return LARS(params, **o)
    if name == "lamb":
        return LAMB(params, **o)
    if name == "lbfgs":
        return torch.optim.LBFGS(params, **o)
    raise ValueError(name)


def main():
    req = json.load(sys.stdin)
    X, Y = torch.tensor(req["X"]), torch.tensor(req["Y"])
    out = []
    for case in req["cases"]:
        W = torch.tensor(req["W"], requires_grad=True)
        b = torch.tensor(req["b"], requires_grad=True)
        opt = make(case["name"], [W, b], case["options"])
        traj = []
        for _ in range(case["steps"]):
            def closure():
                opt.zero_grad()
                loss = loss_fn(X, Y, W, b)
                loss.backward()
                return loss
            if case["name"] == "lbfgs":
                opt.step(closure)
            else:
                closure()
                opt.step()
            traj.append(W.detach().flatten().tolist() + b.detach().tolist())
        out.append(traj)
    json.dump({"trajectories": out}, sys.stdout)


if __name__ == "__main__":
    main()
