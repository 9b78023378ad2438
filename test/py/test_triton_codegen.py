"""Generated Triton kernels (sdc/codegen/triton, sdc/runtime/launch/triton.py).

On the CPU every kernel template runs under the Triton interpreter (TRITON_INTERPRET=1, set before
any kernel source is executed: triton reads it when `@triton.jit` decorates) on small shapes with
odd sizes (masks) and a dynamic batch, and is checked against the reference semantics
(`sdc.interpret`) on fresh random inputs, per-dtype tolerances. The GPU test (marked, skipped
without CUDA) runs the same end-to-end model on the device.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import sdc.runtime
from sdc.codegen.triton import TritonRenderer
from sdc.codegen.triton.renderer import contiguous_offsets
from sdc.diagnostics import SdcError
from sdc.interpreter import interpret
from triton_support import (TORCH_DTYPE, compile_cuda, interpreter, launches, record_constexprs,  # noqa: F401
                            rng, triton_launches)

# rows past the end of a multi-row program compute on masked-out zeros (log(0), inf * 0) and are never
# stored: numpy, which runs the interpreter, warns about them
pytestmark = pytest.mark.filterwarnings("ignore:(divide by zero|invalid value) encountered:RuntimeWarning")

TOLERANCE = {"f32": (1e-5, 1e-5), "f16": (5e-3, 5e-3), "bf16": (4e-2, 4e-2)}  # (rtol, atol)


def check(text: str, exe, inputs: list[torch.Tensor], dtype: str) -> None:
    got = exe(*inputs)
    want = interpret(text, inputs, as_torch=True)
    rtol, atol = TOLERANCE[dtype]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g.float(), w.float(), rtol=rtol, atol=atol)


def randn(shape, dtype: str, rng: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=rng).mul(1.5).to(TORCH_DTYPE[dtype])


# ---------------------------------------------------------------- elementwise


ELEMENTWISE = """
func.func @main(%x: tensor<?x3x5xDT> {sdc.name = "x", sdc.dims = #sdc.dims<["B", 3, 5]>},
                %y: tensor<5xDT> {sdc.name = "y"},
                %z: tensor<?x1x5xDT> {sdc.name = "z", sdc.dims = #sdc.dims<["B", 1, 5]>})
    -> (tensor<?x3x5xf32> {sdc.name = "out"}) {
  %0 = "sdc.mul"(%x, %y) : (tensor<?x3x5xDT>, tensor<5xDT>) -> tensor<?x3x5xDT>
  %1 = "sdc.add"(%0, %z) : (tensor<?x3x5xDT>, tensor<?x1x5xDT>) -> tensor<?x3x5xDT>
  %2 = "sdc.gelu"(%1) {approximate = "tanh"} : (tensor<?x3x5xDT>) -> tensor<?x3x5xDT>
  %3 = "sdc.gt"(%x, %y) : (tensor<?x3x5xDT>, tensor<5xDT>) -> tensor<?x3x5xi1>
  %4 = "sdc.sigmoid"(%1) : (tensor<?x3x5xDT>) -> tensor<?x3x5xDT>
  %5 = "sdc.where"(%3, %2, %4) : (tensor<?x3x5xi1>, tensor<?x3x5xDT>, tensor<?x3x5xDT>) -> tensor<?x3x5xDT>
  %6 = "sdc.clip"(%5) {min = -0.5 : f64, max = 2.0 : f64} : (tensor<?x3x5xDT>) -> tensor<?x3x5xDT>
  %7 = "sdc.tanh"(%6) : (tensor<?x3x5xDT>) -> tensor<?x3x5xDT>
  %8 = "sdc.erf"(%7) : (tensor<?x3x5xDT>) -> tensor<?x3x5xDT>
  %9 = "sdc.cast"(%8) {dtype = f32} : (tensor<?x3x5xDT>) -> tensor<?x3x5xf32>
  return %9 : tensor<?x3x5xf32>
}
"""


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_elementwise_group_broadcasts_over_a_dynamic_batch(dtype, tmp_path, rng):
    text = ELEMENTWISE.replace("DT", dtype)
    exe = compile_cuda(text, tmp_path / "ew.sdc")
    for kernel in [s["kernel"] for s in launches(tmp_path / "ew.sdc")]:  # sdc-fuse makes two groups of it
        assert kernel["backend"] == "triton" and kernel["template"] == "elementwise"
        assert kernel["domain"] == [None, 3, 5] and kernel["grid"] == ["(d0 * d1 * d2 + 1023) // 1024"]
        skips = any(a["map"] == [0, None, 2] for a in kernel["args"])  # z [B, 1, 5] skips a dim: no flat offsets
        assert ("contiguous_flag" in kernel) != skips
        assert (tmp_path / "ew.sdc" / kernel["source"]).is_file()
    for batch in (1, 7):  # 15 and 105 elements: masked tails
        check(text, exe, [randn((batch, 3, 5), dtype, rng), randn((5,), dtype, rng),
                          randn((batch, 1, 5), dtype, rng)], dtype)


DENSE = """
func.func @main(%x: tensor<?x6x5xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["B", 6, 5]>},
                %b: tensor<5xf32> {sdc.name = "b"}, %s: tensor<?x6x1xf32> {sdc.name = "s", sdc.dims = #sdc.dims<["B", 6, 1]>},
                %t: tensor<6x5xf32> {sdc.name = "t"}) -> (tensor<?x6x5xf32> {sdc.name = "out"}) {
  %0 = "sdc.add"(%x, %b) : (tensor<?x6x5xf32>, tensor<5xf32>) -> tensor<?x6x5xf32>
  %1 = "sdc.mul"(%0, %s) : (tensor<?x6x5xf32>, tensor<?x6x1xf32>) -> tensor<?x6x5xf32>
  %2 = "sdc.sub"(%1, %t) : (tensor<?x6x5xf32>, tensor<6x5xf32>) -> tensor<?x6x5xf32>
  %3 = "sdc.silu"(%2) : (tensor<?x6x5xf32>) -> tensor<?x6x5xf32>
  return %3 : tensor<?x6x5xf32>
}
"""


def test_dense_operands_take_the_flat_index_fast_path(tmp_path, rng):
    exe = compile_cuda(DENSE, tmp_path / "dense.sdc")
    (kernel,) = [s["kernel"] for s in launches(tmp_path / "dense.sdc")]
    assert kernel["contiguous_flag"] == "CONTIG" and kernel["constexprs"]["CONTIG"] == 0
    source = (tmp_path / "dense.sdc" / kernel["source"]).read_text()
    assert "if CONTIG:" in source and "idx % (d2)" in source and "(idx // (d2))" in source  # b, s
    (calls,) = record_constexprs(exe)

    def inputs(batch: int, x=None):
        x = randn((batch, 6, 5), "f32", rng) if x is None else x
        return [x, randn((5,), "f32", rng), randn((batch, 6, 1), "f32", rng), randn((6, 5), "f32", rng)]

    check(DENSE, exe, inputs(3), "f32")  # every operand dense: flat offsets
    check(DENSE, exe, inputs(2, randn((2, 5, 6), "f32", rng).transpose(1, 2)), "f32")  # x is a transposed view
    check(DENSE, exe, inputs(1), "f32")
    assert [c["CONTIG"] for c in calls] == [1, 0, 1]


def test_a_signature_seen_before_launches_what_it_derived_then(tmp_path, rng):
    """A launch remembers, per operand shapes and strides, the grid, strides and flags it derived: a
    repeated signature reuses them, a new one (another batch, a transposed operand) derives its own."""
    exe = compile_cuda(DENSE, tmp_path / "dense.sdc")
    (launch,) = triton_launches(exe)
    (calls,) = record_constexprs(exe)

    def inputs(batch: int, transposed: bool):
        x = randn((batch, 5, 6), "f32", rng).transpose(1, 2) if transposed else randn((batch, 6, 5), "f32", rng)
        return [x, randn((5,), "f32", rng), randn((batch, 6, 1), "f32", rng), randn((6, 5), "f32", rng)]

    for batch, transposed in [(3, False), (3, True), (3, False), (3, True), (4, False), (3, False)]:
        check(DENSE, exe, inputs(batch, transposed), "f32")
    assert [c["CONTIG"] for c in calls] == [1, 0, 1, 0, 1, 1]
    assert [c["grid"] for c in calls] == [((90 + 1023) // 1024,)] * 4 + [((120 + 1023) // 1024,), ((90 + 1023) // 1024,)]
    assert len(launch.settled) == 3


def test_which_maps_have_flat_offsets():
    domain = (None, 6, 5)
    assert contiguous_offsets(domain, [(0, 1, 2), (2,), (0, 1, None), (1, 2), (None, None)]) == [
        "idx", "idx % (d2)", "(idx // (d2))", "idx % (d1 * d2)", "0"]
    assert contiguous_offsets((None, 1, 5), [(0, None, 2)]) == ["idx"]  # a unit dim inside the run is no gap
    assert contiguous_offsets(domain, [(0, None, 2)]) is None  # [B, 1, 5] on [B, 6, 5]: a gap
    assert contiguous_offsets(domain, [(2, 1)]) is None  # a transposed map
    assert contiguous_offsets((None,), [(0,)]) is None  # rank 1: the general path is as cheap


def test_elementwise_blocks_and_warps_grow_with_the_size():
    renderer = TritonRenderer()
    for numel, block, warps in ((100, 128, 4), (5000, 1024, 4), (1 << 16, 2048, 4), (1 << 26, 2048, 4)):
        from sdc.codegen.kernel.program import ELEMENTWISE as TEMPLATE, KernelProgram, TensorArg
        program = KernelProgram(TEMPLATE, (numel,), [TensorArg("x", "bf16", (0,))], [(TensorArg("y", "bf16", (0,)), 0)],
                                [], [])
        blocks = renderer.plan_blocks(program)
        assert (blocks["BLOCK"], blocks["num_warps"]) == (block, warps)


INTEGER = """
func.func @main(%a: tensor<?x4xi32> {sdc.name = "a", sdc.dims = #sdc.dims<["B", 4]>}, %b: tensor<4xi32> {sdc.name = "b"})
    -> (tensor<?x4xi1> {sdc.name = "out"}) {
  %0 = "sdc.mul"(%a, %b) : (tensor<?x4xi32>, tensor<4xi32>) -> tensor<?x4xi32>
  %1 = "sdc.sub"(%0, %a) : (tensor<?x4xi32>, tensor<?x4xi32>) -> tensor<?x4xi32>
  %2 = "sdc.abs"(%1) : (tensor<?x4xi32>) -> tensor<?x4xi32>
  %3 = "sdc.ge"(%2, %b) : (tensor<?x4xi32>, tensor<4xi32>) -> tensor<?x4xi1>
  %4 = "sdc.not"(%3) : (tensor<?x4xi1>) -> tensor<?x4xi1>
  return %4 : tensor<?x4xi1>
}
"""


def test_integer_and_boolean_elementwise(tmp_path, rng):
    exe = compile_cuda(INTEGER, tmp_path / "int.sdc")
    assert [s["kernel"]["backend"] for s in launches(tmp_path / "int.sdc")] == ["triton"]
    a = torch.randint(-9, 9, (3, 4), generator=rng, dtype=torch.int32)
    b = torch.randint(-9, 9, (4,), generator=rng, dtype=torch.int32)
    (got,) = exe(a, b)
    (want,) = interpret(INTEGER, [a, b], as_torch=True)
    assert torch.equal(got, want)


# ---------------------------------------------------------------- row reductions


ROWS = """
func.func @main(%x: tensor<?xNxDT> {sdc.name = "x", sdc.dims = #sdc.dims<["B", N]>},
                %g: tensor<NxDT> {sdc.name = "g"}, %b: tensor<NxDT> {sdc.name = "b"})
    -> (tensor<?xNxDT>, tensor<?xNxDT>, tensor<?xNxDT>, tensor<?xNxDT>, tensor<?xNxDT>, tensor<?xDT>, tensor<?xDT>) {
  %0 = "sdc.softmax"(%x) {axis = -1 : i64} : (tensor<?xNxDT>) -> tensor<?xNxDT>
  %1 = "sdc.log_softmax"(%x) {axis = 1 : i64} : (tensor<?xNxDT>) -> tensor<?xNxDT>
  %2 = "sdc.layer_norm"(%x, %g, %b) {axis = -1 : i64, epsilon = 1.0e-05 : f64} : (tensor<?xNxDT>, tensor<NxDT>, tensor<NxDT>) -> tensor<?xNxDT>
  %3 = "sdc.rms_norm"(%x, %g) {axis = -1 : i64, epsilon = 1.0e-06 : f64} : (tensor<?xNxDT>, tensor<NxDT>) -> tensor<?xNxDT>
  %4 = "sdc.reduce_mean"(%x) {axes = array<i64: 1>, keepdims = true} : (tensor<?xNxDT>) -> tensor<?x1xDT>
  %5 = "sdc.sub"(%x, %4) : (tensor<?xNxDT>, tensor<?x1xDT>) -> tensor<?xNxDT>
  %6 = "sdc.reduce_max"(%x) {axes = array<i64: -1>, keepdims = false} : (tensor<?xNxDT>) -> tensor<?xDT>
  %7 = "sdc.mul"(%x, %x) : (tensor<?xNxDT>, tensor<?xNxDT>) -> tensor<?xNxDT>
  %8 = "sdc.reduce_sum"(%7) {axes = array<i64: 1>, keepdims = false} : (tensor<?xNxDT>) -> tensor<?xDT>
  return %0, %1, %2, %3, %5, %6, %8 : tensor<?xNxDT>, tensor<?xNxDT>, tensor<?xNxDT>, tensor<?xNxDT>, tensor<?xNxDT>, tensor<?xDT>, tensor<?xDT>
}
"""


def rows_text(n: int | None, dtype: str) -> str:
    size = "?" if n is None else str(n)
    text = ROWS.replace("xNx", f"x{size}x").replace("<NxDT>", f"<{size}xDT>").replace("DT", dtype)
    return text.replace('["B", N]', '["B", "N"]' if n is None else f'["B", {n}]')


def check_rows(text: str, out: Path, n: int, dtype: str, rng, template: str) -> None:
    exe = compile_cuda(text, out)
    kernels = [s["kernel"] for s in launches(out)]
    assert {k["backend"] for k in kernels} == {"triton"} and {k["template"] for k in kernels} == {template}
    for batch in (1, 3):
        check(text, exe, [randn((batch, n), dtype, rng), randn((n,), dtype, rng), randn((n,), dtype, rng)], dtype)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_row_reductions_in_one_pass(dtype, tmp_path, rng, monkeypatch):
    # short rows: several per program (2048 elements' worth by default: 32 rows of 64; 2 here, as the
    # interpreter's time grows with the block, and batch 3 still leaves the last program half masked)
    monkeypatch.setattr(TritonRenderer, "row_elements", 128)
    check_rows(rows_text(37, dtype), tmp_path / "rows.sdc", 37, dtype, rng, "row")
    for kernel in [s["kernel"] for s in launches(tmp_path / "rows.sdc")]:
        assert kernel["constexprs"] == {"RBLOCK": 64, "ROWS": 2} and kernel["grid"] == ["(d0 + 1) // 2"]


SOFTMAX_ROWS = """
func.func @main(%x: tensor<5x14x20xf32> {sdc.name = "x"}, %g: tensor<20xf32> {sdc.name = "g"})
    -> (tensor<5x14x20xf32>, tensor<5x14xf32>) {
  %0 = "sdc.softmax"(%x) {axis = -1 : i64} : (tensor<5x14x20xf32>) -> tensor<5x14x20xf32>
  %1 = "sdc.mul"(%0, %g) : (tensor<5x14x20xf32>, tensor<20xf32>) -> tensor<5x14x20xf32>
  %2 = "sdc.reduce_max"(%1) {axes = array<i64: 2>, keepdims = false} : (tensor<5x14x20xf32>) -> tensor<5x14xf32>
  return %1, %2 : tensor<5x14x20xf32>, tensor<5x14xf32>
}
"""


def test_several_rows_per_program_with_a_masked_last_program(tmp_path, rng, monkeypatch):
    monkeypatch.setattr(TritonRenderer, "row_elements", 32 * 16)  # 16 rows of 32 a program: 70 rows take 5
    exe = compile_cuda(SOFTMAX_ROWS, tmp_path / "sm.sdc")
    kernels = [s["kernel"] for s in launches(tmp_path / "sm.sdc")]
    assert {k["template"] for k in kernels} == {"row"}
    for kernel in kernels:
        assert kernel["constexprs"] == {"RBLOCK": 32, "ROWS": 16} and kernel["grid"] == ["(d0 * d1 + 15) // 16"]
    check(SOFTMAX_ROWS, exe, [randn((5, 14, 20), "f32", rng), randn((20,), "f32", rng)], "f32")



ELEMENTWISE_MAX_ROWS = """
func.func @main(%x: tensor<?x37xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["B", 37]>}, %g: tensor<37xf32> {sdc.name = "g"})
    -> (tensor<?xf32>, tensor<?x37xf32>) {
  %0 = "sdc.max"(%x, %g) : (tensor<?x37xf32>, tensor<37xf32>) -> tensor<?x37xf32>
  %1 = "sdc.reduce_sum"(%0) {axes = array<i64: 1>, keepdims = false} : (tensor<?x37xf32>) -> tensor<?xf32>
  %2 = "sdc.min"(%x, %0) : (tensor<?x37xf32>, tensor<?x37xf32>) -> tensor<?x37xf32>
  %3 = "sdc.softmax"(%2) {axis = -1 : i64} : (tensor<?x37xf32>) -> tensor<?x37xf32>
  return %1, %3 : tensor<?xf32>, tensor<?x37xf32>
}
"""


def test_elementwise_max_and_min_in_a_row_kernel_are_not_reductions(tmp_path, rng):
    """The binary `max` / `min` share their primitive names with the row reductions; taken for one, a
    row kernel reduced their operand instead (sum off by 70 on these inputs)."""
    exe = compile_cuda(ELEMENTWISE_MAX_ROWS, tmp_path / "max.sdc")
    assert {s["kernel"]["template"] for s in launches(tmp_path / "max.sdc")} == {"row"}
    for batch in (1, 3):
        check(ELEMENTWISE_MAX_ROWS, exe, [randn((batch, 37), "f32", rng), randn((37,), "f32", rng)], "f32")

def test_row_warps_grow_with_the_row():
    renderer = TritonRenderer()
    from sdc.codegen.kernel.program import ROW, KernelProgram
    short = KernelProgram(ROW, (None, 37), [], [], [], [])
    assert renderer.plan_blocks(short) == {"RBLOCK": 64, "ROWS": 32, "num_warps": 4}
    assert [renderer.row_warps(n) for n in (64, 2048, 4096, 8192, 16384, 1 << 16)] == [4, 4, 4, 8, 16, 16]


def test_long_rows_loop_in_blocks(tmp_path, rng, monkeypatch):
    monkeypatch.setattr(TritonRenderer, "max_row_block", 16)  # 37 no longer fits one block ...
    monkeypatch.setattr(TritonRenderer, "loop_row_block", 16)  # ... and takes three, the last one masked
    check_rows(rows_text(37, "f32"), tmp_path / "rows.sdc", 37, "f32", rng, "row_looped")


def test_a_dynamic_row_length_loops(tmp_path, rng):
    text = rows_text(None, "f32")
    exe = compile_cuda(text, tmp_path / "dyn.sdc")
    assert {s["kernel"]["template"] for s in launches(tmp_path / "dyn.sdc")} == {"row_looped"}
    for n in (5, 70):
        check(text, exe, [randn((2, n), "f32", rng), randn((n,), "f32", rng), randn((n,), "f32", rng)], "f32")


# ---------------------------------------------------------------- autotuned blocks of the bandwidth-bound templates


def program_of(template: str, domain: tuple):
    from sdc.codegen.kernel.program import KernelProgram, TensorArg

    out = TensorArg("y", "bf16", tuple(range(len(domain))))
    return KernelProgram(template, domain, [TensorArg("x", "bf16", out.map)], [(out, 0)], [], [])


def test_only_large_static_domains_get_tune_candidates():
    renderer = TritonRenderer()
    big = renderer.tune_blocks(program_of("elementwise", (256, 1 << 20)))
    assert big[0] == renderer.plan_blocks(program_of("elementwise", (256, 1 << 20)))  # the heuristic first
    assert [(b["BLOCK"], b["num_warps"]) for b in big] == [(2048, 4), (1024, 4), (2048, 8), (4096, 4), (4096, 8)]
    for small in ((1000, 1000), (None, 4096), (64, 1 << 20)):  # under tune_min_elements, or of a size known only at run time
        assert len(renderer.tune_blocks(program_of("elementwise", small))) == 1
        assert len(renderer.tune_blocks(program_of("row", small))) == 1
    rows = renderer.tune_blocks(program_of("row", (65536, 4096)))
    assert [(b["ROWS"], b["num_warps"]) for b in rows] == [(1, 4), (1, 8), (2, 4), (2, 8)]
    looped = renderer.tune_blocks(program_of("row", (8192, 32768)))
    assert [(b["RBLOCK"], b["num_warps"], b["looped"]) for b in looped] == [
        (1024, 4, 1), (1024, 8, 1), (2048, 4, 1), (2048, 8, 1), (512, 4, 1)]


BIAS_GELU_2D = """
func.func @main(%x: tensor<3x301xf32> {sdc.name = "x"}, %b: tensor<301xf32> {sdc.name = "b"})
    -> (tensor<3x301xf32> {sdc.name = "y"}) {
  %0 = "sdc.add"(%x, %b) : (tensor<3x301xf32>, tensor<301xf32>) -> tensor<3x301xf32>
  %1 = "sdc.gelu"(%0) {approximate = "tanh"} : (tensor<3x301xf32>) -> tensor<3x301xf32>
  return %1 : tensor<3x301xf32>
}
"""


def run_each_config(exe, text: str, inputs: list[torch.Tensor], monkeypatch) -> int:
    """Runs `exe` once per configuration: the i-th call runs each launch's i-th (its plan's own, then
    its `tune` entries), checked against the reference each time; returns how many configurations
    there are. (One that differs from an earlier one only by warps, which the interpreter ignores,
    is not run again.)"""
    from sdc.runtime.launch import triton as triton_launcher

    steps = triton_launches(exe)
    configs = {id(s): [triton_launcher.LaunchConfig(s.spec.constexprs, s.spec.num_warps, s.spec.grid),
                       *(triton_launcher.LaunchConfig(t.constexprs, t.num_warps, t.grid) for t in s.spec.tune)]
               for s in steps}
    count = max(len(c) for c in configs.values())
    assert {len(c) for c in configs.values()} == {count}
    calls = record_constexprs(exe)
    ran = []
    for i in range(count):
        blocks = [(c[i].constexprs, c[i].grid) for c in configs.values()]
        if blocks in ran:
            continue
        ran.append(blocks)
        monkeypatch.setattr(triton_launcher.TritonLaunch, "config", lambda self, *args, i=i: configs[id(self)][i])
        check(text, exe, inputs, "f32")
        for step, seen in zip(steps, calls):  # what ran is that configuration (the contiguous flag set per call)
            want = configs[id(step)][i]
            assert {k: v for k, v in seen[-1].items() if k in want.constexprs and k != "CONTIG"} == {
                k: v for k, v in want.constexprs.items() if k != "CONTIG"}
            assert seen[-1]["num_warps"] == want.num_warps
    return count


def test_every_elementwise_candidate_is_right_on_a_masked_tail(tmp_path, rng, monkeypatch):
    monkeypatch.setattr(TritonRenderer, "tune_min_elements", 512)  # 3 x 301 = 903 elements tune
    exe = compile_cuda(BIAS_GELU_2D, tmp_path / "ew.sdc")
    inputs = [randn((3, 301), "f32", rng), randn((301,), "f32", rng)]
    (kernel,) = [s["kernel"] for s in launches(tmp_path / "ew.sdc")]
    assert (kernel["constexprs"]["BLOCK"], kernel["num_warps"]) == (1024, 4)  # its heuristic, then 3 others
    assert run_each_config(exe, BIAS_GELU_2D, inputs, monkeypatch) == 4


def test_every_row_candidate_is_right_on_a_masked_last_program(tmp_path, rng, monkeypatch):
    monkeypatch.setattr(TritonRenderer, "tune_min_elements", 64)  # 3 x 5 rows of 20 tune
    monkeypatch.setattr(TritonRenderer, "row_elements", 32 * 2)  # 2 rows a program: 15 rows leave a masked tail
    text = SOFTMAX_ROWS.replace("5x14x", "3x5x").replace("5x14xf32", "3x5xf32")
    inputs = [randn((3, 5, 20), "f32", rng), randn((20,), "f32", rng)]
    exe = compile_cuda(text, tmp_path / "rows.sdc")
    for launch in triton_launches(exe):
        assert [(t.constexprs["ROWS"], t.num_warps) for t in launch.spec.tune] == [(2, 8), (4, 4), (4, 8), (1, 4)]
    assert run_each_config(exe, text, inputs, monkeypatch) == 5


def test_a_looping_row_candidate_is_right(tmp_path, rng, monkeypatch):
    monkeypatch.setattr(TritonRenderer, "tune_min_elements", 64)
    monkeypatch.setattr(TritonRenderer, "max_row_block", 16)  # 45 loops in steps of 16 (candidates: 32) ...
    monkeypatch.setattr(TritonRenderer, "loop_row_block", 16)
    text = SOFTMAX_ROWS.replace("20", "45").replace("5x14x", "2x3x").replace("5x14xf32", "2x3xf32")
    exe = compile_cuda(text, tmp_path / "sm.sdc")
    inputs = [randn((2, 3, 45), "f32", rng), randn((45,), "f32", rng)]
    assert run_each_config(exe, text, inputs, monkeypatch) == 4  # 16 x 4, 16 x 8, 32 x 4, 32 x 8 warps


# ---------------------------------------------------------------- a model end to end


MODEL = """
func.func @main(%x: tensor<?x24xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["B", 24]>})
    -> (tensor<?x10xf32> {sdc.name = "probs"}) {
  %w1 = "sdc.parameter"() {name = "w1"} : () -> tensor<24x33xf32>
  %b1 = "sdc.parameter"() {name = "b1"} : () -> tensor<33xf32>
  %g = "sdc.parameter"() {name = "g"} : () -> tensor<33xf32>
  %beta = "sdc.parameter"() {name = "beta"} : () -> tensor<33xf32>
  %w2 = "sdc.parameter"() {name = "w2"} : () -> tensor<33x10xf32>
  %half = "sdc.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %0 = "sdc.matmul"(%x, %w1) : (tensor<?x24xf32>, tensor<24x33xf32>) -> tensor<?x33xf32>
  %1 = "sdc.add"(%0, %b1) : (tensor<?x33xf32>, tensor<33xf32>) -> tensor<?x33xf32>
  %2 = "sdc.layer_norm"(%1, %g, %beta) {axis = -1 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x33xf32>, tensor<33xf32>, tensor<33xf32>) -> tensor<?x33xf32>
  %3 = "sdc.silu"(%2) : (tensor<?x33xf32>) -> tensor<?x33xf32>
  %4 = "sdc.mul"(%3, %half) : (tensor<?x33xf32>, tensor<f32>) -> tensor<?x33xf32>
  %5 = "sdc.matmul"(%4, %w2) : (tensor<?x33xf32>, tensor<33x10xf32>) -> tensor<?x10xf32>
  %6 = "sdc.softmax"(%5) {axis = -1 : i64} : (tensor<?x10xf32>) -> tensor<?x10xf32>
  return %6 : tensor<?x10xf32>
}
"""


def model_params(seed: int) -> dict[str, np.ndarray]:
    r = np.random.default_rng(seed)
    shapes = {"w1": (24, 33), "b1": (33,), "g": (33,), "beta": (33,), "w2": (33, 10)}
    return {k: r.standard_normal(s).astype(np.float32) for k, s in shapes.items()}


def model_numpy(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    """An independent reference in float64."""
    h = x.astype(np.float64) @ p["w1"] + p["b1"]
    h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5) * p["g"] + p["beta"]
    h = h / (1 + np.exp(-h)) * 0.5
    z = h @ p["w2"]
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.fixture
def model(tmp_path):
    params = model_params(int(np.random.default_rng().integers(1 << 31)))
    out = tmp_path / "model.sdc"
    return compile_cuda(MODEL, out, params), out, params


def test_model_for_cuda_runs_its_kernels_under_the_interpreter(model):
    exe, out, params = model
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["target"] == "cuda"
    kernel_files = sorted(p for p in manifest["files"] if p.startswith("kernels/"))
    backends = [s["kernel"]["backend"] for s in launches(out)]
    assert backends.count("triton") == len(backends) == 4  # the matmul groups too (test_triton_matmul.py)
    assert kernel_files == sorted(s["kernel"]["source"] for s in launches(out) if s["kernel"]["backend"] == "triton")
    assert all(s["kernel"]["why_reference"] for s in launches(out) if s["kernel"]["backend"] == "reference")
    for batch in (1, 5):
        x = np.random.default_rng().standard_normal((batch, 24)).astype(np.float32)
        (got,) = exe(x)
        np.testing.assert_allclose(got, model_numpy(x, params), rtol=1e-4, atol=1e-5)
        (want,) = interpret(MODEL, [x], params)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_triton_kernels_on_the_cpu_need_the_interpreter(model, monkeypatch):
    _, out, _ = model
    monkeypatch.delenv("TRITON_INTERPRET")
    with pytest.raises(SdcError, match=r"\(launch k\d+\) is a generated Triton kernel: on the CPU those run only "
                                       r"under the Triton interpreter \(TRITON_INTERPRET=1\)"):
        sdc.runtime.load(out)


def test_a_changed_kernel_file_is_refused(model):
    _, out, _ = model
    source = next(s["kernel"]["source"] for s in launches(out) if s["kernel"]["backend"] == "triton")
    path = out / source
    path.write_text(path.read_text().replace("tl.store(", "tl.atomic_add(", 1))
    with pytest.raises(SdcError, match=rf"{source}: does not match its SHA-256 in manifest.json"):
        sdc.runtime.load(out)


def test_the_kernel_header_dumps_its_kernel_ir(model):
    _, out, _ = model
    sources = [(out / s["kernel"]["source"]).read_text() for s in launches(out) if s["kernel"]["backend"] == "triton"]
    assert any("# template row, domain [None, 33]" in s and "(per row)" in s for s in sources)
    assert all("@triton.jit" in s for s in sources)


# ---------------------------------------------------------------- on a GPU


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_model_runs_on_cuda(model, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET")  # compiled for the device, not interpreted
    _, out, params = model
    exe = sdc.runtime.load(out, device="cuda")
    for batch in (1, 64, 1000):
        x = np.random.default_rng().standard_normal((batch, 24)).astype(np.float32)
        (got,) = exe(torch.from_numpy(x).cuda())
        assert got.is_cuda
        np.testing.assert_allclose(got.cpu().numpy(), model_numpy(x, params), rtol=1e-3, atol=1e-4)  # tf32 matmuls
