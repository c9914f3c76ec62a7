#!/usr/bin/python3
"""PyTorch side of bench/dp/dp_vs_pytorch: the same MLP / CNN as braid's
example configs, SGD momentum 0.9 lr 0.05, trained on synthetic Fashion-MNIST
shaped data, 1 process or N processes under DDP (gloo), 1 thread each.
Prints one JSON line: {"model", "world", "batch", "samples_per_s"}."""
import argparse, json, os, sys, time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


def make_model(name):
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                             nn.Linear(256, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(1600, 128), nn.ReLU(), nn.Linear(128, 10))


def worker(rank, args, port, out):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = make_model(args.model)
    if args.world > 1:
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
        dist.init_process_group("gloo", rank=rank, world_size=args.world)
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(rank)
    x = torch.rand(args.steps, args.batch, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (args.steps, args.batch), generator=g)
    for i in range(args.steps):
        if i == args.warmup:
            if args.world > 1:
                dist.barrier()
            start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x[i]), y[i]).backward()
        opt.step()
    if args.world > 1:
        dist.barrier()
    elapsed = time.perf_counter() - start
    if rank == 0:
        out.put((args.steps - args.warmup) * args.batch * args.world / elapsed)
    if args.world > 1:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--world", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--port", type=int, default=29611)
    args = p.parse_args()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, args, args.port, out)) for r in range(args.world)]
    for pr in procs:
        pr.start()
    rate = out.get(timeout=600)
    for pr in procs:
        pr.join(timeout=60)
    print(json.dumps({"model": args.model, "world": args.world, "batch": args.batch, "samples_per_s": rate}))


if __name__ == "__main__":
    sys.exit(main())
