"""`--precision bf16|f16`: the sdc-mixed-precision pass in the cpu pipeline, end to end.

Numerics against onnxruntime in f32 on fresh random inputs, with per-dtype tolerances on the
relative L2 error; the IR after the pass (softmax and layer norm f32, matmuls low); the weights the
artifact stores (low); the signature (unchanged); the errors.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from safetensors import safe_open

import sdc
from sdc.cli.main import main
from sdc.diagnostics import DiagnosticSink, PipelineError, SdcError
from sdc.dialect.op_classes import new_context
from sdc.dialect.opdef import all_ops
from sdc.options import CompileOptions
from sdc.transforms import mixed_precision as mp
from sdc.transforms.pipeline import build_pipeline, compile_pipeline

ENCODER = Path(__file__).resolve().parents[2] / "examples" / "models" / "encoder.onnx"
TOLERANCE = {"bf16": 2e-2, "f16": 5e-3}  # relative L2 error against f32
LOW = ("bf16", "f16")


def rel_l2(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def conv_net(rng: np.random.Generator) -> onnx.ModelProto:
    """Conv -> BatchNorm -> Relu -> MaxPool -> Conv(+bias) -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> Softmax."""
    def weight(name, *shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [
        weight("w1", 8, 3, 3, 3), weight("gamma", 8, scale=1.0), weight("beta", 8), weight("mean", 8),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "var"),
        weight("w2", 16, 8, 3, 3, scale=0.15), weight("b2", 16), weight("fc", 10, 16, scale=0.5), weight("fcb", 10),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "gamma", "beta", "mean", "var"], ["n1"], epsilon=1e-5),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fcb"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1),
    ]
    graph = helper.make_graph(
        nodes, "convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10]),
         helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def encoder_inputs(rng: np.random.Generator, batch: int = 3, seq: int = 11) -> dict[str, np.ndarray]:
    mask = np.ones((batch, seq), np.int64)
    mask[-1, rng.integers(3, seq):] = 0  # padding at the end of one sequence
    return {"input_ids": rng.integers(0, 1000, (batch, seq)).astype(np.int64), "attention_mask": mask}


@pytest.fixture(scope="module")
def rng() -> np.random.Generator:
    return np.random.default_rng()


@pytest.fixture(scope="module")
def encoder_artifacts(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mp")
    out = {}
    for precision in ("f32", *LOW):
        out[precision] = root / f"encoder-{precision}.sdc"
        sdc.compile(str(ENCODER), precision=precision, output=out[precision],
                    dump_ir=root / f"ir-{precision}" if precision == "bf16" else None)
    out["ir"] = root / "ir-bf16"
    return out


# ---------------------------------------------------------------- numerics against onnxruntime


@pytest.mark.parametrize("precision", LOW)
def test_encoder_matches_onnxruntime(encoder_artifacts, precision, rng):
    exe = sdc.runtime.load(encoder_artifacts[precision])
    session = ort.InferenceSession(str(ENCODER))
    for batch, seq in ((3, 11), (1, 17)):  # one artifact, two sizes of its dynamic dims
        feeds = encoder_inputs(rng, batch, seq)
        (want,) = session.run(None, feeds)
        (got,) = exe(**feeds)
        got = np.asarray(got)
        assert got.dtype == np.float32 and got.shape == want.shape
        assert rel_l2(got, want) < TOLERANCE[precision], (precision, rel_l2(got, want))
        assert rel_l2(got, want) > 1e-6  # it did compute in the low dtype


@pytest.mark.parametrize("precision", LOW)
def test_conv_net_matches_onnxruntime(precision, rng, tmp_path):
    model = conv_net(rng)
    exe = sdc.compile(model, precision=precision, output=tmp_path / "convnet.sdc")
    x = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    got = exe(x)
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.float32
        assert 1e-6 < rel_l2(g, w) < TOLERANCE[precision], (precision, rel_l2(g, w))
    weights = _weights(tmp_path / "convnet.sdc")
    # both convolutions' weights (the first with the batch norm folded in) are stored low, once each;
    # the second one's bias stays f32: its add feeds the global average pool, a mean
    by_shape = {tuple(t.shape): t for t in weights.values()}
    assert len(weights) == len(by_shape)
    low = f"torch.{_torch_name(precision)}"
    assert str(by_shape[(8, 3, 3, 3)].dtype) == low and str(by_shape[(16, 3, 3, 8)].dtype) == low
    assert str(by_shape[(1, 16, 1, 1)].dtype) == "torch.float32"


def test_cuda_pipeline_generates_low_kernels(rng, tmp_path, monkeypatch):
    """The cuda pipeline with the pass: its generated Triton kernels (interpreted here) compute in bf16."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    exe = sdc.compile(str(ENCODER), target="cuda", precision="bf16", output=tmp_path / "enc.sdc", device="cpu")
    kernels = list((tmp_path / "enc.sdc" / "kernels").glob("*.py"))
    assert kernels and any("tl.bfloat16" in k.read_text() for k in kernels)
    feeds = encoder_inputs(rng, 2, 9)
    (want,) = ort.InferenceSession(str(ENCODER)).run(None, feeds)
    (got,) = exe(**feeds)
    assert 1e-6 < rel_l2(got, want) < TOLERANCE["bf16"]


# ---------------------------------------------------------------- the IR, the weights, the signature


def test_ir_after_the_pass_keeps_softmax_and_norms_in_f32(encoder_artifacts):
    [after] = sorted(encoder_artifacts["ir"].glob("*-sdc-mixed-precision.mlir"))
    text = after.read_text()
    assert 'sdc.precision = "bf16"' in text
    results = {op: re.findall(rf'"sdc\.{op}".*-> tensor<[^>]*x(\w+)>$', text, re.M)
               for op in ("matmul", "softmax", "layer_norm")}
    assert results["matmul"] == ["bf16"] * 12
    assert results["softmax"] == ["f32"] * 2
    assert results["layer_norm"] == ["f32"] * 5
    # the pass runs after batch-norm folding and before layouts and fusion
    names = [p.name.split("-", 1)[1] for p in sorted(encoder_artifacts["ir"].glob("*.mlir"))]
    assert names.index("sdc-mixed-precision.mlir") == names.index("sdc-fold-conv-batch-norm.mlir") + 1
    assert names.index("sdc-mixed-precision.mlir") < names.index("sdc-layout-constraints.mlir")


def test_weights_are_stored_in_the_compute_dtype(encoder_artifacts):
    low = _weights(encoder_artifacts["bf16"])
    full = _weights(encoder_artifacts["f32"])
    matrices = {k: t for k, t in low.items() if t.ndim == 2}
    assert len(matrices) == 10  # 8 matmul weights, 2 embedding tables: each once, cast at compile time
    assert all(str(t.dtype) == "torch.bfloat16" for t in matrices.values())
    assert all(str(t.dtype) == "torch.float32" for t in full.values() if t.is_floating_point())
    assert sum(t.nbytes for t in low.values()) < 0.6 * sum(t.nbytes for t in full.values())


def test_signature_is_unchanged(encoder_artifacts):
    f32, bf16 = sdc.runtime.load(encoder_artifacts["f32"]), sdc.runtime.load(encoder_artifacts["bf16"])
    assert f32.inputs == bf16.inputs and f32.outputs == bf16.outputs
    assert [o.dtype for o in bf16.outputs] == ["f32"]


# ---------------------------------------------------------------- options, pipeline, command line, errors


def test_pipeline_adds_the_pass_only_below_f32():
    for target in ("cpu", "cuda"):
        assert not any("mixed-precision" in p for p in compile_pipeline(CompileOptions(target=target)))
        bf16 = compile_pipeline(CompileOptions(target=target, precision="bf16"))
        at = bf16.index("sdc-mixed-precision{precision=bf16}")
        assert bf16[at - 1] == "sdc-fold-conv-batch-norm" and bf16[at + 1].startswith("sdc-layout-constraints")
    assert CompileOptions(precision="fp16").precision == "f16"  # the spelling of --precision fp16


def test_refusals():
    with pytest.raises(SdcError, match=r"unknown precision 'fp8' \(precisions: f32, tf32, bf16, f16\)"):
        CompileOptions(precision="fp8")
    with pytest.raises(SdcError, match=r"precision 'tf32' is not supported on target 'cpu' \(it runs f32, bf16, "
                                       r"f16\): tf32 is a mode of NVIDIA tensor cores"):
        sdc.compile(str(ENCODER), precision="tf32")
    with pytest.raises(PipelineError, match=r"pass 'sdc-mixed-precision' option 'precision': unknown precision 'x'"):
        with new_context():
            build_pipeline("sdc-mixed-precision{precision=x}", DiagnosticSink())


def test_command_line(tmp_path, capsys):
    out = tmp_path / "enc.sdc"
    assert main(["compile", str(ENCODER), "-o", str(out), "--precision", "bf16"]) == 0
    assert "bf16" in {str(t.dtype).removeprefix("torch.").replace("bfloat16", "bf16") for t in _weights(out).values()}
    assert main(["compile", str(ENCODER), "-o", str(tmp_path / "bad.sdc"), "--precision", "fp8"]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: unknown precision 'fp8' (precisions: f32, tf32, bf16, f16)")


def test_every_op_has_a_policy():
    # The policies live on the OpDefs (test_opdef_hooks.py checks every op has one of the three).
    ops = all_ops()
    assert {mp.policy(f"sdc.{n}") for n in ops} == {"low", "keep", "follow"}
    assert {n for n, op in ops.items() if op.accumulates} == {
        "reduce_sum", "reduce_mean", "reduce_prod", "cumsum", "cumprod", "avg_pool", "global_avg_pool"}
    assert {mp.policy(f"sdc.{n}") for n in ("softmax", "layer_norm", "reduce_sum", "cast")} == {"keep"}
    assert {mp.policy(f"sdc.{n}") for n in ("matmul", "conv", "add", "gelu", "where")} == {"low"}


def _weights(artifact: Path) -> dict:
    with safe_open(str(artifact / "weights" / "rank0.safetensors"), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def _torch_name(precision: str) -> str:
    return {"bf16": "bfloat16", "f16": "float16"}[precision]
