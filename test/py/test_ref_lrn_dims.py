"""Reference semantics of sdc.lrn (ops/nn.py) and sdc.dim_values (ops/core.py) against loops written from the ONNX spec."""

from __future__ import annotations

import math

import pytest
import torch

from sdc.dialect.opdef import RefEnv, get_op


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 16, 2**40])  # past C: the window clips (no 2^40 pad)
@pytest.mark.parametrize("beta", [0.7, 0.75, 0.5, 1.0])  # 0.75, 0.5 and 1 take square roots, not pow
@pytest.mark.parametrize("channels_last", [False, True])
def test_lrn_matches_the_spec_window(size, beta, channels_last):
    op = get_op("lrn")
    x = torch.randn(2, 7, 4, 5, dtype=torch.float64)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    attrs = op.with_defaults({"size": size, "alpha": 0.3, "beta": beta, "bias": 1.5})
    got = op.ref(RefEnv(), attrs, x)
    want = torch.empty_like(x)
    channels = x.shape[1]
    for c in range(channels):
        lo = max(0, c - (size - 1) // 2)
        hi = min(channels - 1, c + math.ceil((size - 1) / 2))
        window = (x[:, lo:hi + 1] ** 2).sum(dim=1)
        want[:, c] = x[:, c] / (1.5 + 0.3 / size * window) ** beta
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    # the result keeps the operand's memory format (channels-last stays so: no copy for the next op)
    assert got.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)


def test_lrn_on_a_3d_operand():
    op = get_op("lrn")
    x = torch.randn(3, 6, 9, dtype=torch.float64)
    got = op.ref(RefEnv(), op.with_defaults({"size": 3, "alpha": 0.5, "beta": 0.75, "bias": 2.0}), x)
    padded = torch.nn.functional.pad(x * x, [0, 0, 1, 1])
    window = padded[:, :-2] + padded[:, 1:-1] + padded[:, 2:]
    torch.testing.assert_close(got, x / (2.0 + 0.5 / 3 * window) ** 0.75, rtol=1e-12, atol=1e-12)


def test_dim_values_evaluates_symbols():
    op = get_op("dim_values")
    out = op.ref(RefEnv(symbols={"B": 3, "S": 5}), {"dims": ["B", "S*12", 64, "(S+1)//2"]})
    assert out.tolist() == [3, 60, 64, 3] and out.dtype == torch.int64
