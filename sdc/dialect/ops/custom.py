"""`sdc.custom`: an op the user registered with `sdc.custom_op` (sdc/dialect/custom_registry.py).

One generic op rather than an op per registration: the dialect's ops are fixed when it loads,
and the IR text, plan.json and an artifact then carry only the registered name (plus the
attributes as JSON), which any process that made the same registration can run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sdc import dtypes
from sdc.dialect import custom_registry
from sdc.diagnostics import SdcError
from sdc.dialect.derivatives import RuleError
from sdc.dialect.hooks import OpKind
from sdc.dialect.opdef import OpDef, attr, register
from sdc.dialect.shapes import ShapeContext, ShapeError, TensorSpec
from sdc.lazy import lazy_import

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_import("torch")

CUSTOM = "custom"
# IRDL gives every member of a variadic group one type, so the operands and results are optional
# slots, each typed on its own (OpDef.operand_slots); the op uses the first n of them.
MAX_INPUTS = 8
MAX_RESULTS = 4


def _registered(name: str) -> custom_registry.CustomOp:
    try:
        return custom_registry.lookup(name)
    except SdcError as e:
        raise ShapeError(str(e)) from None


def _custom_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    op = _registered(attrs["name"])
    if len(ins) > MAX_INPUTS:
        ctx.fail(f"custom op '{op.name}' has {len(ins)} inputs; sdc.custom takes at most {MAX_INPUTS}")
    results = op.infer(ins, custom_registry.decode_attributes(attrs["attributes"]))
    if len(results) > MAX_RESULTS:
        ctx.fail(f"custom op '{op.name}' has {len(results)} results; sdc.custom gives at most {MAX_RESULTS}")
    return results


def _custom_ref(env, a, *inputs):
    op = custom_registry.lookup(a["name"])
    return op.run(inputs, custom_registry.decode_attributes(a["attributes"]))


def _custom_vjp(b, ins, outs, attrs, cts):
    """The backward of a custom op: one `sdc.custom` of its `<name>.vjp` (registered with the
    derivative) on the inputs and the results' cotangents, giving the float inputs' gradients."""
    name = attrs["name"]
    if not custom_registry.is_registered(name):
        raise RuleError(custom_registry.not_registered_message([name]))
    if custom_registry.lookup(name).derivative is None:
        raise RuleError(f"custom op '{name}' has no derivative (register it with "
                        "sdc.custom_op(..., derivative=...))")
    wanted = [i for i, v in enumerate(ins) if dtypes.is_float(b.spec(v).dtype)]
    if not wanted:
        return [None] * len(ins)
    with_ct = [j for j, g in enumerate(cts) if g is not None]
    operands = list(ins) + [cts[j] for j in with_ct]
    if len(operands) > MAX_INPUTS or len(wanted) > MAX_RESULTS:
        raise RuleError(f"the backward of custom op '{name}' takes {len(operands)} tensors and gives {len(wanted)} "
                        f"gradients; sdc.custom takes at most {MAX_INPUTS} and gives at most {MAX_RESULTS}")
    user = custom_registry.decode_attributes(attrs["attributes"])
    if custom_registry.VJP_META in user:
        raise RuleError(f"custom op '{name}' has an attribute '{custom_registry.VJP_META}', a name sdc reserves for "
                        "its backward")
    user[custom_registry.VJP_META] = [len(ins), len(outs), with_ct, wanted]
    grads = b.ops(CUSTOM, *operands, name=custom_registry.vjp_name(name),
                  attributes=custom_registry.encode_attributes(name, user))
    out: list = [None] * len(ins)
    for i, g in zip(wanted, grads):
        out[i] = g
    return out


register(OpDef(
    name=CUSTOM, kind=OpKind.CUSTOM,
    summary="a user-registered op (sdc.custom_op)",
    doc=("Runs the op registered under `name` with `sdc.custom_op` (see docs/custom-ops.md): its shape rule "
         "gives the result types and its reference computes the values, both looked up by name in the running "
         "process, which must have made the registration. `attributes` holds the op's attributes as a JSON "
         "object; the reference and the shape rule receive them as keyword arguments. A gradient flows through "
         "it when the op was registered with a derivative: sdc-autodiff emits an `sdc.custom` of `<name>.vjp`."),
    operands=("input",), variadic_operand=True, results=("result",), variadic_results=True,
    operand_slots=MAX_INPUTS, result_slots=MAX_RESULTS,
    attrs={
        "name": attr("str", doc="the registered name, `namespace::op`"),
        "attributes": attr("str", default="{}", doc="the op's attributes, a JSON object"),
    },
    shape=_custom_rule, ref=_custom_ref, vjp=_custom_vjp,
    example=('%2 = "sdc.custom"(%0, %1) {attributes = "{\\"scale\\":0.5}", name = "example::scaled_tanh", '
             "operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>} "
             ": (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>"),
))


# The op the example above (and docs/dialect.md's, which is checked to verify) runs: x's tanh times
# the broadcast w, times `scale`. The `example` namespace is sdc's; users register in their own.
custom_registry.custom_op(
    "example::scaled_tanh",
    shape=lambda x, w, *, scale: x,
    reference=lambda x, w, *, scale: torch.tanh(x) * w * scale,
)
