"""An elementwise node of the kernel IR rendered from its op's scalar formula (`OpDef.scalar`,
sdc/dialect/scalar.py) with a backend's primitives.

A backend has one method that renders a primitive node (`add`, `exp`, `where`, a `const`, ...) from
its operands' text; `inline` walks the formula of a composite op (gelu, silu, clip, ...) and calls
it for every step, so the op's math is written once, in the dialect, and a backend overrides only
primitives (tinygrad's CStyleLanguage, Inductor's OpOverrides). `supported_ops` is the other
direction: the elementwise ops a set of primitives can render, which is what a renderer offers the
lowering (`elementwise_ops()`).

A composite op's operands have its result's type (the formulas of the ops whose operands differ in
type, comparisons and `where`, are one primitive each, rendered as such).
"""

from __future__ import annotations

import functools
from typing import Callable

from sdc.codegen.kernel.program import Node
from sdc.dialect.opdef import all_ops
from sdc.dialect.scalar import PRIMITIVES, Step, operand, primitives_of, steps

RenderPrimitive = Callable[[Node, list[str]], str]  # a primitive or const node and its operands' text -> text


def is_composite(op: str) -> bool:
    """Whether a kernel node of this op is rendered from its formula (not one primitive)."""
    d = all_ops().get(op)
    return op not in PRIMITIVES and d is not None and d.scalar is not None


def expand(n: Node) -> list[Step]:
    """The typed steps of composite node `n`'s formula, with its attributes, the result last."""
    d = all_ops()[n.op]
    attrs = d.with_defaults(n.attrs)
    expr = d.scalar(attrs, *(operand(i, n.dtype) for i in range(len(n.args))))
    return steps(expr, [n.dtype] * len(n.args))


def inline(n: Node, args: list[str], render: RenderPrimitive) -> str:
    """The text of composite node `n` from its operands' text: each step of its formula rendered by
    `render` (its steps are Nodes of id -1 and no args; `row` is n's)."""
    texts: list[str] = []
    for s in expand(n):
        if s.op == "operand":
            texts.append(args[s.value])
        elif s.op == "const":
            texts.append(render(Node(-1, "const", (), s.dtype, n.row, value=s.value), []))
        else:
            texts.append(render(Node(-1, s.op, (), s.dtype, n.row), [texts[a] for a in s.args]))
    return texts[-1]


def primitive_uses(n: Node) -> list[tuple[str, str, str]]:
    """(primitive, result type, last operand's type) of every primitive step of composite node `n`."""
    found = []
    all_steps = expand(n)
    for s in all_steps:
        if s.op not in ("operand", "const"):
            found.append((s.op, s.dtype, all_steps[s.args[-1]].dtype))
    return found


def missing_primitive(n: Node, primitives: frozenset[str]) -> str | None:
    """The first primitive of composite node `n`'s formula (with its attributes) outside `primitives`."""
    return next((p for p, _, _ in primitive_uses(n) if p not in primitives), None)


@functools.cache
def supported_ops(primitives: frozenset[str]) -> frozenset[str]:
    """The elementwise ops whose formula, with the op's default attributes, uses only `primitives`."""
    out = set()
    for name, d in all_ops().items():
        if d.scalar is None:
            continue
        expr = d.scalar(d.with_defaults({}), *(operand(i) for i in range(len(d.operands))))
        if primitives_of(expr) <= primitives:
            out.add(name)
    return frozenset(out)
