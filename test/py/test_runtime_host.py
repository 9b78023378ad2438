"""Host-side runtime details the CUDA path relies on, tested on the CPU.

- `Signature.bind` remembers the input signatures it has checked (most of a CUDA-graph replay's host
  time, and of a small model's call, was that check): a repeated signature of torch tensors or numpy
  arrays, by position or by name, skips the checks with the same symbols, and anything the checks
  could reject still goes through them.
- `fp32_math`: an f32 artifact's torch convolutions and matmuls run in full f32 on cuda (torch's
  default lets cuDNN use TF32), a tf32 one's in TF32, and the caller's settings come back after."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sdc.diagnostics import SdcError
from sdc.runtime.executor import fp32_math
from sdc.runtime.signature import CHECKED_CAPACITY, Signature, TensorInfo, parse_guard

CPU = torch.device("cpu")


def _signature() -> Signature:
    inputs = [TensorInfo("x", "f32", ("B", 8)), TensorInfo("y", "f32", ("B", "N"))]
    return Signature(inputs, [TensorInfo("z", "f32", ("B", 8))], [parse_guard("N <= 16", "N at most 16")])


def test_a_checked_signature_is_bound_from_memory_with_the_same_symbols():
    sig = _signature()
    x, y = torch.randn(3, 8), torch.randn(3, 5)
    first = sig.bind((x, y), {}, CPU)
    assert first.symbols == {"B": 3, "N": 5} and len(sig._checked) == 1
    again = sig.bind((torch.randn(3, 8), torch.randn(3, 5)), {}, CPU)
    assert again.symbols == first.symbols and again.as_torch and len(sig._checked) == 1
    again.symbols["B"] = 99  # the caller's copy: the memory stays right
    assert sig.bind((x, y), {}, CPU).symbols == {"B": 3, "N": 5}


def test_what_the_checks_reject_is_still_rejected_after_a_good_call():
    sig = _signature()
    sig.bind((torch.randn(3, 8), torch.randn(3, 5)), {}, CPU)
    with pytest.raises(SdcError, match="N at most 16"):
        sig.bind((torch.randn(3, 8), torch.randn(3, 17)), {}, CPU)
    with pytest.raises(SdcError, match="has dtype f64, expected f32"):
        sig.bind((torch.randn(3, 8, dtype=torch.float64), torch.randn(3, 5)), {}, CPU)
    with pytest.raises(SdcError, match="expected 2 inputs"):
        sig.bind((torch.randn(3, 8), torch.randn(3, 5), torch.randn(1)), {}, CPU)
    with pytest.raises(SdcError, match=r"dim 0 \(= 4\)|B"):
        sig.bind((torch.randn(3, 8), torch.randn(4, 5)), {}, CPU)
    # broadcast views are checked in full and not remembered
    assert sig.bind((torch.randn(1, 8).expand(3, 8), torch.randn(3, 5)), {}, CPU).symbols == {"B": 3, "N": 5}
    assert len(sig._checked) == 1


def test_numpy_inputs_by_name_are_remembered_and_still_checked():
    sig = _signature()
    x, y = np.random.rand(3, 8).astype(np.float32), np.random.rand(3, 5).astype(np.float32)
    first = sig.bind((), {"y": y, "x": x}, CPU)
    assert first.symbols == {"B": 3, "N": 5} and first.as_torch is False and len(sig._checked) == 1
    again = sig.bind((x,), {"y": y}, CPU)  # by position and by name: the same signature
    assert again.symbols == first.symbols and len(sig._checked) == 1
    assert np.array_equal(again.tensors[1].numpy(), y)
    with pytest.raises(SdcError, match="has dtype f64, expected f32"):
        sig.bind((), {"x": x, "y": y.astype(np.float64)}, CPU)
    with pytest.raises(SdcError, match="N at most 16"):
        sig.bind((), {"x": x, "y": np.ones((3, 17), np.float32)}, CPU)
    with pytest.raises(SdcError, match="unknown input 'z'"):
        sig.bind((), {"x": x, "y": y, "z": y}, CPU)
    # a big-endian or read-only array of a remembered signature is still made a native, writable tensor
    big = y.astype(">f4")
    for _ in range(2):
        assert np.array_equal(sig.bind((x, big), {}, CPU).tensors[1].numpy(), y)
    y.flags.writeable = False
    for _ in range(2):
        t = sig.bind((x, y), {}, CPU).tensors[1]
        assert np.array_equal(t.numpy(), y) and t.numpy().flags.writeable
    # mixing numpy and torch gives torch results, remembered as a signature of its own
    assert sig.bind((torch.from_numpy(x), y), {}, CPU).as_torch and sig.bind((torch.from_numpy(x), y), {}, CPU).as_torch


def test_the_memory_is_bounded():
    sig = _signature()
    for n in range(1, CHECKED_CAPACITY + 10):
        sig.bind((torch.randn(n, 8), torch.randn(n, 1)), {}, CPU)
    assert len(sig._checked) == CHECKED_CAPACITY


def test_fp32_math_sets_torch_fp32_precision_and_restores_it():
    conv, matmul = torch.backends.cudnn.conv, torch.backends.cuda.matmul
    before = conv.fp32_precision, matmul.fp32_precision
    with fp32_math(tf32=False):
        assert (conv.fp32_precision, matmul.fp32_precision) == ("ieee", "ieee")
    assert (conv.fp32_precision, matmul.fp32_precision) == before
    with pytest.raises(RuntimeError, match="inside"):
        with fp32_math(tf32=True):
            assert (conv.fp32_precision, matmul.fp32_precision) == ("tf32", "tf32")
            raise RuntimeError("inside")
    assert (conv.fp32_precision, matmul.fp32_precision) == before


@pytest.mark.parametrize("value,want", [("1", True), (" On ", True), ("yes", True), ("0", False), ("OFF", False),
                                        ("no", False), ("", None), (None, None)])
def test_an_on_off_setting_is_read_in_one_way(monkeypatch, value, want):
    from sdc.runtime.switches import env_switch

    if value is None:
        monkeypatch.delenv("SDC_SOME_SWITCH", raising=False)
    else:
        monkeypatch.setenv("SDC_SOME_SWITCH", value)
    assert env_switch("SDC_SOME_SWITCH") is want


def test_an_on_off_setting_of_another_value_is_one_error(monkeypatch):
    from sdc.runtime.switches import env_switch

    monkeypatch.setenv("SDC_SOME_SWITCH", "2")
    with pytest.raises(SdcError, match=r"^SDC_SOME_SWITCH='2' is not one of 1, on, 0, off$"):
        env_switch("SDC_SOME_SWITCH")
