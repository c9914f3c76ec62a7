"""braid.distributed: this process's rank in the job and the collectives on
tensors (docs/python.md, "Launching and collectives").

Start ranks with ``python -m braid.launch -n 4 script.py`` (or ``mpirun -n 4
python script.py``, ``srun -n 4 python script.py``); ``init()`` reads where the
process stands from the launcher's variables and connects to every peer.
Every collective has a deadline: a rank that never arrives makes the others
raise braid.TimeoutError naming this rank, the op, its sequence number and
the missing ranks (attributes rank, op, seq, peer, missing_ranks).

    import braid, braid.distributed as dist
    dist.init()
    t = braid.ones(4) * dist.rank()
    dist.all_reduce(t, op="sum")
"""

from __future__ import annotations

from . import _braid

_c = _braid.comm

ProcessGroup = _c.ProcessGroup
Communicator = _c.Communicator
Work = _c.Work
Axis = _c.Axis

_group: ProcessGroup | None = None


def init(transport: str = "auto", timeout: float = 300.0, join_timeout: float = 60.0,
         history_dir: str = "") -> ProcessGroup:
    """Joins the job once per process (later calls return the same group).
    transport: auto (shared memory when every rank is on this host, else tcp),
    tcp, shm or mpi; timeout: seconds each collective may take; history_dir:
    where communicators dump their recent collectives when one fails."""
    global _group
    if _group is None:
        _group = ProcessGroup.join(transport=transport, timeout=timeout, join_timeout=join_timeout,
                                   history_dir=history_dir)
    return _group


def is_initialized() -> bool:
    return _group is not None


def destroy() -> None:
    """Leaves the job (the group's connections close once nothing holds them)."""
    global _group
    _group = None


def group() -> ProcessGroup:
    """The process group, joining the job with the defaults on first use."""
    return init() if _group is None else _group


def _comm(g) -> Communicator:
    if g is None:
        return group().comm
    return g.comm if isinstance(g, ProcessGroup) else g


def rank(g=None) -> int:
    return _comm(g).rank


def world_size(g=None) -> int:
    return _comm(g).size


def local_rank() -> int:
    return group().local_rank


def all_reduce(tensor, op: str = "sum", algorithm: str = "auto", group=None, timeout: float | None = None,
               async_op: bool = False):
    """In place over the group: sum, prod, min, max or avg. algorithm: auto (the
    cost model's choice), ring, recursive_doubling, halving_doubling,
    binary_tree, double_binary_tree, binary_blocks, direct, hierarchical,
    shared_memory. async_op=True returns a Work to wait() on."""
    return _comm(group).all_reduce(tensor, op=op, algorithm=algorithm, timeout=timeout, async_op=async_op)


def broadcast(tensor, src: int = 0, group=None, timeout: float | None = None, async_op: bool = False):
    """In place: every rank's tensor becomes rank src's."""
    return _comm(group).broadcast(tensor, root=src, timeout=timeout, async_op=async_op)


def reduce(tensor, dst: int = 0, op: str = "sum", group=None, timeout: float | None = None, async_op: bool = False):
    """The reduction lands on rank dst (the others' tensors are scratch)."""
    return _comm(group).reduce(tensor, root=dst, op=op, timeout=timeout, async_op=async_op)


def all_gather(tensor, out=None, group=None, timeout: float | None = None):
    """Every rank's tensor stacked by rank: [world_size, *tensor.shape]."""
    return _comm(group).all_gather(tensor, out=out, timeout=timeout)


def reduce_scatter(tensor, op: str = "sum", group=None, timeout: float | None = None):
    """Rank r gets block r (the first dim cut in world_size blocks), reduced over the group."""
    return _comm(group).reduce_scatter(tensor, op=op, timeout=timeout)


def send(tensor, dst: int, tag: int = 0, group=None, timeout: float | None = None, async_op: bool = False):
    return _comm(group).send(tensor, peer=dst, tag=tag, timeout=timeout, async_op=async_op)


def recv(tensor, src: int, tag: int = 0, group=None, timeout: float | None = None, async_op: bool = False):
    """Receives exactly tensor's size from src into tensor."""
    return _comm(group).recv(tensor, peer=src, tag=tag, timeout=timeout, async_op=async_op)


def barrier(group=None, timeout: float | None = None) -> None:
    _comm(group).barrier(timeout=timeout)


def new_group(color: int, key: int | None = None, group=None) -> Communicator:
    """Collective: ranks calling with the same color >= 0 form a communicator
    (ordered by key, then rank); a negative color gets none."""
    c = _comm(group)
    return c.split(color, c.rank if key is None else key)


class Mesh:
    """The world's ranks on a data x context x tensor x pipeline grid, one
    communicator per axis (collective over the world: every rank builds the
    same shape)."""

    def __init__(self, data: int = 0, tensor: int = 1, pipeline: int = 1, group=None, context: int = 1):
        self._mesh = _c.Mesh.build(_comm(group), data=data, tensor=tensor, pipeline=pipeline, context=context)

    @property
    def rank(self) -> int:
        return self._mesh.rank

    @property
    def size(self) -> int:
        return self._mesh.size

    def degree(self, axis: str) -> int:
        return self._mesh.degree(Axis.__members__[axis])

    def coord(self, axis: str) -> int:
        return self._mesh.coord(Axis.__members__[axis])

    def group(self, axis: str) -> Communicator:
        """The communicator of the ranks differing from this one only along axis."""
        return self._mesh.group(Axis.__members__[axis])

    def world_rank(self, data: int, tensor: int, pipeline: int, context: int = 0) -> int:
        return self._mesh.world_rank(data, tensor, pipeline, context)

    def describe(self) -> str:
        return self._mesh.describe()

    def __repr__(self) -> str:
        return f"braid.Mesh({self.describe()})"
