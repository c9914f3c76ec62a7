#!/usr/bin/env python3
"""Training tokens/s of braid's gpt against PyTorch 2.x (eager and
torch.compile) on the same GPT-2-shaped model, same machine, same run.

The model: 6 layers x 384 wide, 6 heads, context 256, vocabulary 8192,
learned positions, LayerNorm, GELU (tanh), biases, tied embeddings, no
dropout; batch 8 x 256 tokens; AdamW (lr 3e-4, weight decay 0.1 on matrices,
betas 0.9/0.95), gradient clipping at 1.0 on both sides. braid runs
`braid train` (data from a token shard through its loader); PyTorch runs the
same model written as nanoGPT writes it (F.scaled_dot_product_attention with
is_causal, fused-free AdamW), on random ids of the same shape. Each run times
--steps optimizer steps after --warmup; its figure is the median step time.
Runs alternate braid, eager, compiled for --rounds rounds at each thread
count; the table gives medians over rounds and the ratios.

  python3 bench/train/gpt_vs_pytorch.py [--braid build/bin/braid] [--python .venv-bench/bin/python]
        [--threads 1,2] [--rounds 3] [--steps 6] [--warmup 2] [--no-compile]

PyTorch 2.x comes from .venv-bench (scripts/setup --bench).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPE = dict(layers=6, dim=384, heads=6, context=256, vocab=8192, batch=8)

TORCH_RUN = r"""
import json, math, sys, time
import torch, torch.nn as nn, torch.nn.functional as F
a = json.loads(sys.argv[1])
torch.set_num_threads(a["threads"])
torch.manual_seed(0)
L, D, H, T, V, B = a["layers"], a["dim"], a["heads"], a["context"], a["vocab"], a["batch"]

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (z.view(b, t, H, D // H).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, D))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, V, bias=False)
        self.head.weight = self.wte.weight
    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, V), targets.view(-1))

model = GPT()
decay = [p for p in model.parameters() if p.dim() >= 2]
other = [p for p in model.parameters() if p.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                        lr=3e-4, betas=(0.9, 0.95))
step_fn = torch.compile(model) if a["compile"] else model
times = []
for i in range(a["warmup"] + a["steps"]):
    idx = torch.randint(0, V, (B, T))
    tgt = torch.randint(0, V, (B, T))
    t0 = time.perf_counter()
    loss = step_fn(idx, tgt)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    times.append(time.perf_counter() - t0)
print(json.dumps({"step_s": sorted(times[a["warmup"]:])[len(times[a["warmup"]:]) // 2], "loss": loss.item()}))
"""


def braid_config(shard_glob):
    s = SHAPE
    return f"""
[train]
batch_size = {s['batch']}
log_every = 1
eval_every = 0
grad_clip = 1.0
progress = "lines"
[model]
name = "gpt"
n_layers = {s['layers']}
n_heads = {s['heads']}
d_model = {s['dim']}
context = {s['context']}
activation = "gelu_tanh"
[optim]
name = "adamw"
lr = 3e-4
beta1 = 0.9
beta2 = 0.95
weight_decay = 0.1
[data]
name = "tokens"
path = "{shard_glob}"
"""


def make_shard(braid, work):
    """A shard of vocabulary 8192 from the fortunes (the ids' values do not change the work)."""
    files = [os.path.join("/usr/share/games/fortunes", f) for f in sorted(os.listdir("/usr/share/games/fortunes"))
             if not f.endswith((".dat", ".u8")) and os.path.isfile(os.path.join("/usr/share/games/fortunes", f))]
    tok = os.path.join(work, "tok")
    subprocess.run([braid, "tokenize", "train", "--vocab-size", str(SHAPE["vocab"]), "--out", tok] + files,
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([braid, "tokenize", "encode", "--tokenizer", tok, "--out", os.path.join(work, "shards", "t")] + files,
                   check=True, stdout=subprocess.DEVNULL)
    return os.path.join(work, "shards", "t-*.tok")


def run_braid(braid, config, threads, steps, warmup, work):
    out = tempfile.mkdtemp(dir=work)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)}
    subprocess.run([braid, "train", config, "--set", f"train.threads={threads}", "--set",
                    f"train.max_steps={warmup + steps}", "--set", f"train.out_dir={out}"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    rows = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl")) if l.strip()]
    ms = [r["step_ms"] for r in rows if r.get("step_ms") is not None and r.get("step", 0) > warmup]
    if not ms:
        sys.exit(f"no step times in {out}/metrics.jsonl: {rows[:2]}")
    return statistics.median(ms) / 1000


def run_torch(python, threads, steps, warmup, compile_):
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)}
    args = dict(SHAPE, threads=threads, steps=steps, warmup=warmup + (2 if compile_ else 0), compile=compile_)
    r = subprocess.run([python, "-c", TORCH_RUN, json.dumps(args)], check=True, capture_output=True, text=True, env=env)
    return json.loads(r.stdout.strip().splitlines()[-1])["step_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--braid", default=os.path.join(ROOT, "build/bin/braid"))
    ap.add_argument("--python", default=os.path.join(ROOT, ".venv-bench/bin/python"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    tokens = SHAPE["batch"] * SHAPE["context"]
    with tempfile.TemporaryDirectory() as work:
        config = os.path.join(work, "gpt.toml")
        with open(config, "w") as f:
            f.write(braid_config(make_shard(a.braid, work)))
        print(f"gpt {SHAPE}, {tokens} tokens a step; medians of {a.rounds} alternating rounds "
              f"({a.steps} timed steps each); load average {os.getloadavg()[0]:.1f}")
        for threads in [int(t) for t in a.threads.split(",")]:
            got = {"braid": [], "eager": [], "compile": []}
            for _ in range(a.rounds):
                got["braid"].append(run_braid(a.braid, config, threads, a.steps, a.warmup, work))
                got["eager"].append(run_torch(a.python, threads, a.steps, a.warmup, False))
                if not a.no_compile:
                    got["compile"].append(run_torch(a.python, threads, a.steps, a.warmup, True))
            tps = {k: tokens / statistics.median(v) for k, v in got.items() if v}
            line = f"threads {threads}: braid {tps['braid']:.0f} tok/s, torch eager {tps['eager']:.0f}"
            line += f" ({tps['braid'] / tps['eager']:.2f}x)"
            if "compile" in tps:
                line += f", torch.compile {tps['compile']:.0f} ({tps['braid'] / tps['compile']:.2f}x)"
            print(line, flush=True)


if __name__ == "__main__":
    main()
