"""sdc-fold-conv-batch-norm on a real export: Inception-v2's conv + BN + per-channel Mul + Add chains
fold into the convolutions, and the program computes the same logits (random weights: the light
model's own are degenerate)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from sdc.diagnostics import DiagnosticSink
from sdc.interpreter import interpret
from sdc.mlir import ir
from sdc.transforms.base import walk_ops
from sdc.transforms.pipeline import build_pipeline

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def run_passes(module, pipeline: str) -> None:
    sink = DiagnosticSink()
    with ir.Location.unknown():
        build_pipeline(pipeline, sink).run(module)
    assert not sink.has_errors, [d.format() for d in sink.diagnostics]


def test_inception_v2_scales_and_shifts_fold_with_the_same_logits():
    from sdc.frontend.onnx import import_onnx

    imported = import_onnx(str(LIGHT / "light_inception_v2.onnx"))
    module = imported.module
    rng = np.random.default_rng(5)
    params = {}
    for name, value in imported.params.items():
        shape = np.shape(value)
        if len(shape) >= 2:
            params[name] = (rng.standard_normal(shape) * np.sqrt(2 / int(np.prod(shape[1:])))).astype(np.float32)
        else:
            params[name] = rng.uniform(0.5, 1.5, shape).astype(np.float32)
    with module.context:
        fn = walk_ops(module, "func.func")[0]
        ret = [op.operation for op in fn.regions[0].blocks[0].operations][-1]
        softmax = ret.operands[0].owner
        if getattr(softmax, "name", "") == "sdc.softmax":  # logits: a near-uniform softmax hides errors
            ret.operands[0] = softmax.operands[0]
            softmax.erase()
        shape = list(ir.RankedTensorType(fn.regions[0].blocks[0].arguments[0].type).shape)
        x = rng.standard_normal(shape, dtype=np.float32)
        run_passes(module, "sdc-verify,sdc-canonicalize,cse")
        muls = len([op for op in walk_ops(module, "sdc.mul") if ir.RankedTensorType(op.results[0].type).rank == 4])
        (before,) = interpret(module, [x], params)
        run_passes(module, "sdc-fold-conv-batch-norm,sdc-verify")
        convs = walk_ops(module, "sdc.conv")
        conv_results = {c.results[0] for c in convs}
        after_muls = [op for op in walk_ops(module, "sdc.mul") if any(v in conv_results for v in op.operands)]
        bias_adds = [op for op in walk_ops(module, "sdc.add") if any(v in conv_results for v in op.operands)]
        (after,) = interpret(module, [x], params)
    assert muls >= 60  # the export's per-channel Muls were there
    assert not after_muls and not walk_ops(module, "sdc.batch_norm")
    assert len(bias_adds) <= len(convs)  # one bias add per convolution at most: the Adds merged
    for add in bias_adds:  # and nothing adds to a bias add's result per channel any more
        users = [u.owner for u in add.results[0].uses]
        assert not any(getattr(u, "name", "") in ("sdc.mul",) for u in users)
    assert np.ptp(before) > 1e-3
    np.testing.assert_allclose(after, before, rtol=1e-4, atol=1e-5 * np.abs(before).max())


def test_batch_norm_after_no_convolution_is_a_scale_and_shift_with_onnxruntime_values():
    """DenseNet's pattern: concat -> BatchNormalization -> Relu -> Conv, the batch norm after no
    convolution. It becomes x * scale + shift by folded weights; the compiled model matches
    onnxruntime at two batch sizes (random statistics: variances in (0.5, 1.5), means nonzero)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    import sdc

    rng = np.random.default_rng(11)
    c = 12
    inits = [numpy_helper.from_array(rng.standard_normal((c, c, 1, 1)).astype(np.float32) / 3, "w")]
    for name, low, high in [("gamma", -1.5, 1.5), ("beta", -1, 1), ("mean", -1, 1), ("var", 0.5, 1.5)]:
        inits.append(numpy_helper.from_array(rng.uniform(low, high, c).astype(np.float32), name))
    nodes = [
        helper.make_node("Concat", ["a", "b"], ["cat"], axis=1),
        helper.make_node("BatchNormalization", ["cat", "gamma", "beta", "mean", "var"], ["bn"], epsilon=1e-3),
        helper.make_node("Relu", ["bn"], ["r"]),
        helper.make_node("Conv", ["r", "w"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "bn_alone",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["B", c // 2, 5, 7]) for n in ("a", "b")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", c, 5, 7])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    exe = sdc.compile(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (1, 3):
        a, b = (rng.standard_normal((batch, c // 2, 5, 7)).astype(np.float32) for _ in range(2))
        (got,) = exe(a, b)
        (want,) = session.run(None, {"a": a, "b": b})
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)
