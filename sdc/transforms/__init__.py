"""sdc's passes. `PASSES` maps each pipeline name to a lazy factory returning the pass class."""

from __future__ import annotations

from typing import Callable


def _verify():
    from sdc.transforms.verify import VerifyPass

    return VerifyPass


def _canonicalize():
    from sdc.transforms.canonicalize import CanonicalizePass

    return CanonicalizePass


def _layout_constraints():
    from sdc.transforms.layout_constraints import LayoutConstraintsPass

    return LayoutConstraintsPass


def _fuse():
    from sdc.transforms.fuse import FusePass

    return FusePass


def _shape_constraints():
    from sdc.transforms.shape_constraints import ShapeConstraintsPass

    return ShapeConstraintsPass


def _fold_conv_batch_norm():
    from sdc.transforms.fold_conv_batch_norm import FoldConvBatchNormPass

    return FoldConvBatchNormPass


def _patch_conv():
    from sdc.transforms.patch_conv import PatchConvPass

    return PatchConvPass


def _mixed_precision():
    from sdc.transforms.mixed_precision import MixedPrecisionPass

    return MixedPrecisionPass


def _sharding_propagation():
    from sdc.transforms.sharding_propagation import ShardingPropagationPass

    return ShardingPropagationPass


def _spmd_partition():
    from sdc.transforms.spmd_partition import SpmdPartitionPass

    return SpmdPartitionPass


def _autodiff():
    from sdc.transforms.autodiff import AutodiffPass

    return AutodiffPass


def _optimizer_step():
    from sdc.transforms.optimizer_step import OptimizerStepPass

    return OptimizerStepPass


def _loss_scale():
    from sdc.transforms.loss_scale import LossScalePass

    return LossScalePass


def _recompute():
    from sdc.transforms.recompute import RecomputePass

    return RecomputePass


PASSES: dict[str, Callable[[], type]] = {
    "sdc-verify": _verify,
    "sdc-canonicalize": _canonicalize,
    "sdc-shape-constraints": _shape_constraints,
    "sdc-fold-conv-batch-norm": _fold_conv_batch_norm,
    "sdc-patch-conv": _patch_conv,
    "sdc-mixed-precision": _mixed_precision,
    "sdc-sharding-propagation": _sharding_propagation,
    "sdc-spmd-partition": _spmd_partition,
    "sdc-layout-constraints": _layout_constraints,
    "sdc-fuse": _fuse,
    "sdc-autodiff": _autodiff,
    "sdc-optimizer-step": _optimizer_step,
    "sdc-loss-scale": _loss_scale,
    "sdc-recompute": _recompute,
}


def get_pass(name: str) -> type:
    return PASSES[name]()
