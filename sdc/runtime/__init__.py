"""sdc's runtime: load a compiled artifact and run it. Imports neither MLIR nor any frontend.

    exe = sdc.runtime.load("model.sdc")
    (y,) = exe(x)                 # or exe(input=x); numpy in -> numpy out, torch in -> torch out
    exe.inputs, exe.outputs       # [TensorInfo(name, dtype, shape)], shapes with symbolic dims

See docs/runtime.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from sdc.diagnostics import SdcError
from sdc.runtime.artifact import Artifact, WeightInfo, read_artifact
from sdc.runtime.executor import CpuExecutor
from sdc.runtime.format import MANIFEST, PLAN
from sdc.runtime.signature import Guard, Signature, TensorInfo, parse_guard

__all__ = ["load", "Executable", "TensorInfo", "Guard", "WeightInfo", "read_artifact"]


class Executable:
    """A loaded artifact, callable on inputs. Build it with `sdc.runtime.load`."""

    def __init__(self, artifact: Artifact, device: torch.device, rank: int = 0):
        self.artifact = artifact
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
        weights = artifact.load_weights(rank)
        try:
            self._executor = CpuExecutor(artifact.rank_plan(rank), weights, manifest["mesh"],
                                         lambda msg: artifact.error(PLAN, msg))
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            raise artifact.error(PLAN, f"is malformed ({type(e).__name__}: {e})") from None
        self._weight_storages = {_storage(t) for t in weights.values()}
        self.kernel_count = len({op.kernel for op in self._executor.program})
        # Something alive as long as this executable (sdc.compile's temporary directory).
        self._keepalive: Any = None

    def __call__(self, *args: Any, **named: Any) -> list:
        """Run on inputs given by position and/or by name; returns the outputs, in order, as a list.

        numpy arrays in give numpy arrays out (bf16 widened to f32); if any input is a torch
        tensor the outputs are torch tensors (made under `torch.inference_mode()`).
        """
        bound = self._signature.bind(args, named, self.device)
        outs = self._executor.run(bound.tensors, bound.symbols)
        # An output may alias a weight or an input (identity-like ops): give the caller its own copy.
        taken = self._weight_storages | {_storage(t) for t in bound.tensors}
        result = []
        for t in outs:
            key = _storage(t)
            if key in taken:
                t = t.clone()
            else:
                taken.add(key)
            result.append(t if bound.as_torch else _to_numpy(t))
        return result

    def __repr__(self) -> str:
        ins = ", ".join(str(t) for t in self.inputs)
        outs = ", ".join(str(t) for t in self.outputs)
        return f"Executable('{self.path}', target={self.target}: ({ins}) -> ({outs}))"


def load(path: str | os.PathLike, device: str | torch.device | None = None) -> Executable:
    """Load and check an artifact directory; every problem is an SdcError naming the file."""
    artifact = read_artifact(Path(path))
    dev = _device(device)
    target = artifact.manifest["target"]
    if target != "cpu":
        raise SdcError(f"artifact '{artifact.root}' is compiled for target '{target}'; "
                       "this runtime runs 'cpu' artifacts only so far")
    if artifact.world_size != 1:
        raise SdcError(f"artifact '{artifact.root}' is compiled for {artifact.world_size} devices; "
                       "running on more than one is not supported yet")
    return Executable(artifact, dev)


def _device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise SdcError(f"bad device {device!r}: {e}") from None
    if dev.type != "cpu":
        raise SdcError(f"device '{dev}' is not supported yet: the runtime runs on the CPU only")
    return dev


def _info(t: dict) -> TensorInfo:
    return TensorInfo(t["name"], t["dtype"], tuple(t["shape"]))


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _to_numpy(t: torch.Tensor):
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.numpy()
