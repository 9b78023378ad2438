"""A constant's value as plain Python: its elements plus its MLIR element type name.

A value read from IR keeps the numpy array the bindings give (numpy has every element type sdc
has but bf16), and becomes a torch tensor only when `tensor` is first read: parsing and
verifying IR with constants then needs no torch (`sdc-opt`, see sdc/lazy.py). Values made by
the frontends and folds start as torch tensors.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

import numpy as np

from sdc import dtypes
from sdc.lazy import lazy_import

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_import("torch")


@dataclass(frozen=True, eq=False)
class DenseValue:
    data: Union["torch.Tensor", np.ndarray]  # the elements, contiguous; owned by this value
    dtype_name: str

    @staticmethod
    def from_numpy(array: np.ndarray) -> "DenseValue":
        array = np.asarray(array)
        name = dtypes.from_numpy(array.dtype)
        # A copy of its own. np.array(order="C"), not np.ascontiguousarray: that one turns a rank-0
        # array into rank 1. view: numpy's ulonglong equals uint64, but torch takes only the latter.
        return DenseValue(np.array(array, order="C").view(dtypes.to_numpy(name)), name)

    @staticmethod
    def from_torch(tensor: torch.Tensor) -> "DenseValue":
        return DenseValue(tensor.detach().contiguous().clone(), dtypes.from_torch(tensor.dtype))

    @functools.cached_property
    def tensor(self) -> torch.Tensor:
        """The elements as a torch tensor (sharing memory with `data`; imports torch on first use)."""
        data = self.data
        if isinstance(data, np.ndarray):
            return torch.from_numpy(data if data.flags.writeable else data.copy())
        return data

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    def to_torch(self) -> torch.Tensor:
        return self.tensor.clone()

    def is_splat(self) -> bool:
        flat = self.data.reshape(-1)
        return len(flat) > 0 and bool((flat == flat[0]).all())

    def __repr__(self) -> str:
        return f"DenseValue({list(self.shape)}, {self.dtype_name})"
