"""The executor's direct kernels (sdc/runtime/executor.py `_direct_kernel`): where an op's reference
function reduces to one torch call for the operand types and attributes of a plan, the executor calls
that torch function on the operands alone. Each must give exactly what the op's reference function
gives, on fresh random operands (broadcasting ones included), and must not apply where the reference
does more (wide unsigned operands, integer division, transposed matmul operands)."""

from __future__ import annotations

import pytest
import torch

from sdc.dialect.opdef import RefEnv, get_op
from sdc.dialect.shapes import DYN, TensorSpec
from sdc.runtime.executor import _DIRECT, _direct_kernel, _shape_kernel

FLOAT_ONLY = {"exp", "log", "sqrt", "reciprocal", "tanh", "sigmoid", "erf", "sin"}
LOGICAL = {"and", "or", "xor"}


def _operands(name: str, arity: int, gen: torch.Generator) -> list[torch.Tensor]:
    shapes = [(3, 4), (1, 4), (3, 1)][:arity]
    if name in LOGICAL:
        return [torch.rand(s, generator=gen) > 0.5 for s in shapes]
    if name in ("log", "sqrt", "pow"):
        return [torch.rand(s, generator=gen) + 0.5 for s in shapes]
    return [torch.randn(s, generator=gen) for s in shapes]


@pytest.mark.parametrize("name", sorted(_DIRECT) + ["div", "where", "matmul"])
def test_direct_kernel_equals_reference(name: str) -> None:
    gen = torch.Generator().manual_seed(hash(name) % 2**31)
    op = get_op(name)
    if name == "where":
        args = [torch.rand(3, 4, generator=gen) > 0.5, torch.randn(3, 4, generator=gen),
                torch.randn(1, 4, generator=gen)]
    elif name == "matmul":
        args = [torch.randn(2, 3, 5, generator=gen), torch.randn(5, 4, generator=gen)]
    else:
        args = _operands(name, len(op.operands), gen)
    attrs = op.with_defaults({})
    specs = tuple(TensorSpec(tuple(a.shape), "i1" if a.dtype == torch.bool else "f32") for a in args)
    direct = _direct_kernel(name, attrs, specs)
    assert direct is not None, name
    want = op.ref(RefEnv(), attrs, *args)
    got = direct(*args)
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


def test_no_direct_kernel_where_the_reference_does_more() -> None:
    f32, i32, u32 = (TensorSpec((3,), t) for t in ("f32", "i32", "ui32"))
    assert _direct_kernel("add", {}, (u32, u32)) is None  # computed in int64 by the reference
    assert _direct_kernel("div", {}, (i32, i32)) is None  # truncating integer division
    assert _direct_kernel("matmul", {"transpose_lhs": True, "transpose_rhs": False}, (f32, f32)) is None
    assert _direct_kernel("mod", {"fmod": False}, (f32, f32)) is None
    assert _direct_kernel("add", {}, (i32, i32)) is torch.add


def test_static_reshape_and_layer_norm_equal_reference() -> None:
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2, 6, 8, generator=gen)
    reshape = get_op("reshape")
    attrs = {"shape": [2, -1, 4]}
    direct = _direct_kernel("reshape", attrs, (TensorSpec((2, 6, 8), "f32"),))
    assert direct is not None
    torch.testing.assert_close(direct(x), reshape.ref(RefEnv(), attrs, x), rtol=0, atol=0)
    norm = get_op("layer_norm")
    scale, bias = torch.randn(8, generator=gen), torch.randn(8, generator=gen)
    attrs = norm.with_defaults({"epsilon": 1e-5})
    specs = (TensorSpec((DYN, 6, 8), "f32"), TensorSpec((8,), "f32"), TensorSpec((8,), "f32"))
    direct = _direct_kernel("layer_norm", attrs, specs)
    assert direct is not None
    torch.testing.assert_close(direct(x, scale, bias), norm.ref(RefEnv(), attrs, x, scale, bias), rtol=0, atol=0)
    # a symbolic normalized dim keeps the reference function
    assert _direct_kernel("layer_norm", attrs, (TensorSpec((2, 6, DYN), "f32"), *specs[1:])) is None


def test_symbolic_reshape_kernel_equals_reference() -> None:
    x = torch.randn(3, 4, 10, generator=torch.Generator().manual_seed(2))
    reshape = get_op("reshape")
    attrs = {"shape": ["B", "T*2", 5]}
    kernel = _shape_kernel("reshape", attrs, reshape.ref)
    assert kernel is not reshape.ref
    env = RefEnv(symbols={"B": 3, "T": 4})
    torch.testing.assert_close(kernel(env, attrs, x), reshape.ref(env, attrs, x), rtol=0, atol=0)
    # an unbound symbol: the reference function runs and reports it, as without the specialization
    with pytest.raises(Exception) as direct_error:
        kernel(RefEnv(symbols={"B": 3}), attrs, x)
    with pytest.raises(Exception) as ref_error:
        reshape.ref(RefEnv(symbols={"B": 3}), attrs, x)
    assert str(direct_error.value) == str(ref_error.value)
