"""A JAX function -> StableHLO -> sdc: lowering with pytrees and symbolic shapes, and the
executable that takes and returns what the function does.

    imported, signature = import_jax(fn, (params, x))
    exe = JaxExecutable(runtime_exe, signature)      # exe(params, x) -> the function's pytree, numpy leaves

`jax.export.export(jax.jit(fn, keep_unused=True))(*example_args)` gives StableHLO with debug
locations (keep_unused, so the entry has one argument per leaf of the arguments), chlo ops as
composites. A serialized export (`Exported.serialize()`) is read back with `jax.export.deserialize`
and converted the same way (`import_exported`). Each leaf is named by its
path (`params.w1`, `x`, with the function's parameter names), each result likewise (`out`,
`out.logits`). A leaf may be an array or a `jax.ShapeDtypeStruct`, whose shape may hold JAX
symbolic dims (`jax.export.symbolic_shape("b")`): they become sdc symbols (`sdc.dims`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from sdc.diagnostics import SdcError
from sdc.frontend.stablehlo.convert import ImportedStablehlo, StablehloInput, import_stablehlo
from sdc.frontend.values import symbol_name

__all__ = ["JaxExecutable", "JaxSignature", "deserialize", "export_jax", "exported_signature", "import_exported",
           "import_jax", "is_exported", "is_jax_function", "signature_of"]


@dataclass(frozen=True)
class JaxSignature:
    """The pytree structures of the arguments and results, and the flat names sdc gave them."""

    in_tree: Any
    out_tree: Any
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]


def is_jax_function(model: Any) -> bool:
    """A function the JAX frontend takes: a `jax.jit` wrapper or a plain Python function."""
    if is_exported(model):
        return False
    kind = type(model)
    if kind.__module__.split(".")[0] in ("jax", "jaxlib") and callable(model):
        return True
    import functools

    return inspect.isfunction(model) or inspect.ismethod(model) or isinstance(model, functools.partial)


def _key_text(key: Any) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def _leaf_name(prefix: str, path: Sequence[Any]) -> str:
    return ".".join([prefix] + [_key_text(k) for k in path]) if path else prefix


def _parameter_names(fn: Any, count: int) -> list[str]:
    """The function's positional parameter names (arg<i> where it has none to give)."""
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params[:count]]
    return names + [f"arg{i}" for i in range(len(names), count)]


def _dims(leaf: Any, name: str) -> tuple:
    """A leaf's dims: ints, and JAX symbolic dims as sdc symbol names."""
    shape = getattr(leaf, "shape", None)
    if shape is None:
        shape = np.shape(leaf)
    dims = []
    for d in shape:
        if isinstance(d, (int, np.integer)):
            dims.append(int(d))
            continue
        text = str(d)
        if not text.isidentifier():
            raise SdcError(f"input '{name}' has the symbolic dim '{text}': an input's dims must be ints or "
                           "plain symbols (give '2*b' as a symbol of its own)")
        dims.append(symbol_name(text))
    return tuple(dims)


def _as_args(example_args: Sequence[Any]) -> tuple:
    return tuple(example_args) if isinstance(example_args, (tuple, list)) else (example_args,)


def _flat_inputs(fn: Any, args: tuple) -> tuple[list[StablehloInput], Any]:
    """One named, shaped input per leaf of the arguments' pytree, and the pytree's structure."""
    import jax

    leaves_with_paths, in_tree = jax.tree_util.tree_flatten_with_path(args)
    params = _parameter_names(getattr(fn, "__wrapped__", fn), len(args))
    inputs = []
    for path, leaf in leaves_with_paths:
        name = _leaf_name(params[path[0].idx], path[1:])
        inputs.append(StablehloInput(name, _dims(leaf, name)))
    return inputs, in_tree


def _outputs(out_info: Any) -> tuple[tuple[str, ...], Any]:
    import jax

    leaves, out_tree = jax.tree_util.tree_flatten_with_path(out_info)
    return tuple(_leaf_name("out", path) for path, _ in leaves), out_tree


def _fn_name(fn: Any) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def export_jax(fn: Any, example_args: Sequence[Any]) -> Any:
    """`jax.export` of `fn` on `example_args`: a `jax.export.Exported`, whose module has the chlo
    ops sdc converts as `stablehlo.composite`s (`jit(...).lower` writes bare chlo ops, which the
    bindings cannot parse) and the same shape polymorphism as a serialized export."""
    import jax

    if not callable(fn):
        raise SdcError(f"cannot compile a {type(fn).__name__} as a JAX function: it is not callable")
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn, keep_unused=True)
    try:
        return jax.export.export(jitted)(*_as_args(example_args))
    except Exception as e:  # what JAX says about the function: its own error types, many of them
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SdcError(f"jax could not lower {_fn_name(fn)}: {first}") from None


def import_jax(fn: Any, example_args: Sequence[Any]) -> tuple[ImportedStablehlo, JaxSignature]:
    """Lower `fn` on `example_args` (arrays or jax.ShapeDtypeStruct, in any pytree) and convert it."""
    args = _as_args(example_args)
    inputs, in_tree = _flat_inputs(fn, args)
    exported = export_jax(fn, args)
    return _import_exported(exported, f"{_fn_name(fn)} (jax)", inputs, in_tree)


def import_exported(exported: Any, source: str) -> tuple[ImportedStablehlo, JaxSignature]:
    """Convert a `jax.export.Exported` (or what `Exported.serialize()` wrote): its inputs are named
    `arg<i>` plus their pytree path (`arg0.w1`), its symbolic dims are the export's."""
    import jax

    n = len(exported.in_avals)
    (args, kwargs) = jax.tree_util.tree_unflatten(exported.in_tree, list(range(n)))
    if kwargs:
        raise SdcError(f"{source}: the exported function takes keyword arguments ({', '.join(sorted(kwargs))}); "
                       "export it with positional arguments only")
    leaves_with_paths, in_tree = jax.tree_util.tree_flatten_with_path(tuple(args))
    inputs = []
    for path, index in leaves_with_paths:
        name = _leaf_name(f"arg{path[0].idx}", path[1:])
        inputs.append(StablehloInput(name, _dims(exported.in_avals[index], name)))
    return _import_exported(exported, source, inputs, in_tree)


def _import_exported(exported: Any, source: str, inputs: list[StablehloInput],
                     in_tree: Any) -> tuple[ImportedStablehlo, JaxSignature]:
    import jax

    if exported.nr_devices != 1:
        raise SdcError(f"{source}: the function is exported for {exported.nr_devices} devices; sdc reads "
                       "single-device exports (give the mesh to sdc instead)")
    outs = jax.tree_util.tree_unflatten(exported.out_tree, list(exported.out_avals))
    output_names, out_tree = _outputs(outs)
    imported = import_stablehlo(exported.mlir_module(), source=source, inputs=inputs)
    if len(imported.output_names) != len(output_names):
        raise SdcError(f"{source}: the lowered function has {len(imported.output_names)} results, "
                       f"its output pytree {len(output_names)} leaves")
    _rename_outputs(imported, output_names)
    return imported, JaxSignature(in_tree, out_tree, tuple(i.name for i in inputs), output_names)


def deserialize(data: bytes | bytearray, source: str) -> Any:
    """The `jax.export.Exported` that `Exported.serialize()` wrote into `data`."""
    try:
        import jax
    except ModuleNotFoundError:
        raise SdcError(f"reading the serialized jax.export '{source}' needs jax: pip install jax") from None
    try:
        return jax.export.deserialize(bytearray(data))
    except Exception as e:  # flatbuffer and version errors of every kind
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SdcError(f"cannot read '{source}' as a serialized jax.export ({first})") from None


def is_exported(model: Any) -> bool:
    """A `jax.export.Exported` (checked by its type's module, so that jax is not imported)."""
    kind = type(model)
    return kind.__name__ == "Exported" and kind.__module__.split(".")[0] == "jax"


def exported_signature(exported: Any) -> JaxSignature:
    """The pytree signature of an export, without converting it."""
    import jax

    n = len(exported.in_avals)
    (args, _) = jax.tree_util.tree_unflatten(exported.in_tree, list(range(n)))
    leaves_with_paths, in_tree = jax.tree_util.tree_flatten_with_path(tuple(args))
    names = tuple(_leaf_name(f"arg{path[0].idx}", path[1:]) for path, _ in leaves_with_paths)
    output_names, out_tree = _outputs(jax.tree_util.tree_unflatten(exported.out_tree, list(exported.out_avals)))
    return JaxSignature(in_tree, out_tree, names, output_names)


def signature_of(fn: Any, example_args: Sequence[Any]) -> JaxSignature:
    """The pytree signature of `fn` on `example_args`, by abstract evaluation (no lowering)."""
    import jax

    args = _as_args(example_args)
    inputs, in_tree = _flat_inputs(fn, args)
    output_names, out_tree = _outputs(jax.eval_shape(fn, *args))
    return JaxSignature(in_tree, out_tree, tuple(i.name for i in inputs), output_names)


def _rename_outputs(imported: ImportedStablehlo, names: Sequence[str]) -> None:
    from sdc.dialect.ir import RES_ATTRS, attr_dicts, entry_function, set_attr_dicts
    from sdc.mlir import ir

    with imported.context:
        fn = entry_function(imported.module)
        dicts = attr_dicts(fn, RES_ATTRS)
        for d, name in zip(dicts, names):
            d["sdc.name"] = ir.StringAttr.get(name)
        set_attr_dicts(fn, RES_ATTRS, dicts)
    imported.output_names = list(names)


class JaxExecutable:
    """A compiled JAX function: call it like the function (the same pytree of numpy or jax
    arrays); it returns the function's result pytree with numpy leaves. The runtime executable
    (`.executable`) takes the flat leaves by position or by name (`exe.inputs`)."""

    def __init__(self, executable: Any, signature: JaxSignature):
        self.executable = executable
        self.signature = signature

    def __call__(self, *args: Any) -> Any:
        import jax

        leaves, tree = jax.tree_util.tree_flatten(args)
        if tree != self.signature.in_tree:
            raise SdcError(f"the arguments do not have the structure of the example arguments: expected "
                           f"{self.signature.in_tree}, got {tree}")
        outs = self.executable(*[np.asarray(leaf) for leaf in leaves])
        return jax.tree_util.tree_unflatten(self.signature.out_tree, outs)

    def __getattr__(self, name: str) -> Any:  # inputs, outputs, path, guards: the runtime's
        if name in ("executable", "signature"):
            raise AttributeError(name)
        return getattr(self.executable, name)

    def __repr__(self) -> str:
        return f"JaxExecutable({self.executable!r})"
