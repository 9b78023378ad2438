"""The JAX / StableHLO frontend: StableHLO converted to the sdc dialect by MLIR dialect conversion.

    exe = sdc.compile(fn, (params, x))          # a JAX function: jax.jit(fn).lower(...) -> StableHLO
    y = exe(params, x)                          # the function's pytree in, its result pytree out (numpy)

    sdc compile model.mlir -o model.sdc         # a StableHLO text file (`exp.mlir_module()`)
    exe = sdc.compile(exp.serialize())          # a serialized jax.export (bytes, an Exported, a .jaxexport file)
    sdc compile model.jaxexport -o model.sdc

Parts, one job each:
- `patterns.py`: the rule table, one function per StableHLO op family (`RULES`);
- `convert.py`: parse (StableHLO registered in the sdc context), the up-front check that lists
  every op no rule converts, and the dialect conversion itself (`import_stablehlo`);
- `jax_entry.py`: lowering a JAX function with pytrees and symbolic shapes (`import_jax`), and
  the executable that rebuilds the result pytree (`JaxExecutable`);
- `coverage.py`: the table of StableHLO ops, converted or not (docs/stablehlo-coverage.md).

`JaxFrontend` ("jax"), `JaxExportFrontend` ("jax_export") and `StablehloFrontend` ("stablehlo")
are the entries of `sdc.frontend.FRONTENDS`. Nothing here imports jax until a JAX function is compiled.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from sdc.diagnostics import SdcError
from sdc.frontend.base import Imported, InputShapes, read_model_text

__all__ = ["JaxExportFrontend", "JaxFrontend", "StablehloFrontend"]

EXPORT_SUFFIX = ".jaxexport"  # what sdc calls a file of `Exported.serialize()` bytes


def _no_files(kind: str, params_file: Any, mesh: Any) -> None:
    if params_file is not None:
        raise SdcError(f"parameter files apply to sdc .mlir models; a {kind} carries its own constants")
    if mesh is not None:
        raise SdcError(f"a device mesh is not supported for a {kind} yet: compile it for one device")


class JaxFrontend:
    """The `jax` frontend: a JAX function and its example arguments (a pytree of arrays or
    `jax.ShapeDtypeStruct`s). `adapt_executable` makes the loaded artifact take and return pytrees."""

    name = "jax"
    takes_example_args = True

    def import_model(self, model: Any, *, input_shapes: InputShapes | None = None,
                     params_file: str | os.PathLike | None = None, mesh: Any = None,
                     example_args: Sequence[Any] | None = None, dynamic_shapes: Any = None) -> Imported:
        from sdc.frontend.stablehlo.jax_entry import import_jax

        _no_files("JAX function", params_file, mesh)
        if dynamic_shapes is not None:
            raise SdcError("dynamic_shapes are torch.export's; for a JAX function give jax.ShapeDtypeStruct "
                           "example arguments with jax.export.symbolic_shape dims")
        if example_args is None:
            raise SdcError("a JAX function needs example_args: sdc.compile(fn, (x, ...)), arrays or "
                           "jax.ShapeDtypeStruct (with jax.export.symbolic_shape dims for symbolic ones)")
        imported, _ = import_jax(model, example_args)
        options: dict[str, Any] = {"source": getattr(model, "__name__", type(model).__name__), "frontend": self.name}
        if input_shapes:
            options["input_shapes"] = dict(input_shapes)
        return Imported(imported.module, imported.params, options)

    def adapt_executable(self, executable: Any, model: Any, example_args: Sequence[Any] | None = None,
                         **_: Any) -> Any:
        """The runtime executable, called with the function's pytrees (see JaxExecutable)."""
        from sdc.frontend.stablehlo.jax_entry import JaxExecutable, signature_of

        if example_args is None:
            return executable
        return JaxExecutable(executable, signature_of(model, example_args))


class StablehloFrontend:
    """The `stablehlo` frontend: a StableHLO text file (what `jax.jit(f).lower(...).as_text()`
    writes). Inputs are `arg0`, `arg1`, ... and each `?` dim is a symbol `arg<i>_<d>`."""

    name = "stablehlo"

    def import_model(self, model: Any, *, input_shapes: InputShapes | None = None,
                     params_file: str | os.PathLike | None = None, mesh: Any = None,
                     text: str | None = None) -> Imported:
        from sdc.frontend.stablehlo.convert import import_stablehlo

        _no_files("StableHLO module", params_file, mesh)
        path = Path(model)
        if text is None:
            text = read_model_text(path)
        imported = import_stablehlo(text, source=path.name)
        options: dict[str, Any] = {"source": path.name, "frontend": self.name}
        if input_shapes:
            options["input_shapes"] = dict(input_shapes)
        return Imported(imported.module, imported.params, options)


class JaxExportFrontend:
    """The `jax_export` frontend: what `jax.export` makes of a function, as a `jax.export.Exported`,
    its `serialize()` bytes, or a `.jaxexport` file of those bytes. The export carries the pytrees
    and the symbolic shapes; inputs are named `arg<i>` and their pytree path (`arg0.w1`)."""

    name = "jax_export"

    def import_model(self, model: Any, *, input_shapes: InputShapes | None = None,
                     params_file: str | os.PathLike | None = None, mesh: Any = None) -> Imported:
        from sdc.frontend.stablehlo.jax_entry import import_exported

        _no_files("serialized jax.export", params_file, mesh)
        exported, source = self._exported(model)
        imported, _ = import_exported(exported, source)
        options: dict[str, Any] = {"source": source, "frontend": self.name}
        if input_shapes:
            options["input_shapes"] = dict(input_shapes)
        return Imported(imported.module, imported.params, options)

    def adapt_executable(self, executable: Any, model: Any, **_: Any) -> Any:
        """Called with the export's pytrees, as the function was (see JaxExecutable)."""
        from sdc.frontend.stablehlo.jax_entry import JaxExecutable, exported_signature

        exported, _ = self._exported(model)
        return JaxExecutable(executable, exported_signature(exported))

    @staticmethod
    def _exported(model: Any) -> tuple[Any, str]:
        from sdc.frontend.stablehlo.jax_entry import deserialize, is_exported

        if is_exported(model):
            return model, f"{model.fun_name} (jax.export)"
        if isinstance(model, (bytes, bytearray, memoryview)):
            return deserialize(bytes(model), "<bytes>"), "<serialized jax.export>"
        path = Path(model)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise SdcError(f"cannot open '{path}': {e.strerror}") from None
        return deserialize(data, path.name), path.name
