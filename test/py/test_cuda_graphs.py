"""GraphRunner's logic (sdc/runtime/cuda_graphs.py) without a GPU: a fake graph backend whose
"replay" recomputes the captured call into the same output buffers, as a CUDA graph does.

What is checked: replays equal torch float64 on fresh random inputs; a caller's earlier outputs never
change under it, whether it drops them, holds the last one (`y = exe(x)`) or keeps them all; outputs
are handed out without a copy when that is safe; static inputs passed back are not copied; an output
that aliases an input is the caller's own; a failed capture leaves the executable eager.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import sdc
import sdc.runtime
from sdc.runtime.cuda_graphs import GraphRunner

PROGRAM = """
func.func @main(%x: tensor<4x8xf32> {sdc.name = "x"}, %w: tensor<8x8xf32> {sdc.name = "w"})
    -> (tensor<32xf32>, tensor<4x8xf32>, tensor<8x8xf32>) {
  %0 = "sdc.matmul"(%x, %w) {transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %1 = "sdc.tanh"(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = "sdc.matmul"(%1, %w) {transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %3 = "sdc.reshape"(%2) {shape = [32]} : (tensor<4x8xf32>) -> tensor<32xf32>
  %4 = "sdc.matmul"(%2, %w) {transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %3, %4, %w : tensor<32xf32>, tensor<4x8xf32>, tensor<8x8xf32>
}"""


def reference(x: torch.Tensor, w: torch.Tensor) -> list[torch.Tensor]:
    x, w = x.double(), w.double()
    h = torch.tanh(x @ w) @ w
    return [h.reshape(32), h @ w, w]


class FakeGraph:
    def __init__(self) -> None:
        self.call = None

    def replay(self) -> None:
        self.call()


class FakeBackend:
    """A CUDA graph's contract on the CPU: fixed output buffers, rewritten by each replay."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    def new_graph(self) -> FakeGraph:
        return FakeGraph()

    def new_pool(self) -> object:
        return object()

    def capture(self, graph: FakeGraph, pool: object, call) -> list[torch.Tensor]:
        if self.fail:
            raise RuntimeError("operation not permitted when stream is capturing")
        outs = list(call())

        def replay() -> None:
            with torch.inference_mode():  # the buffers are inference tensors; a GPU kernel just writes them
                for buffer, fresh in zip(outs, call()):
                    buffer.copy_(fresh)

        graph.call = replay
        return outs

    def synchronize(self) -> None:
        pass


@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("graphs")
    (root / "p.mlir").write_text(PROGRAM)
    sdc.compile(str(root / "p.mlir"), output=str(root / "p.sdc"))
    return root / "p.sdc"


def graphed(artifact: Path, **kw):
    exe = sdc.runtime.load(artifact)
    ex = exe._executor
    ex.graphs = GraphRunner(ex._run_eager, torch.device("cpu"), backend=FakeBackend(**kw))
    return exe, ex.graphs


def fresh(seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(4, 8, generator=g), torch.randn(8, 8, generator=g) / 3]


def check(got: list[torch.Tensor], ins: list[torch.Tensor]) -> None:
    for a, b in zip(got, reference(*ins)):
        torch.testing.assert_close(a.double(), b, rtol=1e-5, atol=1e-5)


def test_kept_outputs_never_change(artifact):
    exe, runner = graphed(artifact)
    kept = []
    for seed in range(6):
        ins = fresh(seed)
        got = exe(*ins)
        check(got, ins)
        kept.append((got, [t.clone() for t in got], ins))
    for got, snapshot, ins in kept:  # every earlier output is as it was returned, and right
        assert all(torch.equal(a, b) for a, b in zip(got, snapshot))
        check(got, ins)
    assert runner.captures == 2 and runner.replays == 2 and runner.held_fallbacks == 3


def test_the_usual_loop_alternates_two_graphs_without_copies(artifact):
    exe, runner = graphed(artifact)
    y = None
    ptrs = []
    for seed in range(8):
        ins = fresh(seed)
        previous = None if y is None else [t.clone() for t in y]
        before = y
        y = exe(*ins)
        check(y, ins)
        if before is not None:  # the previous outputs were still held during this call: untouched
            assert all(torch.equal(a, b) for a, b in zip(before, previous))
        ptrs.append(y[1].data_ptr())
        del before
    assert runner.held_fallbacks == 0 and runner.captures == 2 and runner.replays == 7
    assert len(set(ptrs[1:])) == 2  # the replays hand out the two graphs' own buffers, no clone


def test_dropped_outputs_replay_one_graph_in_place(artifact):
    exe, runner = graphed(artifact)
    for seed in range(5):
        ins = fresh(seed)
        check(exe(*ins), ins)
    assert runner.captures == 1 and runner.replays == 4
    entry = next(iter(runner.cache.values()))
    out = exe(*fresh(9))[1]
    assert out.data_ptr() == entry.outputs[0][1].data_ptr()  # handed out as it is


def test_static_inputs_are_not_copied(artifact):
    exe, runner = graphed(artifact)
    first = fresh(0)
    static = exe.static_inputs(*first)
    assert static is not None and runner.captures == 1
    copies = runner.input_copies
    for seed in range(1, 4):
        ins = fresh(seed)
        for buffer, t in zip(static, ins):
            buffer.copy_(t)
        check(exe(*static), ins)
    assert runner.input_copies == copies and runner.replays == 3


def test_an_output_aliasing_an_input_is_the_callers_own(artifact):
    exe, runner = graphed(artifact)
    static = exe.static_inputs(*fresh(0))
    ins = fresh(1)
    for buffer, t in zip(static, ins):
        buffer.copy_(t)
    got = exe(*static)
    assert got[2].data_ptr() not in {t.data_ptr() for t in static}  # w came back as a copy
    static[1].copy_(fresh(2)[1])
    assert torch.equal(got[2], ins[1])


def test_failed_capture_stays_eager(artifact):
    exe, runner = graphed(artifact, fail=True)
    for seed in range(4):
        ins = fresh(seed)
        check(exe(*ins), ins)
    assert runner.skipped.startswith("capture failed: RuntimeError") and runner.replays == 0


def test_static_inputs_without_graphs_is_none(artifact):
    exe = sdc.runtime.load(artifact)  # on the CPU: calls are not captured
    assert exe._executor.graphs is None and exe.static_inputs(*fresh(0)) is None


def test_generated_kernels_alone_skip_the_device_mode():
    # A plan of generated kernels alone runs without torch's default-device mode and fp32_math (each
    # a cost on every tensor call of the launcher); reference kernels on a device run under both.
    from types import SimpleNamespace

    from sdc.runtime.executor import ReferenceExecutor, _TorchOpsContext

    def context(torch_ops: bool, device: str):
        return ReferenceExecutor._device_context(SimpleNamespace(device=torch.device(device), torch_ops=torch_ops,
                                                                 tf32=False))

    assert isinstance(context(False, "cuda"), torch.cuda.device)
    assert isinstance(context(True, "cuda"), _TorchOpsContext)
    with context(True, "meta"):  # entered and left: tensors made inside land on the device
        assert torch.empty(2).device.type == "meta"
    assert torch.empty(2).device.type == "cpu"
