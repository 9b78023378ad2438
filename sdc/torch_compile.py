"""`torch.compile(model, backend="sdc")`: each graph Dynamo captures is compiled by sdc.

Dynamo hands the backend a `torch.fx.GraphModule` of torch-level calls and example inputs; the
backend exports it to core ATen (the same path as `sdc.compile`), compiles it to an artifact and
returns a callable that runs the artifact. A graph with an op sdc lacks fails with the one error
that lists every such op and its source line; only `options={"fallback": "eager"}` lets such a
graph run in eager PyTorch instead (and says so in the log). `STATS` counts the graphs compiled
and the graphs that fell back, so a graph break shows as a second graph:

    model = torch.compile(model, backend="sdc")
    model(x)
    sdc.torch_compile.STATS.graphs   # 1, or more with graph breaks

The backend is registered under the name "sdc" both as a `torch_dynamo_backends` entry point
(pyproject.toml) and, for an install without it, when this module is imported. It is a driver
(it compiles each graph through sdc.compiler), so it lives above the frontends: the torch frontend
does not import it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from sdc.diagnostics import SdcError

log = logging.getLogger("sdc.torch.compile")

FALLBACKS = ("none", "eager")


@dataclass
class CompileStats:
    """What the backend did since the last `reset()`: graphs compiled by sdc, graphs run eagerly."""

    graphs: int = 0
    fallbacks: int = 0
    errors: list[str] = field(default_factory=list)

    def reset(self) -> None:
        self.graphs, self.fallbacks, self.errors = 0, 0, []


STATS = CompileStats()


def sdc_backend(gm: torch.fx.GraphModule, example_inputs: list, *, options: dict | None = None,
                mode: str | None = None) -> Callable:
    """The "sdc" Dynamo backend. `options` (torch.compile's `options=`): `fallback` ("none" or
    "eager"), and any `sdc.options.CompileOptions` field (`target`, ...). `mode` is ignored."""
    options = dict(options or {})
    fallback = options.pop("fallback", "none")
    if fallback not in FALLBACKS:
        raise SdcError(f"torch.compile option fallback must be one of {', '.join(FALLBACKS)}, found {fallback!r}")
    try:
        runner = compile_graph(gm, example_inputs, **options)
    except SdcError as e:
        STATS.errors.append(str(e))
        if fallback != "eager":
            raise
        STATS.fallbacks += 1
        log.warning("sdc: graph %d runs in eager PyTorch: %s", STATS.graphs + STATS.fallbacks, e)
        return gm.forward
    STATS.graphs += 1
    log.info("sdc: compiled graph %d", STATS.graphs)
    return runner


def compile_graph(gm: torch.fx.GraphModule, example_inputs: list, **options: Any) -> Callable:
    """Compile one Dynamo graph (static shapes: Dynamo recompiles when they change) into a callable
    that returns what the graph returns (a tuple of tensors)."""
    from sdc.compiler import compile_module
    from sdc.frontend.torch.export import export_program
    from sdc.frontend.torch.importer import import_program
    from sdc.options import CompileOptions

    if any(not isinstance(x, torch.Tensor) for x in example_inputs):
        kinds = sorted({type(x).__name__ for x in example_inputs if not isinstance(x, torch.Tensor)})
        raise SdcError(f"graph inputs of type {', '.join(kinds)} are unsupported (compile with dynamic=False)")
    program = export_program(gm, tuple(example_inputs))
    imported = import_program(program)
    exe = compile_module(imported.module, imported.params, CompileOptions.of(**options),
                         provenance={"source": "<torch.compile graph>", "frontend": "torch"})
    returns_tuple = _returns_tuple(gm)

    def run(*args: torch.Tensor) -> Any:
        outs = exe(*args)
        return tuple(outs) if returns_tuple else outs[0]

    run._sdc_executable = exe  # keeps the artifact alive; inspectable in tests
    return run


def _returns_tuple(gm: torch.fx.GraphModule) -> bool:
    output = next(n for n in gm.graph.nodes if n.op == "output")
    return isinstance(output.args[0], (list, tuple))


def register() -> None:
    """Register "sdc" with Dynamo unless the installed entry point names this function (Dynamo loads
    it then, and registering twice fails). An entry point of an older install, naming another
    module, is not trusted: this registers the backend itself."""
    from importlib.metadata import entry_points

    from torch._dynamo.backends import registry

    if "sdc" in registry._COMPILER_FNS:
        return
    ours = f"{__name__}:{sdc_backend.__name__}"
    if any(ep.name == "sdc" and ep.value == ours for ep in entry_points(group="torch_dynamo_backends")):
        return
    registry.register_backend(sdc_backend, name="sdc")


register()
