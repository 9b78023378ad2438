"""Each elementwise op's scalar formula (`OpDef.scalar`, sdc/dialect/scalar.py), computed with torch
primitives, against the op's reference function on fresh random inputs: a wrong formula fails here
before any renderer derives code from it."""

from __future__ import annotations

import math

import pytest
import torch

from sdc import dtypes
from sdc.dialect import scalar as S
from sdc.dialect.opdef import RefEnv, all_ops
from sdc.dialect.ops import elementwise as E

ELEMENTWISE_FAMILIES = ("elementwise unary", "elementwise binary", "elementwise ternary", "comparison", "logical")

# attribute sets beyond the defaults
VARIANTS = {
    "gelu": [{"approximate": "tanh"}],
    "leaky_relu": [{"alpha": 0.3}],
    "elu": [{"alpha": 0.7}],
    "hard_sigmoid": [{"alpha": 1 / 6, "beta": 0.5}],
    "clip": [{"min": -0.5, "max": 2.0}, {"min": -3.0}, {"max": 1.5}],
    "mod": [{"fmod": True}],
}


# torch's vectorized f32 gelu is NaN at +-inf (its float64 one gives inf and NaN): compared elsewhere
INFINITE_INPUTS_DIFFER = {("gelu", "f32")}


def _category(name: str) -> str:
    for table in (E.UNARY, E.BINARY):
        if name in table:
            return table[name][1]
    if name in E.PREDICATES:
        return E.FLOAT
    if name in E.LOGICAL:
        return E.BOOL
    return E.NUMERIC  # comparisons, where


def _dtypes_for(category: str) -> list[str]:
    return {E.FLOAT: ["f32", "f64"], E.NUMERIC: ["f32", "i32", "i8"], E.INT: ["i32", "i64"],
            E.BOOL: ["i1"], E.INTBOOL: ["i32", "i1"], E.ANY: ["f32"]}[category]


def _random(dtype: str, shape: tuple[int, ...], gen: torch.Generator, nonzero: bool = False) -> torch.Tensor:
    if dtype == "i1":
        return torch.randint(0, 2, shape, generator=gen).bool()
    t = dtypes.to_torch(dtype)
    if dtypes.is_integer(dtype):
        info = torch.iinfo(t)
        x = torch.randint(max(info.min, -100), min(info.max, 100), shape, generator=gen, dtype=torch.int64)
        if nonzero:
            x = torch.where(x == 0, torch.ones_like(x), x)
        return x.to(t)
    x = torch.randn(shape, generator=gen, dtype=torch.float64) * 4
    x.view(-1)[:6] = torch.tensor([0.0, -0.0, 25.0, -25.0, math.nan, math.inf], dtype=torch.float64)
    return x.to(t)


def _cases():
    for name, op in sorted(all_ops().items()):
        if op.family not in ELEMENTWISE_FAMILIES:
            continue
        for dtype in _dtypes_for(_category(name)):
            for attrs in [{}, *VARIANTS.get(name, [])]:
                yield pytest.param(name, dtype, attrs, id=f"{name}-{dtype}-{attrs}" if attrs else f"{name}-{dtype}")


def test_every_elementwise_op_has_a_formula():
    ops = [name for name, op in all_ops().items() if op.family in ELEMENTWISE_FAMILIES]
    assert len(ops) > 50
    missing = sorted(name for name in ops if all_ops()[name].scalar is None)
    assert not missing, f"elementwise ops without a scalar formula: {missing}"


@pytest.mark.parametrize("name,dtype,attrs", list(_cases()))
def test_formula_matches_the_reference(name, dtype, attrs):
    op = all_ops()[name]
    gen = torch.Generator().manual_seed(hash((name, dtype)) % 2**31)
    a = op.with_defaults(attrs)
    shape = (7, 9)
    if name == "where":
        ins = [_random("i1", shape, gen), _random(dtype, shape, gen), _random(dtype, shape, gen)]
    elif name in E.LOGICAL:
        ins = [_random("i1", shape, gen) for _ in range(2)]
    elif len(op.operands) == 2:
        integer = dtypes.is_integer(dtype)
        y = _random(dtype, shape, gen, nonzero=integer and name in ("div", "mod"))
        if name in ("shift_left", "shift_right"):
            y = torch.randint(0, 7, shape, generator=gen).to(dtypes.to_torch(dtype))
        if name == "pow" and integer:
            y = torch.randint(0, 4, shape, generator=gen).to(dtypes.to_torch(dtype))
        ins = [_random(dtype, shape, gen), y]
    else:
        ins = [_random(dtype, shape, gen)]
    want = op.ref(RefEnv(), a, *ins)
    got = S.evaluate(op.scalar, a, *ins)
    if (name, dtype) in INFINITE_INPUTS_DIFFER:
        finite = torch.isfinite(ins[0]) | torch.isnan(ins[0])
        got, want = got[finite], want[finite]
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.is_floating_point:
        tol = 1e-12 if got.dtype == torch.float64 else 2e-6
        torch.testing.assert_close(got, want, rtol=tol, atol=tol, equal_nan=True)
    else:
        assert torch.equal(got, want)


def test_a_wrong_formula_fails_the_comparison():
    """The check above can fail: gelu's tanh approximation is not exact gelu."""
    x = torch.randn(64, dtype=torch.float64)
    gelu = all_ops()["gelu"]
    exact = gelu.ref(RefEnv(), gelu.with_defaults({}), x)
    approx = S.evaluate(gelu.scalar, gelu.with_defaults({"approximate": "tanh"}), x)
    assert not torch.allclose(exact, approx, rtol=1e-12, atol=1e-12)


def test_steps_type_numbers_by_what_they_meet_and_share_subtrees():
    x = S.operand(0)
    shared = x + 3
    expr = S.where(shared < 0, 0, shared)
    got = S.steps(expr, ["i8"])
    assert [s.op for s in got] == ["operand", "const", "add", "const", "lt", "const", "where"]
    assert [s.dtype for s in got] == ["i8", "i8", "i8", "i8", "i1", "i8", "i8"]
    assert got[1].value == 3 and isinstance(got[1].value, int)
    sign = S.steps(S.where(x > 0, 1, S.where(x < 0, -1, 0)), ["f32"])
    assert sign[-1].dtype == "f32" and {s.value for s in sign if s.op == "const"} == {0.0, 1.0, -1.0}
    assert S.primitives_of(expr) == {"add", "lt", "where"}


def test_a_primitive_checks_its_arity():
    with pytest.raises(ValueError, match="primitive 'exp' takes 1 operands, given 2"):
        S.primitive("exp", S.operand(0), S.operand(1))


def test_no_renderer_writes_a_composite_op_itself():
    """Renderers supply primitives only: an op with a formula of several primitives has no method of
    its own in any of them, and each renders every composite op its primitives cover."""
    from sdc.codegen.c.renderer import CRenderer
    from sdc.codegen.cuda.renderer import CudaRenderer
    from sdc.codegen.kernel.decompose import is_composite
    from sdc.codegen.triton.renderer import TritonRenderer

    composites = {name for name in all_ops() if is_composite(name)}
    assert {"gelu", "silu", "softplus", "mish", "clip", "sign", "relu", "hard_swish"} <= composites
    for renderer in (TritonRenderer, CRenderer, CudaRenderer):
        own = sorted(a for a in dir(renderer) if a.startswith("op_") and a[3:] in composites)
        assert not own, f"{renderer.__name__} writes composite ops itself: {own}"
        assert {"gelu", "silu", "softplus", "clip"} <= renderer.elementwise_ops()
