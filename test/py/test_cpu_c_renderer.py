"""The C renderer of the CPU target (sdc/codegen/c/renderer.py), elementwise and row templates.

Each test lowers small groups of plan.json op entries with the Triton path's stage 1, renders them
into one C file, compiles it with the host's compiler (sdc/runtime/launch/c.py), calls each kernel
through the ABI and compares with torch eager on fresh random inputs.
"""

from __future__ import annotations

import ctypes
import math

import pytest
import torch
import torch.nn.functional as F

from sdc.codegen.c import CRenderer
from sdc.codegen.kernel import KernelProgram, lower_group
from sdc.runtime.launch.c import build_library, compiler, kernel_function

try:
    compiler()
except Exception:  # noqa: BLE001 - no C compiler on this host
    pytest.skip("no C compiler", allow_module_level=True)

TORCH = {"f32": torch.float32, "f64": torch.float64, "i64": torch.int64, "i32": torch.int32, "i16": torch.int16,
         "i8": torch.int8, "ui8": torch.uint8, "i1": torch.bool}
TOL = {"f32": dict(rtol=2e-5, atol=2e-6), "f64": dict(rtol=1e-12, atol=1e-13)}


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SDC_C_CACHE_DIR", str(tmp_path / "c-cache"))


class Group:
    """One kernel group: its op entries, its value table, and the tensors of its inputs."""

    def __init__(self, ops: list[dict], inputs: dict[str, torch.Tensor], outputs: list[str],
                 shapes: dict[str, tuple[list[int], str]], weights: dict[str, torch.Tensor] | None = None):
        self.ops, self.inputs, self.outputs = ops, inputs, outputs
        self.values = {vid: {"shape": list(shape), "dtype": dtype} for vid, (shape, dtype) in shapes.items()}
        for vid, t in [*inputs.items(), *(weights or {}).items()]:
            self.values.setdefault(vid, {"shape": list(t.shape), "dtype": _sdc_dtype(t.dtype)})
        self.weights = weights or {}
        self.program: KernelProgram | None = None


def _sdc_dtype(dt: torch.dtype) -> str:
    return next(k for k, v in TORCH.items() if v == dt)


def run(groups: list[Group]) -> list[list[torch.Tensor]]:
    """Lower, render into one file, compile, call each group's kernel; its results in order."""
    renderer = CRenderer()
    functions = []
    for k, g in enumerate(groups):
        g.program = lower_group(g.ops, [*g.inputs, *g.weights], g.outputs, g.values, CRenderer.elementwise_ops(),
                                weight=g.weights.get)
        assert renderer.why_not(g.program) is None, (renderer.why_not(g.program), g.program.dump())
        functions.append(renderer.function(g.program, f"k{k}"))
    lib = build_library(renderer.file(functions))
    out = []
    STATUS.clear()
    for k, g in enumerate(groups):
        p = g.program
        args = [g.inputs[a.value].contiguous() for a in p.args]
        results = [torch.empty(g.values[r.value]["shape"], dtype=TORCH[r.dtype]) for r, _ in p.results]
        sizes = _domain_sizes(p, g)
        ptrs = (ctypes.c_void_p * (len(args) + len(results)))(*[t.data_ptr() for t in [*args, *results]])
        STATUS[f"k{k}"] = kernel_function(lib, f"k{k}", RuntimeError)(ptrs, (ctypes.c_int64 * max(1, len(sizes)))(*sizes))
        out.append(results)
    return out


STATUS: dict[str, int] = {}  # what each kernel of the last `run` returned (0: computed; 1: an index out of range)


def _domain_sizes(p: KernelProgram, g: Group) -> list[int]:
    """Each domain dim's size, from the tensors that map it (as the launcher finds them)."""
    sizes: dict[int, int] = {}
    for t in [*p.args, *(r for r, _ in p.results)]:
        for j, dim in enumerate(t.map):
            if dim is not None:
                sizes[dim] = g.values[t.value]["shape"][j]
    return [sizes.get(dim, 1) for dim in range(len(p.domain))]


def op(name: str, inputs: list[str], output: str, **attrs) -> dict:
    return {"op": name, "inputs": inputs, "outputs": [output], "attrs": attrs}


def rand(shape, dtype: str = "f32", low: float = -3.0, high: float = 3.0) -> torch.Tensor:
    return (torch.rand(shape, dtype=torch.float64) * (high - low) + low).to(TORCH[dtype])


def close(actual: torch.Tensor, expected: torch.Tensor, dtype: str, what: str) -> None:
    assert actual.dtype == expected.dtype, what
    if actual.dtype.is_floating_point:
        torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{what}: {m}", **TOL[dtype])
    else:
        assert torch.equal(actual, expected), f"{what}: {actual} != {expected}"


# ---------------------------------------------------------------- float elementwise

# name: (attrs, the reference, input range)
UNARY = {
    "neg": ({}, torch.neg, None), "abs": ({}, torch.abs, None), "sign": ({}, torch.sign, None),
    "exp": ({}, torch.exp, None), "log": ({}, torch.log, (0.1, 4)), "sqrt": ({}, torch.sqrt, (0.0, 4)),
    "rsqrt": ({}, torch.rsqrt, (0.1, 4)), "reciprocal": ({}, torch.reciprocal, (0.2, 4)),
    "tanh": ({}, torch.tanh, None), "sigmoid": ({}, torch.sigmoid, None), "erf": ({}, torch.erf, None),
    "sin": ({}, torch.sin, None), "cos": ({}, torch.cos, None), "tan": ({}, torch.tan, (-1.2, 1.2)),
    "asin": ({}, torch.asin, (-0.95, 0.95)), "acos": ({}, torch.acos, (-0.95, 0.95)), "atan": ({}, torch.atan, None),
    "sinh": ({}, torch.sinh, None), "cosh": ({}, torch.cosh, None), "asinh": ({}, torch.asinh, None),
    "acosh": ({}, torch.acosh, (1.05, 5)), "atanh": ({}, torch.atanh, (-0.9, 0.9)),
    "floor": ({}, torch.floor, None), "ceil": ({}, torch.ceil, None), "round": ({}, torch.round, None),
    "relu": ({}, torch.relu, None), "silu": ({}, F.silu, None), "softplus": ({}, F.softplus, (-30, 30)),
    "softsign": ({}, F.softsign, None), "mish": ({}, F.mish, None),
    "gelu": ({"approximate": "none"}, F.gelu, None),
    "gelu_tanh": ({"approximate": "tanh"}, lambda x: F.gelu(x, approximate="tanh"), None),
    "leaky_relu": ({"alpha": 0.1}, lambda x: F.leaky_relu(x, 0.1), None),
    "elu": ({"alpha": 0.7}, lambda x: F.elu(x, 0.7), None),
    "selu": ({"alpha": 1.6732632423543772, "gamma": 1.0507009873554805}, torch.selu, None),
    "hard_sigmoid": ({"alpha": 0.25, "beta": 0.4}, lambda x: torch.clamp(0.25 * x + 0.4, 0, 1), None),
    "hard_swish": ({}, F.hardswish, (-5, 5)),
    "clip": ({"min": -0.5, "max": 1.25}, lambda x: torch.clamp(x, -0.5, 1.25), None),
    "clip_low": ({"min": 0.3, "max": math.inf}, lambda x: torch.clamp(x, min=0.3), None),
}


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_unary_float_ops(dtype):
    groups, expected = [], []
    for key, (attrs, ref, span) in UNARY.items():
        name = key.split("_")[0] if key in ("gelu_tanh", "clip_low") else key
        x = rand([3, 37], dtype, *(span or (-3, 3)))
        groups.append(Group([op(name, ["x"], "y", **attrs)], {"x": x}, ["y"], {"y": ([3, 37], dtype)}))
        expected.append(ref(x))
    for key, g, want in zip(UNARY, run(groups), expected):
        close(g[0], want, dtype, key)


def test_float_erf_is_within_its_bound_of_float64():
    """f32 erf (and GELU's) is a rational approximation, not libm's erff: within 5e-7 of float64 erf
    over [-6, 6] and tiny arguments, never past +-1, NaN stays NaN, +-inf gives +-1."""
    x = torch.cat([torch.linspace(-6, 6, 120001), torch.logspace(-30, 0.5, 2001), -torch.logspace(-30, 0.5, 2001),
                   torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan])]).to(torch.float32)
    n = x.numel()
    groups = [Group([op("erf", ["x"], "y")], {"x": x}, ["y"], {"y": ([n], "f32")}),
              Group([op("gelu", ["x"], "y", approximate="none")], {"x": x}, ["y"], {"y": ([n], "f32")})]
    (erf,), (gelu,) = run(groups)
    want = torch.erf(x.double())
    finite = ~x.isnan()
    assert (erf[finite].double() - want[finite]).abs().max() <= 5e-7
    small = x.abs() < 1e-3  # relative accuracy where erf(x) ~ 2x / sqrt(pi)
    assert ((erf[small].double() - want[small]).abs() <= 1e-6 * want[small].abs() + 1e-37).all()
    assert erf[finite].abs().max() <= 1.0 and erf[-1].isnan() and erf[-3] == 1.0 and erf[-2] == -1.0
    assert torch.equal(torch.signbit(erf[:-1]), torch.signbit(x[:-1]))
    close(gelu[finite], F.gelu(x.double())[finite].float(), "f32", "gelu")


BINARY = {
    "add": ({}, torch.add), "sub": ({}, torch.sub), "mul": ({}, torch.mul), "div": ({}, torch.div),
    "max": ({}, torch.maximum), "min": ({}, torch.minimum),
    "mod": ({"fmod": False}, torch.remainder), "fmod": ({"fmod": True}, torch.fmod),
}
COMPARE = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge}


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("shapes", [([3, 4, 5], [3, 4, 5]), ([3, 1, 5], [4, 5]), ([5], [2, 3, 1]), ([], [4, 6])])
def test_binary_float_ops_broadcasting(dtype, shapes):
    xs, ys = shapes
    out = list(torch.broadcast_shapes(torch.Size(xs), torch.Size(ys)))
    groups, expected, names = [], [], []
    for key, (attrs, ref) in BINARY.items():
        x, y = rand(xs, dtype), rand(ys, dtype)
        if key in ("div", "mod", "fmod"):
            y = torch.where(y.abs() < 0.25, torch.full_like(y, 0.5), y)
        name = "mod" if key == "fmod" else key
        groups.append(Group([op(name, ["x", "y"], "z", **attrs)], {"x": x, "y": y}, ["z"], {"z": (out, dtype)}))
        expected.append(ref(x, y))
        names.append(key)
    for key, ref in COMPARE.items():
        x, y = rand(xs, dtype).round(), rand(ys, dtype).round()  # rounded: equal elements happen
        groups.append(Group([op(key, ["x", "y"], "z")], {"x": x, "y": y}, ["z"], {"z": (out, "i1")}))
        expected.append(ref(x, y))
        names.append(key)
    for key, got, want in zip(names, run(groups), expected):
        close(got[0], want, dtype, key)


@pytest.mark.parametrize("exponent", [0.5, 1.0, 2.0, 3.0, -1.0])
def test_pow_of_a_constant_exponent(exponent):
    x = rand([4, 9], "f32", 0.2, 3.0)
    e = torch.tensor(exponent, dtype=torch.float32)
    g = Group([op("pow", ["x", "e"], "y")], {"x": x}, ["y"], {"y": ([4, 9], "f32")}, weights={"e": e})
    (got,), = run([g])
    close(got, torch.pow(x, exponent), "f32", f"pow {exponent}")


def test_comparison_where_and_logic_fused():
    x, y, c = rand([6, 7]), rand([7]), rand([6, 1])
    ops = [op("gt", ["x", "y"], "m"), op("lt", ["x", "c"], "n"), op("and", ["m", "n"], "both"),
           op("not", ["both"], "neither"), op("xor", ["m", "n"], "one"), op("or", ["one", "neither"], "any"),
           op("mul", ["y", "c"], "yc"), op("where", ["any", "x", "yc"], "z")]
    shapes = {v: ([6, 7], "i1") for v in ("m", "n", "both", "neither", "one", "any")}
    shapes.update(yc=([6, 7], "f32"), z=([6, 7], "f32"))
    (z, one), = run([Group(ops, {"x": x, "y": y, "c": c}, ["z", "one"], shapes)])
    m, n = x > y, x < c
    want_one = torch.logical_xor(m, n)
    close(one, want_one, "f32", "xor")
    close(z, torch.where(want_one | ~(m & n), x, y * c), "f32", "where")


# ---------------------------------------------------------------- casts and integers

CASTS = [("f32", "i32"), ("f32", "i64"), ("f64", "i8"), ("f32", "i1"), ("f64", "f32"), ("f32", "f64"),
         ("i64", "f32"), ("i32", "f64"), ("i1", "f32"), ("i1", "i64"), ("i64", "i1"), ("i32", "i8"),
         ("i64", "i16"), ("ui8", "i32"), ("i16", "ui8")]


def _values(dtype: str, shape) -> torch.Tensor:
    if dtype == "i1":
        return torch.rand(shape) > 0.5
    if dtype in ("f32", "f64"):
        x = rand(shape, dtype, -100.0, 100.0)
        x[..., 0] = 0.0  # a zero, for the casts to bool
        return x
    lo, hi = {"i8": (-128, 128), "ui8": (0, 256), "i16": (-2**15, 2**15)}.get(dtype, (-100000, 100000))
    x = torch.randint(lo, hi, shape, dtype=TORCH[dtype])
    x[..., 0] = 0
    return x


def test_casts():
    groups, expected = [], []
    for src, dst in CASTS:
        x = _values(src, [5, 11])
        groups.append(Group([op("cast", ["x"], "y", dtype=dst)], {"x": x}, ["y"], {"y": ([5, 11], dst)}))
        expected.append(x.to(TORCH[dst]))  # float -> int truncates toward zero; int -> narrower wraps
    for (src, dst), (got,), want in zip(CASTS, run(groups), expected):
        close(got, want, dst, f"cast {src} -> {dst}")


INT_UNARY = {"neg": torch.neg, "abs": torch.abs, "sign": torch.sign, "relu": torch.relu,
             "bitwise_not": torch.bitwise_not}
INT_BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "max": torch.maximum, "min": torch.minimum,
              "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor,
              **COMPARE}


@pytest.mark.parametrize("dtype", ["i64", "i32", "i8"])
def test_integer_ops_wrap_as_torch(dtype):
    groups, expected, names = [], [], []
    for name, ref in INT_UNARY.items():
        x = _values(dtype, [4, 13])
        x[0, 1] = torch.iinfo(TORCH[dtype]).min  # neg/abs of the most negative value wrap
        groups.append(Group([op(name, ["x"], "y")], {"x": x}, ["y"], {"y": ([4, 13], dtype)}))
        expected.append(ref(x))
        names.append(name)
    for name, ref in INT_BINARY.items():
        x, y = _values(dtype, [4, 13]), _values(dtype, [13])
        x[0, 1], y[1] = torch.iinfo(TORCH[dtype]).max, torch.iinfo(TORCH[dtype]).max  # overflow wraps
        y[2] = x[1, 2]  # one equal pair
        out = "i1" if name in COMPARE else dtype
        groups.append(Group([op(name, ["x", "y"], "z")], {"x": x, "y": y}, ["z"], {"z": ([4, 13], out)}))
        expected.append(ref(x, y))
        names.append(name)
    for name, (got,), want in zip(names, run(groups), expected):
        close(got, want, dtype, name)


# ---------------------------------------------------------------- gather

@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("index_dtype", ["i64", "i32"])
def test_gather_then_elementwise(axis, index_dtype):
    table, bias = rand([10, 6]), rand([6] if axis == 0 else [1])
    size = table.shape[axis]
    idx = torch.randint(-size, size, [3, 4], dtype=TORCH[index_dtype])
    out = [3, 4, 6] if axis == 0 else [10, 3, 4]
    ops = [op("gather", ["t", "i"], "g", axis=axis), op("add", ["g", "b"], "y")]
    (y,), = run([Group(ops, {"t": table, "i": idx, "b": bias}, ["y"], {"g": (out, "f32"), "y": (out, "f32")})])
    want = (table[idx.long()] if axis == 0 else table[:, idx.long()]) + bias
    close(y, want, "f32", "gather + add")
    assert STATUS == {"k0": 0}


def test_gather_out_of_range_reads_zero():
    table = rand([5, 3])
    idx = torch.tensor([0, 4, 5, -5, -6, 100], dtype=torch.int64)
    (y,), = run([Group([op("gather", ["t", "i"], "y", axis=0)], {"t": table, "i": idx}, ["y"],
                       {"y": ([6, 3], "f32")})])
    want = torch.stack([table[0], table[4], torch.zeros(3), table[0], torch.zeros(3), torch.zeros(3)])
    close(y, want, "f32", "gather out of range")
    assert STATUS == {"k0": 1}  # the launcher then runs the torch ops, which raise the op's index error


# ---------------------------------------------------------------- row template

def _rms_norm(x, scale, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * scale


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("shape", [[3, 5, 17], [4, 130], [9]])
def test_row_ops(dtype, shape):
    x, s, b = rand(shape, dtype), rand(shape[-1:], dtype), rand(shape[-1:], dtype)
    kept, dropped = [*shape[:-1], 1], shape[:-1]
    cases = {
        "softmax": ([op("softmax", ["x"], "y", axis=-1)], shape, torch.softmax(x, -1)),
        "log_softmax": ([op("log_softmax", ["x"], "y", axis=-1)], shape, torch.log_softmax(x, -1)),
        "layer_norm": ([op("layer_norm", ["x", "s", "b"], "y", axis=-1, epsilon=1e-5)], shape,
                       F.layer_norm(x, shape[-1:], s, b, 1e-5)),
        "rms_norm": ([op("rms_norm", ["x", "s"], "y", axis=-1, epsilon=1e-6)], shape, _rms_norm(x, s, 1e-6)),
        "reduce_sum": ([op("reduce_sum", ["x"], "y", axes=[-1], keepdims=True)], kept, x.sum(-1, keepdim=True)),
        "reduce_mean": ([op("reduce_mean", ["x"], "y", axes=[-1], keepdims=False)], dropped, x.mean(-1)),
        "reduce_max": ([op("reduce_max", ["x"], "y", axes=[-1], keepdims=False)], dropped, x.amax(-1)),
        "reduce_min": ([op("reduce_min", ["x"], "y", axes=[-1], keepdims=True)], kept, x.amin(-1, keepdim=True)),
        # a row op after elementwise ones, and a per-row scalar epilogue
        "scaled_softmax": ([op("mul", ["x", "s"], "xs"), op("softmax", ["xs"], "y", axis=-1)], shape,
                           torch.softmax(x * s, -1)),
        # an elementwise max before the row's max reduction (same op name, two operands)
        "max_softmax": ([op("max", ["x", "s"], "xs"), op("softmax", ["xs"], "y", axis=-1)], shape,
                        torch.softmax(torch.maximum(x, s), -1)),
    }
    groups = []
    for ops, out, _ in cases.values():
        inputs = {v: t for v, t in (("x", x), ("s", s), ("b", b)) if any(v in e["inputs"] for e in ops)}
        groups.append(Group(ops, inputs, ["y"], {"y": (out, dtype), "xs": (shape, dtype)}))
    for name, (got,), (_, _, want) in zip(cases, run(groups), cases.values()):
        close(got, want, dtype, name)


def test_row_kernel_with_row_and_per_row_results():
    x, s, b = rand([6, 33]), rand([33]), rand([33])
    ops = [op("layer_norm", ["x", "s", "b"], "y", axis=-1, epsilon=1e-5),
           op("reduce_max", ["x"], "m", axes=[-1], keepdims=True), op("sub", ["x", "m"], "c"),
           op("relu", ["y"], "r")]
    shapes = {"y": ([6, 33], "f32"), "m": ([6, 1], "f32"), "c": ([6, 33], "f32"), "r": ([6, 33], "f32")}
    (r, m, c), = run([Group(ops, {"x": x, "s": s, "b": b}, ["r", "m", "c"], shapes)])
    want_m = x.amax(-1, keepdim=True)
    close(m, want_m, "f32", "max")
    close(c, x - want_m, "f32", "x - max")
    close(r, torch.relu(F.layer_norm(x, [33], s, b, 1e-5)), "f32", "relu(layer_norm)")


# ---------------------------------------------------------------- edges

def test_zero_size_domains():
    e = rand([0, 5])
    r = rand([0, 7])
    groups = [Group([op("exp", ["x"], "y")], {"x": e}, ["y"], {"y": ([0, 5], "f32")}),
              Group([op("softmax", ["x"], "y", axis=-1)], {"x": r}, ["y"], {"y": ([0, 7], "f32")})]
    (a,), (b,) = run(groups)
    assert a.shape == (0, 5) and b.shape == (0, 7)


def test_nan_handling_as_torch():
    x, y = rand([4, 9]), rand([4, 9])
    x[0, 0] = x[1, 3] = y[2, 2] = x[3, 8] = math.nan
    groups = [Group([op("max", ["x", "y"], "z")], {"x": x, "y": y}, ["z"], {"z": ([4, 9], "f32")}),
              Group([op("min", ["x", "y"], "z")], {"x": x, "y": y}, ["z"], {"z": ([4, 9], "f32")}),
              Group([op("relu", ["x"], "z")], {"x": x}, ["z"], {"z": ([4, 9], "f32")}),
              Group([op("clip", ["x"], "z", min=-1.0, max=1.0)], {"x": x}, ["z"], {"z": ([4, 9], "f32")}),
              Group([op("reduce_max", ["x"], "z", axes=[-1], keepdims=False)], {"x": x}, ["z"], {"z": ([4], "f32")}),
              Group([op("softmax", ["x"], "z", axis=-1)], {"x": x}, ["z"], {"z": ([4, 9], "f32")})]
    want = [torch.maximum(x, y), torch.minimum(x, y), torch.relu(x), torch.clamp(x, -1, 1), x.amax(-1),
            torch.softmax(x, -1)]
    for name, (got,), w in zip(["max", "min", "relu", "clip", "reduce_max", "softmax"], run(groups), want):
        assert torch.equal(got.isnan(), w.isnan()), name
        close(got, w, "f32", name)


def test_why_not():
    r = CRenderer()
    values = {"x": {"shape": [4, 8], "dtype": "f16"}, "y": {"shape": [4, 8], "dtype": "f16"}}
    p = lower_group([op("exp", ["x"], "y")], ["x"], ["y"], values, CRenderer.elementwise_ops())
    assert "f16" in r.why_not(p)
    values = {"x": {"shape": [4, 8], "dtype": "f32"}, "y": {"shape": [8, 4], "dtype": "f32"},
              "e": {"shape": [4, 8], "dtype": "f32"}}
    p = lower_group([op("exp", ["x"], "e"), op("layout_cast", ["e"], "y", layout=[1, 0])], ["x"], ["y"], values,
                    CRenderer.elementwise_ops())
    assert "layout" in r.why_not(p)
    assert "random_uniform" not in CRenderer.elementwise_ops()


def test_file_holds_each_helper_once():
    r = CRenderer()
    values = {"x": {"shape": [3, 4], "dtype": "f32"}, "y": {"shape": [3, 4], "dtype": "f32"},
              "z": {"shape": [3, 4], "dtype": "f32"}}
    functions = [r.function(lower_group([op(name, ["x", "y"], "z")], ["x", "y"], ["z"], values,
                                        CRenderer.elementwise_ops()), f"k{i}") for i, name in enumerate(["max", "max"])]
    text = r.file(functions)
    assert text.count("static inline float sdc_max_f32(") == 1
    assert text.index("#include <math.h>") < text.index("sdc_max_f32") < text.index("int k0(")


def test_non_finite_attributes_as_plan_json_spells_them():
    """plan.json writes inf and nan as {"float": "inf"} (sdc.runtime.format); the lowering decodes
    them for every op (a clip's open bound, a layer norm's epsilon: the fuzzer's onnx-struct:81:636
    crashed compiling one)."""
    x, s, b = rand([4, 9]), rand([9]), rand([9])
    clip = Group([op("clip", ["x"], "y", min=-1.0, max={"float": "inf"})], {"x": x}, ["y"], {"y": ([4, 9], "f32")})
    norm = Group([op("layer_norm", ["x", "s", "b"], "y", axis=-1, epsilon={"float": "inf"})],
                 {"x": x, "s": s, "b": b}, ["y"], {"y": ([4, 9], "f32")})
    (clipped,), (normed,) = run([clip, norm])
    close(clipped, torch.clamp(x, min=-1.0), "f32", "clip to [-1, inf]")
    close(normed, F.layer_norm(x, [9], s, b, float("inf")), "f32", "layer_norm, epsilon inf")
