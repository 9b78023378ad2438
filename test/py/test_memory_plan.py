"""The memory plan (sdc/codegen/memory.py), its checks at load (plan_schema) and the arena at run time.

The planner is tested on plain data: no two live buffers overlap, offsets are aligned, the arena
is at least the max-live lower bound and at most the sum of the sizes, and close to the bound.
End to end, an encoder artifact runs with the arena (SDC_ARENA=1) to exactly the outputs it gives
without it, and the plan of the light ResNet-50 reaches the lower bound.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import onnx
import pytest
import torch

import sdc
import sdc.runtime
from sdc.codegen import memory as M
from sdc.diagnostics import SdcError
from sdc.runtime.plan_schema import PlanError, parse_rank_plan

ENCODER = Path(__file__).resolve().parents[2] / "examples" / "models" / "encoder.onnx"
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _random_buffers(rng: random.Random, n: int, horizon: int) -> list[M.Buffer]:
    out = []
    for i in range(n):
        start = rng.randrange(horizon)
        out.append(M.Buffer(f"b{i}", rng.choice([1, 3, 255, 256, 257, 1000, 4096, 65537]) * rng.randint(1, 8),
                            start, min(horizon, start + rng.randint(0, 6))))
    return out


# ---------------------------------------------------------------- the planner on plain data

def test_chain_reuses_two_slots():
    # a -> b -> c -> d, each read only by the next: two buffers of the largest size suffice.
    bufs = [M.Buffer(f"v{i}", 1000, i, i + 1) for i in range(6)]
    p = M.place(bufs)
    M.check_placement(bufs, p)
    assert p.size == 2 * 1024 == M.max_live_bytes(bufs)
    assert all(off % 256 == 0 for off in p.offsets.values())


def test_disjoint_lifetimes_share_offset_zero():
    bufs = [M.Buffer("a", 5000, 0, 0), M.Buffer("b", 300, 1, 1), M.Buffer("c", 70, 2, 3)]
    p = M.place(bufs)
    assert set(p.offsets.values()) == {0} and p.size == M.aligned(5000)


def test_all_live_together_is_the_sum():
    bufs = [M.Buffer(f"v{i}", 100 * (i + 1), 0, 10) for i in range(5)]
    p = M.place(bufs)
    M.check_placement(bufs, p)
    assert p.size == sum(M.aligned(b.size) for b in bufs)


@pytest.mark.parametrize("seed", range(6))
def test_random_lifetimes_are_sound_and_near_the_bound(seed):
    bufs = _random_buffers(random.Random(seed), 60, 40)
    p = M.place(bufs)
    M.check_placement(bufs, p)
    lower, total = M.max_live_bytes(bufs), sum(M.aligned(b.size) for b in bufs)
    assert lower <= p.size <= total
    assert p.size <= 1.3 * lower, (p.size, lower)


def test_check_placement_finds_an_overlap():
    bufs = [M.Buffer("a", 512, 0, 2), M.Buffer("b", 512, 1, 3)]
    with pytest.raises(ValueError, match="'a' and 'b' are live together"):
        M.check_placement(bufs, M.Placement(1024, {"a": 0, "b": 256}, 256))
    with pytest.raises(ValueError, match="misaligned"):
        M.check_placement(bufs, M.Placement(2048, {"a": 0, "b": 520}, 256))


def test_symbol_bounds_and_sizes():
    bounds = M.symbol_bounds(["1 <= B <= 64", "S < 129 and H % 2 == 0", "8 >= K", "N == 3 or N == 4"])
    assert bounds == {"B": 64, "S": 128, "K": 8}
    assert M.max_bytes({"shape": ["B", "S//2", 4], "dtype": "f32"}, bounds) == 64 * 64 * 4 * 4
    assert M.max_bytes({"shape": ["B", 3], "dtype": "bf16"}, bounds) == 64 * 3 * 2
    assert M.max_bytes({"shape": ["S - B"], "dtype": "f32"}, bounds) is None  # can shrink as B grows
    assert M.max_bytes({"shape": ["N"], "dtype": "f32"}, bounds) is None  # unbounded
    assert M.max_bytes({"shape": ["?", 3], "dtype": "f32"}, bounds) is None


def _step(sid: str, ins: list[str], outs: list[str], backend: str = "reference", op: str = "relu") -> dict:
    return {"kind": "launch", "id": sid, "stream": 0, "inputs": ins, "outputs": outs,
            "kernel": {"backend": backend, "ops": [{"op": op, "attrs": {}, "inputs": ins, "outputs": outs}]}}


VALUES = {"x": {"shape": [4, 8], "dtype": "f32"}, "a": {"shape": [4, 8], "dtype": "f32"},
          "b": {"shape": [4, 8], "dtype": "f32"}, "c": {"shape": ["?", 8], "dtype": "f32"},
          "d": {"shape": [4, 8], "dtype": "f32"}, "y": {"shape": [4, 8], "dtype": "f32"}}


def test_a_view_keeps_what_it_views_alive():
    # c has an unknown size (left to the allocator) and may be a view of a: a stays live while c is.
    steps = [_step("k0", ["x"], ["a"]), _step("k1", ["a"], ["c"], op="reshape"), _step("k2", ["x"], ["b"]),
             _step("k3", ["b", "c"], ["d"]), _step("k4", ["d"], ["y"])]
    bufs = {b.name: b for b in M.rank_buffers(VALUES, ["y"], steps, {})}
    assert set(bufs) == {"a", "b", "d"}  # not the output y, not c
    assert (bufs["a"].start, bufs["a"].end) == (0, 3)  # to c's last read, not a's own (step 1)
    arena = M.plan_rank_memory(VALUES, ["y"], steps)
    assert arena["offsets"]["a"] != arena["offsets"]["b"] and set(arena["offsets"]) == {"a", "b", "d"}


def test_a_collective_operand_lives_to_the_end():
    coll = {"kind": "collective", "id": "c0", "stream": 0, "op": "all_reduce", "mesh_axes": ["tp"], "attrs": {},
            "inputs": ["a"], "outputs": ["b"], "loc": ""}
    steps = [_step("k0", ["x"], ["a"]), coll, _step("k1", ["b"], ["d"]), _step("k2", ["d"], ["y"])]
    bufs = {b.name: b for b in M.rank_buffers(VALUES, ["y"], steps, {})}
    assert bufs["a"].end == len(steps) and bufs["b"].end == 2


def test_direct_only_plans_generated_kernels_alone():
    steps = [_step("k0", ["x"], ["a"], "triton"), _step("k1", ["a"], ["b"]), _step("k2", ["b"], ["y"])]
    bufs = M.rank_buffers(VALUES, ["y"], steps, {}, direct_only=True)
    assert [b.name for b in bufs] == ["a"]


def _views_reach_the_arena(steps: list[dict], outputs: list[str], planned: set[str]) -> list[str]:
    """The planned values an output may share memory with (an independent walk, for the property
    test): back from each output through the results of steps that may return a view of an operand."""
    maker = {v: s for s in steps for v in s["outputs"]}
    bad, todo, seen = [], list(outputs), set()
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in planned:
            bad.append(v)
            continue
        step = maker.get(v)
        op = step["kernel"]["ops"][0] if step is not None else {}
        if step is not None and step["kernel"]["backend"] != "triton" and (
                op["op"] in ("reshape", "transpose", "cast") or "in_place" in op):
            todo.extend(step["inputs"])
    return bad


@pytest.mark.parametrize("seed", range(30))
def test_outputs_never_share_the_arena(seed):
    rng = random.Random(seed)
    values = {"x": {"shape": [4, 8], "dtype": "f32"}}
    steps, made = [], ["x"]
    for k in range(rng.randint(3, 12)):
        out = f"v{k}"
        values[out] = {"shape": [4, 8] if rng.random() > 0.15 else ["?", 8], "dtype": "f32"}
        ins = rng.sample(made, min(len(made), rng.randint(1, 2)))
        op = rng.choice(["relu", "add", "reshape", "transpose", "cast"])
        steps.append(_step(f"k{k}", ins, [out], rng.choice(["reference", "reference", "triton"]), op))
        if op == "add" and rng.random() < 0.3:
            steps[-1]["kernel"]["ops"][0]["in_place"] = 0
        made.append(out)
    outputs = rng.sample(made[1:], rng.randint(1, 3))
    buffers = M.rank_buffers(values, outputs, steps, {})
    planned = {b.name for b in buffers}
    assert not planned & set(outputs)
    assert _views_reach_the_arena(steps, outputs, planned) == []
    placement = M.place(buffers)
    M.check_placement(buffers, placement)


def test_a_value_an_output_views_is_not_planned():
    # y = reshape(d): d may be y's memory, so d is not in the arena; a and b still are.
    steps = [_step("k0", ["x"], ["a"]), _step("k1", ["a"], ["b"]), _step("k2", ["b"], ["d"]),
             _step("k3", ["d"], ["y"], op="reshape")]
    assert {b.name for b in M.rank_buffers(VALUES, ["y"], steps, {})} == {"a", "b"}
    # a chain of views: y = reshape(c), c = transpose(d) with c of unknown size: d is out too.
    steps[3:] = [_step("k3", ["d"], ["c"], op="transpose"), _step("k4", ["c"], ["y"], op="reshape")]
    assert {b.name for b in M.rank_buffers(VALUES, ["y"], steps, {})} == {"a", "b"}
    # a generated kernel's result is its own memory: what it reads stays planned.
    steps[3:] = [_step("k3", ["d"], ["y"], "triton")]
    assert {b.name for b in M.rank_buffers(VALUES, ["y"], steps, {})} == {"a", "b", "d"}


def _group(sid: str, ins: list[str], outs: list[str], ops: list[tuple[str, list[str], list[str]]]) -> dict:
    return {"kind": "launch", "id": sid, "stream": 0, "inputs": ins, "outputs": outs,
            "kernel": {"backend": "reference", "ops": [{"op": op, "attrs": {}, "inputs": i, "outputs": o}
                                                       for op, i, o in ops]}}


@pytest.mark.parametrize("ops, planned", [
    ([("reshape", ["d"], ["t"]), ("relu", ["t"], ["y"])], {"a", "b", "d"}),  # the relu's result is fresh
    ([("relu", ["d"], ["t"]), ("reshape", ["t"], ["y"])], {"a", "b", "d"}),  # a view of the group's own t
    ([("relu", ["b"], ["t"]), ("reshape", ["d"], ["y"])], {"a", "b"}),  # y may be d's memory
    ([("transpose", ["d"], ["t"]), ("reshape", ["t"], ["y"])], {"a", "b"}),  # through two views
])
def test_a_group_result_views_only_what_its_ops_pass_through(ops, planned):
    steps = [_step("k0", ["x"], ["a"]), _step("k1", ["a"], ["b"]), _step("k2", ["b"], ["d"]),
             _group("k3", ["b", "d"], ["y"], ops)]
    assert {b.name for b in M.rank_buffers(VALUES, ["y"], steps, {})} == planned


# ---------------------------------------------------------------- the checks at load

def _rank(arena: dict, steps: list[dict]) -> dict:
    return {"rank": 0, "weights": "weights/rank0.safetensors", "streams": ["compute"], "values": VALUES,
            "inputs": ["x"], "outputs": ["y"], "steps": steps, "arena": arena}


STEPS = [_step("k0", ["x"], ["a"]), _step("k1", ["a"], ["b"]), {"kind": "free", "values": ["a"]},
         _step("k2", ["b"], ["y"]), {"kind": "free", "values": ["b"]}]


def test_schema_reads_a_good_arena():
    program = parse_rank_plan(_rank({"bytes": 512, "alignment": 256, "offsets": {"a": 0, "b": 256}}, STEPS))
    assert program.arena.offsets == {"a": 0, "b": 256} and program.arena.nbytes == {"a": 128, "b": 128}


@pytest.mark.parametrize("arena, message", [
    ({"bytes": 512, "alignment": 256, "offsets": {"a": 0, "b": 0}},
     r"step 1 \(launch k1\): value 'b' \(arena bytes 0..128\) overlaps value 'a' \(bytes 0..128\), which is still live"),
    ({"bytes": 512, "alignment": 256, "offsets": {"a": 0, "b": 100}}, "value 'b' has offset 100, not a multiple of 256"),
    ({"bytes": 200, "alignment": 256, "offsets": {"a": 0, "b": 256}}, r"value 'b' \(bytes 256..384\) does not fit"),
    ({"bytes": 512, "alignment": 256, "offsets": {"y": 0}}, "places value 'y', an input, output or weight"),
    ({"bytes": 512, "alignment": 256, "offsets": {"c": 0}}, "value 'c' has dim '\\?'"),
    ({"bytes": 512, "alignment": 3, "offsets": {}}, "'alignment' must be a power of two"),
    ({"bytes": 512, "alignment": 256, "offsets": {"zz": 0}}, "places value 'zz', which is not in the values table"),
])
def test_schema_rejects_a_bad_arena(arena, message):
    with pytest.raises(PlanError, match=message):
        parse_rank_plan(_rank(arena, STEPS))


def test_a_plan_of_few_launches_is_not_captured():
    from sdc.runtime.cuda_graphs import MIN_LAUNCHES, static_reason

    cuda = torch.device("cuda")  # a device object needs no GPU: static_reason only reads its type
    few = parse_rank_plan(_rank({"bytes": 0, "alignment": 256, "offsets": {}},
                                [_step("k0", ["x"], ["y"])]))
    assert MIN_LAUNCHES > 1 and "has 1 launch:" in static_reason(few, cuda)
    many = parse_rank_plan(_rank({"bytes": 0, "alignment": 256, "offsets": {}}, [
        _step(f"k{i}", ["x" if i == 0 else f"v{i}"], ["y" if i == MIN_LAUNCHES - 1 else f"v{i + 1}"])
        for i in range(MIN_LAUNCHES)]) | {"values": {**VALUES, **{f"v{i}": VALUES["x"] for i in range(MIN_LAUNCHES)}}})
    assert static_reason(many, cuda) is None
    assert static_reason(many, torch.device("cpu")) == "not on a CUDA device"


# ---------------------------------------------------------------- end to end

@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mem") / "encoder.sdc"
    sdc.compile(str(ENCODER), output=str(out), input_shapes={"input_ids": [2, 16], "attention_mask": [2, 16]})
    return out


def _encoder_inputs(seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 1000, (2, 16), generator=g)
    mask = (torch.rand(2, 16, generator=g) > 0.3).long()
    mask[:, 0] = 1
    return [ids, mask]


def test_encoder_arena_run_equals_the_plain_run(encoder, monkeypatch):
    arena = json.loads((encoder / "plan.json").read_text())["ranks"][0]["arena"]
    assert arena["bytes"] < arena["unshared_bytes"] and arena["bytes"] >= arena["max_live_bytes"]
    monkeypatch.setenv("SDC_ARENA", "1")
    with_arena = sdc.runtime.load(encoder)
    monkeypatch.setenv("SDC_ARENA", "0")
    plain = sdc.runtime.load(encoder)
    assert with_arena._executor.arena is not None and plain._executor.arena is None
    first = None
    for seed in range(3):  # fresh inputs each call: nothing of one call may leak into the next
        ins = _encoder_inputs(seed)
        (got,), (want,) = with_arena(*ins), plain(*ins)
        assert torch.equal(got, want)
        assert not with_arena._executor.arena.holds(got)  # the caller's output is its own
        if first is None:
            first = got
    assert not torch.equal(first, got)  # an earlier output is not overwritten by later calls
    (again,) = with_arena(*_encoder_inputs(0))
    assert torch.equal(again, first)


VIEWED_OUTPUT = """
func.func @main(%x: tensor<4x8xf32> {sdc.name = "x"}, %w: tensor<8x8xf32> {sdc.name = "w"})
    -> (tensor<32xf32>, tensor<4x8xf32>) {
  %0 = "sdc.matmul"(%x, %w) {transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %1 = "sdc.matmul"(%0, %w) {transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %2 = "sdc.reshape"(%1) {shape = [32]} : (tensor<4x8xf32>) -> tensor<32xf32>
  %3 = "sdc.matmul"(%1, %w) {transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %2, %3 : tensor<32xf32>, tensor<4x8xf32>
}"""


def test_an_output_viewing_an_intermediate_needs_no_copy(tmp_path, monkeypatch):
    # The reshape's result is a view of its operand: that operand is not in the arena, so the
    # executor's copy for arena-held outputs (kept for older plans) never runs.
    from sdc.runtime.arena import Arena

    (tmp_path / "p.mlir").write_text(VIEWED_OUTPUT)
    sdc.compile(str(tmp_path / "p.mlir"), output=str(tmp_path / "p.sdc"))
    monkeypatch.setenv("SDC_ARENA", "1")
    exe = sdc.runtime.load(tmp_path / "p.sdc")
    assert exe._executor.arena is not None
    held = []
    monkeypatch.setattr(Arena, "holds", lambda self, t: held.append(t) or
                        t.untyped_storage().data_ptr() == self.storage_ptr)
    kept = []
    for seed in range(4):
        g = torch.Generator().manual_seed(seed)
        x, w = torch.randn(4, 8, generator=g), torch.randn(8, 8, generator=g) / 3
        got = exe(x, w)
        h = (x.double() @ w.double()) @ w.double()
        kept.append((got, [t.clone() for t in got], [h.reshape(32), h @ w.double()]))
    arena = exe._executor.arena.storage_ptr
    assert held and all(t.untyped_storage().data_ptr() != arena for t in held)  # no output was in the arena
    for got, snapshot, want in kept:  # earlier outputs are unchanged by later calls, and right
        assert all(torch.equal(a, b) for a, b in zip(got, snapshot))
        for a, b in zip(got, want):
            torch.testing.assert_close(a.double(), b, rtol=1e-5, atol=1e-5)


def test_bad_arena_switch_is_one_error(encoder, monkeypatch):
    monkeypatch.setenv("SDC_ARENA", "maybe")
    with pytest.raises(SdcError, match="SDC_ARENA='maybe' is not one of"):
        sdc.runtime.load(encoder)


def test_inspect_reports_the_arena(encoder, capsys):
    from sdc.cli.main import main

    assert main(["inspect", str(encoder)]) == 0
    assert "memory plan: arena " in capsys.readouterr().out


def test_resnet50_plan_reaches_the_lower_bound(tmp_path):
    out = tmp_path / "r50.sdc"
    sdc.compile(str(LIGHT / "light_resnet50.onnx"), output=str(out))
    rank = json.loads((out / "plan.json").read_text())["ranks"][0]
    arena = rank["arena"]
    bufs = M.rank_buffers(rank["values"], rank["outputs"], rank["steps"], {})
    M.check_placement(bufs, M.Placement(arena["bytes"], arena["offsets"], arena["alignment"]))
    assert len(bufs) > 50 and {b.name for b in bufs} == set(arena["offsets"])
    assert arena["max_live_bytes"] <= arena["bytes"] <= 1.05 * arena["max_live_bytes"]
    assert arena["bytes"] * 4 < arena["unshared_bytes"]


# ---------------------------------------------------------------- CUDA (run on the GPU host)

gpu = pytest.mark.gpu


@gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graph_replay_matches_eager(encoder, monkeypatch):
    from sdc.runtime import cuda_graphs

    monkeypatch.setenv(cuda_graphs.GRAPHS_ENV, "0")
    eager = sdc.runtime.load(encoder, device="cuda")
    monkeypatch.delenv(cuda_graphs.GRAPHS_ENV)
    graphed = sdc.runtime.load(encoder, device="cuda")
    kept = []
    for seed in range(8):
        ins = [t.cuda() for t in _encoder_inputs(seed)]
        (want,), (got,) = eager(*ins), graphed(*ins)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        if seed < 2:  # call 0 ran eagerly, call 1 is the first graph's own output buffer, still held
            kept.append((got, want))
        del got, want
    graphs = graphed._executor.graphs
    assert graphs is not None and graphs.replays == 7, graphs.skipped
    assert graphs.captures == 2 and graphs.held_fallbacks == 0  # the held buffer sent replays to the second graph
    for got, want in kept:  # outputs are the caller's: later replays did not write over them
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert not torch.equal(kept[0][0], kept[1][0])


@gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graph_per_shape(tmp_path):
    out = tmp_path / "dyn.sdc"
    sdc.compile(str(ENCODER), output=str(out))
    exe = sdc.runtime.load(out, device="cuda")
    for b, s in [(2, 8), (2, 8), (2, 8), (3, 5), (3, 5), (3, 5), (2, 8)]:
        ids = torch.randint(0, 1000, (b, s), device="cuda")
        mask = torch.ones(b, s, dtype=torch.long, device="cuda")
        (got,) = exe(ids, mask)
        assert got.shape == (b, s, 64)
    graphs = exe._executor.graphs
    assert len(graphs.cache) == 2, graphs.skipped
