"""What a pass may ask an op: its kind, and the hooks every pass reads instead of a table of names.

Every `OpDef` has a kind (`OpKind`); each hook has a default per kind (`KIND_DEFAULTS`) and an op
overrides it where it is defined (`sdc/dialect/ops/*.py`, a keyword of its `OpDef`). `OpDef`'s
accessors (`opdef.precision`, `opdef.fusion`, ...) give the resolved value, so a pass never needs
the op's name:

    precision     Precision: what sdc-mixed-precision computes the op in (LOW, KEEP, FOLLOW)
    accumulates   bool: a sum-like reduction, whose elementwise input chain stays f32 too
    may_view      bool: a result may share memory with an operand (the memory plan's views)
    fusion        FusionClass: how sdc-fuse groups it (an elementwise chain, a reduction, an anchor...)
    cost          CostRule: flops and bytes of one instance, from its operand and result specs
    recompute     Recompute: whether sdc-recompute may recompute it, and whether it is heavy
    layout        LayoutRule (or a function of the operand ranks to one): how it meets layouts
    sharding      ShardingRule: which factor rule sdc-sharding gives it (sdc/transforms/sharding.py)
    folds         bool: its result is a function of its operands alone (a weight-only input folds)
    weight        bool: its value is a weight (sdc.parameter, sdc.constant)
    differentiable bool: a gradient can flow through it, so it needs a vjp (or is a known gap)
    flash_score   bool: may be in an attention's score chain or mask (the flash kernel computes it)
    reduced_axes  the axes a reduction-class op reduces, from its rank and attributes
    kernel_form   KernelForm: how the kernel IR's lowering takes it (sdc/codegen/kernel/lowering.py)
    row_reduce    RowReduce: a plain reduction's primitive in the row template (sum, max, min; a mean)
    vector_operands  operand index -> the dim of operand 0 that operand runs along (per channel, per row)
    kernel_floats_only  bool: generated kernels take it on float operands only; integer ones keep torch

This module imports no MLIR and no torch: the hooks are plain data and small functions of
`TensorSpec`s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Callable, Sequence, Union

from sdc import dtypes
from sdc.dialect.shapes import TensorSpec, is_static

DYNAMIC_DIM = 32  # what a dim unknown at compile time counts as in cost and byte estimates


class OpKind(StrEnum):
    """An op's kind: the family its docs section, and every hook's default, come from."""

    VALUES = "values"
    ELEMENTWISE_UNARY = "elementwise unary"
    ELEMENTWISE_BINARY = "elementwise binary"
    COMPARISON = "comparison"
    LOGICAL = "logical"
    ELEMENTWISE_TERNARY = "elementwise ternary"
    CONTRACTION = "contraction"
    CONVOLUTION = "convolution"
    POOLING = "pooling"
    REDUCTION = "reduction"
    NORMALIZATION = "normalization"
    SHAPE = "shape"
    LAYOUT = "layout"
    COLLECTIVE = "collective"
    INDEXING = "indexing"
    SCAN = "scan"
    SORTING = "sorting"
    RESAMPLING = "resampling"
    SIGNAL = "signal"
    LINEAR_ALGEBRA = "linear algebra"
    ATTENTION = "attention"
    SHARDING = "sharding"
    CUSTOM = "custom"

    @classmethod
    def named(cls, name: str) -> OpKind | None:
        """The kind called `name`, or None (a family name from outside the registry)."""
        try:
            return cls(name)
        except ValueError:
            return None

    @property
    def elementwise(self) -> bool:
        """Elementwise with numpy broadcasting: arithmetic, comparisons, logic, select."""
        return self in _ELEMENTWISE

    @property
    def arithmetic(self) -> bool:
        """Elementwise arithmetic and activations (unary, binary, ternary), not comparisons or logic."""
        return self in (OpKind.ELEMENTWISE_UNARY, OpKind.ELEMENTWISE_BINARY, OpKind.ELEMENTWISE_TERNARY)


_ELEMENTWISE = frozenset({OpKind.ELEMENTWISE_UNARY, OpKind.ELEMENTWISE_BINARY, OpKind.ELEMENTWISE_TERNARY,
                          OpKind.COMPARISON, OpKind.LOGICAL})


class Precision(StrEnum):
    """What sdc-mixed-precision computes an op in (sdc/transforms/mixed_precision.py says why)."""

    LOW = "low"  # f32 operands cast to the low dtype; results low
    KEEP = "keep"  # the dtypes the program declared
    FOLLOW = "follow"  # the dtype its operands already have (they meet at f32 when they differ)


class FusionClass(StrEnum):
    """How sdc-fuse groups an op."""

    ELEMENTWISE = "elementwise"  # joins its producer's group
    REDUCTION = "reduction"  # a reduction with its prologue and epilogue, one domain per group
    LAYOUT = "layout"  # a layout_cast: folds into its producer's or its consumer's group
    CONTRACTION = "contraction"  # an anchor: starts a group, takes an elementwise epilogue
    CONVOLUTION = "convolution"
    POOLING = "pooling"
    BARRIER = "barrier"  # never grouped, and nothing is grouped across it (a collective)
    OPAQUE = "opaque"  # stays alone


ANCHOR_CLASSES = (FusionClass.CONTRACTION, FusionClass.CONVOLUTION, FusionClass.POOLING)


class Recompute(StrEnum):
    """Whether sdc-recompute may recompute an op in the backward pass."""

    CHEAP = "cheap"
    HEAVY = "heavy"  # a matmul, convolution or attention: kept unless nothing cheaper fits
    NEVER = "never"  # side effects, opaque, or cheaper kept than redone (a random mask)


@dataclass(frozen=True)
class Cost:
    flops: int
    bytes: int


CostRule = Callable[[Sequence[TensorSpec], Sequence[TensorSpec], dict], Cost]


@dataclass(frozen=True)
class LayoutRule:
    """How an op meets layouts: `relation` is one of sdc/transforms/layout_model.py's RELATIONS
    (uniform: operands and results share the layout; reduce: the same, reduced axes dropped;
    contraction: row-major or transposed operands; rigid: row-major only); `why` explains a cast."""

    relation: str
    why: str


LayoutHook = Union[LayoutRule, Callable[[Sequence[int]], LayoutRule]]


@dataclass(frozen=True)
class ShardingRule:
    """Which factor rule of sdc/transforms/sharding.py an op gets (`rule`, a key of its
    FACTOR_RULES), which operands the op is linear in (`linear`: "", "unary", "all", "one", "lhs":
    where a partial sum may pass through), and for a rule over one blocked axis the attribute
    naming it (or the axis itself)."""

    rule: str
    linear: str = ""
    axis: str | int | None = None


class KernelForm(StrEnum):
    """How the kernel IR's lowering (sdc/codegen/kernel/lowering.py) takes an op of a kernel group
    (a template's anchor, matmul or conv, is the template's own)."""

    RENDERED = "rendered"  # one node, which the renderer has a form for (its scalar formula) or refuses
    LOWERED = "lowered"  # the lowering writes it out in nodes every renderer has (a cast, a gather, ...)
    ROW = "row"  # a reduction along the last dim: the row template, one program per row


@dataclass(frozen=True)
class RowReduce:
    """A plain reduction in the row template: the kernel IR's reduction `primitive` over the row
    (`sum`, `max`, `min`), divided by the row length when `mean`."""

    primitive: str
    mean: bool = False


# ---------------------------------------------------------------- costs


def numel(spec: TensorSpec) -> int:
    n = 1
    for d in spec.shape:
        n *= d if is_static(d) else DYNAMIC_DIM
    return n


def nbytes(spec: TensorSpec) -> int:
    return numel(spec) * dtypes.itemsize(spec.dtype)


def _traffic(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec]) -> int:
    return sum(nbytes(s) for s in (*ins, *outs))


def per_result_element(flops: int = 1) -> CostRule:
    """`flops` per element of the first result (elementwise ops, data movement)."""

    def cost(ins, outs, attrs) -> Cost:
        return Cost(numel(outs[0]) * flops if outs else 0, _traffic(ins, outs))

    return cost


def per_operand_element(flops: int = 1) -> CostRule:
    """`flops` per element of the first operand (reductions: each input element is read once)."""

    def cost(ins, outs, attrs) -> Cost:
        return Cost(numel(ins[0]) * flops if outs and ins else 0, _traffic(ins, outs))

    return cost


def per_window_element(ins, outs, attrs) -> Cost:
    """A pooling window: one flop per result element per window element."""
    per = math.prod(attrs.get("kernel", []) or [])
    return Cost(numel(outs[0]) * per if outs else 0, _traffic(ins, outs))


def _dim(d) -> int:
    return d if is_static(d) else DYNAMIC_DIM


def matmul_cost(ins, outs, attrs) -> Cost:
    """A multiply-add per result element per contracted element."""
    lhs = ins[0]
    k = lhs.shape[-2] if attrs.get("transpose_lhs") and lhs.rank >= 2 else lhs.shape[-1]
    return Cost(2 * numel(outs[0]) * _dim(k), _traffic(ins, outs))


def conv_cost(ins, outs, attrs) -> Cost:
    """A multiply-add per result element per weight element of one output channel."""
    per = math.prod(_dim(d) for d in ins[1].shape[1:])
    return Cost(2 * numel(outs[0]) * per, _traffic(ins, outs))


def conv_weight_grad_cost(ins, outs, attrs) -> Cost:
    """A multiply-add per weight element per position of the result's gradient (batch and space)."""
    g = ins[1]
    per = math.prod(_dim(d) for d in (g.shape[0], *g.shape[2:]))
    return Cost(2 * numel(outs[0]) * per, _traffic(ins, outs))


TRANSCENDENTAL = 8  # flops an exp, log, division or the like counts as, per element


# ---------------------------------------------------------------- layout rules

ELEMENTWISE_LAYOUT = LayoutRule("uniform", "elementwise ops take any layout their operands agree on")
ROW_MAJOR_ONLY = LayoutRule("rigid", "this op reads and writes row-major tensors")


def uniform(why: str) -> LayoutRule:
    return LayoutRule("uniform", why)


# ---------------------------------------------------------------- defaults per kind


@dataclass(frozen=True)
class KindDefaults:
    precision: Precision
    fusion: FusionClass = FusionClass.OPAQUE
    cost: CostRule = per_result_element()
    recompute: Recompute = Recompute.CHEAP
    layout: LayoutHook = ROW_MAJOR_ONLY
    sharding: ShardingRule = ShardingRule("fallback")
    may_view: bool = False  # with operands only: an op without any makes fresh memory
    differentiable: bool = True
    folds: bool = True


_ELEMENTWISE_DEFAULTS = KindDefaults(Precision.LOW, FusionClass.ELEMENTWISE, layout=ELEMENTWISE_LAYOUT,
                                     sharding=ShardingRule("elementwise"))
_COMPARE_DEFAULTS = KindDefaults(Precision.FOLLOW, FusionClass.ELEMENTWISE, layout=ELEMENTWISE_LAYOUT,
                                 sharding=ShardingRule("elementwise"), differentiable=False)

KIND_DEFAULTS: dict[OpKind, KindDefaults] = {
    OpKind.ELEMENTWISE_UNARY: _ELEMENTWISE_DEFAULTS,
    OpKind.ELEMENTWISE_BINARY: _ELEMENTWISE_DEFAULTS,
    OpKind.ELEMENTWISE_TERNARY: _ELEMENTWISE_DEFAULTS,
    OpKind.COMPARISON: _COMPARE_DEFAULTS,
    OpKind.LOGICAL: _COMPARE_DEFAULTS,
    OpKind.CONTRACTION: KindDefaults(Precision.LOW, FusionClass.CONTRACTION, matmul_cost, Recompute.HEAVY,
                                     LayoutRule("contraction", "matmul reads row-major or transposed operands")),
    OpKind.CONVOLUTION: KindDefaults(Precision.LOW, FusionClass.CONVOLUTION, recompute=Recompute.HEAVY,
                                     layout=uniform("convolution takes any layout its operands agree on")),
    OpKind.POOLING: KindDefaults(Precision.FOLLOW, FusionClass.POOLING, per_window_element,
                                 layout=uniform("pooling windows follow the spatial dims wherever they lie")),
    OpKind.REDUCTION: KindDefaults(Precision.FOLLOW, FusionClass.REDUCTION, per_operand_element(),
                                   layout=LayoutRule("reduce", "reductions take any layout once their axes are "
                                                               "remapped")),
    OpKind.NORMALIZATION: KindDefaults(Precision.KEEP, layout=uniform("normalizations take any layout once "
                                                                      "their axes are remapped")),
    OpKind.SHAPE: KindDefaults(Precision.FOLLOW, may_view=True),
    OpKind.LAYOUT: KindDefaults(Precision.FOLLOW, FusionClass.LAYOUT, may_view=True),
    OpKind.VALUES: KindDefaults(Precision.FOLLOW, may_view=True),
    OpKind.SHARDING: KindDefaults(Precision.FOLLOW, recompute=Recompute.NEVER, may_view=True,
                                  differentiable=False),
    OpKind.COLLECTIVE: KindDefaults(Precision.FOLLOW, FusionClass.BARRIER, recompute=Recompute.NEVER,
                                    may_view=True, differentiable=False, folds=False),
    OpKind.CUSTOM: KindDefaults(Precision.KEEP, recompute=Recompute.NEVER, may_view=True),
    OpKind.INDEXING: KindDefaults(Precision.FOLLOW),
    OpKind.SORTING: KindDefaults(Precision.FOLLOW),
    OpKind.SCAN: KindDefaults(Precision.KEEP),
    OpKind.RESAMPLING: KindDefaults(Precision.KEEP),
    OpKind.SIGNAL: KindDefaults(Precision.KEEP),
    OpKind.LINEAR_ALGEBRA: KindDefaults(Precision.KEEP),
    OpKind.ATTENTION: KindDefaults(Precision.KEEP, recompute=Recompute.HEAVY),
}
"""Every kind's defaults; a kind missing here fails test_opdef_hooks.py."""
