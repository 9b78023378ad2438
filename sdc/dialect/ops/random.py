"""Random numbers as a pure function of (seed, offset, element index): a counter-based RNG.

`sdc.random_uniform(seed, offset)` gives element i (row-major) the value
`philox_uniform(seed, offset + i)`: Philox-4x32 with 10 rounds, keyed by the 64-bit seed, on the
counter (low 32 bits of offset + i, high 32 bits, 0, 0); its first word becomes a float in [0, 1).
That is exactly Triton's `tl.rand(seed, offsets)` for int64 offsets, so a generated kernel draws
the same bits as this reference with one call. Being a function of its operands, the op is pure:
the same seed and offset give the same tensor on every target, so a training step is
deterministic for a seed, a new seed or offset is a new input value (no recompile), and a resumed
run draws what the uninterrupted one drew. Dropout and other random ops are built from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sdc import dtypes
from sdc.dialect.hooks import FusionClass, OpKind, Recompute
from sdc.dialect.opdef import OpDef, attr, register
from sdc.dialect.ops.core import shape_attr_dims
from sdc.dialect.shapes import ShapeContext, TensorSpec
from sdc.lazy import lazy_import

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_import("torch")

PHILOX_ROUNDS = 10
_KEY_A, _KEY_B = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_ROUND_A, _ROUND_B = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_MASK32 = np.uint64(0xFFFFFFFF)
_TO_UNIT = np.float32(4.6566127342e-10)  # Triton's scale: the largest with MAX_INT * scale < 1 in f32


def philox_bits(seed: int, counters: np.ndarray) -> np.ndarray:
    """Philox-4x32-10's first output word (uint32) for each 64-bit counter, keyed by `seed`."""
    n = np.asarray(counters, dtype=np.uint64)
    c0, c1 = n & _MASK32, n >> np.uint64(32)
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    s = np.uint64(seed & 0xFFFFFFFFFFFFFFFF)
    k0, k1 = s & _MASK32, s >> np.uint64(32)
    with np.errstate(over="ignore"):
        for _ in range(PHILOX_ROUNDS):
            p_b, p_a = _ROUND_B * c2, _ROUND_A * c0  # 32 x 32 -> 64 bits: exact in uint64
            c0, c1, c2, c3 = ((p_b >> np.uint64(32)) ^ c1 ^ k0, p_b & _MASK32,
                              (p_a >> np.uint64(32)) ^ c3 ^ k1, p_a & _MASK32)
            k0, k1 = (k0 + _KEY_A) & _MASK32, (k1 + _KEY_B) & _MASK32
    return c0.astype(np.uint32)


def philox_uniform(seed: int, offset: int, count: int) -> np.ndarray:
    """`count` f32 values in [0, 1): element i from counter `offset + i` (what sdc.random_uniform draws)."""
    index = np.arange(count, dtype=np.uint64) + np.uint64(offset & 0xFFFFFFFFFFFFFFFF)
    x = philox_bits(seed, index).view(np.int32)
    x = np.where(x < 0, ~x, x)
    return x.astype(np.float32) * _TO_UNIT


def _random_uniform_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    for what, spec in zip(("seed", "offset"), ins):
        if spec.rank != 0 or not dtypes.is_integer(spec.dtype):
            ctx.fail(f"{what} must be a rank-0 integer tensor, found {spec}")
    if any(isinstance(d, int) and d < 0 for d in attrs["shape"]):
        ctx.fail(f"shape {list(attrs['shape'])} has a negative entry")
    if not dtypes.is_float(attrs["dtype"]):
        ctx.fail(f"dtype must be a float type, found {attrs['dtype']}")
    return [TensorSpec(shape_attr_dims(attrs["shape"]), attrs["dtype"])]


def _random_uniform_ref(env, a, seed, offset):
    shape = [env.dim(d) for d in a["shape"]]
    count = int(np.prod(shape, dtype=np.int64))
    values = philox_uniform(int(seed), int(offset), count).reshape(shape)
    return torch.from_numpy(values).to(dtypes.to_torch(a["dtype"]))


register(OpDef(
    name="random_uniform", kind=OpKind.VALUES,
    fusion=FusionClass.ELEMENTWISE,  # a pure function of the index
    recompute=Recompute.NEVER,  # deterministic, yet a mask is cheaper kept than redrawn
    differentiable=False,  # integer operands (seed, offset)
    summary="uniform random numbers in [0, 1) from a seed and a counter offset",
    doc=("Element i (row-major) is `philox_uniform(seed, offset + i)`: Philox-4x32-10 keyed by the 64-bit "
         "`seed` on the counter `offset + i` (low word, high word, 0, 0), its first word mapped to [0, 1) "
         "as Triton's `tl.rand` maps it, computed in f32 and cast to `dtype`. A pure function of its "
         "operands: a random op in a step takes its seed and offset as inputs, so a new seed never "
         "recompiles and a run is reproducible."),
    operands=("seed", "offset"),
    attrs={
        "shape": attr("shape", doc="result dims: ints, or symbol names bound by the inputs"),
        "dtype": attr("dtype", "f32", doc="result element type (a float type)"),
    },
    shape=_random_uniform_rule, ref=_random_uniform_ref,
    example=('%2 = "sdc.random_uniform"(%0, %1) {dtype = f32, shape = [4, 8]} '
             ": (tensor<i64>, tensor<i64>) -> tensor<4x8xf32>"),
))
