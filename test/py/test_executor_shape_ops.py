"""The executor's fast shape ops (sdc/runtime/executor.py `_shape_kernel`, and the gather_elements and cast
kernels of `_direct_kernel`): each must give what the op's reference function gives, on fresh
random operands and symbol values, for the edge cases the reference handles (-1 and 0 in reshape
targets, size-1 dims on either side of a broadcast, negative indices), with the reference's own error
where the reference raises one; and the dims it remembers per symbol values must follow the symbols."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sdc.dialect.opdef import RefEnv, get_op
from sdc.dialect.shapes import DYN, TensorSpec
from sdc.runtime import executor
from sdc.runtime.executor import _direct_kernel, _shape_kernel


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(11)


def _same(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


def _same_error(run, reference) -> None:
    """`run()` fails exactly as `reference()` does: the same exception type and message."""
    with pytest.raises(Exception) as got:
        run()
    with pytest.raises(Exception) as want:
        reference()
    assert type(got.value) is type(want.value) and str(got.value) == str(want.value)


# ---------------------------------------------------------------- reshape


RESHAPES = [  # the target, and the operand's shape for symbols B and T
    (["B", "T", 2, -1], lambda b, t: (b, t * 8)),
    ([-1, "T*2"], lambda b, t: (b, t * 2, 3)),
    (["B", "T // 2", 0, 4], lambda b, t: (b * 2, 0, t)),  # 0 is a dim of size 0, as in torch
    (["B*T", 0], lambda b, t: (b, t, 0)),
    (["B + T - T", "T", 8], lambda b, t: (b * t, 8)),
]


@pytest.mark.parametrize("shape, operand", RESHAPES)
def test_reshape_follows_the_symbols(shape: list, operand, gen) -> None:
    reshape = get_op("reshape").ref
    attrs = {"shape": shape}
    kernel = _shape_kernel("reshape", attrs, reshape)
    assert kernel is not reshape
    # a value seen again after others must give its own dims, not the last call's
    for b, t in ((3, 4), (5, 2), (3, 4), (1, 6)):
        env = RefEnv(symbols={"B": b, "T": t})
        x = torch.randn(operand(b, t), generator=gen)
        _same(kernel(env, attrs, x), reshape(env, attrs, x))
        strided = x.transpose(0, -1).contiguous().transpose(0, -1)  # not contiguous: reshape copies it
        _same(kernel(env, attrs, strided), reshape(env, attrs, strided))


def test_reshape_errors_are_the_reference_s(gen) -> None:
    reshape = get_op("reshape").ref
    attrs = {"shape": ["B", 5]}
    kernel = _shape_kernel("reshape", attrs, reshape)
    x = torch.randn(3, 4, generator=gen)
    env = RefEnv(symbols={"B": 3})
    _same_error(lambda: kernel(env, attrs, x), lambda: reshape(env, attrs, x))  # 12 elements into 15
    unbound = RefEnv(symbols={"T": 3})
    _same_error(lambda: kernel(unbound, attrs, x), lambda: reshape(unbound, attrs, x))


def test_remembered_dims_stay_bounded_and_right(gen) -> None:
    reshape = get_op("reshape").ref
    attrs = {"shape": ["B", "T", -1]}
    kernel = _shape_kernel("reshape", attrs, reshape)
    for t in range(1, 3 * executor._SHAPE_CACHE_SIZE):
        env = RefEnv(symbols={"B": 2, "T": t})
        x = torch.randn(2, t * 3, generator=gen)
        _same(kernel(env, attrs, x), reshape(env, attrs, x))


# ---------------------------------------------------------------- broadcast


BROADCASTS = [
    ((3, 1, 4), ["B", "T", 4]),  # a size-1 operand dim stretches
    ((3, 5, 4), ["B", 1, 1]),  # size-1 target dims keep the operand's
    ((5, 1), ["B", 1, "T"]),  # the target has more dims
    ((), ["B", "T"]),  # a scalar
    ((1, 1, 1, 5), [3, "T"]),  # the operand has more dims
    ((3, 5, 4), ["B", "T", 4]),  # already the shape: the operand itself
]


@pytest.mark.parametrize("operand, shape", BROADCASTS)
@pytest.mark.parametrize("view", [False, True])
def test_broadcast_equals_reference(operand: tuple, shape: list, view: bool, gen) -> None:
    broadcast = get_op("broadcast").ref
    attrs = {"shape": shape}
    kernel = _shape_kernel("broadcast", attrs, broadcast, view)
    assert kernel is not broadcast
    env = RefEnv(symbols={"B": 3, "T": 5})
    for dtype in (torch.float32, torch.bool):
        x = torch.randn(operand, generator=gen)
        x = x > 0 if dtype == torch.bool else x
        want, got = broadcast(env, attrs, x), kernel(env, attrs, x)
        _same(got, want)
        if view:
            assert got.data_ptr() == x.data_ptr()  # a view of the operand, no copy
        else:
            assert got.is_contiguous()
    # the same symbols with another operand shape: the result shape follows the operand
    wider = torch.randn(tuple(1 if d == 1 else d for d in operand[:-1]) + (4,) if operand else (4,), generator=gen)
    if len(shape) >= wider.dim():
        try:
            want = broadcast(env, attrs, wider)
        except ValueError:
            _same_error(lambda: kernel(env, attrs, wider), lambda: broadcast(env, attrs, wider))
        else:
            _same(kernel(env, attrs, wider), want)


def test_broadcast_errors_are_the_reference_s(gen) -> None:
    broadcast = get_op("broadcast").ref
    attrs = {"shape": ["B", 4]}
    kernel = _shape_kernel("broadcast", attrs, broadcast, True)
    x = torch.randn(3, 5, generator=gen)
    env = RefEnv(symbols={"B": 3})
    _same_error(lambda: kernel(env, attrs, x), lambda: broadcast(env, attrs, x))
    _same_error(lambda: kernel(RefEnv(), attrs, x), lambda: broadcast(RefEnv(), attrs, x))


# ---------------------------------------------------------------- iota and dim_values


@pytest.mark.parametrize("attrs", [
    {"shape": ["T + 1"], "dimension": 0, "dtype": "i64"},
    {"shape": ["B*T"], "dimension": -1, "dtype": "f32"},
    {"shape": ["B", "T"], "dimension": 1, "dtype": "i32"},  # more than one dim: a ramp, expanded
    {"shape": [4, "T", "B"], "dimension": -3, "dtype": "f16"},
    {"shape": ["T", 1, "B"], "dimension": 2, "dtype": "i64"},
])
def test_iota_equals_reference(attrs: dict) -> None:
    iota = get_op("iota").ref
    kernel = _shape_kernel("iota", attrs, iota)
    assert kernel is not iota
    for b, t in ((3, 4), (2, 7), (3, 4)):
        env = RefEnv(symbols={"B": b, "T": t})
        got = kernel(env, attrs)
        _same(got, iota(env, attrs))
        assert got.is_contiguous()
    _same_error(lambda: kernel(RefEnv(), attrs), lambda: iota(RefEnv(), attrs))


def test_dim_values_equal_reference_and_are_fresh() -> None:
    dim_values = get_op("dim_values").ref
    attrs = {"dims": ["B", "T*2", 7, "B*T - 1"]}
    kernel = _shape_kernel("dim_values", attrs, dim_values)
    assert kernel is not dim_values
    rng = np.random.default_rng(5)
    for _ in range(4):
        env = RefEnv(symbols={"B": int(rng.integers(1, 9)), "T": int(rng.integers(1, 9))})
        first = kernel(env, attrs)
        _same(first, dim_values(env, attrs))
        first.fill_(-1)  # the caller may own it (an output): the next call must not see this
        _same(kernel(env, attrs), dim_values(env, attrs))
    _same_error(lambda: kernel(RefEnv(), attrs), lambda: dim_values(RefEnv(), attrs))


# ---------------------------------------------------------------- gather, gather_elements and cast


def _specs(*tensors: torch.Tensor) -> tuple[TensorSpec, ...]:
    names = {torch.int64: "i64", torch.float32: "f32", torch.bool: "i1", torch.int32: "i32"}
    return tuple(TensorSpec((DYN,) * t.dim(), names[t.dtype]) for t in tensors)


@pytest.mark.parametrize("axis", [0, 1, -1, 2])
def test_gather_elements_equals_reference(axis: int, gen) -> None:
    op = get_op("gather_elements")
    attrs = op.with_defaults({"axis": axis})
    data = torch.randn(4, 6, 5, generator=gen)
    size = data.shape[axis]
    for indices in (torch.randint(0, size, (4, 6, 5), generator=gen),
                    torch.randint(-size, size, (3, 2, 4), generator=gen),  # negative ones, smaller dims
                    torch.randint(-size, 0, (1, 1, 1), generator=gen)):
        for operand in (data, data.transpose(0, 1).contiguous().transpose(0, 1)):
            direct = _direct_kernel("gather_elements", attrs, _specs(operand, indices), (), True)
            assert direct is not None
            _same(direct(operand, indices), op.ref(RefEnv(), attrs, operand, indices))
    ints = torch.randint(-100, 100, (4, 6, 5), generator=gen)
    indices = torch.randint(-size, size, (4, 6, 5), generator=gen)
    direct = _direct_kernel("gather_elements", attrs, _specs(ints, indices), (), True)
    _same(direct(ints, indices), op.ref(RefEnv(), attrs, ints, indices))
    for bad in (size, -size - 1):  # out of range either way: the reference's error
        wrong = indices.clone()
        wrong[0, 0, 0] = bad
        _same_error(lambda: direct(ints, wrong), lambda: op.ref(RefEnv(), attrs, ints, wrong))
    # i32 indices are converted by the reference: it keeps them
    assert _direct_kernel("gather_elements", attrs, _specs(data, indices.to(torch.int32)), (), True) is None


@pytest.mark.parametrize("a, b", [(4, 34), (3, 2), (2, 2)])
def test_channel_shuffle_gather_keeps_the_memory_order(a: int, b: int, gen) -> None:
    """A gather by a block-transpose permutation (what sdc-canonicalize makes of ShuffleNet's channel
    shuffle) runs as one copy in the operand's memory order: equal to the reference's indexing, with a
    channels-last result for a channels-last operand."""
    from sdc.dialect.shapes import block_transpose_indices

    op = get_op("gather")
    attrs = op.with_defaults({"axis": 1})
    indices = torch.tensor(block_transpose_indices(a, b), dtype=torch.int64)
    data = torch.randn(2, a * b, 5, 3, generator=gen)
    specs = (TensorSpec((2, a * b, 5, 3), "f32"), TensorSpec((a * b,), "i64"))
    direct = _direct_kernel("gather", attrs, specs, (None, indices), True)
    for operand in (data, data.contiguous(memory_format=torch.channels_last)):
        got = direct(operand, indices)
        _same(got, op.ref(RefEnv(), attrs, operand, indices))
        want_last = operand.is_contiguous(memory_format=torch.channels_last) and not operand.is_contiguous()
        assert got.is_contiguous(memory_format=torch.channels_last) == want_last
        assert got.data_ptr() != operand.data_ptr()
    # any other permutation is read by index
    other = torch.randperm(a * b, generator=gen)
    if not torch.equal(other, indices):
        plain = _direct_kernel("gather", attrs, specs, (None, other), True)
        _same(plain(data, other), op.ref(RefEnv(), attrs, data, other))
        assert executor._block_transpose(other, a * b) is None
    assert executor._block_transpose(indices, a * b) == (a, b)
    assert executor._block_transpose(indices[:-1], a * b) is None


@pytest.mark.parametrize("source, target", [("f32", "i1"), ("i64", "i1"), ("i1", "i64"), ("i64", "f32"),
                                            ("f32", "i64"), ("f32", "i32"), ("f32", "ui8"), ("f32", "f16"),
                                            ("i32", "i64")])
def test_cast_equals_reference(source: str, target: str, gen) -> None:
    from sdc import dtypes

    op = get_op("cast")
    attrs = {"dtype": target}
    x = torch.randn(4, 5, generator=gen) * 60
    if target == "ui8":
        x = x.abs()  # in range: a negative float in ui8 is undefined
    if source == "i1":
        x = x > 0
    elif not dtypes.is_float(source):
        x = x.to(dtypes.to_torch(source))
    x[0, 0] = 0  # a zero, for the test against zero
    direct = _direct_kernel("cast", attrs, (TensorSpec((4, 5), source),), (), True)
    assert direct is not None
    _same(direct(x), op.ref(RefEnv(), attrs, x))
    _same(direct(x.t()), op.ref(RefEnv(), attrs, x.t()))


# ---------------------------------------------------------------- in an artifact


BROADCAST_PLAN = """
func.func @main(%x: tensor<?x1x4xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["B", 1, 4]>},
                %y: tensor<?x3x4xf32> {sdc.name = "y", sdc.dims = #sdc.dims<["B", 3, 4]>})
    -> (tensor<?x3x4xf32> {sdc.name = "sum"}, tensor<?x3x4xf32> {sdc.name = "spread"}) {
  %0 = "sdc.broadcast"(%x) {shape = ["B", 3, 1]} : (tensor<?x1x4xf32>) -> tensor<?x3x4xf32>
  %1 = "sdc.add"(%0, %y) : (tensor<?x3x4xf32>, tensor<?x3x4xf32>) -> tensor<?x3x4xf32>
  %2 = "sdc.broadcast"(%x) {shape = ["B", 3, 4]} : (tensor<?x1x4xf32>) -> tensor<?x3x4xf32>
  return %1, %2 : tensor<?x3x4xf32>, tensor<?x3x4xf32>
}
"""


def test_broadcast_views_stay_inside_the_call(tmp_path, gen) -> None:
    """A broadcast that only ops read may be a view; one that is an output is memory of the caller's."""
    import sdc

    path = tmp_path / "broadcast.mlir"
    path.write_text(BROADCAST_PLAN)
    exe = sdc.compile(path, output=tmp_path / "broadcast.sdc")
    for b in (2, 5):
        x, y = torch.randn(b, 1, 4, generator=gen), torch.randn(b, 3, 4, generator=gen)
        total, spread = exe(x.numpy(), y.numpy())
        np.testing.assert_array_equal(total, (x.expand(b, 3, 4) + y).numpy())
        np.testing.assert_array_equal(spread, x.expand(b, 3, 4).numpy())
        assert spread.flags["C_CONTIGUOUS"] and 0 not in spread.strides  # not the view of x a call may use
