"""User-registered ops: `sdc.custom_op(name, shape=..., reference=...)` and the registry's public names.

The registry itself is `sdc.dialect.custom_registry` (docs/custom-ops.md): the dialect's `sdc.custom`
op looks names up there, so the dialect imports nothing above it. This module imports neither the
MLIR bindings nor torch.
"""

from __future__ import annotations

from sdc.dialect.custom_registry import *  # noqa: F401,F403  (the public names, listed in its __all__)
from sdc.dialect.custom_registry import __all__  # noqa: F401
