"""Convolution groups on cuda: the Triton implicit-GEMM `conv` template and the fused cuDNN call.

The template (sdc/codegen/triton/conv.py, selected by SDC_CONV_KERNEL=triton) runs under the Triton
interpreter on small odd shapes (every tile edge masked): 3x3 stride 2 with padding, 1x1, dilation
and asymmetric pads, channels-last and NCHW inputs, a dynamic batch, with bias, residual add, relu
and a cast fused; f32/f16/bf16. Checked against torch's conv2d in float64 on the same (rounded)
inputs, fresh random ones each run, with a tolerance per output dtype.

The cuDNN path (sdc/runtime/reference_kernels.py `fused_conv`, the default): which epilogues and
dtypes go to torch's fused call, what it is called with (a CPU stand-in for the cuDNN function
computes the documented semantics), and the fallbacks, against torch eager; plus the plan the
executor runs it from and `sdc inspect`'s line. The real cuDNN call runs in the `gpu` test.
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from sdc.cli.backend_report import backend_lines
from sdc.cli.main import main as sdc_main
from sdc.codegen.kernel.conv import CONV_KERNEL_ENV
from sdc.runtime import reference_kernels as rk
from sdc.runtime.plan_schema import OpEntry
from triton_support import TORCH_DTYPE, compile_cuda, interpreter, launches, rng  # noqa: F401

# (rtol, atol) by the stored dtype: f32 accumulates exactly enough for 1e-5 (ieee dot); a 16-bit
# result is rounded once at the store, after f32 accumulation (half an ulp plus the sum's rounding)
TOLERANCE = {"f32": (1e-5, 1e-5), "f16": (2e-3, 2e-3), "bf16": (1.6e-2, 1.6e-2)}


def _ir(x: str, w: str, out: str, attrs: str, dtype: str, epilogue: list[str], residual: bool,
        out_dtype: str | None = None) -> str:
    """A conv group: conv, + bias (a [O,1,1] weight: the planner merges it into the convolution),
    optionally + residual, then `epilogue` (unary ops), then a cast to `out_dtype`."""
    t = lambda shape, dt=dtype: f"tensor<{shape}x{dt}>"  # noqa: E731
    cout = w.split("x")[0]
    args = [f'%x: {t(x)} {{sdc.name = "x"}}'] + ([f'%r: {t(out)} {{sdc.name = "r"}}'] if residual else [])
    result_type = t(out, out_dtype or dtype)
    lines = [f'  %w = "sdc.parameter"() {{name = "w"}} : () -> {t(w)}',
             f'  %b = "sdc.parameter"() {{name = "b"}} : () -> {t(cout + "x1x1")}',
             f'  %0 = "sdc.conv"(%x, %w) {{{attrs}, groups = 1 : i64}} : ({t(x)}, {t(w)}) -> {t(out)}',
             f'  %1 = "sdc.add"(%0, %b) : ({t(out)}, {t(cout + "x1x1")}) -> {t(out)}']
    last = 1
    if residual:
        lines.append(f'  %2 = "sdc.add"(%1, %r) : ({t(out)}, {t(out)}) -> {t(out)}')
        last = 2
    for op in epilogue:
        lines.append(f'  %{last + 1} = "sdc.{op}"(%{last}) : ({t(out)}) -> {t(out)}')
        last += 1
    if out_dtype:
        lines.append(f'  %{last + 1} = "sdc.cast"(%{last}) {{dtype = {out_dtype}}} : ({t(out)}) -> {result_type}')
        last += 1
    return (f"func.func @main({', '.join(args)}) -> ({result_type} {{sdc.name = \"y\"}}) {{\n" + "\n".join(lines)
            + f"\n  return %{last} : {result_type}\n}}")


def _attrs(strides=(1, 1), pads=(0, 0, 0, 0), dilations=()) -> str:
    ints = lambda v: "array<i64" + (": " + ", ".join(map(str, v)) if v else "") + ">"  # noqa: E731
    return f"dilations = {ints(dilations)}, pads = {ints(pads)}, strides = {ints(strides)}"


EPILOGUE64 = {"relu": torch.relu, "sigmoid": torch.sigmoid}

# name: (x shape, weight shape, output shape (a leading ? for a dynamic batch), attrs, stride/pad/dilation
#        for torch, dtype, epilogue, residual, cast to, batch at run time, channels-last input)
CASES = {
    "3x3_stride2_pad_residual_relu_f32": ("2x5x9x7", "6x5x3x3", "2x6x5x4", _attrs((2, 2), (1, 1, 1, 1)),
                                          ((2, 2), (1, 1, 1, 1), (1, 1)), "f32", ["relu"], True, None, 2, True),
    "1x1_dynamic_batch_relu_cast_f16": ("?x9x5x3", "7x9x1x1", "?x7x5x3", _attrs(),
                                        ((1, 1), (0, 0, 0, 0), (1, 1)), "f16", ["relu"], False, "f32", 3, True),
    "3x3_dilated_asymmetric_pads_bf16": ("1x4x8x6", "5x4x3x3", "1x5x6x3", _attrs((1, 2), (0, 1, 2, 1), (2, 1)),
                                         ((1, 2), (0, 1, 2, 1), (2, 1)), "bf16", ["sigmoid"], True, None, 1, False),
}


def _conv64(x, w, b, stride, pads, dilation) -> torch.Tensor:
    """torch's conv2d in float64; asymmetric pads applied first (F.pad: last dim's begin, end, then H's)."""
    x = F.pad(x.double(), [pads[1], pads[3], pads[0], pads[2]])
    return F.conv2d(x, w.double(), b.double().reshape(-1), stride, 0, dilation)


@pytest.mark.parametrize("case", sorted(CASES))
def test_triton_conv_template_matches_torch(case, tmp_path, monkeypatch, rng):
    x_shape, w_shape, out_shape, attrs, (stride, pads, dilation), dtype, epilogue, residual, cast, batch, nhwc = \
        CASES[case]
    monkeypatch.setenv(CONV_KERNEL_ENV, "triton")
    dt = TORCH_DTYPE[dtype]
    cin, cout = int(w_shape.split("x")[1]), int(w_shape.split("x")[0])
    w = torch.randn([int(d) for d in w_shape.split("x")], generator=rng).to(dt) / (cin * 9) ** 0.5
    b = torch.randn(cout, 1, 1, generator=rng).to(dt)
    exe = compile_cuda(_ir(x_shape, w_shape, out_shape, attrs, dtype, epilogue, residual, cast),
                       tmp_path / "c.sdc", {"w": w, "b": b})
    (step,) = launches(tmp_path / "c.sdc")
    kernel = step["kernel"]
    assert kernel["backend"] == "triton" and kernel["template"] == "conv", kernel.get("why_reference")
    assert [op["op"] for op in kernel["ops"]][:1] == ["conv"] and kernel["tune"]  # bias merged; tiles to time
    values = json.loads((tmp_path / "c.sdc" / "plan.json").read_text())["ranks"][0]["values"]
    assert values[kernel["args"][1]["value"]]["layout"] == [2, 3, 1, 0]  # stored [KH, KW, Cin, Cout]
    x = torch.randn([batch, *(int(d) for d in x_shape.split("x")[1:])], generator=rng).to(dt)
    if nhwc:
        x = x.to(memory_format=torch.channels_last)
    out = [batch, *(int(d) for d in out_shape.split("x")[1:])]
    inputs = [x]
    want = _conv64(x, w, b, stride, pads, dilation)
    if residual:
        r = torch.randn(out, generator=rng).to(dt)
        inputs.append(r)
        want = want + r.double()
    for op in epilogue:
        want = EPILOGUE64[op](want)
    (y,) = exe(*inputs)
    rtol, atol = TOLERANCE[dtype]
    assert y.dtype == TORCH_DTYPE[cast or dtype] and list(y.shape) == out
    torch.testing.assert_close(y.double(), want, rtol=rtol, atol=atol)


def test_tf32_precision_reaches_the_dot(tmp_path, monkeypatch):
    monkeypatch.setenv(CONV_KERNEL_ENV, "triton")
    text = _ir("1x3x5x5", "4x3x3x3", "1x4x3x3", _attrs(), "f32", ["relu"], False)
    compile_cuda(text, tmp_path / "t.sdc", {"w": torch.randn(4, 3, 3, 3), "b": torch.randn(4, 1, 1)},
                 precision="tf32")
    source = next((tmp_path / "t.sdc" / "kernels").glob("*.py")).read_text()
    assert 'input_precision="tf32"' in source


def test_outside_the_template_the_group_stays_reference_with_its_reason(tmp_path, monkeypatch, rng):
    """groups = 2 is not a template case: the reference group (cuDNN on a GPU) computes it, and says why."""
    monkeypatch.setenv(CONV_KERNEL_ENV, "triton")
    text = _ir("1x4x6x6", "6x2x3x3", "1x6x4x4", _attrs(), "f32", ["relu"], False).replace(
        "groups = 1", "groups = 2")
    w, b = torch.randn(6, 2, 3, 3, generator=rng), torch.randn(6, 1, 1, generator=rng)
    exe = compile_cuda(text, tmp_path / "g.sdc", {"w": w, "b": b})
    (step,) = launches(tmp_path / "g.sdc")
    assert step["kernel"]["backend"] == "reference"
    assert "groups = 2 (the template has groups = 1)" in step["kernel"]["why_reference"]
    x = torch.randn(1, 4, 6, 6, generator=rng)
    (y,) = exe(x)
    torch.testing.assert_close(y.double(), torch.relu(F.conv2d(x.double(), w.double(), b.double().reshape(-1),
                                                               groups=2)), rtol=1e-5, atol=1e-5)


def test_default_is_the_fused_cudnn_call_and_inspect_says_so(tmp_path, monkeypatch, rng):
    monkeypatch.delenv(CONV_KERNEL_ENV, raising=False)
    w, b = torch.randn(6, 5, 3, 3, generator=rng), torch.randn(6, 1, 1, generator=rng)
    text = _ir("2x5x9x7", "6x5x3x3", "2x6x5x4", _attrs((2, 2), (1, 1, 1, 1)), "f32", ["relu"], True)
    exe = compile_cuda(text, tmp_path / "d.sdc", {"w": w, "b": b})
    (step,) = launches(tmp_path / "d.sdc")
    assert step["kernel"]["backend"] == "reference" and "cuDNN" in step["kernel"]["why_reference"]
    entries = [OpEntry(e["op"], e["attrs"], tuple(e["inputs"]), tuple(e["outputs"]), in_place=e.get("in_place"))
               for e in step["kernel"]["ops"]]
    (merged,) = rk.fuse_epilogues(entries)  # bias in the convolution, residual add and relu merged into it
    assert merged.op == "conv" and merged.attrs[rk.EPILOGUE] == ["add", "relu"] and len(merged.inputs) == 4
    rank = json.loads((tmp_path / "d.sdc" / "plan.json").read_text())["ranks"][0]
    assert "  cuDNN fused: conv+add+relu x1 (k0)" in backend_lines(rank, "cuda")
    assert rank["values"][merged.inputs[1]]["layout"] == [0, 2, 3, 1]  # channels-last, as cuDNN reads it on cuda
    x, r = torch.randn(2, 5, 9, 7, generator=rng), torch.randn(2, 6, 5, 4, generator=rng)
    (y,) = exe(x, r)  # on the CPU: the reference convolution, then the epilogue in place
    want = torch.relu(F.conv2d(x.double(), w.double(), b.double().reshape(-1), 2, 1) + r.double())
    torch.testing.assert_close(y.double(), want, rtol=1e-5, atol=1e-5)


def test_the_conv_kernel_option_selects_the_template_without_the_variable(tmp_path, monkeypatch, rng):
    from sdc.compiler import compile_module
    from sdc.ir_text import parse_module
    from sdc.options import CompileOptions

    monkeypatch.delenv(CONV_KERNEL_ENV, raising=False)
    text = _ir("1x3x5x5", "4x3x3x3", "1x4x3x3", _attrs(), "f32", ["relu"], False)
    w, b = torch.randn(4, 3, 3, 3, generator=rng), torch.randn(4, 1, 1, generator=rng)
    exe = compile_module(parse_module(text), {"w": w, "b": b}, CompileOptions(target="cuda", conv_kernel="triton"),
                         output=tmp_path / "o.sdc", device="cpu")
    (step,) = launches(tmp_path / "o.sdc")
    assert step["kernel"]["backend"] == "triton" and step["kernel"]["template"] == "conv"
    x = torch.randn(1, 3, 5, 5, generator=rng)
    (y,) = exe(x)
    want = torch.relu(F.conv2d(x.double(), w.double(), b.double().reshape(-1)))
    torch.testing.assert_close(y.double(), want, rtol=1e-5, atol=1e-5)


def test_an_unknown_conv_kernel_choice_is_one_error(tmp_path, monkeypatch, capsys):
    """`sdc compile` of an .mlir file (no parameters: the weights are constants) refuses the choice once."""
    text = _ir("1x3x5x5", "4x3x3x3", "1x4x3x3", _attrs(), "f32", ["relu"], False)
    for name, value in (("w", "dense<0.5> : tensor<4x3x3x3xf32>"), ("b", "dense<0.25> : tensor<4x1x1xf32>")):
        text = text.replace(f'"sdc.parameter"() {{name = "{name}"}}', f'"sdc.constant"() {{value = {value}}}')
    model = tmp_path / "m.mlir"
    model.write_text(text)
    monkeypatch.setenv(CONV_KERNEL_ENV, "cutlass")
    assert sdc_main(["compile", str(model), "--target", "cuda", "-o", str(tmp_path / "m.sdc")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: SDC_CONV_KERNEL='cutlass': expected one of cudnn, triton"]


# ---------------------------------------------------------------- the fused cuDNN call, on the CPU

def test_which_epilogues_and_dtypes_have_a_fused_cudnn_call():
    assert rk.cudnn_fused_call(["relu"], "f16") == "cudnn_convolution_relu"
    assert rk.cudnn_fused_call(["add", "relu"], "f32") == "cudnn_convolution_add_relu"
    assert rk.cudnn_fused_call(["add"], "f16") is None  # no relu: cuDNN's fused engine is conv+add+relu
    assert rk.cudnn_fused_call(["relu"], "bf16") is None


class FakeCudnn:
    """CPU stand-ins for torch's fused cuDNN calls, computing what they are documented to compute
    (relu(conv(x, w) + bias) and relu(conv(x, w) + alpha * z + bias)), recording each call."""

    def __init__(self, refuse: bool = False):
        self.calls: list[str] = []
        self.outputs: list[torch.Tensor] = []
        self.refuse = refuse

    def relu(self, x, w, bias, stride, padding, dilation, groups):
        self.calls.append("relu")
        if self.refuse:
            raise RuntimeError("cuDNN: no fused engine for this configuration")
        self.outputs.append(torch.relu(F.conv2d(x, w, bias, stride, padding, dilation, groups)))
        return self.outputs[-1]

    def add_relu(self, x, w, z, alpha, bias, stride, padding, dilation, groups):
        self.calls.append("add_relu")
        self.outputs.append(torch.relu(F.conv2d(x, w, bias, stride, padding, dilation, groups) + alpha * z))
        return self.outputs[-1]


@pytest.fixture
def fake_cudnn(monkeypatch):
    fake = FakeCudnn()
    monkeypatch.setattr(rk, "_cudnn_applies", lambda x: True)
    monkeypatch.setattr(torch, "cudnn_convolution_relu", fake.relu)
    monkeypatch.setattr(torch, "cudnn_convolution_add_relu", fake.add_relu)
    return fake


def _conv_ref(env, a, x, w, bias=None):
    from sdc.dialect.opdef import get_op
    import sdc.dialect.ops  # noqa: F401

    return get_op("conv").ref(env, a, x, w, bias)


def _run_fused(epilogue, dtype, rng, pads=(1, 1, 1, 1), residual_shape=None):
    a = {"strides": [2, 1], "pads": list(pads), "dilations": [1, 2], "groups": 1, rk.EPILOGUE: epilogue}
    x = torch.randn(2, 3, 9, 8, generator=rng).to(dtype)
    w = torch.randn(5, 3, 3, 3, generator=rng).to(dtype)
    b = torch.randn(5, generator=rng).to(dtype)
    want = _conv64(x, w, b, (2, 1), pads, (1, 2))
    rest = [b]
    if "add" in epilogue:
        other = torch.randn(residual_shape or list(want.shape), generator=rng).to(dtype)
        rest.append(other)
        want = want + other.double()
    if "relu" in epilogue:
        want = torch.relu(want)
    kernel = rk.reference_kernel("conv", _conv_ref, None, (), a, tuple(x.shape))
    return kernel(None, a, x, w, *rest), want


@pytest.mark.parametrize("epilogue,call", [(["relu"], "relu"), (["add", "relu"], "add_relu")])
def test_the_merged_convolution_is_one_fused_cudnn_call(epilogue, call, fake_cudnn, rng):
    got, want = _run_fused(epilogue, torch.float32, rng)
    assert fake_cudnn.calls == [call] and got is fake_cudnn.outputs[-1]  # the fused call's result, no fallback
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("epilogue,dtype,pads,residual", [
    (["add"], torch.float32, (1, 1, 1, 1), None),  # no relu: conv, then the add in place
    (["relu"], torch.bfloat16, (1, 1, 1, 1), None),  # no fused call for bf16
    (["add", "relu"], torch.float32, (0, 1, 2, 1), None),  # asymmetric pads: the reference pads first
    (["add", "relu"], torch.float32, (1, 1, 1, 1), [1, 5, 1, 1]),  # an add operand that broadcasts
])
def test_without_a_fused_call_the_epilogue_follows_the_convolution(epilogue, dtype, pads, residual, fake_cudnn,
                                                                   rng):
    got, want = _run_fused(epilogue, dtype, rng, pads, residual)
    assert fake_cudnn.calls == []
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol)


def test_a_refused_fused_call_falls_back_and_is_not_retried(fake_cudnn, rng):
    fake_cudnn.refuse = True
    a = {"strides": [], "pads": [1, 1, 1, 1], "dilations": [], "groups": 1, rk.EPILOGUE: ["relu"]}
    kernel = rk.reference_kernel("conv", _conv_ref, None, (), a, (1, 3, 6, 6))
    x, w, b = torch.randn(1, 3, 6, 6, generator=rng), torch.randn(4, 3, 3, 3, generator=rng), torch.randn(4)
    want = torch.relu(F.conv2d(x.double(), w.double(), b.double(), padding=1))
    for _ in range(2):
        torch.testing.assert_close(kernel(None, a, x, w, b).double(), want, rtol=1e-5, atol=1e-5)
    assert fake_cudnn.calls == ["relu"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("epilogue", [["relu"], ["add", "relu"]])
def test_the_real_fused_cudnn_call_matches_torch(epilogue, rng):
    a = {"strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [], "groups": 1, rk.EPILOGUE: epilogue}
    kernel = rk.reference_kernel("conv", _conv_ref, None, (), a, (4, 16, 14, 14))
    x = torch.randn(4, 16, 14, 14, generator=rng).half().cuda().to(memory_format=torch.channels_last)
    w = (torch.randn(32, 16, 3, 3, generator=rng) / 12).half().cuda().to(memory_format=torch.channels_last)
    b = torch.randn(32, generator=rng).half().cuda()
    rest = [b] + ([torch.randn(4, 32, 14, 14, generator=rng).half().cuda()] if "add" in epilogue else [])
    want = F.conv2d(x.double(), w.double(), b.double(), padding=1) + (rest[1].double() if len(rest) > 1 else 0)
    torch.testing.assert_close(kernel(None, a, x, w, *rest).double(), torch.relu(want), rtol=2e-3, atol=2e-3)
