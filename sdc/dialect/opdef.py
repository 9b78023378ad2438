"""The op definition record and the registry of every sdc op.

An op is defined in one place, an `OpDef`: its operands, attributes (with
kinds and defaults), results, traits, shape rule and reference semantics
(a torch CPU function), plus the documentation `docs/dialect.md` is checked
against. This module and the op tables import no MLIR: the CPU runtime runs
the same reference semantics on a machine without the bindings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

from sdc.dialect.hooks import (KIND_DEFAULTS, CostRule, FusionClass, KernelForm, LayoutHook, LayoutRule, OpKind,
                               Precision, Recompute, RowReduce, ShardingRule)
from sdc.dialect.shapes import ShapeContext, TensorSpec

REQUIRED = object()

# Attribute kinds, as plain Python values:
#   int, float, bool, str        scalars
#   ints, floats, strs           lists (ints print as array<i64: ...>)
#   dtype                        an element type name such as "f32"
#   shape                        a list of dims: int, or a symbol name (str), -1 to infer one dim
#   enum                         a str from AttrSpec.choices
#   dense                        a numpy array (constants)
#   layout                       a permutation (list of ints), printed as #sdc.layout<...>
#   sharding                     [per-dim axis lists, partial axes], printed as #sdc.sharding<...>
ATTR_KINDS = ("int", "float", "bool", "str", "ints", "floats", "strs", "dtype", "shape", "enum", "dense", "layout",
              "sharding")


@dataclass(frozen=True)
class AttrSpec:
    kind: str
    default: Any = REQUIRED
    doc: str = ""
    choices: tuple[str, ...] = ()

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


def attr(kind: str, default: Any = REQUIRED, doc: str = "", choices: Sequence[str] = ()) -> AttrSpec:
    assert kind in ATTR_KINDS, kind
    return AttrSpec(kind, default, doc, tuple(choices))


@dataclass
class RefEnv:
    """What reference semantics may need beyond their operands.

    `symbols` binds symbolic dim names (from the entry function's argument
    shapes) to their run-time values; `comm` runs collectives (None: a world
    of one device, where every collective over a group of size 1 is identity).
    `params` holds the values of `sdc.parameter`s by name (the interpreter's;
    a compiled plan binds its weights at load time instead). `result_spec` is
    the declared result type of the op about to run, for the ops whose result
    type is declared rather than inferred (`OpDef.shape is None`: `sdc.recv`
    allocates it); whoever runs such an op sets it first.
    """

    symbols: dict[str, int] = field(default_factory=dict)
    comm: Any = None
    mesh: dict[str, int] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    result_spec: TensorSpec | None = None

    def dim(self, d) -> int:
        """A `shape` attribute entry's value: ints as they are, names and expressions evaluated."""
        if isinstance(d, str):
            from sdc.dialect.symexpr import evaluate

            return evaluate(d, self.symbols)
        return int(d)


ShapeRule = Callable[[ShapeContext, list[TensorSpec], dict], list[TensorSpec]]
RefFn = Callable[..., Any]
# The derivative rule (reverse mode): vjp(b, operands, results, attrs, cotangents) -> one cotangent
# per operand (None: none flows there). `b` builds sdc ops (sdc/dialect/derivatives.py says what it
# offers); values are opaque handles, so the op tables stay free of MLIR. Rules are attached in
# sdc/dialect/derivatives.py; sdc-autodiff (sdc/transforms/autodiff.py) calls them.
VjpRule = Callable[..., list]


@dataclass
class OpDef:
    name: str
    summary: str
    operands: tuple[str, ...]
    shape: ShapeRule | None
    ref: RefFn
    attrs: dict[str, AttrSpec] = field(default_factory=dict)
    results: tuple[str, ...] = ("result",)
    variadic_operand: bool = False  # the last operand takes any number of values
    min_operands: int = 0  # for a variadic operand group: the fewest values it takes
    variadic_results: bool = False  # the last result takes any number of values
    # > 0: the variadic operand (result) group is this many optional slots in MLIR, sized by the
    # `operandSegmentSizes` (`resultSegmentSizes`) attribute: IRDL binds every member of one variadic
    # group to one type, while each slot has a type of its own (sdc.custom's operands differ).
    operand_slots: int = 0
    result_slots: int = 0
    pure: bool = True
    kind: OpKind | None = None  # required; every hook left None below takes this kind's default
    doc: str = ""
    example: str = ""
    vjp: VjpRule | None = None  # the derivative rule; None: a gradient cannot flow through the op
    # Hooks (sdc/dialect/hooks.py says what each means); None: the kind's default (KIND_DEFAULTS).
    precision: Precision | None = None
    accumulates: bool = False
    may_view: bool | None = None
    fusion: FusionClass | None = None
    cost: CostRule | None = None
    recompute: Recompute | None = None
    layout: LayoutHook | None = None
    sharding: ShardingRule | None = None
    folds: bool | None = None
    weight: bool = False
    differentiable: bool | None = None
    flash_score: bool = False
    reduced_axes: Callable[[int, dict], tuple[int, ...]] | None = None
    # the kernel IR's lowering (sdc/codegen/kernel/lowering.py); the same default for every kind
    kernel_form: KernelForm = KernelForm.RENDERED
    row_reduce: RowReduce | None = None
    vector_operands: Mapping[int, int] = field(default_factory=dict)
    kernel_floats_only: bool = False

    # elementwise ops: the value at one element as a formula over primitives (sdc/dialect/scalar.py),
    # from which every codegen backend derives the op's code
    scalar: Callable[..., Any] | None = None

    def __post_init__(self):
        if not isinstance(self.kind, OpKind):
            raise TypeError(f"op sdc.{self.name} needs a kind (an OpKind), found {self.kind!r}")
        defaults = KIND_DEFAULTS[self.kind]
        for hook in ("precision", "fusion", "cost", "recompute", "layout", "sharding", "folds", "differentiable"):
            if getattr(self, hook) is None:
                setattr(self, hook, getattr(defaults, hook))
        if self.may_view is None:
            self.may_view = defaults.may_view and bool(self.operands or self.variadic_operand)
        if not self.pure:
            self.folds = False
            self.recompute = Recompute.NEVER

    @property
    def family(self) -> str:
        """The kind's name (an `OpKind` compares equal to it); for readers that predate `kind`."""
        return self.kind

    @property
    def full_name(self) -> str:
        return f"sdc.{self.name}"

    def layout_rule(self, operand_ranks: Sequence[int] = ()) -> LayoutRule:
        """The op's layout rule; a rule that depends on operand ranks (gather's) gets them."""
        return self.layout if isinstance(self.layout, LayoutRule) else self.layout(operand_ranks)

    def with_defaults(self, attrs: dict) -> dict:
        out = {k: spec.default for k, spec in self.attrs.items() if not spec.required}
        out.update(attrs)
        return out


OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    if op.name in OPS:
        raise ValueError(f"op sdc.{op.name} defined twice")
    OPS[op.name] = op
    return op


def all_ops() -> dict[str, OpDef]:
    """Every sdc op, by short name (without the `sdc.` prefix)."""
    import sdc.dialect.ops  # noqa: F401  (registers the tables)

    return OPS


@lru_cache(maxsize=1)
def weight_ops() -> frozenset[str]:
    """The full names of the ops whose value is a weight (`OpDef.weight`)."""
    return frozenset(op.full_name for op in all_ops().values() if op.weight)


def get_op(name: str) -> OpDef:
    ops = all_ops()
    short = name[4:] if name.startswith("sdc.") else name
    return ops[short]
