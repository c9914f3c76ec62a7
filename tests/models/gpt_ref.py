"""An independent PyTorch implementation of braid's gpt family, the oracle of
tests/models/gpt_test.cc. Written from the GPT-2 and LLaMA papers' formulas,
not from braid's code: it reads braid's parameters by their names.

gpt_loss(config_json, tensors) -> (mean next-token loss, logits [B, T, V]);
tensors holds "tokens" [B, T], "targets" [B, T] and every parameter by its
braid name ("0.tok.weight", "1.attn.in_proj.weight", ...).
"""
import json
import math

import torch
import torch.nn.functional as F


def norm(x, p, prefix, c):
    if c["norm"] == "rms":
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + c["norm_eps"]) * p[prefix + "weight"]
    return F.layer_norm(x, (x.shape[-1],), p[prefix + "weight"], p[prefix + "bias"], c["norm_eps"])


def linear(x, p, prefix):
    return F.linear(x, p[prefix + "weight"], p.get(prefix + "bias"))


def rotary(x, theta):
    # x [B, T, H, D]: pairs (i, i + D/2) rotated by t * theta^(-2i/D).
    t, d = x.shape[1], x.shape[3]
    inv = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    a = torch.arange(t, dtype=torch.float64)[:, None] * inv  # [T, D/2]
    cos = torch.cat([a.cos(), a.cos()], -1)[None, :, None, :].to(x.dtype)
    sin = torch.cat([a.sin(), a.sin()], -1)[None, :, None, :].to(x.dtype)
    half = d // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


def attention(x, p, prefix, c):
    b, t, dim = x.shape
    h, kv = c["heads"], c["kv_heads"] or c["heads"]
    hd = dim // h
    qkv = linear(x, p, prefix + "in_proj.")
    q = qkv[..., : h * hd].reshape(b, t, h, hd)
    k = qkv[..., h * hd : (h + kv) * hd].reshape(b, t, kv, hd)
    v = qkv[..., (h + kv) * hd :].reshape(b, t, kv, hd)
    if c["position"] == "rope":
        q, k = rotary(q, c["rope_theta"]), rotary(k, c["rope_theta"])
    q, k, v = (z.transpose(1, 2) for z in (q, k, v))  # [B, heads, T, hd]
    k = k.repeat_interleave(h // kv, dim=1)
    v = v.repeat_interleave(h // kv, dim=1)
    s = q @ k.transpose(-1, -2) / math.sqrt(hd)
    mask = torch.ones(t, t, dtype=torch.bool).triu(1)
    s = s.masked_fill(mask, float("-inf"))
    o = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, h * hd)
    return linear(o, p, prefix + "out_proj.")


def mlp(x, p, prefix, c):
    hid = linear(x, p, prefix + "fc1.")
    if c["activation"] == "swiglu":
        f = hid.shape[-1] // 2
        hid = F.silu(hid[..., :f]) * hid[..., f:]
    elif c["activation"] == "gelu_tanh":
        hid = 0.5 * hid * (1 + torch.tanh(math.sqrt(2 / math.pi) * (hid + 0.044715 * hid ** 3)))
    else:
        hid = F.gelu(hid)
    return linear(hid, p, prefix + "fc2.")


def gpt_loss(config_json, tensors):
    c = json.loads(config_json)
    p = tensors
    tokens, targets = p["tokens"], p["targets"]
    layers = c["layers"]
    x = F.embedding(tokens, p["0.tok.weight"])
    if c["position"] == "learned":
        x = x + p["0.pos"][: tokens.shape[1]]
    for i in range(1, layers + 1):
        pre = f"{i}."
        x = x + attention(norm(x, p, pre + "ln1.", c), p, pre + "attn.", c)
        x = x + mlp(norm(x, p, pre + "ln2.", c), p, pre, c)
    x = norm(x, p, f"{layers + 1}.", c)
    head = p["0.tok.weight"] if c["tie_embeddings"] else p[f"{layers + 2}.weight"]
    logits = x @ head.t()
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    return loss, logits
