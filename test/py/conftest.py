"""Shared set-up for the whole pytest suite: runs before any test module is imported."""

from __future__ import annotations

import os
from importlib import metadata

# The JAX tests compare against jax on the CPU. On a GPU host jax would otherwise take the GPU
# (TF32 matmuls, so other numbers) and preallocate most of its memory in every test process.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import torch  # noqa: E402


def _torchvision_needs_op_schemas() -> bool:
    """PyPI's torchvision is a CUDA build. Beside a CPU torch its C++ ops cannot load, and importing it
    (transformers does, as do the segmentation tests) fails on registering fake kernels for
    `torchvision::nms` and `torchvision::qnms` unless their schemas exist. Beside a matching torch
    (a GPU host's) the C++ ops load and define them themselves: defining them first would abort."""
    if torch.version.cuda is not None:
        return False
    try:
        return "+cpu" not in metadata.version("torchvision")
    except metadata.PackageNotFoundError:
        return False


if _torchvision_needs_op_schemas():
    for _name in ("nms", "qnms"):
        try:
            torch.library.define(f"torchvision::{_name}",
                                 "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        except RuntimeError:  # already defined
            pass
