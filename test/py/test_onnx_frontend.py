"""The ONNX path end to end: real models, dynamic shapes, the backend API, and every bad input."""

from __future__ import annotations

import copy

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import sdc
from sdc import onnx_backend
from sdc.diagnostics import SdcError
from sdc.frontend.onnx import import_onnx

ROOT = Path(__file__).resolve().parents[2]
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
ZOO = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
       "squeezenet", "vgg19", "zfnet512"]
ENCODER = ROOT / "examples" / "models" / "encoder.onnx"
RNG = np.random.default_rng()


def _model(nodes, inputs, outputs, initializers=(), opset=17, domain_opsets=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in domain_opsets]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)  # what onnxruntime reads


def _ort(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


# ---------------------------------------------------------------- the light model zoo


@pytest.fixture
def one_thread():
    """One intra-op thread: every output channel then sums in the same order.

    These models' constant weights make all 1000 logits equal (squeezenet's are about 9.5e9, where one
    f32 ulp is 1024). With two threads torch's convolution sums some channels in another order, one
    logit lands an ulp higher, and the softmax turns that ulp into a one-hot output."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("name", ZOO)
def test_light_zoo_model_matches_stored_output(name, one_thread):
    from onnx.backend.test.runner import Runner

    path = LIGHT / f"light_{name}.onnx"
    model = onnx.load(str(path))
    inits = {i.name for i in model.graph.initializer}
    feeds = {x.name: Runner.generate_dummy_data(x, seed=0, name=name, random=False)
             for x in model.graph.input if x.name not in inits}
    expected = numpy_helper.to_array(onnx.load_tensor(str(LIGHT / f"light_{name}_output_0.pb")))
    exe = sdc.compile(str(path))
    (out,) = exe(**feeds)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    if _tied_softmax(model, path, feeds):
        return
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-7)
    # And against onnxruntime. Not on random inputs: these models' weights are constants, so their
    # activations grow by orders of magnitude per layer and the final softmax amplifies any difference
    # in summation order (seen on squeezenet: a random input gave 8 tied classes instead of 1000).
    # (test_fuse.py checks the same networks with random weights, before the softmax.)
    (ref,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-7)


def _tied_softmax(model, path, feeds) -> bool:
    """For a model that ends in a Softmax whose inputs onnxruntime computes all equal (squeezenet's
    constant weights make its logits about 9.5e9, every class alike): the logits, compared to float32
    rounding of their size, are the check; the probabilities are not one, because a difference of
    one rounding step (5e-7 relative, 5120 at that size) already moves a class's probability to 0.
    False for every other model, which the caller then compares as it is."""
    last = model.graph.node[-1]
    if last.op_type != "Softmax":
        return False
    cut = copy.deepcopy(model)
    cut.graph.output[0].name = last.input[0]
    del cut.graph.node[-1]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    (ref,) = ort.InferenceSession(cut.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, feeds)
    scale = float(np.abs(ref).max())
    if float(ref.max() - ref.min()) > 1e-6 * scale:
        return False
    (logits,) = sdc.compile(cut)(**feeds)
    assert float(np.abs(logits - ref).max()) <= 1e-5 * scale
    return True


# ---------------------------------------------------------------- dynamic shapes


def test_encoder_runs_at_several_sizes_from_one_artifact(tmp_path):
    exe = sdc.compile(str(ENCODER), output=tmp_path / "enc.sdc")
    sess = ort.InferenceSession(str(ENCODER), providers=["CPUExecutionProvider"])
    for batch, seq in [(1, 3), (2, 16), (3, 41)]:
        ids = RNG.integers(0, 1000, (batch, seq)).astype(np.int64)
        mask = (RNG.random((batch, seq)) > 0.2).astype(np.int64)
        (out,) = exe(input_ids=ids, attention_mask=mask)
        (ref,) = sess.run(None, {"input_ids": ids, "attention_mask": mask})
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def _dynamic_reshape_model():
    # y = reshape(x, [shape(x)[0], -1]) @ w: the exporters' Shape -> Gather -> Concat -> Reshape.
    w = numpy_helper.from_array(RNG.standard_normal((12, 5)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        helper.make_node("MatMul", ["flat", "w"], ["y"]),
    ]
    inits = [w, numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "axes0"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])
    return _model(nodes, [x], [y], inits)


def test_runtime_shape_arithmetic_folds_to_symbolic_attributes():
    model = _dynamic_reshape_model()
    text = str(import_onnx(model).module)
    assert "sdc.reshape" in text and 'shape = ["N", 12]' in text
    assert "Shape" not in text and "sdc.gather" not in text  # folded away, not run
    exe = sdc.compile(model)
    for n in (1, 7):
        x = RNG.standard_normal((n, 3, 4)).astype(np.float32)
        np.testing.assert_allclose(exe(x)[0], _ort(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_input_shape_binds_a_dim():
    model = _dynamic_reshape_model()
    text = str(import_onnx(model, input_shapes={"x": [2, 3, 4]}).module)
    assert "tensor<2x3x4xf32>" in text
    with pytest.raises(SdcError, match="not a model input"):
        import_onnx(model, input_shapes={"nope": [2, 3, 4]})


def test_every_op_carries_its_node_name():
    text = import_onnx(_dynamic_reshape_model()).module.get_asm(enable_debug_info=True)
    assert 'loc("MatMul_5"' in text


# ---------------------------------------------------------------- the ONNX backend API


def test_backend_prepare_and_run_model_follow_onnx_backend_base():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    model = _model([helper.make_node("Tanh", ["x"], ["y"])], [x], [y])
    data = RNG.standard_normal((2, 3)).astype(np.float32)
    assert onnx_backend.supports_device("CPU") and not onnx_backend.supports_device("CUDA")
    (out,) = onnx_backend.run_model(model, [data])
    np.testing.assert_allclose(out, np.tanh(data), rtol=1e-6)
    rep = onnx_backend.prepare(model)
    np.testing.assert_allclose(rep.run({"x": data})[0], np.tanh(data), rtol=1e-6)


def test_backend_specializes_on_shape_inputs():
    # Reshape's target shape is a graph input: compiled per value, guarded by it.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])
    s = helper.make_tensor_value_info("s", TensorProto.INT64, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = _model([helper.make_node("Reshape", ["x", "s"], ["y"])], [x, s], [y])
    rep = onnx_backend.prepare(model)
    data = RNG.standard_normal((2, 6)).astype(np.float32)
    for shape in ([3, 4], [12, 1], [3, 4]):
        (out,) = rep.run([data, np.array(shape, np.int64)])
        np.testing.assert_array_equal(out, data.reshape(shape))


def test_onnx_backend_test_runner_drives_sdc():
    import unittest

    from onnx.backend.test import BackendTest

    bt = BackendTest(onnx_backend, "sdc_conformance_probe")
    bt.include(r"^test_(relu|softmax_axis_0|gemm_default_no_bias|concat_2d_axis_0)_cpu$")
    suite = unittest.TestSuite()
    for case in bt.test_cases.values():
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(case))
    result = unittest.TextTestRunner(stream=open(os.devnull, "w")).run(suite)
    assert result.testsRun >= 4 and not result.failures and not result.errors, result.failures + result.errors


def test_conformance_runner_counts_real_outcomes():
    from sdc.conformance import run_all

    outcomes, total = run_all("test_relu")
    assert total > 1000 and outcomes
    assert all(o.status == "passed" for o in outcomes), [o for o in outcomes if o.status != "passed"]


# ---------------------------------------------------------------- bad input: one clean error each


def _assert_error(fn, pattern):
    with pytest.raises(SdcError) as err:
        fn()
    assert err.value.format().startswith("error:")
    import re

    assert re.search(pattern, err.value.format()), err.value.format()


def test_truncated_model(tmp_path):
    data = ENCODER.read_bytes()
    bad = tmp_path / "truncated.onnx"
    bad.write_bytes(data[: len(data) // 3])
    _assert_error(lambda: import_onnx(bad), r"truncated\.onnx.*not a valid ONNX model")


def test_random_bytes(tmp_path):
    bad = tmp_path / "random.onnx"
    bad.write_bytes(RNG.integers(0, 256, 4096).astype(np.uint8).tobytes())
    _assert_error(lambda: import_onnx(bad), r"random\.onnx.*not a valid ONNX model")


def test_empty_and_missing_files(tmp_path):
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    _assert_error(lambda: import_onnx(empty), r"empty\.onnx' is empty")
    _assert_error(lambda: import_onnx(tmp_path / "missing.onnx"), r"cannot open .*missing\.onnx.*no such file")


def test_reading_a_value_nothing_produces():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    model = _model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add1")], [x], [y])
    _assert_error(lambda: import_onnx(model), r"node 'add1' \(Add\) reads 'ghost', which no node")


def test_cycle():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
             helper.make_node("Relu", ["a"], ["b"], name="n2"),
             helper.make_node("Relu", ["a"], ["y"], name="n3")]
    _assert_error(lambda: import_onnx(_model(nodes, [x], [y])), r"cycle through node\(s\) 'n1', 'n2'")


def test_incompatible_static_shapes():
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [4, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = _model([helper.make_node("Add", ["a", "b"], ["y"], name="bad_add")], [a, b], [y])
    _assert_error(lambda: import_onnx(model), r"node 'bad_add' \(Add\): operand shapes are not broadcast-compatible")


def test_unknown_domain_and_unsupported_ops_are_listed_together():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Frobnicate", ["x"], ["a"], name="f1", domain="com.example"),
             helper.make_node("ImageDecoder", ["a"], ["b"], name="dec"),
             helper.make_node("Relu", ["b"], ["y"], name="ok")]
    model = _model(nodes, [x], [y], domain_opsets=[("com.example", 1)])
    _assert_error(lambda: import_onnx(model),
                  r"unsupported ONNX ops \(2\): com\.example\.Frobnicate .*'f1'.*; ImageDecoder \(opset 17, node 'dec'\)")


def _external_data_model(tmp_path: Path, location: str) -> Path:
    w = numpy_helper.from_array(np.ones((4,), np.float32), "w")
    w.data_location = TensorProto.EXTERNAL
    entry = w.external_data.add()
    entry.key, entry.value = "location", location
    w.ClearField("float_data")
    w.ClearField("raw_data")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    model = _model([helper.make_node("Add", ["x", "w"], ["y"])], [x], [y], [w])
    path = tmp_path / "model" / "m.onnx"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path


def test_external_data_inside_the_directory_loads(tmp_path):
    path = _external_data_model(tmp_path, "w.bin")
    (path.parent / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    x = RNG.standard_normal(4).astype(np.float32)
    np.testing.assert_allclose(sdc.compile(str(path))(x)[0], x + np.arange(4, dtype=np.float32))


@pytest.mark.parametrize("location,pattern", [
    ("/etc/passwd", "is absolute"),
    ("../secret.bin", "leaves the model's directory"),
    ("link.bin", "leaves the model's directory \\(through a symlink\\)"),
])
def test_external_data_escaping_the_directory_is_refused(tmp_path, location, pattern):
    (tmp_path / "secret.bin").write_bytes(np.ones(4, np.float32).tobytes())
    path = _external_data_model(tmp_path, location)
    if location == "link.bin":
        os.symlink(tmp_path / "secret.bin", path.parent / "link.bin")
    _assert_error(lambda: import_onnx(path), f"tensor 'w': external data path .*{pattern}")


def test_cli_compile_of_a_bad_model_is_one_line_and_exit_1(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage")
    proc = subprocess.run([sys.executable, "-m", "sdc.cli.main", "compile", str(bad), "-o", str(tmp_path / "o.sdc")],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error:") and "Traceback" not in proc.stderr
