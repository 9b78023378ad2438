"""sdc-autodiff: every derivative rule against torch.autograd, an MLP end to end, broadcasting,
values used twice, the options, and the rule coverage of the op table.

Each op case builds `loss = sum_i reduce_sum(op(params...)_i * cot_i)` with the float operands as
`sdc.parameter`s and the cotangents (and integer operands) as entry inputs, runs sdc-autodiff,
executes the result with the interpreter and compares the gradients with torch.autograd.grad of
the same expression written in torch, on fresh random float64 inputs.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sdc.compiler import run_pipeline
from sdc.diagnostics import SdcError
from sdc.dialect import derivatives
from sdc.dialect.op_classes import infer_results, new_context
from sdc.dialect.opdef import all_ops
from sdc.dialect.shapes import TensorSpec
from sdc.interpreter import interpret
from sdc.ir_text import parse_module

OPS = all_ops()

# ---------------------------------------------------------------- building the test programs


def _type(shape, dtype: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + dtype + ">"


def _attr(spec, value) -> str:
    kind = spec.kind
    if kind == "bool":
        return "true" if value else "false"
    if kind == "int":
        return f"{value} : i64"
    if kind == "float":
        return f"{float(value):e} : f64"
    if kind == "ints":
        return "array<i64" + (": " + ", ".join(str(v) for v in value) if value else "") + ">"
    if kind == "shape":
        return "[" + ", ".join(str(v) for v in value) + "]"
    if kind in ("enum", "str"):
        return f'"{value}"'
    if kind == "dtype":
        return value
    if kind == "layout":
        return f"#sdc.layout<{_attr(type(spec)('ints'), value)}>"
    raise NotImplementedError(kind)


def _sample(shape, domain: str, gen: torch.Generator) -> torch.Tensor:
    """Fresh random values in the op's domain (never zeros, away from kinks)."""
    if domain.startswith("int:"):
        return torch.randint(0, int(domain[4:]), shape, generator=gen)
    if domain.startswith("uniq:"):  # distinct indices across the whole tensor
        return torch.randperm(int(domain[5:]), generator=gen)[:math.prod(shape)].reshape(shape)
    if domain.startswith("rows:"):  # distinct indices along the last dim
        n = int(domain[5:])
        rows = [torch.randperm(n, generator=gen)[:shape[-1]] for _ in range(math.prod(shape[:-1]))]
        return torch.stack(rows).reshape(shape)
    if domain == "bool":
        return torch.rand(shape, generator=gen, dtype=torch.float64) > 0.5
    r = torch.rand(shape, generator=gen, dtype=torch.float64)
    n = torch.randn(shape, generator=gen, dtype=torch.float64)
    return {
        "any": n,
        "wide": 4 * n,
        "pos": 0.5 + r,
        "unit": 1.6 * r - 0.8,
        "gt1": 1.5 + r,
        "ties": torch.randint(0, 3, shape, generator=gen).to(torch.float64),
        "distinct": torch.randperm(math.prod(shape), generator=gen).to(torch.float64).reshape(shape) * 0.1 + 0.05 * r,
    }[domain]


def _dtype_of(t: torch.Tensor) -> str:
    return {torch.float64: "f64", torch.float32: "f32", torch.int64: "i64", torch.bool: "i1"}[t.dtype]


def build_case(op: str, attrs: dict, operands: list[torch.Tensor]) -> tuple[str, list[str], list[TensorSpec]]:
    """The IR text of the loss program; returns (text, parameter names, float result specs)."""
    opdef = OPS[op]
    specs = [TensorSpec(tuple(t.shape), _dtype_of(t)) for t in operands]
    outs = infer_results(opdef, specs, opdef.with_defaults(attrs))
    params = [f"p{i}" for i, t in enumerate(operands) if t.is_floating_point()]
    floats = [j for j, s in enumerate(outs) if s.dtype in ("f32", "f64")]  # integer results get no cotangent
    args = [f"%cot{j}: {_type(outs[j].shape, outs[j].dtype)}" for j in floats]
    args += [f"%in{i}: {_type(s.shape, s.dtype)}" for i, (t, s) in enumerate(zip(operands, specs))
             if not t.is_floating_point()]
    loss_dtype = outs[floats[0]].dtype
    lines = [f"func.func @main({', '.join(args)}) -> tensor<{loss_dtype}> {{"]
    names = []
    for i, (t, s) in enumerate(zip(operands, specs)):
        if t.is_floating_point():
            lines.append(f'  %p{i} = "sdc.parameter"() {{name = "p{i}"}} : () -> {_type(s.shape, s.dtype)}')
            names.append(f"%p{i}")
        else:
            names.append(f"%in{i}")
    attr_text = ", ".join(f"{k} = {_attr(opdef.attrs[k], v)}" for k, v in attrs.items())
    result_names = "%y" if len(outs) == 1 else f"%y:{len(outs)}"
    lines.append(f'  {result_names} = "sdc.{op}"({", ".join(names)}) {{{attr_text}}} : '
                 f'({", ".join(_type(s.shape, s.dtype) for s in specs)}) -> '
                 f'({", ".join(_type(s.shape, s.dtype) for s in outs)})')
    total = None
    for j in floats:
        s = outs[j]
        y = "%y" if len(outs) == 1 else f"%y#{j}"
        t = _type(s.shape, s.dtype)
        lines.append(f'  %m{j} = "sdc.mul"({y}, %cot{j}) : ({t}, {t}) -> {t}')
        lines.append(f'  %s{j} = "sdc.reduce_sum"(%m{j}) : ({t}) -> tensor<{s.dtype}>')
        if total is None:
            total = f"%s{j}"
        else:
            lines.append(f'  %t{j} = "sdc.add"({total}, %s{j}) : (tensor<{s.dtype}>, tensor<{s.dtype}>) -> '
                         f"tensor<{s.dtype}>")
            total = f"%t{j}"
    lines.append(f"  return {total} : tensor<{loss_dtype}>")
    lines.append("}")
    return "\n".join(lines), [n[1:] for n in names if n.startswith("%p")], [outs[j] for j in floats]


def differentiate(text: str, pipeline=("sdc-autodiff", "sdc-verify")):
    ctx = new_context()
    module = parse_module(text, ctx=ctx)
    run_pipeline(module, list(pipeline))
    return module


def check_case(op: str, attrs: dict, operands: list[tuple[tuple, str]], reference, seed: int, rtol=1e-7, atol=1e-9):
    gen = torch.Generator().manual_seed(seed)
    values = [_sample(shape, domain, gen) for shape, domain in operands]
    text, params, outs = build_case(op, attrs, values)
    cots = [_sample(s.shape, "any", gen).to(torch.float32 if s.dtype == "f32" else torch.float64) for s in outs]
    module = differentiate(text)
    inputs = cots + [v for v in values if not v.is_floating_point()]
    got = interpret(module, inputs, {f"p{i}": v for i, v in enumerate(values) if v.is_floating_point()})
    leaves = [v.clone().requires_grad_(v.is_floating_point()) for v in values]
    ys = reference(*leaves)
    ys = [y for y in (ys if isinstance(ys, (tuple, list)) else [ys]) if y.is_floating_point()]
    loss = sum((y * c).sum() for y, c in zip(ys, cots))
    floats = [leaf for leaf in leaves if leaf.is_floating_point()]
    want = torch.autograd.grad(loss, floats, allow_unused=True)
    assert len(got) == 1 + len(floats)
    np.testing.assert_allclose(got[0], loss.detach().numpy(), rtol=1e-6, atol=1e-8)
    for name, g, w in zip(params, got[1:], want):
        w = torch.zeros_like(floats[params.index(name)]) if w is None else w
        np.testing.assert_allclose(g, w.numpy(), rtol=rtol, atol=atol, err_msg=f"grad of {name}")


X = ((3, 4), "any")


def _u(name, ref, domain="any", **attrs):
    return (name, name, attrs, [((3, 4), domain)], ref)


def _b(id_, name, ref, lhs=(3, 4), rhs=(4,), ld="any", rd="any"):
    return (id_, name, {}, [(lhs, ld), (rhs, rd)], ref)


def _cumsum_ref(x, exclusive, reverse):
    y = x.flip(1) if reverse else x
    y = torch.cumsum(y, 1) - (y if exclusive else 0)
    return y.flip(1) if reverse else y


def _conv_dw(x, g, w_shape, **kw):
    """torch's weight gradient of `conv2d(x, w, **kw)` for cotangent g, itself differentiable."""
    w = torch.randn(w_shape, dtype=x.dtype, requires_grad=True)
    return torch.autograd.grad(F.conv2d(x, w, **kw), w, g, create_graph=True)[0]


def _gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


CASES = [
    _u("neg", torch.neg), _u("abs", torch.abs), _u("exp", torch.exp), _u("log", torch.log, "pos"),
    _u("sqrt", torch.sqrt, "pos"), _u("rsqrt", torch.rsqrt, "pos"), _u("reciprocal", torch.reciprocal, "pos"),
    _u("tanh", torch.tanh), _u("sigmoid", torch.sigmoid), _u("erf", torch.erf), _u("sin", torch.sin),
    _u("cos", torch.cos), _u("tan", torch.tan, "unit"), _u("asin", torch.asin, "unit"),
    _u("acos", torch.acos, "unit"), _u("atan", torch.atan), _u("sinh", torch.sinh), _u("cosh", torch.cosh),
    _u("asinh", torch.asinh), _u("acosh", torch.acosh, "gt1"), _u("atanh", torch.atanh, "unit"),
    _u("relu", torch.relu), _u("silu", F.silu), _u("softplus", F.softplus), _u("softsign", F.softsign),
    _u("mish", F.mish), _u("gelu", lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))),
    ("gelu_tanh", "gelu", {"approximate": "tanh"}, [X], _gelu_tanh),
    _u("leaky_relu", lambda x: torch.where(x > 0, x, 0.1 * x), alpha=0.1),
    _u("elu", lambda x: torch.where(x > 0, x, 0.7 * torch.expm1(x)), alpha=0.7),
    _u("selu", F.selu),
    _u("hard_sigmoid", lambda x: torch.clamp(0.2 * x + 0.5, 0, 1), "wide"),
    _u("hard_swish", lambda x: x * torch.clamp(x / 6 + 0.5, 0, 1), "wide"),
    _u("clip", lambda x: torch.clamp(x, -0.5, 0.7), min=-0.5, max=0.7),
    _u("sign", torch.sign), _u("floor", torch.floor, "wide"), _u("ceil", torch.ceil, "wide"),
    _u("round", torch.round, "wide"),
    _b("add", "add", torch.add), _b("sub", "sub", torch.sub, (3, 1), (4,)),
    _b("mul", "mul", torch.mul, (2, 1, 4), (3, 1)),
    _b("div", "div", torch.div, (3, 4), (3, 1), rd="pos"), _b("pow", "pow", torch.pow, (3, 4), (4,), "pos"),
    _b("max", "max", torch.maximum), _b("min", "min", torch.minimum, (3, 4), (1, 4)),
    ("where", "where", {}, [((3, 4), "bool"), ((3, 4), "any"), ((4,), "any")], torch.where),
    ("cast", "cast", {"dtype": "f32"}, [X], lambda x: x.to(torch.float32)),
    ("layout_cast", "layout_cast", {"layout": [1, 0]}, [X], lambda x: x * 1),
    ("matmul", "matmul", {}, [((3, 4), "any"), ((4, 5), "any")], torch.matmul),
    ("matmul_tl", "matmul", {"transpose_lhs": True}, [((4, 3), "any"), ((4, 5), "any")], lambda a, b: a.T @ b),
    ("matmul_tr", "matmul", {"transpose_rhs": True}, [((3, 4), "any"), ((5, 4), "any")], lambda a, b: a @ b.T),
    ("matmul_tt", "matmul", {"transpose_lhs": True, "transpose_rhs": True}, [((4, 3), "any"), ((5, 4), "any")],
     lambda a, b: a.T @ b.T),
    ("matmul_batch", "matmul", {}, [((2, 3, 4), "any"), ((4, 5), "any")], torch.matmul),
    ("matmul_batch_bcast", "matmul", {"transpose_rhs": True}, [((2, 1, 3, 4), "any"), ((3, 5, 4), "any")],
     lambda a, b: a @ b.transpose(-1, -2)),
    ("matmul_vec_lhs", "matmul", {}, [((4,), "any"), ((2, 4, 5), "any")], torch.matmul),
    ("matmul_vec_rhs", "matmul", {}, [((2, 3, 4), "any"), ((4,), "any")], torch.matmul),
    ("matmul_dot", "matmul", {}, [((4,), "any"), ((4,), "any")], torch.matmul),
    ("reduce_sum", "reduce_sum", {"axes": [1]}, [((2, 3, 4), "any")], lambda x: x.sum(1)),
    ("reduce_mean", "reduce_mean", {"axes": [0, 2], "keepdims": True}, [((2, 3, 4), "any")],
     lambda x: x.mean((0, 2), keepdim=True)),
    ("reduce_max", "reduce_max", {"axes": [1]}, [((3, 4), "distinct")], lambda x: x.amax(1)),
    ("reduce_min", "reduce_min", {}, [((3, 4), "distinct")], lambda x: x.amin()),
    ("reduce_prod", "reduce_prod", {"axes": [0]}, [((3, 4), "pos")], lambda x: x.prod(0)),
    ("softmax", "softmax", {"axis": -1}, [((2, 3, 4), "any")], lambda x: torch.softmax(x, -1)),
    ("log_softmax", "log_softmax", {"axis": 1}, [((2, 3, 4), "any")], lambda x: torch.log_softmax(x, 1)),
    ("layer_norm", "layer_norm", {"axis": -1, "epsilon": 1e-5}, [((2, 3, 8), "any"), ((8,), "any"), ((8,), "any")],
     lambda x, s, b: F.layer_norm(x, (8,), s, b, 1e-5)),
    ("layer_norm_2d", "layer_norm", {"axis": 1, "epsilon": 1e-3}, [((2, 3, 4), "any"), ((3, 4), "any"),
                                                                   ((3, 4), "any")],
     lambda x, s, b: F.layer_norm(x, (3, 4), s, b, 1e-3)),
    ("rms_norm", "rms_norm", {"axis": -1, "epsilon": 1e-6}, [((2, 3, 8), "any"), ((8,), "any")],
     lambda x, s: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * s),
    ("batch_norm", "batch_norm", {"epsilon": 1e-5},
     [((2, 3, 4, 4), "any"), ((3,), "any"), ((3,), "any"), ((3,), "any"), ((3,), "pos")],
     lambda x, s, b, m, v: ((x - m[:, None, None]) / torch.sqrt(v[:, None, None] + 1e-5) * s[:, None, None]
                            + b[:, None, None])),
    ("reshape", "reshape", {"shape": [4, -1]}, [((2, 3, 4), "any")], lambda x: x.reshape(4, -1)),
    ("squeeze", "squeeze", {"axes": [1]}, [((3, 1, 4), "any")], lambda x: x.squeeze(1)),
    ("unsqueeze", "unsqueeze", {"axes": [0, 3]}, [((3, 4), "any")], lambda x: x[None, :, :, None]),
    ("transpose", "transpose", {"perm": [2, 0, 1]}, [((2, 3, 4), "any")], lambda x: x.permute(2, 0, 1)),
    ("broadcast", "broadcast", {"shape": [2, 3, 4]}, [((3, 1), "any")], lambda x: x.expand(2, 3, 4)),
    ("slice", "slice", {"starts": [1], "ends": [3], "axes": [1]}, [((3, 5), "any")], lambda x: x[:, 1:3]),
    ("slice_steps", "slice", {"starts": [-4, 0], "ends": [100, 3], "axes": [1, 0], "steps": [2, 2]},
     [((3, 7), "any")], lambda x: x[0:3:2, -4::2]),
    ("concat", "concat", {"axis": 1}, [((2, 3), "any"), ((2, 5), "any")], lambda a, b: torch.cat((a, b), 1)),
    ("split", "split", {"axis": 1, "parts": 3}, [((2, 6), "any")], lambda x: torch.split(x, 2, 1)),
    ("pad", "pad", {"pads": [1, -1, 0, 2]}, [((3, 4), "any")], lambda x: F.pad(x, (-1, 2, 1, 0))),
    ("gather", "gather", {"axis": 0}, [((5, 3), "any"), ((2, 4), "int:5")], lambda d, i: d[i]),
    ("gather_axis1", "gather", {"axis": 1}, [((2, 5, 3), "any"), ((4,), "int:5")], lambda d, i: d[:, i]),
    ("gather_elements", "gather_elements", {"axis": 1}, [((3, 4), "any"), ((3, 6), "int:4")],
     lambda d, i: torch.gather(d, 1, i)),
    ("cumsum", "cumsum", {"axis": 1}, [X], lambda x: _cumsum_ref(x, False, False)),
    ("cumsum_excl_rev", "cumsum", {"axis": 1, "exclusive": True, "reverse": True}, [X],
     lambda x: _cumsum_ref(x, True, True)),
    ("global_avg_pool", "global_avg_pool", {}, [((2, 3, 4, 5), "any")], lambda x: x.mean((2, 3), keepdim=True)),
    ("global_max_pool", "global_max_pool", {}, [((2, 3, 2, 2), "distinct")], lambda x: x.amax((2, 3), keepdim=True)),
    ("mod", "mod", {}, [((3, 4), "wide"), ((4,), "pos")], torch.remainder),
    ("mod_fmod", "mod", {"fmod": True}, [((3, 4), "wide"), ((3, 1), "pos")], torch.fmod),
    ("cumprod", "cumprod", {"axis": 1}, [((3, 5), "pos")], lambda x: torch.cumprod(x, 1)),
    ("cumprod_excl_rev", "cumprod", {"axis": 0, "exclusive": True, "reverse": True}, [((4, 3), "pos")],
     lambda x: torch.cat((torch.ones(1, 3, dtype=x.dtype), torch.cumprod(x.flip(0), 0)[:-1])).flip(0)),
    ("gather_nd", "gather_nd", {}, [((4, 5, 3), "any"), ((3, 2, 2), "int:4")],
     lambda d, i: d[i[..., 0], i[..., 1]]),
    ("gather_nd_batch", "gather_nd", {"batch_dims": 1}, [((2, 5, 3), "any"), ((2, 4, 1), "int:5")],
     lambda d, i: torch.stack([d[j][i[j, :, 0]] for j in range(2)])),
    ("scatter_elements", "scatter_elements", {"axis": 1}, [((3, 5), "any"), ((3, 3), "rows:5"), ((3, 3), "any")],
     lambda d, i, u: torch.scatter(d, 1, i, u)),
    ("scatter_elements_add", "scatter_elements", {"axis": 0, "reduction": "add"},
     [((4, 3), "any"), ((6, 3), "int:4"), ((6, 3), "any")], lambda d, i, u: d.scatter_add(0, i, u)),
    ("scatter_nd", "scatter_nd", {}, [((5, 3), "any"), ((3, 1), "uniq:5"), ((3, 3), "any")],
     lambda d, i, u: d.index_put((i[:, 0],), u)),
    ("scatter_nd_add", "scatter_nd", {"reduction": "add"}, [((4, 3, 2), "any"), ((5, 2), "int:3"), ((5, 2), "any")],
     lambda d, i, u: d.index_put((i[:, 0], i[:, 1]), u, accumulate=True)),
    ("topk", "topk", {"k": 3, "axis": 1}, [((3, 6), "any")], lambda x: torch.topk(x, 3, 1)),
    ("topk_smallest", "topk", {"k": 2, "axis": 0, "largest": False}, [((5, 3), "any")],
     lambda x: torch.topk(x, 2, 0, largest=False)),
    # Convolutions: strides that leave a remainder, asymmetric pads, dilations, groups, 1-3 spatial dims.
    ("conv", "conv", {}, [((2, 3, 7, 6), "any"), ((4, 3, 3, 2), "any")], F.conv2d),
    ("conv_stride_pad", "conv", {"strides": [2, 2], "pads": [1, 1, 1, 1]}, [((2, 3, 8, 7), "any"),
                                                                         ((5, 3, 3, 3), "any")],
     lambda x, w: F.conv2d(x, w, stride=2, padding=1)),
    ("conv_groups_dilation", "conv", {"strides": [1, 2], "pads": [1, 0, 2, 1], "dilations": [2, 1], "groups": 2},
     [((2, 4, 9, 8), "any"), ((6, 2, 3, 3), "any")],
     lambda x, w: F.conv2d(F.pad(x, (0, 1, 1, 2)), w, stride=(1, 2), dilation=(2, 1), groups=2)),
    ("conv_1d", "conv", {"strides": [3], "pads": [2, 0]}, [((2, 3, 10), "any"), ((5, 3, 3), "any")],
     lambda x, w: F.conv1d(F.pad(x, (2, 0)), w, stride=3)),
    ("conv_3d_depthwise", "conv", {"strides": [2, 1, 2], "pads": [1, 0, 1, 1, 0, 0], "groups": 2},
     [((1, 2, 5, 4, 5), "any"), ((2, 1, 2, 3, 2), "any")],
     lambda x, w: F.conv3d(F.pad(x, (1, 0, 0, 0, 1, 1)), w, stride=(2, 1, 2), groups=2)),
    # The weight gradient's own rule (double backward): against autograd through torch's conv weight gradient.
    ("conv_weight_grad", "conv_weight_grad", {"strides": [2, 2], "pads": [1, 1, 1, 1], "kernel": [3, 3]},
     [((2, 3, 8, 7), "any"), ((2, 5, 4, 4), "any")], lambda x, g: _conv_dw(x, g, (5, 3, 3, 3), stride=2, padding=1)),
    ("conv_weight_grad_groups_dilation", "conv_weight_grad",
     {"strides": [1, 2], "pads": [1, 0, 2, 1], "dilations": [2, 1], "groups": 2, "kernel": [3, 3]},
     [((2, 4, 9, 8), "any"), ((2, 6, 8, 4), "any")],
     lambda x, g: _conv_dw(F.pad(x, (0, 1, 1, 2)), g, (6, 2, 3, 3), stride=(1, 2), dilation=(2, 1), groups=2)),
    ("conv_transpose", "conv_transpose", {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 0]},
     [((2, 4, 3, 4), "any"), ((4, 3, 3, 3), "any")],
     lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=(1, 0))),
    ("conv_transpose_groups_dilation", "conv_transpose", {"strides": [1, 2], "dilations": [2, 1], "groups": 2},
     [((2, 4, 3, 3), "any"), ((4, 3, 2, 3), "any")],
     lambda x, w: F.conv_transpose2d(x, w, stride=(1, 2), dilation=(2, 1), groups=2)),
    ("conv_transpose_1d_negative_pad", "conv_transpose", {"strides": [3], "pads": [-1, 2]},
     [((2, 3, 4), "any"), ((3, 2, 4), "any")],
     lambda x, w: F.pad(F.conv_transpose1d(x, w, stride=3), (1, -2))),
    # Max pooling routes each window's cotangent to its first maximum (torch's rule), ties included.
    ("max_pool", "max_pool", {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
     [((2, 3, 7, 6), "any")], lambda x: F.max_pool2d(x, 3, 2, 1)),
    ("max_pool_ties", "max_pool", {"kernel": [3, 2], "strides": [1, 1]}, [((2, 2, 5, 6), "ties")],
     lambda x: F.max_pool2d(x, (3, 2), 1)),
    ("max_pool_1d_dilation_ceil", "max_pool", {"kernel": [3], "strides": [2], "dilations": [2], "pads": [1, 1],
                                               "ceil_mode": True},
     [((2, 3, 10), "ties")], lambda x: F.max_pool1d(x, 3, 2, 1, dilation=2, ceil_mode=True)),
    ("max_pool_3d", "max_pool", {"kernel": [2, 2, 2], "strides": [2, 2, 2]}, [((1, 2, 5, 4, 5), "any")],
     lambda x: F.max_pool3d(x, 2, 2)),
    ("avg_pool", "avg_pool", {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, [((2, 3, 7, 6), "any")],
     lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)),
    ("avg_pool_count_pad_ceil", "avg_pool", {"kernel": [3, 2], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                             "count_include_pad": True, "ceil_mode": True},
     [((2, 3, 8, 7), "any")], lambda x: F.avg_pool2d(x, (3, 2), 2, 1, ceil_mode=True, count_include_pad=True)),
    ("avg_pool_dilation", "avg_pool", {"kernel": [2, 3], "strides": [1, 2], "dilations": [2, 1]},
     [((2, 3, 6, 7), "any")],
     lambda x: F.unfold(x.reshape(6, 1, 6, 7), (2, 3), dilation=(2, 1), stride=(1, 2)).mean(1).reshape(2, 3, 4, 3)),
    ("avg_pool_1d_gaps", "avg_pool", {"kernel": [2], "strides": [3]}, [((2, 3, 10), "any")],
     lambda x: F.avg_pool1d(x, 2, 3)),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_rule_matches_torch_autograd(case):
    id_, op, attrs, operands, reference = case
    check_case(op, attrs, operands, reference, seed=zlib.crc32(id_.encode()))


def test_every_rule_is_tested():
    """Each op with a rule has a case above; a new rule without a test fails here."""
    tested = {c[1] for c in CASES} | {"custom"}  # runs the user's derivative: test_custom_ops.py tests it
    assert sorted(n for n, o in OPS.items() if o.vjp is not None and n not in tested) == []


def test_coverage_of_differentiable_ops():
    """Every op the marker calls differentiable has a rule, or is a known gap listed in PENDING
    (and the list holds only such gaps, so it shrinks as rules land)."""
    marked = {n for n, o in OPS.items() if derivatives.is_differentiable_kind(o)}
    missing = sorted(n for n in marked if OPS[n].vjp is None)
    assert missing == sorted(derivatives.PENDING)
    assert all(OPS[n].vjp is None for n in derivatives.PENDING)
    assert not [n for n, o in OPS.items() if o.vjp is not None and n not in marked]


def test_every_rule_is_named_by_an_op():
    """Each op names its rule where it is defined: a rule no op names (a typo, a removed op) is a bug.
    The elementwise tables' rows must be ops too."""
    rules = {name: fn for name, fn in vars(derivatives).items()
             if name.endswith("_vjp") and name not in ("unary_vjp", "binary_vjp") and callable(fn)}
    assert len(rules) > 30
    named = {id(o.vjp) for o in OPS.values() if o.vjp is not None}
    assert sorted(n for n, fn in rules.items() if id(fn) not in named) == []
    assert set(derivatives.UNARY_VJP) | set(derivatives.BINARY_VJP) <= set(OPS)


# ---------------------------------------------------------------- whole programs

MLP = """
func.func @main(%x: tensor<8x6xf32>, %onehot: tensor<8x4xf32>) -> (tensor<f32> {sdc.name = "loss"}) {
  %w1 = "sdc.parameter"() {name = "fc1.weight"} : () -> tensor<16x6xf32>
  %b1 = "sdc.parameter"() {name = "fc1.bias"} : () -> tensor<16xf32>
  %w2 = "sdc.parameter"() {name = "fc2.weight"} : () -> tensor<4x16xf32>
  %b2 = "sdc.parameter"() {name = "fc2.bias"} : () -> tensor<4xf32>
  %0 = "sdc.matmul"(%x, %w1) {transpose_rhs = true} : (tensor<8x6xf32>, tensor<16x6xf32>) -> tensor<8x16xf32>
  %1 = "sdc.add"(%0, %b1) : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %2 = "sdc.gelu"(%1) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %3 = "sdc.matmul"(%2, %w2) {transpose_rhs = true} : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
  %4 = "sdc.add"(%3, %b2) : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %5 = "sdc.log_softmax"(%4) {axis = -1 : i64} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %6 = "sdc.mul"(%5, %onehot) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %7 = "sdc.reduce_sum"(%6) : (tensor<8x4xf32>) -> tensor<f32>
  %8 = "sdc.constant"() {value = dense<-0.125> : tensor<f32>} : () -> tensor<f32>
  %9 = "sdc.mul"(%7, %8) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %9 : tensor<f32>
}
"""


def test_mlp_cross_entropy_matches_torch():
    gen = torch.Generator().manual_seed(7)
    lin1, lin2 = torch.nn.Linear(6, 16), torch.nn.Linear(16, 4)
    params = {"fc1.weight": lin1.weight, "fc1.bias": lin1.bias, "fc2.weight": lin2.weight, "fc2.bias": lin2.bias}
    x = torch.randn(8, 6, generator=gen)
    labels = torch.randint(0, 4, (8,), generator=gen)
    module = differentiate(MLP)
    got = interpret(module, {"arg0": x, "arg1": F.one_hot(labels, 4).float()},
                    {k: v.detach() for k, v in params.items()})
    loss = F.cross_entropy(lin2(F.gelu(lin1(x))), labels)
    want = torch.autograd.grad(loss, list(params.values()))
    np.testing.assert_allclose(got[0], loss.item(), rtol=1e-5)
    for (name, _), g, w in zip(params.items(), got[1:], want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
    from sdc.dialect.ir import entry_function, result_names

    with module.context:
        assert result_names(entry_function(module)) == ["loss"] + [f"grad.{n}" for n in params]


def test_value_used_twice_and_repeated_parameter():
    # loss = sum(w * w) + sum(exp(w)) where the second w is another sdc.parameter op of the same name.
    text = """
func.func @main() -> tensor<f64> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<3xf64>
  %v = "sdc.parameter"() {name = "w"} : () -> tensor<3xf64>
  %0 = "sdc.mul"(%w, %w) : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
  %1 = "sdc.exp"(%v) : (tensor<3xf64>) -> tensor<3xf64>
  %2 = "sdc.add"(%0, %1) : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
  %3 = "sdc.reduce_sum"(%2) : (tensor<3xf64>) -> tensor<f64>
  return %3 : tensor<f64>
}
"""
    w = torch.randn(3, dtype=torch.float64)
    got = interpret(differentiate(text), [], {"w": w})
    np.testing.assert_allclose(got[1], (2 * w + torch.exp(w)).numpy(), rtol=1e-12)


def test_bias_broadcast_gradient_reduces():
    text = """
func.func @main(%x: tensor<5x3xf64>) -> tensor<f64> {
  %b = "sdc.parameter"() {name = "bias"} : () -> tensor<3xf64>
  %0 = "sdc.add"(%x, %b) : (tensor<5x3xf64>, tensor<3xf64>) -> tensor<5x3xf64>
  %1 = "sdc.mul"(%0, %0) : (tensor<5x3xf64>, tensor<5x3xf64>) -> tensor<5x3xf64>
  %2 = "sdc.reduce_sum"(%1) : (tensor<5x3xf64>) -> tensor<f64>
  return %2 : tensor<f64>
}
"""
    x, b = torch.randn(5, 3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    got = interpret(differentiate(text), [x], {"bias": b})
    assert got[1].shape == (3,)
    np.testing.assert_allclose(got[1], (2 * (x + b)).sum(0).numpy(), rtol=1e-12)


def test_wrt_inputs_and_unused_parameter():
    text = """
func.func @main(%x: tensor<4xf64> {sdc.name = "x"}) -> tensor<f64> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<4xf64>
  %u = "sdc.parameter"() {name = "unused"} : () -> tensor<2x2xf64>
  %0 = "sdc.mul"(%x, %w) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>
  %1 = "sdc.reduce_sum"(%0) : (tensor<4xf64>) -> tensor<f64>
  return %1 : tensor<f64>
}
"""
    x, w = torch.randn(4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    params = {"w": w, "unused": torch.randn(2, 2, dtype=torch.float64)}
    got = interpret(differentiate(text, ["sdc-autodiff{wrt=x,unused}"]), [x], params)
    np.testing.assert_allclose(got[1], w.numpy())
    np.testing.assert_array_equal(got[2], np.zeros((2, 2)))


@pytest.mark.parametrize("options, message", [
    ("wrt=nope", "no parameter or input named 'nope'"),
    ("results=3", "no result '3' to differentiate"),
])
def test_bad_options(options, message):
    text = """
func.func @main(%x: tensor<4xf32>) -> tensor<f32> {
  %0 = "sdc.reduce_sum"(%x) : (tensor<4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
"""
    with pytest.raises(SdcError, match=message):
        differentiate(text, [f"sdc-autodiff{{{options}}}"])


def test_non_scalar_loss_is_an_error():
    text = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "sdc.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""
    with pytest.raises(SdcError, match="differentiates a scalar float loss: result 0"):
        differentiate(text, ["sdc-autodiff{wrt=arg0}"])


class _SmallCNN(torch.nn.Module):
    """conv + relu + max_pool, a grouped stride-2 conv + relu + avg_pool, linear, cross-entropy."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(6, 8, 3, stride=2, padding=1, groups=2)
        self.fc = torch.nn.Linear(8 * 2 * 2, 5)

    def forward(self, x, labels):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.avg_pool2d(F.relu(self.conv2(h)), 2, stride=1)
        return F.cross_entropy(self.fc(h.flatten(1)), labels)


def test_cnn_from_torch_matches_autograd():
    """A CNN through the torch frontend: every parameter's gradient against torch.autograd (f32)."""
    from sdc.frontend.torch import import_torch

    torch.manual_seed(11)
    model = _SmallCNN()
    x, labels = torch.randn(4, 3, 11, 11), torch.randint(0, 5, (4,))
    imported = import_torch(model, (x, labels))
    run_pipeline(imported.module, ["sdc-autodiff", "sdc-verify"])
    got = interpret(imported.module, [x, labels], imported.params)
    loss = model(x, labels)
    names, params = zip(*model.named_parameters())
    want = torch.autograd.grad(loss, params)
    np.testing.assert_allclose(got[0], loss.item(), rtol=1e-5)
    from sdc.dialect.ir import entry_function, result_names

    with imported.module.context:
        by_name = dict(zip(result_names(entry_function(imported.module))[1:], got[1:]))
    assert sorted(by_name) == sorted(f"grad.{n}" for n in names)
    for name, w in zip(names, want):
        np.testing.assert_allclose(by_name[f"grad.{name}"], w.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)


BN_TRAIN = """
func.func @main(%x: tensor<4x3x5x5xf64>, %cot: tensor<4x3x5x5xf64>) -> tensor<f64> {
  %s = "sdc.parameter"() {name = "scale"} : () -> tensor<3x1x1xf64>
  %b = "sdc.parameter"() {name = "bias"} : () -> tensor<3x1x1xf64>
  %eps = "sdc.constant"() {value = dense<1.0e-05> : tensor<f64>} : () -> tensor<f64>
  %m = "sdc.reduce_mean"(%x) {axes = array<i64: 0, 2, 3>, keepdims = true} : (tensor<4x3x5x5xf64>) -> tensor<1x3x1x1xf64>
  %c = "sdc.sub"(%x, %m) : (tensor<4x3x5x5xf64>, tensor<1x3x1x1xf64>) -> tensor<4x3x5x5xf64>
  %c2 = "sdc.mul"(%c, %c) : (tensor<4x3x5x5xf64>, tensor<4x3x5x5xf64>) -> tensor<4x3x5x5xf64>
  %v = "sdc.reduce_mean"(%c2) {axes = array<i64: 0, 2, 3>, keepdims = true} : (tensor<4x3x5x5xf64>) -> tensor<1x3x1x1xf64>
  %ve = "sdc.add"(%v, %eps) : (tensor<1x3x1x1xf64>, tensor<f64>) -> tensor<1x3x1x1xf64>
  %r = "sdc.rsqrt"(%ve) : (tensor<1x3x1x1xf64>) -> tensor<1x3x1x1xf64>
  %n = "sdc.mul"(%c, %r) : (tensor<4x3x5x5xf64>, tensor<1x3x1x1xf64>) -> tensor<4x3x5x5xf64>
  %y0 = "sdc.mul"(%n, %s) : (tensor<4x3x5x5xf64>, tensor<3x1x1xf64>) -> tensor<4x3x5x5xf64>
  %y = "sdc.add"(%y0, %b) : (tensor<4x3x5x5xf64>, tensor<3x1x1xf64>) -> tensor<4x3x5x5xf64>
  %l0 = "sdc.mul"(%y, %cot) : (tensor<4x3x5x5xf64>, tensor<4x3x5x5xf64>) -> tensor<4x3x5x5xf64>
  %l = "sdc.reduce_sum"(%l0) : (tensor<4x3x5x5xf64>) -> tensor<f64>
  return %l : tensor<f64>
}
"""


def test_training_batch_norm_from_primitives_matches_torch():
    """Batch norm in training mode (batch statistics) has no op of its own: written with reduce_mean,
    sub, mul and rsqrt, as a frontend would decompose it, its gradients match torch's training-mode
    batch norm (input, scale and bias)."""
    gen = torch.Generator().manual_seed(5)
    x, cot = (torch.randn(4, 3, 5, 5, generator=gen, dtype=torch.float64) for _ in range(2))
    scale, bias = (torch.randn(3, generator=gen, dtype=torch.float64) for _ in range(2))
    module = differentiate(BN_TRAIN, ["sdc-autodiff{wrt=scale,bias,arg0}", "sdc-verify"])
    got = interpret(module, [x, cot], {"scale": scale.reshape(3, 1, 1), "bias": bias.reshape(3, 1, 1)})
    leaves = [t.clone().requires_grad_() for t in (scale, bias, x)]
    y = F.batch_norm(leaves[2], None, None, leaves[0], leaves[1], training=True, eps=1e-5)
    want = torch.autograd.grad((y * cot).sum(), leaves)
    np.testing.assert_allclose(got[1].reshape(3), want[0].numpy(), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(got[2].reshape(3), want[1].numpy(), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(got[3], want[2].numpy(), rtol=1e-8, atol=1e-10)


class _DropoutNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(6, 12), torch.nn.Linear(12, 3)

    def forward(self, x, labels):
        return F.cross_entropy(self.fc2(F.dropout(torch.tanh(self.fc1(x)), 0.4, self.training)), labels)


def test_dropout_gradients_given_the_mask_match_autograd():
    """A training-mode dropout imports as a mask drawn by sdc.random_uniform from the entry's
    rng.seed and rng.offset; given that mask (recomputed here with numpy), every gradient equals
    torch.autograd's of the same model with the mask applied by hand (f32)."""
    from sdc.dialect.ops.random import philox_uniform
    from sdc.frontend.torch import import_torch

    torch.manual_seed(12)
    model = _DropoutNet().train()
    x, labels = torch.randn(5, 6), torch.randint(0, 3, (5,))
    imported = import_torch(model, (x, labels))
    run_pipeline(imported.module, ["sdc-autodiff", "sdc-verify"])
    seed, offset = 1234, 99
    got = interpret(imported.module, [x, labels, torch.tensor(seed), torch.tensor(offset)], imported.params)
    keep = torch.from_numpy(philox_uniform(seed, offset, 5 * 12).reshape(5, 12) >= 0.4)
    assert 0 < int(keep.sum()) < keep.numel()  # the mask drops some and keeps some
    h = torch.tanh(model.fc1(x)) * keep / 0.6
    loss = F.cross_entropy(model.fc2(h), labels)
    names, params = zip(*model.named_parameters())
    want = torch.autograd.grad(loss, params)
    np.testing.assert_allclose(got[0], loss.item(), rtol=1e-5)
    for name, g, w in zip(names, got[1:], want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
