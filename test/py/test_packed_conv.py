"""The CPU runtime's convolution on a weight oneDNN reordered once at load (sdc/runtime/reference_kernels.py
`packed_conv`), and the add and / or unary op (relu, clip, hard_swish, ...) after it merged into it as oneDNN post-ops
(`fuse_epilogues`): the same values as an independent float64 convolution for every attribute it
handles, at input shapes other than the one it packed for, and the reference kernels wherever it does
not apply."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import sdc
from sdc.dialect.opdef import get_op
from sdc.runtime import c_conv
from sdc.runtime.executor import PreparedOp
from sdc.runtime.plan_schema import OpEntry
from sdc.runtime.reference_kernels import EPILOGUE, fuse_epilogues, packed_conv, reference_kernel

pytestmark = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch without oneDNN")

CONV = get_op("conv").ref
TOLERANCE = dict(rtol=1e-4, atol=1e-4)  # f32 accumulation order differs from the f64 reference


def _want(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, a: dict) -> np.ndarray:
    """float64 torch convolution, with asymmetric pads applied by hand: independent of both kernels."""
    pads = a["pads"]
    x = F.pad(x.double(), [pads[1], pads[3], pads[0], pads[2]])
    b = bias.double() if bias is not None else None
    return F.conv2d(x, w.double(), b, a["strides"], 0, a["dilations"], a["groups"]).numpy()


CASES = [  # (input shape, weight shape, strides, pads, dilations, groups, bias)
    ((1, 8, 13, 11), (16, 8, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1], 1, True),
    ((2, 6, 12, 12), (6, 1, 3, 3), [2, 2], [0, 0, 1, 1], [1, 1], 6, False),  # depthwise, asymmetric pads
    ((1, 8, 15, 15), (12, 4, 3, 5), [1, 2], [2, 1, 0, 3], [2, 1], 2, True),  # grouped, dilated, non-square
    ((3, 4, 9, 9), (8, 4, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1], 1, False),
    # windows that tile the image (a patch embedding): one product over the patches; 17 and 13 leave
    # a remainder the convolution does not read
    ((2, 3, 16, 17), (8, 3, 4, 4), [4, 4], [0, 0, 0, 0], [1, 1], 1, True),
    ((1, 5, 12, 13), (6, 5, 2, 3), [2, 3], [0, 0, 0, 0], [1, 1], 1, False),
]


@pytest.mark.parametrize("xs,ws,strides,pads,dilations,groups,with_bias", CASES)
def test_matches_float64_convolution_at_other_shapes(xs, ws, strides, pads, dilations, groups, with_bias):
    a = dict(strides=strides, pads=pads, dilations=dilations, groups=groups)
    w = torch.randn(ws).contiguous(memory_format=torch.channels_last)
    bias = torch.randn(ws[0]) if with_bias else None
    kernel = packed_conv(CONV, a, w, (None, xs[1], None, xs[3]))  # packed for batch 1 and a guessed height
    assert kernel is not None
    for shape in (xs, (xs[0] + 2, xs[1], xs[2] + 4, xs[3] + 1)):  # also a shape it was not packed for
        for memory_format in (torch.contiguous_format, torch.channels_last):
            x = torch.randn(shape).contiguous(memory_format=memory_format)
            with torch.inference_mode():
                got = kernel(None, a, x, w, bias) if with_bias else kernel(None, a, x, w)
            np.testing.assert_allclose(got.numpy(), _want(x, w, bias, a), **TOLERANCE)


def test_falls_back_where_it_does_not_apply():
    a = dict(strides=[1], pads=[0, 0], dilations=[1], groups=1)
    assert packed_conv(CONV, a, torch.randn(4, 2, 3), (1, 2, 8)) is None  # 1-d
    a2 = dict(strides=[1, 1], pads=[0, 0, 0, 0], dilations=[1, 1], groups=1)
    assert packed_conv(CONV, a2, torch.randn(4, 2, 3, 3, dtype=torch.float64), (1, 2, 8, 8)) is None
    assert packed_conv(CONV, a2, torch.randn(4, 2, 3, 3), (1, None, 8, 8)) is None  # symbolic channels
    # a declared dim oneDNN cannot describe (fuzzer: onnx-struct:43:31986, batch 3e9): not packed, no crash
    for huge in (3_000_000_000, 2**32, 2**40):
        assert packed_conv(CONV, a2, torch.randn(4, 2, 3, 3), (huge, 2, 8, 8)) is None
        assert packed_conv(CONV, a2, torch.randn(4, 2, 3, 3), (1, 2, 8, huge)) is None
    assert reference_kernel("conv", CONV, constants=(None, None), attrs=a2, input_shape=(1, 2, 8, 8)) is CONV
    # a float64 input at run time on a packed kernel: the reference convolution, same values
    kernel = packed_conv(CONV, a2, torch.randn(4, 2, 3, 3), (1, 2, 8, 8))
    x, w = torch.randn(1, 2, 8, 8, dtype=torch.float64), torch.randn(4, 2, 3, 3, dtype=torch.float64)
    np.testing.assert_allclose(kernel(None, a2, x, w).numpy(), _want(x, w, None, a2), **TOLERANCE)


def _entry(op: str, inputs: tuple[str, ...], output: str, in_place: int | None = None) -> OpEntry:
    return OpEntry(op=op, attrs={}, inputs=inputs, outputs=(output,), in_place=in_place)


def test_fuse_epilogues_merges_only_ops_in_place_on_the_convolution_result():
    conv = _entry("conv", ("x", "w", "b"), "c")
    fused = fuse_epilogues((conv, _entry("add", ("r", "c"), "s", in_place=1), _entry("relu", ("s",), "y", 0),
                            _entry("relu", ("y",), "z", 0)))
    assert [e.op for e in fused] == ["conv", "relu"]  # one relu per convolution: the second stays
    assert fused[0].attrs[EPILOGUE] == ["add", "relu"]
    assert fused[0].inputs == ("x", "w", "b", "r") and fused[0].outputs == ("y",)
    assert fuse_epilogues((conv, _entry("relu", ("c",), "y")))[0].outputs == ("c",)  # not in place: c is read again
    # in place on the other operand: the add writes into r, the convolution's result is read as is
    assert len(fuse_epilogues((conv, _entry("add", ("r", "c"), "s", in_place=0)))) == 2
    assert len(fuse_epilogues((conv, _entry("mul", ("c", "r"), "s", in_place=0)))) == 2


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "reference"])
@pytest.mark.parametrize("other_shape", [(2, 8, 6, 6), (1, 8, 1, 1)], ids=["same-shape", "broadcast"])
def test_convolution_with_add_relu_epilogue(packed, other_shape):
    a = dict(strides=[1, 1], pads=[0, 0, 1, 1], dilations=[1, 1], groups=1)
    a[EPILOGUE] = ["add", "relu"]
    w, bias = torch.randn(8, 4, 2, 2), torch.randn(8)
    x, other = torch.randn(2, 4, 6, 6), torch.randn(other_shape)
    constants = (None, w if packed else None, None, None)
    kernel = reference_kernel("conv", CONV, constants=constants, attrs=a, input_shape=(None, 4, 6, 6))
    assert (kernel.__qualname__.startswith("packed_conv")) == packed
    want = np.maximum(_want(x, w, bias, a) + other.double().numpy(), 0)
    with torch.inference_mode():
        np.testing.assert_allclose(kernel(None, a, x, w, bias, other).numpy(), want, **TOLERANCE)
        x64 = x.double()  # float64 at run time: the reference kernels, the same values
        np.testing.assert_allclose(kernel(None, a, x64, w.double(), bias.double(), other.double()).numpy(), want,
                                   **TOLERANCE)


@pytest.mark.parametrize("xs,out_channels", [((2, 24, 1, 1), 40), ((2, 6, 5, 3), 10), ((1, 48, 8, 8), 80),
                                             ((1, 64, 32, 32), 128)],
                         ids=["one-pixel", "small", "64-pixels", "above-threshold"])
@pytest.mark.parametrize("epilogue", [[], ["relu"], ["add"], ["add", "relu"]], ids=lambda e: "+".join(e) or "none")
def test_pointwise_convolution_as_a_matrix_product(xs, out_channels, epilogue):
    # Small 1x1 convolutions run as one BLAS product (reference_kernels._product_is_cheaper; the last case
    # is above both thresholds: oneDNN).
    from sdc.runtime.reference_kernels import _product_is_cheaper

    assert _product_is_cheaper(xs[0] * xs[2] * xs[3], xs[1] * out_channels) == (xs[2] < 32)
    a = dict(strides=[1, 1], pads=[0, 0, 0, 0], dilations=[1, 1], groups=1, **{EPILOGUE: epilogue})
    w, bias = torch.randn(out_channels, xs[1], 1, 1), torch.randn(out_channels)
    kernel = packed_conv(CONV, a, w, (None, xs[1], None, None))
    for memory_format in (torch.contiguous_format, torch.channels_last):
        x = torch.randn(xs).contiguous(memory_format=memory_format)
        other = torch.randn(xs[0], out_channels, *xs[2:])
        want = _want(x, w, bias, a) + (other.double().numpy() if "add" in epilogue else 0)
        want = np.maximum(want, 0) if "relu" in epilogue else want
        with torch.inference_mode():
            got = kernel(None, a, x, w, bias, *([other] if "add" in epilogue else []))
        np.testing.assert_allclose(got.numpy(), want, **TOLERANCE)


class _Block(torch.nn.Module):
    """A residual block: conv + bn + relu, conv + bn, the input added, relu (ResNet's)."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.BatchNorm2d(4)
        self.conv2, self.bn2 = torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))) + x)


def test_compiled_residual_block_fuses_its_epilogues():
    torch.manual_seed(0)
    net = _Block().eval()
    for bn in (net.bn1, net.bn2):
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
    exe = sdc.compile(net, (torch.randn(2, 4, 8, 8),))
    convs = [op for op in exe._executor.program if isinstance(op, PreparedOp) and op.name == "conv"]
    assert sorted(op.attrs.get(EPILOGUE, []) for op in convs) == [["add", "relu"], ["relu"]]
    x = torch.randn(2, 4, 8, 8)
    with torch.no_grad():
        want = net.double()(x.double()).numpy()
    got = exe(x.numpy())
    got = got[0] if isinstance(got, (list, tuple)) else got
    np.testing.assert_allclose(np.asarray(got), want, **TOLERANCE)


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 4, 3, stride=2, groups=4)

    def forward(self, x):
        return self.conv2(torch.relu(self.bn(self.conv(x))))


def test_compiled_model_runs_packed_convolutions_at_several_batches():
    torch.manual_seed(0)
    net = _Net().eval()
    net.bn.running_mean.uniform_(-1, 1)
    net.bn.running_var.uniform_(0.5, 2)
    batch = torch.export.Dim("batch", max=16)
    exe = sdc.compile(net, (torch.randn(2, 3, 10, 10),), dynamic_shapes=({0: batch},))
    convs = [op for op in exe._executor.program if isinstance(op, PreparedOp) and op.name == "conv"]
    assert len(convs) == 2 and all(op.kernel.__qualname__.startswith("packed_conv") for op in convs)
    for b in (1, 5):
        _matches_float64(exe, net, torch.randn(b, 3, 10, 10))



def _matches_float64(exe, net: torch.nn.Module, x: torch.Tensor) -> None:
    """The compiled module's output on `x` against the module itself in float64."""
    with torch.no_grad():
        want = net.double()(x.double()).numpy()
        net.float()
    got = exe(x.numpy())
    got = got[0] if isinstance(got, (list, tuple)) else got
    np.testing.assert_allclose(np.asarray(got), want, **TOLERANCE)

# Unary epilogues (reference_kernels.EPILOGUE_UNARY): (op, attributes, float64 reference). The
# hard_sigmoid of ONNX's default constants and the clip with an open bound have no oneDNN post-op:
# they run in place after the convolution.
UNARY = [
    ("hard_swish", {}, F.hardswish),
    ("hard_sigmoid", {"alpha": 1 / 6, "beta": 0.5}, F.hardsigmoid),
    ("hard_sigmoid", {"alpha": 0.2, "beta": 0.5}, lambda t: (0.2 * t + 0.5).clamp(0, 1)),
    ("sigmoid", {}, torch.sigmoid),
    ("tanh", {}, torch.tanh),
    ("clip", {"min": 0.0, "max": 6.0}, lambda t: t.clamp(0, 6)),
    ("clip", {"min": -1.0, "max": float("inf")}, lambda t: t.clamp(min=-1)),
]


@pytest.mark.parametrize("name,unary_attrs,want_fn", UNARY, ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("adds", [False, True], ids=["conv", "conv+add"])
def test_convolution_with_unary_epilogue(name, unary_attrs, want_fn, adds):
    from sdc.runtime.reference_kernels import EPILOGUE_ATTRS

    a = dict(strides=[1, 1], pads=[1, 1, 1, 1], dilations=[1, 1], groups=1)
    a[EPILOGUE] = ["add", name] if adds else [name]
    a[EPILOGUE_ATTRS] = [[k, v] for k, v in unary_attrs.items()]
    w, bias = torch.randn(8, 4, 3, 3), torch.randn(8)
    x, other = 2 * torch.randn(2, 4, 6, 5), torch.randn(2, 8, 6, 5)
    extra = [other] if adds else []
    want = want_fn(torch.from_numpy(_want(x, w, bias, a)) + (other.double() if adds else 0)).numpy()
    for packed in (True, False):
        kernel = reference_kernel("conv", CONV, constants=(None, w if packed else None, None, *([None] * adds)),
                                  attrs=a, input_shape=(None, 4, None, None))
        with torch.inference_mode():
            for memory_format in (torch.contiguous_format, torch.channels_last):
                got = kernel(None, a, x.contiguous(memory_format=memory_format), w, bias, *extra)
                np.testing.assert_allclose(got.numpy(), want, **TOLERANCE)


def test_fuse_epilogues_takes_one_unary_op_with_its_attributes():
    from sdc.runtime.reference_kernels import EPILOGUE_ATTRS

    conv = _entry("conv", ("x", "w", "b"), "c")
    clip = OpEntry(op="clip", attrs={"min": 0.0, "max": 6.0}, inputs=("c",), outputs=("y",), in_place=0)
    (fused,) = fuse_epilogues((conv, clip))
    assert fused.attrs[EPILOGUE] == ["clip"] and fused.attrs[EPILOGUE_ATTRS] == [["max", 6.0], ["min", 0.0]]
    fused = fuse_epilogues((conv, _entry("hard_swish", ("c",), "y", 0), _entry("hard_sigmoid", ("y",), "z", 0)))
    assert [e.op for e in fused] == ["conv", "hard_sigmoid"] and fused[0].attrs[EPILOGUE] == ["hard_swish"]
    # not merged: an op without a post-op (exp), or a unary op before the add
    assert len(fuse_epilogues((conv, _entry("exp", ("c",), "y", 0)))) == 2
    assert len(fuse_epilogues((conv, _entry("relu", ("c",), "y", 0), _entry("add", ("y", "r"), "s", 0)))) == 2


class _MobileBlock(torch.nn.Module):
    """MobileNet-v3's inverted residual with squeeze-excite: hardswish and hardsigmoid after convolutions."""

    def __init__(self):
        super().__init__()
        self.expand, self.bn = torch.nn.Conv2d(8, 16, 1), torch.nn.BatchNorm2d(16)
        self.depthwise = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.squeeze, self.excite = torch.nn.Conv2d(16, 4, 1), torch.nn.Conv2d(4, 16, 1)
        self.project = torch.nn.Conv2d(16, 8, 1)

    def forward(self, x):
        y = F.hardswish(self.depthwise(F.hardswish(self.bn(self.expand(x)))))
        s = F.hardsigmoid(self.excite(torch.relu(self.squeeze(y.mean((2, 3), keepdim=True)))))
        return self.project(y * s) + x


def test_compiled_mobilenet_block_merges_its_activations_at_symbolic_shapes():
    # Symbolic batch and image size: the planner marks unary ops in place without static shapes.
    torch.manual_seed(0)
    net = _MobileBlock().eval()
    net.bn.running_mean.uniform_(-1, 1)
    net.bn.running_var.uniform_(0.5, 2)
    batch, size = torch.export.Dim("batch", max=8), torch.export.Dim("size", min=2, max=64)
    exe = sdc.compile(net, (torch.randn(2, 8, 10, 10),), dynamic_shapes=({0: batch, 2: size, 3: size},))
    convs = [op for op in exe._executor.program if isinstance(op, PreparedOp) and op.name == "conv"]
    merged = sorted(tuple(op.attrs.get(EPILOGUE, ())) for op in convs)
    # torch's export writes hardswish and hardsigmoid as arithmetic around a clip (ONNX's as one op each)
    assert ("relu",) in merged and ("clip",) in merged, merged
    for b, s in ((1, 7), (3, 12)):
        _matches_float64(exe, net, torch.randn(b, 8, s, s))


def test_packed_for_the_thread_count_the_gate_runs_it_with(monkeypatch):
    """At two threads, a convolution the executor's gate runs on one thread (sdc.runtime.gate) is packed
    on one thread, and the caller's count is back after; a large one is packed on the caller's threads.
    (oneDNN's blocked format depends on the thread count: packed for the other count, a call reorders
    the weight again, 10-35x slower on a 1x1 convolution of 1024 channels.)"""
    from sdc.runtime import gate

    monkeypatch.setenv("SDC_C_KERNELS", "0")  # (with them, the weight is packed at its first oneDNN call)
    a = dict(strides=[1, 1], pads=[0, 0, 0, 0], dilations=[1, 1], groups=1)
    small, large = (1, 8, 8, 8), (1, 64, 64, 64)
    w = torch.randn(32, 8, 1, 1), torch.randn(256, 64, 3, 3)
    assert gate.small_conv(small, w[0].shape, [1, 1]) and not gate.small_conv(large, w[1].shape, [1, 1])
    before = torch.get_num_threads()
    seen: list[int] = []
    set_threads = torch.set_num_threads
    try:
        set_threads(2)
        monkeypatch.setattr(torch, "set_num_threads", lambda n: (seen.append(n), set_threads(n)))
        assert packed_conv(CONV, a, w[0], small) is not None
        assert seen == [1, 2] and torch.get_num_threads() == 2
        seen.clear()
        assert packed_conv(CONV, a, w[1], large) is not None
        assert seen == []
    finally:
        monkeypatch.undo()
        torch.set_num_threads(before)


def test_gate_limits_follow_how_the_threads_wait(monkeypatch):
    """Sleeping OpenMP threads (PASSIVE, or a spin count of 0) wake slowly: larger ops stay on one
    thread than with threads that spin before they sleep."""
    import importlib

    from sdc.runtime import gate

    assert gate.threads_sleep({"OMP_WAIT_POLICY": " passive"}) and gate.threads_sleep({"GOMP_SPINCOUNT": "0"})
    assert not gate.threads_sleep({}) and not gate.threads_sleep({"GOMP_SPINCOUNT": "30000"})
    assert not gate.threads_sleep({"OMP_WAIT_POLICY": "ACTIVE"})
    limits, squeeze_excite = {}, {}
    try:
        for policy in ("PASSIVE", ""):
            monkeypatch.setenv("OMP_WAIT_POLICY", policy)
            monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
            reloaded = importlib.reload(gate)
            limits[policy] = (reloaded.SLEEPING, reloaded.SERIAL_CONV_MACS, reloaded.SERIAL_OP_ELEMENTS)
            # a squeeze-excite convolution: few multiply-adds, a large weight to stream
            squeeze_excite[policy] = reloaded.small_conv((2, 168, 1, 1), (672, 168, 1, 1), [1, 1])
            few_weights = reloaded.small_conv((2, 64, 1, 1), (256, 64, 1, 1), [1, 1])
            assert few_weights, policy
    finally:
        monkeypatch.undo()
        importlib.reload(gate)
    assert limits["PASSIVE"] == (True, 1 << 24, 1 << 22) and limits[""] == (False, 1 << 20, 1 << 16)
    assert squeeze_excite == {"PASSIVE": True, "": False}  # the second core's bandwidth only where threads spin


def test_with_c_kernels_the_weight_is_packed_at_the_first_onednn_call(monkeypatch):
    """A convolution sdc's C kernel takes packs no oneDNN weight at load, nor on calls the kernel runs;
    the first call on another input (row-major) packs it once, on the thread count of that call."""
    from sdc.runtime.launch.c import c_kernels_enabled

    if not c_kernels_enabled() or c_conv.library() is None:
        pytest.skip("no C kernels on this host")
    a = dict(strides=[1, 1], pads=[1, 1, 1, 1], dilations=[1, 1], groups=1)
    w, b = torch.randn(16, 8, 3, 3), torch.randn(16)
    packs: list[int] = []
    real = torch._C._nn.mkldnn_reorder_conv2d_weight
    monkeypatch.setattr(torch._C._nn, "mkldnn_reorder_conv2d_weight",
                        lambda *args: packs.append(torch.get_num_threads()) or real(*args))
    kernel = packed_conv(CONV, a, w, (1, 8, 10, 10))
    assert kernel is not None and packs == []
    x = torch.randn(1, 8, 10, 10)
    with torch.inference_mode():
        got = kernel(None, a, x.contiguous(memory_format=torch.channels_last), w, b)  # the C kernel's
        assert packs == []
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for _ in range(2):
                np.testing.assert_allclose(kernel(None, a, x, w, b).numpy(), _want(x, w, b, a), **TOLERANCE)
        finally:
            torch.set_num_threads(before)
    assert packs == [1]
    np.testing.assert_allclose(got.numpy(), _want(x, w, b, a), **TOLERANCE)
