"""sdc's runtime: load a compiled artifact and run it. Imports neither MLIR nor any frontend.

    exe = sdc.runtime.load("model.sdc")
    (y,) = exe(x)                 # or exe(input=x); numpy in -> numpy out, torch in -> torch out
    exe.inputs, exe.outputs       # [TensorInfo(name, dtype, shape)], shapes with symbolic dims

See docs/runtime.md.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sdc.diagnostics import SdcError
from sdc.runtime.artifact import Artifact, WeightInfo, read_artifact
from sdc.runtime.format import MANIFEST, PLAN
from sdc.runtime.signature import Guard, Signature, TensorInfo, parse_guard
from sdc.target import get_target, supported_targets

# torch, and the executor that needs it, load on first use: `sdc inspect` reads an artifact without them.
if TYPE_CHECKING:
    import torch
else:
    from sdc.lazy import lazy_import

    torch = lazy_import("torch")

__all__ = ["load", "Executable", "TensorInfo", "Guard", "WeightInfo", "read_artifact"]


class Executable:
    """A loaded artifact, callable on inputs. Build it with `sdc.runtime.load`."""

    def __init__(self, artifact: Artifact, device: torch.device, rank: int = 0, comm: Any = None):
        self.artifact = artifact
        self.comm = comm  # the collectives of a partitioned artifact (sdc.runtime.distributed)
        self.path = artifact.root
        self.device = device
        self.rank = rank
        manifest = artifact.manifest
        self.target: str = manifest["target"]
        self.world_size: int = manifest["world_size"]
        entry = manifest["entry"]
        self.inputs = [_info(t) for t in entry["inputs"]]
        self.outputs = [_info(t) for t in entry["outputs"]]
        try:
            self.guards = [parse_guard(g["condition"], g.get("message", "")) for g in entry["guards"]]
            self._signature = Signature(self.inputs, self.outputs, self.guards)
        except ValueError as e:
            raise artifact.error(MANIFEST, str(e)) from None
        self.keeps_pages = False  # whether freed intermediates stay mapped (sdc/runtime/host_memory.py)
        if device.type == "cpu":  # a call's intermediates reuse the pages the last call faulted in
            from sdc.runtime.host_memory import keep_freed_pages

            self.keeps_pages = keep_freed_pages()
        # On cuda one asynchronous copy: preparing the plan and compiling the kernels below overlap it.
        weights = artifact.load_weights(rank, device)
        self._shardings = _io_shardings(artifact, len(self.inputs), len(self.outputs)) if comm is not None else None
        from sdc.runtime.executor import ReferenceExecutor  # here, not at the top: it imports torch

        try:
            # Tensors made while preparing (streams, buffers) go where the weights are.
            with torch.device(device) if device.type != "cpu" else contextlib.nullcontext():
                program = artifact.program(rank)
                self._executor = ReferenceExecutor(program, weights, manifest["mesh"],
                                                   lambda msg: artifact.error(PLAN, msg), comm=comm, device=device,
                                                   kernels=_kernel_sources(artifact),
                                                   tf32=(manifest.get("compile_options") or {}).get("precision") == "tf32")
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            raise artifact.error(PLAN, f"is malformed ({type(e).__name__}: {e})") from None
        self._weight_storages = {_storage(t) for t in weights.values()}
        self.kernel_count = self._executor.kernel_count
        # What ran per launch step: the planned kernel or its fallback, counted (sdc/runtime/counters.py).
        self.counters = self._executor.counters
        from sdc.runtime.launch.triton import prewarm

        # the generated kernels compile now, in parallel, not one by one in the first call (cuda only)
        self.kernels_prewarmed = prewarm(self._executor.program, program, device)
        if device.type == "cuda":  # the weights' copy is on the current stream; the plan's other streams read them
            torch.cuda.current_stream(device).synchronize()
        # Something alive as long as this executable (sdc.compile's temporary directory).
        self._keepalive: Any = None
        # Set a `sdc.runtime.profile.Profiler` to time each launch and collective step of later calls.
        self.profiler: Any = None
        # Calls from several Python threads run one at a time: a call's plan reuses buffers of its own
        # between calls (a C segment's kept values, the arena, a CUDA graph's static inputs) and sets
        # torch's process-wide thread count per op (sdc/runtime/gate.py).
        self._one_call = _OneCall(self.path)

    def __call__(self, *args: Any, **named: Any) -> list:
        """Run on inputs given by position and/or by name; returns the outputs, in order, as a list.

        numpy arrays in give numpy arrays out (bf16 widened to f32); if any input is a torch
        tensor the outputs are torch tensors (made under `torch.inference_mode()`).
        """
        with self._one_call:
            if self.comm is None:
                bound = self._signature.bind(args, named, self.device)
                outs = self._executor.run(self._on_device(bound.tensors), bound.symbols, self.profiler)
            else:
                try:
                    bound, outs = self._run_distributed(args, named)
                except BaseException:
                    from sdc.runtime.distributed import FAILED

                    FAILED.set()  # the other ranks may be waiting in a collective: no barrier at exit
                    raise
        # An output may alias a weight or an input (identity-like ops): give the caller its own copy.
        weights, given, taken = self._weight_storages, {_storage(t) for t in bound.tensors}, set()
        result = []
        for t in outs:
            key = _storage(t)
            if key in weights or key in given or key in taken:
                t = t.clone()
            else:
                taken.add(key)
            result.append(t if bound.as_torch else _to_numpy(t))
        return result

    def static_inputs(self, *args: Any, **named: Any) -> list | None:
        """The CUDA graph's own input buffers for inputs like these (same shapes and dtypes; their
        values are copied in), capturing the graph now if it was not yet. Fill them in place and call
        `exe(*buffers)`: a replay then copies no input (sdc/runtime/cuda_graphs.py). None when this
        executable's calls are not captured (`exe._executor.graph_reason` says why)."""
        graphs = self._executor.graphs
        if graphs is None or self.comm is not None:
            return None
        with self._one_call:
            bound = self._signature.bind(args, named, self.device)
            return graphs.static_inputs(self._on_device(bound.tensors), bound.symbols)

    def _on_device(self, tensors: list) -> list:
        device = self.device
        return tensors if device.type == "cpu" else [t if t.device == device else t.to(device) for t in tensors]

    def _run_distributed(self, args, named):
        """Bind the global inputs, keep this rank's blocks, run, and assemble the global outputs."""
        comm = self.comm
        bound = self._signature.bind(args, named, self.device)
        ins, outs_sharding = self._shardings
        tensors = [comm.shard(t, s, info.name) if s is not None else t
                   for t, s, info in zip(self._on_device(bound.tensors), ins, self.inputs)]
        outs = self._executor.run(tensors, bound.symbols, self.profiler)
        outs = [comm.assemble(t, s, info.name) if s is not None else t
                for t, s, info in zip(outs, outs_sharding, self.outputs)]
        if hasattr(comm, "synchronize"):
            comm.synchronize()
        return bound, outs

    def __repr__(self) -> str:
        ins = ", ".join(str(t) for t in self.inputs)
        outs = ", ".join(str(t) for t in self.outputs)
        return f"Executable('{self.path}', target={self.target}: ({ins}) -> ({outs}))"


def load(path: str | os.PathLike, device: str | torch.device | None = None, *, comm: Any = None,
         timeout: float | None = None) -> Executable:
    """Load and check an artifact directory; every problem is an SdcError naming the file.

    A partitioned artifact (compiled with a mesh) runs under torchrun: each process joins the process
    group (gloo on the CPU, NCCL on CUDA), loads its rank's plan and weights, and calls take the
    global inputs and return the global outputs (see docs/distributed.md). `device="cuda"` runs the
    plan's ops on the process's GPU (`cuda:LOCAL_RANK`). `timeout`: seconds a collective may take
    (default: SDC_COLLECTIVE_TIMEOUT, else 300). `comm`: a communicator of your own (tests).
    """
    from sdc.runtime import distributed as D

    artifact = read_artifact(Path(path))
    target = artifact.manifest["target"]
    if not get_target(target).supported:
        able = ", ".join(f"'{name}'" for name in supported_targets())
        raise SdcError(f"artifact '{artifact.root}' is compiled for target '{target}'; "
                       f"this runtime runs {able} artifacts only so far")
    env = D.launch_env()
    dev = _device(device, env)
    partitioned = "shardings" in artifact.plan
    if comm is None and (artifact.world_size > 1 or (partitioned and env is not None)):
        comm = _join(artifact, dev, D, timeout)
    elif comm is None and env is not None and env.world_size > 1:
        raise SdcError(f"artifact '{artifact.root}' is compiled for one device but this launch has "
                       f"{env.world_size} (WORLD_SIZE={env.world_size}); compile it with --mesh to run it on "
                       f"{env.world_size}")
    if comm is not None and comm.world_size != artifact.world_size:
        raise SdcError(f"artifact '{artifact.root}' is compiled for {artifact.world_size} devices, the "
                       f"communicator has {comm.world_size}")
    return Executable(artifact, dev, rank=comm.rank if comm is not None else 0, comm=comm)


def _join(artifact: Artifact, dev: torch.device, D, timeout: float | None):
    from sdc.dialect.mesh import Mesh

    mesh = Mesh.of(artifact.manifest["mesh"])
    seconds = timeout if timeout is not None else D.default_timeout()
    env = D.join(artifact.world_size, dev, seconds)
    axis_sets = artifact.program(env.rank).collective_axes()
    for s in _io_shardings(artifact, len(artifact.manifest["entry"]["inputs"]),
                           len(artifact.manifest["entry"]["outputs"]))[1]:
        if s is not None:
            axis_sets += [list(d) for d in s.dims if d] + ([list(s.partial)] if s.partial else [])
    try:
        return D.TorchCommunicator(mesh, env.rank, dev, axis_sets, seconds, D.check_requested())
    except SdcError:
        raise
    except Exception as e:
        raise SdcError(f"rank {env.rank}: cannot set up the process groups of mesh {mesh}: {e}") from e


def _io_shardings(artifact: Artifact, n_in: int, n_out: int):
    from sdc.dialect.mesh import MeshError, from_json

    table = artifact.plan.get("shardings")
    if table is None:
        return [None] * n_in, [None] * n_out
    try:
        ins = [from_json(s) if s is not None else None for s in table["inputs"]]
        outs = [from_json(s) if s is not None else None for s in table["outputs"]]
    except (MeshError, KeyError, TypeError) as e:
        raise artifact.error(PLAN, f"'shardings' is malformed: {e}") from None
    if len(ins) != n_in or len(outs) != n_out:
        raise artifact.error(PLAN, f"'shardings' lists {len(ins)} inputs and {len(outs)} outputs, the manifest's "
                                   f"entry has {n_in} and {n_out}")
    return ins, outs


def _device(device: str | torch.device | None, env=None) -> torch.device:
    if device is None:
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise SdcError(f"bad device {device!r}: {e}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise SdcError(f"device '{dev}' is not available: this torch sees no CUDA GPU")
        index = dev.index if dev.index is not None else (env.local_rank if env is not None else 0)
        if index >= torch.cuda.device_count():
            raise SdcError(f"device cuda:{index} does not exist ({torch.cuda.device_count()} GPUs visible)")
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    if dev.type != "cpu":
        raise SdcError(f"device '{dev}' is not supported: the runtime runs on 'cpu' or 'cuda'")
    return dev


class _OneCall:
    """An executable's calls from several threads run one at a time (`with exe._one_call:`); a call made
    from inside a call on the same thread (a custom op's Python calling the executable that runs it) is
    an error, not a hang. (A class, not a generator context manager: this is on every call's path.)"""

    def __init__(self, path: Path):
        self.path = path
        self.lock = threading.Lock()
        self.calling: int | None = None  # the thread inside a call

    def __enter__(self) -> None:
        me = threading.get_ident()
        if self.calling == me:
            raise SdcError(f"this executable ('{self.path}') was called from inside one of its own calls; "
                           "load the artifact again for a nested call")
        self.lock.acquire()
        self.calling = me

    def __exit__(self, *exc: Any) -> None:
        self.calling = None
        self.lock.release()


def _kernel_sources(artifact: Artifact):
    """The artifact's generated kernels, read (hash-checked) when a launch needs one."""
    from sdc.runtime.launch.triton import KernelSources

    return KernelSources(artifact.root, artifact.files, artifact.error)


def _info(t: dict) -> TensorInfo:
    return TensorInfo(t["name"], t["dtype"], tuple(t["shape"]))


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _to_numpy(t: torch.Tensor):
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.numpy() if t.device.type == "cpu" else t.cpu().numpy()
