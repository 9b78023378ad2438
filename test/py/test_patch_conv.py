"""sdc-patch-conv: convolutions whose windows tile the input become matmuls of patches, with the values
of onnxruntime (random weights and inputs, several batch sizes); the others stay convolutions."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import sdc


def _conv_model(channels: int, spatial: list[int], kernel: list[int], strides: list[int], out: int,
                bias: bool, pads: list[int] | None = None, group: int = 1):
    rng = np.random.default_rng(len(spatial) * 10 + kernel[0])
    w = (rng.standard_normal((out, channels // group, *kernel)) / np.sqrt(channels * np.prod(kernel))).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w")]
    inputs = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(out).astype(np.float32), "b"))
        inputs.append("b")
    attrs = {"strides": strides, "kernel_shape": kernel, "group": group}
    if pads is not None:
        attrs["pads"] = pads
    node = helper.make_node("Conv", inputs, ["y"], **attrs)
    graph = helper.make_graph(
        [node, helper.make_node("Relu", ["y"], ["z"])], "patches",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", channels, *spatial])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


CASES = {
    # a ViT's patch embedding (with its bias), ConvNeXt's 4x4 stem, a 1-d and a 3-d patching, no bias
    "vit": dict(channels=3, spatial=[32, 32], kernel=[8, 8], strides=[8, 8], out=24, bias=True),
    "stem": dict(channels=5, spatial=[12, 16], kernel=[4, 4], strides=[4, 4], out=7, bias=False),
    "1d": dict(channels=4, spatial=[18], kernel=[3], strides=[3], out=6, bias=True),
    "3d": dict(channels=2, spatial=[4, 6, 6], kernel=[2, 3, 2], strides=[2, 3, 2], out=5, bias=True),
}
KEPT = {
    # overlapping, padded, strided past its windows, grouped, 1x1: convolutions still
    "overlap": dict(channels=3, spatial=[16, 16], kernel=[4, 4], strides=[2, 2], out=4, bias=True),
    "padded": dict(channels=3, spatial=[16, 16], kernel=[4, 4], strides=[4, 4], out=4, bias=True, pads=[1, 1, 1, 1]),
    "ragged": dict(channels=3, spatial=[18, 16], kernel=[4, 4], strides=[4, 4], out=4, bias=False),
    "grouped": dict(channels=4, spatial=[16, 16], kernel=[4, 4], strides=[4, 4], out=4, bias=False, group=2),
    "pointwise": dict(channels=3, spatial=[8, 8], kernel=[1, 1], strides=[1, 1], out=4, bias=False),
}


def _check(case: dict, tmp_path) -> str:
    import onnxruntime as ort

    model = _conv_model(**case)
    exe = sdc.compile(model, output=tmp_path / "m.sdc")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(3)
    for batch in (1, 3, 2):
        x = rng.standard_normal((batch, case["channels"], *case["spatial"])).astype(np.float32)
        (got,) = exe(x)
        (want,) = session.run(None, {"x": x})
        assert np.ptp(want) > 0.1
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    return (tmp_path / "m.sdc" / "program.mlir").read_text()


@pytest.mark.parametrize("name", list(CASES))
def test_a_convolution_that_tiles_its_input_is_a_matmul_with_onnxruntime_values(name, tmp_path):
    program = _check(CASES[name], tmp_path)
    assert '"sdc.conv"' not in program and '"sdc.matmul"' in program


@pytest.mark.parametrize("name", list(KEPT))
def test_other_convolutions_stay_convolutions(name, tmp_path):
    program = _check(KEPT[name], tmp_path)
    assert '"sdc.conv"' in program
