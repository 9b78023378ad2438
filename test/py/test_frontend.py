"""The frontend registry (sdc/frontend/__init__.py), the frontend-neutral Builder, parameter files,
and `sdc import`.

The ONNX importer's op-by-op behaviour is tested in test_onnx_*.py and test/lit/frontend/.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import sympy
import torch
from onnx import TensorProto, helper, numpy_helper

from sdc.cli.main import main
from sdc.diagnostics import SdcError
from sdc.dialect.op_classes import new_context
from sdc.frontend import FRONTENDS, frontend_for, get_frontend, import_model
from sdc.frontend.builder import INLINE_LIMIT, Builder, CompileTimeValueError
from sdc.frontend.params import read_params, write_params
from sdc.frontend.values import V, const_value
from sdc.mlir import func, ir

MLIR = """
func.func @main(%x: tensor<2x3xf32> {sdc.name = "x"}) -> (tensor<2x3xf32> {sdc.name = "y"}) {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<2x3xf32>
  %y = "sdc.add"(%x, %w) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
"""


def mlp_model(rng) -> onnx.ModelProto:
    w = rng.standard_normal((16, 32)).astype(np.float32)  # 512 values: a parameter, not an inline constant
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["y"], name="relu")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 32])],
        initializer=[numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# ---------------------------------------------------------------- the registry


def test_every_frontend_key_is_its_frontends_name():
    for name, factory in FRONTENDS.items():
        assert factory().name == name
    assert set(FRONTENDS) >= {"mlir", "onnx"}


def test_frontend_for_chooses_by_suffix_and_type(tmp_path, rng):
    for name in ("m.mlir", "m.onnx", "m.pb"):
        (tmp_path / name).write_text("")
    assert frontend_for(tmp_path / "m.mlir") == "mlir"
    assert frontend_for(str(tmp_path / "m.onnx")) == "onnx"
    assert frontend_for(tmp_path / "m.pb") == "onnx"  # any other file is read as ONNX, which says if it is not
    assert frontend_for(mlp_model(rng)) == "onnx"
    assert frontend_for(torch.nn.Linear(2, 2)) == "torch"


@pytest.mark.parametrize("model, message", [
    (type("Fn", (), {"__call__": lambda self, x: x})(), "cannot compile a callable Fn: give a JAX function"),
    (42, "cannot compile a builtins.int: give an ONNX model"),
])
def test_frontend_for_explains_what_it_cannot_import(model, message):
    with pytest.raises(SdcError, match=message):
        frontend_for(model)


def test_frontend_for_missing_file_and_directory(tmp_path):
    with pytest.raises(SdcError, match=r"cannot open '.*missing\.onnx': no such file"):
        frontend_for(tmp_path / "missing.onnx")
    with pytest.raises(SdcError, match="is a directory"):
        frontend_for(tmp_path)


def test_unknown_frontend_name():
    with pytest.raises(SdcError, match=r"unknown frontend 'tflite' \(frontends: mlir, onnx"):
        get_frontend("tflite")


def test_a_frontend_whose_module_is_missing_says_so(monkeypatch):
    def missing():
        raise ModuleNotFoundError("No module named 'sdc.frontend.jax'", name="sdc.frontend.jax")

    monkeypatch.setitem(FRONTENDS, "jax", missing)
    with pytest.raises(SdcError, match=r"the jax frontend \(sdc.frontend.jax\) is not available in this sdc"):
        get_frontend("jax")


# ---------------------------------------------------------------- import_model


def test_import_model_onnx_returns_module_params_options(tmp_path, rng):
    model = mlp_model(rng)
    onnx.save(model, tmp_path / "m.onnx")
    module, params, options = import_model(tmp_path / "m.onnx", input_shapes={"x": ["B", 16], "B": "1..8"})
    assert sorted(params) == ["w"]
    assert options == {"source": "m.onnx", "frontend": "onnx", "input_shapes": {"x": ["B", 16], "B": "1..8"}}
    assert '#sdc.dims<["B", 16]>' in str(module)
    _, _, from_proto = import_model(model)
    assert from_proto["source"] == "<ModelProto>"
    with pytest.raises(SdcError, match="parameter files apply to .mlir models"):
        import_model(tmp_path / "m.onnx", params_file=tmp_path / "p.npz")


def test_import_model_mlir_reads_the_params_file(tmp_path):
    (tmp_path / "m.mlir").write_text(MLIR)
    np.savez(tmp_path / "p.npz", w=np.ones((2, 3), np.float32))
    module, params, options = import_model(tmp_path / "m.mlir", params_file=tmp_path / "p.npz",
                                           input_shapes={"B": 2})
    assert '"sdc.add"' in str(module)
    assert params["w"].shape == (2, 3)
    assert options == {"source": "m.mlir", "frontend": "mlir", "params": "p.npz", "input_shapes": {"B": 2}}


def test_import_model_bad_mesh(rng):
    with pytest.raises(SdcError, match="bad mesh 'dp=two'"):
        import_model(mlp_model(rng), mesh="dp=two")


def test_compiler_keeps_import_model():
    from sdc import compiler

    assert compiler.import_model is import_model


# ---------------------------------------------------------------- parameter files


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_params_round_trip(tmp_path, suffix):
    shared = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    params = {"a": shared, "b": shared[0], "c": np.arange(4, dtype=np.int64)}
    path = write_params(params, tmp_path / f"p{suffix}")
    back = read_params(path)
    assert sorted(back) == ["a", "b", "c"]
    np.testing.assert_array_equal(np.asarray(back["b"]), [0, 1, 2])
    np.testing.assert_array_equal(np.asarray(back["c"]), [0, 1, 2, 3])


def test_params_errors(tmp_path):
    with pytest.raises(SdcError, match="must be .safetensors or .npz"):
        write_params({}, tmp_path / "p.pt")
    with pytest.raises(SdcError, match="parameter 'w' is bf16, which .npz cannot hold"):
        write_params({"w": torch.ones(2, dtype=torch.bfloat16)}, tmp_path / "p.npz")
    with pytest.raises(SdcError, match="cannot open parameter file"):
        read_params(tmp_path / "missing.npz")
    (tmp_path / "bad.safetensors").write_bytes(b"junk")
    with pytest.raises(SdcError, match="cannot read parameter file"):
        read_params(tmp_path / "bad.safetensors")


# ---------------------------------------------------------------- the builder


def _with_builder(body):
    """Run `body(builder, x)` inside a function `@main(%x: tensor<?x4xf32>)`; return (result, IR, params)."""
    params: dict = {}
    with new_context(), ir.Location.unknown():
        module = ir.Module.create()
        b = Builder(params, lambda: "hint")
        with ir.InsertionPoint(module.body):
            fn = func.FuncOp("main", ([b.tensor_type(("B", 4), "f32")], []))
            block = fn.add_entry_block()
        x = V("f32", (sympy.Symbol("B", integer=True, positive=True), 4), value=block.arguments[0])
        with ir.InsertionPoint(block):
            with b.at(Builder.location("node", "model.src", 3)):
                out = body(b, x)
            func.ReturnOp([])
        return out, module.operation.get_asm(enable_debug_info=True), params


def test_builder_folds_constants_and_emits_run_time_ops():
    def body(b, x):
        folded = b.emit("add", [b.const(np.ones(3, np.float32)), b.const(np.ones(3, np.float32))])
        assert folded.is_const and folded.const.tolist() == [2, 2, 2]
        y = b.emit("mul", [x, b.scalar_like(0.5, x)])
        return b.reshape(y, [-1])

    out, text, params = _with_builder(body)
    assert '"sdc.mul"' in text and '"sdc.reshape"(%1) {shape = ["4*B"]}' in text
    assert '"sdc.add"' not in text  # evaluated at import
    assert '#loc1 = loc("model.src":3:0)' in text and '#loc2 = loc("node"(#loc1))' in text
    assert out.sym[0] == 4 * sympy.Symbol("B", integer=True, positive=True)
    assert params == {}


def test_builder_materializes_big_constants_as_parameters():
    def body(b, x):
        big = b.const(np.zeros((INLINE_LIMIT + 1,), np.float32))
        b.tensor(big)
        b.tensor(b.const(np.zeros((INLINE_LIMIT + 1,), np.float32)))  # a second one gets a fresh name
        return b.broadcast(b.scalar_like(1.0, x), [x.sym[0], 4], fold=False)

    out, text, params = _with_builder(body)
    assert sorted(params) == ["hint", "hint_2"]
    assert text.count('"sdc.parameter"') == 2 and '"sdc.broadcast"' in text
    assert out.sym[1] == 4


def test_builder_compile_time_values():
    def body(b, x):
        assert b.static_ints(const_value(np.array([2, 3])), "axes") == [2, 3]
        assert b.scalar(None, "k", 7) == 7
        with pytest.raises(CompileTimeValueError, match="axes must be known at compile time"):
            b.known_ints(x, "axes")
        assert b.cast(x, "f32") is x
        return b.cast(x, "f16")

    out, text, _ = _with_builder(body)
    assert out.dtype == "f16" and '"sdc.cast"' in text


def test_builder_caches_types():
    with new_context(), ir.Location.unknown():
        b = Builder({}, lambda: "p")
        assert b.tensor_type((2, 3), "f32") is b.tensor_type((2, 3), "f32")
        assert str(b.tensor_type(("B", 3), "i64")) == "tensor<?x3xi64>"


# ---------------------------------------------------------------- sdc import


def test_sdc_import_writes_ir_and_params(tmp_path, rng, capsys):
    onnx.save(mlp_model(rng), tmp_path / "m.onnx")
    assert main(["import", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "m.mlir"),
                 "--params", str(tmp_path / "m.safetensors"), "--input-shape", "x=N,16"]) == 0
    text = (tmp_path / "m.mlir").read_text()
    assert '#sdc.dims<["N", 16]>' in text and '"sdc.parameter"() {name = "w"}' in text
    assert sorted(read_params(tmp_path / "m.safetensors")) == ["w"]
    module, params, _ = import_model(tmp_path / "m.mlir", params_file=tmp_path / "m.safetensors")
    assert "sdc.matmul" in str(module) and params["w"].shape == (16, 32)


def test_sdc_import_to_stdout_notes_unwritten_params(tmp_path, rng, capsys):
    onnx.save(mlp_model(rng), tmp_path / "m.onnx")
    assert main(["import", str(tmp_path / "m.onnx")]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("module {") and '"sdc.relu"' in out
    assert err == ("note: the IR names 1 parameter whose values are not written (--params FILE.safetensors "
                   "writes them)\n")


def test_sdc_import_errors(tmp_path, rng, capsys):
    onnx.save(mlp_model(rng), tmp_path / "m.onnx")
    assert main(["import", str(tmp_path / "missing.onnx")]) == 1
    assert capsys.readouterr().err.startswith("error: cannot open")
    assert main(["import", str(tmp_path / "m.onnx"), "--params", str(tmp_path / "p.pt")]) == 2
    assert "the parameter file must be .safetensors or .npz" in capsys.readouterr().err
    assert main(["import", str(tmp_path / "m.onnx"), "--input-shape", "B=8"]) == 2
    assert "sdc import takes an input's dims" in capsys.readouterr().err
    assert main(["import", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "no" / "such" / "dir.mlir")]) == 1
    assert "error: cannot write" in capsys.readouterr().err
