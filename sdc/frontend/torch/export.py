"""A torch model as a core-ATen FX graph: `torch.export` plus decompositions, and what we read of it.

`export_program` runs `torch.export.export` (non-strict: the model's Python runs as it is, with
fake tensors) and `run_decompositions` to the core ATen op set, so the importer sees ~190 ops
instead of ~2000 (with every view traced as a reshape: `views_as_reshapes`). Where every node of a
fresh export has a one-node rewrite (local_decomp.py: convolution nets, MLPs), the graph is lowered
in place instead, without the retrace that costs seconds. `source_location`
picks a node's place in the user's code from its stack trace; `check_supported` reports every
ATen op the importer lacks, with those places, in one error before any IR is built.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

import torch
import torch.fx

from sdc.diagnostics import SdcError
from sdc.frontend.torch.local_decomp import lower_locally

_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_SDC_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep  # sdc/

# Nodes that check or constrain sizes: torch.export's own run-time asserts. The shape pass derives
# the checks sdc needs from the ops and the Dim ranges, so the importer skips them.
ASSERT_TARGETS = frozenset({
    "aten._assert_scalar.default", "aten._assert_tensor_metadata.default", "aten.sym_constrain_range.default",
    "aten.sym_constrain_range_for_size.default", "aten._assert_async.msg", "aten._assert_async.default",
    "aten._print.default",
})


def decomposition_table() -> dict:
    """torch.export's core-ATen decompositions, which sdc uses as they are."""
    return torch.export.default_decompositions()


def export_program(model: Any, example_args: Sequence[Any] | None, example_kwargs: dict | None = None,
                   dynamic_shapes: Any = None) -> torch.export.ExportedProgram:
    """An ExportedProgram of core ATen ops for a module (exported here) or an ExportedProgram."""
    if isinstance(model, torch.export.ExportedProgram):
        if example_args is not None or dynamic_shapes is not None:
            raise SdcError("an ExportedProgram carries its own example inputs and dynamic shapes: give neither "
                           "example_args nor dynamic_shapes")
        program = model
    elif isinstance(model, torch.nn.Module):
        if example_args is None:
            raise SdcError(f"compiling a torch {type(model).__name__} needs example_args (a tuple of example "
                           "inputs) to trace it with torch.export")
        args = tuple(example_args) if isinstance(example_args, (list, tuple)) else (example_args,)
        try:
            program = torch.export.export(model, args, dict(example_kwargs or {}), dynamic_shapes=dynamic_shapes,
                                          strict=False)
        except SdcError:
            raise
        except Exception as e:  # torch.export's UserError, constraint violations, data-dependent control flow
            raise SdcError(f"torch.export failed: {_first_line(e)}") from e
    else:
        raise SdcError(f"the torch frontend compiles a torch.nn.Module or a torch.export.ExportedProgram, "
                       f"found {type(model).__module__}.{type(model).__name__}")
    table = decomposition_table()
    if program is not model and lower_locally(program, table) is None:  # our own export: changed in place
        return program
    try:
        with views_as_reshapes(program):
            return program.run_decompositions(table)
    except Exception as e:
        raise SdcError(f"decomposing the exported program to core ATen failed: {_first_line(e)}") from e


@contextlib.contextmanager
def views_as_reshapes(program: torch.export.ExportedProgram) -> Iterator[None]:
    """Every `aten.view` of `program`'s graph traced as `aten.reshape` while it is decomposed.

    A view is legal only for the strides its operand had when torch.export traced it, and a
    decomposition may give that operand other strides: `scaled_dot_product_attention` is one
    kernel with a [B, S, H, D] result at export and a matmul chain with a permuted result once
    decomposed, so GPT-2's `attn.transpose(1, 2).reshape(...).view(-1, d)` no longer views. sdc
    values have no strides and a reshape is a view wherever a view is legal, so nothing changes
    but that the retrace copies where the new strides need it. The graph is restored afterwards:
    the caller's ExportedProgram is left as it was."""
    retargeted = [node for node in program.graph.nodes
                  if node.op == "call_function" and node.target is torch.ops.aten.view.default]
    for node in retargeted:
        node.target = torch.ops.aten.reshape.default
    try:
        yield
    finally:
        for node in retargeted:
            node.target = torch.ops.aten.view.default


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(e).__name__)
    return line if len(line) <= 300 else line[:297] + "..."


# ---------------------------------------------------------------- source locations


@dataclass(frozen=True)
class SourceLoc:
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


def source_location(node: torch.fx.Node) -> SourceLoc | None:
    """The innermost frame of `node`'s stack trace outside torch and sdc (the user's module, or
    the library that defines it); the innermost frame when every one is inside them."""
    trace = node.meta.get("stack_trace")
    if not trace:
        return None
    frames = [(f, int(n)) for f, n in _FRAME.findall(trace)]
    if not frames:
        return None
    outside = [fr for fr in frames if not os.path.abspath(fr[0]).startswith((_TORCH_DIR, _SDC_DIR))
               and not fr[0].startswith("torch/")]
    file, line = (outside or frames)[-1]
    return SourceLoc(_short_path(file), line)


def _short_path(file: str) -> str:
    try:
        rel = os.path.relpath(file)
    except ValueError:
        return file
    return rel if not rel.startswith("..") else file


# ---------------------------------------------------------------- unsupported ops


def op_name(target: Any) -> str:
    """`aten.add.Tensor` for an OpOverload, `operator.getitem` for a Python function."""
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    module = getattr(target, "__module__", None) or ""
    return f"{'operator' if module == '_operator' else module}.{getattr(target, '__name__', repr(target))}"


def custom_op_name(target: Any) -> str | None:
    """`mylib::scaled_tanh` for `torch.ops.mylib.scaled_tanh.<overload>`: the name it has in
    `sdc.custom_op`'s registry; None for ATen ops and Python functions."""
    if isinstance(target, torch._ops.OpOverload) and target.namespace not in ("aten", "prims"):
        return f"{target.namespace}::{target.overloadpacket.__name__}"
    return None


def check_supported(graph: torch.fx.Graph, supports: Callable[[torch.fx.Node], bool]) -> None:
    """One SdcError listing every node whose op the importer lacks: op name and source place
    (a custom op that sdc.custom_op has not registered, by its registry name)."""
    missing: list[str] = []
    for node in graph.nodes:
        if node.op == "call_function" and not supports(node):
            loc = source_location(node)
            custom = custom_op_name(node.target)
            what = f"custom op '{custom}' (not registered with sdc.custom_op)" if custom else op_name(node.target)
            missing.append(f"{what} at {loc if loc else '<unknown>'} (node '{node.name}')")
        elif node.op not in ("placeholder", "output", "call_function", "get_attr"):
            missing.append(f"{node.op} {node.target} (node '{node.name}')")
    if missing:
        listing = "; ".join(_dedup(missing)[:50])
        more = len(_dedup(missing)) - 50
        raise SdcError(f"unsupported ATen op{'s' if len(missing) > 1 else ''} ({len(missing)}): {listing}"
                       + (f"; ... {more} more" if more > 0 else ""))


def _dedup(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)
