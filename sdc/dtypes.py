"""Element types: MLIR spelling <-> torch <-> numpy. No MLIR import (the runtime uses it).

The table names torch dtypes by their attribute name (`"float32"` for `torch.float32`), so that
importing this module, which every command does, does not import torch (see sdc.lazy); a torch
dtype is looked up when `to_torch` is first asked for one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from sdc.lazy import lazy_import

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_import("torch")


class ElementType(NamedTuple):
    torch_name: str          # attribute of the torch module: torch.<torch_name>
    numpy_name: str | None   # numpy dtype name, None where numpy has none (bf16)
    kind: str                # "float", "int" (signed), "uint", "bool"
    itemsize: int            # bytes per element


# MLIR element type spelling -> its torch/numpy names, kind and size
_TABLE: dict[str, ElementType] = {
    "f16": ElementType("float16", "float16", "float", 2),
    "bf16": ElementType("bfloat16", None, "float", 2),
    "f32": ElementType("float32", "float32", "float", 4),
    "f64": ElementType("float64", "float64", "float", 8),
    "i1": ElementType("bool", "bool", "bool", 1),
    "i8": ElementType("int8", "int8", "int", 1),
    "i16": ElementType("int16", "int16", "int", 2),
    "i32": ElementType("int32", "int32", "int", 4),
    "i64": ElementType("int64", "int64", "int", 8),
    "ui8": ElementType("uint8", "uint8", "uint", 1),
    "ui16": ElementType("uint16", "uint16", "uint", 2),
    "ui32": ElementType("uint32", "uint32", "uint", 4),
    "ui64": ElementType("uint64", "uint64", "uint", 8),
}

ELEMENT_TYPES: tuple[str, ...] = tuple(_TABLE)
FLOAT_TYPES = tuple(k for k, v in _TABLE.items() if v.kind == "float")
INT_TYPES = tuple(k for k, v in _TABLE.items() if v.kind in ("int", "uint"))

# "torch.float32" (str of a torch dtype) -> "f32"; a lookup that needs no torch import.
_FROM_TORCH = {f"torch.{v.torch_name}": k for k, v in _TABLE.items()}
_FROM_NUMPY = {v.numpy_name: k for k, v in _TABLE.items() if v.numpy_name}


def is_known(name: str) -> bool:
    return name in _TABLE


def kind(name: str) -> str:
    return _TABLE[name].kind


def is_float(name: str) -> bool:
    return kind(name) == "float"


def is_integer(name: str) -> bool:
    return kind(name) in ("int", "uint")


def to_torch(name: str) -> torch.dtype:
    """The torch dtype of an element type (imports torch on first use)."""
    return getattr(torch, _TABLE[name].torch_name)


def is_torch_known(dtype: Any) -> bool:
    """Whether `dtype` is the torch dtype of one of sdc's element types."""
    return _torch_key(dtype) in _FROM_TORCH


def from_torch(dtype: torch.dtype) -> str:
    key = _torch_key(dtype)
    if key not in _FROM_TORCH:
        raise KeyError(dtype)
    return _FROM_TORCH[key]


def _torch_key(dtype: Any) -> str | None:
    # A torch dtype prints as "torch.<attribute name>"; anything else is not one of ours.
    return str(dtype) if type(dtype).__module__ == "torch" else None


def from_numpy(dtype) -> str:
    key = np.dtype(dtype).name
    if key not in _FROM_NUMPY:
        raise KeyError(f"unsupported numpy dtype {key}")
    return _FROM_NUMPY[key]


def to_numpy(name: str):
    npname = _TABLE[name].numpy_name
    if npname is None:
        raise KeyError(f"{name} has no numpy dtype")
    return np.dtype(npname)


def itemsize(name: str) -> int:
    return _TABLE[name].itemsize
