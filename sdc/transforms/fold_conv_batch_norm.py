"""sdc-fold-conv-batch-norm: an inference batch norm of a convolution's result becomes part of the
convolution's weight and a per-channel bias; any other, a per-channel scale and shift.

    y = conv(x, w) [+ b];  z = batch_norm(y, gamma, beta, mean, var)

becomes, with scale = gamma / sqrt(var + epsilon),

    z = conv(x, w * scale[:, None, ...]) + reshape((b - mean) * scale + beta, [1, C, 1, ...])

Weight values are not in the IR (an `sdc.parameter` names its weight), so the new weight and bias
are IR ops on the parameters: `sdc.sqrt`, `sdc.div`, `sdc.mul`, `sdc.sub`, `sdc.add`, `sdc.reshape`
and one `sdc.constant` (epsilon). Every operand of those ops is a weight, so the planner evaluates
them at compile time and the artifact stores the folded weights (sdc/codegen/plan.py); the
convolution plus its bias add is one reference kernel there. The result equals the unfolded program
up to float rounding (the folded weights round once more).

It applies where:
- the batch norm's input is an `sdc.conv` result, or an `sdc.add` of one and a per-channel weight
  (shape [1, C, 1, ...], [C, 1, ...] or one element: an ONNX Conv's bias), each read only by the next op;
- the convolution's weight, the bias and the four batch-norm operands are computed from weights
  alone (parameters and constants), so the folding costs nothing at run time;
- everything has one float dtype (f16, f32 or f64), and the weight's output channels are static.

Then a per-channel scale or shift by weights after a convolution (what exporters leave after a
batch norm, e.g. Inception-v2's Mul and Add after each conv + BN) folds too:

    mul(conv(x, w) [+ b], s)  ->  conv(x, w * s[:, None, ...]) [+ b * s]
    add(conv(x, w) + b, t)    ->  conv(x, w) + (b + t)

where `s` and `t` are per-channel weights (the shapes a bias may have, above), the convolution's
weight is a weight, the result has the convolution's type (nothing broadcasts it), and each
intermediate is read only by the next op. A bare `add(conv, t)` is already a bias: the planner
takes it into the convolution.

Any other inference batch norm whose four statistics are weights becomes a per-channel scale and
shift, both computed from the parameters at compile time as above:

    z = batch_norm(x, gamma, beta, mean, var)  ->  z = x * reshape(scale, [1, C, 1, ...]) + reshape(shift, [1, C, 1, ...])

with shift = beta - mean * scale: a multiply-add per element where the batch norm's kernel took a
square root and a division (DenseNet-121's 58 batch norms after its concatenations, which no
convolution precedes, took 18 ms of an 82 ms call on one thread as C kernels).

Anything else is left as it is. It emits no errors. Run it before sdc-layout-constraints and
sdc-fuse (it changes what they see: a convolution and an add instead of a batch norm).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sdc.diagnostics import DiagnosticSink
from sdc.dialect.dense import DenseValue
from sdc.dialect.ir import defining_op, read_attrs, tensor_spec
from sdc.dialect.builder import create
from sdc.dialect.opdef import OPS, weight_ops
from sdc.mlir import ir
from sdc.transforms.base import ModulePass, walk_ops

NUMPY_FLOATS = ("f16", "f32", "f64")  # float dtypes whose epsilon constant numpy can spell (not bf16)


def _single_use(value: ir.Value) -> bool:
    return len(list(value.uses)) == 1


class WeightValues:
    """Which values are computed from weights alone (memoized per op)."""

    def __init__(self):
        self.known: dict[ir.Operation, bool] = {}

    def __call__(self, value: ir.Value) -> bool:
        op = defining_op(value)
        if op is None:
            return False
        if op in self.known:
            return self.known[op]
        self.known[op] = False  # a cycle cannot happen in SSA; this only stops recursion on odd IR
        if op.name in weight_ops():
            result = True
        else:
            opdef = OPS.get(op.name[4:]) if op.name.startswith("sdc.") else None
            # all_slice of a weight is a weight too: the planner cuts each rank's block at compile time
            result = (opdef is not None and opdef.folds and len(op.operands) > 0
                      and all(self(v) for v in op.operands))
        self.known[op] = result
        return result


def per_channel_bias(add: ir.Operation, y: ir.Value, channels: int, dtype: str, is_weight: WeightValues):
    """The operand that `add` adds to `y` when it is one weight value per channel, else None."""
    if len(add.operands) != 2 or add.results[0].type != y.type:
        return None
    lhs, rhs = add.operands
    other = rhs if lhs == y else lhs if rhs == y else None
    if other is None or other == y or not is_weight(other):
        return None
    spec = tensor_spec(other.type)
    rank = tensor_spec(y.type).rank
    if spec.dtype != dtype or not all(isinstance(d, int) for d in spec.shape):
        return None
    shape = list(spec.shape)
    numel = 1
    for d in shape:
        numel *= d
    if numel == 1 and len(shape) <= rank:
        return other
    if len(shape) == rank and shape[0] == 1:
        shape = shape[1:]
    if len(shape) == rank - 1 and shape[0] == channels and all(d == 1 for d in shape[1:]):
        return other
    return None


def fold(bn: ir.Operation, is_weight: WeightValues) -> bool:
    """Fold one `sdc.batch_norm` into the convolution before it; False when it does not apply."""
    x = bn.operands[0]
    producer = defining_op(x)
    add = bias = None
    if producer is not None and producer.name == "sdc.add" and _single_use(x):
        add = producer
        conv_value = next((v for v in add.operands if (o := defining_op(v)) is not None and o.name == "sdc.conv"), None)
        if conv_value is None:
            return False
        producer = defining_op(conv_value)
    if producer is None or producer.name != "sdc.conv" or not _single_use(producer.results[0]):
        return False
    conv = producer
    w = conv.operands[1]
    w_spec, y_spec = tensor_spec(w.type), tensor_spec(conv.results[0].type)
    channels = w_spec.shape[0]
    if not isinstance(channels, int) or w_spec.dtype not in NUMPY_FLOATS or y_spec.dtype != w_spec.dtype:
        return False
    stats = list(bn.operands[1:5])
    if not is_weight(w) or not all(is_weight(v) for v in stats):
        return False
    if any(tensor_spec(v.type).dtype != w_spec.dtype or tensor_spec(v.type).shape != (channels,) for v in stats):
        return False
    if add is not None:
        bias = per_channel_bias(add, conv.results[0], channels, w_spec.dtype, is_weight)
        if bias is None:
            return False
    with ir.InsertionPoint(bn), bn.location:
        scale, shift = _scale_and_shift(bn, w_spec.dtype)
        column = create("reshape", [scale], {"shape": [channels] + [1] * (w_spec.rank - 1)}).results[0]
        if bias is not None:
            flat = create("reshape", [bias], {"shape": [math.prod(tensor_spec(bias.type).shape)]}).results[0]
            shift = create("add", [create("mul", [flat, scale]).results[0], shift]).results[0]
        row = create("reshape", [shift], {"shape": [1, channels] + [1] * (y_spec.rank - 2)}).results[0]
        weight = create("mul", [w, column]).results[0]
    with ir.InsertionPoint(bn):
        new_conv = create("conv", [conv.operands[0], weight], read_attrs(OPS["conv"], conv), loc=conv.location)
        out = create("add", [new_conv.results[0], row], loc=bn.location)
    bn.results[0].replace_all_uses_with(out.results[0])
    bn.erase()
    if add is not None:
        add.erase()
    conv.erase()
    return True


def _scale_and_shift(bn: ir.Operation, dtype: str) -> tuple[ir.Value, ir.Value]:
    """A batch norm's per-channel scale, gamma / sqrt(var + epsilon), and shift, beta - mean * scale,
    as ops on its operands (at the current insertion point)."""
    gamma, beta, mean, var = bn.operands[1:5]
    epsilon = read_attrs(OPS["batch_norm"], bn)["epsilon"]
    eps = create("constant", [], {"value": DenseValue.from_numpy(_array([epsilon], dtype))}).results[0]
    scale = create("div", [gamma, create("sqrt", [create("add", [var, eps]).results[0]]).results[0]]).results[0]
    shift = create("sub", [beta, create("mul", [mean, scale]).results[0]]).results[0]
    return scale, shift


def fold_alone(bn: ir.Operation, is_weight: WeightValues) -> bool:
    """An `sdc.batch_norm` that `fold` left (of no convolution's result, or of one read again) whose
    statistics are weights -> `x * scale + shift` with per-channel weights; False when it does not apply."""
    x = bn.operands[0]
    x_spec = tensor_spec(x.type)
    if x_spec.rank < 2 or x_spec.dtype not in NUMPY_FLOATS or not isinstance(x_spec.shape[1], int):
        return False
    stats = list(bn.operands[1:5])
    if not all(is_weight(v) for v in stats):
        return False
    if any(tensor_spec(v.type).dtype != x_spec.dtype or tensor_spec(v.type).shape != (x_spec.shape[1],) for v in stats):
        return False
    with ir.InsertionPoint(bn), bn.location:
        scale, shift = _scale_and_shift(bn, x_spec.dtype)
        scaled = create("mul", [x, _row(scale, x_spec.rank)]).results[0]
        out = create("add", [scaled, _row(shift, x_spec.rank)])
    bn.results[0].replace_all_uses_with(out.results[0])
    bn.erase()
    return True


def _conv_and_bias(value: ir.Value, is_weight: WeightValues):
    """`value` as `conv(x, w)` or `add(conv(x, w), bias)` with a per-channel weight bias, where `w` is a
    weight and every intermediate is read once: (conv, add or None, bias or None), else None."""
    producer = defining_op(value)
    if producer is None or not _single_use(value):
        return None
    add = bias = None
    if producer.name == "sdc.add":
        add = producer
        conv_value = next((v for v in add.operands if (o := defining_op(v)) is not None and o.name == "sdc.conv"), None)
        if conv_value is None or not _single_use(conv_value):
            return None
        producer = defining_op(conv_value)
    if producer is None or producer.name != "sdc.conv" or not _single_use(producer.results[0]):
        return None
    w_spec, y_spec = tensor_spec(producer.operands[1].type), tensor_spec(producer.results[0].type)
    channels = w_spec.shape[0]
    if (not isinstance(channels, int) or not is_weight(producer.operands[1]) or y_spec.dtype != w_spec.dtype
            or w_spec.dtype not in NUMPY_FLOATS):
        return None
    if add is not None:
        bias = per_channel_bias(add, producer.results[0], channels, w_spec.dtype, is_weight)
        if bias is None:
            return None
    return producer, add, bias


def _scale_or_shift(op: ir.Operation, is_weight: WeightValues):
    """For `op` (a mul or add) of a convolution chain and a per-channel weight: (chain, the weight)."""
    for value in op.operands:
        chain = _conv_and_bias(value, is_weight)
        if chain is None:
            continue
        conv = chain[0]
        channels = tensor_spec(conv.operands[1].type).shape[0]
        other = per_channel_bias(op, value, channels, tensor_spec(conv.results[0].type).dtype, is_weight)
        if other is not None:
            return chain, other
    return None


def _flat(value: ir.Value) -> ir.Value:
    return create("reshape", [value], {"shape": [math.prod(tensor_spec(value.type).shape)]}).results[0]


def _row(flat: ir.Value, rank: int) -> ir.Value:
    """A flat per-channel vector as [1, C, 1, ...], the shape that adds to a rank-`rank` result."""
    return create("reshape", [flat], {"shape": [1, tensor_spec(flat.type).shape[0]] + [1] * (rank - 2)}).results[0]


def fold_scale(mul: ir.Operation, is_weight: WeightValues) -> bool:
    """`mul(conv(x, w) [+ b], s)` with per-channel weight `s` -> `conv(x, w * s) [+ b * s]`."""
    found = _scale_or_shift(mul, is_weight)
    if found is None:
        return False
    (conv, add, bias), scale = found
    w = conv.operands[1]
    w_rank, y_rank = tensor_spec(w.type).rank, tensor_spec(conv.results[0].type).rank
    with ir.InsertionPoint(mul), mul.location:
        flat = _flat(scale)
        column = create("reshape", [flat], {"shape": [tensor_spec(flat.type).shape[0]] + [1] * (w_rank - 1)})
        weight = create("mul", [w, column.results[0]]).results[0]
        row = _row(create("mul", [_flat(bias), flat]).results[0], y_rank) if bias is not None else None
    with ir.InsertionPoint(mul):
        new_conv = create("conv", [conv.operands[0], weight], read_attrs(OPS["conv"], conv), loc=conv.location)
        out = new_conv if row is None else create("add", [new_conv.results[0], row], loc=mul.location)
    mul.results[0].replace_all_uses_with(out.results[0])
    mul.erase()
    if add is not None:
        add.erase()
    conv.erase()
    return True


def fold_shift(outer: ir.Operation, is_weight: WeightValues) -> bool:
    """`add(conv(x, w) + b, t)` with per-channel weights `b`, `t` -> `conv(x, w) + (b + t)`."""
    found = _scale_or_shift(outer, is_weight)
    if found is None or found[0][1] is None:
        return False
    (conv, add, bias), shift = found
    with ir.InsertionPoint(outer), outer.location:
        row = _row(create("add", [_flat(bias), _flat(shift)]).results[0], tensor_spec(conv.results[0].type).rank)
        out = create("add", [conv.results[0], row])
    outer.results[0].replace_all_uses_with(out.results[0])
    outer.erase()
    add.erase()
    return True


def _array(values: list[float], dtype: str):
    import numpy as np

    return np.asarray(values, dtype={"f16": np.float16, "f32": np.float32, "f64": np.float64}[dtype])


@dataclass(frozen=True)
class FoldConvBatchNormPass(ModulePass):
    """No options."""

    name = "sdc-fold-conv-batch-norm"
    summary = ("fold an inference batch norm, and per-channel scales and shifts, after a convolution into its "
               "weight and a bias")

    def run(self, module: ir.Operation, diag: DiagnosticSink) -> None:
        is_weight = WeightValues()
        for bn in walk_ops(module, "sdc.batch_norm"):
            if not fold(bn, is_weight):
                fold_alone(bn, is_weight)
        # In program order, so a chain conv -> add -> mul -> add folds link by link. A fold erases the
        # ops it replaces, some of which may be later in the list: skip those without touching them.
        erased: set = set()
        for op in walk_ops(module, "sdc."):
            if op in erased or op.name not in ("sdc.mul", "sdc.add"):
                continue
            found = _scale_or_shift(op, is_weight)
            if found is None:
                continue
            (conv, add, _), _ = found
            if op.name == "sdc.add" and add is None:
                continue  # add(conv, t): a bias already
            erased.update(o for o in (conv, add) if o is not None)  # before the fold: an erased op has no hash
            (fold_scale if op.name == "sdc.mul" else fold_shift)(op, is_weight)
            is_weight.known.clear()  # a new op may take an erased op's address, the memo's key
