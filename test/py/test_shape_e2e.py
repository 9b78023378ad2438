"""Symbolic shapes end to end: ONNX models whose dynamic dims are related compile once
(`sdc compile`), run on every input size the guards allow and match onnxruntime (`sdc run`),
and reject inputs that break a relation with one clean `error:` naming the inputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from sdc.cli.main import main

RNG = np.random.default_rng()


def _model(nodes, inputs, outputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    # IR version 10: what onnxruntime reads (a newer onnx writes a newer one by default)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.checker.check_model(model)
    return model


def _f32(name: str, dims) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def compile_model(model: onnx.ModelProto, tmp: Path, name: str, *options: str) -> Path:
    path = tmp / f"{name}.onnx"
    onnx.save(model, str(path))
    out = tmp / f"{name}.sdc"
    assert main(["compile", str(path), "-o", str(out), *options]) == 0
    return out


def run(artifact: Path, tmp: Path, inputs: dict[str, np.ndarray], capsys) -> tuple[int, list[np.ndarray], str]:
    """`sdc run` with the inputs as .npy files; (exit code, outputs, stderr)."""
    args = ["run", str(artifact), "--output-dir", str(tmp / "out")]
    for name, array in inputs.items():
        np.save(tmp / f"{name}.npy", array)
        args += ["--input", f"{name}={tmp / f'{name}.npy'}"]
    for old in (tmp / "out").glob("*.npy") if (tmp / "out").is_dir() else ():
        old.unlink()
    code = main(args)
    err = capsys.readouterr().err
    outs = [np.load(p) for p in sorted((tmp / "out").glob("*.npy"))] if code == 0 else []
    return code, outs, err


def ort_run(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, inputs)


def guards(artifact: Path) -> list[str]:
    return [g["condition"] for g in json.loads((artifact / "manifest.json").read_text())["entry"]["guards"]]


def check_matches_ort(model, artifact, tmp, inputs, capsys) -> None:
    code, outs, err = run(artifact, tmp, inputs, capsys)
    assert code == 0, err
    expected = ort_run(model, inputs)
    assert len(outs) == len(expected)
    for got, want in zip(outs, expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def check_rejected(artifact, tmp, inputs, capsys, message: str) -> None:
    code, _, err = run(artifact, tmp, inputs, capsys)
    assert code == 1
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert message in err, err


def randn(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------- equal dims


def test_equal_dims(tmp_path, capsys):
    model = _model([helper.make_node("Add", ["a", "b"], ["y"])], [_f32("a", ["N"]), _f32("b", ["M"])],
                   [_f32("y", ["N"])])
    artifact = compile_model(model, tmp_path, "equal")
    assert guards(artifact) == ["M == N"]
    for n in (3, 17):  # one artifact, any size its guards allow
        check_matches_ort(model, artifact, tmp_path, {"a": randn(n), "b": randn(n)}, capsys)
    check_rejected(artifact, tmp_path, {"a": randn(2), "b": randn(3)}, capsys,
                   "inputs 'a' (dim 0 = 2) and 'b' (dim 0 = 3) must be equal (M == N: 'sdc.add' at Add_0")


# ---------------------------------------------------------------- linearly related dims


def test_linear_relation_from_a_concat(tmp_path, capsys):
    model = _model([helper.make_node("Concat", ["a", "b"], ["ab"], axis=0),
                    helper.make_node("Mul", ["ab", "c"], ["y"])],
                   [_f32("a", ["N", 4]), _f32("b", ["M", 4]), _f32("c", ["K", 4])], [_f32("y", ["K", 4])])
    artifact = compile_model(model, tmp_path, "linear")
    assert guards(artifact) == ["K == M + N"]
    check_matches_ort(model, artifact, tmp_path, {"a": randn(2, 4), "b": randn(3, 4), "c": randn(5, 4)}, capsys)
    check_matches_ort(model, artifact, tmp_path, {"a": randn(7, 4), "b": randn(1, 4), "c": randn(8, 4)}, capsys)
    check_rejected(artifact, tmp_path, {"a": randn(2, 4), "b": randn(3, 4), "c": randn(6, 4)}, capsys,
                   "input 'c' (dim 0 = 6) must equal M + N = 5, where N is input 'a' dim 0 = 2; "
                   "M is input 'b' dim 0 = 3")
    out = json.loads((artifact / "manifest.json").read_text())["entry"]["outputs"]
    assert out[0]["shape"] == ["M + N", 4]


# ---------------------------------------------------------------- divisible dims


def test_divisible_dim_and_a_user_bound(tmp_path, capsys):
    shape = numpy_helper.from_array(np.array([2, -1], dtype=np.int64), "shape")
    model = _model([helper.make_node("Reshape", ["x", "shape"], ["y"])], [_f32("x", ["N"])], [_f32("y", [2, "H"])],
                   [shape])
    artifact = compile_model(model, tmp_path, "divisible", "--input-shape", "N=2..64")
    assert guards(artifact) == ["2 <= N <= 64", "N % 2 == 0"]
    for n in (6, 64):
        check_matches_ort(model, artifact, tmp_path, {"x": randn(n)}, capsys)
    check_rejected(artifact, tmp_path, {"x": randn(7)}, capsys, "input 'x' (dim 0 = 7) must be a multiple of 2")
    check_rejected(artifact, tmp_path, {"x": randn(66)}, capsys,
                   "input 'x' (dim 0 = 66) must be between 2 and 64 (2 <= N <= 64: --input-shape N=2..64)")


# ---------------------------------------------------------------- conv arithmetic


def test_conv_and_pool_branches_must_agree(tmp_path, capsys):
    # A 3x3 stride-2 conv gives (H + 1)//2, a 2x2 stride-2 pool H//2 (then a 1x1 conv to 4 channels):
    # adding them needs even H and W.
    w = numpy_helper.from_array(randn(4, 3, 3, 3), "w")
    v = numpy_helper.from_array(randn(4, 3, 1, 1), "v")
    model = _model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
                    helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                    helper.make_node("Conv", ["p", "v"], ["q"]),
                    helper.make_node("Add", ["c", "q"], ["y"])],
                   [_f32("x", [1, 3, "H", "W"])], [_f32("y", [1, 4, None, None])], [w, v])
    artifact = compile_model(model, tmp_path, "conv")
    assert guards(artifact) == ["H >= 2", "H % 2 == 0", "W >= 2", "W % 2 == 0"]
    for h, w_ in ((8, 6), (12, 20)):
        check_matches_ort(model, artifact, tmp_path, {"x": randn(1, 3, h, w_)}, capsys)
    check_rejected(artifact, tmp_path, {"x": randn(1, 3, 7, 8)}, capsys,
                   "input 'x' (dim 2 = 7) must be a multiple of 2 (H % 2 == 0: 'sdc.add' at Add_")


def test_conv_output_fixed_by_a_dense_layer(tmp_path, capsys):
    # (L + 2 - 3)//2 + 1 must be 5 for the weight after the flatten: L is 9 or 10.
    w = numpy_helper.from_array(randn(2, 3, 3), "w")
    d = numpy_helper.from_array(randn(5, 6), "d")
    model = _model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1], strides=[2]),
                    helper.make_node("MatMul", ["c", "d"], ["y"])],
                   [_f32("x", ["B", 3, "L"])], [_f32("y", ["B", 2, 6])], [w, d])
    artifact = compile_model(model, tmp_path, "dense")
    assert guards(artifact) == ["9 <= L <= 10"]
    for b, length in ((1, 9), (3, 10)):
        check_matches_ort(model, artifact, tmp_path, {"x": randn(b, 3, length)}, capsys)
    check_rejected(artifact, tmp_path, {"x": randn(1, 3, 11)}, capsys,
                   "input 'x' (dim 2 = 11) must be between 9 and 10")


# ---------------------------------------------------------------- as a user runs it


def test_random_inputs_follow_the_guards_and_a_broken_one_is_one_line(tmp_path, capsys):
    model = _model([helper.make_node("Concat", ["a", "b"], ["ab"], axis=0),
                    helper.make_node("Mul", ["ab", "c"], ["y"])],
                   [_f32("a", ["N", 4]), _f32("b", ["M", 4]), _f32("c", ["K", 4])], [_f32("y", ["K", 4])])
    artifact = compile_model(model, tmp_path, "cli")
    assert main(["run", str(artifact), "--dim", "N=2", "--dim", "M=5"]) == 0
    assert "input  c  f32[7, 4]  random" in capsys.readouterr().out  # K chosen from K == M + N
    np.save(tmp_path / "a.npy", randn(2, 4))
    done = subprocess.run([sys.executable, "-m", "sdc.cli.main", "run", str(artifact), "--input",
                           f"a={tmp_path / 'a.npy'}", "--dim", "M=3", "--dim", "K=9"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith("error: input 'c' (dim 0 = 9) must equal M + N = 5")
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1


def test_compile_reports_a_contradiction_at_the_node(tmp_path, capsys):
    model = _model([helper.make_node("Concat", ["a", "b"], ["ab"], axis=0),
                    helper.make_node("Add", ["ab", "a"], ["y"], name="the_add")],
                   [_f32("a", ["N"]), _f32("b", ["M"])], [_f32("y", ["N"])])
    path = tmp_path / "bad.onnx"
    onnx.save(model, str(path))
    assert main(["compile", str(path), "-o", str(tmp_path / "bad.sdc")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bad.onnx:2:0: error: 'sdc.add' op shape constraints contradict:"), err
    assert "M >= 1 is false with M = 0" in err
    assert "note: conflicting constraint: M >= 1 (input 'b' dim 0 is a size)" in err
    assert not (tmp_path / "bad.sdc").exists()


# ---------------------------------------------------------------- the pass's registry entry and options


def test_registered_under_its_own_name_and_bindings_parse():
    from sdc.transforms import get_pass
    from sdc.dialect.bindings import ShapeBinding, parse_bindings

    assert get_pass("sdc-shape-constraints").name == "sdc-shape-constraints"
    assert parse_bindings("x=B,3,?,224;B=1..64 S=..512 N=8..  K=4") == [
        ShapeBinding("x", dims=("B", 3, "?", 224)), ShapeBinding("B", lo=1, hi=64), ShapeBinding("S", hi=512),
        ShapeBinding("N", lo=8), ShapeBinding("K", value=4)]
    for bad in ("B=5..2", "B=..", "B=x..y", "x=1,-2", "=3", "B"):
        with pytest.raises(ValueError):
            parse_bindings(bad)
    assert main(["compile", "m.onnx", "--input-shape", "B=2..x"]) == 2  # a usage error, before any work
