"""The matmul template of the C backend (sdc/codegen/c/matmul.py).

Each case is a kernel group of plan.json op entries (sdc.matmul and its epilogue), lowered with the
C renderer's op set, rendered, compiled with the host's C compiler and called through ctypes as the
runtime does (the ABI of sdc/runtime/launch/c.py), then compared with torch eager on fresh random
inputs: 2-D and batched, broadcast batch dims, transposed operands, bias/activation/residual
epilogues, several results, f32 and f64, sizes of 1 and 0, odd sizes that leave partial tiles, a
size known at run time only.
"""

from __future__ import annotations

import ctypes
import re
from typing import Callable

import pytest
import torch

from sdc.codegen.c.matmul import ROWS, tile_columns, why_not_matmul
from sdc.codegen.c.renderer import CRenderer
import sdc.codegen.kernel.matmul as kernel_matmul
from sdc.codegen.kernel import KernelProgram, lower_group
from sdc.codegen.kernel.program import MATMUL
from sdc.runtime.launch.c import C_CACHE_ENV, build_library, kernel_function

TORCH = {"f32": torch.float32, "f64": torch.float64, "i1": torch.bool, "f16": torch.float16}
# (rtol, atol): f32 sums of up to ~130 products of values about 0.5 in a different order than torch's
TOLERANCE = {"f32": (1e-5, 2e-5), "f64": (1e-12, 1e-12)}


def entry(op: str, inputs: list[str], output: str, **attrs) -> dict:
    return {"op": op, "inputs": inputs, "outputs": [output], "attrs": attrs}


def values(**shapes) -> dict:
    return {vid: {"shape": list(shape), "dtype": dtype} for vid, (shape, dtype) in shapes.items()}


# every group the tests run, by name: all are rendered into one source and compiled once
GROUPS: dict[str, tuple[list[dict], dict, list[str]]] = {}


def group(ops: list[dict], vals: dict, outputs: list[str]) -> str:
    name = f"k{len(GROUPS)}"
    GROUPS[name] = (ops, vals, outputs)
    return name


@pytest.fixture(scope="module")
def kernels(tmp_path_factory) -> dict[str, tuple[KernelProgram, Callable]]:
    """Each group's program and its compiled C function."""
    renderer = CRenderer()
    programs, functions = {}, []
    with pytest.MonkeyPatch.context() as mp:
        # The Triton lowering multiplies f16/bf16/f32 only (its GPU template); the C template also takes
        # f64, so the f64 groups are lowered with the dtype allowed.
        mp.setattr(kernel_matmul, "MATMUL_DTYPES", kernel_matmul.MATMUL_DTYPES | {"f64"})
        for name, (ops, vals, outputs) in GROUPS.items():
            inputs = [v for v in vals if not any(v in e["outputs"] for e in ops)]
            programs[name] = lower_group(ops, inputs, outputs, vals, renderer.elementwise_ops())
            assert programs[name].template == MATMUL and renderer.why_not(programs[name]) is None
            functions.append(renderer.function(programs[name], name))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(C_CACHE_ENV, str(tmp_path_factory.mktemp("c-cache")))
        library = build_library(renderer.file(functions))
    return {name: (program, kernel_function(library, name, RuntimeError)) for name, program in programs.items()}


def run_c(kernel: tuple[KernelProgram, Callable], tensors: dict[str, torch.Tensor], out_shape: list[int],
          k: int) -> list[torch.Tensor]:
    """The group's results from its C function, called through ctypes as the runtime calls it."""
    program, fn = kernel
    args = [tensors[a.value].contiguous() for a in program.args]
    results = [torch.full(out_shape, float("nan")).to(TORCH[r.dtype]) for r, _ in program.results]
    pointers = (ctypes.c_void_p * (len(args) + len(results)))(*[t.data_ptr() for t in [*args, *results]])
    domain = (ctypes.c_int64 * (len(out_shape) + 1))(*out_shape, k)
    fn(pointers, domain)
    return results


@pytest.fixture
def rng() -> torch.Generator:
    return torch.Generator().manual_seed(torch.seed())


def randn(shape, dtype: str, rng: torch.Generator) -> torch.Tensor:
    return (torch.randn(shape, generator=rng, dtype=torch.float64) * 0.5).to(TORCH[dtype])


def assert_close(got: torch.Tensor, want: torch.Tensor, dtype: str) -> None:
    rtol, atol = TOLERANCE[dtype]
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol)


def product_shape(lhs, rhs, transpose_lhs=False, transpose_rhs=False) -> tuple[list[int], int]:
    """The product's shape and its K."""
    m, k = (lhs[-1], lhs[-2]) if transpose_lhs else (lhs[-2], lhs[-1])
    n = rhs[-2] if transpose_rhs else rhs[-1]
    return [*torch.broadcast_shapes(tuple(lhs[:-2]), tuple(rhs[:-2])), m, n], k


def _dims(shape) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


class Product:
    """A matmul group alone, registered at import."""

    def __init__(self, lhs, rhs, dtype="f32", transpose_lhs=False, transpose_rhs=False):
        self.lhs, self.rhs, self.dtype = lhs, rhs, dtype
        self.transpose_lhs, self.transpose_rhs = transpose_lhs, transpose_rhs
        self.out, self.k = product_shape(lhs, rhs, transpose_lhs, transpose_rhs)
        attrs = {k: True for k, on in (("transpose_lhs", transpose_lhs), ("transpose_rhs", transpose_rhs)) if on}
        vals = values(x=(lhs, dtype), w=(rhs, dtype), y=(self.out, dtype))
        self.name = group([entry("matmul", ["x", "w"], "y", **attrs)], vals, ["y"])

    def check(self, kernels, rng) -> None:
        x, w = randn(self.lhs, self.dtype, rng), randn(self.rhs, self.dtype, rng)
        want = torch.matmul(x.transpose(-1, -2) if self.transpose_lhs else x,
                            w.transpose(-1, -2) if self.transpose_rhs else w)
        (y,) = run_c(kernels[self.name], {"x": x, "w": w}, self.out, self.k)
        assert_close(y, want, self.dtype)

    def __repr__(self) -> str:
        return (f"{self.dtype}-{_dims(self.lhs)}{'T' if self.transpose_lhs else ''}x"
                f"{_dims(self.rhs)}{'T' if self.transpose_rhs else ''}")


# ---------------------------------------------------------------- the product alone

PRODUCTS = [
    Product((48, 32), (32, 128)),  # whole tiles
    Product((48, 32), (32, 32)),
    Product((37, 29), (29, 45)),  # partial tiles on both edges
    Product((ROWS + 1, 5), (5, tile_columns("f32") + 1)),  # one row and one column past whole tiles
    Product((6, 16, 16), (6, 16, 16)),  # batched
    Product((3, 17, 33), (33, 19)),  # rhs broadcast over the batch
    Product((17, 33), (3, 33, 19)),  # lhs broadcast over the batch
    Product((2, 1, 5, 7), (3, 7, 9)),  # a size-1 batch dim broadcasting, and a missing one
    Product((1, 9), (9, 20)),  # M = 1
    *(Product((m, 21), (21, 35)) for m in range(2, ROWS)),  # every row count of a tile of its own
    Product((2, 3, 40), (40, 17)),  # a tile of 3 rows per batch
    Product((3, 9, 12), (3, 12, 21)),  # B in place per batch, its partial tile's columns copied per batch
    Product((9, 20), (20, 1)),  # N = 1
    Product((9, 1), (1, 20)),  # K = 1
    Product((1, 1), (1, 1)),
    Product((13, 11), (21, 11), transpose_rhs=True),
    Product((11, 13), (11, 21), transpose_lhs=True),
    Product((11, 13), (21, 11), transpose_lhs=True, transpose_rhs=True),
    Product((4, 13, 11), (4, 21, 11), transpose_rhs=True),
    Product((4, 11, 13), (4, 11, 21), transpose_lhs=True),
    Product((2, 4, 16, 8), (2, 1, 16, 8), transpose_rhs=True),  # attention scores, K broadcast over heads
    Product((37, 29), (29, 45), "f64"),
    Product((3, 6, 10), (3, 7, 10), "f64", transpose_rhs=True),
    Product((5, 3), (3, 1), "f64"),
]


@pytest.mark.parametrize("product", PRODUCTS, ids=repr)
def test_products_match_torch(product, kernels, rng):
    product.check(kernels, rng)


DYNAMIC = group([entry("matmul", ["x", "w"], "y")], values(x=(("M", 16), "f32"), w=((16, 40), "f32"),
                                                             y=(("M", 40), "f32")), ["y"])


@pytest.mark.parametrize("m", [23, 6, 1])
def test_a_size_known_at_run_time_only(m, kernels, rng):
    assert kernels[DYNAMIC][0].domain == (None, 40, 16)
    x, w = randn((m, 16), "f32", rng), randn((16, 40), "f32", rng)
    (y,) = run_c(kernels[DYNAMIC], {"x": x, "w": w}, [m, 40], 16)
    assert_close(y, x @ w, "f32")


LONG_K = group([entry("matmul", ["x", "w"], "y")], values(x=((7, 8192), "f32"), w=((8192, 16), "f32"),
                                                            y=((7, 16), "f32")), ["y"])


def test_long_sums_of_positive_terms_round_like_blocked_sums(kernels, rng):
    """8192 positive products per element: one running sum per element ends about 2e-6 off (every
    addition rounds alike), a sum of 128-term blocks about 4e-7 (ResNet-50's classifier, 2048 terms,
    failed its stored output by 1.3e-5 relative with the running sum)."""
    x = torch.rand((7, 8192), generator=rng) + 0.5
    w = torch.rand((8192, 16), generator=rng) + 0.5
    (y,) = run_c(kernels[LONG_K], {"x": x, "w": w}, [7, 16], 8192)
    exact = x.double() @ w.double()
    assert float(((y.double() - exact).abs() / exact).max()) < 1e-6


# ---------------------------------------------------------------- epilogues

ACTIVATIONS = {None: lambda t: t, "relu": torch.relu, "gelu": torch.nn.functional.gelu}


def bias_group(m: int, k: int, n: int, activation: str | None, dtype: str = "f32") -> str:
    vals = values(x=((m, k), dtype), w=((k, n), dtype), b=((n,), dtype), y=((m, n), dtype), z=((m, n), dtype),
                  g=((m, n), dtype))
    ops = [entry("matmul", ["x", "w"], "y"), entry("add", ["y", "b"], "z")]
    if activation is not None:
        ops.append(entry(activation, ["z"], "g"))
    return group(ops, vals, [ops[-1]["outputs"][0]])


BIASED = [(m, k, n, activation, dtype, bias_group(m, k, n, activation, dtype))
          for m, k, n, dtype in [(48, 32, 128, "f32"), (37, 29, 45, "f32"), (20, 30, 17, "f64")]
          for activation in ACTIVATIONS]


@pytest.mark.parametrize("m,k,n,activation,dtype,name", BIASED, ids=[f"{b[4]}-{b[0]}x{b[1]}x{b[2]}-{b[3]}" for b in BIASED])
def test_bias_and_activation(m, k, n, activation, dtype, name, kernels, rng):
    x, w, b = randn((m, k), dtype, rng), randn((k, n), dtype, rng), randn((n,), dtype, rng)
    (out,) = run_c(kernels[name], {"x": x, "w": w, "b": b}, [m, n], k)
    assert_close(out, ACTIVATIONS[activation](torch.addmm(b, x, w)), dtype)


RESIDUAL = group(
    [entry("matmul", ["x", "w"], "y"), entry("add", ["y", "r"], "u"), entry("mul", ["u", "s"], "v"),
     entry("sub", ["v", "t"], "o")],
    values(x=((3, 17, 33), "f32"), w=((33, 19), "f32"), r=((3, 17, 19), "f32"), s=((17, 1), "f32"),
           t=((3, 1, 1), "f32"), y=((3, 17, 19), "f32"), u=((3, 17, 19), "f32"), v=((3, 17, 19), "f32"),
           o=((3, 17, 19), "f32")), ["o"])


def test_batched_residual_add_and_per_row_scale(kernels, rng):
    """Epilogue operands of every kind: the whole tile (residual), per row (M only), per batch."""
    program = kernels[RESIDUAL][0]
    shapes = GROUPS[RESIDUAL][1]
    tensors = {a.value: randn(shapes[a.value]["shape"], "f32", rng) for a in program.args}
    (o,) = run_c(kernels[RESIDUAL], tensors, [3, 17, 19], 33)
    assert_close(o, (tensors["x"] @ tensors["w"] + tensors["r"]) * tensors["s"] - tensors["t"], "f32")


TWO_RESULTS = group([entry("matmul", ["x", "w"], "y"), entry("gt", ["y", "zero"], "g")],
                    values(x=((10, 12), "f32"), w=((12, 30), "f32"), y=((10, 30), "f32"), g=((10, 30), "i1"),
                           zero=((), "f32")), ["y", "g"])


def test_two_results_one_of_them_a_comparison(kernels, rng):
    x, w = randn((10, 12), "f32", rng), randn((12, 30), "f32", rng)
    y, g = run_c(kernels[TWO_RESULTS], {"x": x, "w": w, "zero": torch.zeros(())}, [10, 30], 12)
    assert_close(y, x @ w, "f32")
    assert torch.equal(g, (x @ w) > 0)


# ---------------------------------------------------------------- empty domains

EMPTY = [Product((0, 8), (8, 5)), Product((4, 8), (8, 0)), Product((0, 3, 8), (0, 8, 5))]
K_ZERO = bias_group(5, 0, 9, "relu")


@pytest.mark.parametrize("product", EMPTY, ids=repr)
def test_empty_products_write_nothing(product, kernels, rng):
    product.check(kernels, rng)


def test_k_zero_is_the_epilogue_of_zeros(kernels, rng):
    x, w, b = torch.empty(5, 0), torch.empty(0, 9), randn((9,), "f32", rng)
    (out,) = run_c(kernels[K_ZERO], {"x": x, "w": w, "b": b}, [5, 9], 0)
    assert_close(out, torch.relu(torch.addmm(b, x, w)), "f32")


# ---------------------------------------------------------------- what stays torch

def test_f16_a_laid_out_result_and_an_integer_exp_say_why():
    renderer = CRenderer()
    vals = values(x=((4, 8), "f16"), w=((8, 16), "f16"), y=((4, 16), "f16"))
    program = lower_group([entry("matmul", ["x", "w"], "y")], ["x", "w"], ["y"], vals, renderer.elementwise_ops())
    assert re.match(r"a C matmul of f16 x f16 -> f16 \(the template multiplies f32/f64", why_not_matmul(renderer, program))
    vals = values(x=((4, 8), "f32"), w=((8, 16), "f32"), y=((4, 16), "f32"), t=((4, 16), "f32"))
    ops = [entry("matmul", ["x", "w"], "y"), entry("layout_cast", ["y"], "t", layout=[1, 0])]
    program = lower_group(ops, ["x", "w"], ["t"], vals, renderer.elementwise_ops())
    assert renderer.why_not(program) == "result 't' stored in the layout [1, 0]"
    vals = values(x=((4, 8), "f32"), w=((8, 16), "f32"), y=((4, 16), "f32"), i=((4, 16), "i64"), e=((4, 16), "i64"))
    ops = [entry("matmul", ["x", "w"], "y"), entry("cast", ["y"], "i"), entry("exp", ["i"], "e")]
    program = lower_group(ops, ["x", "w"], ["e"], vals, renderer.elementwise_ops())
    assert renderer.why_not(program) == "'exp' of i64 (no exact C form) in a matmul epilogue"
