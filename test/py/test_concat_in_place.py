"""A concat of generated kernels' results is one buffer its producers write into (no concat copy).

Why: on cuda a `sdc.concat` is a pass over every byte it joins; the kernels that make its operands take
their result's strides, so each can write its slice of the joined tensor instead
(sdc/codegen/memory.py `write_concats_in_place`: an `alloc` of the concat's result, a `view` step per
operand, no concat launch). Kernels run under the Triton interpreter, compiled for target cuda; results
are compared with torch eager on fresh random inputs, with the arena on and off, at two batch sizes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sdc.codegen import memory as M
from sdc.compiler import compile_module
from sdc.ir_text import parse_module
from sdc.options import CompileOptions
from sdc.runtime.arena import ARENA_ENV
from sdc.runtime.plan_schema import PlanError, parse_rank_plan
from triton_support import compile_cuda, interpreter, rng  # noqa: F401

# concat(relu(a * b), c + d) along the odd-sized axis 1 (3 + 5): the second slice starts at offset 3;
# `out` reads the joined tensor (the arena holds it), `joined` returns it (the buffer is the output).
TWO_PRODUCERS = """
func.func @main(%a: tensor<?x3x7xf32> {sdc.name = "a", sdc.dims = #sdc.dims<["B", 3, 7]>},
                %b: tensor<?x3x7xf32> {sdc.name = "b", sdc.dims = #sdc.dims<["B", 3, 7]>},
                %c: tensor<?x5x7xf32> {sdc.name = "c", sdc.dims = #sdc.dims<["B", 5, 7]>},
                %d: tensor<?x5x7xf32> {sdc.name = "d", sdc.dims = #sdc.dims<["B", 5, 7]>})
    -> (tensor<?x8x7xf32> {sdc.name = "out"}) {
  %m = "sdc.mul"(%a, %b) : (tensor<?x3x7xf32>, tensor<?x3x7xf32>) -> tensor<?x3x7xf32>
  %r = "sdc.relu"(%m) : (tensor<?x3x7xf32>) -> tensor<?x3x7xf32>
  %s = "sdc.add"(%c, %d) : (tensor<?x5x7xf32>, tensor<?x5x7xf32>) -> tensor<?x5x7xf32>
  %j = "sdc.concat"(%r, %s) {axis = 1 : i64} : (tensor<?x3x7xf32>, tensor<?x5x7xf32>) -> tensor<?x8x7xf32>
  %o = "sdc.tanh"(%j) : (tensor<?x8x7xf32>) -> tensor<?x8x7xf32>
  return %o : tensor<?x8x7xf32>
}
"""

# A DenseNet-like block on features: each layer reads everything so far and appends its own columns,
# x2 = [x0 | relu(x0 @ w1) | relu(x1 @ w2)], one buffer that the three producers fill.
DENSE_BLOCK = """
func.func @main(%x: tensor<?x4xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["B", 4]>})
    -> (tensor<?x5xf32> {sdc.name = "y"}) {
  %s = "sdc.parameter"() {name = "s"} : () -> tensor<4xf32>
  %w1 = "sdc.parameter"() {name = "w1"} : () -> tensor<4x3xf32>
  %w2 = "sdc.parameter"() {name = "w2"} : () -> tensor<7x3xf32>
  %w3 = "sdc.parameter"() {name = "w3"} : () -> tensor<10x5xf32>
  %xs = "sdc.mul"(%x, %s) : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
  %x0 = "sdc.relu"(%xs) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %p1 = "sdc.matmul"(%x0, %w1) {transpose_lhs = false, transpose_rhs = false} : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
  %y1 = "sdc.relu"(%p1) : (tensor<?x3xf32>) -> tensor<?x3xf32>
  %x1 = "sdc.concat"(%x0, %y1) {axis = 1 : i64} : (tensor<?x4xf32>, tensor<?x3xf32>) -> tensor<?x7xf32>
  %p2 = "sdc.matmul"(%x1, %w2) {transpose_lhs = false, transpose_rhs = false} : (tensor<?x7xf32>, tensor<7x3xf32>) -> tensor<?x3xf32>
  %y2 = "sdc.relu"(%p2) : (tensor<?x3xf32>) -> tensor<?x3xf32>
  %x2 = "sdc.concat"(%x1, %y2) {axis = 1 : i64} : (tensor<?x7xf32>, tensor<?x3xf32>) -> tensor<?x10xf32>
  %y = "sdc.matmul"(%x2, %w3) {transpose_lhs = false, transpose_rhs = false} : (tensor<?x10xf32>, tensor<10x5xf32>) -> tensor<?x5xf32>
  return %y : tensor<?x5xf32>
}
"""

# Concats that keep their copy: one joins a graph input; in the other, an operand is read again after
# the concat (its slice would have to outlive the buffer's place in the plan).
KEEPS_COPY = """
func.func @main(%a: tensor<2x3xf32> {sdc.name = "a"}, %b: tensor<2x5xf32> {sdc.name = "b"},
                %w: tensor<3x4xf32> {sdc.name = "w"})
    -> (tensor<2x8xf32> {sdc.name = "first"}, tensor<2x8xf32> {sdc.name = "second"}, tensor<2x4xf32> {sdc.name = "third"}) {
  %e = "sdc.exp"(%b) : (tensor<2x5xf32>) -> tensor<2x5xf32>
  %j1 = "sdc.concat"(%a, %e) {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  %o1 = "sdc.neg"(%j1) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %r = "sdc.relu"(%a) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %t = "sdc.tanh"(%b) : (tensor<2x5xf32>) -> tensor<2x5xf32>
  %j2 = "sdc.concat"(%r, %t) {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  %o2 = "sdc.neg"(%j2) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %o3 = "sdc.matmul"(%r, %w) {transpose_lhs = false, transpose_rhs = false} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %o1, %o2, %o3 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x4xf32>
}
"""


def _rank(artifact: Path) -> dict:
    return json.loads((artifact / "plan.json").read_text())["ranks"][0]


def _concat_launches(rank: dict) -> list[dict]:
    return [s for s in rank["steps"] if s["kind"] == "launch" and any(e["op"] == "concat" for e in s["kernel"]["ops"])]


def _views(rank: dict) -> dict[str, tuple[str, int, int]]:
    return {s["value"]: (s["of"], s["axis"], s["offset"]) for s in rank["steps"] if s["kind"] == "view"}


def _producer(rank: dict, vid: str) -> dict:
    return next(s for s in rank["steps"] if s["kind"] == "launch" and vid in s["outputs"])


def _compile_bounded(text: str, out: Path):
    """Compiled for cuda with the batch bounded (B <= 4), so the arena plans the joined buffer."""
    options = CompileOptions(target="cuda", input_shapes={"B": "1..4"})
    return compile_module(parse_module(text), {}, options, output=out, device="cpu")


@pytest.mark.parametrize("arena", ["0", "1"])
def test_two_producers_write_their_slices(tmp_path: Path, rng: torch.Generator, monkeypatch, arena: str) -> None:
    monkeypatch.setenv(ARENA_ENV, arena)
    exe = _compile_bounded(TWO_PRODUCERS, tmp_path / "two.sdc")
    rank = _rank(tmp_path / "two.sdc")
    assert not _concat_launches(rank)
    views = _views(rank)
    (joined,) = {of for of, _, _ in views.values()}
    assert sorted(offset for _, _, offset in views.values()) == [0, 3] and {a for _, a, _ in views.values()} == {1}
    kinds = [s["kind"] for s in rank["steps"]]
    assert kinds[:3] == ["alloc", "view", "view"] and rank["steps"][0]["value"] == joined
    assert all(_producer(rank, v)["kernel"]["backend"] == "triton" for v in views)
    assert list(rank["arena"]["offsets"]) == [joined]  # the slices take no bytes of their own
    buffers = M.rank_buffers(rank["values"], rank["outputs"], rank["steps"], {"B": 4})
    assert [(b.name, b.start) for b in buffers] == [(joined, 0)]  # live from its alloc, before any producer
    assert (exe._executor.arena is not None) == (arena == "1")
    for batch in (2, 3):
        a, b = torch.randn(2, batch, 3, 7, generator=rng)
        c, d = torch.randn(2, batch, 5, 7, generator=rng)
        (out,) = exe(a, b, c, d)
        torch.testing.assert_close(out, torch.tanh(torch.cat([torch.relu(a * b), c + d], dim=1)))


def test_a_producer_whose_result_misses_its_slice_is_an_error(tmp_path: Path, rng: torch.Generator) -> None:
    """A kernel never writes a view-bound result to a fresh buffer (the joined buffer's readers would
    read the slice unwritten): here a view step tampered to one row short."""
    import dataclasses

    from sdc.diagnostics import SdcError
    from sdc.runtime.executor import ViewSlot

    exe = _compile_bounded(TWO_PRODUCERS, tmp_path / "two.sdc")
    program = list(exe._executor.fast_program)
    at = next(i for i, step in enumerate(program) if isinstance(step, ViewSlot))
    program[at] = dataclasses.replace(program[at], size=program[at].size - 1)
    exe._executor.fast_program = tuple(program)
    a, b = torch.randn(2, 2, 3, 7, generator=rng)
    c, d = torch.randn(2, 2, 5, 7, generator=rng)
    with pytest.raises(SdcError, match="its slice of the joined buffer"):
        exe(a, b, c, d)


def test_dense_block_is_one_buffer(tmp_path: Path, rng: torch.Generator) -> None:
    params = {"s": torch.randn(4, generator=rng), "w1": torch.randn(4, 3, generator=rng),
              "w2": torch.randn(7, 3, generator=rng), "w3": torch.randn(10, 5, generator=rng)}
    exe = compile_cuda(DENSE_BLOCK, tmp_path / "dense.sdc", params=params)
    rank = _rank(tmp_path / "dense.sdc")
    assert not _concat_launches(rank)
    views = _views(rank)
    allocs = [s["value"] for s in rank["steps"] if s["kind"] == "alloc"]
    assert len(allocs) == 1 and len(views) == 4  # x2; x1 is its first 7 columns, x0 and y1 slices of x1
    (x2,) = allocs
    (x1,) = [v for v, (of, _, offset) in views.items() if of == x2 and offset == 0]
    assert sorted(offset for of, _, offset in views.values() if of == x1) == [0, 4]
    assert sorted(offset for of, _, offset in views.values() if of == x2) == [0, 7]
    assert all(_producer(rank, v)["kernel"]["backend"] == "triton" for v in views if v != x1)
    for batch in (3, 5):
        x = torch.randn(batch, 4, generator=rng)
        (y,) = exe(x)
        x0 = torch.relu(x * params["s"])
        x1_ = torch.cat([x0, torch.relu(x0 @ params["w1"])], 1)
        x2_ = torch.cat([x1_, torch.relu(x1_ @ params["w2"])], 1)
        torch.testing.assert_close(y, x2_ @ params["w3"], rtol=1e-4, atol=1e-4)


def test_concats_that_keep_their_copy(tmp_path: Path, rng: torch.Generator) -> None:
    exe = compile_cuda(KEEPS_COPY, tmp_path / "keep.sdc")
    rank = _rank(tmp_path / "keep.sdc")
    assert len(_concat_launches(rank)) == 2 and not _views(rank)
    a, b, w = torch.randn(2, 3, generator=rng), torch.randn(2, 5, generator=rng), torch.randn(3, 4, generator=rng)
    first, second, third = exe(a, b, w)
    torch.testing.assert_close(first, -torch.cat([a, b.exp()], 1))
    torch.testing.assert_close(second, -torch.cat([a.relu(), b.tanh()], 1))
    torch.testing.assert_close(third, a.relu() @ w)


def test_plan_text_and_inspect_show_the_views(tmp_path: Path, capsys) -> None:
    from sdc.cli.main import main
    from sdc.codegen.artifact import _step_line

    compile_cuda(TWO_PRODUCERS, tmp_path / "two.sdc")
    rank = _rank(tmp_path / "two.sdc")
    lines = [_step_line(s) for s in rank["steps"]]
    joined = rank["steps"][0]["value"]
    assert lines[0] == f"alloc {joined}" and lines[2].endswith(f"= {joined}.narrow(1, 3)"), lines
    assert main(["inspect", str(tmp_path / "two.sdc")]) == 0
    assert f"concats written in place by their producers: {joined}" in capsys.readouterr().out


# ---------------------------------------------------------------- the view step at load time

def _plan(steps: list[dict], shapes: dict[str, list]) -> dict:
    return {"rank": 0, "weights": "weights/rank0.safetensors", "streams": ["compute"], "inputs": ["x"],
            "outputs": ["y"], "values": {v: {"shape": s, "dtype": "f32"} for v, s in shapes.items()},
            "steps": steps}


SHAPES = {"x": [2, 3], "p": [2, 3], "q": [2, 2], "j": [2, 5], "y": [2, 5]}
NEG = {"backend": "reference", "ops": [{"op": "neg", "inputs": ["j"], "outputs": ["y"]}]}


@pytest.mark.parametrize("bad, message", [
    ({"kind": "view", "value": "p", "of": "x", "axis": 1, "offset": 0},
     r"views value 'x', which no earlier alloc or view step makes"),
    ({"kind": "view", "value": "p", "of": "j", "axis": 1, "offset": 3},
     r"value 'p' \[2, 3\] at offset 3 of axis 1 is not a slice of 'j' \[2, 5\]"),
    ({"kind": "view", "value": "p", "of": "j", "axis": 0, "offset": 0},
     r"value 'p' \[2, 3\] at offset 0 of axis 0 is not a slice of 'j'"),
    ({"kind": "view", "value": "p", "of": "j", "axis": 2, "offset": 0}, r"'axis' must be a dim of 'j'"),
])
def test_bad_view_steps_are_refused_at_load(bad: dict, message: str) -> None:
    steps = [{"kind": "alloc", "value": "j"}, bad]
    with pytest.raises(PlanError, match=r"^rank 0 step 1 \(view\): " + message):
        parse_rank_plan(_plan(steps, SHAPES))


def test_a_view_read_after_its_base_is_freed_is_refused() -> None:
    launch = {"kind": "launch", "id": "k0", "stream": 0, "inputs": ["j"], "outputs": ["y"], "kernel": NEG}
    late = {"kind": "launch", "id": "k1", "stream": 0, "inputs": ["p"], "outputs": ["q"],
            "kernel": {"backend": "reference", "ops": [{"op": "neg", "inputs": ["p"], "outputs": ["q"]}]}}
    steps = [{"kind": "alloc", "value": "j"}, {"kind": "view", "value": "p", "of": "j", "axis": 1, "offset": 0},
             launch, {"kind": "free", "values": ["j"]}, late]
    with pytest.raises(PlanError, match=r"reads value 'p', a view of 'j', after 'j' is freed"):
        parse_rank_plan(_plan(steps, {**SHAPES, "q": [2, 3]}))
    assert parse_rank_plan(_plan(steps[:3], SHAPES)).steps[1].of == "j"


# ---------------------------------------------------------------- on the GPU (the lead's H200 run)

@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_dense_block_on_cuda(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # real Triton kernels, the arena on (cuda's default)
    gen = torch.Generator().manual_seed(0)
    params = {"s": torch.randn(4, generator=gen), "w1": torch.randn(4, 3, generator=gen),
              "w2": torch.randn(7, 3, generator=gen), "w3": torch.randn(10, 5, generator=gen)}
    # the batch bounded, so the arena plans the joined buffer (an unbounded one has no arena)
    exe = compile_module(parse_module(DENSE_BLOCK), params, CompileOptions(target="cuda", input_shapes={"B": "1..8"}),
                         output=tmp_path / "dense.sdc", device="cuda")
    assert exe._executor.arena is not None and not _concat_launches(_rank(tmp_path / "dense.sdc"))
    p = {k: v.cuda() for k, v in params.items()}
    for batch in (3, 5, 3, 3, 3, 3):  # repeated calls of one shape replay a CUDA graph
        x = torch.randn(batch, 4, device="cuda")
        (y,) = exe(x)
        x0 = torch.relu(x * p["s"])
        x1 = torch.cat([x0, torch.relu(x0 @ p["w1"])], 1)
        x2 = torch.cat([x1, torch.relu(x1 @ p["w2"])], 1)
        torch.testing.assert_close(y, x2 @ p["w3"], rtol=1e-4, atol=1e-4)
