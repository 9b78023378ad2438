"""sdc.random_uniform, the counter-based RNG random ops are built from (sdc/dialect/ops/random.py):
bit-equal to Triton's `tl.rand` (so a generated kernel can draw the same numbers), a pure function
of (seed, offset, element index), uniform, and a dropout keep rate that matches 1 - p."""

from __future__ import annotations

import json
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


# ---------------------------------------------------------------- the Triton lowering (target cuda)

_DROPOUT = """
func.func @main(%x: tensor<SHAPExDT> {sdc.name = "x"}, %seed: tensor<i64> {sdc.name = "seed"},
                %offset: tensor<i64> {sdc.name = "offset"}) -> (tensor<SHAPExDT> {sdc.name = "y"}) {
  %u = "sdc.random_uniform"(%seed, %offset) {dtype = DT, shape = [DIMS]}
      : (tensor<i64>, tensor<i64>) -> tensor<SHAPExDT>
  %p = "sdc.constant"() {value = dense<P> : tensor<DT>} : () -> tensor<DT>
  %keep = "sdc.ge"(%u, %p) : (tensor<SHAPExDT>, tensor<DT>) -> tensor<SHAPExi1>
  %mask = "sdc.cast"(%keep) {dtype = DT} : (tensor<SHAPExi1>) -> tensor<SHAPExDT>
  %kept = "sdc.mul"(%x, %mask) : (tensor<SHAPExDT>, tensor<SHAPExDT>) -> tensor<SHAPExDT>
  %scale = "sdc.constant"() {value = dense<SCALE> : tensor<DT>} : () -> tensor<DT>
  %y = "sdc.mul"(%kept, %scale) : (tensor<SHAPExDT>, tensor<DT>) -> tensor<SHAPExDT>
  return %y : tensor<SHAPExDT>
}
"""

_UNIFORM_PLUS_ROW = """
func.func @main(%x: tensor<5x13xf32> {sdc.name = "x"}, %seed: tensor<i64> {sdc.name = "seed"},
                %offset: tensor<i64> {sdc.name = "offset"}) -> (tensor<5x13xf32> {sdc.name = "y"}) {
  %u = "sdc.random_uniform"(%seed, %offset) {dtype = f32, shape = [13]} : (tensor<i64>, tensor<i64>) -> tensor<13xf32>
  %y = "sdc.add"(%x, %u) : (tensor<5x13xf32>, tensor<13xf32>) -> tensor<5x13xf32>
  return %y : tensor<5x13xf32>
}
"""


def _dropout_text(shape: list[int], dtype: str, p: float) -> str:
    return (_DROPOUT.replace("SHAPE", "x".join(map(str, shape))).replace("DIMS", ", ".join(map(str, shape)))
            .replace("DT", dtype).replace("SCALE", repr(1 / (1 - p))).replace("P", repr(p)))


def _seed_offset() -> tuple[torch.Tensor, torch.Tensor]:
    """A fresh 63-bit seed and an offset a few counters short of 2^32: the draws cross the high word."""
    rng = np.random.default_rng()
    return torch.tensor(int(rng.integers(1, 2**63))), torch.tensor(2**32 - int(rng.integers(1, 64)))


# bf16 with p = 0.5: the scale 2 is exact, so the interpreter's truncating bf16 store (triton 3.9) rounds nothing
@pytest.mark.parametrize("shape,dtype,p", [([7, 13], "f32", 0.25), ([3, 5, 11], "f32", 0.25), ([37, 41], "f32", 0.25),
                                           ([37, 41], "bf16", 0.5)])
def test_dropout_group_is_one_triton_kernel_bit_equal_to_the_reference(shape, dtype, p, tmp_path, monkeypatch):
    """Target cuda, run on the CPU under the Triton interpreter: the whole dropout (draw, compare, mask,
    scale) is one generated elementwise kernel, and it draws exactly the reference's numbers, at odd
    sizes (masked tails; 37 x 41 spans two programs), in bf16 (draws rounded to nearest even, as the
    reference's cast) and across the counter's 2^32 boundary."""
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from sdc.compiler import compile_module
    from sdc.interpreter import interpret
    from sdc.ir_text import parse_module
    from sdc.options import CompileOptions

    text = _dropout_text(shape, dtype, p)
    out = tmp_path / "dropout.sdc"
    exe = compile_module(parse_module(text), {}, CompileOptions(target="cuda"), output=out, device="cpu")
    plan = json.loads((out / "plan.json").read_text())
    (launch,) = [s for s in plan["ranks"][0]["steps"] if s["kind"] == "launch"]
    kernel = launch["kernel"]
    assert kernel["backend"] == "triton" and kernel["template"] == "elementwise"
    assert [e["op"] for e in kernel["ops"]] == ["random_uniform", "ge", "cast", "mul", "mul"]
    assert "_philox_uniform(" in (out / kernel["source"]).read_text()
    for _ in range(2):  # a new seed is a new input value of the same kernel
        seed, offset = _seed_offset()
        x = torch.randn(shape).to(getattr(torch, {"f32": "float32", "bf16": "bfloat16"}[dtype]))
        (got,) = exe(x, seed, offset)
        (want,) = interpret(text, [x, seed, offset], as_torch=True)
        assert got.dtype == want.dtype and torch.equal(got, want)
        assert abs((got != 0).float().mean() - (1 - p)) < 0.2  # about 1 - p kept (x is never 0)


def test_a_broadcast_draw_keeps_the_reference_backend(tmp_path, monkeypatch):
    """A draw of [13] broadcast over [5, 13]: its flat index is not the kernel's, so the group stays on
    the reference backend (and still computes the reference's numbers)."""
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from sdc.codegen.triton import LoweringError, TritonRenderer, lower_group
    from sdc.compiler import compile_module
    from sdc.interpreter import interpret
    from sdc.ir_text import parse_module
    from sdc.options import CompileOptions

    out = tmp_path / "broadcast.sdc"
    exe = compile_module(parse_module(_UNIFORM_PLUS_ROW), {}, CompileOptions(target="cuda"), output=out, device="cpu")
    rank = json.loads((out / "plan.json").read_text())["ranks"][0]
    (launch,) = [s for s in rank["steps"] if s["kind"] == "launch"]
    assert launch["kernel"]["backend"] == "reference"
    with pytest.raises(LoweringError, match=r"'sdc.random_uniform' broadcast over the kernel's domain"):
        lower_group(launch["kernel"]["ops"], launch["inputs"], launch["outputs"], rank["values"],
                    TritonRenderer.elementwise_ops())
    seed, offset = _seed_offset()
    x = torch.randn(5, 13)
    assert torch.equal(exe(x, seed, offset)[0], interpret(_UNIFORM_PLUS_ROW, [x, seed, offset], as_torch=True)[0])
