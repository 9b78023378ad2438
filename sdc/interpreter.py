"""The IR interpreter: runs a module's entry function by each op's reference semantics.

It is the oracle for every transform: a pass must keep `interpret(module, inputs)` the same
on random inputs. It checks its inputs against the entry signature (static dims, rank,
element type) and binds the symbolic dims named by `sdc.dims` argument attributes, so
reshapes and iotas with symbolic shapes evaluate.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch

from sdc import dtypes
from sdc.diagnostics import SdcError
from sdc.dialect.ir import (ARG_ATTRS, arg_dims, arg_names, attr_dicts, entry_function, module_mesh, op_location,
                            operation, read_attrs, shard_counts, tensor_spec)
from sdc.dialect.opdef import OPS, RefEnv
from sdc.dialect.shapes import is_static
from sdc.ir_text import parse_module
from sdc.mlir import ir
from sdc.dialect.op_classes import new_context


def _to_torch(value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    # order="C" keeps rank-0 values rank 0 (np.ascontiguousarray would make them rank 1).
    return torch.from_numpy(np.asarray(value, order="C"))


def _bind_inputs(fn: ir.Operation, inputs) -> tuple[list[torch.Tensor], dict[str, int]]:
    args = list(fn.regions[0].blocks[0].arguments)
    if isinstance(inputs, Mapping):
        names = arg_names(fn)
        unknown = [k for k in inputs if k not in names]
        if unknown:
            raise SdcError(f"unknown input '{unknown[0]}' (inputs: {', '.join(names)})")
        inputs = [inputs[n] if n in inputs else _missing(n) for n in names]
    inputs = list(inputs)
    if len(inputs) != len(args):
        raise SdcError(f"expected {len(args)} inputs, got {len(inputs)}")
    symbols: dict[str, int] = {}
    tensors = []
    names = arg_names(fn)
    for i, (arg, value, dims) in enumerate(zip(args, inputs, arg_dims(fn))):
        t = _to_torch(value)
        spec = tensor_spec(arg.type)
        got = dtypes.from_torch(t.dtype)
        if got != spec.dtype:
            raise SdcError(f"input '{names[i]}' has element type {got}, expected {spec.dtype}")
        if t.dim() != spec.rank:
            raise SdcError(f"input '{names[i]}' has rank {t.dim()}, expected {spec.rank} ({spec})")
        for d, (size, want) in enumerate(zip(t.shape, spec.shape)):
            if is_static(want) and size != want:
                raise SdcError(f"input '{names[i]}' dim {d} is {size}, expected {want} ({spec})")
        shards = _arg_shards(fn, i, len(dims or []))
        for d, name in enumerate(dims or []):
            if isinstance(name, str):
                size = int(t.shape[d]) * shards[d]  # a partitioned program's argument is a block of the input
                if name in symbols and symbols[name] != size:
                    raise SdcError(f"input '{names[i]}' dim {d} is {t.shape[d]}, but symbol '{name}' is {symbols[name]} "
                                   "from an earlier input")
                symbols[name] = size
        tensors.append(t)
    return tensors, symbols


def _arg_shards(fn: ir.Operation, i: int, rank: int) -> list[int]:
    """How many blocks each dim of argument i is split into (its `sdc.sharding` over the module's mesh)."""
    return shard_counts(fn, attr_dicts(fn, ARG_ATTRS)[i], rank)


def _missing(name: str):
    raise SdcError(f"missing input '{name}'")


class Interpreter:
    def __init__(self, module, params: Mapping[str, Any] | None = None, comm=None):
        self.module = module
        self.params = {k: _to_torch(v) for k, v in (params or {}).items()}
        self.comm = comm
        self.mesh = module_mesh(module) or {}

    def run(self, inputs, entry: str | None = None) -> list[torch.Tensor]:
        fn = entry_function(self.module, entry)
        tensors, symbols = _bind_inputs(fn, inputs)
        env = RefEnv(symbols=symbols, comm=self.comm, mesh=self.mesh, params=self.params)
        return self._run_block(fn.regions[0].blocks[0], tensors, env)

    def _run_block(self, block, args: Sequence[torch.Tensor], env: RefEnv,
                   values: dict[Any, torch.Tensor] | None = None) -> list[torch.Tensor]:
        """Run a block's ops; returns what its terminator (func.return, or sdc.yield of a fusion
        body, which sees the enclosing block's values) names."""
        values = {} if values is None else values
        for arg, t in zip(block.arguments, args):
            values[arg] = t
        for op in block.operations:
            op = op.operation
            if op.name in ("func.return", "sdc.yield"):
                return [values[v] for v in op.operands]
            if op.name == "sdc.fusion":
                for result, t in zip(op.results, self._run_block(op.regions[0].blocks[0], [], env, values)):
                    values[result] = t
                continue
            if not op.name.startswith("sdc."):
                raise SdcError(f"the interpreter cannot run '{op.name}'")
            opdef = OPS[op.name[4:]]
            attrs = read_attrs(opdef, op)
            if opdef.shape is None and len(op.results):
                env.result_spec = tensor_spec(op.results[0].type)
            ins = [values[v] for v in op.operands]
            try:
                out = opdef.ref(env, attrs, *ins)
            except SdcError:
                raise
            except Exception as e:
                # str() of a KeyError is its message in quotes; show the message itself.
                detail = e.args[0] if isinstance(e, KeyError) and e.args else e
                raise SdcError(f"{_where(op)}'{op.name}' failed: {detail}") from e
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            for result, t in zip(op.results, outs):
                values[result] = t
        raise SdcError("entry function has no func.return")


def _where(op) -> str:
    """The prefix of a failing op's message: `f.mlir:3:8: `, else its name label, else nothing."""
    at = op_location(op, file_first=True)
    return f"{at}: " if at else ""


def interpret(module_or_text, inputs, params: Mapping[str, Any] | None = None, *, entry: str | None = None,
              as_torch: bool = False, comm=None) -> list:
    """Run the entry function of a module (or IR text) on `inputs` (a list, or a dict by input name:
    the argument's `sdc.name`, else `argN`).

    Returns the outputs as numpy arrays (bf16 widened to f32), or torch tensors with `as_torch`.
    """
    if isinstance(module_or_text, str):
        ctx = new_context()
        module = parse_module(module_or_text, ctx=ctx)
        with ctx:
            outs = Interpreter(module, params, comm).run(inputs, entry)
    else:
        with operation(module_or_text).context:
            outs = Interpreter(module_or_text, params, comm).run(inputs, entry)
    if as_torch:
        return outs
    return [(t.float() if t.dtype == torch.bfloat16 else t).numpy() for t in outs]
