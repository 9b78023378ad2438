"""sdc: a static-graph compiler for distributed deep learning.

Public entry points (imported lazily so that `import sdc` and `sdc.runtime` stay free of MLIR):
- `sdc.compile(model, ...)`: compile a model into an artifact and load it (see sdc.compiler).
- `sdc.runtime.load(path)`: load a compiled artifact (no MLIR needed).
- `sdc.interpret(module_or_text, inputs)`: run IR by reference semantics.
- `sdc.shard(tensor, *dims)`: annotate a tensor's sharding over the device mesh (see docs/distributed.md).
"""

from __future__ import annotations

__version__ = "0.1.0"


def interpret(module_or_text, inputs, params=None, **kwargs):
    from sdc.interpreter import interpret as _interpret

    return _interpret(module_or_text, inputs, params, **kwargs)


def compile(model, example_args=None, **kwargs):
    """Compile `model` into an artifact and load it; see `sdc.compiler.compile`."""
    from sdc.compiler import compile as _compile

    return _compile(model, example_args, **kwargs)


def shard(tensor, *dims, partial=()):
    """Annotate how `tensor` is split over the device mesh (see sdc.api_shard)."""
    from sdc.api_shard import shard as _shard

    return _shard(tensor, *dims, partial=partial)


def __getattr__(name: str):
    if name == "runtime":
        import importlib

        return importlib.import_module("sdc.runtime")
    raise AttributeError(f"module 'sdc' has no attribute '{name}'")
