"""User-registered ops: the registry behind `sdc.custom_op(name, shape=..., reference=...)`.

It lives in the dialect, beside the op that carries every registered op (`sdc.custom`,
sdc/dialect/ops/custom.py), which looks names up here; `sdc.custom_ops` is its public face.

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
- `derivative(*inputs, *grads_of_outputs, **attrs)` gives the inputs' gradients (in the op's
  array_api; None for an input that gets none, and a result with no gradient, an integer one, is
  passed as None). With it the op is differentiable in sdc-autodiff: the backward program runs it
  as another custom op, `<name>.vjp`, registered here from the derivative (its results: the
  gradients of the float inputs, shaped as the inputs), so the CPU executor and an artifact's
  plan treat it like any other. Without it a gradient through the op is an error naming it.
- `triton`: the source of the op's own Triton kernel, `kernel(in_ptr..., out_ptr..., n, <attributes>...,
  BLOCK: tl.constexpr)` over contiguous tensors of one shape (sdc/codegen/triton/custom.py has the
  contract): on a target with Triton codegen (cuda) the op's launch runs it instead of the reference.

In the IR every custom op is one generic op, `sdc.custom` (sdc/dialect/ops/custom.py), whose
`name` attribute is the registered name and whose `attributes` attribute is the node's
attributes as a JSON object. Its shape rule and reference semantics look the name up here, so
the IR text, plan.json and a saved artifact name the op and nothing else: an artifact loaded in
another process needs the same registration to have run there first, and the runtime refuses to
load it, naming the missing ops, when it has not.

This module imports neither the MLIR bindings nor (until an op runs) torch: the runtime uses it.
"""

from __future__ import annotations

import ast
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
           "encode_attributes", "decode_attributes", "require_registered", "vjp_name", "VJP_SUFFIX", "VJP_META",
           "TRITON_KERNEL", "ARRAY_APIS", "not_registered_message", "triton_kernel_parameters"]

# `namespace::op`; the namespace may be dotted (ONNX domains such as com.example).
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*::[A-Za-z_][A-Za-z0-9_]*$")
ARRAY_APIS = ("torch", "numpy")

ShapeFn = Callable[..., Any]
TRITON_KERNEL = "kernel"  # the function of a registration's `triton` source that its launch calls
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

# The backward op of a registration with a derivative is registered beside it under this suffix
# (`mylib::scaled_tanh.vjp`): a name no user registration can take (the op part has no dots).
VJP_SUFFIX = ".vjp"
# The attribute under which sdc-autodiff tells a `.vjp` op how its operands and results line up with
# the forward op's: [inputs, results, results with a cotangent, inputs given a gradient] (the last
# two as index lists). The user's derivative never sees it.
VJP_META = "sdc_vjp"


def vjp_name(name: str) -> str:
    return name + VJP_SUFFIX


def _vjp_layout(attrs: dict[str, Any]) -> tuple[int, int, list[int], list[int], dict[str, Any]]:
    user = dict(attrs)
    meta = user.pop(VJP_META, None)
    if not (isinstance(meta, list) and len(meta) == 4):
        raise ShapeError(f"a custom op's backward needs its '{VJP_META}' attribute "
                         f"[inputs, results, results with a cotangent, inputs given a gradient], found {meta!r}")
    n_in, n_out, with_ct, wanted = meta
    return int(n_in), int(n_out), [int(j) for j in with_ct], [int(i) for i in wanted], user


def _backward_op(forward: CustomOp) -> CustomOp:
    """`<name>.vjp`: operands are the forward's inputs, then the cotangents of its results that have
    one; results are the gradients of the inputs `wanted` (the float ones), shaped as those inputs."""
    derivative = forward.derivative
    assert derivative is not None

    def shape(*specs: TensorSpec, **attrs: Any) -> list[TensorSpec]:
        n_in, _, _, wanted, _ = _vjp_layout(attrs)
        return [TensorSpec(specs[i].shape, specs[i].dtype) for i in wanted]

    def reference(*arrays: Any, **attrs: Any) -> list[Any]:
        n_in, n_out, with_ct, wanted, user = _vjp_layout(attrs)
        inputs = list(arrays[:n_in])
        grads_out: list[Any] = [None] * n_out
        for j, g in zip(with_ct, arrays[n_in:]):
            grads_out[j] = g
        got = derivative(*inputs, *grads_out, **user)
        grads = list(got) if isinstance(got, (list, tuple)) else [got]
        if len(grads) != n_in:
            raise SdcError(f"the derivative of custom op '{forward.name}' returned {len(grads)} gradients for "
                           f"{n_in} inputs (return one per input, None where there is none)")
        return [_gradient_like(forward.name, i, grads[i], inputs[i], forward.array_api) for i in wanted]

    return CustomOp(vjp_name(forward.name), shape, reference, forward.array_api, None, None,
                    f"the backward of '{forward.name}' (its derivative)")


def _gradient_like(op: str, index: int, grad: Any, x: Any, array_api: str) -> Any:
    """The gradient of input `index` as `x`'s shape and dtype: zeros for None, an error for a wrong shape."""
    if grad is None:
        return np.zeros_like(x) if array_api == "numpy" else torch.zeros_like(x)
    if tuple(grad.shape) != tuple(x.shape):
        raise SdcError(f"the derivative of custom op '{op}' returned a gradient of shape {list(grad.shape)} for "
                       f"input {index} of shape {list(x.shape)}")
    if array_api == "numpy":
        return np.asarray(grad, dtype=x.dtype)
    if not isinstance(grad, torch.Tensor):
        raise SdcError(f"the derivative of custom op '{op}' returned {type(grad).__name__} for input {index}, "
                       "not a torch.Tensor")
    return grad.to(x.dtype)


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
    if triton is not None:
        triton_kernel_parameters(triton, name)
    if derivative is not None and not callable(derivative):
        raise SdcError(f"custom op '{name}': derivative must be a function, found {type(derivative).__name__}")

    def register(fn: ReferenceFn) -> CustomOp:
        if not callable(fn):
            raise SdcError(f"custom op '{name}': reference must be a function, found {type(fn).__name__}")
        if name in _REGISTRY and not replace:
            raise SdcError(f"custom op '{name}' is already registered (pass replace=True to replace it)")
        op = CustomOp(name, shape, fn, array_api, triton, derivative, (fn.__doc__ or "").strip())
        _REGISTRY[name] = op
        _REGISTRY.pop(vjp_name(name), None)
        if derivative is not None:
            _REGISTRY[vjp_name(name)] = _backward_op(op)
        return op

    return register if reference is None else register(reference)


def triton_kernel_parameters(source: str, op: str) -> list[str]:
    """The parameter names of the top-level `kernel` function of a `triton` source (read, never run:
    this checks the contract's shape at registration); SdcError naming the op otherwise."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise SdcError(f"custom op '{op}': its triton source does not parse: line {e.lineno}: {e.msg}") from None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == TRITON_KERNEL:
            a = node.args
            if not (a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs):
                return [p.arg for p in a.args]
    raise SdcError(f"custom op '{op}': its triton source must define a top-level @triton.jit function "
                   f"'{TRITON_KERNEL}(in_ptr..., out_ptr..., n, <attributes>..., BLOCK: tl.constexpr)' with plain "
                   "parameters (docs/custom-ops.md)")


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
    """Forget op `name` and its backward (tests; a no-op for a name never registered)."""
    _REGISTRY.pop(name, None)
    _REGISTRY.pop(vjp_name(name), None)


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
