"""`--dump-ir` writes the codegen stages (kernels, plan), and `--weights none` artifacts whose large
weights the loader synthesizes from a seed (sdc/codegen/artifact.py, sdc/runtime/synth.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from sdc.cli.main import main
from sdc.runtime import load, read_artifact
from sdc.runtime.synth import MIN_ELEMENTS, init_rule, synthesize, tensor_seed

# Two layers wide enough that both matrices (128x64, 32x128) are synthesized and the biases are not.
MODEL = """
func.func @main(%x: tensor<?x64xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["B", 64]>})
    -> (tensor<?x32xf32> {sdc.name = "y"}) {
  %w1 = "sdc.parameter"() {name = "fc1.weight"} : () -> tensor<128x64xf32>
  %b1 = "sdc.parameter"() {name = "fc1.bias"} : () -> tensor<128xf32>
  %w2 = "sdc.parameter"() {name = "fc2.weight"} : () -> tensor<32x128xf32>
  %b2 = "sdc.parameter"() {name = "fc2.bias"} : () -> tensor<32xf32>
  %0 = "sdc.matmul"(%x, %w1) {transpose_lhs = false, transpose_rhs = true} : (tensor<?x64xf32>, tensor<128x64xf32>) -> tensor<?x128xf32>
  %1 = "sdc.add"(%0, %b1) : (tensor<?x128xf32>, tensor<128xf32>) -> tensor<?x128xf32>
  %2 = "sdc.gelu"(%1) {approximate = "none"} : (tensor<?x128xf32>) -> tensor<?x128xf32>
  %3 = "sdc.matmul"(%2, %w2) {transpose_lhs = false, transpose_rhs = true} : (tensor<?x128xf32>, tensor<32x128xf32>) -> tensor<?x32xf32>
  %4 = "sdc.add"(%3, %b2) : (tensor<?x32xf32>, tensor<32xf32>) -> tensor<?x32xf32>
  return %4 : tensor<?x32xf32>
}
"""
SHAPES = {"fc1.weight": (128, 64), "fc1.bias": (128,), "fc2.weight": (32, 128), "fc2.bias": (32,)}


def reference(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    """float64 numpy, erf from math: independent of torch and of sdc."""
    def gelu(v: np.ndarray) -> np.ndarray:
        return 0.5 * v * (1.0 + np.vectorize(math.erf)(v / math.sqrt(2.0)))

    f = {k: np.asarray(v, dtype=np.float64) for k, v in p.items()}
    h = gelu(x.astype(np.float64) @ f["fc1.weight"].T + f["fc1.bias"])
    return h @ f["fc2.weight"].T + f["fc2.bias"]


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> tuple[Path, Path, dict[str, np.ndarray]]:
    root = tmp_path_factory.mktemp("dumpsynth")
    rng = np.random.default_rng(5)
    params = {k: rng.standard_normal(s, dtype=np.float32) for k, s in SHAPES.items()}
    (root / "m.mlir").write_text(MODEL)
    np.savez(root / "p.npz", **params)
    return root / "m.mlir", root / "p.npz", params


def compile_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(["compile", *map(str, argv)])
    done = capsys.readouterr()
    return code, done.out, done.err


# ---------------------------------------------------------------- --dump-ir: kernels and plan


def test_dump_ir_writes_kernels_and_plan(model, tmp_path, capsys):
    mlir, params, _ = model
    out, ir = tmp_path / "m.sdc", tmp_path / "ir"
    code, _, err = compile_cli(capsys, mlir, "--params", params, "--target", "cuda", "-o", out, "--dump-ir", ir)
    assert code == 0, err
    last_pass = max(int(p.name[:2]) for p in ir.glob("*.mlir"))
    kernels_dir = ir / f"{last_pass + 1:02d}-kernels"
    dumped = {p.name: p.read_bytes() for p in kernels_dir.iterdir()}
    written = {p.name: p.read_bytes() for p in (out / "kernels").iterdir()}
    assert dumped == written and len(written) == 2  # matmul+bias+gelu, matmul+bias
    plan_json = ir / f"{last_pass + 2:02d}-plan.json"
    assert plan_json.read_bytes() == (out / "plan.json").read_bytes()
    summary = (ir / f"{last_pass + 2:02d}-plan.txt").read_text().splitlines()
    launches = [s for s in json.loads(plan_json.read_text())["ranks"][0]["steps"] if s["kind"] == "launch"]
    for step in launches:
        line = next(li for li in summary if f" launch {step['id']} " in li)
        kernel = step["kernel"]
        assert f"triton {kernel['template']} {kernel['source']} grid=[{kernel['grid'][0]}]" in line
        assert f"num_warps={kernel['num_warps']}" in line
        assert line.endswith(f"({', '.join(step['inputs'])}) -> ({', '.join(step['outputs'])})")
    last_three = sorted(p.name for p in ir.iterdir())[-3:]
    assert last_three == [kernels_dir.name, plan_json.name, f"{last_pass + 2:02d}-plan.txt"]


def test_dump_ir_into_a_file_is_one_error_line(model, tmp_path, capsys):
    mlir, params, _ = model
    (tmp_path / "taken").write_text("")
    code, out, err = compile_cli(capsys, mlir, "--params", params, "--target", "cuda", "-o", tmp_path / "m.sdc",
                                 "--dump-ir", tmp_path / "taken")
    assert code == 1 and out == ""
    assert err.startswith("error: cannot create the IR dump directory") and err.count("\n") == 1


def test_dump_codegen_refuses_an_unwritable_place(model, tmp_path):
    from sdc.codegen.artifact import dump_codegen
    from sdc.codegen.plan import Plan
    from sdc.diagnostics import SdcError

    (tmp_path / "file").write_text("")
    with pytest.raises(SdcError, match=r"^cannot write the IR dump to '.*file/sub'"):
        dump_codegen(Plan("cuda", {}, 1, [], [], [], []), tmp_path / "file" / "sub", 9)


# ---------------------------------------------------------------- --weights none


@pytest.fixture(scope="module")
def synthesized(model, tmp_path_factory) -> Path:
    mlir, params, _ = model
    out = tmp_path_factory.mktemp("synth") / "m.sdc"
    assert main(["compile", str(mlir), "--params", str(params), "-o", str(out), "--weights", "none",
                 "--weight-seed", "7"]) == 0
    return out


def test_manifest_marks_and_describes_the_synthesized_weights(synthesized):
    m = json.loads((synthesized / "manifest.json").read_text())
    section = m["weights"]
    assert section["synthesized"] is True and section["seed"] == 7
    assert section["ranks"] == [{
        "fc1.weight": {"dtype": "f32", "shape": [128, 64], "init": "normal", "mean": 0.0, "std": 0.02},
        "fc2.weight": {"dtype": "f32", "shape": [32, 128], "init": "normal", "mean": 0.0, "std": 0.02}}]
    # only the biases travel: 160 floats and a header, against 48 KiB of matrices
    assert m["files"]["weights/rank0.safetensors"]["bytes"] < 1024
    assert m["compile_options"]["weights"] == "none" and m["compile_options"]["weight_seed"] == 7


def test_synthesized_weights_are_deterministic_and_seeded(synthesized, tmp_path, model):
    first, second = read_artifact(synthesized).load_weights(0), read_artifact(synthesized).load_weights(0)
    assert sorted(first) == sorted(SHAPES)
    assert all(torch.equal(first[k], second[k]) for k in first)
    w = first["fc1.weight"]
    assert 0.015 < float(w.std()) < 0.025 and abs(float(w.mean())) < 0.005
    mlir, params, given = model
    other = tmp_path / "seed8.sdc"
    assert main(["compile", str(mlir), "--params", str(params), "-o", str(other), "--weights", "none",
                 "--weight-seed", "8"]) == 0
    reseeded = read_artifact(other).load_weights(0)
    assert not torch.equal(reseeded["fc1.weight"], w)
    assert torch.equal(reseeded["fc1.bias"], first["fc1.bias"])  # small tensors are the model's own
    np.testing.assert_array_equal(first["fc1.bias"].numpy(), given["fc1.bias"])


def test_synthesized_model_matches_the_model_compiled_with_those_weights(synthesized, tmp_path, model, capsys):
    mlir, _, _ = model
    weights = {k: v.numpy() for k, v in read_artifact(synthesized).load_weights(0).items()}
    np.savez(tmp_path / "drawn.npz", **weights)
    assert main(["compile", str(mlir), "--params", str(tmp_path / "drawn.npz"), "-o", str(tmp_path / "full.sdc")]) == 0
    x = np.random.default_rng(9).standard_normal((5, 64), dtype=np.float32)
    (got,) = load(synthesized)(x)
    (full,) = load(tmp_path / "full.sdc")(x)
    assert np.isfinite(got).all() and np.abs(got).max() > 0
    np.testing.assert_allclose(got, full, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got, reference(x, weights), rtol=1e-4, atol=1e-5)
    capsys.readouterr()
    assert main(["inspect", str(synthesized)]) == 0
    text = capsys.readouterr().out
    assert "weights: synthesized from seed 7 (2 on rank 0, 48.0 KiB; the rest in the file)" in text
    assert "fc1.weight  f32[128, 64]  32.0 KiB  synthesized: normal(0.0, 0.02)" in text
    assert "2 weights (640 B) + 2 synthesized (48.0 KiB)" in text
    assert main(["run", str(synthesized)]) == 0
    assert "weights synthesized from seed 7 (torch CPU generator, then moved to cpu)" in capsys.readouterr().out


def _tampered(synthesized: Path, tmp_path: Path, edit) -> Path:
    import shutil

    copy = tmp_path / "tampered.sdc"
    shutil.copytree(synthesized, copy)
    m = json.loads((copy / "manifest.json").read_text())
    edit(m)
    (copy / "manifest.json").write_text(json.dumps(m))
    return copy


@pytest.mark.parametrize("edit, message", [
    (lambda m: m["weights"]["ranks"][0]["fc1.weight"].update(shape=[1 << 20, 1 << 20]),
     r"synthesized weight 'fc1.weight' \(rank 0\) is f32\[1048576, 1048576\], plan.json declares f32\[128, 64\]"),
    (lambda m: m["weights"]["ranks"][0]["fc1.weight"].update(init="os.system"), r"has init 'os.system'"),
    (lambda m: m["weights"]["ranks"][0]["fc1.weight"].update(std=1e300), r"'std' must be a finite"),
    (lambda m: m["weights"]["ranks"][0].update(ghost={"dtype": "f32", "shape": [4], "init": "ones"}),
     r"synthesized weight 'ghost' \(rank 0\) is bound by no value of plan.json"),
    (lambda m: m["weights"]["ranks"][0].update({"fc1.bias": {"dtype": "f32", "shape": [128], "init": "ones"}}),
     r"weight 'fc1.bias' is both in weights/rank0.safetensors and listed as synthesized"),
    (lambda m: m["weights"].update(seed=-1), r"weights.seed must be an integer"),
    (lambda m: m["weights"].update(ranks=[]), r"weights.ranks must be a list of 1 objects"),
    (lambda m: m["weights"]["ranks"][0]["fc2.weight"].update(dtype="i64"), r"only floating-point weights"),
])
def test_a_tampered_weights_section_is_one_error(synthesized, tmp_path, capsys, edit, message):
    bad = _tampered(synthesized, tmp_path, edit)
    assert main(["run", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: bad artifact '{bad}': manifest.json: "), err
    import re

    assert re.search(message, err), err


def test_synthesis_stays_under_the_allocation_limit(synthesized, monkeypatch, capsys):
    monkeypatch.setenv("SDC_MAX_ALLOC", "16K")
    assert main(["run", str(synthesized)]) == 1
    err = capsys.readouterr().err
    assert err == ("error: synthesized weight 'fc1.weight' would take 32.0 KiB, over the allocation limit of "
                   "16.0 KiB (set SDC_MAX_ALLOC to raise it)\n")


def test_weight_seed_needs_weights_none(model, tmp_path, capsys):
    mlir, params, _ = model
    code, _, err = compile_cli(capsys, mlir, "--params", params, "-o", tmp_path / "x.sdc", "--weight-seed", "3")
    assert code == 2 and "--weight-seed needs --weights none" in err


# ---------------------------------------------------------------- the rules themselves


def test_init_rules_and_per_tensor_determinism():
    assert init_rule("layers.0.attn.q_proj.weight", [64, 64])["init"] == "normal"
    assert init_rule("encoder.layer_norm.weight", [4096]) == {"init": "ones"}
    assert init_rule("ln_f.weight", [4096]) == {"init": "ones"}
    assert init_rule("encoder.layer_norm.bias", [4096]) == {"init": "zeros"}
    assert init_rule("fc.bias", [4096]) == {"init": "zeros"}
    spec = {"dtype": "bf16", "shape": [64, 32], "init": "uniform", "bound": 0.5}
    a, b = synthesize("w", spec, 3), synthesize("w", spec, 3)
    assert a.dtype == torch.bfloat16 and torch.equal(a, b) and float(a.abs().max()) <= 0.5
    assert not torch.equal(a, synthesize("v", spec, 3))  # each tensor its own stream
    assert tensor_seed(3, "w") != tensor_seed(4, "w")
    assert MIN_ELEMENTS == 1024


def test_the_python_api_dumps_and_synthesizes_the_same(model, synthesized, tmp_path):
    """sdc.compile's path (compile_module -> build_artifact) takes the same options as the CLI."""
    from sdc.compiler import build_artifact, compile_module
    from sdc.ir_text import parse_module
    from sdc.options import CompileOptions

    _, _, params = model
    options = CompileOptions(target="cuda", dump_ir=tmp_path / "ir")
    build_artifact(parse_module(MODEL), params, tmp_path / "c.sdc", options)
    assert [p.name for p in sorted((tmp_path / "ir").glob("*-kernels/*.py"))] == ["k0.py", "k1.py"]
    exe = compile_module(parse_module(MODEL), params, CompileOptions(weights="none", weight_seed=7))
    mine, cli = exe.artifact.load_weights(0), read_artifact(synthesized).load_weights(0)
    assert all(torch.equal(mine[k], cli[k]) for k in SHAPES)


def test_bad_weight_options_are_one_error(model, tmp_path, capsys):
    from sdc.diagnostics import SdcError
    from sdc.options import CompileOptions

    with pytest.raises(SdcError, match=r"^weights must be included or none, found 'random'$"):
        CompileOptions(weights="random")
    with pytest.raises(SdcError, match=r"^weight_seed must be an integer from 0 to 2\*\*63-1, found -1$"):
        CompileOptions(weight_seed=-1)
    mlir, params, _ = model
    code, _, err = compile_cli(capsys, mlir, "--params", params, "-o", tmp_path / "t.sdc", "--weights", "none",
                               "--train", "--loss", "mse")
    assert code == 1 and err.startswith("error: --weights none is for inference artifacts") and err.count("\n") == 1
