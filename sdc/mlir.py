"""The one place sdc imports the MLIR Python bindings.

Every other module takes `ir`, `passmanager`, `rewrite`, `ext`, `func` and
`arith` from here, so moving to another distribution of the same upstream
bindings changes this file only. The runtime (`sdc.runtime`) never imports it.
"""

from __future__ import annotations

from torch_mlir import ir, passmanager, rewrite  # noqa: F401
from torch_mlir.dialects import arith, ext, func  # noqa: F401

PassManager = passmanager.PassManager
MLIRError = ir.MLIRError

__all__ = ["ir", "passmanager", "rewrite", "ext", "func", "arith", "PassManager", "MLIRError", "new_context"]


def new_context() -> ir.Context:
    """A fresh context with the sdc dialect loaded and unknown dialects refused."""
    from sdc.dialect.dialect import load_into

    ctx = ir.Context()
    ctx.allow_unregistered_dialects = False
    with ctx, ir.Location.unknown():
        load_into(ctx)
    return ctx
