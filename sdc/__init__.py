"""sdc: a static-graph compiler for distributed deep learning.

Public entry points (imported lazily so that `import sdc` and `sdc.runtime` stay free of MLIR):
- `sdc.compile(model, ...)`: compile a model into an artifact and load it (see sdc.compiler).
- `sdc.runtime.load(path)`: load a compiled artifact (no MLIR needed).
- `sdc.interpret(module_or_text, inputs)`: run IR by reference semantics.
- `sdc.shard(tensor, *dims)`: annotate a tensor's sharding over the device mesh (see docs/distributed.md).
"""

from __future__ import annotations

from sdc.version import __version__  # noqa: F401  (one source: sdc/version.py)


def interpret(module_or_text, inputs, params=None, **kwargs):
    from sdc.interpreter import interpret as _interpret

    return _interpret(module_or_text, inputs, params, **kwargs)


def compile(model, example_args=None, *, dynamic_shapes=None, options=None, output=None, progress=None, **fields):
    """Compile `model` into an artifact and load it; returns the `sdc.runtime.Executable`.

    `model`: an ONNX model (path or `onnx.ModelProto`), an `.mlir` file without parameters, or a
    `torch.nn.Module` (with `example_args`) or `torch.export.ExportedProgram` (docs/torch.md).
    `options`: a `sdc.options.CompileOptions`; each of its fields may also be given as a keyword
    (`sdc.compile(model, input_shapes={"x": ["B", 3, 224, 224]}, mesh="dp=2", target="cpu")`),
    which overrides that field of `options`.
    `output`: the artifact directory (default: a temporary one, alive as long as the executable).
    `progress`: called with a line of text as each stage starts.
    `example_args`: a torch module's example inputs; `dynamic_shapes`: torch.export's, naming the
    dims that vary (`({0: Dim("batch", max=64)},)`): they become symbolic dims with run-time guards.

    Options (sdc.options.CompileOptions):
{options}
    """
    from sdc.compiler import compile as _compile

    return _compile(model, example_args, dynamic_shapes=dynamic_shapes, options=options, output=output,
                    progress=progress, **fields)


def _compile_doc() -> str:
    # Generated from the dataclass, so `help(sdc.compile)` lists every option with its documentation.
    # sdc.options is MLIR-free and torch-free: `import sdc` stays light.
    from sdc.options import describe_options

    return compile.__doc__.replace("{options}", describe_options("        "))


if compile.__doc__:  # python -OO drops docstrings
    compile.__doc__ = _compile_doc()


def shard(tensor, *dims, partial=()):
    """Annotate how `tensor` is split over the device mesh (see sdc.api_shard)."""
    from sdc.api_shard import shard as _shard

    return _shard(tensor, *dims, partial=partial)


def __getattr__(name: str):
    if name == "runtime":
        import importlib

        return importlib.import_module("sdc.runtime")
    raise AttributeError(f"module 'sdc' has no attribute '{name}'")
