"""sdc's own C convolutions over channels-last float32 (sdc/runtime/c_conv.py, c_conv.c): grouped and
depthwise convolutions with their merged bias, residual add and unary op, convolutions whose windows
tile an NCHW image (a ViT's patch embedding), and the channel shuffle,
against an independent float64 torch computation on random inputs; where a call leaves them for oneDNN;
and that the runtime's convolution kernel (`packed_conv`) and the executor's channel shuffle use them."""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sdc.dialect.opdef import get_op
from sdc.runtime import c_conv
from sdc.runtime.reference_kernels import EPILOGUE, EPILOGUE_ATTRS, packed_conv, reference_kernel

from c_support import needs_c_compiler

pytestmark = needs_c_compiler

TOLERANCE = dict(rtol=1e-4, atol=1e-4)  # float32 sums in another order than the float64 reference
CONV = get_op("conv").ref


def _reference(x, w, bias, a, other=None, unary=None, unary_attrs=None) -> np.ndarray:
    """float64 torch: pads applied by hand (asymmetric too), then the convolution, the add, the unary op."""
    pads = a["pads"]
    y = F.conv2d(F.pad(x.double(), [pads[1], pads[3], pads[0], pads[2]]), w.double(),
                 None if bias is None else bias.double(), a["strides"], 0, a["dilations"], a["groups"])
    if other is not None:
        y = y + other.double()
    if unary == "relu":
        y = torch.relu(y)
    elif unary == "clip":
        y = torch.clamp(y, unary_attrs["min"], unary_attrs["max"])
    elif unary == "hard_swish":
        y = y * torch.clamp(y + 3, 0, 6) / 6
    elif unary == "hard_sigmoid":
        y = torch.clamp(unary_attrs["alpha"] * y + unary_attrs["beta"], 0, 1)
    elif unary == "sigmoid":
        y = torch.sigmoid(y)
    return y.numpy()


def _channels_last(*shape) -> torch.Tensor:
    return torch.randn(*shape).contiguous(memory_format=torch.channels_last)


@contextlib.contextmanager
def _threads(count: int):
    """torch's thread count `count` inside (the kernels split their work over it), restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


CASES = [  # (input shape, out channels, kernel, strides, pads, dilations, groups)
    ((1, 136, 28, 28), 136, (1, 1), [1, 1], [0, 0, 0, 0], [1, 1], 4),  # ShuffleNet's grouped 1x1
    ((2, 24, 9, 13), 112, (1, 1), [1, 1], [0, 0, 0, 0], [1, 1], 4),  # 28 columns a group: a partial vector
    ((1, 12, 11, 10), 18, (3, 3), [2, 1], [1, 0, 2, 1], [1, 2], 3),  # grouped 3x3, asymmetric pads, dilated
    ((1, 4, 7, 7), 12, (3, 3), [1, 1], [1, 1, 1, 1], [1, 1], 4),  # a channel multiplier of 3
    ((1, 6, 17, 5), 80, (1, 1), [1, 1], [0, 0, 0, 0], [1, 1], 2),  # 40 columns a group: 2.5 vectors
    ((1, 8, 5, 9), 40, (3, 3), [1, 1], [1, 1, 1, 1], [1, 1], 2),  # 20: a vector and a half
    ((2, 10, 6, 5), 104, (1, 1), [1, 1], [0, 0, 0, 0], [1, 1], 2),  # 52: three and a half
    # a tile's pixels stepped across a row's and an image's end (5 x 4 results an image: tiles of 6 straddle both)
    ((2, 12, 5, 7), 18, (3, 3), [1, 2], [1, 1, 0, 1], [1, 1], 3),
    ((3, 8, 7, 9), 24, (1, 1), [2, 2], [0, 0, 0, 0], [1, 1], 2),  # 1x1 of stride 2: not the pointwise path
    ((2, 8, 3, 5), 16, (1, 1), [1, 1], [1, 0, 0, 1], [1, 1], 2),  # 1x1 with pads: nor this
    ((1, 136, 28, 28), 136, (3, 3), [1, 1], [1, 1, 1, 1], [1, 1], 136),  # depthwise: 8 vectors and a half
    ((2, 72, 15, 14), 72, (5, 5), [2, 2], [2, 2, 2, 2], [1, 1], 72),  # MobileNet-v3's 5x5, stride 2
    ((1, 33, 9, 19), 33, (3, 3), [1, 1], [0, 2, 1, 0], [2, 1], 33),  # 33: one lane past a whole vector
    ((1, 544, 7, 7), 544, (3, 3), [1, 1], [1, 1, 1, 1], [1, 1], 544),
    # 3x3 depthwise without dilation (rows swept with the weights in registers): its edges and strides
    ((2, 40, 9, 1), 40, (3, 3), [1, 1], [1, 1, 1, 1], [1, 1], 40),  # one column: no window inside
    ((1, 48, 7, 2), 48, (3, 3), [2, 2], [0, 1, 1, 0], [1, 1], 48),  # asymmetric pads, stride 2
    ((1, 72, 15, 14), 72, (3, 3), [2, 2], [1, 1, 1, 1], [1, 1], 72),  # stride 2: no right edge
    ((1, 35, 5, 6), 35, (3, 3), [1, 1], [2, 2, 2, 2], [1, 1], 35),  # pads of 2; 3 lanes past 2 vectors
    ((1, 64, 6, 5), 64, (3, 3), [1, 2], [0, 0, 0, 0], [1, 1], 64),  # no pads
    ((2, 16, 9, 7), 16, (3, 3), [1, 1], [1, 1, 1, 1], [1, 1], 16),  # one vector of channels (MobileNet-v3's first)
    ((1, 4, 8, 11), 4, (3, 3), [2, 2], [1, 1, 1, 1], [1, 1], 4),  # a quarter vector
    ((1, 8, 10, 6), 8, (5, 5), [1, 1], [2, 2, 2, 2], [1, 1], 8),  # half a vector, on the tiles
    ((1, 16, 7, 9), 20, (3, 3), [1, 1], [1, 1, 1, 1], [1, 1], 2),  # 8 channels a group: taps, not gathered windows
    ((2, 9, 8, 7), 24, (3, 3), [2, 1], [1, 0, 1, 2], [1, 1], 1),  # ungrouped, 9 channels: taps
    ((1, 16, 9, 11), 40, (1, 1), [2, 2], [0, 0, 0, 0], [1, 1], 1),  # ungrouped 1x1 of stride 2 (ResNet's)
    ((1, 16, 6, 7), 160, (3, 3), [1, 1], [1, 1, 1, 1], [1, 1], 2),  # 80 columns a group: two chunks of the weight
    # fewer than 8 input channels (a group): the tiles gather their windows into rows (gather_windows)
    ((2, 3, 96, 64), 16, (3, 3), [2, 2], [1, 1, 1, 1], [1, 1], 1),  # an image's first convolution
    ((1, 3, 13, 11), 64, (7, 7), [2, 2], [3, 3, 3, 3], [1, 1], 1),  # 7x7: most windows cross the padding
    ((1, 3, 10, 9), 96, (3, 3), [2, 2], [1, 1, 1, 1], [1, 1], 1),  # 96 columns: two chunks of the weight
    ((1, 5, 9, 8), 20, (3, 3), [1, 2], [0, 1, 2, 0], [2, 1], 1),  # dilated rows, asymmetric pads
    ((2, 7, 6, 5), 33, (2, 3), [1, 1], [0, 0, 0, 0], [1, 2], 1),  # dilated columns: a window row in pieces
]


@pytest.mark.parametrize("xs,out_channels,kernel,strides,pads,dilations,groups", CASES)
@pytest.mark.parametrize("with_bias", [False, True])
def test_grouped_and_depthwise_match_float64(xs, out_channels, kernel, strides, pads, dilations, groups, with_bias):
    a = dict(strides=strides, pads=pads, dilations=dilations, groups=groups)
    w = torch.randn(out_channels, xs[1] // groups, *kernel) / math.sqrt(xs[1] // groups * kernel[0] * kernel[1])
    bias = torch.randn(out_channels) if with_bias else None
    conv = c_conv.prepare(w, a, None, {})
    assert conv is not None
    x = _channels_last(*xs)
    assert conv.fits(x)
    got = conv(x, bias, None)
    assert got is not None and got.is_contiguous(memory_format=torch.channels_last)
    np.testing.assert_allclose(got.numpy(), _reference(x, w, bias, a), **TOLERANCE)


UNARY = [
    ("relu", {}),
    ("clip", {"min": 0.0, "max": 6.0}),
    ("clip", {"min": -0.5, "max": math.inf}),
    ("hard_swish", {}),
    ("hard_sigmoid", {"alpha": 0.2, "beta": 0.5}),
    ("hard_sigmoid", {"alpha": 1 / 6, "beta": 0.5}),
]


@pytest.mark.parametrize("unary,unary_attrs", UNARY)
@pytest.mark.parametrize("groups,out_channels", [(4, 40), (40, 40)])
def test_residual_add_and_unary_op_as_the_result_is_stored(unary, unary_attrs, groups, out_channels):
    a = dict(strides=[1, 1], pads=[1, 1, 1, 1], dilations=[1, 1], groups=groups)
    w = torch.randn(out_channels, 40 // groups, 3, 3) / 3
    bias, x, other = torch.randn(out_channels), _channels_last(2, 40, 6, 9), _channels_last(2, out_channels, 6, 9)
    conv = c_conv.prepare(w, a, unary, unary_attrs)
    assert conv is not None and conv.applies_unary
    got = conv(x, bias, other)
    np.testing.assert_allclose(got.numpy(), _reference(x, w, bias, a, other, unary, unary_attrs), **TOLERANCE)


def test_nan_stays_nan_through_relu_and_clip():
    a = dict(strides=[1, 1], pads=[0, 0, 0, 0], dilations=[1, 1], groups=2)
    w = torch.randn(4, 2, 1, 1)
    x = _channels_last(1, 4, 3, 3)
    x[0, :2, 1, 1] = math.nan  # group 0's channels at one pixel: its two results are NaN before the op
    for unary, attrs in [("relu", {}), ("clip", {"min": 0.0, "max": 6.0})]:
        got = c_conv.prepare(w, a, unary, attrs)(x, None, None)
        assert torch.isnan(got[0, :2, 1, 1]).all() and not torch.isnan(got[0, 2:]).any()
        assert not torch.isnan(got[0, :, 0, 0]).any()


def test_which_convolutions_and_calls_it_takes(monkeypatch):
    a = dict(strides=[1, 1], pads=[0, 0, 0, 0], dilations=[1, 1], groups=1)
    assert isinstance(c_conv.prepare(torch.randn(8, 8, 1, 1), {**a, "strides": [2, 2]}, None, {}), c_conv.CConv)
    assert isinstance(c_conv.prepare(torch.randn(8, 8, 3, 3), a, None, {}), c_conv.CConv)  # ungrouped: one group
    assert isinstance(c_conv.prepare(torch.randn(8, 7, 3, 3), a, None, {}), c_conv.CConv)  # gathered windows
    assert c_conv.prepare(torch.randn(3, 1, 3, 3), {**a, "groups": 3}, None, {}) is None  # narrow depthwise
    assert c_conv.prepare(torch.randn(4, 1, 3, 3), {**a, "groups": 4}, None, {}) is not None
    assert c_conv.prepare(torch.randn(8, 4, 1, 1, dtype=torch.float64), {**a, "groups": 2}, None, {}) is None
    conv = c_conv.prepare(torch.randn(8, 4, 1, 1), {**a, "groups": 2}, "sigmoid", {})
    assert conv is not None and not conv.applies_unary  # the caller applies it after the kernel
    assert not conv.fits(torch.randn(1, 8, 4, 4))  # row-major
    assert not conv.fits(_channels_last(1, 8, 4, 4).double())
    assert not conv.fits(_channels_last(1, 6, 4, 4))  # not the weight's channels
    assert not conv.fits(_channels_last(0, 8, 4, 4))
    assert conv.fits(_channels_last(1, 8, 4, 4))
    assert conv(_channels_last(1, 8, 4, 4), None, torch.randn(1, 8, 4, 4)) is None  # a row-major addend
    assert conv(_channels_last(1, 8, 4, 4), torch.randn(7), None) is None  # a bias of other length
    shuffle, cast, image = c_conv.block_transpose_kernel(2, 4), c_conv.channels_last_kernel(), torch.randn(1, 3, 64, 64)
    assert shuffle(_channels_last(1, 8, 4, 4)) is not None and cast(image) is not None  # made with C kernels on
    monkeypatch.setenv("SDC_C_KERNELS", "0")
    assert c_conv.prepare(torch.randn(8, 4, 1, 1), {**a, "groups": 2}, None, {}) is None
    assert shuffle(_channels_last(1, 8, 4, 4)) is not None and cast(image) is not None  # (as the artifact loaded)
    # kernels made with them off (when an artifact loads) take torch's path
    assert c_conv.block_transpose_kernel(2, 4)(_channels_last(1, 8, 4, 4)) is None
    assert c_conv.channels_last_kernel()(image) is None
    pool = dict(kernel=[2, 2], strides=[2, 2], pads=[0, 0, 0, 0], dilations=[1, 1], ceil_mode=False)
    ref = get_op("max_pool").ref
    assert c_conv.pool_kernel("max_pool", ref, pool) is ref


@pytest.mark.parametrize("unary,unary_attrs,adds", [(None, {}, False), ("relu", {}, True), ("sigmoid", {}, False),
                                                    ("hard_swish", {}, True)])
def test_packed_conv_runs_grouped_convolutions_through_the_c_kernel(monkeypatch, unary, unary_attrs, adds):
    a = dict(strides=[1, 1], pads=[1, 1, 1, 1], dilations=[1, 1], groups=4)
    epilogue = [*(["add"] if adds else []), *([unary] if unary else [])]
    attrs = {**a, **({EPILOGUE: epilogue} if epilogue else {}),
             **({EPILOGUE_ATTRS: sorted(unary_attrs.items())} if unary else {})}
    w, bias = torch.randn(24, 4, 3, 3) / 6, torch.randn(24)
    calls = []  # calls the C kernel ran (it declines, returning None, an input it does not take)
    real = c_conv.CConv.__call__

    def counted(self, *args):
        out = real(self, *args)
        if out is not None:
            calls.append(1)
        return out

    monkeypatch.setattr(c_conv.CConv, "__call__", counted)
    kernel = packed_conv(CONV, attrs, w, (1, 16, 10, 10))
    x, other = _channels_last(1, 16, 10, 10), _channels_last(1, 24, 10, 10)
    with torch.inference_mode():
        got = kernel(None, attrs, x, w, bias, *([other] if adds else []))
    assert calls == [1]
    want = _reference(x, w, bias, a, other if adds else None, unary, unary_attrs)
    np.testing.assert_allclose(got.numpy(), want, **TOLERANCE)
    with torch.inference_mode():  # a row-major input goes to oneDNN, same values
        got = kernel(None, attrs, x.contiguous(), w, bias, *([other] if adds else []))
    assert calls == [1]
    np.testing.assert_allclose(got.numpy(), want, **TOLERANCE)


PATCHES = [  # (input shape, out channels, kernel)
    ((3, 3, 32, 32), 32, (8, 8)),  # the real-model suite's ViT
    ((2, 3, 35, 21), 70, (4, 4)),  # rows and columns past the last window; 70 = 4 vectors and 6 lanes
    ((1, 5, 12, 18), 20, (6, 3)),  # non-square patches; one vector and 4 lanes
    ((7, 2, 2, 2), 100, (2, 2)),  # one patch an image, over two blocks of output channels
]


@pytest.mark.parametrize("xs,out_channels,kernel", PATCHES)
@pytest.mark.parametrize("with_bias,unary,unary_attrs", [(True, None, {}), (False, None, {}), (True, "relu", {}),
                                                         (True, "clip", {"min": -0.5, "max": 0.5})])
@pytest.mark.parametrize("threads", [1, 2])
def test_windows_that_tile_the_image_match_float64(xs, out_channels, kernel, with_bias, unary, unary_attrs, threads):
    a = dict(strides=list(kernel), pads=[0, 0, 0, 0], dilations=[1, 1], groups=1)
    w = torch.randn(out_channels, xs[1], *kernel) / math.sqrt(xs[1] * kernel[0] * kernel[1])
    bias = torch.randn(out_channels) if with_bias else None
    conv = c_conv.prepare(w, a, unary, unary_attrs)
    assert isinstance(conv, c_conv.CPatchConv) and conv.applies_unary
    x = torch.randn(*xs)
    assert conv.fits(x)
    with _threads(threads):
        got = conv(x, bias, None)
    assert got is not None and got.is_contiguous()
    np.testing.assert_allclose(got.numpy(), _reference(x, w, bias, a, None, unary, unary_attrs), **TOLERANCE)


def test_which_patch_convolutions_and_calls_it_takes():
    a = dict(strides=[4, 4], pads=[0, 0, 0, 0], dilations=[1, 1], groups=1)
    w = torch.randn(16, 3, 4, 4)
    for other in ({"strides": [4, 2]}, {"pads": [1, 1, 1, 1]}, {"dilations": [2, 2]}):  # windows that do not tile
        assert isinstance(c_conv.prepare(w, {**a, **other}, None, {}), c_conv.CConv)  # the one-group kernel's
    conv = c_conv.prepare(w, a, "sigmoid", {})
    assert conv is not None and not conv.applies_unary
    assert conv.fits(torch.randn(1, 3, 9, 4))
    assert not conv.fits(_channels_last(2, 3, 8, 8))  # channels-last: the matrix product or oneDNN
    assert not conv.fits(torch.randn(1, 3, 3, 8))  # no whole window
    assert not conv.fits(torch.randn(1, 4, 8, 8)) and not conv.fits(torch.randn(1, 3, 8, 8).double())
    side = 4 * math.isqrt(c_conv.PATCH_MAX_MACS // (48 * 16)) + 8  # past the work that oneDNN does faster
    assert not conv.fits(torch.randn(1, 3, side, side))
    assert conv(torch.randn(1, 3, 8, 8), None, torch.randn(1, 16, 2, 2)) is None  # a merged add: oneDNN's
    assert conv(torch.randn(1, 3, 8, 8), torch.randn(15), None) is None


def _counted(calls: list, result):
    if result is not None:
        calls.append(1)
    return result


@pytest.mark.parametrize("shape,out_channels,unary,adds,in_c", [
    ((2, 160, 6, 4), 960, "hard_swish", False, True),  # MobileNet-v3's last stages: 48 pixels
    ((2, 240, 1, 1), 960, "hard_sigmoid", False, True),  # a squeeze-excite block's: one pixel an image
    ((1, 40, 9, 7), 24, None, True, True),  # few multiply-adds, a residual add merged
    ((1, 64, 56, 56), 256, "relu", False, True),  # large (ResNet-50's): C too
    ((1, 64, 20, 20), 48, "relu", True, False),  # a row-major input: the product or oneDNN
])
def test_packed_conv_runs_pointwise_convolutions_in_c(monkeypatch, shape, out_channels, unary, adds, in_c):
    a = dict(strides=[1, 1], pads=[0, 0, 0, 0], dilations=[1, 1], groups=1)
    unary_attrs = {"alpha": 1 / 6, "beta": 0.5} if unary == "hard_sigmoid" else {}
    epilogue = [*(["add"] if adds else []), *([unary] if unary else [])]
    attrs = {**a, **({EPILOGUE: epilogue} if epilogue else {}),
             **({EPILOGUE_ATTRS: sorted(unary_attrs.items())} if unary else {})}
    w, bias = torch.randn(out_channels, shape[1], 1, 1) / math.sqrt(shape[1]), torch.randn(out_channels)
    calls = []
    real = c_conv.CConv.__call__
    monkeypatch.setattr(c_conv.CConv, "__call__", lambda self, *args: _counted(calls, real(self, *args)))
    kernel = packed_conv(CONV, attrs, w, shape)
    x, other = _channels_last(*shape), _channels_last(shape[0], out_channels, *shape[2:])
    if not in_c:
        x, other = x.contiguous(), other.contiguous()
    with torch.inference_mode():
        got = kernel(None, attrs, x, w, bias, *([other] if adds else []))
    assert calls == ([1] if in_c else [])  # the calls the C kernel ran
    want = _reference(x, w, bias, a, other if adds else None, unary, unary_attrs)
    np.testing.assert_allclose(got.numpy(), want, **TOLERANCE)


def test_packed_conv_runs_a_patch_embedding_through_the_c_kernel(monkeypatch):
    a = dict(strides=[8, 8], pads=[0, 0, 0, 0], dilations=[1, 1], groups=1)
    w, bias = torch.randn(32, 3, 8, 8) / 14, torch.randn(32)
    calls = []
    real = c_conv.CPatchConv.__call__
    monkeypatch.setattr(c_conv.CPatchConv, "__call__", lambda self, *args: calls.append(1) or real(self, *args))
    kernel = packed_conv(CONV, a, w, (None, 3, 32, 32))
    x = torch.randn(3, 3, 32, 32)
    with torch.inference_mode():
        got = kernel(None, a, x, w, bias)
    assert calls == [1] and got.is_contiguous()
    np.testing.assert_allclose(got.numpy(), _reference(x, w, bias, a), **TOLERANCE)


@pytest.mark.parametrize("shape,a", [((1, 112, 5, 7), 4), ((2, 6, 3, 3), 3), ((1, 544, 1, 2), 4), ((1, 116, 3, 5), 2),
                                     ((2, 8, 2, 3), 4), ((1, 64, 2, 2), 2), ((1, 128, 3, 1), 4)])
@pytest.mark.parametrize("threads", [1, 2])
def test_channel_shuffle(shape, a, threads):
    x = _channels_last(*shape)
    b = shape[1] // a
    with _threads(threads):
        got = c_conv.block_transpose_kernel(a, b)(x)
    want = x.numpy().reshape(shape[0], a, b, *shape[2:]).swapaxes(1, 2).reshape(shape)
    assert got.is_contiguous(memory_format=torch.channels_last)
    np.testing.assert_array_equal(got.numpy(), want)
    assert c_conv.block_transpose_kernel(a, b)(x.double()) is None


@pytest.mark.parametrize("shape", [(1, 3, 224, 224), (2, 3, 67, 61), (1, 2, 91, 93), (3, 4, 50, 41)])
def test_an_image_made_channels_last(shape, monkeypatch):
    """NCHW -> NHWC of a 2-4 channel image (whole and partial vectors of pixels), and the executor's
    layout_cast kernel uses it."""
    x = torch.randn(*shape)
    got = c_conv.channels_last_kernel()(x)
    assert got is not None and got.is_contiguous(memory_format=torch.channels_last)
    np.testing.assert_array_equal(got.numpy(), x.numpy())
    calls = []
    real = c_conv._block_transpose
    monkeypatch.setattr(c_conv, "_block_transpose", lambda *args: calls.append(1) or real(*args))
    cast = reference_kernel("layout_cast", get_op("layout_cast").ref)(None, {"layout": [0, 2, 3, 1]}, x)
    assert calls == [1] and cast.is_contiguous(memory_format=torch.channels_last) and torch.equal(cast, x)


def test_which_images_are_made_channels_last_in_c():
    assert c_conv.channels_last_kernel()(torch.randn(1, 5, 64, 64)) is None  # more channels: torch's copy
    assert c_conv.channels_last_kernel()(torch.randn(1, 3, 8, 8)) is None  # small: torch's copy
    assert c_conv.channels_last_kernel()(torch.randn(1, 3, 64, 64).double()) is None
    assert c_conv.channels_last_kernel()(torch.randn(1, 64, 64, 3).permute(0, 3, 1, 2)) is None  # already lying so


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("groups,out_channels", [(4, 136), (34, 34)])
def test_work_split_over_threads(threads, groups, out_channels):
    """torch's thread count splits the result's tiles (of 5 images of 7 x 9 pixels: no multiple of it)."""
    a = dict(strides=[1, 1], pads=[1, 1, 1, 1], dilations=[1, 1], groups=groups)
    w = torch.randn(out_channels, 136 // groups if groups == 4 else 1, 3, 3) / 6
    x, bias = _channels_last(5, 136 if groups == 4 else 34, 7, 9), torch.randn(out_channels)
    conv = c_conv.prepare(w, a, "relu", {})
    with _threads(threads):
        got = conv(x, bias, None)
    np.testing.assert_allclose(got.numpy(), _reference(x, w, bias, a, unary="relu"), **TOLERANCE)


def _max_pool_reference(x: torch.Tensor, a: dict) -> np.ndarray:
    """float64: the input padded with -inf by hand (asymmetric pads, and for ceil_mode as many more
    rows and columns as its last window needs), then torch's pooling without padding."""
    (kh, kw), (sh, sw), (dh, dw), pads = a["kernel"], a["strides"], a["dilations"], a["pads"]
    extra = [0, 0]
    if a["ceil_mode"]:
        for i, (k, s, d) in enumerate([(kh, sh, dh), (kw, sw, dw)]):
            size, span = x.shape[2 + i] + pads[i] + pads[2 + i], d * (k - 1) + 1
            out = -(-(size - span) // s) + 1
            if (out - 1) * s >= x.shape[2 + i] + pads[i]:
                out -= 1
            extra[i] = max(0, (out - 1) * s + span - size)
    xp = F.pad(x.double(), [pads[1], pads[3] + extra[1], pads[0], pads[2] + extra[0]], value=-math.inf)
    return F.max_pool2d(xp, (kh, kw), (sh, sw), 0, (dh, dw)).numpy()


def _pooled(name: str, a: dict, shape: tuple, threads: int):
    """The C kernel of pooling op `name` with attributes `a`, a fresh channels-last input of `shape`,
    its result at `threads` threads (checked to be the C kernel's: channels-last, the reference not
    called), and the list each call of the reference appends to."""
    ref_calls: list[int] = []
    op = get_op(name).ref
    run = c_conv.pool_kernel(name, lambda env, attrs, x: ref_calls.append(1) or op(env, attrs, x), a)
    x = _channels_last(*shape)
    with _threads(threads):
        got = run(None, a, x)
    assert not ref_calls and got.is_contiguous(memory_format=torch.channels_last)
    return run, x, got, ref_calls


POOLS = [  # (input shape, kernel, strides, pads, dilations, ceil_mode)
    ((1, 24, 112, 112), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], False),  # ShuffleNet's
    ((1, 64, 111, 111), [3, 3], [2, 2], [0, 0, 0, 0], [1, 1], False),  # SqueezeNet's
    ((2, 20, 9, 8), [3, 2], [2, 3], [0, 1, 2, 0], [1, 2], False),  # 20 channels: a vector and 4 lanes
    ((1, 5, 6, 7), [3, 3], [2, 2], [1, 0, 1, 0], [1, 1], True),  # a last window past the input
]


@pytest.mark.parametrize("xs,kernel,strides,pads,dilations,ceil_mode", POOLS)
@pytest.mark.parametrize("threads", [1, 2])
def test_max_pool_matches_float64(xs, kernel, strides, pads, dilations, ceil_mode, threads):
    a = dict(kernel=kernel, strides=strides, pads=pads, dilations=dilations, ceil_mode=ceil_mode)
    run, x, got, ref_calls = _pooled("max_pool", a, xs, threads)
    np.testing.assert_array_equal(got.numpy(), _max_pool_reference(x, a).astype(np.float32))
    np.testing.assert_array_equal(run(None, a, x.contiguous()).numpy(), got.numpy())  # row-major: the reference
    assert ref_calls == [1]


@pytest.mark.parametrize("kernel,size", [(2, 4), (3, 7)])  # 3x3: the unrolled path of a window inside
def test_max_pool_propagates_nan(kernel, size):
    a = dict(kernel=[kernel] * 2, strides=[2, 2], pads=[0, 0, 0, 0], dilations=[1, 1], ceil_mode=False)
    x = _channels_last(1, 17, size, size)
    x[0, 16, 2 * kernel - 4, 2 * kernel - 4] = math.nan  # past the last whole vector: window (k-2, k-2)'s first tap
    x[0, 3, size - 1, size - 1] = math.nan  # the last window
    x[0, 5, 0, 0] = -math.inf  # a window's max is its other taps', not the NaN mask's
    got = c_conv.pool_kernel("max_pool", get_op("max_pool").ref, a)(None, a, x)
    last = (size - kernel) // 2
    assert torch.isnan(got[0, 16, kernel - 2, kernel - 2]) and torch.isnan(got[0, 3, last, last])
    want = F.max_pool2d(x.double(), kernel, 2)  # (overlapping 3x3 windows share the NaN)
    assert torch.equal(torch.isnan(got), torch.isnan(want)) and int(torch.isnan(got).sum()) in (2, 5)
    assert got[0, 5, 0, 0] == x[0, 5, :kernel, :kernel].max()


AVG_POOLS = [  # (input shape, kernel, strides, pads, dilations, ceil_mode, count_include_pad)
    ((1, 24, 28, 28), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], False, False),  # ShuffleNet's
    ((1, 20, 9, 8), [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], False, True),  # Inception's, counting the pads
    ((2, 17, 9, 8), [3, 2], [2, 3], [0, 1, 2, 0], [1, 2], False, True),  # asymmetric pads, dilated
    ((1, 5, 6, 7), [3, 3], [2, 2], [1, 0, 1, 0], [1, 1], True, True),  # a last window past the pads
    ((1, 5, 6, 7), [3, 3], [2, 2], [1, 0, 1, 0], [1, 1], True, False),
]


@pytest.mark.parametrize("xs,kernel,strides,pads,dilations,ceil_mode,count_include_pad", AVG_POOLS)
@pytest.mark.parametrize("threads", [1, 2])
def test_avg_pool_matches_float64(xs, kernel, strides, pads, dilations, ceil_mode, count_include_pad, threads):
    """Against float64 sums over windows of a zero-padded copy divided by the windows' counted cells
    (a padded mask of ones: 1 on the input, on the pads too with count_include_pad, 0 past them)."""
    a = dict(kernel=kernel, strides=strides, pads=pads, dilations=dilations, ceil_mode=ceil_mode,
             count_include_pad=count_include_pad)
    run, x, got, ref_calls = _pooled("avg_pool", a, xs, threads)
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilations
    oh, ow = got.shape[2], got.shape[3]
    grow = [max(0, (o - 1) * s + d * (k - 1) + 1 - (size + p0 + p1))
            for o, s, d, k, size, p0, p1 in [(oh, sh, dh, kh, xs[2], pads[0], pads[2]), (ow, sw, dw, kw, xs[3], pads[1], pads[3])]]
    spec = [pads[1], pads[3] + grow[1], pads[0], pads[2] + grow[0]]
    xp = F.pad(x.double(), spec)
    ones = torch.ones(1, 1, *xs[2:], dtype=torch.float64)
    mask = F.pad(F.pad(ones, [pads[1], pads[3], pads[0], pads[2]], value=1.0), [0, grow[1], 0, grow[0]]) \
        if count_include_pad else F.pad(ones, spec)
    unfold = lambda t: F.unfold(t.reshape(-1, 1, *t.shape[2:]), (kh, kw), dilation=(dh, dw), stride=(sh, sw)).sum(1)
    want = (unfold(xp).reshape(xs[0], xs[1], oh, ow) / unfold(mask).reshape(1, 1, oh, ow)).numpy()
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run(None, a, x.contiguous()).numpy(), got.numpy(), rtol=1e-5, atol=1e-6)
    assert ref_calls == [1]  # row-major: the reference's pooling


@pytest.mark.parametrize("xs", [(2, 960, 6, 4), (1, 1000, 13, 13), (3, 70, 5, 3), (1, 17, 1, 1), (2, 64, 2, 2)])
@pytest.mark.parametrize("threads", [1, 2])
def test_global_avg_pool_matches_float64(xs, threads):
    """Blocks of 4 vectors and the tail vectors past them (70 = 4 vectors and 6 lanes), several images."""
    ref = get_op("global_avg_pool").ref
    ref_calls = []
    run = c_conv.global_avg_pool_kernel(lambda env, a, x: ref_calls.append(1) or ref(env, a, x))
    x = _channels_last(*xs)
    with _threads(threads):
        got = run(None, {}, x)
    assert not ref_calls and got.shape == (xs[0], xs[1], 1, 1)
    np.testing.assert_allclose(got.numpy(), x.double().mean(dim=(2, 3), keepdim=True).numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(run(None, {}, x.contiguous()).numpy(), got.numpy(), rtol=1e-6, atol=1e-6)
    assert ref_calls == [1] or xs[2:] == (1, 1)  # row-major: the reference (a 1x1 image is both layouts)


def test_one_kernel_called_at_several_shapes_and_thread_counts():
    """What a call derives from its input's shape and the thread count is kept per both: a symbolic
    image size or batch gives each call its own sizes."""
    a = dict(strides=[2, 1], pads=[1, 1, 1, 1], dilations=[1, 1], groups=4)
    w, bias = torch.randn(24, 4, 3, 3) / 6, torch.randn(24)
    conv = c_conv.prepare(w, a, "relu", {})
    pool_attrs = dict(kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], dilations=[1, 1], ceil_mode=False)
    pool = c_conv.pool_kernel("max_pool", get_op("max_pool").ref, pool_attrs)
    for shape, threads in [((1, 16, 5, 7), 1), ((2, 16, 9, 4), 1), ((1, 16, 5, 7), 2), ((3, 16, 6, 6), 2),
                           ((1, 16, 5, 7), 1)]:
        x = _channels_last(*shape)
        with _threads(threads):
            got = conv(x, bias, None)
            pooled = pool(None, pool_attrs, x)
        np.testing.assert_allclose(got.numpy(), _reference(x, w, bias, a, unary="relu"), **TOLERANCE)
        np.testing.assert_array_equal(pooled.numpy(), F.max_pool2d(x, 3, 2, 1).numpy())


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("scale_first", [False, True])
@pytest.mark.parametrize("xs,ss", [((2, 40, 6, 5), (2, 40, 1, 1)), ((3, 17, 4, 9), (1, 17, 1, 1)), ((1, 960, 2, 3), (1, 960, 1, 1))])
def test_channel_scaling_matches_torch_bit_for_bit(xs, ss, scale_first, threads):
    """A squeeze-excite block's `mul` ([N, C, H, W] by [N or 1, C, 1, 1]) in C: torch's products, in its layout."""
    kernel = c_conv.scale_channels_kernel(0 if scale_first else 1)
    x, s = _channels_last(*xs), torch.randn(*ss)
    operands = (s, x) if scale_first else (x, s)
    with _threads(threads):
        got = kernel(*operands)
    want = torch.mul(*operands)
    assert got.is_contiguous(memory_format=torch.channels_last) and torch.equal(got, want)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("a_shape,channels", [((1, 64, 55, 55), [64]), ((2, 5, 3, 7), [19]), ((3, 1, 1, 1), [2]),
                                              ((2, 64, 7, 5), [96, 32, 17]), ((1, 3, 4, 4), [1, 5])])
def test_channel_concat_matches_torch_bit_for_bit(a_shape, channels, threads):
    """A concat of two to four channels-last tensors along the channels (SqueezeNet's fire modules,
    Inception's blocks) in C."""
    parts = [_channels_last(*a_shape)] + [_channels_last(a_shape[0], c, *a_shape[2:]) for c in channels]
    with _threads(threads):
        got = c_conv.concat_channels_kernel()(*parts)
    assert got.is_contiguous(memory_format=torch.channels_last) and torch.equal(got, torch.cat(parts, 1))


def test_a_concat_of_five_parts_is_torchs():
    parts = [_channels_last(1, c, 2, 3) for c in (1, 2, 3, 4, 5)]
    torch.testing.assert_close(c_conv.concat_channels_kernel()(*parts), torch.cat(parts, 1), rtol=0, atol=0)


# (kernel, torch's op, operands it leaves to torch, operands it runs): the last pair of each is noted
LEFT_TO_TORCH = {
    "scale": (lambda: c_conv.scale_channels_kernel(1), torch.mul,
              [(torch.randn(2, 8, 3, 3), torch.randn(2, 8, 1, 1)),  # row-major
               (_channels_last(2, 8, 3, 3), torch.randn(2, 4, 1, 1)),  # other channels: torch says why
               (_channels_last(2, 8, 3, 3).double(), torch.randn(2, 8, 1, 1).double()),
               (_channels_last(2, 8, 3, 3), torch.randn(8, 2, 1, 1).permute(1, 0, 2, 3))],  # strided scale
              (_channels_last(2, 8, 3, 3), torch.randn(2, 8, 1, 1))),
    "concat": (c_conv.concat_channels_kernel, lambda a, b: torch.cat((a, b), 1),
               [(torch.randn(1, 4, 3, 3), torch.randn(1, 2, 3, 3)),  # row-major
                (_channels_last(1, 4, 3, 3), torch.randn(1, 2, 3, 3)),  # one of them row-major
                (_channels_last(1, 4, 3, 3).double(), _channels_last(1, 2, 3, 3).double()),
                (_channels_last(1, 4, 3, 3), _channels_last(2, 2, 3, 3))],  # other batch: torch says why
               (_channels_last(1, 4, 3, 3), _channels_last(1, 2, 3, 3))),
}


@pytest.mark.parametrize("which", sorted(LEFT_TO_TORCH))
def test_scaling_and_concat_leave_other_operands_to_torch(monkeypatch, which):
    make, torch_op, others, taken = LEFT_TO_TORCH[which]
    kernel = make()
    calls = []
    monkeypatch.setattr(c_conv, "_note", lambda *args: calls.append(1))
    for a, b in others:
        try:
            want = torch_op(a, b)
        except RuntimeError:
            with pytest.raises(RuntimeError):
                kernel(a, b)
            continue
        assert torch.equal(kernel(a, b), want)
    assert calls == []  # none of them ran the C kernel (a run would have recorded it)
    assert torch.equal(kernel(*taken), torch_op(*taken))
    assert calls == [1]


def _lrn_numpy(x: np.ndarray, size: int, alpha: float, beta: float, bias: float) -> np.ndarray:
    """ONNX's LRN in float64: the window of channel c is c - (size-1)//2 .. c + size-1-(size-1)//2."""
    c = x.shape[1]
    sq = x.astype(np.float64) ** 2
    out = np.empty_like(sq)
    for k in range(c):
        lo, hi = max(0, k - (size - 1) // 2), min(c - 1, k + size - 1 - (size - 1) // 2)
        out[:, k] = (bias + alpha / size * sq[:, lo:hi + 1].sum(axis=1)) ** -beta
    return x * out


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape,size,beta", [((2, 96, 9, 7), 5, 0.75), ((1, 16, 5, 5), 4, 0.5),
                                             ((3, 3, 2, 2), 9, 1.0), ((1, 8, 3, 4), 3, 0.6), ((1, 1, 2, 2), 5, 0.75)])
def test_lrn_matches_the_onnx_formula(shape, size, beta, threads):
    """AlexNet's and GoogLeNet's local response normalization in C on channels-last float32: even
    windows, windows wider than the channels, each beta's form (powf for others); row-major operands
    go to the reference."""
    attrs = {"size": size, "alpha": 2e-3, "beta": beta, "bias": 1.5}
    ref = get_op("lrn").ref
    kernel = c_conv.lrn_kernel(ref, attrs)
    x = _channels_last(*shape) * 3
    with _threads(threads):
        got = kernel(None, attrs, x)
    assert got.is_contiguous(memory_format=torch.channels_last)
    np.testing.assert_allclose(got.numpy(), _lrn_numpy(x.numpy(), size, 2e-3, beta, 1.5), rtol=2e-6, atol=1e-7)
    torch.testing.assert_close(got, ref(None, attrs, x), rtol=2e-6, atol=1e-7)
    row_major = x.contiguous()
    if not row_major.is_contiguous(memory_format=torch.channels_last):  # (one channel is both)
        torch.testing.assert_close(kernel(None, attrs, row_major), ref(None, attrs, row_major), rtol=0, atol=0)


def _ort_resize(x: np.ndarray, out: tuple[int, int], mode: str) -> np.ndarray:
    """onnxruntime's linear Resize of x's two spatial dims to `out`."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    sizes = numpy_helper.from_array(np.array([*x.shape[:2], *out], np.int64), "sizes")
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear",
                            coordinate_transformation_mode=mode)
    graph = helper.make_graph([node], "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [sizes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("mode", ["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"])
@pytest.mark.parametrize("shape,out", [((2, 128, 4, 6), (7, 11)), ((1, 3, 9, 8), (72, 64)), ((1, 5, 8, 9), (3, 4)),
                                       ((1, 2, 1, 5), (1, 5))])
def test_linear_resize_matches_onnxruntime(shape, out, mode, threads):
    """The segmentation model's upsamplings (and downsamplings, a dim kept) in C on channels-last float32,
    against onnxruntime's Resize, and torch's interpolate where its coordinates are ONNX's; row-major
    operands and other modes go to the reference."""
    pytest.importorskip("onnxruntime")
    from sdc.dialect.opdef import RefEnv

    op = get_op("resize")
    attrs = op.with_defaults({"axes": [2, 3], "sizes": list(out), "mode": "linear",
                              "coordinate_transformation_mode": mode})
    kernel = c_conv.resize_kernel(op.ref, attrs)
    x = _channels_last(*shape)
    env = RefEnv()
    with _threads(threads):
        got = kernel(env, attrs, x)
    assert got.shape == (*shape[:2], *out) and got.is_contiguous(memory_format=torch.channels_last)
    np.testing.assert_allclose(got.numpy(), _ort_resize(x.contiguous().numpy(), out, mode), rtol=1e-5, atol=1e-5)
    if mode == "align_corners" or mode == "half_pixel":
        torch.testing.assert_close(got, F.interpolate(x, size=out, mode="bilinear", align_corners=mode == "align_corners"),
                                   rtol=1e-5, atol=1e-5)
    nearest = c_conv.resize_kernel(op.ref, {**attrs, "mode": "nearest"})
    assert nearest is op.ref
    row_major = x.contiguous()
    if not row_major.is_contiguous(memory_format=torch.channels_last):  # (one channel is both)
        torch.testing.assert_close(kernel(env, attrs, row_major), op.ref(env, attrs, row_major), rtol=0, atol=0)
