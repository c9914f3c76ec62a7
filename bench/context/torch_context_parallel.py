# PyTorch 2.x context parallelism (torch.distributed.tensor.experimental.context_parallel) on the CPU over
# gloo, the peer of ring_overlap.cc on the same shapes:
#   .venv-bench/bin/torchrun --nproc-per-node 2 bench/context/torch_context_parallel.py [T]
# Prints, per rank, the median forward + backward time, or why it failed (PyTorch 2.15: the CPU
# attention op has no sharding strategy, so it does not run on the CPU).
import sys, time, torch, torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.experimental import context_parallel
torch.set_num_threads(1)
dist.init_process_group("gloo")
r, n = dist.get_rank(), dist.get_world_size()
T = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
B, H, D = 1, 4, 64
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(B, H, T, D, generator=g) for _ in range(3))
mesh = init_device_mesh("cpu", (n,))
out = None
try:
    times = []
    for rep in range(4):
        qs, ks, vs = q.clone(), k.clone(), v.clone()  # sharded in place by context_parallel
        with context_parallel(mesh, buffers=[qs, ks, vs], buffer_seq_dims=[2, 2, 2]):
            ql, kl, vl = (x.detach().clone().requires_grad_(True) for x in (qs, ks, vs))
            dist.barrier(); t0 = time.perf_counter()
            out = F.scaled_dot_product_attention(ql, kl, vl, is_causal=True)
            out.sum().backward()
            times.append(time.perf_counter() - t0)
    print(f"rank {r}: ran, local out {tuple(out.shape)}, median fwd+bwd {sorted(times[1:])[1]*1e3:.0f} ms", flush=True)
except Exception as e:
    print(f"rank {r}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
dist.destroy_process_group()
