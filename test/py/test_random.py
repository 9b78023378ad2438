"""sdc.random_uniform, the counter-based RNG random ops are built from (sdc/dialect/ops/random.py):
bit-equal to Triton's `tl.rand` (so a generated kernel can draw the same numbers), a pure function
of (seed, offset, element index), uniform, and a dropout keep rate that matches 1 - p."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from sdc.dialect.opdef import RefEnv, get_op
from sdc.dialect.ops.random import philox_bits, philox_uniform


def _op(seed: int, offset: int, shape: list, dtype: str = "f32") -> torch.Tensor:
    op = get_op("random_uniform")
    return op.ref(RefEnv(), op.with_defaults({"shape": shape, "dtype": dtype}), torch.tensor(seed),
                  torch.tensor(offset))


def test_philox_known_answer():
    """Philox-4x32-10's published test vector (Random123 kat_vectors: counter 0, key 0; first word)."""
    assert int(philox_bits(0, np.array([0], dtype=np.uint64))[0]) == 0x6627E8D5


_CASES = [(0, 0), (123456789012345, 17), (7, 2**32 - 5)]
_TRITON_DRAW = """
import sys, numpy as np, torch, triton, triton.language as tl

@triton.jit
def draw(out, seed, offset, n: tl.constexpr):
    i = tl.arange(0, n)
    tl.store(out + i, tl.rand(seed, i.to(tl.int64) + offset))

rows = []
for seed, offset in %r:
    got = torch.empty(128)
    draw[(1,)](got, seed, offset, n=128)
    rows.append(got.numpy())
np.save(sys.argv[1], np.stack(rows))
""" % (_CASES,)


def test_matches_triton_rand(tmp_path):
    """Under the Triton interpreter, `tl.rand(seed, offset + i)` on int64 offsets gives exactly the
    reference's bits, across the 2^32 counter boundary too. A fresh process: triton decorates
    `tl.rand` when it is imported, and reads TRITON_INTERPRET then."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"}
    out = tmp_path / "draws.npy"
    run = subprocess.run([sys.executable, "-c", _TRITON_DRAW, str(out)], capture_output=True, text=True, timeout=120,
                         env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    for row, (seed, offset) in zip(np.load(out), _CASES):
        np.testing.assert_array_equal(row, philox_uniform(seed, offset, 128), err_msg=f"seed {seed}, offset {offset}")


def test_a_pure_function_of_seed_offset_and_index():
    u = _op(3, 10, [4, 5])
    assert torch.equal(u, _op(3, 10, [4, 5]))  # the same operands, the same tensor
    assert torch.equal(u.reshape(-1)[1:], _op(3, 11, [19]))  # element i draws counter offset + i
    assert not torch.equal(u, _op(4, 10, [4, 5]))  # another seed, other numbers
    assert _op(3, 10, [4, 5], "bf16").dtype == torch.bfloat16


def test_uniform_statistics_and_dropout_keep_rate():
    """100k draws: mean 1/2 and variance 1/12 (within ~5 sigma), every value in [0, 1), and a keep
    rate `u >= p` of 1 - p, per seed."""
    n = 100_000
    for seed in (0, 99):
        u = philox_uniform(seed, 5, n).astype(np.float64)
        assert u.min() >= 0.0 and u.max() < 1.0
        assert abs(u.mean() - 0.5) < 5 * np.sqrt(1 / 12 / n)
        assert abs(u.var() - 1 / 12) < 0.002
        for p in (0.1, 0.5, 0.9):
            keep = (u >= p).mean()
            assert abs(keep - (1 - p)) < 5 * np.sqrt(p * (1 - p) / n), (seed, p, keep)
        counts = np.histogram(u, bins=16, range=(0, 1))[0]
        assert counts.min() > n / 16 * 0.95 and counts.max() < n / 16 * 1.05


def test_dropout_over_run_time_dims_is_one_error():
    """The counters a random op draws are counted at compile time, so its shape must be static."""
    from sdc.diagnostics import SdcError
    from sdc.frontend.torch import import_torch

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)).train()
    batch = torch.export.Dim("batch", min=2, max=64)
    with pytest.raises(SdcError, match=r"a random op over run-time dims \[batch, 4\] is unsupported"):
        import_torch(model, (torch.randn(3, 4),), dynamic_shapes=({0: batch},))
