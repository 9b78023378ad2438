"""sdc's hand-written C kernel library for the CPU (`c_conv.c`): convolutions and the other ops below,
over channels-last float32 tensors. It is one of the kernels the planner chooses per op (plan.json
`"runs": "c_conv"`, sdc/runtime/kernel_choice.py); the executor builds its kernels only for those ops,
and a call one does not take runs the planned fallback, counted (sdc/runtime/counters.py).

oneDNN runs grouped and depthwise convolutions far from the machine's peak and costs some 25 us per
call besides; ShuffleNet's 1x1 convolutions of 4 groups took 185 us each inside the model where
onnxruntime's took 92, MobileNet-v3's depthwise ones 50-110 us. This module compiles `c_conv.c`
once per host (through the cache of `launch.c.build_library`, like an artifact's generated
kernels) and prepares, at load, a convolution that it can run (`prepare`): its weight reordered once
into the layout the kernel reads. The kernels read the input as it lies in channels-last memory and
write a channels-last result, with the bias, a residual add and the unary op that `fuse_epilogues`
merged into the convolution applied as each result vector is stored.

Which convolutions (`prepare`): 2-d, float32, static channels, and
- depthwise (groups = input channels = output channels) of at least `DEPTHWISE_MIN_CHANNELS`, or
- grouped (2 or more groups, not depthwise), or
- ungrouped with windows that tile the image (strides = kernel, larger than 1x1, no pads or
  dilation: a vision transformer's patch embedding), on an NCHW input (`CPatchConv`), at most
  `PATCH_MAX_MACS` multiply-adds a call, or
- any other ungrouped one, as one group: a 1x1 one of stride 1 without pads reads each pixel's input
  where it lies, one of fewer than 8 input channels (an image's first convolution) gathers each tile's
  windows into rows of KH x KW x C values first (c_conv.c's GATHER_MAX_CHANNELS: one sum over 27
  values, not 9 sums of 3), any other sums its taps.
A call takes the C kernel when its input is a float32 channels-last tensor, otherwise oneDNN runs it
(or, for a small 1x1 one, a BLAS product: reference_kernels.packed_conv), with the same results up to
float rounding. The kernel splits the result's rows over torch's threads (the count the
executor's gate gave the convolution: sdc/runtime/gate.py) through OpenMP, built with `-fopenmp` so
that it shares the libgomp torch loaded, its one thread pool and how those threads wait; a compiler
without OpenMP builds it single-threaded. A host without a C compiler, or `SDC_C_KERNELS=0` at load,
runs every convolution through oneDNN.

Ungrouped convolutions against oneDNN's prepacked call with its post-op (2 threads, each alone, warm /
with the caches cold (16 MB swept), 2026-12-05, after the kernel's weight chunks and gathered
windows): 1x1 ones: SqueezeNet's 128 -> 16 over 55x55 124 / 175 us against 98 / 223, 256 -> 32 over
27x27 60 / 121 against 84 / 206, ResNet-50's 256 -> 64 over 56x56 473 / 656 against 529 / 722, 64 ->
256 509 / 686 against 497 / 645, 512 -> 1000 over 13x13 824 / 877 against 829 / 930 (and against the
BLAS product on the plain weight, which repacks it every call: MobileNet-v3's 160 -> 960 over 48
pixels 148 / 278 against 177 / 407); 3x3 ones: SqueezeNet's 16 -> 64 over 55x55 298 / 392 against
316 / 454, 48 -> 192 over 13x13 137 / 192 against 166 / 285, 128 -> 128 over 28x28 (116M
multiply-adds) 1025 / 1101 against 1029 / 1129, VGG's 64 -> 64 over 224x224 (1.85G) 17.4 / 17.6 ms
against 16.5 / 16.4, a 5x5 64 -> 192 over 27x27 2064 / 2044 against 1834 / 1925; an image's first,
3 -> 16 3x3 stride 2 over 2x96x64, 41 us against 59 (oneDNN's call cost more in a model: 166 us in
the segmentation model). Inside models the C kernels' calls join the executor's runs of C ops
(sdc/runtime/c_runs.py). Whole models, alternating calls with cache sweeps, 2 threads: 1x1 ones in
C (against oneDNN): SqueezeNet, Inception-v1 and -v2 6-7% faster, DenseNet-121 5%, ResNet-50 3%;
then all ungrouped ones in C: SqueezeNet 10% faster, DenseNet-121 10%, Inception-v2 8%, Inception-v1
and ResNet-50 6%, AlexNet 4%, ZFNet 2%, VGG-19 1% slower.

Also here: the channel shuffle of a channels-last float32 tensor as one pass of small transposes
(`block_transpose_kernel`), 2-4x faster than torch's strided copy of it, and an NCHW image of 2-4 channels
made channels-last the same way (`channels_last_kernel`); and 2-d max and average pooling of one
(`pool_kernel`), vectorized over the channels as they lie (ShuffleNet's first max pooling: torch 190
us, here 58); local response normalization (`lrn_kernel`); a linear resize of the spatial dims
(`resize_kernel`); a concat of up to four parts along the channels (`concat_channels_kernel`).

Measured on this project's 2-core AMD EPYC (AVX-512), one thread, each kernel alone against oneDNN's
prepacked call with its post-op (2026-12-04), as a fraction of oneDNN's time: ShuffleNet's grouped 1x1
convolutions 0.78-1.03x, MobileNet-v3's 5x5 depthwise ones 0.95-1.3x, 3x3 depthwise ones (which sweep
rows with their weights in registers, 2x the tiles' speed) 0.35-0.7x down to 4 channels
(`DEPTHWISE_MIN_CHANNELS`).
"""

from __future__ import annotations

import ctypes
import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from sdc.limits import check_alloc
from sdc.runtime.launch.c import CCompileError, build_parallel_library, c_kernels_enabled
from sdc.runtime.format import C_CONV  # this library, among the kernels a plan chooses
from sdc.runtime.kept import kept

SOURCE = Path(__file__).with_name("c_conv.c")
LANES = 16  # the widest vector the kernels use (AVX-512 floats): a weight's columns are padded to it
# Fewer channels: oneDNN's. Measured alone, 2 threads (one thread), against oneDNN's prepacked call
# (2026-12-05): 16 channels 3x3 over 2x48x32 12.5 us against 35 (17 against 39), 4 channels over 64x64
# 19 against 40 (27 against 40), 16 channels 5x5 (tiles) 36 against 44 (59 against 54).
DEPTHWISE_MIN_CHANNELS = 4
TO_CHANNELS_LAST_MIN = 8192  # elements of an image `channels_last_kernel` takes
PATCH_MAX_MACS = 1 << 22  # a call of a patch convolution (CPatchConv.fits): larger ones go to oneDNN

# the unary op applied as the result is stored: c_conv.c's `act` kinds
ACT_NONE, ACT_RELU, ACT_CLIP, ACT_HARD_SWISH, ACT_HARD_SIGMOID = range(5)

_library: Any = None  # the loaded library, False once it could not be built

# While one of the executor's runs of C kernels records a call (sdc/runtime/c_runs.py), `calls` on this
# thread is a list, and every kernel call here appends what it called (`KernelCall`).
_recording = threading.local()


@dataclass(frozen=True, eq=False)
class KernelCall:
    """One call of a kernel of the form (x, w, bias, res, y, q, act) (c_conv.c's convolutions, and its
    `*_call` forms of the pooling kernels): the function, the tensors its pointers were taken from (None:
    NULL), `w` the kernel's own constant (a packed weight), and the ctypes arrays `q` and `act`."""

    fn: Any
    x: torch.Tensor
    w: torch.Tensor | None
    bias: torch.Tensor | None
    res: torch.Tensor | None
    y: torch.Tensor
    q: Any
    act: Any


def start_recording() -> list[KernelCall]:
    """From now on, on this thread, the kernels' calls go into the returned list (`stop_recording`)."""
    _recording.calls = []
    return _recording.calls


def stop_recording() -> None:
    _recording.calls = None


def _recording_now() -> bool:
    """Whether a run records on this thread (so a kernel whose `q` array is made per call makes one)."""
    return getattr(_recording, "calls", None) is not None


def _note(fn: Any, x: torch.Tensor, w: Any, bias: Any, res: Any, y: torch.Tensor, q: Any, act: Any) -> None:
    """Record a call whose result `y` is the op's result as the kernel left it (a caller that changes
    it after, as a unary op the kernel has no form of, must not note the call)."""
    calls = getattr(_recording, "calls", None)
    if calls is not None:
        calls.append(KernelCall(fn, x, w, bias, res, y, q, act))


def library() -> ctypes.PyDLL | None:
    """c_conv.c compiled for this host (once per process; from the cache when any process built it),
    or None: C kernels off (`SDC_C_KERNELS=0`) or no compiler that takes it."""
    global _library
    if not c_kernels_enabled():
        return None
    if _library is None:
        try:  # without OpenMP where the compiler has none: the kernels run single-threaded
            lib, _parallel = build_parallel_library(SOURCE.read_text())
        except (CCompileError, OSError):
            _library = False
            return None
        pointers = [ctypes.c_void_p] * 7
        for name in ("sdc_conv_grouped_f32", "sdc_conv_depthwise_f32", "sdc_conv_patches_f32"):
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = pointers, ctypes.c_int
        lib.sdc_conv_chunk_columns.argtypes, lib.sdc_conv_chunk_columns.restype = [], ctypes.c_int
        lib.sdc_block_transpose_f32.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int64] * 4
        lib.sdc_block_transpose_f32.restype = ctypes.c_int
        for name in ("sdc_max_pool_f32", "sdc_avg_pool_f32"):
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = [ctypes.c_void_p] * 3, ctypes.c_int
        for name in ("sdc_lrn_f32", "sdc_resize_linear_f32"):
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = [ctypes.c_void_p] * 4, ctypes.c_int
        lib.sdc_global_avg_pool_f32.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int64] * 4
        lib.sdc_global_avg_pool_f32.restype = ctypes.c_int
        for name in ("sdc_max_pool_call", "sdc_avg_pool_call", "sdc_global_avg_pool_call", "sdc_block_transpose_call",
                     "sdc_scale_channels_call", "sdc_concat_channels_call", "sdc_lrn_call", "sdc_resize_linear_call"):
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = pointers, ctypes.c_int
        lib.sdc_scale_channels_f32.argtypes, lib.sdc_scale_channels_f32.restype = [ctypes.c_void_p] * 4, ctypes.c_int
        lib.sdc_run_calls.argtypes, lib.sdc_run_calls.restype = [ctypes.c_int64, ctypes.c_void_p], ctypes.c_int
        _library = lib
    return _library or None


def _per_layout(store: dict, x: torch.Tensor, make: Callable[[torch.Tensor, int], Any]) -> Any:
    """`make(x, threads)` for x's shape and strides and torch's thread count (the count the executor's
    gate gave the op), kept in `store`: what a call derives from those (whether it runs here, its sizes
    array, its result's shape) is made once, not per call. With the result made channels-last in one
    `empty_strided`, the Python of a small grouped convolution's call beside its C kernel
    (reference_kernels.packed_conv's included) went 6.5 -> 3.3 us (2026-12-05)."""
    threads = torch.get_num_threads()
    return kept(store, (x.shape, x.stride(), threads), make, x, threads)


def _channels_last_strides(n: int, c: int, h: int, w: int) -> tuple[int, int, int, int]:
    """The strides of a dense channels-last [n, c, h, w] tensor."""
    return (h * w * c, 1, w * c, c)


def _lazy(name: str) -> Callable[[], Any]:
    """A getter of the library's function `name`: None with C kernels off (`SDC_C_KERNELS`) when a
    plan's kernel is made; else the library is compiled at the first call that needs it (not at all
    for a plan on a GPU) and the function kept, not looked up again per call; None where it did not
    build."""
    if not c_kernels_enabled():
        return lambda: None
    found: list = []

    def get() -> Any:
        if not found:
            lib = library()
            found.append(getattr(lib, name) if lib is not None else None)
        return found[0]

    return get


def _window(attrs: dict) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int, int, int]] | None:
    """A 2-d op's strides, dilations and pads (top, left, bottom, right) from its decoded attributes,
    defaults filled; None where they are not a 2-d window c_conv.c takes."""
    strides = [int(s) for s in attrs.get("strides") or [1, 1]]
    dilations = [int(d) for d in attrs.get("dilations") or [1, 1]]
    pads = [int(p) for p in attrs.get("pads") or [0, 0, 0, 0]]
    if len(strides) != 2 or len(dilations) != 2 or len(pads) != 4 or min(strides + dilations) < 1 or min(pads) < 0:
        return None
    return (strides[0], strides[1]), (dilations[0], dilations[1]), (pads[0], pads[1], pads[2], pads[3])


def activation(name: str | None, attrs: dict) -> list[float] | None:
    """c_conv.c's `act` array for a merged unary op (None: no op), or None where it has none."""
    if name is None:
        return [ACT_NONE, 0.0, 0.0, 0.0, 0.0]
    if name == "relu":
        return [ACT_RELU, 0.0, 0.0, 0.0, 0.0]
    if name == "clip" and not (math.isnan(attrs["min"]) or math.isnan(attrs["max"])):
        return [ACT_CLIP, float(attrs["min"]), float(attrs["max"]), 0.0, 0.0]
    if name == "hard_swish":
        return [ACT_HARD_SWISH, 0.0, 0.0, 0.0, 0.0]
    if name == "hard_sigmoid":
        return [ACT_HARD_SIGMOID, 0.0, 0.0, float(attrs["alpha"]), float(attrs["beta"])]
    return None


@dataclass(frozen=True, eq=False)
class CConv:
    """One convolution ready for c_conv.c: its weight in the kernel's layout and its fixed sizes."""

    fn: Callable[..., int]
    weight: torch.Tensor  # grouped: [G][KH][KW][CI][COP]; depthwise: [KH][KW][C]
    groups: int
    in_channels: int  # per group
    out_channels: int  # per group
    padded: int  # COP
    kernel: tuple[int, int]
    strides: tuple[int, int]
    pads: tuple[int, int, int, int]  # top, left, bottom, right
    dilations: tuple[int, int]
    act: Any  # ctypes float array: c_conv.c's `act`
    applies_unary: bool  # the kernel applies the merged unary op (else the caller does, after it)
    # per input layout and thread count (`_per_layout`): the kernel's sizes array, the result's shape and
    # strides, or None where such an input does not run here
    calls: dict = field(default_factory=dict, compare=False, repr=False)

    def fits(self, x: torch.Tensor) -> bool:
        """Whether a call on `x` runs here: a float32 channels-last CPU tensor of the weight's
        channels, not empty."""
        return x.dtype is torch.float32 and x.is_cpu and self._lays_out(x)

    def _lays_out(self, x: torch.Tensor) -> bool:
        """The part of `fits` that x's shape and strides decide."""
        return (x.dim() == 4 and x.shape[1] == self.groups * self.in_channels and x.numel() > 0
                and x.is_contiguous(memory_format=torch.channels_last))

    def result_size(self, x: torch.Tensor) -> tuple[int, int]:
        (kh, kw), (sh, sw), (dh, dw) = self.kernel, self.strides, self.dilations
        top, left, bottom, right = self.pads
        return ((x.shape[2] + top + bottom - dh * (kh - 1) - 1) // sh + 1,
                (x.shape[3] + left + right - dw * (kw - 1) - 1) // sw + 1)

    def __call__(self, x: torch.Tensor, bias: torch.Tensor | None, other: torch.Tensor | None) -> torch.Tensor | None:
        """The convolution of `x` plus `bias`, plus `other` (the merged add's operand: the result's
        shape, channels-last) and the unary op, as a channels-last tensor; None where this call cannot
        run here (an input it does not `fit`, a result of no pixels, an operand in another layout, the
        kernel's scratch not allocated). What a call derives from its input's layout and the thread
        count is kept per layout (`_per_layout`)."""
        if x.dtype is not torch.float32 or not x.is_cpu:
            return None
        call = _per_layout(self.calls, x, self._call)
        if call is None:
            return None
        sizes, shape, strides = call
        if bias is not None and not (bias.dtype is torch.float32 and bias.is_contiguous() and bias.numel() == shape[1]):
            return None
        if other is not None and not (other.dtype is torch.float32 and other.shape == shape
                                      and other.is_contiguous(memory_format=torch.channels_last)):
            return None
        y = torch.empty_strided(shape, strides, dtype=torch.float32)
        failed = self.fn(x.data_ptr(), self.weight.data_ptr(), None if bias is None else bias.data_ptr(),
                         None if other is None else other.data_ptr(), y.data_ptr(), sizes, self.act)
        if failed:
            return None
        if self.applies_unary:  # (else the caller's op changes y after it: no run replays this call alone)
            _note(self.fn, x, self.weight, bias, other, y, sizes, self.act)
        return y

    def _call(self, x: torch.Tensor, threads: int) -> tuple[Any, tuple[int, ...], tuple[int, ...]] | None:
        """For input `x` on `threads` (the count the executor's gate gave the convolution): c_conv.c's
        `q`, the result's shape and its channels-last strides; None where x does not lay out as the
        kernel reads it or the result has no pixels."""
        if not self._lays_out(x):
            return None
        oh, ow = self.result_size(x)
        if oh <= 0 or ow <= 0:
            return None
        n, h, w = x.shape[0], x.shape[2], x.shape[3]
        (kh, kw), (sh, sw), (dh, dw) = self.kernel, self.strides, self.dilations
        sizes = (ctypes.c_int64 * 18)(n, h, w, self.groups, self.in_channels, self.out_channels, self.padded,
                                      kh, kw, sh, sw, self.pads[0], self.pads[1], dh, dw, oh, ow, threads)
        out = self.groups * self.out_channels
        return sizes, (n, out, oh, ow), _channels_last_strides(n, out, oh, ow)


@dataclass(frozen=True, eq=False)
class CPatchConv:
    """An ungrouped convolution whose windows tile the image (strides = kernel, no pads, no dilation:
    a vision transformer's patch embedding), ready for c_conv.c's `sdc_conv_patches_f32`, which reads
    an NCHW image and writes an NCHW result. oneDNN took 31 us for ViT's 3x3x32x32 -> 32 channels of
    8x8 patches, sdc's patches-as-rows product in torch 26 us (half of it the copy into rows)."""

    fn: Callable[..., int]
    weight: torch.Tensor  # [C * KH * KW][OP], zeros past O
    in_channels: int
    out_channels: int
    padded: int  # OP
    kernel: tuple[int, int]
    act: Any
    applies_unary: bool

    def fits(self, x: torch.Tensor) -> bool:
        """Whether a call on `x` runs here: a float32 contiguous (NCHW) CPU tensor of the weight's
        channels, holding at least one whole window, and at most `PATCH_MAX_MACS` multiply-adds of work
        (past that oneDNN's fixed cost no longer matters and its JIT kernels were up to 1.2x faster)."""
        if not (x.dtype is torch.float32 and x.is_cpu and x.dim() == 4
                and x.shape[1] == self.in_channels and x.shape[0] > 0 and x.shape[2] >= self.kernel[0]
                and x.shape[3] >= self.kernel[1] and x.is_contiguous()):
            return False
        patches = x.shape[0] * (x.shape[2] // self.kernel[0]) * (x.shape[3] // self.kernel[1])
        return patches * self.weight.shape[0] * self.out_channels <= PATCH_MAX_MACS

    def __call__(self, x: torch.Tensor, bias: torch.Tensor | None, other: torch.Tensor | None) -> torch.Tensor | None:
        """The convolution of `x` plus `bias` and the unary op, NCHW; None where this call cannot run
        here (an input it does not `fit`, a merged add, a bias of another dtype or size, scratch not
        allocated)."""
        (kh, kw), o = self.kernel, self.out_channels
        if other is not None or not self.fits(x) or (bias is not None and not (
                bias.dtype == torch.float32 and bias.is_contiguous() and bias.numel() == o)):
            return None
        n, c, h, w = x.shape
        oh, ow = h // kh, w // kw
        y = torch.empty((n, o, oh, ow), dtype=torch.float32)
        sizes = (ctypes.c_int64 * 11)(n, c, h, w, o, self.padded, kh, kw, oh, ow, torch.get_num_threads())
        failed = self.fn(x.data_ptr(), self.weight.data_ptr(), None if bias is None else bias.data_ptr(), None,
                         y.data_ptr(), sizes, self.act)
        if failed:
            return None
        if self.applies_unary:  # (as CConv's)
            _note(self.fn, x, self.weight, bias, None, y, sizes, self.act)
        return y


def conv_fits(shape: tuple[int, ...], dtype: str, attrs: dict) -> bool:
    """Whether `prepare` takes a convolution of a weight of `shape` and sdc `dtype` with the op's
    `attrs` (strides, pads, dilations, groups), from those alone: the planner's choice of this
    library for it (sdc/runtime/kernel_choice.py) and `prepare`'s own test."""
    if len(shape) != 4 or dtype != "f32":
        return False
    groups = int(attrs["groups"])
    out_total, in_per_group, kh, kw = (int(d) for d in shape)
    window = _window(attrs)
    if (groups == 1 and window == ((kh, kw), (1, 1), (0, 0, 0, 0)) and min(out_total, in_per_group) >= 1
            and kh * kw != 1):
        return True  # windows that tile the image (`_prepare_patches`)
    if window is None or groups < 1 or out_total % groups or min(out_total, in_per_group, kh, kw) < 1:
        return False
    depthwise = in_per_group == 1 and out_total == groups
    return not (depthwise and groups < DEPTHWISE_MIN_CHANNELS)


def pool_fits(attrs: dict) -> bool:
    """Whether `pool_kernel` has a C form for a pooling of these attributes (a 2-d window)."""
    kernel = [int(k) for k in attrs["kernel"]]
    return len(kernel) == 2 and min(kernel) >= 1 and _window(attrs) is not None


def lrn_fits(attrs: dict) -> bool:
    return int(attrs["size"]) >= 1


def resize_fits(attrs: dict) -> bool:
    """Whether `resize_kernel` has a C form for a resize of these attributes (linear, of the spatial dims)."""
    return not (attrs.get("mode") != "linear" or attrs.get("antialias") or attrs.get("roi")
                or attrs.get("coordinate_transformation_mode") == "tf_crop_and_resize"
                or [int(ax) for ax in attrs.get("axes", ())] not in ([2, 3], [-2, -1]))


def prepare(weight: torch.Tensor, attrs: dict, unary: str | None,
            unary_attrs: dict) -> CConv | CPatchConv | None:
    """The C convolution of `weight` [O, I/groups, KH, KW] with the op's decoded `attrs` (strides,
    pads, dilations, groups) and merged unary op, or None where none applies (module docstring). A
    unary op the kernel has no form of (sigmoid, tanh) is left to the caller (`applies_unary`)."""
    if weight.device.type != "cpu" or weight.dtype != torch.float32 or not conv_fits(tuple(weight.shape), "f32", attrs):
        return None
    groups = int(attrs["groups"])
    out_total, in_per_group, kh, kw = (int(d) for d in weight.shape)
    window = _window(attrs)
    pointwise = groups == 1 and kh == kw == 1 and window == ((1, 1), (1, 1), (0, 0, 0, 0))
    if groups == 1 and not pointwise:
        patches = _prepare_patches(weight, window, unary, unary_attrs)
        if patches is not None:
            return patches
    if window is None or groups < 1 or out_total % groups or min(out_total, in_per_group, kh, kw) < 1:
        return None
    depthwise = in_per_group == 1 and out_total == groups
    if depthwise and groups < DEPTHWISE_MIN_CHANNELS:
        return None
    act = activation(unary, unary_attrs)
    applies_unary = act is not None
    lib = library()
    if lib is None:
        return None
    strides, dilations, pads = window
    out_per_group = out_total // groups
    w = weight.detach()
    if depthwise:
        packed, padded, fn = w.reshape(groups, kh * kw).t().contiguous(), 1, lib.sdc_conv_depthwise_f32
        shape = (groups, 1, 1)  # G, CI, CO as c_conv.c reads them (its depthwise takes C from G)
    else:
        padded = -(-out_per_group // LANES) * LANES
        packed = torch.zeros(groups, kh, kw, in_per_group, padded, dtype=torch.float32)
        packed[..., :out_per_group] = w.reshape(groups, out_per_group, in_per_group, kh, kw).permute(0, 3, 4, 2, 1)
        # in chunks of columns as a tile reads them, each chunk one run of memory (c_conv.c's layout)
        flat, chunk = packed.reshape(groups, kh * kw * in_per_group, padded), lib.sdc_conv_chunk_columns()
        packed = torch.cat([flat[:, :, c0:c0 + chunk].reshape(groups, -1) for c0 in range(0, padded, chunk)], dim=1)
        fn = lib.sdc_conv_grouped_f32
        shape = (groups, in_per_group, out_per_group)
    return CConv(fn, packed, *shape, padded, (kh, kw), strides, pads, dilations,
                 (ctypes.c_float * 5)(*(act or activation(None, {}))), applies_unary)


def _prepare_patches(weight: torch.Tensor, window: tuple | None, unary: str | None,
                     unary_attrs: dict) -> CPatchConv | None:
    """`prepare` for an ungrouped `weight` (its `_window`) whose windows tile the image, or None."""
    out_channels, in_channels, kh, kw = (int(d) for d in weight.shape)
    if (window is None or window != ((kh, kw), (1, 1), (0, 0, 0, 0)) or min(out_channels, in_channels) < 1
            or kh * kw == 1):  # (a 1x1 convolution is a matrix product: reference_kernels.packed_conv)
        return None
    lib = library()
    if lib is None:
        return None
    act = activation(unary, unary_attrs)
    padded = -(-out_channels // LANES) * LANES
    packed = torch.zeros(in_channels * kh * kw, padded, dtype=torch.float32)
    packed[:, :out_channels] = weight.detach().reshape(out_channels, -1).t()
    return CPatchConv(lib.sdc_conv_patches_f32, packed, in_channels, out_channels, padded, (kh, kw),
                      (ctypes.c_float * 5)(*(act or activation(None, {}))), act is not None)


def block_transpose_kernel(a: int, b: int) -> Callable[[torch.Tensor], torch.Tensor | None]:
    """The channel shuffle of a channels-last float32 [N, C, H, W] (its C = a * b split into [a, b],
    transposed and joined) in channels-last, as a function of the tensor; it gives None where the C
    kernel does not take the tensor. Made when a plan's kernel is (`_lazy`)."""
    transpose = _lazy("sdc_block_transpose_f32")

    def run(data: torch.Tensor) -> torch.Tensor | None:
        fn = transpose()
        if fn is None or data.dtype is not torch.float32 or not data.is_cpu or data.numel() == 0:
            return None
        n, c, h, w = data.shape
        return _block_transpose(fn, data, n * h * w, a, b)

    return run


def channels_last_kernel() -> Callable[[torch.Tensor], torch.Tensor | None]:
    """A contiguous (NCHW) float32 CPU image of 2-4 channels (an RGB input) made channels-last in one
    pass of small transposes (`sdc_block_transpose_f32`, the channels interleaved in registers), as a
    function of the image: 29 us for 3x224x224 where torch's permuted copy took 89. It gives None
    where this does not apply (fewer than `TO_CHANNELS_LAST_MIN` elements: torch's copy is faster
    than the call's fixed cost)."""
    transpose = _lazy("sdc_block_transpose_f32")

    def run(x: torch.Tensor) -> torch.Tensor | None:
        if (x.dtype is not torch.float32 or not x.is_cpu or x.dim() != 4 or not 2 <= x.shape[1] <= 4
                or not x.is_contiguous() or x.numel() < TO_CHANNELS_LAST_MIN):
            return None
        fn = transpose()
        if fn is None:
            return None
        n, c, h, w = x.shape
        return _block_transpose(fn, x, n, c, h * w)

    return run


def _block_transpose(fn: Callable[..., int], x: torch.Tensor, p: int, a: int, b: int) -> torch.Tensor:
    """`sdc_block_transpose_f32` (`fn`) of `x` as [p][a][b] into a new channels-last tensor of x's
    logical shape [N, C, H, W]."""
    n, c, h, w = x.shape
    out = torch.empty_strided((n, c, h, w), _channels_last_strides(n, c, h, w), dtype=torch.float32)
    threads = torch.get_num_threads()
    fn(x.data_ptr(), out.data_ptr(), p, a, b, threads)
    if _recording_now():
        _note(library().sdc_block_transpose_call, x, None, None, None, out, (ctypes.c_int64 * 4)(p, a, b, threads), None)
    return out


def counting(fallback: Callable[..., Any], fell_back: Callable[[str], None] | None,
             kernel: str = "torch") -> Callable[..., Any]:
    """`fallback` (what a kernel of this library runs where it does not take a call), calling
    `fell_back(kernel)` first on each call: the executor's count of the step's fallbacks
    (sdc/runtime/counters.py). `fallback` itself without a counter."""
    if fell_back is None:
        return fallback

    def counted(*args: Any) -> Any:
        fell_back(kernel)
        return fallback(*args)

    return counted


def scale_channels_kernel(scale: int,
                          fell_back: Callable[[], None] | None = None) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """`mul` of a float32 channels-last CPU [N, C, H, W] by a [N or 1, C, 1, 1] (operand `scale`: a
    squeeze-excite block's scaling) in C, one pass over the rows, the result channels-last as torch's;
    any other operands through torch.mul. The same products as torch's, bit for bit. (As a C kernel it
    joins the executor's runs of them, sdc/runtime/c_runs.py: in the segmentation model its 9 blocks
    had cut the backbone into 10 runs.)"""
    fn = _lazy("sdc_scale_channels_f32")
    mul = counting(torch.mul, fell_back)

    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        x, s = (b, a) if scale == 0 else (a, b)
        kernel = fn()
        if (kernel is None or x.dtype is not torch.float32 or s.dtype is not torch.float32 or not x.is_cpu
                or not s.is_cpu or x.dim() != 4 or s.dim() != 4 or x.numel() == 0
                or not x.is_contiguous(memory_format=torch.channels_last)):
            return mul(a, b)
        n, c, h, w = x.shape
        if (s.shape[1] != c or s.shape[2] != 1 or s.shape[3] != 1 or s.shape[0] not in (1, n)
                or s.stride(1) != 1 or (s.shape[0] > 1 and s.stride(0) != c)):
            return mul(a, b)
        y = torch.empty_strided(x.shape, x.stride(), dtype=torch.float32)
        q = (ctypes.c_int64 * 5)(n, h * w, c, c if s.shape[0] > 1 else 0, torch.get_num_threads())
        kernel(x.data_ptr(), s.data_ptr(), y.data_ptr(), q)
        _note(library().sdc_scale_channels_call, x, None, None, s, y, q, None)
        return y

    run.c_run_member = True  # (sdc.runtime.c_runs takes it into a run)
    run.sdc_kernel = C_CONV
    return run


CONCAT_PARTS = 4  # the most parts a concat along the channels joins in C (a kernel call's pointers)


def concat_channels_kernel(fell_back: Callable[[], None] | None = None) -> Callable[..., torch.Tensor]:
    """The concat of two to four float32 channels-last CPU [N, C, H, W] along the channels in C (each
    pixel's channels of one, then of the next), the result channels-last as torch's; any other operands
    through torch.cat. As a C kernel it joins the executor's runs (sdc/runtime/c_runs.py): SqueezeNet's
    fire modules end in one, Inception's blocks in one of three or four parts."""
    fn = _lazy("sdc_concat_channels_call")
    cat = counting(torch.cat, fell_back)

    def run(*parts: torch.Tensor) -> torch.Tensor:
        kernel = fn()
        first = parts[0]
        if (kernel is None or not 2 <= len(parts) <= CONCAT_PARTS
                or any(t.dtype is not torch.float32 or not t.is_cpu or t.dim() != 4 or t.shape[0] != first.shape[0]
                       or t.shape[2:] != first.shape[2:] or t.numel() == 0
                       or not t.is_contiguous(memory_format=torch.channels_last) for t in parts)):
            return cat(parts, 1)
        n, _, h, w = first.shape
        channels = [t.shape[1] for t in parts]
        y = torch.empty_strided((n, sum(channels), h, w), _channels_last_strides(n, sum(channels), h, w),
                                dtype=torch.float32)
        q = (ctypes.c_int64 * (3 + len(parts)))(n * h * w, torch.get_num_threads(), len(parts), *channels)
        args = [*parts, *[None] * (CONCAT_PARTS - len(parts))]  # the call's first four pointers
        kernel(*[t.data_ptr() if t is not None else None for t in args], y.data_ptr(), q, None)
        _note(library().sdc_concat_channels_call, *args, y, q, None)
        return y

    run.c_run_member = True  # (sdc.runtime.c_runs takes it into a run)
    run.sdc_kernel = C_CONV
    return run


LRN_POWERS = {0.75: 1, 0.5: 2, 1.0: 3}  # beta -> sdc_lrn_f32's `power` (0: powf)


def lrn_kernel(ref: Callable[..., Any], attrs: dict) -> Callable[..., Any]:
    """Local response normalization of a float32 channels-last CPU [N, C, H, W] in C (each pixel's
    channels in one pass: their squares, the window sums in channel order, the scaling by the betas'
    square roots as the reference takes them), any other operand through `ref` (the reference
    semantics). The reference's elementwise passes took 0.64 ms of AlexNet's first LRN at 2 threads,
    and cut its C runs."""
    size, alpha, beta, bias = int(attrs["size"]), float(attrs["alpha"]), float(attrs["beta"]), float(attrs["bias"])
    fn = _lazy("sdc_lrn_f32")
    if not lrn_fits(attrs) or not c_kernels_enabled():
        return ref
    floats = (ctypes.c_float * 3)(alpha / size, bias, beta)
    calls: dict = {}  # per input layout and thread count: the sizes array, or None

    def call_of(x: torch.Tensor, threads: int):
        if not (x.dim() == 4 and x.numel() > 0 and x.is_contiguous(memory_format=torch.channels_last)):
            return None
        n, c, h, w = x.shape
        before, after = min((size - 1) // 2, c - 1), min(size - 1 - (size - 1) // 2, c - 1)
        return (ctypes.c_int64 * 6)(n * h * w, c, before, after, threads, LRN_POWERS.get(beta, 0))

    def run(env, a, x):
        lrn = fn() if x.dtype is torch.float32 and x.is_cpu else None
        sizes = _per_layout(calls, x, call_of) if lrn is not None else None
        if sizes is None:
            return ref(env, a, x)
        y = torch.empty_strided(x.shape, x.stride(), dtype=torch.float32)
        if lrn(x.data_ptr(), y.data_ptr(), sizes, floats):  # its row buffers not allocated
            return ref(env, a, x)
        if _recording_now():
            _note(library().sdc_lrn_call, x, None, None, None, y, sizes, floats)
        return y

    run.sdc_kernel = C_CONV
    return run


def resize_kernel(ref: Callable[..., Any], attrs: dict) -> Callable[..., Any]:
    """ONNX's linear Resize of the two spatial dims of a float32 channels-last CPU [N, C, H, W] in C (each
    output pixel two rows by two columns of input pixels, over the channels as they lie), its taps those
    the reference computes (`resize_taps`, per input shape and output size); any other resize, or
    operand, through `ref`. torch's interpolate took 64-91 us of the segmentation model's 2.1 ms call
    for its two upsamplings (2 threads), and cut its C runs."""
    from sdc.dialect.ops.indexing import resize_taps

    fn = _lazy("sdc_resize_linear_f32")
    if not resize_fits(attrs) or not c_kernels_enabled():
        return ref
    calls: dict = {}  # per input layout, output size and thread count: (sizes, weights, result shape), or None

    def call_of(x: torch.Tensor, threads: int, out: tuple[int, int]):
        if not (x.dim() == 4 and x.numel() > 0 and min(out) > 0 and x.is_contiguous(memory_format=torch.channels_last)):
            return None
        n, c, h, w = x.shape
        check_alloc(4 * n * c * out[0] * out[1], "the result of a linear resize")  # (before its taps' arrays)
        taps = []
        for i, (out_len, in_len) in enumerate(zip(out, (h, w))):
            scale = attrs["scales"][i] if attrs["scales"] else out_len / in_len
            index, weights, outside = resize_taps(attrs, out_len, in_len, scale, None)
            if outside is not None or index.shape[1] != 2:
                return None
            taps.append((index, weights))
        (ri, rw), (ci, cw) = taps
        sizes = (ctypes.c_int64 * (7 + 2 * (out[0] + out[1])))(n, h, w, c, out[0], out[1], threads,
                                                                   *ri.reshape(-1).tolist(), *ci.reshape(-1).tolist())
        weights = (ctypes.c_float * (2 * (out[0] + out[1])))(*rw.reshape(-1).tolist(), *cw.reshape(-1).tolist())
        return sizes, weights, (n, c, out[0], out[1])

    def run(env, a, x):
        resize = fn() if x.dtype is torch.float32 and x.is_cpu else None
        call = None
        if resize is not None:
            out, threads = tuple(env.dim(d) for d in a["sizes"]), torch.get_num_threads()
            call = kept(calls, (x.shape, x.stride(), threads, out), call_of, x, threads, out)
        if call is None:
            return ref(env, a, x)
        sizes, weights, shape = call
        y = torch.empty_strided(shape, _channels_last_strides(*shape), dtype=torch.float32)
        resize(x.data_ptr(), y.data_ptr(), sizes, weights)
        if _recording_now():
            _note(library().sdc_resize_linear_call, x, None, None, None, y, sizes, weights)
        return y

    run.sdc_kernel = C_CONV
    return run


def global_avg_pool_kernel(ref: Callable[..., Any]) -> Callable[..., Any]:
    """Global average pooling of a float32 channels-last CPU [N, C, H, W] in C (each image's channels
    summed over its pixels in order, several vectors at a time), any other operand through `ref` (the
    reference semantics). torch's mean took 12-16 us on a MobileNet-v3 squeeze-excite block's
    [2, 960, 6, 4] at 2 threads, most of it the call's fixed cost."""
    fn = _lazy("sdc_global_avg_pool_f32")

    def run(env, a, x):
        pool = fn() if x.dtype is torch.float32 and x.is_cpu else None
        if (pool is None or x.dim() != 4 or x.numel() == 0
                or not x.is_contiguous(memory_format=torch.channels_last)):
            return ref(env, a, x)
        n, c, h, w = x.shape
        y = torch.empty_strided((n, c, 1, 1), (c, 1, c, c), dtype=torch.float32)
        threads = torch.get_num_threads()
        pool(x.data_ptr(), y.data_ptr(), n, h * w, c, threads)
        if _recording_now():
            _note(library().sdc_global_avg_pool_call, x, None, None, None, y, (ctypes.c_int64 * 4)(n, h * w, c, threads),
                  None)
        return y

    run.sdc_kernel = C_CONV
    return run


def pool_kernel(name: str, ref: Callable[..., Any], attrs: dict) -> Callable[..., Any]:
    """The kernel of op `name` (max_pool or avg_pool): 2-d pooling of a float32 channels-last CPU
    tensor in C, any other operand through `ref` (the reference semantics). The windows' geometry
    comes from `attrs`, ceil_mode included: max pooling skips the taps past the input (the
    reference's -inf padding); average pooling sums the taps in the input and divides by the taps
    that count (those on the pads too with count_include_pad, never those past the pads), as the
    reference's padded sums and mask do."""
    from sdc.dialect.shapes import window_out

    kernel = [int(k) for k in attrs["kernel"]]
    window = _window(attrs)
    if not pool_fits(attrs) or not c_kernels_enabled():
        return ref
    strides, dilations, pads = window
    ceil_mode = bool(attrs.get("ceil_mode"))
    with_pads = int(bool(attrs.get("count_include_pad")))
    fn = _lazy({"max_pool": "sdc_max_pool_f32", "avg_pool": "sdc_avg_pool_f32"}[name])
    calls: dict = {}  # per input layout and thread count: (sizes array, result shape, strides), or None

    def call_of(x: torch.Tensor, threads: int):
        if not (x.dim() == 4 and x.numel() > 0 and x.is_contiguous(memory_format=torch.channels_last)):
            return None
        n, c, h, w = x.shape
        oh = window_out(h, kernel[0], strides[0], pads[0], pads[2], dilations[0], ceil_mode)
        ow = window_out(w, kernel[1], strides[1], pads[1], pads[3], dilations[1], ceil_mode)
        if oh <= 0 or ow <= 0:
            return None
        return ((ctypes.c_int64 * 21)(n, h, w, c, 1, 1, 1, kernel[0], kernel[1], strides[0], strides[1], pads[0],
                                      pads[1], dilations[0], dilations[1], oh, ow, threads, pads[2], pads[3],
                                      with_pads), (n, c, oh, ow), _channels_last_strides(n, c, oh, ow))

    def run(env, a, x):
        pool = fn() if x.dtype is torch.float32 and x.is_cpu else None
        call = _per_layout(calls, x, call_of) if pool is not None else None
        if call is None:
            return ref(env, a, x)
        sizes, shape, out_strides = call
        y = torch.empty_strided(shape, out_strides, dtype=torch.float32)
        if pool(x.data_ptr(), y.data_ptr(), sizes):  # its tap list not allocated
            return ref(env, a, x)
        if _recording_now():
            _note(getattr(library(), f"sdc_{name}_call"), x, None, None, None, y, sizes, None)
        return y

    run.sdc_kernel = C_CONV
    return run
