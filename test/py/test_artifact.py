"""The artifact directory: what is written, and that loading refuses every kind of bad artifact
with one clear error naming the file."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
import shutil
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import sdc.runtime
import sdc.target
from sdc.compiler import compile_module
from sdc.diagnostics import SdcError
from sdc.ir_text import parse_module

# A parameter, a large constant (must land in the weights file, not in JSON), and clip with
# its non-finite default (max = +inf) encoded portably.
PROGRAM = """
func.func @main(%x: tensor<?x300xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["B", 300]>})
    -> (tensor<?x300xf32> {sdc.name = "y"}) {
  %w = "sdc.parameter"() {name = "scale"} : () -> tensor<300xf32>
  %c = "sdc.iota"() {dimension = 0 : i64, dtype = f32, shape = [300]} : () -> tensor<300xf32>
  %0 = "sdc.mul"(%x, %w) : (tensor<?x300xf32>, tensor<300xf32>) -> tensor<?x300xf32>
  %1 = "sdc.add"(%0, %c) : (tensor<?x300xf32>, tensor<300xf32>) -> tensor<?x300xf32>
  %2 = "sdc.clip"(%1) {min = 0.0 : f64} : (tensor<?x300xf32>) -> tensor<?x300xf32>
  return %2 : tensor<?x300xf32>
}
"""

BIG_CONSTANT = """
func.func @main(%x: tensor<64x64xf32> {sdc.name = "x"}) -> tensor<64x64xf32> {
  %c = "sdc.constant"() {value = dense<0.125> : tensor<64x64xf32>} : () -> tensor<64x64xf32>
  %0 = "sdc.add"(%x, %c) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  return %0 : tensor<64x64xf32>
}
"""


@pytest.fixture(scope="module")
def scale() -> np.ndarray:
    return np.random.default_rng(7).standard_normal(300, dtype=np.float32)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, scale) -> Path:
    path = tmp_path_factory.mktemp("art") / "model.sdc"
    compile_module(parse_module(PROGRAM), {"scale": scale}, output=path)
    return path


@pytest.fixture
def artifact(pristine, tmp_path) -> Path:
    """A fresh copy each test may damage."""
    copy = tmp_path / "model.sdc"
    shutil.copytree(pristine, copy)
    return copy


def reference(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return np.maximum(x * scale + np.arange(300, dtype=np.float32), 0)


def read_manifest(path: Path) -> dict:
    return json.loads((path / "manifest.json").read_text())


def write_manifest(path: Path, manifest: dict) -> None:
    (path / "manifest.json").write_text(json.dumps(manifest))


def rehash(path: Path) -> None:
    """Make the manifest agree with the files again, as a careless or hostile editor would."""
    manifest = read_manifest(path)
    for rel in manifest["files"]:
        data = (path / rel).read_bytes()
        manifest["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    write_manifest(path, manifest)


def edit_plan(path: Path, edit) -> None:
    plan = json.loads((path / "plan.json").read_text())
    edit(plan)
    (path / "plan.json").write_text(json.dumps(plan))
    rehash(path)


def strict_json(text: str):
    def refuse(name):
        raise AssertionError(f"{name} is not JSON (jq cannot read it)")

    return json.loads(text, parse_constant=refuse)


# ---------------------------------------------------------------- what is written


def test_layout_and_manifest(pristine, scale):
    files = sorted(p.relative_to(pristine).as_posix() for p in pristine.rglob("*"))
    assert files == ["kernels", "kernels/cpu.c", "manifest.json", "plan.json", "program.mlir", "weights",
                     "weights/rank0.safetensors"]
    m = strict_json((pristine / "manifest.json").read_text())
    assert m["format"] == "sdc-artifact" and m["format_version"] == 2
    assert m["sdc_version"] == sdc.__version__
    assert (m["target"], m["world_size"], m["mesh"]) == ("cpu", 1, {})
    assert m["entry"] == {"inputs": [{"name": "x", "dtype": "f32", "shape": ["B", 300]}],
                          "outputs": [{"name": "y", "dtype": "f32", "shape": ["B", 300]}],
                          "guards": []}
    assert m["compile_options"]["pipeline"] == ("sdc-verify,sdc-canonicalize,cse,sdc-patch-conv,sdc-shape-constraints,"
                                                "sdc-fold-conv-batch-norm,sdc-layout-constraints{target=cpu},sdc-fuse{target=cpu},sdc-verify")
    assert m["compile_options"]["target"] == "cpu"
    assert {"python", "torch", "numpy", "onnx", "platform"} <= set(m["environment"])
    assert m["environment"]["torch"] == metadata.version("torch")  # the distribution's (no +cu130 local part)
    assert set(m["files"]) == {"plan.json", "program.mlir", "weights/rank0.safetensors", "kernels/cpu.c"}
    for rel, info in m["files"].items():
        data = (pristine / rel).read_bytes()
        assert info == {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def test_plan_is_plain_json_with_weights_by_name(pristine, scale):
    plan = strict_json((pristine / "plan.json").read_text())
    assert plan["world_size"] == 1 and [r["rank"] for r in plan["ranks"]] == [0]
    rank = plan["ranks"][0]
    assert rank["weights"] == "weights/rank0.safetensors"
    assert rank["streams"] == ["compute"]
    launches = [s for s in rank["steps"] if s["kind"] == "launch"]
    assert [s["id"] for s in launches] == ["k0", "k1"] and all(s["stream"] == 0 for s in launches)
    # the elementwise chain is a generated C kernel (docs/codegen.md); iota stays a torch op
    assert [s["kernel"]["backend"] for s in launches] == ["reference", "c"]
    assert launches[1]["kernel"]["source"] == "kernels/cpu.c" and launches[1]["kernel"]["entry"] == "k1"
    groups = [[op["op"] for op in s["kernel"]["ops"]] for s in launches]
    assert groups == [["iota"], ["mul", "add", "clip"]]  # sdc-fuse made one kernel of the elementwise chain
    iota = launches[0]["outputs"][0]
    assert launches[1]["inputs"] == ["v0", "v1", iota] and launches[1]["outputs"] == rank["outputs"]
    made_in_k1 = [v for op in launches[1]["kernel"]["ops"][:-1] for v in op["outputs"]]
    assert rank["steps"][-1] == {"kind": "free", "values": [iota, *made_in_k1]}  # after their last reader
    clip = launches[-1]["kernel"]["ops"][-1]
    assert clip["attrs"] == {"min": 0.0, "max": {"float": "inf"}}
    weight_values = {v["weight"]: vid for vid, v in rank["values"].items() if "weight" in v}
    assert list(weight_values) == ["scale"]
    weights = load_file(str(pristine / "weights/rank0.safetensors"))
    np.testing.assert_array_equal(weights["scale"].numpy(), scale)
    program = (pristine / "program.mlir").read_text()
    assert '"sdc.parameter"() {name = "scale"}' in program and "loc(" in program


def test_big_constants_go_to_the_weights_file(tmp_path):
    path = tmp_path / "c.sdc"
    exe = compile_module(parse_module(BIG_CONSTANT), output=path)
    plan_text = (path / "plan.json").read_text()
    assert len(plan_text) < 2000 and "0.125" not in plan_text
    weights = load_file(str(path / "weights/rank0.safetensors"))
    (name,) = weights
    assert name.startswith("sdc.constant.") and torch.all(weights[name] == 0.125)
    x = np.random.default_rng(0).standard_normal((64, 64), dtype=np.float32)
    np.testing.assert_array_equal(exe(x)[0], x + np.float32(0.125))


def test_loaded_artifact_runs(artifact, scale):
    exe = sdc.runtime.load(artifact)
    x = np.random.default_rng(3).standard_normal((4, 300), dtype=np.float32)
    np.testing.assert_allclose(exe(x)[0], reference(x, scale), rtol=1e-6, atol=1e-6)
    assert exe.kernel_count == 2 and exe.target == "cpu"


def test_writing_replaces_an_artifact_but_nothing_else(tmp_path, scale):
    module = parse_module(PROGRAM)
    path = tmp_path / "out.sdc"
    compile_module(module, {"scale": scale}, output=path)
    (path / "stale-file").write_text("from an older compile")
    compile_module(parse_module(PROGRAM), {"scale": scale}, output=path)
    assert not (path / "stale-file").exists()
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("do not delete")
    with pytest.raises(SdcError, match="not an sdc artifact"):
        compile_module(parse_module(PROGRAM), {"scale": scale}, output=precious)
    assert (precious / "thesis.tex").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.sdc", "precious"]  # no temporaries left


# ---------------------------------------------------------------- bad artifacts


@pytest.mark.parametrize("rel", ["plan.json", "program.mlir", "weights/rank0.safetensors"])
def test_any_changed_file_is_a_hash_mismatch_naming_it(artifact, rel):
    path = artifact / rel
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1  # one bit, same size
    path.write_bytes(bytes(data))
    with pytest.raises(SdcError, match=rf"bad artifact '.*model.sdc': {rel}: does not match its SHA-256"):
        sdc.runtime.load(artifact)


def test_missing_file(artifact):
    (artifact / "program.mlir").unlink()
    with pytest.raises(SdcError, match=r"program.mlir: is missing"):
        sdc.runtime.load(artifact)


@pytest.mark.parametrize("version", [3, 0, "2", None])
def test_unknown_format_version(artifact, version):
    manifest = read_manifest(artifact)
    manifest["format_version"] = version
    write_manifest(artifact, manifest)
    with pytest.raises(SdcError, match=r"manifest.json: format version .* is not supported \(this sdc reads version 2\)"):
        sdc.runtime.load(artifact)


def test_version_1_artifact_asks_for_a_recompile(artifact):
    """A v1 artifact (kernel steps with their ops, no streams): the manifest says so, and the error says what to do."""
    manifest = read_manifest(artifact)
    manifest["format_version"] = 1
    write_manifest(artifact, manifest)
    edit_plan(artifact, lambda p: p["ranks"][0].update(steps=[{"kind": "kernel", "id": "k0", "ops": [], "free": []}]))
    with pytest.raises(SdcError) as caught:
        sdc.runtime.load(artifact)
    assert str(caught.value) == (f"artifact '{artifact}' has format version 1; this sdc reads version 2: "
                                 "recompile the model (sdc compile ...)")


def test_streams_events_and_allocations_are_honoured(artifact, scale):
    """What the reference planner does not emit yet still runs: a second stream with an event between,
    and a buffer allocated for the output (with its symbolic batch dim) that the kernel writes into."""
    def edit(p):
        rank = p["ranks"][0]
        rank["streams"] = ["compute", "side"]
        out = rank["outputs"][0]
        rank["values"][out]["shape"] = ["B", 300]  # the batch dim by name: the buffer is sized per call
        rank["steps"][1:1] = [{"kind": "record", "event": "iota-done", "stream": 0},
                              {"kind": "wait", "event": "iota-done", "stream": 1},
                              {"kind": "alloc", "value": out}]
        rank["steps"][0]["stream"] = 0

    edit_plan(artifact, edit)
    exe = sdc.runtime.load(artifact)
    x = np.random.default_rng(5).standard_normal((3, 300), dtype=np.float32)
    np.testing.assert_allclose(exe(x)[0], reference(x, scale), rtol=1e-6, atol=1e-6)
    assert exe.kernel_count == 2


@pytest.mark.parametrize("rel", ["../outside.bin", "/etc/hostname", "weights/../../outside.bin", "./plan.json",
                                 "C:\\evil", "weights//rank0.safetensors"])
def test_manifest_paths_outside_the_artifact_are_refused(artifact, rel):
    (artifact.parent / "outside.bin").write_bytes(b"secret")
    manifest = read_manifest(artifact)
    manifest["files"][rel] = {"sha256": hashlib.sha256(b"secret").hexdigest(), "bytes": 6}
    write_manifest(artifact, manifest)
    with pytest.raises(SdcError, match=r"manifest.json: path .* (leaves|is not relative|leads outside)"):
        sdc.runtime.load(artifact)


def test_symlink_leading_outside_is_refused(artifact):
    outside = artifact.parent / "weights-elsewhere.safetensors"
    shutil.copy(artifact / "weights/rank0.safetensors", outside)
    (artifact / "weights/rank0.safetensors").unlink()
    os.symlink(outside, artifact / "weights/rank0.safetensors")  # same bytes, same hash: still refused
    with pytest.raises(SdcError, match=r"path 'weights/rank0.safetensors' leads outside the artifact directory"):
        sdc.runtime.load(artifact)


def test_plan_weights_path_outside_is_refused(artifact):
    edit_plan(artifact, lambda p: p["ranks"][0].update(weights="../w.safetensors"))
    with pytest.raises(SdcError, match=r"plan.json: path '../w.safetensors' leaves the artifact"):
        sdc.runtime.load(artifact)
    # Found by the fuzzer (artifact:31:733): a NUL in the path, which os.path refuses with a ValueError.
    edit_plan(artifact, lambda p: p["ranks"][0].update(weights="weights/rank0\x00.safetensors"))
    with pytest.raises(SdcError, match=r"plan.json: path 'weights/rank0\\x00.safetensors' holds characters"):
        sdc.runtime.load(artifact)


def test_weights_never_unpickled(artifact, tmp_path):
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    (artifact / "weights/rank0.safetensors").write_bytes(pickle.dumps({"scale": Payload()}))
    rehash(artifact)
    with pytest.raises(SdcError, match=r"weights/rank0.safetensors: is not a safetensors file"):
        sdc.runtime.load(artifact)
    assert not marker.exists()


def _k1_ops(p: dict) -> list[dict]:
    return p["ranks"][0]["steps"][1]["kernel"]["ops"]


def _insert(p: dict, index: int, *steps: dict) -> None:
    p["ranks"][0]["steps"][index:index] = list(steps)


@pytest.mark.parametrize("edit, message", [
    (lambda p: _k1_ops(p)[0].update(op="launch_missiles"),
     r"plan.json: rank 0 step 1 \(launch k1\): unknown op 'launch_missiles'"),
    (lambda p: _k1_ops(p)[0].update(inputs=[_k1_ops(p)[-1]["outputs"][0], "v1"]),
     r"plan.json: rank 0 step 1 \(launch k1\) op 0 \('mul'\): reads value 'v\d+' before it is computed"),
    (lambda p: _k1_ops(p)[0].update(inputs=["v99", "v1"]),
     r"plan.json: rank 0 step 1 \(launch k1\) op 0 \('mul'\): inputs refers to value 'v99', which is not in the "
     r"values table"),
    (lambda p: p["ranks"][0]["values"]["v1"].update(weight="nope"),
     r"plan.json: value 'v1' refers to weight 'nope', which is not in the weights file"),
    (lambda p: p["ranks"][0]["values"]["v1"].update(shape=[301]),
     r"plan.json: weight 'scale' is f32\[300\] in the weights file, value 'v1' is tensor<301xf32>"),
    (lambda p: p["ranks"][0].update(outputs=[]), r"plan.json: rank 0: 1 inputs and 0 outputs"),
    (lambda p: p["ranks"][0]["steps"][0].update(kind="teleport"),
     r"plan.json: rank 0 step 0: unknown step kind 'teleport' \(kinds: alloc, view, launch, collective, record, wait, free\)"),
    (lambda p: _k1_ops(p)[-1]["attrs"].update(max={"float": "lots"}),
     r"plan.json: rank 0 step 1 \(launch k1\): unknown encoded value"),
    (lambda p: p["ranks"][0]["values"]["v1"].update(layout=[1, 1]),
     r"plan.json: rank 0: value 'v1' has layout \[1, 1\], which is not a permutation of its 1 dims"),
    (lambda p: p.update(ranks=[]), r"plan.json: must have one plan per rank 0..0"),
    (lambda p: p["ranks"][0]["steps"][1]["kernel"].update(backend="cuda-c", source="kernels/k1.cu"),
     r"plan.json: rank 0 step 1 \(launch k1\): kernel backend 'cuda-c' is not one this runtime runs \(reference, "
     r"triton, cuda, c\)"),
    (lambda p: (p["ranks"][0]["steps"][1]["kernel"].update(backend="triton", source="kernels/k1.py"),
                p["ranks"][0]["steps"][1]["kernel"].pop("entry")),
     r"plan.json: rank 0 step 1 \(launch k1\): a triton kernel's 'entry' must be a Python identifier, found None"),
    (lambda p: p["ranks"][0]["steps"][1].update(stream=1),
     r"plan.json: rank 0 step 1 \(launch k1\): 'stream' must be a stream index 0..0, found 1"),
    (lambda p: _insert(p, 1, {"kind": "wait", "event": "e0", "stream": 0}),
     r"plan.json: rank 0 step 1 \(wait e0\): waits for event 'e0', which no earlier step records"),
    (lambda p: _insert(p, 1, {"kind": "record", "event": "e0", "stream": 0}, {"kind": "record", "event": "e0",
                                                                            "stream": 0}),
     r"plan.json: rank 0 step 2 \(record e0\): event 'e0' is recorded twice"),
    (lambda p: _insert(p, 1, {"kind": "free", "values": [p["ranks"][0]["steps"][0]["outputs"][0]]}),
     r"plan.json: rank 0 step 2 \(launch k1\): reads value 'v\d+' after it is freed"),
    (lambda p: _insert(p, 1, {"kind": "free", "values": ["v0"]}),
     r"plan.json: rank 0 step 1 \(free\): frees value 'v0', an input, output or weight"),
    (lambda p: _insert(p, 0, {"kind": "alloc", "value": "v1"}),
     r"plan.json: rank 0 step 0 \(alloc\): value 'v1' is already defined"),
    (lambda p: _insert(p, 0, {"kind": "alloc", "value": p["ranks"][0]["steps"][0]["outputs"][0], "reuses": "v1"}),
     r"plan.json: rank 0 step 0 \(alloc\): reuses the memory of value 'v1', which is not freed before"),
    (lambda p: p["ranks"][0]["steps"].__setitem__(0, {"kind": "collective", "id": "c0", "stream": 0, "op": "relu",
                                                      "mesh_axes": ["tp"], "inputs": ["v0"],
                                                      "outputs": p["ranks"][0]["steps"][0]["outputs"]}),
     r"plan.json: rank 0 step 0 \(collective c0\): 'sdc.relu' is not a collective"),
])
def test_malformed_plan_is_one_clean_error(artifact, edit, message):
    edit_plan(artifact, edit)
    with pytest.raises(SdcError, match=message):
        sdc.runtime.load(artifact)


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.pop("files"), r"manifest.json: field 'files' is missing"),
    (lambda m: m["files"].pop("plan.json"), r"manifest.json: does not list plan.json"),
    (lambda m: m.update(format="zip"), r"manifest.json: is not an sdc artifact manifest"),
    (lambda m: m["entry"]["inputs"][0].update(dtype="f33"), r"manifest.json: entry.inputs\[0\] \('x'\) has unknown dtype"),
    (lambda m: m["entry"]["inputs"][0].update(shape=[-1]), r"manifest.json: entry.inputs\[0\] \('x'\) shape must be"),
    (lambda m: m["entry"]["guards"].append({"condition": "__import__('os').system('true')"}),
     r"manifest.json: guard .* only integers, symbol names"),
    (lambda m: m["entry"]["guards"].append({"condition": "Q > 1"}),
     r"manifest.json: guard 'Q > 1' uses symbol 'Q', which no input binds"),
])
def test_malformed_manifest_is_one_clean_error(artifact, edit, message):
    manifest = read_manifest(artifact)
    edit(manifest)
    write_manifest(artifact, manifest)
    with pytest.raises(SdcError, match=message):
        sdc.runtime.load(artifact)


def test_manifest_that_is_not_json(artifact):
    (artifact / "manifest.json").write_text('{"format": "sdc-artifact", "format_version": NaN}')
    with pytest.raises(SdcError, match=r"manifest.json: is not valid JSON"):
        sdc.runtime.load(artifact)


def test_not_an_artifact(tmp_path):
    with pytest.raises(SdcError, match="no such directory"):
        sdc.runtime.load(tmp_path / "nothing.sdc")
    (tmp_path / "file.sdc").write_text("hi")
    with pytest.raises(SdcError, match="not a directory"):
        sdc.runtime.load(tmp_path / "file.sdc")
    with pytest.raises(SdcError, match="has no manifest.json"):
        sdc.runtime.load(tmp_path)


def test_artifact_for_another_target(artifact, monkeypatch):
    manifest = read_manifest(artifact)
    manifest["target"] = "cuda"
    write_manifest(artifact, manifest)
    sdc.runtime.load(artifact)  # cuda artifacts run here too (reference kernels as torch ops)
    monkeypatch.setitem(sdc.target.TARGETS, "cuda", dataclasses.replace(sdc.target.TARGETS["cuda"], supported=False))
    with pytest.raises(SdcError, match=r"compiled for target 'cuda'"):
        sdc.runtime.load(artifact)


# ---------------------------------------------------------------- guards


def test_guards_are_checked_before_running(artifact, scale):
    manifest = read_manifest(artifact)
    manifest["entry"]["guards"] = [{"condition": "B % 2 == 0 and B <= 8", "message": "B must be even, at most 8"}]
    write_manifest(artifact, manifest)
    exe = sdc.runtime.load(artifact)
    assert [g.condition for g in exe.guards] == ["B % 2 == 0 and B <= 8"]
    x = np.random.default_rng(5).standard_normal((4, 300), dtype=np.float32)
    np.testing.assert_allclose(exe(x)[0], reference(x, scale), rtol=1e-6, atol=1e-6)
    for batch in (3, 10):
        with pytest.raises(SdcError, match=(rf"inputs break the guard 'B % 2 == 0 and B <= 8': B must be even, "
                                            rf"at most 8 \(B = {batch} from input 'x' dim 0\)")):
            exe(np.zeros((batch, 300), np.float32))
