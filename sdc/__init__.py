"""sdc: a static-graph compiler for distributed deep learning.

Public entry points (imported lazily so that `import sdc` and `sdc.runtime` stay free of MLIR):
- `sdc.compile(model, ...)`: compile a model into an artifact and load it (see sdc.compiler).
- `sdc.runtime.load(path)`: load a compiled artifact (no MLIR needed).
- `sdc.interpret(module_or_text, inputs)`: run IR by reference semantics.
- `sdc.shard(tensor, *dims)`: annotate a tensor's sharding over the device mesh (see docs/distributed.md).
- `sdc.custom_op(name, shape=..., reference=...)`: register a user op (see docs/custom-ops.md).
- `sdc.compile_train(model, batch, loss=..., optimizer=sdc.optim.AdamW(...))`, `sdc.load_train(dir)`:
  a compiled training step and its checkpoints (see docs/training.md).
"""

from __future__ import annotations

from sdc.version import __version__  # noqa: F401  (one source: sdc/version.py)


def interpret(module_or_text, inputs, params=None, **kwargs):
    from sdc.interpreter import interpret as _interpret

    return _interpret(module_or_text, inputs, params, **kwargs)


def compile(model, example_args=None, *, dynamic_shapes=None, options=None, output=None, progress=None, **fields):
    """Compile `model` into an artifact and load it; returns the `sdc.runtime.Executable`.

    `model`: an ONNX model (path or `onnx.ModelProto`), an `.mlir` file without parameters, or a
    `torch.nn.Module` (with `example_args`) or `torch.export.ExportedProgram` (docs/torch.md), a JAX
    function (with `example_args`), or a `jax.export.Exported` or its `serialize()` bytes (docs/jax.md).
    `options`: a `sdc.options.CompileOptions`; each of its fields may also be given as a keyword
    (`sdc.compile(model, input_shapes={"x": ["B", 3, 224, 224]}, mesh="dp=2", target="cpu")`),
    which overrides that field of `options`.
    `output`: the artifact directory (default: a temporary one, alive as long as the executable).
    `progress`: called with a line of text as each stage starts.
    `device`: where the executable runs (default: the target's device when this machine has one).
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


def custom_op(name, shape, reference=None, *, triton=None, derivative=None, array_api="torch", replace=False):
    """Register a custom op once, for the torch and ONNX frontends and the runtime (sdc.custom_ops,
    docs/custom-ops.md); usable as a decorator of the reference implementation."""
    from sdc.custom_ops import custom_op as _custom_op

    return _custom_op(name, shape, reference, triton=triton, derivative=derivative, array_api=array_api,
                      replace=replace)


def compile_train(model, example_batch=None, *, loss=None, optimizer, output=None, device=None, **fields):
    """Compile a training step (forward, loss, backward, optimizer update) of a torch module, a JAX loss
    function `loss_fn(params, *batch)` (example_batch `(params, *batch)`) or an ONNX model with a named
    loss (`loss="cross_entropy"` or `"mse"`); returns a `sdc.train.TrainStep` (docs/training.md)."""
    from sdc.train import compile_train as _compile_train

    return _compile_train(model, example_batch, loss=loss, optimizer=optimizer, output=output, device=device,
                          **fields)


def load_train(directory, device=None):
    """Load a training checkpoint written by `TrainStep.save` and continue from it (sdc.train)."""
    from sdc.train import load_train as _load_train

    return _load_train(directory, device=device)


def __getattr__(name: str):
    if name in ("runtime", "optim"):
        import importlib

        return importlib.import_module(f"sdc.{name}")
    raise AttributeError(f"module 'sdc' has no attribute '{name}'")
