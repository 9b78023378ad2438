"""Running a partitioned artifact on many processes: launch environment, communicators, safety.

Under torchrun each process has `RANK`, `WORLD_SIZE` and `LOCAL_RANK`. `sdc.runtime.load` then joins
the default process group (gloo on the CPU, NCCL on CUDA; c10d's env:// rendezvous that torchrun
sets up), builds one process group per set of mesh axes the plan's collectives use, loads its own
rank's plan and weights, and runs. The mesh conventions (rank numbering, group order) are in
sdc/dialect/mesh.py.

`TorchCommunicator` runs the collectives of the sdc dialect (`env.comm.all_reduce(x, axes, ...)`
and so on) over those groups. Two safety nets:

- `SDC_CHECK_COLLECTIVES=1`: before each collective the ranks of its group compare the op, the
  operand's shape and its dtype; a mismatch is an `SdcError` naming the op and what each rank has,
  never a silent truncation.
- a timeout (`SDC_COLLECTIVE_TIMEOUT` seconds, default 300, or `load(..., timeout=)`): a collective
  that does not complete in time ends the process with a clear error (exit status 1), so every
  rank exits instead of hanging; a peer that dies makes its collectives fail at once, with an error
  naming the op.

On CUDA, collectives run on a stream of their own: the compute stream is recorded before each, the
collective's stream waits for it, and the first op that reads the result waits for the
collective's event, so communication overlaps the compute that does not depend on it.
"""

from __future__ import annotations

import atexit
import datetime
import os
import sys
import threading
import time
import zlib
from dataclasses import dataclass
from typing import Sequence

import torch

from sdc import dtypes
from sdc.diagnostics import SdcError
from sdc.dialect.mesh import Mesh, Sharding

TIMEOUT_ENV = "SDC_COLLECTIVE_TIMEOUT"
CHECK_ENV = "SDC_CHECK_COLLECTIVES"
DEFAULT_TIMEOUT = 300.0


@dataclass(frozen=True)
class LaunchEnv:
    rank: int
    world_size: int
    local_rank: int


def launch_env() -> LaunchEnv | None:
    """RANK / WORLD_SIZE / LOCAL_RANK as torchrun sets them; None outside a launcher."""
    if "WORLD_SIZE" not in os.environ:
        return None
    try:
        world = int(os.environ["WORLD_SIZE"])
        rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_RANK", str(rank)))
    except ValueError:
        raise SdcError(f"RANK/WORLD_SIZE/LOCAL_RANK must be integers, found RANK={os.environ.get('RANK')!r} "
                       f"WORLD_SIZE={os.environ.get('WORLD_SIZE')!r}") from None
    if world < 1 or not 0 <= rank < world:
        raise SdcError(f"bad launch environment: RANK={rank}, WORLD_SIZE={world}")
    return LaunchEnv(rank, world, local)


def default_timeout() -> float:
    text = os.environ.get(TIMEOUT_ENV)
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        raise SdcError(f"{TIMEOUT_ENV} must be a number of seconds, found {text!r}") from None
    if value <= 0:
        raise SdcError(f"{TIMEOUT_ENV} must be positive, found {text!r}")
    return value


def check_requested() -> bool:
    return os.environ.get(CHECK_ENV, "").strip().lower() in ("1", "true", "yes", "on")


# ---------------------------------------------------------------- the communicator interface


class Communicator:
    """The collectives of the sdc dialect for one device of a mesh. Subclasses move the data;
    this base class knows the mesh (who is in which group, in which order) and does the local ones."""

    def __init__(self, mesh: Mesh, rank: int):
        self.mesh = mesh
        self.rank = rank
        self.where = ("", "", "")  # (op, location, step) of the op about to run, for messages: step is
        # "collective c5" or "kernel k3" (sdc.runtime.executor sets it)

    @property
    def world_size(self) -> int:
        return self.mesh.world_size

    def index(self, axes: Sequence[str]) -> int:
        return self.mesh.index_in_group(self.rank, axes)

    def all_slice(self, x: torch.Tensor, axes: Sequence[str], axis: int) -> torch.Tensor:
        n = self.mesh.size(axes)
        axis = axis % x.dim()
        size = x.shape[axis]
        if size % n:
            raise SdcError(f"{self.describe()}: dim {axis} (= {size}) cannot be split {n} ways over mesh axes "
                           f"{', '.join(axes)}")
        block = size // n
        return x.narrow(axis, self.index(axes) * block, block)

    def describe(self) -> str:
        op, loc, step = self.where
        text = f"'sdc.{op}'" if op else "a collective"
        if step:
            text += f" ({step}"
            text += f", at {loc})" if loc else ")"
        elif loc:
            text += f" at {loc}"
        return text

    def ready(self, tensors) -> None:
        """Make the current stream wait for collectives whose results `tensors` are (CUDA only)."""

    # ------------------------------------------------------------ inputs and outputs

    def shard(self, t: torch.Tensor, sharding: Sharding, name: str) -> torch.Tensor:
        """This device's block of a global input."""
        for d, axes in enumerate(sharding.dims):
            if not axes:
                continue
            n = self.mesh.size(axes)
            if t.shape[d] % n:
                raise SdcError(f"input '{name}' dim {d} (= {t.shape[d]}) must be a multiple of {n}: it is split "
                               f"over mesh axis {', '.join(axes)}")
            block = t.shape[d] // n
            t = t.narrow(d, self.index(axes) * block, block)
        return t

    def assemble(self, t: torch.Tensor, sharding: Sharding, name: str) -> torch.Tensor:
        """The whole output from every device's block."""
        self.where = ("all_gather", f"output '{name}'", "")
        if sharding.partial:
            t = self.all_reduce(t, list(sharding.partial))
        for d in reversed(range(sharding.rank)):
            if sharding.dims[d]:
                t = self.all_gather(t, list(sharding.dims[d]), d)
        return t


# ---------------------------------------------------------------- torch.distributed


_REDUCE = {"sum": "SUM", "max": "MAX", "min": "MIN", "prod": "PRODUCT", "avg": "SUM"}


class TorchCommunicator(Communicator):
    """Collectives over torch.distributed process groups, one per set of mesh axes."""

    def __init__(self, mesh: Mesh, rank: int, device: torch.device, axis_sets: Sequence[Sequence[str]],
                 timeout: float, check: bool = False):
        import torch.distributed as dist

        super().__init__(mesh, rank)
        self.dist = dist
        self.device = device
        self.timeout = timeout
        self.check = check
        self.backend = dist.get_backend()
        self.groups: dict[frozenset, object] = {}
        self.members: dict[frozenset, list[int]] = {}  # the torch group's ranks, in its own (sorted) order
        wanted = {frozenset(a) for a in axis_sets if a} | {frozenset(mesh.axes)}
        for key in sorted(wanted, key=lambda k: tuple(a for a in mesh.axes if a in k)):
            ordered = [a for a in mesh.axes if a in key]
            for members in mesh.groups(ordered):
                group = dist.new_group(ranks=sorted(members), timeout=datetime.timedelta(seconds=timeout + 30))
                if rank in members:
                    self.groups[key], self.members[key] = group, sorted(members)
        self.watchdog = Watchdog(timeout, rank)
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.pending: dict[int, object] = {}

    # ------------------------------------------------------------ plumbing

    def _group(self, axes: Sequence[str]):
        return self.groups[frozenset(axes)], self.members[frozenset(axes)]

    def _torch_index(self, axes: Sequence[str], listed_index: int) -> int:
        """The torch group rank of the member at `listed_index` in the order `axes` lists."""
        _, members = self._group(axes)
        return members.index(self.mesh.group(self.rank, axes)[listed_index])

    def _run(self, kind: str, axes: Sequence[str], x: torch.Tensor, body):
        """Run a collective's body with the checks, the timeout and (CUDA) its own stream."""
        if self.mesh.size(axes) == 1:
            return body()
        if self.check:
            self._check(kind, axes, x)
        what = f"{self.describe()} over mesh axes {', '.join(axes)}"
        with self.watchdog.deadline(what):
            try:
                if self.stream is None:
                    return body()
                compute = torch.cuda.current_stream(self.device)
                self.stream.wait_stream(compute)
                with torch.cuda.stream(self.stream):
                    out = body()
                x.record_stream(self.stream)
                out.record_stream(compute)
                event = torch.cuda.Event()
                event.record(self.stream)
                self.pending[out.data_ptr()] = event
                return out
            except SdcError:
                raise
            except Exception as e:
                raise SdcError(f"rank {self.rank}: {what} failed: {_short(e)} (did another rank exit or fail?)") from e

    def ready(self, tensors) -> None:
        if not self.pending:
            return
        compute = torch.cuda.current_stream(self.device)
        for t in tensors:
            if isinstance(t, torch.Tensor):
                event = self.pending.pop(t.data_ptr(), None)
                if event is not None:
                    compute.wait_event(event)

    def synchronize(self) -> None:
        """Wait for every outstanding collective (CUDA), under the timeout."""
        if self.stream is None:
            return
        with self.watchdog.deadline(f"rank {self.rank}: the end of the run"):
            torch.cuda.current_stream(self.device).wait_stream(self.stream)
            torch.cuda.synchronize(self.device)
        self.pending.clear()

    def _check(self, kind: str, axes: Sequence[str], x: torch.Tensor) -> None:
        """Every rank of the group shows the op and its operand's shape and dtype; all must agree."""
        op, loc, kernel = self.where
        code = zlib.crc32(f"{op}|{kind}|{loc}|{kernel}".encode()) & 0x7FFFFFFF
        meta = [code, _DTYPE_CODES.get(x.dtype, 99), x.dim()] + list(x.shape)
        meta = (meta + [-1] * 16)[:16]
        mine = torch.tensor(meta, dtype=torch.int64, device=self.device)
        group, members = self._group(axes)
        parts = [torch.empty_like(mine) for _ in members]
        with self.watchdog.deadline(f"the check before {self.describe()}"):
            try:
                self.dist.all_gather(parts, mine, group=group)
            except Exception as e:
                raise SdcError(f"rank {self.rank}: checking {self.describe()} failed: {_short(e)}") from e
        rows = [p.cpu().tolist() for p in parts]
        if all(r == rows[0] for r in rows):
            return
        lines = []
        for member, row in zip(members, rows):
            if row[0] != code:
                lines.append(f"rank {member} is at another collective")
            else:
                lines.append(f"rank {member} has {_DTYPE_NAMES.get(row[1], '?')}{row[3:3 + row[2]]}")
        raise SdcError(f"{self.describe()} over mesh axes {', '.join(axes)}: the ranks disagree on the operand: "
                       + "; ".join(lines))

    # ------------------------------------------------------------ the collectives

    def all_reduce(self, x, axes, reduction="sum"):
        axes = list(axes)

        def body():
            group, _ = self._group(axes)
            y = x.clone()
            self.dist.all_reduce(y, op=getattr(self.dist.ReduceOp, _REDUCE[reduction]), group=group)
            if reduction == "avg":
                n = self.mesh.size(axes)
                y = y / n if y.is_floating_point() else torch.div(y, n, rounding_mode="floor")
            return y

        return self._run("all_reduce", axes, x, body)

    def all_gather(self, x, axes, axis=0):
        axes = list(axes)
        axis = axis % x.dim()

        def body():
            group, members = self._group(axes)
            x_c = x.contiguous()
            parts = [torch.empty_like(x_c) for _ in members]
            self.dist.all_gather(parts, x_c, group=group)
            ordered = [parts[self._torch_index(axes, k)] for k in range(len(members))]
            return torch.cat(ordered, dim=axis)

        return self._run("all_gather", axes, x, body)

    def reduce_scatter(self, x, axes, axis=0, reduction="sum"):
        axes = list(axes)
        axis = axis % x.dim()
        n = self.mesh.size(axes)
        if x.shape[axis] % n:
            raise SdcError(f"{self.describe()}: dim {axis} (= {x.shape[axis]}) cannot be split {n} ways")
        if self.backend != "nccl":  # gloo has no reduce_scatter: reduce, then keep this rank's block
            return self.all_slice(self.all_reduce(x, axes, reduction), axes, axis).contiguous()

        def body():
            group, members = self._group(axes)
            chunks = list(x.chunk(n, dim=axis))
            inputs = [None] * n
            for k in range(n):
                inputs[self._torch_index(axes, k)] = chunks[k].contiguous()
            out = torch.empty_like(inputs[0])
            self.dist.reduce_scatter(out, inputs, op=getattr(self.dist.ReduceOp, _REDUCE[reduction]), group=group)
            if reduction == "avg":
                out = out / n
            return out

        return self._run("reduce_scatter", axes, x, body)

    def all_to_all(self, x, axes, split_axis=0, concat_axis=0):
        axes = list(axes)
        split_axis, concat_axis = split_axis % x.dim(), concat_axis % x.dim()
        n = self.mesh.size(axes)
        if x.shape[split_axis] % n:
            raise SdcError(f"{self.describe()}: dim {split_axis} (= {x.shape[split_axis]}) cannot be split {n} ways")

        def body():
            group, members = self._group(axes)
            chunks = list(x.chunk(n, dim=split_axis))
            sends = [None] * n
            for k in range(n):
                sends[self._torch_index(axes, k)] = chunks[k].contiguous()
            received = [torch.empty_like(sends[0]) for _ in range(n)]
            if self.backend == "gloo":
                _gloo_all_to_all(self.dist, received, sends, group, members, self.rank)
            else:
                self.dist.all_to_all(received, sends, group=group)
            ordered = [received[self._torch_index(axes, k)] for k in range(n)]
            return torch.cat(ordered, dim=concat_axis)

        return self._run("all_to_all", axes, x, body)

    def broadcast(self, x, axes, root=0):
        axes = list(axes)

        def body():
            group, _ = self._group(axes)
            y = x.clone().contiguous()
            self.dist.broadcast(y, src=self.mesh.group(self.rank, axes)[root], group=group)
            return y

        return self._run("broadcast_from", axes, x, body)

    def send(self, x, axes, peer=1):
        axes = list(axes)
        members = self.mesh.group(self.rank, axes)
        dst = members[(self.index(axes) + peer) % len(members)]
        with self.watchdog.deadline(f"{self.describe()} (send to rank {dst})"):
            self.dist.send(x.contiguous(), dst=dst)

    def recv(self, axes, peer=1, spec=None):
        axes = list(axes)
        if spec is None or any(not isinstance(d, int) for d in spec.shape):
            raise SdcError(f"{self.describe()}: sdc.recv needs a static result type, found {spec}")
        members = self.mesh.group(self.rank, axes)
        src = members[(self.index(axes) - peer) % len(members)]
        out = torch.empty(tuple(spec.shape), dtype=dtypes.to_torch(spec.dtype), device=self.device)
        with self.watchdog.deadline(f"{self.describe()} (receive from rank {src})"):
            self.dist.recv(out, src=src)
        return out


def _gloo_all_to_all(dist, received, sends, group, members, rank) -> None:
    """all_to_all from point-to-point sends (gloo has no all_to_all for lists of tensors)."""
    me = members.index(rank)
    n = len(members)
    received[me].copy_(sends[me])
    requests = []
    for step in range(1, n):
        dst, src = members[(me + step) % n], members[(me - step) % n]
        requests.append(dist.isend(sends[members.index(dst)], dst=dst, group=group))
        requests.append(dist.irecv(received[members.index(src)], src=src, group=group))
    for r in requests:
        r.wait()


def _short(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__


_DTYPE_CODES = {torch.float32: 1, torch.float16: 2, torch.bfloat16: 3, torch.float64: 4, torch.int64: 5,
                torch.int32: 6, torch.int16: 7, torch.int8: 8, torch.uint8: 9, torch.bool: 10}
_DTYPE_NAMES = {code: dtypes.from_torch(t) for t, code in _DTYPE_CODES.items()}


# ---------------------------------------------------------------- the timeout


class Watchdog:
    """Ends the process with a clear error when a collective is not done within `timeout` seconds.

    A collective blocked in the backend cannot be interrupted from Python; exiting is the only way
    not to hang, and a nonzero exit makes torchrun stop the other ranks too.
    """

    def __init__(self, timeout: float, rank: int):
        self.timeout = timeout
        self.rank = rank
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._deadline: tuple[float, str] | None = None
        self._thread: threading.Thread | None = None

    def deadline(self, what: str) -> "_Deadline":
        return _Deadline(self, what)

    def _arm(self, what: str) -> None:
        with self._lock:
            self._deadline = (time.monotonic() + self.timeout, what)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="sdc-collective-watchdog", daemon=True)
                self._thread.start()
        self._wake.set()

    def _disarm(self) -> None:
        with self._lock:
            self._deadline = None

    def _watch(self) -> None:
        while True:
            with self._lock:
                deadline = self._deadline
            if deadline is None:  # idle until the next collective
                self._wake.wait()
                self._wake.clear()
                continue
            left = deadline[0] - time.monotonic()
            if left > 0:
                self._wake.wait(min(left, 1.0))
                self._wake.clear()
                continue
            with self._lock:
                if self._deadline is not deadline:
                    continue
            sys.stderr.write(f"error: rank {self.rank}: {deadline[1]} did not complete within {self.timeout:g} s "
                             f"(another rank may have died, hung or diverged); exiting (set {TIMEOUT_ENV} to "
                             "wait longer)\n")
            sys.stderr.flush()
            os._exit(1)


class _Deadline:
    def __init__(self, dog: Watchdog, what: str):
        self.dog, self.what = dog, what

    def __enter__(self):
        self.dog._arm(self.what)
        return self

    def __exit__(self, *exc):
        self.dog._disarm()
        return False


# ---------------------------------------------------------------- joining the process group


def join(world_size: int, device: torch.device, timeout: float) -> LaunchEnv:
    """Join the default process group of a torchrun launch (or check the one already joined)."""
    import torch.distributed as dist

    env = launch_env()
    if env is None:
        raise SdcError(f"this artifact runs on {world_size} devices: launch it with torchrun "
                       f"--nproc-per-node={world_size} (WORLD_SIZE is not set)")
    if env.world_size != world_size:
        raise SdcError(f"this artifact is compiled for {world_size} devices but this launch has "
                       f"{env.world_size} (WORLD_SIZE={env.world_size}): launch it with --nproc-per-node={world_size}")
    if not dist.is_available():
        raise SdcError("torch.distributed is not available in this torch build")
    backend = "nccl" if device.type == "cuda" else "gloo"
    if dist.is_initialized():
        if dist.get_world_size() != world_size:
            raise SdcError(f"the process group has {dist.get_world_size()} ranks, the artifact needs {world_size}")
        if dist.get_backend() != backend:
            raise SdcError(f"the process group uses {dist.get_backend()}, a {device.type} run needs {backend}")
        return env
    kwargs = {}
    if device.type == "cuda":
        kwargs["device_id"] = device
    try:
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout + 30), **kwargs)
    except Exception as e:
        raise SdcError(f"rank {env.rank}: cannot join the {backend} process group: {_short(e)}") from e
    atexit.register(_leave, env.rank, timeout)
    return env


FAILED = threading.Event()  # set when a run failed on this rank: its peers may be stuck, so no barrier at exit


def _leave(rank: int, timeout: float) -> None:
    """At exit: wait for every rank to be done communicating, then leave the process group (a process
    that exits while its peers still talk to it can take them down with it)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return
    try:
        if not FAILED.is_set():
            with Watchdog(min(timeout, 60.0), rank).deadline(f"rank {rank}: the barrier at exit"):
                dist.barrier()
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001 (exiting anyway)
        pass


# ---------------------------------------------------------------- a mesh in one process


class SimulatedWorld:
    """Every rank of a mesh as a thread of this process, exchanging tensors through memory.

    For tests and debugging: `simulate(path, inputs)` runs a partitioned artifact on all its ranks
    without launching processes. A rank that fails breaks the barrier, so the others fail too.
    """

    def __init__(self, mesh: Mesh, timeout: float = 60.0):
        self.mesh = mesh
        self.barrier = threading.Barrier(mesh.world_size, timeout=timeout)
        self.slots: list = [None] * mesh.world_size

    def communicators(self) -> list["SimulatedCommunicator"]:
        return [SimulatedCommunicator(self, r) for r in range(self.mesh.world_size)]

    def exchange(self, rank: int, x) -> list:
        self.slots[rank] = x
        self.barrier.wait()
        seen = list(self.slots)
        self.barrier.wait()
        return seen


class SimulatedCommunicator(Communicator):
    def __init__(self, world: SimulatedWorld, rank: int):
        super().__init__(world.mesh, rank)
        self.world = world

    def _members(self, axes) -> list[int]:
        return self.mesh.group(self.rank, list(axes))

    def _gather(self, x, axes) -> list[torch.Tensor]:
        seen = self.world.exchange(self.rank, x)
        return [seen[m] for m in self._members(axes)]

    def all_reduce(self, x, axes, reduction="sum"):
        parts = self._gather(x, axes)
        stacked = torch.stack(parts)
        if reduction == "sum":
            return stacked.sum(0).to(x.dtype)
        if reduction == "max":
            return stacked.amax(0)
        if reduction == "min":
            return stacked.amin(0)
        if reduction == "prod":
            return stacked.prod(0).to(x.dtype)
        return stacked.sum(0) / len(parts) if x.is_floating_point() else stacked.sum(0) // len(parts)

    def all_gather(self, x, axes, axis=0):
        return torch.cat(self._gather(x, axes), dim=axis % x.dim())

    def reduce_scatter(self, x, axes, axis=0, reduction="sum"):
        return self.all_slice(self.all_reduce(x, axes, reduction), axes, axis).contiguous()

    def all_to_all(self, x, axes, split_axis=0, concat_axis=0):
        parts = self._gather(x, axes)
        n = len(parts)
        me = self.index(axes)
        return torch.cat([p.chunk(n, dim=split_axis % x.dim())[me] for p in parts], dim=concat_axis % x.dim())

    def broadcast(self, x, axes, root=0):
        return self._gather(x, axes)[root].clone()


def simulate(path, args: Sequence = (), named: dict | None = None, timeout: float = 60.0) -> list[list]:
    """Run a partitioned artifact on every rank of its mesh, as threads of this process; returns each
    rank's outputs (every rank returns the whole outputs)."""
    from sdc.runtime import load
    from sdc.runtime.artifact import read_artifact

    artifact = read_artifact(path)
    world = SimulatedWorld(Mesh.of(artifact.manifest["mesh"]), timeout)
    exes = [load(path, comm=c) for c in world.communicators()]
    results: list = [None] * len(exes)
    errors: list = [None] * len(exes)

    def work(r: int) -> None:
        try:
            results[r] = exes[r](*args, **(named or {}))
        except BaseException as e:  # noqa: BLE001 (re-raised below, in the caller's thread)
            errors[r] = e
            world.barrier.abort()

    threads = [threading.Thread(target=work, args=(r,)) for r in range(len(exes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = next((e for e in errors if e is not None and not isinstance(e, threading.BrokenBarrierError)), None)
    if first is None:
        first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return results
