"""Pass pipelines as text: `sdc-verify,sdc-canonicalize{fold=false},cse,func.func(cse)`.

sdc passes and upstream MLIR passes mix freely; sdc-opt, the compile driver and the tests all
build their PassManagers here. The compile pipeline of each target is named here too
(`COMPILE_PIPELINES`, `compile_passes(options)`): the driver runs what this table says. Its
elements are pass objects with typed options, built once from the `CompileOptions` (an upstream
pass, `cse`, stays its text); `compile_pipeline(options)` is the same pipeline as text, which the
manifest records and sdc-opt reads.
"""

from __future__ import annotations

import re
from typing import Callable, Union

from sdc.diagnostics import DiagnosticSink, PipelineError, SdcError
from sdc.mlir import MLIRError, PassManager
from sdc.options import CompileOptions
from sdc.target import TARGETS
from sdc.transforms import PASSES, get_pass
from sdc.transforms.base import ModulePass, PassOptionError

PipelineElement = Union[ModulePass, str]
"""One pass of a pipeline: an sdc pass object (its options typed), or an upstream pass's text (`cse`)."""


def split_pipeline(text: str) -> list[str]:
    """Split a pipeline on top-level commas (commas inside {} or () belong to an element)."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "{(":
            depth += 1
        elif ch in "})":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur).strip())
    return [p for p in parts if p]


_ELEMENT = re.compile(r"^([A-Za-z0-9_.\-]+)(?:\{(.*)\})?$", re.S)


def parse_options(text: str) -> dict[str, str]:
    """`key=value` pairs separated by spaces or commas. A double-quoted stretch is taken as it is
    (`input-shape="x=B,3,224,224 B=1..64"`), and a comma-separated piece without `=` continues the
    previous value (`input-shape=x=B,3,224,224`)."""
    options: dict[str, str] = {}
    last = None
    for item, after_comma in _option_items(text or ""):
        if "=" not in item:
            if after_comma and last is not None:
                options[last] += "," + item
                continue
            raise PipelineError(f"pass option '{item}' is not of the form key=value")
        key, value = item.split("=", 1)
        last = key.strip()
        options[last] = value.strip()
    return options


def _option_items(text: str) -> list[tuple[str, bool]]:
    """Items split on spaces and commas outside double quotes (quotes dropped), each with whether a comma preceded it."""
    items: list[tuple[str, bool]] = []
    cur: list[str] = []
    quoted = False
    after_comma = pending_comma = False
    for ch in text:
        if ch == '"':
            quoted = not quoted
            continue
        if not quoted and (ch.isspace() or ch == ","):
            if cur:
                items.append(("".join(cur), after_comma))
                cur = []
                pending_comma = False
            pending_comma |= ch == ","
            continue
        if not cur:
            after_comma = pending_comma
        cur.append(ch)
    if quoted:
        raise PipelineError(f"pass options '{text}' have an unclosed quote")
    if cur:
        items.append(("".join(cur), after_comma))
    return items


def build_pipeline(pipeline: str, sink: DiagnosticSink) -> PassManager:
    """A PassManager on builtin.module running the pipeline's elements in order."""
    pm = PassManager("builtin.module")
    for element in split_pipeline(pipeline or ""):
        m = _ELEMENT.match(element)
        if m and m.group(1) in PASSES:
            try:
                get_pass(m.group(1)).from_options(parse_options(m.group(2))).add_to(pm, sink)
            except PassOptionError as e:
                raise PipelineError(str(e)) from None
            continue
        if m and m.group(1).startswith("sdc-"):
            raise PipelineError(f"unknown pass '{m.group(1)}' (sdc-opt --list-passes lists them)")
        try:
            pm.add(element)
        except (ValueError, MLIRError) as e:
            raise PipelineError(f"invalid pass pipeline element '{element}': {_mlir_reason(e)}") from None
    return pm


def element_text(element: PipelineElement) -> str:
    """The pipeline text of one element (`sdc-fuse{target=cuda}`, `cse`)."""
    return element.pipeline_text() if isinstance(element, ModulePass) else element


def element_pass_manager(element: PipelineElement, sink: DiagnosticSink) -> PassManager:
    """A PassManager running one element: a pass object as it is, text through `build_pipeline`."""
    if not isinstance(element, ModulePass):
        return build_pipeline(element, sink)
    pm = PassManager("builtin.module")
    element.add_to(pm, sink)
    return pm


def _mlir_reason(e: Exception) -> str:
    """MLIR's reason for refusing a pipeline element, on one line."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    errors = [ln.split("error:", 1)[1].strip() for ln in lines if "error:" in ln]
    return errors[0] if errors else "; ".join(lines)


# ---------------------------------------------------------------- the compile pipelines


SHAPES = "sdc-shape-constraints"
SHARDING: tuple[str, ...] = ("sdc-sharding-propagation", "sdc-spmd-partition")


def sdc_pass(name: str, **options) -> ModulePass:
    """The registered sdc pass `name` with typed `options` (its dataclass fields)."""
    return get_pass(name)(**options)


def shape_constraints(options: CompileOptions) -> ModulePass:
    """The shape pass, given the options' input shapes (each read by the one binding parser)."""
    from sdc.dialect.bindings import parse_binding

    bindings = tuple(parse_binding(f"{name}={','.join(str(d) for d in value) if isinstance(value, tuple) else value}")
                     for name, value in options.input_shapes)
    return sdc_pass(SHAPES, input_shape=bindings)


PipelineBuilder = Callable[[CompileOptions, bool], tuple[PipelineElement, ...]]


def sharding(sharded: bool) -> tuple[ModulePass, ...]:
    """Propagation and partitioning, for a module with a device mesh (nothing otherwise)."""
    return tuple(sdc_pass(name) for name in SHARDING) if sharded else ()


def mixed_precision(options: CompileOptions) -> tuple[ModulePass, ...]:
    """The mixed-precision pass when the options compute in anything but f32 (nothing otherwise)."""
    return () if options.precision == "f32" else (sdc_pass("sdc-mixed-precision", precision=options.precision),)


def recompute(options: CompileOptions) -> tuple[ModulePass, ...]:
    """Recomputation under the options' memory budget (nothing without one). It runs after sdc-fuse,
    on kernel groups, so the lifetimes it plans are those of the values the memory plan places."""
    if options.memory_budget is None:
        return ()
    return (sdc_pass("sdc-recompute", memory_budget=options.memory_budget),)


def _graph_pipeline(target: str) -> PipelineBuilder:
    """The pipeline the cpu and cuda targets share today, with `target`'s layouts and fusion. On cuda
    the planner then generates Triton kernels for the groups its templates fit (sdc/codegen/triton);
    a target whose passes differ gets a builder of its own in COMPILE_PIPELINES."""

    def build(options: CompileOptions, sharded: bool) -> tuple[PipelineElement, ...]:
        return (
            sdc_pass("sdc-verify"),
            sdc_pass("sdc-canonicalize"),
            "cse",
            sdc_pass("sdc-patch-conv"),
            shape_constraints(options),
            *sharding(sharded),
            # Graph rewrites that need the shapes (and the partition) and change what layouts and
            # fusion see go here, one line each: folding batch norm into convolutions, for one.
            sdc_pass("sdc-fold-conv-batch-norm"),
            *mixed_precision(options),
            sdc_pass("sdc-layout-constraints", target=target),
            sdc_pass("sdc-fuse", target=target),
            *recompute(options),
            sdc_pass("sdc-verify"),
        )

    return build


COMPILE_PIPELINES: dict[str, PipelineBuilder] = {
    "cpu": _graph_pipeline("cpu"),
    "cuda": _graph_pipeline("cuda"),
}
"""Target name -> its compile pipeline, given the options and whether the module has a device mesh."""


def compile_passes(options: CompileOptions, sharded: bool = False) -> tuple[PipelineElement, ...]:
    """The passes that compile for `options.target`, each with its options built once, one element
    per pass (so the driver can dump the IR after each); `sharded`: the module has a device mesh, so
    it is partitioned."""
    builder = COMPILE_PIPELINES.get(options.target)
    if builder is None:  # a target in the registry without a pipeline here is sdc's bug, not the user's
        raise SdcError(f"target '{options.target}' has no compile pipeline (pipelines: "
                       f"{', '.join(COMPILE_PIPELINES)}; targets: {', '.join(TARGETS)})")
    return builder(options, sharded)


def compile_pipeline(options: CompileOptions, sharded: bool = False) -> tuple[str, ...]:
    """`compile_passes` as pipeline text, one element per pass (what the manifest records)."""
    return tuple(element_text(e) for e in compile_passes(options, sharded))
