"""sdc: a static-graph compiler for distributed deep learning.

Public entry points (imported lazily so that `sdc.runtime` stays free of MLIR):
- `sdc.interpret(module_or_text, inputs)`: run IR by reference semantics.
"""

from __future__ import annotations

__version__ = "0.1.0"


def interpret(module_or_text, inputs, params=None, **kwargs):
    from sdc.interpreter import interpret as _interpret

    return _interpret(module_or_text, inputs, params, **kwargs)
