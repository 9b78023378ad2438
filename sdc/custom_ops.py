"""User-registered ops: `sdc.custom_op(name, shape=..., reference=...)` and the registry behind it.

A model with one op sdc does not know (a `torch.library` custom op wrapping a CUDA extension, a
node of a vendor's ONNX domain) cannot be compiled at all unless the user can tell sdc what the op
is. A registration says it once:

    @sdc.custom_op("mylib::scaled_tanh", shape=lambda x, *, scale: x)
    def scaled_tanh(x, *, scale):
        return torch.tanh(x) * scale

- `name` is `namespace::op`: a torch `torch.ops.mylib.scaled_tanh` call maps to
  `mylib::scaled_tanh`; an ONNX node of domain `com.example` and op type `ScaledTanh` maps to
  `com.example::ScaledTanh`.
- `shape(*input_specs, **attrs)` gives the result specs: a `TensorSpec` (or a `(shape, dtype)`
  pair) or a list of them. Input specs carry the inputs' dims (ints where static; otherwise
  symbolic dims that support `+ - * //` with ints, passed through as they are) and sdc dtype
  names (`"f32"`, `"i64"`, ...).
- `reference(*inputs, **attrs)` computes the op: on torch tensors (`array_api="torch"`, the
  default) or numpy arrays (`array_api="numpy"`). The CPU executor runs it, and the compiler
  folds the op with it when every input is a constant.
- `triton` (a kernel's source text) and `derivative` (a function) are stored with the op for the
  code generator and autodiff; neither is used yet.

In the IR every custom op is one generic op, `sdc.custom` (sdc/dialect/ops/custom.py), whose
`name` attribute is the registered name and whose `attributes` attribute is the node's
attributes as a JSON object. Its shape rule and reference semantics look the name up here, so
the IR text, plan.json and a saved artifact name the op and nothing else: an artifact loaded in
another process needs the same registration to have run there first, and the runtime refuses to
load it, naming the missing ops, when it has not.

This module imports neither the MLIR bindings nor (until an op runs) torch: the runtime uses it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from sdc import dtypes
from sdc.diagnostics import SdcError
from sdc.dialect.shapes import DYN, ShapeError, TensorSpec
from sdc.lazy import lazy_import

if TYPE_CHECKING:
    import numpy as np
    import torch
else:
    np = lazy_import("numpy")
    torch = lazy_import("torch")

__all__ = ["CustomOp", "TensorSpec", "custom_op", "lookup", "is_registered", "registered_names", "unregister",
           "encode_attributes", "decode_attributes", "require_registered"]

# `namespace::op`; the namespace may be dotted (ONNX domains such as com.example).
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*::[A-Za-z_][A-Za-z0-9_]*$")
ARRAY_APIS = ("torch", "numpy")

ShapeFn = Callable[..., Any]
ReferenceFn = Callable[..., Any]


@dataclass(frozen=True)
class CustomOp:
    """One registered op (see the module docstring). Calling it calls its reference."""

    name: str
    shape: ShapeFn
    reference: ReferenceFn
    array_api: str = "torch"
    triton: str | None = None
    derivative: Callable[..., Any] | None = None
    doc: str = ""

    def __call__(self, *inputs: Any, **attrs: Any) -> Any:
        return self.reference(*inputs, **attrs)

    def infer(self, inputs: Sequence[TensorSpec], attrs: dict[str, Any]) -> list[TensorSpec]:
        """The result specs the user's shape rule gives, checked; ShapeError naming the op otherwise."""
        try:
            out = self.shape(*inputs, **attrs)
        except ShapeError:
            raise
        except (TypeError, ValueError, ArithmeticError) as e:
            if any(not isinstance(d, int) and d is not DYN for s in inputs for d in s.shape):
                # A rule that cannot take symbolic dims: the shape pass keeps the declared types.
                raise
            raise ShapeError(f"the shape rule of custom op '{self.name}' failed: {type(e).__name__}: {e}") from None
        except Exception as e:
            raise ShapeError(f"the shape rule of custom op '{self.name}' failed: {type(e).__name__}: {e}") from None
        return [self._spec(s, i) for i, s in enumerate(out if isinstance(out, list) else [out])]

    def _spec(self, value: Any, index: int) -> TensorSpec:
        if isinstance(value, TensorSpec):
            shape, dtype = value.shape, value.dtype
        elif isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str):
            shape, dtype = value
        else:
            raise ShapeError(f"the shape rule of custom op '{self.name}' returned {type(value).__name__} for result "
                             f"{index}: return a TensorSpec or a (shape, dtype) pair, or a list of them")
        if not dtypes.is_known(dtype):
            raise ShapeError(f"the shape rule of custom op '{self.name}' gave result {index} dtype {dtype!r} "
                             f"(dtypes: {', '.join(dtypes.ELEMENT_TYPES)})")
        dims = tuple(shape)
        if any(isinstance(d, int) and d < 0 for d in dims):
            raise ShapeError(f"the shape rule of custom op '{self.name}' gave result {index} a negative dim: "
                             f"{list(dims)}")
        return TensorSpec(dims, dtype)

    def run(self, inputs: Sequence[torch.Tensor], attrs: dict[str, Any]) -> list[torch.Tensor]:
        """The reference on torch tensors (numpy references see CPU arrays), its results as tensors."""
        if self.array_api == "numpy":
            device = inputs[0].device if inputs else torch.device("cpu")
            out = self.reference(*[x.detach().cpu().numpy() for x in inputs], **attrs)
            results = out if isinstance(out, (list, tuple)) else [out]
            return [torch.from_numpy(np.ascontiguousarray(r)).to(device) for r in results]
        out = self.reference(*inputs, **attrs)
        results = list(out) if isinstance(out, (list, tuple)) else [out]
        for i, r in enumerate(results):
            if not isinstance(r, torch.Tensor):
                raise TypeError(f"the reference of custom op '{self.name}' returned {type(r).__name__} for result "
                                f"{i}, not a torch.Tensor")
        return results


_REGISTRY: dict[str, CustomOp] = {}


def custom_op(name: str, shape: ShapeFn, reference: ReferenceFn | None = None, *, triton: str | None = None,
              derivative: Callable[..., Any] | None = None, array_api: str = "torch",
              replace: bool = False) -> Any:
    """Register op `name` (`namespace::op`). With `reference`, returns the `CustomOp`; without it,
    a decorator that registers the function it decorates as the reference and returns the op.
    Registering a name twice is an error unless `replace=True` (a notebook re-running a cell)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise SdcError(f"custom op name {name!r} is not 'namespace::op' (e.g. 'mylib::scaled_tanh', "
                       "'com.example::ScaledTanh')")
    if not callable(shape):
        raise SdcError(f"custom op '{name}': shape must be a function from input specs and attributes to result "
                       f"specs, found {type(shape).__name__}")
    if array_api not in ARRAY_APIS:
        raise SdcError(f"custom op '{name}': array_api must be one of {', '.join(ARRAY_APIS)}, found {array_api!r}")
    if triton is not None and not isinstance(triton, str):
        raise SdcError(f"custom op '{name}': triton is a kernel's source text, found {type(triton).__name__}")
    if derivative is not None and not callable(derivative):
        raise SdcError(f"custom op '{name}': derivative must be a function, found {type(derivative).__name__}")

    def register(fn: ReferenceFn) -> CustomOp:
        if not callable(fn):
            raise SdcError(f"custom op '{name}': reference must be a function, found {type(fn).__name__}")
        if name in _REGISTRY and not replace:
            raise SdcError(f"custom op '{name}' is already registered (pass replace=True to replace it)")
        op = CustomOp(name, shape, fn, array_api, triton, derivative, (fn.__doc__ or "").strip())
        _REGISTRY[name] = op
        return op

    return register if reference is None else register(reference)


def is_registered(name: str) -> bool:
    return name in _REGISTRY


def lookup(name: str) -> CustomOp:
    """The registered op `name`; SdcError saying how to register it otherwise."""
    op = _REGISTRY.get(name)
    if op is None:
        raise SdcError(not_registered_message([name]))
    return op


def registered_names() -> list[str]:
    return sorted(_REGISTRY)


def unregister(name: str) -> None:
    """Forget op `name` (tests; a no-op for a name never registered)."""
    _REGISTRY.pop(name, None)


def not_registered_message(names: Iterable[str]) -> str:
    missing = sorted(set(names))
    listed = ", ".join(f"'{n}'" for n in missing)
    return (f"custom op{'s' if len(missing) > 1 else ''} {listed} {'are' if len(missing) > 1 else 'is'} not registered "
            "in this process: call sdc.custom_op(...) for it before compiling or loading")


def require_registered(names: Iterable[str], where: str = "") -> None:
    """One SdcError naming every op of `names` not registered (`where`: what needs them)."""
    missing = [n for n in names if n not in _REGISTRY]
    if missing:
        raise SdcError(f"{where}{not_registered_message(missing)}")


# ---------------------------------------------------------------- attributes in the IR


def _check_attr_value(op: str, key: str, value: Any) -> Any:
    if isinstance(value, bool) or isinstance(value, (int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_check_attr_value(op, key, v) for v in value]
    kind = type(value).__name__
    raise ShapeError(f"custom op '{op}': attribute '{key}' is a {kind}; custom op attributes are numbers, strings, "
                     "booleans, None and lists of them")


def encode_attributes(op: str, attrs: dict[str, Any]) -> str:
    """A custom op's attributes as the JSON text of `sdc.custom`'s `attributes` (keys sorted)."""
    for key in attrs:
        if not isinstance(key, str) or not key.isidentifier():
            raise ShapeError(f"custom op '{op}': attribute name {key!r} is not an identifier")
    checked = {k: _check_attr_value(op, k, v) for k, v in attrs.items()}
    return json.dumps(checked, sort_keys=True, separators=(",", ":"))


def decode_attributes(text: str) -> dict[str, Any]:
    """The attributes of an `sdc.custom` (ShapeError for text that is not a JSON object)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ShapeError(f"attributes {text!r} is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise ShapeError(f"attributes {text!r} is not a JSON object")
    return value
