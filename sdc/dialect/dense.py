"""A constant's value as plain Python: a torch tensor plus its MLIR element type name."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from sdc import dtypes


@dataclass(frozen=True, eq=False)
class DenseValue:
    tensor: torch.Tensor
    dtype_name: str

    @staticmethod
    def from_numpy(array: np.ndarray) -> "DenseValue":
        array = np.asarray(array)
        # np.asarray(order="C"), not np.ascontiguousarray: that one turns a rank-0 array into rank 1.
        return DenseValue(torch.from_numpy(np.asarray(array, order="C")).clone(), dtypes.from_numpy(array.dtype))

    @staticmethod
    def from_torch(tensor: torch.Tensor) -> "DenseValue":
        return DenseValue(tensor.detach().contiguous().clone(), dtypes.from_torch(tensor.dtype))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.tensor.shape)

    def to_torch(self) -> torch.Tensor:
        return self.tensor.clone()

    def is_splat(self) -> bool:
        flat = self.tensor.reshape(-1)
        return flat.numel() > 0 and bool((flat == flat[0]).all()) if flat.numel() else False

    def __repr__(self) -> str:
        return f"DenseValue({list(self.shape)}, {self.dtype_name})"
