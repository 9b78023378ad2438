"""The one place sdc imports the MLIR Python bindings.

Every other module takes `ir`, `passmanager`, `rewrite`, `ext`, `func` and
`arith` from here, so moving to another distribution of the same upstream
bindings changes this file only. The runtime (`sdc.runtime`) never imports it.
"""

from __future__ import annotations

import sys
import types

from torch_mlir import ir, passmanager, rewrite  # noqa: F401
from torch_mlir.dialects import arith, ext, func  # noqa: F401

# Each time the bindings wrap an op they look up its dialect's Python module
# (`torch_mlir.dialects.<name>`), and they do not remember a miss. sdc's ops come from
# dialects.ext, so that module does not exist and every op visited cost a failed import
# (a tenth of a millisecond): an empty module ends the search. Op classes still come from
# the ext registration.
sys.modules.setdefault("torch_mlir.dialects.sdc", types.ModuleType("torch_mlir.dialects.sdc"))


def stablehlo():
    """The StableHLO dialect's bindings (`register_dialect`, its attribute classes), imported on
    first use: only the JAX/StableHLO frontend needs them, and the import costs start-up time."""
    from torch_mlir._mlir_libs import _stablehlo

    return _stablehlo


PassManager = passmanager.PassManager
MLIRError = ir.MLIRError

__all__ = ["ir", "passmanager", "rewrite", "ext", "func", "arith", "PassManager", "MLIRError", "stablehlo"]
