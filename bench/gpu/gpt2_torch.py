"""GPT-2 124M in PyTorch, the peer of bench/gpu/gpt2_bench (issue 52): the same
model (12 layers x 768, 12 heads, context 1024, vocab 50304, learned
positions, layer norm, GELU (tanh), biases, tied head, GPT-2's init), AdamW
(lr 6e-4, betas 0.9/0.95, weight decay 0.1; fused on a GPU), bf16 autocast,
gradient clipping at 1.0, synthetic seeded tokens, batch 16 x 1024. Attention
is F.scaled_dot_product_attention (flash/cuDNN kernels on a GPU).

  python3 bench/gpu/gpt2_torch.py [--mode eager|compile] [--device cuda] [--small] [--steps 20] [--warmup 5]

Prints one JSON line with the keys gpt2_bench prints: tokens/s, step time,
MFU by 6N + 12 L T d (the formula braid's models::training_flops_per_token
uses), peak memory, and for --mode compile the seconds the warm-up steps took
(compilation) apart from the timed steps. --small is gpt2_bench's small shape
(2 x 64, context 64, vocab 512, batch 2), which a CPU runs in seconds.
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# Dense peaks of an H100/H200 SXM (NVIDIA's data sheet), as gpt2_bench uses.
PEAK = {"bf16": 989.4e12, "f32": 66.9e12}


def _composite_attention(q, k, v):
    """Causal attention in matmul, mask and softmax: torch before 2.0 has no SDPA."""
    t = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    mask = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    return scores.masked_fill(mask, float("-inf")).softmax(-1) @ v


def attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


if not hasattr(F, "scaled_dot_product_attention"):
    attention = _composite_attention  # noqa: F811


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = attention(q, k, v)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, context, layers, heads, dim):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2:
                # GPT-2's init; the projections that end a residual branch scaled by 1/sqrt(2L)
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "fc2.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--precision", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    if a.small:
        a.layers, a.dim, a.heads, a.context, a.vocab, a.batch = 2, 64, 2, 64, 512, 2
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    if a.mode == "compile" and not hasattr(torch, "compile"):
        print(json.dumps({"framework": "torch", "mode": a.mode, "skipped": f"torch {torch.__version__} has no torch.compile"}))
        return 0
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print(f"gpt2_torch: no CUDA device visible to torch {torch.__version__}", file=sys.stderr)
        return 3
    torch.manual_seed(a.seed)
    model = GPT(a.vocab, a.context, a.layers, a.heads, a.dim).to(dev)
    params = list(model.parameters())
    n_params = sum(p.numel() for p in params)
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    extra = {"fused": True} if dev.type == "cuda" else {}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, **extra)
    g = torch.Generator().manual_seed(a.seed + 1)
    batches = []
    for _ in range(4):
        ids = torch.randint(0, a.vocab, (a.batch, a.context + 1), generator=g)
        batches.append((ids[:, :-1].contiguous().to(dev), ids[:, 1:].contiguous().to(dev)))
    dtype = torch.bfloat16 if a.precision == "bf16" else torch.float32
    fwd = torch.compile(model) if a.mode == "compile" else model

    def step(i):
        x, y = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev.type, dtype=dtype, enabled=a.precision == "bf16"):
            logits = fwd(x)
            loss = F.cross_entropy(logits.float().view(-1, a.vocab), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    t0 = time.perf_counter()
    loss = None
    for i in range(a.warmup):
        loss = step(i)
    first_loss = loss.item() if loss is not None else 0.0
    sync()
    warmup_s = time.perf_counter() - t0
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for i in range(a.steps):
        loss = step(a.warmup + i)
    last_loss = loss.item()
    sync()
    seconds = time.perf_counter() - t0

    tokens_per_step = a.batch * a.context
    tokens_per_s = tokens_per_step * a.steps / seconds
    # 6N (the tied table counted once) + 12 L T d, as models::training_flops_per_token.
    flops_per_token = 6 * n_params + 12 * a.layers * a.context * a.dim
    peak = PEAK[a.precision] if dev.type == "cuda" else 0.0
    out = {
        "framework": "torch", "torch": torch.__version__, "mode": a.mode, "device": a.device,
        "attention": "sdpa" if attention is not _composite_attention else "composite (no SDPA in this torch)",
        "precision": a.precision, "layers": a.layers, "dim": a.dim, "heads": a.heads, "context": a.context,
        "vocab": a.vocab, "batch": a.batch, "parameters": n_params, "steps": a.steps, "warmup": a.warmup,
        "step_ms": 1e3 * seconds / a.steps, "tokens_per_s": tokens_per_s, "flops_per_token_formula": flops_per_token,
        "peak_tflops": peak / 1e12, "mfu_formula": tokens_per_s * flops_per_token / peak if peak > 0 else None,
        "warmup_seconds": warmup_s, "loss_first": first_loss, "loss_last": last_loss,
        "peak_memory_bytes": torch.cuda.max_memory_reserved() if dev.type == "cuda" else None,
        "peak_allocated_bytes": torch.cuda.max_memory_allocated() if dev.type == "cuda" else None,
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
