"""The kernel IR: what one kernel group of the plan becomes before any backend renders it.

A `KernelProgram` is a list of primitive nodes (loads of kernel arguments, constants, elementwise ops
named as sdc names them, casts, row reductions `sum`/`max`/`min`, the row length, and a template's
anchor node: `dot`, `conv`, `attention`) over one index *domain*, plus how each tensor argument and
result maps onto that domain. `KernelProgram.dump()` prints it, for `--dump-ir` and for reading a
failing kernel. The lowering that builds it is `sdc.codegen.kernel.templates.lower_group`; each
backend's renderer (sdc/codegen/{triton,c,cuda}/) turns it into source text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

# the templates: how the domain is laid out and what the kernel iterates (sdc/codegen/kernel/templates.py)
ELEMENTWISE, ROW, MATMUL, CONV, ATTENTION = "elementwise", "row", "matmul", "conv", "attention"

# dtypes a generated kernel loads, computes and stores (torch has no arithmetic for the wide unsigned ones)
KERNEL_DTYPES = frozenset({"f16", "bf16", "f32", "f64", "i1", "i8", "i16", "i32", "i64", "ui8"})


class LoweringError(Exception):
    """The group is outside what a template or a renderer handles; the message says why."""


@dataclass
class Node:
    """One primitive of the kernel: `op` is `load`, `const`, `cast`, `rowlen`, a reduction (`sum`,
    `max`, `min`) or an elementwise sdc op name; `dtype` is the logical element type of its value."""

    id: int
    op: str
    args: tuple[int, ...]
    dtype: str
    row: bool = True  # varies along the domain's last dim (always True in the elementwise template)
    attrs: dict = field(default_factory=dict)
    arg: int | None = None  # load: the kernel argument it reads
    value: Any = None  # const: a Python number

    @property
    def reduction(self) -> bool:
        """A reduction over the row (`_reduce`: one operand, not itself per element); the binary
        elementwise `max` / `min` share its op names."""
        return self.op in ("sum", "max", "min") and len(self.args) == 1 and not self.row


@dataclass(frozen=True)
class TensorArg:
    """A tensor the kernel reads or writes: `map[j]` is the domain dim that dim j of the value is
    indexed by (None: the value has size 1 there). `layout`: a result's physical dim order."""

    value: str
    dtype: str
    map: tuple[int | None, ...]
    layout: tuple[int, ...] | None = None


@dataclass
class KernelProgram:
    template: str
    domain: tuple[int | None, ...]  # static sizes, None where the size is known at run time only
    args: list[TensorArg]
    results: list[tuple[TensorArg, int]]  # (the result, the node whose value it stores)
    nodes: list[Node]
    ops: list[str]  # the sdc ops it computes, for the kernel's header
    # the leading domain dims the grid runs over (None: all); the dims after them are the sizes of the
    # tables a `gather` node indexes (elementwise template only)
    iterated: int | None = None

    def dump(self) -> str:
        """The kernel IR as text, one node a line."""
        lines = [f"template {self.template}, domain {list(self.domain)}"
                 + (f", iterated {self.iterated}" if self.iterated is not None else "")]
        for i, a in enumerate(self.args):
            lines.append(f"  arg a{i}: {a.value} {a.dtype} map {list(a.map)}")
        for n in self.nodes:
            what = (f"a{n.arg}" if n.op == "load" else f"a{n.arg}, %{n.args[0]}" if n.op == "gather"
                    else repr(n.value) if n.op == "const"
                    else ", ".join(f"%{a}" for a in n.args))
            attrs = f" {n.attrs}" if n.attrs else ""
            lines.append(f"  %{n.id} = {n.op}({what}){attrs} : {n.dtype}{'' if n.row else ' (per row)'}")
        for r, node in self.results:
            lines.append(f"  store %{node} -> {r.value} map {list(r.map)}"
                         + (f" layout {list(r.layout)}" if r.layout else ""))
        return "\n".join(lines)


WeightLookup = Callable[[str], Any]  # value id -> its tensor when it is a weight, else None




@dataclass(frozen=True)
class GeneratedKernel:
    """One kernel group as a backend renders it: its program, the source text, and plan.json's launch
    `kernel` object less `source` (the planner names the file)."""

    program: KernelProgram
    source: str
    kernel: dict
