"""The artifact format's fixed names and its JSON value encoding, shared by writer and reader.

MLIR-free: the writer (`sdc.codegen.artifact`) and the reader (`sdc.runtime.artifact`) both
import it. See docs/artifact.md for the format, field by field.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any, Callable

FORMAT = "sdc-artifact"
FORMAT_VERSION = 2  # 2: plan.json steps are alloc / launch / collective / record / wait / free

MANIFEST = "manifest.json"
PROGRAM = "program.mlir"
PLAN = "plan.json"
KERNELS_DIR = "kernels"
WEIGHTS_DIR = "weights"


def weights_file(rank: int) -> str:
    return f"{WEIGHTS_DIR}/rank{rank}.safetensors"


# ---------------------------------------------------------------- plan.json step kinds (docs/artifact.md)

ALLOC = "alloc"
LAUNCH = "launch"
COLLECTIVE = "collective"
RECORD = "record"
WAIT = "wait"
FREE = "free"
VIEW = "view"  # a value bound to a slice of an allocated one (a concat's operand written in place)
STEP_KINDS = (ALLOC, VIEW, LAUNCH, COLLECTIVE, RECORD, WAIT, FREE)

REFERENCE = "reference"  # the kernel backend whose kernels are sdc ops run by their reference semantics
TRITON = "triton"  # generated Triton kernels, sources in kernels/ (sdc/codegen/triton, sdc/runtime/launch/triton.py)
CUDA = "cuda"  # generated CUDA C++ kernels, sources in kernels/ (sdc/codegen/cuda, sdc/runtime/launch/cuda.py)
C = "c"  # generated C kernels of the CPU target, one source per rank in kernels/ (sdc/codegen/c, sdc/runtime/launch/c.py)
COMPUTE_STREAM = "compute"

# ---------------------------------------------------------------- the kernel that runs a launch (kernel.runs)
#
# sdc/runtime/kernel_choice.py says which op gets which; docs/artifact.md lists them.

GENERATED_C = "c"
GENERATED_TRITON = "triton"
GENERATED_CUDA = "cuda_cpp"
C_CONV = "c_conv"
ONEDNN = "onednn"
CUDNN = "cudnn"
CUDNN_FUSED = "cudnn_fused"
CUBLAS = "cublas"
TORCH = "torch"

# every kernel a plan may name, most specific first (a group's kernel is its ops' first in this order)
KERNELS: dict[str, str] = {
    GENERATED_C: "generated C",
    GENERATED_TRITON: "generated Triton",
    GENERATED_CUDA: "generated CUDA C++",
    C_CONV: "sdc's C kernel library (c_conv.c)",
    ONEDNN: "oneDNN through torch",
    CUDNN_FUSED: "cuDNN fused through torch",
    CUDNN: "cuDNN through torch",
    CUBLAS: "cuBLAS through torch",
    TORCH: "torch",
}

# the backend of a generated kernel -> the kernel's name
GENERATED_KERNELS = {C: GENERATED_C, TRITON: GENERATED_TRITON, CUDA: GENERATED_CUDA}

# what a kernel may fall back to at run time, where a call does not fit it (none: it takes every call)
FALLBACKS: dict[str, tuple[str, ...]] = {GENERATED_C: (TORCH,), C_CONV: (ONEDNN, TORCH), ONEDNN: (TORCH,)}


# The attributes of a convolution that took the add and unary op after it (its epilogue: the planner's
# choice on the CPU, sdc/codegen/plan.py; reference_kernels.fuse_epilogues), and that op's attributes.
EPILOGUE = "sdc.epilogue"
EPILOGUE_ATTRS = "sdc.epilogue_attrs"


def launch_ops(step: dict, unmerged: bool = False) -> list[dict]:
    """The ops of a `launch` step's kernel group ([] for any other step): what a reference kernel
    runs, or what a generated (triton, cuda or c) kernel computes. `unmerged`: a convolution that took
    its epilogue is listed as the ops the program has (conv, add, relu, ... each writing the result).

    For readers of plan.json that look at the ops (reports, `sdc inspect`), not for running it."""
    kernel = step.get("kernel") if step.get("kind") == LAUNCH else None
    ops = kernel.get("ops") if isinstance(kernel, dict) and kernel.get("backend") in (REFERENCE, TRITON, CUDA, C) else None
    if not isinstance(ops, list):
        return []
    if not unmerged:
        return ops
    out = []
    for op in ops:
        attrs = op.get("attrs") or {}
        names = attrs.get(EPILOGUE) if isinstance(op, dict) and op.get("op") == "conv" else None
        if not names or not isinstance(names, list):
            out.append(op)
            continue
        ins, result, loc = list(op.get("inputs") or []), list(op.get("outputs") or []), op.get("loc", "")
        adds = "add" in names
        plain = {k: v for k, v in attrs.items() if k not in (EPILOGUE, EPILOGUE_ATTRS)}
        out.append({**op, "attrs": plain, "inputs": ins[:-1] if adds else ins, "outputs": result})
        for name in names:
            operands = [*result[:1], ins[-1]] if name == "add" else result[:1]
            unary = {} if name == "add" else dict(attrs.get(EPILOGUE_ATTRS) or [])
            out.append({"op": name, "attrs": unary, "inputs": operands, "outputs": result, "loc": loc})
    return out


# ---------------------------------------------------------------- attribute values in JSON
#
# Plain JSON, readable by jq: non-finite floats (which JSON cannot spell) become
# {"float": "inf" | "-inf" | "nan"}, and a dense constant becomes {"weight": NAME}, a
# reference into the rank's weights file. Every other attribute value is a JSON scalar or
# a list of them.

_NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def encode_float(x: float) -> Any:
    if math.isfinite(x):
        return x
    if math.isnan(x):
        return {"float": "nan"}
    return {"float": "inf" if x > 0 else "-inf"}


def encode_value(value: Any, dense: Callable[[Any], str]) -> Any:
    """An attribute value as JSON; `dense(value)` stores a dense constant and returns its weight name."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return encode_float(value)
    if isinstance(value, (list, tuple)):
        return [encode_value(v, dense) for v in value]
    if hasattr(value, "dtype_name") and hasattr(value, "tensor"):
        return {"weight": dense(value)}
    raise TypeError(f"cannot encode attribute value {value!r} ({type(value).__name__}) as JSON")


def decode_value(value: Any, weight: Callable[[str], Any]) -> Any:
    """The inverse of `encode_value`; `weight(name)` gives the dense value of a weight reference."""
    if isinstance(value, list):
        return [decode_value(v, weight) for v in value]
    if isinstance(value, dict):
        if set(value) == {"float"} and value["float"] in _NON_FINITE:
            return _NON_FINITE[value["float"]]
        if set(value) == {"weight"} and isinstance(value["weight"], str):
            return weight(value["weight"])
        raise ValueError(f"unknown encoded value {value!r}")
    return value


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
