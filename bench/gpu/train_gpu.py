"""Training on one GPU, braid against PyTorch on the same GPU and the same work:
the MLP and CNN of examples/configs on Fashion-MNIST (batch 256) and a
GPU-sized char transformer (bf16, d_model 768, 6 layers, context 256). Prints
one JSON line per run and a table: samples/s of each, their ratio, and MFU
(model FLOPs per second over the GPU's dense peak for the precision).

  python3 bench/gpu/train_gpu.py --braid build/bin/braid --fmnist DIR --text FILE [--steps N]

PyTorch trains the same architecture with the same optimizer on random data of
the same shapes (step time does not depend on the values); braid reads the
dataset, as a user would. The first fifth of the steps is warm-up for both
(cuBLAS/cuDNN choices, allocator), excluded from the rate.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Dense peaks of an H100/H200 SXM (NVIDIA's data sheet): bf16 tensor cores and plain f32.
PEAK = {"bf16": 989.4e12, "f32": 66.9e12}

TRANSFORMER = {"d_model": 768, "n_heads": 12, "n_layers": 6, "context": 256, "vocab": 256}


def forward_flops(model, batch):
    """Multiply-adds x 2 of one forward pass over `batch` examples."""
    if model == "mlp":
        return 2 * batch * (784 * 256 + 256 * 256 + 256 * 10)
    if model == "cnn":
        conv1 = 26 * 26 * 32 * 9
        conv2 = 11 * 11 * 64 * 32 * 9
        return 2 * batch * (conv1 + conv2 + 1600 * 128 + 128 * 10)
    t = TRANSFORMER
    d, L, T, V = t["d_model"], t["n_layers"], t["context"], t["vocab"]
    per_token = L * (4 * d * d + 8 * d * d) + d * V + L * 2 * T * d  # projections, MLP, head, attention
    return 2 * batch * T * per_token


def braid_run(braid, model, batch, steps, fmnist, text, precision, timeout=180):
    with tempfile.TemporaryDirectory() as out:
        summary = os.path.join(out, "summary.json")
        if model == "transformer":
            t = TRANSFORMER
            config = os.path.join(ROOT, "examples/configs/char_transformer.toml")
            sets = [f"model.d_model={t['d_model']}", f"model.n_heads={t['n_heads']}", f"model.n_layers={t['n_layers']}",
                    f"model.context={t['context']}", "model.dropout=0", "train.grad_clip=0", f"data.path={text}",
                    "optim.schedule=constant"]
        else:
            config = os.path.join(ROOT, f"examples/configs/fashion_{model}.toml")
            sets = [f"data.path={fmnist}", "optim.schedule=constant"]
        sets += [f"train.batch_size={batch}", f"train.max_steps={steps}", "train.epochs=1000", "train.eval_every=0",
                 "train.progress=off", f"train.out_dir={out}", "train.device=cuda", f"train.precision={precision}",
                 f"train.log_every={max(1, steps // 5)}"]
        cmd = [braid, "train", config, "--summary-json", summary]
        for s in sets:
            cmd += ["--set", s]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"no result within {timeout} s"}
        if p.returncode != 0:
            return {"error": (p.stdout + p.stderr)[-2000:]}
        with open(summary) as f:
            s = json.load(f)
        return {"samples_per_s": s["samples_per_s"], "steps": s["steps"], "final_loss": s["final_loss"]}


def torch_run(model, batch, steps, precision):
    import torch
    import torch.nn as nn
    torch.manual_seed(0)
    dev = "cuda"
    if model == "mlp":
        m = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
        x, y = torch.randn(batch, 1, 28, 28, device=dev), torch.randint(0, 10, (batch,), device=dev)
        opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    elif model == "cnn":
        m = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(1600, 128), nn.ReLU(), nn.Linear(128, 10))
        x, y = torch.randn(batch, 1, 28, 28, device=dev), torch.randint(0, 10, (batch,), device=dev)
        opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    else:
        t = TRANSFORMER
        m = TorchCharTransformer(t["vocab"], t["context"], t["d_model"], t["n_heads"], t["n_layers"])
        x = torch.randint(0, t["vocab"], (batch, t["context"]), device=dev)
        y = torch.randint(0, t["vocab"], (batch, t["context"]), device=dev)
        opt = torch.optim.AdamW(m.parameters(), lr=3e-3, weight_decay=0.01)
    m = m.to(dev)
    loss_fn = nn.CrossEntropyLoss()
    warm = max(1, steps // 5)
    for i in range(steps):
        if i == warm:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            out = m(x)
            loss = loss_fn(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    return {"samples_per_s": batch * (steps - warm) / seconds, "steps": steps, "final_loss": float(loss),
            "torch": torch.__version__}


def TorchCharTransformer(vocab, context, d, heads, layers):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.in_proj, self.out_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.in_proj(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            s = (q @ k.transpose(-1, -2)) / math.sqrt(d // heads)
            a = (s.masked_fill(mask, float("-inf")).softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
            x = x + self.out_proj(a)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Parameter(torch.zeros(context, d))
            self.blocks = nn.Sequential(*[Block() for _ in range(layers)])
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

        def forward(self, x):
            return self.head(self.ln(self.blocks(self.tok(x) + self.pos)))

    return Model()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--braid", default=os.path.join(ROOT, "build/bin/braid"))
    ap.add_argument("--fmnist", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--text", default="/usr/share/games/fortunes")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--runs", default="mlp:256:f32,cnn:256:f32,transformer:32:bf16")
    a = ap.parse_args()
    rows = []
    for spec in a.runs.split(","):
        model, batch, precision = spec.split(":")
        batch = int(batch)
        steps = a.steps if model != "transformer" else max(20, a.steps // 4)
        ours = braid_run(a.braid, model, batch, steps, a.fmnist, a.text, precision)
        theirs = torch_run(model, batch, steps, precision)
        flops = 3 * forward_flops(model, 1)
        for who, r in (("braid", ours), ("pytorch", theirs)):
            if "samples_per_s" in r:
                r["mfu"] = r["samples_per_s"] * flops / PEAK[precision]
            print(json.dumps({"framework": who, "model": model, "batch": batch, "precision": precision, **r}), flush=True)
        rows.append((model, batch, precision, ours, theirs))
    print(f"\n{'model':<12}{'batch':>6}{'prec':>6}{'braid/s':>12}{'torch/s':>12}{'ratio':>8}{'braid MFU':>11}{'torch MFU':>11}")
    for model, batch, precision, ours, theirs in rows:
        if "samples_per_s" not in ours:
            print(f"{model:<12}{batch:>6}{precision:>6}  braid failed: {ours['error'][-300:]}")
            continue
        print(f"{model:<12}{batch:>6}{precision:>6}{ours['samples_per_s']:>12.0f}{theirs['samples_per_s']:>12.0f}"
              f"{ours['samples_per_s'] / theirs['samples_per_s']:>8.2f}{ours['mfu']:>11.1%}{theirs['mfu']:>11.1%}")


if __name__ == "__main__":
    sys.exit(main())
