"""Partitioned programs end to end in one process: compile for a mesh, run every rank as a thread
(`sdc.runtime.distributed.simulate`, the same runtime and plans as under torchrun, with an in-memory
communicator), and compare with the single-device result on fresh random inputs.

The real multi-process runs (torchrun, gloo) are in test_distributed.py; this file covers the
partitioner's many cases quickly."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

import sdc
from sdc.compiler import build_artifact, import_model
from sdc.options import CompileOptions
from sdc.diagnostics import SdcError
from sdc.interpreter import interpret
from sdc.ir_text import parse_module
from sdc.runtime.distributed import simulate

from distributed_models import MODELS, export, random_inputs

RTOL, ATOL = 1e-4, 1e-5


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    return {name: export(name, d) for name in MODELS}


def compile_for(model, mesh, out: Path, **kw) -> Path:
    module, params, provenance = import_model(model, mesh=mesh)
    return build_artifact(module, params, out, CompileOptions(mesh=mesh, **kw), provenance=provenance)


def run_all(path, inputs) -> list:
    outs = simulate(path, inputs)
    for rank_outs in outs[1:]:  # every rank assembles the same whole outputs
        for a, b in zip(outs[0], rank_outs):
            np.testing.assert_array_equal(a, b)
    return outs[0]


# ---------------------------------------------------------------- the three models


@pytest.mark.parametrize("mesh", ["tp=2", "dp=2", "dp=2,tp=2", "tp=4", "dp=4"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_match_one_device(models, name, mesh, tmp_path):
    rng = np.random.default_rng()
    inputs = random_inputs(name, 8, rng)
    expected = sdc.compile(models[name])(*inputs)
    path = compile_for(models[name], mesh, tmp_path / "m.sdc")
    got = run_all(path, inputs)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


ENCODER = Path(__file__).resolve().parents[2] / "examples" / "models" / "encoder.onnx"


@pytest.mark.parametrize("mesh", ["tp=2", "dp=2,tp=2"])
def test_the_shipped_encoder_splits_its_fused_attention_by_heads(mesh, tmp_path):
    rng = np.random.default_rng()
    ids = rng.integers(0, 1000, (4, 12))
    mask = np.ones((4, 12), np.int64)
    mask[1, 7:] = 0
    expected = sdc.compile(ENCODER)(ids, mask)[0]
    path = compile_for(ENCODER, mesh, tmp_path / "enc.sdc")
    np.testing.assert_allclose(run_all(path, [ids, mask])[0], expected, rtol=RTOL, atol=1e-5)
    assert "tensor<?x2x?x?xf32>" in (path / "program.mlir").read_text()  # 2 of the 4 heads per device
    # the embeddings (one all_reduce) and, per block, the attention output and the MLP (one each)
    assert [c for c in collectives(path) if c[0] != "all_slice"] == [("all_reduce", ["tp"])] * 5


EXPECTED_COLLECTIVES = {  # mesh -> the collectives each model's program runs, by kind and axes
    ("mlp", "tp=2"): [("all_reduce", ["tp"])],
    ("transformer", "tp=2"): [("all_reduce", ["tp"]), ("all_reduce", ["tp"])],
    ("cnn", "tp=2"): [("all_reduce", ["tp"])],
    ("mlp", "dp=2"): [], ("transformer", "dp=2"): [], ("cnn", "dp=2"): [],
    ("transformer", "dp=2,tp=2"): [("all_reduce", ["tp"]), ("all_reduce", ["tp"])],
}


@pytest.mark.parametrize("name, mesh", sorted(EXPECTED_COLLECTIVES))
def test_megatron_places_one_reduction_per_pair(models, name, mesh, tmp_path):
    path = compile_for(models[name], mesh, tmp_path / "m.sdc")
    plan = json.loads((path / "plan.json").read_text())
    found = [(op, axes) for op, axes in plan_collectives(plan)
             if op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")]
    assert found == EXPECTED_COLLECTIVES[(name, mesh)]


def test_weights_are_split_per_rank(models, tmp_path):
    path = compile_for(models["transformer"], "tp=2", tmp_path / "t.sdc")
    from sdc.runtime.artifact import read_artifact

    a = read_artifact(path)
    sizes = [sum(w.nbytes for w in a.weights_info(r).values()) for r in range(2)]
    exe = sdc.compile(models["transformer"])
    whole = sum(w.nbytes for w in exe.artifact.weights_info(0).values())
    assert sizes[0] == sizes[1] < whole


def test_attention_is_split_by_heads(models, tmp_path):
    path = compile_for(models["transformer"], "tp=2", tmp_path / "t.sdc")
    program = (path / "program.mlir").read_text()
    # 4 heads of 8: each device holds 2 (the softmax runs on [batch, 2, 8, 8])
    assert "tensor<?x2x8x8xf32>" in program


def test_symbolic_batch_gets_a_guard(models, tmp_path):
    path = compile_for(models["mlp"], "dp=2", tmp_path / "m.sdc")
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["entry"]["inputs"] == [{"name": "x", "dtype": "f32", "shape": ["batch", 32]}]
    assert [g["condition"] for g in manifest["entry"]["guards"]] == ["batch % 2 == 0"]
    with pytest.raises(SdcError, match="batch % 2 == 0"):
        simulate(path, [np.zeros((3, 32), np.float32)])


# ---------------------------------------------------------------- annotations in the IR


def compile_ir(text: str, params: dict, mesh: str, tmp_path: Path, **kw) -> Path:
    module = parse_module(text)
    return build_artifact(module, params, tmp_path / "ir.sdc", CompileOptions(mesh=mesh, **kw))


def collectives(path: Path) -> list[tuple]:
    plan = json.loads((path / "plan.json").read_text())
    return [(op, axes) for op, axes in plan_collectives(plan)
            if op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_slice")]


def plan_collectives(plan: dict) -> list[tuple[str, list[str]]]:
    """(op, mesh axes) of rank 0's collective steps and of the all_slices inside its kernels, in order."""
    out = []
    for step in plan["ranks"][0]["steps"]:
        if step["kind"] == "collective":
            out.append((step["op"], step["mesh_axes"]))
        elif step["kind"] == "launch":
            out += [(op["op"], op["attrs"]["mesh_axes"]) for op in step["kernel"]["ops"] if "mesh_axes" in op["attrs"]]
    return out


RESHARD = """
func.func @main(%x: tensor<8x12xf32>) -> tensor<8x12xf32> {
  %0 = "sdc.shard"(%x) {sharding = #sdc.sharding<[["dp"], []], []>} : (tensor<8x12xf32>) -> tensor<8x12xf32>
  %1 = "sdc.exp"(%0) : (tensor<8x12xf32>) -> tensor<8x12xf32>
  %2 = "sdc.shard"(%1) {sharding = #sdc.sharding<[[], ["dp"]], []>} : (tensor<8x12xf32>) -> tensor<8x12xf32>
  %3 = "sdc.neg"(%2) : (tensor<8x12xf32>) -> tensor<8x12xf32>
  return %3 : tensor<8x12xf32>
}
"""


def test_moving_a_split_between_dims_is_one_all_to_all(tmp_path):
    path = compile_ir(RESHARD, {}, "dp=2", tmp_path)
    assert collectives(path) == [("all_to_all", ["dp"])]
    plan = json.loads((path / "plan.json").read_text())
    assert plan["shardings"]["outputs"] == [{"dims": [[], ["dp"]], "partial": []}]  # the runtime assembles it
    x = np.random.default_rng().standard_normal((8, 12)).astype(np.float32)
    np.testing.assert_allclose(run_all(path, [x])[0], -np.exp(x), rtol=1e-6)


ROW_PARALLEL = """
func.func @main(%x: tensor<8x16xf32>) -> tensor<8x4xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<16x4xf32>
  %a = "sdc.shard"(%x) {sharding = #sdc.sharding<[[], ["tp"]], []>} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %0 = "sdc.matmul"(%a, %w) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %1 = "sdc.shard"(%0) {sharding = #sdc.sharding<[["tp"], []], []>} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %2 = "sdc.tanh"(%1) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %2 : tensor<8x4xf32>
}
"""


def test_a_partial_sum_wanted_split_is_one_reduce_scatter(tmp_path):
    rng = np.random.default_rng()
    w = rng.standard_normal((16, 4)).astype(np.float32)
    path = compile_ir(ROW_PARALLEL, {"w": w}, "tp=2", tmp_path)
    assert [c for c in collectives(path) if c[0] != "all_slice"] == [("reduce_scatter", ["tp"])]
    x = rng.standard_normal((8, 16)).astype(np.float32)
    np.testing.assert_allclose(run_all(path, [x])[0], np.tanh(x @ w), rtol=1e-5, atol=1e-6)


TWO_AXES_ONE_DIM = """
func.func @main(%x: tensor<?x6xf32> {sdc.dims = #sdc.dims<["N", 6]>}) -> tensor<?x2xf32> {
  %0 = "sdc.shard"(%x) {sharding = #sdc.sharding<[["tp", "dp"], []], []>} : (tensor<?x6xf32>) -> tensor<?x6xf32>
  %1 = "sdc.sigmoid"(%0) : (tensor<?x6xf32>) -> tensor<?x6xf32>
  %2 = "sdc.reshape"(%1) {shape = ["N", 2, 3]} : (tensor<?x6xf32>) -> tensor<?x2x3xf32>
  %3 = "sdc.reduce_sum"(%2) {axes = array<i64: 2>} : (tensor<?x2x3xf32>) -> tensor<?x2xf32>
  return %3 : tensor<?x2xf32>
}
"""


def test_a_dim_split_over_two_axes_in_tp_major_order(tmp_path):
    path = compile_ir(TWO_AXES_ONE_DIM, {}, "dp=2,tp=2", tmp_path)
    manifest = json.loads((path / "manifest.json").read_text())
    assert [g["condition"] for g in manifest["entry"]["guards"]] == ["N % 4 == 0"]
    x = np.random.default_rng().standard_normal((8, 6)).astype(np.float32)
    expected = (1 / (1 + np.exp(-x))).reshape(8, 2, 3).sum(2)
    np.testing.assert_allclose(run_all(path, [x])[0], expected, rtol=1e-5)
    program = (path / "program.mlir").read_text()
    assert 'shape = ["N//4", 2, 3]' in program  # local shapes keep naming the global symbol


EMBEDDING = """
func.func @main(%ids: tensor<4x5xi64>) -> tensor<4x5x8xf32> {
  %t = "sdc.parameter"() {name = "table"} : () -> tensor<12x8xf32>
  %0 = "sdc.gather"(%t, %ids) {axis = 0 : i64} : (tensor<12x8xf32>, tensor<4x5xi64>) -> tensor<4x5x8xf32>
  %1 = "sdc.tanh"(%0) : (tensor<4x5x8xf32>) -> tensor<4x5x8xf32>
  return %1 : tensor<4x5x8xf32>
}
"""


@pytest.mark.parametrize("mesh", ["tp=2", "tp=4", "dp=2,tp=2"])
def test_embedding_split_by_vocabulary(tmp_path, mesh):
    rng = np.random.default_rng()
    table = rng.standard_normal((12, 8)).astype(np.float32)
    path = compile_ir(EMBEDDING, {"table": table}, mesh, tmp_path)
    assert ("all_reduce", ["tp"]) in collectives(path)
    ids = rng.integers(-12, 12, (4, 5))  # negative indices count from the end, as in ONNX Gather
    np.testing.assert_allclose(run_all(path, [ids])[0], np.tanh(table[ids]), rtol=1e-6)


def test_shardings_option_names_inputs_and_parameters(models, tmp_path):
    rng = np.random.default_rng()
    x = random_inputs("mlp", 4, rng)
    path = compile_for(models["mlp"], "tp=2", tmp_path / "m.sdc", shardings={"x": ("tp", None)})
    plan = json.loads((path / "plan.json").read_text())
    assert plan["shardings"]["inputs"] == [{"dims": [["tp"], []], "partial": []}]
    np.testing.assert_allclose(run_all(path, x)[0], sdc.compile(models["mlp"])(*x)[0], rtol=RTOL, atol=ATOL)
    with pytest.raises(SdcError, match="shardings name 'nope', which is no input, output or parameter"):
        compile_for(models["mlp"], "tp=2", tmp_path / "n.sdc", shardings={"nope": (None,)})
    with pytest.raises(SdcError, match="has 1 dims, input 'x' has rank 2"):
        compile_for(models["mlp"], "tp=2", tmp_path / "n.sdc", shardings={"x": ("tp",)})


def test_without_a_mesh_shard_ops_are_the_identity(tmp_path):
    module = parse_module(RESHARD)
    path = build_artifact(module, {}, tmp_path / "one.sdc")
    x = np.random.default_rng().standard_normal((8, 12)).astype(np.float32)
    np.testing.assert_allclose(sdc.runtime.load(path)(x)[0], -np.exp(x), rtol=1e-6)
    assert interpret(RESHARD, [x])[0].shape == (8, 12)


# ---------------------------------------------------------------- annotations in ONNX


class Annotated(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(8, 16), torch.nn.Linear(16, 8)

    def forward(self, x):
        x = sdc.shard(x, None, "tp")  # the user splits the features, not the batch
        return self.fc2(torch.relu(self.fc1(x)))


def test_sdc_shard_in_a_torch_model_reaches_the_program(tmp_path):
    torch.manual_seed(0)
    model = Annotated().eval()
    x = torch.randn(4, 8)
    assert torch.equal(sdc.shard(x, None, "tp"), x)  # eager: the identity
    onnx_path = tmp_path / "annotated.onnx"
    torch.onnx.export(model, (x,), str(onnx_path), input_names=["x"], output_names=["y"], dynamo=False)
    nodes = [n for n in onnx.load(str(onnx_path)).graph.node if n.domain == "sdc"]
    assert [(n.op_type, [s.decode() for s in n.attribute[0].strings]) for n in nodes] == [("Shard", ["", "tp"])]
    path = compile_for(onnx_path, "tp=2", tmp_path / "a.sdc")
    plan = json.loads((path / "plan.json").read_text())
    assert plan["shardings"]["inputs"] == [{"dims": [[], ["tp"]], "partial": []}]  # the input arrives split
    assert collectives(path)[0] == ("all_reduce", ["tp"])  # so fc1 runs row-parallel
    xs = np.random.default_rng().standard_normal((4, 8)).astype(np.float32)
    expected = model(torch.from_numpy(xs)).detach().numpy()
    np.testing.assert_allclose(run_all(path, [xs])[0], expected, rtol=1e-5, atol=1e-6)
    # compiled without a mesh, the annotation is ignored
    np.testing.assert_allclose(sdc.compile(onnx_path)(xs)[0], expected, rtol=1e-5, atol=1e-6)


def test_onnx_multi_device_annotations(models, tmp_path):
    model = onnx.load(str(models["mlp"]))
    node = next(n for n in model.graph.node if n.op_type == "Gemm" or n.op_type == "MatMul")
    config = node.device_configurations.add()
    config.configuration_id = "mesh"
    spec = config.sharding_spec.add()
    spec.tensor_name = node.input[0]
    spec.device.extend([0, 1])
    dim = spec.sharded_dim.add()
    dim.axis = 0
    dim.simple_sharding.add().num_shards = 2
    path = tmp_path / "annotated.onnx"
    onnx.save(model, str(path))
    module, _, _ = import_model(path, mesh="tp=2")
    shards = [op for op in module.regions[0].blocks[0].operations[0].regions[0].blocks[0].operations
              if op.operation.name == "sdc.shard"]
    assert len(shards) == 1 and '[["tp"], []]' in str(shards[0].attributes["sharding"])
    out = compile_for(path, "tp=2", tmp_path / "m.sdc")
    x = random_inputs("mlp", 4, np.random.default_rng())
    np.testing.assert_allclose(run_all(out, x)[0], sdc.compile(models["mlp"])(*x)[0], rtol=RTOL, atol=ATOL)
    spec.sharded_dim[0].simple_sharding[0].num_shards = 3
    onnx.save(model, str(path))
    with pytest.raises(SdcError, match="is split 3 ways, and no free axis of the mesh"):
        import_model(path, mesh="tp=2")


# ---------------------------------------------------------------- loading and the command line


def test_loading_outside_a_launcher_or_on_the_wrong_world_size(models, tmp_path, monkeypatch):
    path = compile_for(models["mlp"], "tp=2", tmp_path / "m.sdc")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(SdcError, match=r"runs on 2 devices: launch it with torchrun --nproc-per-node=2"):
        sdc.runtime.load(path)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(SdcError, match=r"compiled for 2 devices but this launch has 4 \(WORLD_SIZE=4\)"):
        sdc.runtime.load(path)
    one = build_artifact(*import_model(models["mlp"])[:2], tmp_path / "one.sdc")
    with pytest.raises(SdcError, match="compiled for one device but this launch has 4"):
        sdc.runtime.load(one)


def test_compile_explain_sharding(models, tmp_path):
    from sdc.cli.main import sdc_main

    out = io.StringIO()
    with redirect_stdout(out):
        assert sdc_main(["compile", str(models["transformer"]), "-o", str(tmp_path / "t.sdc"),
                         "--mesh", "dp=2,tp=2", "--explain", "sharding"]) == 0
    text = out.getvalue()
    assert "sharding (mesh dp=2,tp=2: 4 devices)" in text
    assert "input 'x': dim 0 split over dp (data parallel)" in text
    assert "column-parallel over tp, paired with row-parallel 'sdc.matmul' at /o/MatMul" in text
    assert text.count("all_reduce over tp") == 2
    assert "  1. all_reduce over tp  at /o/Add\n" in text
    assert "     tensor: result of 'sdc.matmul' at /o/MatMul, f32[batch//2, 8, 32] per device\n" in text
    assert "     bytes per step: 1024*(batch//2) B\n" in text
    assert "why: 'sdc.add' at /o/Add needs operand #1 as [dp, -, -]; it is a partial sum over tp: summed" in text
    # With the batch bound the sizes are static, and the total is a byte count (this path once crashed).
    out = io.StringIO()
    with redirect_stdout(out):
        assert sdc_main(["compile", str(models["transformer"]), "-o", str(tmp_path / "s.sdc"), "--mesh", "dp=2,tp=2",
                         "--input-shape", "batch=4", "--explain", "sharding"]) == 0
    assert "bytes sent per device per run: 4.0 KiB" in out.getvalue()


def test_compile_rejects_a_bad_mesh(models, tmp_path, capsys):
    from sdc.cli.main import main

    assert main(["compile", str(models["mlp"]), "-o", str(tmp_path / "x.sdc"), "--mesh", "dp=two"]) == 2
    assert "--mesh dp=two: 'dp=two' is not AXIS=SIZE" in capsys.readouterr().err


def test_inspect_shows_the_mesh_and_the_split(models, tmp_path):
    from sdc.cli.main import sdc_main

    path = compile_for(models["mlp"], "dp=2,tp=2", tmp_path / "m.sdc")
    out = io.StringIO()
    with redirect_stdout(out):
        assert sdc_main(["inspect", str(path)]) == 0
    text = out.getvalue()
    assert "target    cpu  world size 4  mesh dp=2, tp=2\n" in text
    assert "split     x [dp, -] -> y [dp, -]\n" in text
    assert text.count("  rank ") == 4


def test_the_interpreter_runs_a_partitioned_program_per_rank():
    """The IR oracle: each rank's program, interpreted with a communicator, gives its block."""
    import threading

    from sdc.compiler import run_pipeline
    from sdc.dialect.mesh import Mesh
    from sdc.runtime.distributed import SimulatedWorld

    text = TWO_AXES_ONE_DIM
    module = parse_module(text)
    with module.context:
        module.attributes["sdc.mesh"] = sdc.dialect.attrs.mesh({"dp": 2, "tp": 2})
    run_pipeline(module, ["sdc-sharding-propagation", "sdc-spmd-partition", "sdc-verify"])
    x = np.random.default_rng().standard_normal((8, 6)).astype(np.float32)
    expected = interpret(text, [x])[0]
    world = SimulatedWorld(Mesh.parse("dp=2,tp=2"))
    mesh = world.mesh
    outs: list = [None] * 4

    def rank(r: int) -> None:
        block = x[mesh.index_in_group(r, ["tp", "dp"]) * 2:][:2]  # dim 0 is split over (tp, dp)
        outs[r] = interpret(module, [block], comm=world.communicators()[r])[0]

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    from sdc.codegen.ranks import io_shardings
    from sdc.dialect.ir import entry_function

    with module.context:
        (out_sharding,) = io_shardings(entry_function(module), "res_attrs", 1)
    for r in range(4):
        if out_sharding.dims[0]:  # the output stays split: each rank holds its block
            i = mesh.index_in_group(r, list(out_sharding.dims[0]))
            n = 8 // mesh.size(out_sharding.dims[0])
            np.testing.assert_allclose(outs[r], expected[i * n:(i + 1) * n], rtol=1e-5)
        else:
            np.testing.assert_allclose(outs[r], expected, rtol=1e-5)
