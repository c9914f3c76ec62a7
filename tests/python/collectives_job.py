"""One rank of the collectives test (test_distributed.py): every collective
of braid.distributed on tensors, checked against what each rank can compute
alone; `stop` mode: the last rank stops itself (SIGSTOP) before the second
all-reduce and the others report the braid.TimeoutError they get."""
import json
import os
import signal
import sys

import numpy as np

import braid
import braid.distributed as dist

mode = sys.argv[1]
g = dist.init(timeout=float(sys.argv[2]) if len(sys.argv) > 2 else 30.0)
r, n = dist.rank(), dist.world_size()
assert g.launcher == "launch" and g.size == n and 0 <= g.local_rank < n

if mode == "stop":
    t = braid.ones(8)
    dist.all_reduce(t)
    if r == n - 1:
        os.kill(os.getpid(), signal.SIGSTOP)
    try:
        dist.all_reduce(t)
    except braid.TimeoutError as e:
        print(json.dumps({"rank": e.rank, "op": e.op, "seq": e.seq, "peer": e.peer, "missing": e.missing_ranks,
                          "builtin": isinstance(e, TimeoutError), "message": str(e)}), flush=True)
        sys.exit(3)
    sys.exit(0)

expect = sum(range(1, n + 1))
for algorithm in ["auto", "ring", "recursive_doubling", "direct"]:
    t = braid.full([5], r + 1.0)
    dist.all_reduce(t, algorithm=algorithm)
    assert t.tolist() == [expect] * 5, (algorithm, t.tolist())
t = braid.full([3], float(r))
dist.all_reduce(t, op="max")
assert t.tolist() == [n - 1.0] * 3
a = braid.arange(4, dtype=braid.float64) + r * 10
dist.broadcast(a, src=n - 1)
assert a.tolist() == [(n - 1) * 10 + i for i in range(4)]
gathered = dist.all_gather(braid.full([2], float(r)))
assert gathered.shape == (n, 2) and gathered[:, 0].tolist() == [float(i) for i in range(n)]
rs = dist.reduce_scatter(braid.arange(2 * n, dtype=braid.float32))
assert rs.tolist() == [float(n * (2 * r)), float(n * (2 * r + 1))]
red = braid.ones(2, dtype=braid.int64)
dist.reduce(red, dst=0)
if r == 0:
    assert red.tolist() == [n, n]
# Point to point, and an asynchronous all-reduce overlapping it.
work = dist.all_reduce(braid.ones(4), async_op=True)
if r == 0:
    for peer in range(1, n):
        dist.send(braid.tensor(np.full(3, peer, np.float32)), peer, tag=7)
else:
    got = braid.zeros(3)
    dist.recv(got, 0, tag=7)
    assert got.tolist() == [float(r)] * 3
work.wait()
assert work.done()
# A numpy array's memory all-reduced in place through from_numpy.
arr = np.full(4, r + 1.0, np.float32)
dist.all_reduce(braid.from_numpy(arr))
assert (arr == expect).all()
# Sub-groups and the mesh.
even = dist.new_group(r % 2)
t = braid.ones(1)
dist.all_reduce(t, group=even)
assert t.item() == len(range(r % 2, n, 2))
mesh = braid.Mesh(tensor=n)
assert mesh.degree("tensor") == n and mesh.coord("tensor") == r and mesh.group("tensor").size == n
dist.barrier()
# Bad input is refused before it reaches the peers.
try:
    dist.all_reduce(braid.zeros(4, 4)[:, 0])
    raise SystemExit("a strided tensor was accepted")
except braid.ValueError as e:
    assert "contiguous" in str(e)
try:
    dist.all_reduce(braid.zeros(2), op="median")
    raise SystemExit("an unknown op was accepted")
except braid.ValueError:
    pass
print("ok", r, flush=True)
