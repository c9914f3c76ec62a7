"""PyTorch 2.x's tensor parallelism with sequence parallelism on the CPU over gloo, as a peer
for bench/parallel/tp_overlap.sh: the gpt shape of that bench (4 pre-norm blocks of width 256,
4 heads, 256 tokens, batch 4, vocabulary 300, 1 thread a rank) on 2 ranks over gloo's tcp on
loopback, parallelised with torch.distributed.tensor.parallel as TorchTitan's llama plan does
(ColwiseParallel q/k/v and fc1, RowwiseParallel(output_layouts=Shard(1)) out and fc2,
SequenceParallel norms, the embedding's output sharded on the sequence, the head gathering).
Prints the median step (ms) after the first two of STEPS, or the error where it does not run.

  .venv-bench/bin/python bench/parallel/torch_sequence_parallel.py [STEPS] [sp|tp]
"""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

D, H, T, B, V, L = 256, 4, 256, 4, 300, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(self, x):
        h = self.ln1(x)
        b, t, _ = h.shape
        q, k, v = (p(h).view(b, t, -1, D // H).transpose(1, 2) for p in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, -1)
        x = x + self.o(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(V, D), nn.Parameter(torch.zeros(T, D))
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.norm, self.head = nn.LayerNorm(D), nn.Linear(D, V, bias=False)

    def forward(self, x):
        h = self.tok(x) + self.pos
        for blk in self.blocks:
            h = blk(h)
        return self.head(self.norm(h))


def run(rank, world, steps, mode, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel, parallelize_module)
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)
    model = Gpt()
    sp = mode == "sp"
    if sp:
        # Activations between blocks are DTensors sharded on the sequence (residuals add DTensors);
        # each split region gathers its input and reduce-scatters its output.
        colwise = dict(input_layouts=Shard(1))
        for blk in model.blocks:
            parallelize_module(blk, mesh, {
                "ln1": SequenceParallel(), "ln2": SequenceParallel(),
                "q": ColwiseParallel(**colwise), "k": ColwiseParallel(**colwise), "v": ColwiseParallel(**colwise),
                "o": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
                "fc1": ColwiseParallel(**colwise),
                "fc2": RowwiseParallel(output_layouts=Shard(1), use_local_output=False)})
        parallelize_module(model.blocks[0], mesh, PrepareModuleInput(input_layouts=(Replicate(),),
                                                                      desired_input_layouts=(Shard(1),)))
        parallelize_module(model, mesh, {"norm": SequenceParallel(),
                                         "head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())})
    else:
        for blk in model.blocks:
            parallelize_module(blk, mesh, {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(),
                                           "o": RowwiseParallel(), "fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
        parallelize_module(model, mesh, {"head": ColwiseParallel(output_layouts=Replicate())})
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    times = []
    for _ in range(steps):
        x = torch.randint(0, V, (B, T), generator=g)
        y = torch.randint(0, V, (B, T), generator=g)
        start = time.perf_counter()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        times.append(1000 * (time.perf_counter() - start))
    if rank == 0:
        print(f"torch {torch.__version__} TP {world} ({mode}) over gloo: median step {statistics.median(times[2:]):.0f} ms "
              f"(steps {[round(t) for t in times]})")
    dist.destroy_process_group()


if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    mode = sys.argv[2] if len(sys.argv) > 2 else "sp"
    try:
        mp.spawn(run, args=(2, steps, mode, 29833), nprocs=2)
    except Exception as e:  # where it does not run on this machine, say why
        print(f"torch {torch.__version__} TP 2 ({mode}) over gloo does not run: {str(e).strip().splitlines()[-1]}")
        sys.exit(1)
