"""Shared set-up for the whole pytest suite."""

from __future__ import annotations

import torch


def _define_torchvision_ops() -> None:
    """PyPI's torchvision is a CUDA build whose C++ ops cannot load beside the CPU torch: importing it
    (transformers does, as do the segmentation tests) fails on registering fake kernels for
    `torchvision::nms` and `torchvision::qnms` unless their op schemas exist. Define them (no kernels:
    nothing here runs NMS), once, before any test module imports torchvision or transformers."""
    for name in ("nms", "qnms"):
        try:
            torch.library.define(f"torchvision::{name}",
                                 "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        except RuntimeError:  # already defined (torchvision loaded its own C++ ops)
            pass


_define_torchvision_ops()
