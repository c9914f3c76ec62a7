"""A dense PyTorch reference of braid's mixture-of-experts layer, the oracle
of tests/nn/moe_test.cc. Every expert runs on every token and a mask keeps
the routed, undropped assignments; routing, capacity and losses are written
from the Switch / GShard / ST-MoE formulas, not from braid's code.

moe(config_json, env) -> (L, y, balance, z, tokens per expert, dropped) with
L = sum(y * R) + aux_loss * balance + z_loss * z. env holds x [..., D], R
(y's shape) and the parameters by braid's names.
"""
import json
import math

import torch
import torch.nn.functional as F


def act(h, kind):
    if kind == "swiglu":
        f = h.shape[-1] // 2
        return F.silu(h[..., :f]) * h[..., f:]
    if kind == "gelu":
        return F.gelu(h)
    return F.gelu(h, approximate="tanh")


def moe(config_json, env):
    c = json.loads(config_json)
    x = env["x"]
    d = x.shape[-1]
    xf = x.reshape(-1, d)
    n, e, k = xf.shape[0], c["experts"], c["top_k"]
    logits = xf @ env["router.weight"].T
    probs = logits.softmax(-1)
    top = torch.topk(probs.detach(), k, dim=-1).indices  # [N, k], best first
    chosen = probs.gather(1, top)
    gates = chosen / chosen.sum(-1, keepdim=True) if k > 1 else chosen
    # GShard's priority: every token's first choice, then second choices, tokens in order.
    cap = math.ceil(c["capacity_factor"] * n * k / e) if c["capacity_factor"] > 0 else n * k
    used, routed = [0] * e, [0] * e
    keep = torch.zeros(n, k, dtype=x.dtype)
    for s in range(k):
        for t in range(n):
            ex = int(top[t, s])
            routed[ex] += 1
            if used[ex] < cap:
                used[ex] += 1
                keep[t, s] = 1
    y = torch.zeros_like(xf)
    for ex in range(e):
        out = act(xf @ env["experts.fc1"][ex].T, c["mlp"]) @ env["experts.fc2"][ex].T
        weight = ((top == ex).to(x.dtype) * keep * gates).sum(-1)
        y = y + weight[:, None] * out
    if "shared_fc1.weight" in env:
        y = y + act(xf @ env["shared_fc1.weight"].T, c["mlp"]) @ env["shared_fc2.weight"].T
    f = torch.tensor(routed, dtype=x.dtype) / (n * k)
    balance = e * (probs.mean(0) * f).sum()
    z = (torch.logsumexp(logits, -1) ** 2).mean()
    y = y.reshape(x.shape)
    loss = (y * env["R"]).sum() + c["aux_loss"] * balance + c["z_loss"] * z
    return loss, y, balance, z, torch.tensor(routed, dtype=torch.int64), torch.tensor(n * k - sum(used))
