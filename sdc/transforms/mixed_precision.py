"""sdc-mixed-precision: an f32 program computes in bf16 or f16 where that is safe, in f32 where
numerics need it; its signature does not change.

    sdc-mixed-precision{precision=bf16}     bf16 | f16 | tf32 | f32

What each op computes in (its `OpDef.precision`: a default per op kind, overridden where an op
is defined; sdc/dialect/hooks.py):
- LOW: matmul, convolution (and transposed convolution), the elementwise ops (arithmetic,
  activations, `where`): their f32 operands are cast to the low dtype and their results become
  low. sdc.matmul and sdc.conv have no accumulation-dtype attribute: the result dtype is the
  operands' dtype, so a low matmul's result is low. Accumulation is the kernel's business: the
  reference backend runs them as torch ops, which accumulate bf16/f16 products in f32 (oneDNN on
  the CPU, cuBLAS/cuDNN on CUDA) and round once at the end, and the Triton matmul template
  accumulates in f32 (`tl.dot(..., out_dtype=tl.float32)`) and rounds when it stores.
- KEEP: numerics-sensitive ops compute in the dtypes the program declared (f32): softmax and
  log-softmax, layer/rms/batch norm and LRN (their statistics), sum-like reductions (sum, mean,
  prod, cumsum, cumprod, average pooling), scatters, resampling (coordinates), attention, the DFT,
  and ops whose meaning depends on the dtype (cast, bitcast, send/recv pairs). Low operands are cast
  back to f32 (exact); a loss is a reduction, so it stays f32 too.
- FOLLOW: data movement and order-only ops (reshape, transpose, gather, concat, slice, max/min,
  max pooling, comparisons, collectives) compute in the dtype their operands already have; when
  those differ they meet at f32 (casting up is exact), so movement never rounds. An all_reduce of a
  low matmul's partial sums therefore sums in the low dtype, as tensor-parallel training does.
- The elementwise/movement chain that feeds a sum-like reduction (exp or log before a sum, the
  subtraction of a max before them, the square of a hand-written variance) stays f32, back to the
  nearest op of another kind: exp amplifies an argument's rounding into a relative error of the
  sum.
- Elementwise ops with rank-0 results stay f32: scalar arithmetic gains nothing in a low dtype, and
  the tail of a loss (`sum / count` after the f32 reduction) keeps the loss and the backward's seed
  f32, as under torch.autocast.

Boundaries get `sdc.cast`s, made on demand and shared: a value is cast to a dtype at most once,
right after it is defined (a weight once for all its readers, an entry input once at entry). Every
operand is looked up as its original value in the dtype its reader wants, so a cast of a cast is
never made: no low -> f32 -> low pair to remove. An f32 -> low -> f32 pair is not lossless (the
rounding is the point), so the program's own stay as they are; sdc-canonicalize keeps them too. Entry results are cast back to their declared dtypes, so the signature is unchanged.

Weights: ops computed from weights alone (`sdc.parameter`, `sdc.constant` and pure ops on them,
such as sdc-fold-conv-batch-norm's folded weights) stay f32, and their low versions are casts: the
planner evaluates `cast(weight)` at compile time (sdc/codegen/plan.py), so the artifact stores the
weight in the compute dtype. A constant in the IR becomes a low constant instead; for f16 its
finite values are clipped to f16's finite range (+-65504), so an attention mask's -1e9 stays finite,
as ONNX Runtime's float16 converter does (parameters are cast, not clipped); infinities stay (a -inf
causal mask, and the `x == -inf` test of torch's empty-row fix-up after softmax, mean them).

`tf32` and `f32` change no dtype. Every precision records itself on the module as
`sdc.precision = "<precision>"`: with tf32 the matmul kernels read it (f32 operands, tensor-core
TF32 products, f32 accumulation). Only f32 values change: f64 and f16 values of the program stay.

A module that already records the same precision was lowered before and is left as it is (a
training step is lowered before sdc-autodiff; its f32 optimizer update must stay f32).

Errors: an unknown precision (a usage error, before any input is read); a module that already
records another precision; an `sdc.fusion` (run this before sdc-fuse and sdc-layout-constraints).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sdc.diagnostics import DiagnosticSink
from sdc.dialect.dense import DenseValue
from sdc.dialect.ir import defining_op, read_attrs, tensor_spec, tensor_type
from sdc.dialect.builder import create
from sdc.dialect.hooks import Precision
from sdc.dialect.opdef import OPS, OpDef, weight_ops
from sdc.mlir import ir
from sdc.transforms.base import ModulePass, PassOptionError, walk_ops

PRECISIONS = ("bf16", "f16", "tf32", "f32")
LOW_DTYPES = ("bf16", "f16")
SOURCE = "f32"  # the dtype this pass lowers
PRECISION_ATTR = "sdc.precision"
F16_MAX = 65504.0

Policy = Literal["low", "keep", "follow"]


def _opdef(op_name: str) -> OpDef | None:
    short = op_name[4:] if op_name.startswith("sdc.") else None
    return OPS.get(short) if short else None


def policy(op_name: str) -> Policy:
    """What `sdc.<op_name>` computes in (`OpDef.precision`); ops that are not sdc ops (func.return)
    keep their dtypes."""
    opdef = _opdef(op_name)
    return "keep" if opdef is None else opdef.precision.value


def _in_chains(op_name: str) -> bool:
    """Elementwise and movement ops: what a reduction's f32 input chain runs through (not matmuls)."""
    opdef = _opdef(op_name)
    if opdef is None:
        return False
    return opdef.precision == Precision.FOLLOW or (opdef.precision == Precision.LOW and opdef.kind.arithmetic)


def _accumulates(op: ir.Operation) -> bool:
    opdef = _opdef(op.name)
    return opdef is not None and opdef.accumulates


def _dtype(value: ir.Value) -> str:
    return tensor_spec(value.type).dtype


def _with_dtype(t: ir.Type, dtype: str) -> ir.Type:
    return tensor_type(tensor_spec(t).with_dtype(dtype))


class _Lowering:
    """One function's rewrite: decide each op's compute dtype, then retype and cast, in order."""

    def __init__(self, fn: ir.Operation, low: str):
        self.fn = fn
        self.low = low
        self.block = fn.regions[0].blocks[0]
        self.ops = [op.operation for op in self.block.operations]
        self.original: dict[ir.Value, str] = {}  # value -> its dtype before this pass
        self.versions: dict[ir.Value, dict[str, ir.Value]] = {}  # value -> dtype -> the same value in it
        self.weights: dict[ir.Operation, bool] = {}
        self.chain_f32 = self._chains_into_reductions()

    # ------------------------------------------------------------ analysis

    def is_weight(self, value: ir.Value) -> bool:
        """Computed from weights alone: the planner evaluates it (and its casts) at compile time."""
        op = defining_op(value)
        if op is None:
            return False
        if op not in self.weights:
            if op.name in weight_ops():
                self.weights[op] = True
            else:
                opdef = _opdef(op.name)
                self.weights[op] = (opdef is not None and opdef.folds and len(op.operands) > 0
                                    and all(self.is_weight(v) for v in op.operands))
        return self.weights[op]

    def _chains_into_reductions(self) -> set[ir.Operation]:
        """The low/follow ops whose results flow, through such ops only, into a sum-like reduction."""
        marked: set[ir.Operation] = set()
        for op in reversed(self.ops):
            if _in_chains(op.name):
                readers = [use.owner.operation if hasattr(use.owner, "operation") else use.owner
                           for r in op.results for use in r.uses]
                if any(_accumulates(r) or r in marked for r in readers):
                    marked.add(op)
        return marked

    # ------------------------------------------------------------ values in a dtype

    def original_dtype(self, value: ir.Value) -> str:
        return self.original.get(value) or _dtype(value)

    def as_dtype(self, value: ir.Value, dtype: str) -> ir.Value:
        """`value` in `dtype`: itself, a version made before, or a new cast right after its definition."""
        if _dtype(value) == dtype:
            return value
        known = self.versions.setdefault(value, {})
        if dtype in known:
            return known[dtype]
        owner = defining_op(value)
        if owner is not None and owner.name == "sdc.constant" and dtype in LOW_DTYPES:
            converted = self._low_constant(owner, dtype)
        else:
            where = ir.InsertionPoint.after(owner) if owner is not None else ir.InsertionPoint.at_block_begin(self.block)
            loc = owner.location if owner is not None else self.fn.location
            with where:
                converted = create("cast", [value], {"dtype": dtype}, loc=loc).results[0]
        known[dtype] = converted
        return converted

    def _low_constant(self, constant: ir.Operation, dtype: str) -> ir.Value:
        """A copy of an f32 constant in `dtype` (f16: clipped to its finite range)."""
        values = read_attrs(OPS["constant"], constant)["value"].tensor
        if dtype == "f16":  # infinities stay: a -inf mask and the tests against it (x == -inf) mean them
            values = _torch().where(values.isinf(), values, values.clamp(-F16_MAX, F16_MAX))
        dense = DenseValue.from_torch(values.to({"bf16": _torch().bfloat16, "f16": _torch().float16}[dtype]))
        with ir.InsertionPoint.after(constant):
            return create("constant", [], {"value": dense}, loc=constant.location).results[0]

    # ------------------------------------------------------------ the rewrite

    def run(self) -> None:
        for arg in self.block.arguments:
            self.original[arg] = _dtype(arg)
        for op in self.ops:
            for r in op.results:
                self.original[r] = _dtype(r)
            if op.name == "func.return" or not op.name.startswith("sdc.") or op.name in weight_ops():
                self._restore_operands(op)
                continue
            if op.results and all(self.is_weight(r) for r in op.results):
                continue  # computed at compile time, in f32; readers take its low version
            self._lower(op, self._compute_dtype(op))

    def _compute_dtype(self, op: ir.Operation) -> str | None:
        """The dtype the op's f32 operands and results take (None: keep the declared ones)."""
        kind = policy(op.name)
        if kind == "keep":
            return None
        if op in self.chain_f32:
            return SOURCE
        if kind == "low" and op.results and all(tensor_spec(r.type).rank == 0 for r in op.results):
            return SOURCE  # scalar arithmetic costs nothing low; a loss (`sum / count`) stays f32, as under autocast
        if kind == "low":
            return self.low
        # Follow the operands (an op without f32 operands, such as an f32 iota, keeps its types);
        # weights take any dtype for free, so they do not vote.
        source = [v for v in op.operands if self.original_dtype(v) == SOURCE]
        if not source:
            return None
        return SOURCE if any(_dtype(v) == SOURCE and not self.is_weight(v) for v in source) else self.low

    def _lower(self, op: ir.Operation, dtype: str | None) -> None:
        if dtype is None:
            self._restore_operands(op)
            return
        for i, v in enumerate(list(op.operands)):
            if self.original_dtype(v) == SOURCE:
                op.operands[i] = self.as_dtype(v, dtype)
        for r in op.results:
            if self.original[r] == SOURCE:
                r.set_type(_with_dtype(r.type, dtype))

    def _restore_operands(self, op: ir.Operation) -> None:
        for i, v in enumerate(list(op.operands)):
            want = self.original_dtype(v)
            if _dtype(v) != want:
                op.operands[i] = self.as_dtype(v, want)

    def erase_dead_constants(self) -> None:
        """Constants whose every reader now takes their low copy."""
        for op in self.ops:
            if op.name == "sdc.constant" and not list(op.results[0].uses):
                op.erase()


def _torch():
    import torch

    return torch


@dataclass(frozen=True)
class MixedPrecisionPass(ModulePass):
    """Options:
    precision   bf16 | f16 (compute in that dtype where safe) | tf32 | f32 (no dtype changes);
                default bf16. The module records it as `sdc.precision`.
    """

    name = "sdc-mixed-precision"
    summary = "compute an f32 program in bf16/f16 where safe (f32 for softmax, norms, reductions)"

    precision: str = "bf16"
    always_written = ("precision",)

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise PassOptionError(f"pass '{self.name}' option 'precision': unknown precision "
                                  f"'{self.precision}' (precisions: {', '.join(PRECISIONS)})")

    def run(self, module: ir.Operation, diag: DiagnosticSink) -> None:
        fusions = walk_ops(module, "sdc.fusion")
        if fusions:
            diag.error(fusions[0], "sdc-mixed-precision runs before sdc-fuse: found 'sdc.fusion'")
            return
        if PRECISION_ATTR in module.attributes:
            recorded = module.attributes[PRECISION_ATTR]
            found = ir.StringAttr(recorded).value if isinstance(recorded, ir.StringAttr) else str(recorded)
            if found != self.precision:
                diag.error(module, f"the module already computes in {found}, cannot change it to "
                                   f"{self.precision}")
                return
            # Lowered before: leave it. A training step is lowered before sdc-autodiff, and the f32
            # optimizer update added after it must stay f32 (fp32 master weights, docs/training.md).
            return
        if self.precision in LOW_DTYPES:
            for fn in walk_ops(module, "func.func"):
                if not fn.regions[0].blocks:
                    continue
                lowering = _Lowering(fn, self.precision)
                lowering.run()
                lowering.erase_dead_constants()
        module.attributes[PRECISION_ATTR] = ir.StringAttr.get(self.precision)
