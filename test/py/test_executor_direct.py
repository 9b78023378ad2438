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


# ---------------------------------------------------------------- shape, indexing and normalization ops

F32 = "f32"


def _check(name: str, attrs: dict, args: list[torch.Tensor], specs: tuple[TensorSpec, ...] | None = None,
           constants: tuple = (), on_cpu: bool = True) -> None:
    """The direct kernel of `name` exists for these operands and gives the reference's values, dtype and
    shape (each part, for an op with several results)."""
    op = get_op(name)
    attrs = op.with_defaults(attrs)
    if specs is None:
        specs = tuple(TensorSpec(tuple(a.shape), "i64" if a.dtype == torch.int64 else F32) for a in args)
    direct = _direct_kernel(name, attrs, specs, constants, on_cpu)
    assert direct is not None, (name, attrs)
    want, got = op.ref(RefEnv(), attrs, *args), direct(*args)
    for w, g in zip(*((want, got) if isinstance(want, tuple) else ((want,), (got,)))):
        assert g.dtype == w.dtype and g.shape == w.shape, (name, attrs)
        torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(7)


def test_view_ops_equal_reference(gen) -> None:
    x = torch.randn(2, 5, 3, generator=gen)
    strided = torch.randn(3, 5, 2, generator=gen).transpose(0, 2)  # non-contiguous, shape (2, 5, 3)
    for operand in (x, strided):
        _check("transpose", {"perm": [2, 0, 1]}, [operand])
        _check("unsqueeze", {"axes": [-1]}, [operand])
        _check("unsqueeze", {"axes": [0, 2, -1]}, [operand])
        _check("split", {"axis": -2, "parts": 5}, [operand])
        _check("split", {"axis": 2, "parts": 3}, [operand])
    column = torch.randn(4, 1, 3, 1, generator=gen)
    _check("squeeze", {"axes": [1, -1]}, [column])
    _check("squeeze", {"axes": [3]}, [column.transpose(0, 2)[:, :, :4]])


def test_split_parts_are_views_on_the_cpu_only() -> None:
    spec = (TensorSpec((2, 6), F32),)
    parts = _direct_kernel("split", {"axis": 1, "parts": 3}, spec, (), on_cpu=True)(torch.arange(12.0).reshape(2, 6))
    assert len(parts) == 3 and not parts[1].is_contiguous()
    assert _direct_kernel("split", {"axis": 1, "parts": 3}, spec, (), on_cpu=False) is None
    assert _direct_kernel("split", {"axis": 1, "parts": 3}, (TensorSpec((2, DYN), F32),), (), True) is None


def test_gather_equals_reference_with_its_errors(gen) -> None:
    table = torch.randn(10, 4, generator=gen)
    indices = torch.tensor([[0, -1, 9], [3, 3, -10]])
    _check("gather", {"axis": 0}, [table, indices])
    _check("gather", {"axis": -1}, [table, torch.tensor([3, -4, 0])])
    _check("gather", {"axis": 1}, [table.t(), indices])  # non-contiguous data
    specs = (TensorSpec((10, 4), F32), TensorSpec((2,), "i64"))
    direct = _direct_kernel("gather", {"axis": 0}, specs, (), True)
    for bad in (torch.tensor([0, 10]), torch.tensor([-11, 0])):
        with pytest.raises(IndexError) as got:
            direct(table, bad)
        with pytest.raises(IndexError) as want:
            get_op("gather").ref(RefEnv(), {"axis": 0}, table, bad)
        assert str(got.value) == str(want.value)
    # i32 indices are converted by the reference: it keeps them
    assert _direct_kernel("gather", {"axis": 0}, (specs[0], TensorSpec((2,), "i32")), (), True) is None


def test_normalization_concat_pow_cast_equal_reference(gen) -> None:
    x = torch.randn(3, 4, 5, generator=gen) * 4
    for name in ("softmax", "log_softmax"):
        _check(name, {"axis": -1}, [x])
        _check(name, {"axis": 1}, [x.transpose(1, 2)])
    _check("concat", {"axis": -2}, [x, torch.randn(3, 2, 5, generator=gen)])
    cube = torch.tensor(3.0)
    specs = (TensorSpec((3, 4, 5), F32), TensorSpec((), F32))
    _check("pow", {}, [x, cube], specs, constants=(None, cube))
    assert _direct_kernel("pow", {}, specs, (None, None), True) is None  # an exponent computed per call
    assert _direct_kernel("pow", {}, specs, (None, cube), False) is None
    ints = torch.randint(-3, 3, (4, 5), generator=gen, dtype=torch.int64)
    i64 = (TensorSpec((4, 5), "i64"),)
    for target in ("i1", "f32", "i32", "i64"):
        _check("cast", {"dtype": target}, [ints], i64)
    for target in ("i1", "f16", "f32"):
        _check("cast", {"dtype": target}, [x], (TensorSpec((3, 4, 5), F32),))
    # float to integer: the conversion truncates toward zero, as the reference's trunc then convert
    for target in ("i8", "i32", "i64"):
        _check("cast", {"dtype": target}, [x], (TensorSpec((3, 4, 5), F32),))


def test_reshape_with_one_symbolic_dim_equals_reference(gen) -> None:
    x = torch.randn(6, 8, generator=gen)
    attrs = {"shape": ["B", 2, 4]}
    direct = _direct_kernel("reshape", attrs, (TensorSpec((DYN, 8), F32),))
    assert direct is not None
    want = get_op("reshape").ref(RefEnv(symbols={"B": 6}), attrs, x)
    torch.testing.assert_close(direct(x), want, rtol=0, atol=0)
    # two symbolic dims, or a zero beside the symbolic one: evaluated per call (`_shape_kernel`)
    assert _direct_kernel("reshape", {"shape": ["B", "T", 4]}, (TensorSpec((DYN, 8), F32),)) is None
    assert _direct_kernel("reshape", {"shape": ["B", 0]}, (TensorSpec((DYN, 0), F32),)) is None


def test_no_direct_kernel_for_a_bad_axis_or_a_dynamic_squeeze() -> None:
    spec = (TensorSpec((2, DYN, 3), F32),)
    assert _direct_kernel("squeeze", {"axes": [1]}, spec) is None  # torch would keep a dim that is not 1
    assert _direct_kernel("softmax", {"axis": 3}, spec) is None
    assert _direct_kernel("unsqueeze", {"axes": [5]}, spec) is None
    assert _direct_kernel("transpose", {"perm": [0, 0, 1]}, spec) is None


def test_reductions_equal_reference(gen) -> None:
    x = torch.randn(3, 4, 5, generator=gen)
    for name in ("reduce_mean", "reduce_sum"):
        for attrs in ({"axes": [-1], "keepdims": True}, {"axes": [0, 2]}, {"axes": []}):
            _check(name, attrs, [x])
            _check(name, attrs, [x.transpose(0, 2)])
    ints = torch.randint(-5, 5, (4, 6), generator=gen, dtype=torch.int64)
    _check("reduce_sum", {"axes": [1]}, [ints], (TensorSpec((4, 6), "i64"),))
    assert _direct_kernel("reduce_mean", {"axes": [1], "keepdims": False}, (TensorSpec((4, 6), "i64"),)) is None
    assert _direct_kernel("reduce_sum", {"axes": [2], "keepdims": False}, (TensorSpec((4, 6), F32),)) is None


@pytest.mark.parametrize("name, attrs, operands", [
    ("broadcast", {"shape": ["B", 1, "T*2"]}, 1),
    ("iota", {"shape": ["T + 1"], "dimension": 0, "dtype": "i32"}, 0),
    ("dim_values", {"dims": ["B", "T*2", 7]}, 0),
])
def test_symbolic_shape_kernels_equal_reference(name: str, attrs: dict, operands: int) -> None:
    op = get_op(name)
    kernel = _shape_kernel(name, attrs, op.ref)
    assert kernel is not op.ref
    args = [torch.randn(3, 1, 1, generator=torch.Generator().manual_seed(4))][:operands]
    env = RefEnv(symbols={"B": 3, "T": 4})
    want, got = op.ref(env, attrs, *args), kernel(env, attrs, *args)
    assert got.dtype == want.dtype and got.is_contiguous()
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    with pytest.raises(Exception) as direct_error:  # an unbound symbol: the reference reports it
        kernel(RefEnv(symbols={}), attrs, *args)
    with pytest.raises(Exception) as ref_error:
        op.ref(RefEnv(symbols={}), attrs, *args)
    assert str(direct_error.value) == str(ref_error.value)


@pytest.mark.parametrize("name, in_place", [("add", 0), ("add", 1), ("mul", 1), ("sub", 0), ("div", 0)])
def test_in_place_binary_equals_reference_kernel(name: str, in_place: int, gen) -> None:
    from sdc.runtime.executor import _direct_in_place
    from sdc.runtime.reference_kernels import reference_kernel

    op = get_op(name)
    big, small = torch.randn(2, 3, 4, generator=gen), torch.rand(3, 1, generator=gen) + 0.5
    args = [big, small] if in_place == 0 else [small, big]
    specs = tuple(TensorSpec(tuple(a.shape), F32) for a in args)
    direct = _direct_in_place(name, in_place, specs)
    assert direct is not None
    want = reference_kernel(name, op.ref, in_place)(RefEnv(), {}, *[a.clone() for a in args])
    copies = [a.clone() for a in args]
    got = direct(*copies)
    assert got.data_ptr() == copies[in_place].data_ptr()  # written into the planner's operand
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    # where the written operand would have to grow, or the types differ, the reference kernel stays
    flipped = tuple(reversed(specs))
    assert _direct_in_place(name, in_place, flipped) is None
    assert _direct_in_place(name, in_place, (specs[0], TensorSpec(specs[1].shape, "f16"))) is None
    assert _direct_in_place(name, in_place, tuple(TensorSpec(s.shape, "i32") for s in specs)) is None


# ---------------------------------------------------------------- one-thread calls


W = [[0.5, -1.0, 0.25, 2.0], [1.5, 0.5, -0.5, 1.0], [-2.0, 0.75, 1.0, 0.5], [0.25, 1.0, -1.5, -0.25]]
BIAS = [0.1, -0.2, 0.3, -0.4]
# x @ W + BIAS (a linear layer: one addmm), split, mixed with a product the add does not read last
SMALL = f"""
func.func @main(%x: tensor<?x3x4xf32> {{sdc.name = "x", sdc.dims = #sdc.dims<["B", 3, 4]>}})
    -> (tensor<?x3x2xf32> {{sdc.name = "y"}}) {{
  %w = "sdc.constant"() {{value = dense<{W}> : tensor<4x4xf32>}} : () -> tensor<4x4xf32>
  %b = "sdc.constant"() {{value = dense<{BIAS}> : tensor<4xf32>}} : () -> tensor<4xf32>
  %0 = "sdc.matmul"(%x, %w) : (tensor<?x3x4xf32>, tensor<4x4xf32>) -> tensor<?x3x4xf32>
  %1 = "sdc.add"(%0, %b) : (tensor<?x3x4xf32>, tensor<4xf32>) -> tensor<?x3x4xf32>
  %2 = "sdc.matmul"(%1, %w) : (tensor<?x3x4xf32>, tensor<4x4xf32>) -> tensor<?x3x4xf32>
  %3 = "sdc.add"(%b, %2) : (tensor<4xf32>, tensor<?x3x4xf32>) -> tensor<?x3x4xf32>
  %4 = "sdc.mul"(%2, %3) : (tensor<?x3x4xf32>, tensor<?x3x4xf32>) -> tensor<?x3x4xf32>
  %5:2 = "sdc.split"(%4) {{axis = -1 : i64, parts = 2 : i64}}
      : (tensor<?x3x4xf32>) -> (tensor<?x3x2xf32>, tensor<?x3x2xf32>)
  %6 = "sdc.add"(%5#0, %5#1) : (tensor<?x3x2xf32>, tensor<?x3x2xf32>) -> tensor<?x3x2xf32>
  %7 = "sdc.softmax"(%6) {{axis = -1 : i64}} : (tensor<?x3x2xf32>) -> tensor<?x3x2xf32>
  return %7 : tensor<?x3x2xf32>
}}
"""


def _small_eager(x: torch.Tensor) -> torch.Tensor:
    w, b = torch.tensor(W), torch.tensor(BIAS)
    product = (x @ w + b) @ w
    a, c = (product * (product + b)).split(2, dim=-1)
    return torch.softmax(a + c, dim=-1)


def test_small_calls_run_on_one_thread_and_match_eager(tmp_path, monkeypatch) -> None:
    """A linear layer runs as one addmm. At two threads, small ops run on one thread (switched at
    the first, restored at the end of every call: the same on each call, so repeated calls compute
    the same bits); results match torch eager either way, and the caller's thread count is restored.
    (The torch path: with C kernels on, these groups would be generated C kernels.)"""
    import sdc
    from sdc.runtime import executor, gate

    monkeypatch.setenv("SDC_C_KERNELS", "0")
    path = tmp_path / "small.mlir"
    path.write_text(SMALL)
    exe = sdc.compile(path, output=tmp_path / "small.sdc")
    x = torch.randn(5, 3, 4, generator=torch.Generator().manual_seed(3))
    want = _small_eager(x)
    # the first bias add joins its matmul; the second does not (the product is read again after it)
    fused = executor._fuse_bias_adds(exe._executor.program, exe._executor.initial)
    assert sum(isinstance(i, executor.PreparedOp) and i.direct is executor._linear for i in fused) == 1
    before = torch.get_num_threads()
    seen: list[int] = []
    set_threads = torch.set_num_threads
    try:
        set_threads(2)
        monkeypatch.setattr(executor.torch, "set_num_threads", lambda n: (seen.append(n), set_threads(n)))
        assert exe._executor.gated
        # (product limit, other ops' limit): all small; nothing small; only the other ops small
        for (products, others), switched in (((gate.SERIAL_ELEMENTS, gate.SERIAL_OP_ELEMENTS), [1, 2]),
                                             ((10, 10), []), ((10, gate.SERIAL_OP_ELEMENTS), [1, 2])):
            monkeypatch.setattr(gate, "SERIAL_ELEMENTS", products)
            monkeypatch.setattr(gate, "SERIAL_OP_ELEMENTS", others)
            exe = sdc.runtime.load(tmp_path / "small.sdc")  # a product's gate keeps its decision per shapes
            outs = []
            for _ in range(2):
                seen.clear()
                outs.append(torch.as_tensor(exe(x.numpy())[0]))
                torch.testing.assert_close(outs[-1], want, rtol=1e-5, atol=1e-6)
                assert seen == switched  # every call alike
                assert torch.get_num_threads() == 2
            assert torch.equal(outs[0], outs[1])
    finally:
        monkeypatch.undo()
        torch.set_num_threads(before)


class Branches(torch.nn.Module):
    """An Inception block's 4-way concat of four convolutions, and a 3-way one whose inner 2-way result
    is read again (so it stays a concat of its own)."""

    def __init__(self):
        super().__init__()
        self.convs = torch.nn.ModuleList(torch.nn.Conv2d(3, 4 + i, 3, padding=1) for i in range(4))

    def forward(self, x):
        a, b, c, d = (torch.relu(conv(x)) for conv in self.convs)
        da = torch.cat([d, a], 1)
        dab = torch.cat([da, b], 1)
        return torch.cat([a, b, c, d], 1) * 2, dab, (da * dab[:, :11]).sum((2, 3))  # da read after dab


def test_chains_of_concats_join_into_one_cat(tmp_path) -> None:
    import sdc
    from sdc.runtime.executor import PreparedOp, _join_concat_chains

    torch.manual_seed(0)
    model = Branches().eval()
    exe = sdc.compile(model, (torch.randn(2, 3, 8, 8),), output=tmp_path / "m.sdc")
    ex = exe._executor
    before = [op for op in ex.program if isinstance(op, PreparedOp) and op.name == "concat"]
    after = [op for op in _join_concat_chains(ex.program, ex.output_slots)
             if isinstance(op, PreparedOp) and op.name == "concat"]
    assert all(len(op.ins) == 2 for op in before) and len(before) == 5
    assert sorted(len(op.ins) for op in after) == [2, 2, 4]  # the 4-way chain joined; da and (da, b) not
    for _ in range(2):
        x = torch.randn(2, 3, 8, 8)
        with torch.no_grad():
            want = model(x)
        for got, w in zip(exe(x), want):
            torch.testing.assert_close(got, w, rtol=1e-5, atol=1e-5)


def test_a_products_gate_decides_per_operand_shapes(monkeypatch) -> None:
    """The gate keeps a product's one-thread decision per operand shapes: a call at a large shape after
    one at a small shape (and back) still gets the caller's threads (and one thread)."""
    from types import SimpleNamespace

    from sdc.runtime import executor

    seen: list[int] = []
    monkeypatch.setattr(executor.torch, "set_num_threads", seen.append)
    op = SimpleNamespace(ins=(0, 1), name="matmul", attrs={})
    gated = executor._thread_gate(op, lambda vals, state: None)
    small, large = [torch.ones(2, 3), torch.ones(3, 4)], [torch.ones(512, 512), torch.ones(512, 512)]
    state = SimpleNamespace(threads=2, current=2)
    for vals, want in ((small, 1), (large, 2), (small, 1), (large, 2)):
        gated(vals, state)
        assert state.current == want
    assert seen == [1, 2, 1, 2]
