"""Element types: MLIR spelling <-> torch <-> numpy. No MLIR import (the runtime uses it)."""

from __future__ import annotations

import numpy as np
import torch

# MLIR element type spelling -> (torch dtype, numpy dtype name or None, kind)
# kind: "float", "int" (signed), "uint", "bool"
_TABLE: dict[str, tuple[torch.dtype, str | None, str]] = {
    "f16": (torch.float16, "float16", "float"),
    "bf16": (torch.bfloat16, None, "float"),
    "f32": (torch.float32, "float32", "float"),
    "f64": (torch.float64, "float64", "float"),
    "i1": (torch.bool, "bool", "bool"),
    "i8": (torch.int8, "int8", "int"),
    "i16": (torch.int16, "int16", "int"),
    "i32": (torch.int32, "int32", "int"),
    "i64": (torch.int64, "int64", "int"),
    "ui8": (torch.uint8, "uint8", "uint"),
    "ui16": (torch.uint16, "uint16", "uint"),
    "ui32": (torch.uint32, "uint32", "uint"),
    "ui64": (torch.uint64, "uint64", "uint"),
}

ELEMENT_TYPES: tuple[str, ...] = tuple(_TABLE)
FLOAT_TYPES = tuple(k for k, v in _TABLE.items() if v[2] == "float")
INT_TYPES = tuple(k for k, v in _TABLE.items() if v[2] in ("int", "uint"))

_FROM_TORCH = {v[0]: k for k, v in _TABLE.items()}
_FROM_NUMPY = {v[1]: k for k, v in _TABLE.items() if v[1]}


def is_known(name: str) -> bool:
    return name in _TABLE


def kind(name: str) -> str:
    return _TABLE[name][2]


def is_float(name: str) -> bool:
    return kind(name) == "float"


def is_integer(name: str) -> bool:
    return kind(name) in ("int", "uint")


def to_torch(name: str) -> torch.dtype:
    return _TABLE[name][0]


def from_torch(dtype: torch.dtype) -> str:
    return _FROM_TORCH[dtype]


def from_numpy(dtype) -> str:
    key = np.dtype(dtype).name
    if key not in _FROM_NUMPY:
        raise KeyError(f"unsupported numpy dtype {key}")
    return _FROM_NUMPY[key]


def to_numpy(name: str):
    npname = _TABLE[name][1]
    if npname is None:
        raise KeyError(f"{name} has no numpy dtype")
    return np.dtype(npname)


def itemsize(name: str) -> int:
    return torch.empty((), dtype=to_torch(name)).element_size()
