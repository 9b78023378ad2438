"""The measured choice between torch's fused cuDNN convolution and the plain one with its epilogue
after it (sdc/runtime/reference_kernels.py `CudnnChoice`, `fused_conv`)."""

from __future__ import annotations

import time

import pytest
import torch

from sdc.runtime.executor import fp32_math
from sdc.runtime.reference_kernels import EPILOGUE, CudnnChoice, fused_conv

ATTRS = {"strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1], "groups": 1}


def _slow(seconds: float):
    def run():
        time.sleep(seconds)
    return run


@pytest.fixture
def tuning(tmp_path, monkeypatch):
    """Timing on (the CPU times with the wall clock, as under the interpreter), cached in tmp_path."""
    monkeypatch.setenv("SDC_AUTOTUNE", "1")
    monkeypatch.setenv("SDC_CUDNN_CHOICE", "1")
    monkeypatch.setenv("SDC_AUTOTUNE_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("fused_s,split_s,expect", [(0.004, 0.0, False), (0.0, 0.004, True)])
def test_the_faster_variant_is_kept_and_cached(tuning, fused_s, split_s, expect):
    x, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    choice = CudnnChoice()
    assert choice.fused(ATTRS, x, w, None, _slow(fused_s), _slow(split_s)) is expect
    assert choice.timed == 1
    # Remembered: not timed again (the runs now would choose the other way).
    assert choice.fused(ATTRS, x, w, None, _slow(split_s), _slow(fused_s)) is expect
    assert choice.timed == 1
    # A new load reads the disk cache instead of timing.
    again = CudnnChoice()
    assert again.fused(ATTRS, x, w, None, _slow(split_s), _slow(fused_s)) is expect
    assert again.timed == 0
    assert list(tuning.glob("cudnn-conv-*.json"))


def test_another_signature_is_timed_on_its_own(tuning):
    choice = CudnnChoice()
    w = torch.randn(4, 3, 3, 3)
    choice.fused(ATTRS, torch.randn(2, 3, 8, 8), w, None, _slow(0.003), _slow(0.0))
    assert choice.fused({**ATTRS, "strides": [2, 2]}, torch.randn(2, 3, 8, 8), w, None, _slow(0.0), _slow(0.003))
    assert choice.timed == 2


@pytest.mark.parametrize("env", [{"SDC_AUTOTUNE": "0", "SDC_CUDNN_CHOICE": "1"}, {"SDC_AUTOTUNE": "1"}])
def test_timing_off_takes_the_fused_call(monkeypatch, env):
    """Off with tuning off, and by default (SDC_CUDNN_CHOICE unset)."""
    monkeypatch.delenv("SDC_CUDNN_CHOICE", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    choice = CudnnChoice()
    assert choice.fused(ATTRS, torch.randn(1, 3, 4, 4), torch.randn(2, 3, 3, 3), None, _slow(0.003), _slow(0.0))
    assert choice.timed == 0


def test_fused_conv_on_cpu_matches_torch():
    """Off cuda the merged convolution is the reference one with its epilogue: conv + bias + other, relu."""
    x, w, b, other = torch.randn(2, 3, 9, 7), torch.randn(5, 3, 3, 3), torch.randn(5), torch.randn(2, 5, 9, 7)

    def ref(env, a, x, w, bias):
        return torch.nn.functional.conv2d(x, w, bias, padding=1)

    kernel = fused_conv(ref, {**ATTRS, EPILOGUE: ["add", "relu"]})
    expected = torch.relu(torch.nn.functional.conv2d(x, w, b, padding=1) + other)
    torch.testing.assert_close(kernel(None, ATTRS, x, w, b, other), expected)
    assert kernel.cudnn_choice.timed == 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_fused_conv_on_cuda_times_once_and_matches(tuning, dtype):
    dev = "cuda"
    x = torch.randn(4, 16, 14, 14, device=dev, dtype=dtype).to(memory_format=torch.channels_last)
    w = torch.randn(16, 16, 3, 3, device=dev, dtype=dtype).to(memory_format=torch.channels_last)
    b, other = torch.randn(16, device=dev, dtype=dtype), torch.randn(4, 16, 14, 14, device=dev, dtype=dtype)

    def ref(env, a, x, w, bias):
        return torch.nn.functional.conv2d(x, w, bias, padding=1)

    kernel = fused_conv(ref, {**ATTRS, EPILOGUE: ["add", "relu"]})
    expected = torch.relu(torch.nn.functional.conv2d(x.double(), w.double(), b.double(), padding=1) + other.double())
    for _ in range(2):
        with fp32_math(False):  # as the executor runs it: f32 convolutions in full f32, not TF32
            got = kernel(None, ATTRS, x, w, b, other)
        tol = 2e-2 if dtype == torch.float16 else 1e-3
        torch.testing.assert_close(got.double(), expected, rtol=tol, atol=tol)
    assert kernel.cudnn_choice.timed == 1
