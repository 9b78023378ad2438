"""Model importers: a model in, one module of the sdc dialect (plus its parameter values) out.

`FRONTENDS` maps each frontend's name to a lazy factory (like `sdc.transforms.PASSES`), so that
importing this package imports no frontend: `sdc run` and `sdc inspect` never load onnx, and a
frontend whose package is not installed fails only when it is used. `import_model` picks the
frontend for a model (`frontend_for`: by file suffix, or by the object's type) and runs it.

    module, params, options = import_model("model.onnx", input_shapes={"x": ["B", 3, 224, 224]})

Frontends: `mlir` (sdc IR text plus an optional parameter file, sdc/frontend/mlir_file.py) and
`onnx` (a path or an onnx.ModelProto, sdc/frontend/onnx.py) and `torch` (a torch.nn.Module or
ExportedProgram with example inputs, sdc/frontend/torch/), `jax` (a JAX function with example
arguments), `jax_export` (a `jax.export.Exported`, its `serialize()` bytes or a `.jaxexport` file)
and `stablehlo` (StableHLO text, which the `mlir` frontend hands over), all in
sdc/frontend/stablehlo/.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from sdc.diagnostics import SdcError
from sdc.frontend.base import Frontend, Imported, InputShapes


def _mlir() -> Frontend:
    from sdc.frontend.mlir_file import MlirFrontend

    return MlirFrontend()


def _onnx() -> Frontend:
    from sdc.frontend.onnx import OnnxFrontend

    return OnnxFrontend()


def _torch() -> Frontend:
    from sdc.frontend.torch import TorchFrontend

    return TorchFrontend()


def _jax() -> Frontend:
    from sdc.frontend.stablehlo import JaxFrontend

    return JaxFrontend()


def _stablehlo() -> Frontend:
    from sdc.frontend.stablehlo import StablehloFrontend

    return StablehloFrontend()


def _jax_export() -> Frontend:
    from sdc.frontend.stablehlo import JaxExportFrontend

    return JaxExportFrontend()


FRONTENDS: dict[str, Callable[[], Frontend]] = {
    "mlir": _mlir,
    "onnx": _onnx,
    "torch": _torch,
    "jax": _jax,
    "stablehlo": _stablehlo,
    "jax_export": _jax_export,
}

# A file's suffix names its frontend; a file of any other suffix is read as ONNX, whose loader
# says clearly when it is not a model (exporters write .onnx, .pb, .bin, ...).
SUFFIXES: dict[str, str] = {".mlir": "mlir", ".onnx": "onnx", ".jaxexport": "jax_export"}
DEFAULT_FILE_FRONTEND = "onnx"

# Packages whose frontend is still to come, with what to do meanwhile, for the error that says so.
_PLANNED: dict[str, tuple[str, str]] = {
    "flax": ("Flax module", "compile its apply function: sdc.compile(model.apply, (variables, x))"),
}


def get_frontend(name: str) -> Frontend:
    """The frontend registered as `name`; SdcError if there is none or it cannot load."""
    factory = FRONTENDS.get(name)
    if factory is None:
        raise SdcError(f"unknown frontend '{name}' (frontends: {', '.join(FRONTENDS)})")
    try:
        return factory()
    except ModuleNotFoundError as e:
        if e.name and e.name.startswith("sdc.frontend"):
            raise SdcError(f"the {name} frontend ({e.name}) is not available in this sdc") from None
        if e.name and e.name.split(".")[0] == name:
            raise SdcError(f"the {name} frontend needs the '{e.name}' package: pip install {e.name}") from None
        raise


def frontend_for(model: Any) -> str:
    """The name of the frontend that imports `model`: a path by its suffix, an object by its type."""
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.is_file():
            raise SdcError(f"cannot open '{path}': {'is a directory' if path.is_dir() else 'no such file'}")
        return SUFFIXES.get(path.suffix.lower(), DEFAULT_FILE_FRONTEND)
    kind = type(model)
    if kind.__name__ == "ModelProto" and kind.__module__.startswith("onnx"):
        return "onnx"
    if isinstance(model, (bytes, bytearray, memoryview)) or _is_jax_export(model):
        return "jax_export"  # a jax.export.Exported or its serialize() bytes
    if any(cls.__module__.split(".")[0] == "torch" for cls in kind.__mro__):
        return "torch"  # an nn.Module (a user's subclass too) or an ExportedProgram
    if _is_jax_function(model):
        return "jax"  # a jax.jit wrapper or a plain Python function
    for cls in kind.__mro__:
        planned = _PLANNED.get(cls.__module__.split(".")[0])
        if planned is not None:
            framework, meanwhile = planned
            raise SdcError(f"cannot compile a {kind.__name__} yet: the {framework} frontend is not there; {meanwhile}")
    if callable(model):
        raise SdcError(f"cannot compile a callable {kind.__name__}: give a JAX function (a Python function or "
                       "jax.jit wrapper), a torch.nn.Module or an ONNX model")
    raise SdcError(f"cannot compile a {kind.__module__}.{kind.__name__}: give an ONNX model "
                   "(a path or an onnx.ModelProto) or an .mlir file")


def _is_jax_export(model: Any) -> bool:
    kind = type(model)  # jax.export.Exported, known by name: jax is not imported for other models
    return kind.__name__ == "Exported" and kind.__module__.split(".")[0] == "jax"


def _is_jax_function(model: Any) -> bool:
    from sdc.frontend.stablehlo.jax_entry import is_jax_function

    return is_jax_function(model)


def adapt_executable(model: Any, executable: Any, **example: Any) -> Any:
    """What the model's frontend makes of its loaded executable: a JAX function's takes and returns
    pytrees (sdc.frontend.stablehlo.JaxExecutable); the other frontends' is returned as it is."""
    if isinstance(model, (str, os.PathLike)):
        return executable
    frontend = get_frontend(frontend_for(model))
    adapt = getattr(frontend, "adapt_executable", None)
    if adapt is None:
        return executable
    return adapt(executable, model, **{k: v for k, v in example.items() if v is not None})


def import_model(model: Any, *, input_shapes: InputShapes | None = None,
                 params_file: str | os.PathLike | None = None, mesh: Any = None,
                 **example: Any) -> Imported:
    """(module, params, options) for a model: an ONNX model (path or ModelProto) or an `.mlir` file.

    An `.mlir` file takes its parameter values from `params_file` (.safetensors or .npz). The ONNX
    importer takes the `input_shapes` that give an input's dims (lists); bounds and values of
    symbols are for the shape pass (`build_artifact(..., input_shapes=...)`), which applies all
    of them, to `.mlir` files too. `mesh` lets the ONNX importer read multi-device sharding
    annotations. `example` holds what a tracing frontend (`takes_example_args`, such as torch)
    needs: `example_args`, `dynamic_shapes`; None values are dropped.
    """
    example = {k: v for k, v in example.items() if v is not None}
    frontend = get_frontend(frontend_for(model))
    if example and not getattr(frontend, "takes_example_args", False):
        raise SdcError(f"{' and '.join(sorted(example))} are for PyTorch and JAX models; the {frontend.name} "
                       "frontend takes input_shapes")
    return frontend.import_model(model, input_shapes=input_shapes, params_file=params_file, mesh=mesh, **example)


__all__ = ["FRONTENDS", "Frontend", "Imported", "InputShapes", "frontend_for", "get_frontend", "import_model"]
