"""Runs of C-kernel ops replayed as one call (sdc/runtime/c_runs.py): a small convolution net with
every kind of op a run takes (a first convolution of 3 channels, grouped, depthwise and 1x1 ones, a
squeeze-excite block's global pooling and scaling, max pooling, a local response normalization, a residual
add merged into a convolution, a concat of four parts along the channels, a linear resize) and one
convolution whose merged sigmoid torch applies after its kernel (which cuts its run), compiled once, loaded with runs on and off, and run on
fresh random inputs at two batch sizes against onnxruntime; the replayed results equal the
instruction-by-instruction ones bit for bit."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import sdc
import sdc.runtime
from sdc.runtime.c_runs import CRun

from c_support import needs_c_compiler

pytestmark = needs_c_compiler
ort = pytest.importorskip("onnxruntime")


def _net() -> onnx.ModelProto:
    rng = np.random.default_rng(7)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        return numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32), name)

    inits = [weight("w1", 16, 3, 3, 3), weight("b1", 16), weight("w2", 32, 4, 1, 1), weight("b2", 32),
             weight("w3", 32, 1, 3, 3), weight("w4", 8, 32, 1, 1), weight("b4", 8), weight("w5", 32, 8, 1, 1),
             weight("b5", 32), weight("w6", 16, 32, 3, 3), weight("b6", 16), weight("w7", 16, 16, 1, 1),
             weight("b7", 16), weight("w8", 16, 1, 3, 3),
             numpy_helper.from_array(np.array([1, 1, 1.5, 2], np.float32), "scales")]
    conv = helper.make_node
    nodes = [
        conv("Conv", ["x", "w1", "b1"], ["c1"], strides=[2, 2], pads=[1, 1, 1, 1]),  # 3 channels: gathered
        conv("Relu", ["c1"], ["r1"]),
        conv("Conv", ["r1", "w2", "b2"], ["c2"], group=4),  # grouped 1x1
        conv("Relu", ["c2"], ["r2"]),
        conv("Conv", ["r2", "w3"], ["c3"], group=32, pads=[1, 1, 1, 1]),  # depthwise
        conv("GlobalAveragePool", ["c3"], ["g"]),  # a squeeze-excite block
        conv("Conv", ["g", "w4", "b4"], ["f1"]),
        conv("Relu", ["f1"], ["f1r"]),
        conv("Conv", ["f1r", "w5", "b5"], ["f2"]),
        conv("HardSigmoid", ["f2"], ["s"], alpha=1 / 6, beta=0.5),
        conv("Mul", ["c3", "s"], ["m"]),
        # a sigmoid the C kernel has no form of: torch applies it to the kernel's result, which cuts the run
        conv("Conv", ["m", "w6", "b6"], ["c4"], pads=[1, 1, 1, 1]),
        conv("Sigmoid", ["c4"], ["r4"]),
        conv("MaxPool", ["r4"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        conv("LRN", ["p"], ["lp"], size=3, alpha=1e-2, beta=0.75, bias=1.0),
        # a depthwise convolution whose input the run frees after it: its result must not take that buffer
        conv("Conv", ["lp", "w8"], ["d"], group=16, pads=[1, 1, 1, 1]),
        conv("Conv", ["d", "w7", "b7"], ["c5"]),  # a small 1x1: C
        conv("Add", ["c5", "d"], ["a"]),  # merged into it
        conv("Relu", ["a"], ["ar"]),
        conv("Concat", ["ar", "d", "p", "ar"], ["cc"], axis=1),  # along the channels, four parts: C
        conv("Resize", ["cc", "", "scales"], ["up"], mode="linear"),  # (linear over H and W: C)
        conv("MaxPool", ["up"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
    ]
    graph = helper.make_graph(nodes, "runs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 24, 20])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("g", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)  # (older onnxruntimes read it)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    path = tmp_path_factory.mktemp("runs") / "net.onnx"
    onnx.save(_net(), path)
    out = path.with_suffix(".sdc")
    sdc.compile(str(path), output=out)
    return path, out


def _load(artifact, monkeypatch, on: bool):
    monkeypatch.setenv("SDC_C_RUNS", "1" if on else "0")
    return sdc.runtime.load(artifact)


def _runs(exe) -> list[CRun]:
    return [i for i in exe._executor.fast_program if isinstance(i, CRun)]


@pytest.mark.parametrize("threads", [1, 2])
def test_replayed_runs_match_onnxruntime_and_the_stepwise_call(compiled, monkeypatch, threads):
    model, artifact = compiled
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        on, off = _load(artifact, monkeypatch, True), _load(artifact, monkeypatch, False)
        assert _runs(on) and not _runs(off)
        session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(threads)
        for batch in (2, 2, 2, 3, 2):  # the first call of a layout records, the next ones replay
            x = rng.standard_normal((batch, 3, 24, 20)).astype(np.float32)
            want = session.run(None, {"x": x})[0]
            got, stepwise = np.asarray(on(x)[0]), np.asarray(off(x)[0])
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
            assert np.array_equal(got, stepwise)
        members = {m.name for r in _runs(on) for m in r.members if hasattr(m, "name")}
        assert {"conv", "global_avg_pool", "mul", "max_pool", "concat", "lrn", "resize"} <= members
        assert any(m.name == "concat" and len(m.ins) == 4 for r in _runs(on) for m in r.members
                   if hasattr(m, "name"))  # the export's chain of 2-way concats, joined
        assert any(m.kernel.__qualname__.startswith("resize_kernel.") for r in _runs(on) for m in r.members
                   if getattr(m, "name", None) == "resize")  # (the C kernel's, not the reference)
        plans = [p for r in _runs(on) for p in r.plans.values()]
        assert len(plans) >= 2 and not any(p.stepwise for p in plans)  # one per batch size
        # the convolution with the sigmoid cut its run: the parts around it replay as runs of their own
        split = [p for p in plans if p.parts]
        assert split and any(isinstance(part, CRun) and any(q.count for q in part.plans.values())
                             for p in split for part in p.parts)
    finally:
        torch.set_num_threads(before)


def test_a_kernel_that_fails_in_a_replay_reruns_the_ops_one_by_one(compiled, monkeypatch):
    model, artifact = compiled
    exe = _load(artifact, monkeypatch, True)
    x = np.random.default_rng(3).standard_normal((2, 3, 24, 20)).astype(np.float32)
    want = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    exe(x)  # recorded (and cut at the sigmoid's convolution)
    exe(x)  # the parts around it recorded
    failing = []

    def fail(*args):
        failing.append(1)
        return 1  # what sdc_run_calls returns when its first kernel's scratch was not allocated

    for run in _runs(exe):
        run.run_calls = fail
        for plan in run.plans.values():
            for part in plan.parts:
                if isinstance(part, CRun):
                    part.run_calls = fail
    np.testing.assert_allclose(np.asarray(exe(x)[0]), want, rtol=1e-4, atol=1e-4)
    assert failing


def test_runs_keep_the_values_read_after_them_fresh(compiled, monkeypatch):
    """A result of a replayed run is a tensor of its own per call: the caller's earlier result stays."""
    _, artifact = compiled
    exe = _load(artifact, monkeypatch, True)
    rng = np.random.default_rng(5)
    results, copies = [], []
    for _ in range(4):  # (the pooled squeeze-excite values, an output, are also read inside their run)
        results.append(exe(rng.standard_normal((2, 3, 24, 20)).astype(np.float32)))
        copies.append([np.asarray(t).copy() for t in results[-1]])
    assert not np.array_equal(copies[1][1], copies[2][1])
    for result, copy in zip(results, copies):  # as each call left it
        assert all(np.array_equal(np.asarray(t), c) for t, c in zip(result, copy))
