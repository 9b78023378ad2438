"""The template registry: which kernel template a group's ops take, and `lower_group`, the lowering
of one kernel group to its `KernelProgram`.

Each template has one module here: `conv.py` (an implicit GEMM with its epilogue), `attention.py`
(softmax(Q K^T) V as one flash kernel), `matmul.py` (a product with its epilogue) and `lowering.py`
(the `elementwise` and `row` templates, and the base class the others build on). `TEMPLATES` lists
them in the order they are tried: the first whose `claims` accepts a group's ops lowers it, and a
group the template refuses raises `LoweringError` (it keeps the reference backend; no other template
is tried: each claims only what no later one could do better).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from sdc.codegen.kernel.attention import is_attention, lower_attention
from sdc.codegen.kernel.conv import lower_conv
from sdc.codegen.kernel.lowering import _decoded, _Lowering
from sdc.codegen.kernel.matmul import _MatmulLowering
from sdc.codegen.kernel.program import ATTENTION, CONV, ELEMENTWISE, MATMUL, ROW, KernelProgram, WeightLookup

Ops = Sequence[Mapping]


def _names(ops: Ops) -> list[str]:
    return [e["op"] for e in ops]


@dataclass(frozen=True)
class Template:
    """A kernel template: `claims(ops)` says whether a group is this template's to lower, `lower(...)`
    lowers it (the arguments of `lower_group`, less `supported` named)."""

    name: str
    claims: Callable[[Ops], bool]
    lower: Callable[..., KernelProgram]


def _lower_matmul(ops, inputs, outputs, values, supported, weight, input_precision) -> KernelProgram:
    return _MatmulLowering(ops, inputs, outputs, values, supported, weight, input_precision).run()


def _lower_rows(ops, inputs, outputs, values, supported, weight, input_precision) -> KernelProgram:
    return _Lowering(ops, inputs, outputs, values, supported, weight).run()


TEMPLATES: tuple[Template, ...] = (
    Template(CONV, lambda ops: "conv" in _names(ops), lower_conv),
    Template(ATTENTION, is_attention, lower_attention),
    Template(MATMUL, lambda ops: "matmul" in _names(ops), _lower_matmul),
    # the elementwise template, or the row template when the group holds a row reduction
    Template(f"{ELEMENTWISE}/{ROW}", lambda ops: True, _lower_rows),
)


def template_of(ops: Ops) -> Template:
    """The template that lowers a group with these ops."""
    return next(t for t in TEMPLATES if t.claims(ops))


def lower_group(ops: Ops, inputs: Sequence[str], outputs: Sequence[str], values: Mapping[str, Mapping],
                supported: frozenset[str], weight: WeightLookup = lambda vid: None,
                input_precision: str = "ieee") -> KernelProgram:
    """The kernel IR of one kernel group; LoweringError when its template or the renderer cannot take it.

    `supported`: the elementwise op names the renderer can render; `weight(vid)` gives a weight's
    tensor, so that one-element weights become constants in the source; `input_precision`: how a
    matmul of f32 operands uses the tensor cores (`lowering.DOT_PRECISIONS`)."""
    ops = [_decoded(e) for e in ops]
    return template_of(ops).lower(ops, inputs, outputs, values, supported, weight, input_precision)
