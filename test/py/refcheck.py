"""Shared by the reference-semantics tests: call an op's reference, check it against its shape
rule, and compare with an independent (numpy / onnxruntime) result at a per-dtype tolerance."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest
import torch

from sdc import dtypes
from sdc.dialect.opdef import OpDef, RefEnv, all_ops, get_op
from sdc.dialect.shapes import ShapeContext, TensorSpec, is_static

# (rtol, atol) by element type; integers and i1 compare exactly.
TOLERANCE = {
    "f64": (1e-10, 1e-12),
    "f32": (1e-5, 1e-6),
    "f16": (2e-3, 2e-3),
    "bf16": (1.6e-2, 1e-2),
}


# The op tables these tests cover; ops from other tables are tested with them.
FOUNDATION_TABLES = tuple(f"sdc.dialect.ops.{m}" for m in
                          ("core", "elementwise", "linalg", "reduce", "shape_ops", "collectives"))


def foundation_ops(families) -> dict[str, OpDef]:
    """The ops of the foundation tables in the given families, by name."""
    return {n: op for n, op in all_ops().items()
            if op.family in families and op.ref.__module__ in FOUNDATION_TABLES}


class MeshContext(ShapeContext):
    """The shape context collectives need: one that knows the device mesh."""

    def __init__(self, mesh: dict[str, int] | None):
        self.mesh = mesh


@pytest.fixture
def rng(request) -> np.random.Generator:
    """Random inputs, different for every test case and reproducible from its id."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def to_torch(x: Any) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    return torch.from_numpy(np.asarray(x, order="C"))


def to_numpy(t: torch.Tensor) -> np.ndarray:
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def call(name: str, /, *inputs, env: RefEnv | None = None, **attrs):
    """Run `sdc.<name>`'s reference semantics on numpy arrays (or torch tensors).

    The outputs' shapes and element types must be what the op's shape rule infers for these
    inputs; the outputs come back as numpy arrays (bf16 widened to f32), a tuple for ops with
    several results.
    """
    op = get_op(name)
    values = op.with_defaults(attrs)
    env = env or RefEnv()
    tensors = [to_torch(x) for x in inputs]
    out = op.ref(env, values, *tensors)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if op.shape is not None:
        specs = [TensorSpec(tuple(t.shape), dtypes.from_torch(t.dtype)) for t in tensors]
        inferred = op.shape(MeshContext(env.mesh or None), specs, values)
        got = [TensorSpec(tuple(t.shape), dtypes.from_torch(t.dtype)) for t in outs]
        assert len(got) == len(inferred) and all(map(_conforms, got, inferred)), \
            f"sdc.{name}: reference gives {got}, the shape rule {inferred}"
    arrays = [to_numpy(t) for t in outs]
    if isinstance(out, (tuple, list)):
        return tuple(arrays)
    return arrays[0]


def _conforms(actual: TensorSpec, inferred: TensorSpec) -> bool:
    """A run-time result fits an inferred spec: same type and rank, equal wherever the rule knows the dim."""
    return (actual.dtype == inferred.dtype and actual.rank == inferred.rank
            and all(not is_static(i) or a == i for a, i in zip(actual.shape, inferred.shape)))


def assert_matches(got: np.ndarray, want, dtype: str) -> None:
    """Compare with the independent result `want` at the tolerance of element type `dtype`."""
    want = np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape}, expected {want.shape}"
    if dtype in TOLERANCE:
        rtol, atol = TOLERANCE[dtype]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True)
    else:
        assert got.dtype == dtypes.to_numpy(dtype), f"element type {got.dtype}, expected {dtype}"
        np.testing.assert_array_equal(got, want)


def random(rng: np.random.Generator, shape, dtype: str = "f32", low: float = -3.0, high: float = 3.0):
    """Random values of `dtype` in [low, high) (integers: [low, high]); never all zeros.

    bf16 comes back as a torch tensor (numpy has no bf16); everything else as numpy.
    """
    shape = tuple(shape)
    kind = dtypes.kind(dtype)
    if kind == "bool":
        a = rng.random(shape) < 0.5
        if a.size:
            a.flat[0] = True
        return a
    if kind in ("int", "uint"):
        a = rng.integers(int(low), int(high), size=shape, endpoint=True).astype(dtypes.to_numpy(dtype))
        if a.size and not a.any():
            a.flat[0] = 1
        return a
    a = rng.uniform(low, high, size=shape)
    if dtype == "bf16":
        return torch.from_numpy(a).to(torch.bfloat16)
    return a.astype(dtypes.to_numpy(dtype))


def as_float64(x) -> np.ndarray:
    """An input as float64 numpy, for computing the reference in higher precision."""
    if isinstance(x, torch.Tensor):
        return x.double().numpy()
    return np.asarray(x).astype(np.float64)

