"""Every kind of bad input the fuzzer found is one clean SdcError at the boundary where it enters:
ONNX nodes held to their schema at dispatch, size limits before allocation, run-time inputs,
the one JSON reader, and manifest/plan cross-checks (issue 10, "Zero crashes")."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import sdc
import sdc.runtime
from sdc.compiler import compile_module
from sdc.diagnostics import SdcError
from sdc.frontend.onnx import import_onnx
from sdc.ir_text import parse_module
from sdc.runtime import jsonio

# ---------------------------------------------------------------- ONNX models


def model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=10)


def f32(name, dims):
    return h.make_tensor_value_info(name, T.FLOAT, dims)


def i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def import_error(m) -> str:
    with pytest.raises(SdcError) as e:
        import_onnx(m)
    return str(e.value)


@pytest.mark.parametrize("node, message", [
    (h.make_node("Cast", ["x"], ["y"], name="c"), r"node 'c' \(Cast\): required attribute 'to' is missing"),
    (h.make_node("Concat", ["x", "x"], ["y"], name="cat"), r"node 'cat' \(Concat\): required attribute 'axis'"),
    (h.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=3),
     r"node 'p' \(MaxPool\): attribute 'kernel_shape' must be INTS, found INT"),
    (h.make_node("Transpose", ["x"], ["y"], name="t", perm=h.make_graph([], "g", [], [])),
     r"attribute 'perm' must be INTS, found GRAPH"),
    (h.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[2, 0]), r"'kernel_shape' must be positive"),
    (h.make_node("Shape", ["x"], ["y"], name="s", start=1), r"Shape-15 has no attribute|Shape-1[53] has no"),
    (h.make_node("Add", ["x"], ["y"], name="a"), r"node 'a' \(Add\): has 1 input, Add-14 takes at least 2"),
    (h.make_node("Add", ["x", ""], ["y"], name="a"), r"input 1 \('B'\) is omitted \(''\), but Add requires it"),
    (h.make_node("LSTM", ["x", "x", "x"], ["y"], name="l"), r"attribute 'hidden_size' is missing"),
])
def test_node_schema_is_checked_at_dispatch(node, message):
    m = model([node], [f32("x", [2, 4, 4, 4])], [f32("y", None)], opset=13 if node.op_type == "Shape" else 17)
    assert pytest.raises(SdcError, import_onnx, m).match(message)


def test_input_element_types_follow_the_schema():
    m = model([h.make_node("Expand", ["x", "shape"], ["y"], name="e")], [f32("x", [1, 4])], [f32("y", None)],
              [numpy_helper.from_array(np.array([2.0, 4.0]), "shape")])
    assert "input 1 ('shape') is tensor(double); Expand takes tensor(int64)" in import_error(m)


def test_opset_outside_onnx_and_op_newer_than_the_opset():
    relu = [h.make_node("Relu", ["x"], ["y"])]
    assert "imports ONNX opset 0; opsets are 1.." in import_error(model(relu, [f32("x", [2])], [f32("y", [2])], opset=0))
    ln = [h.make_node("LayerNormalization", ["x", "s"], ["y"], name="ln")]
    m = model(ln, [f32("x", [2, 4])], [f32("y", [2, 4])], [numpy_helper.from_array(np.ones(4, np.float32), "s")],
              opset=13)
    assert "LayerNormalization is not in ONNX opset 13 (it was added in opset 17)" in import_error(m)


def test_unknown_element_type_message_does_not_raise():
    m = model([h.make_node("Relu", ["x"], ["y"])], [f32("x", [2])], [f32("y", [2])])
    m.graph.input[0].type.tensor_type.elem_type = 99
    assert "input 'x' has unsupported element type 99 (not an ONNX element type)" in import_error(m)


def test_names_that_are_not_utf8(tmp_path):
    m = model([h.make_node("Relu", ["x"], ["y"], name="NODE")], [f32("x", ["BATCH", 4])], [f32("y", ["BATCH", 4])])
    for old, new, where in ((b"NODE", b"NO\xffE", "graph.node[0].name"),
                            (b"BATCH", b"BA\xfeCH", "graph.input[0].type.tensor_type.shape.dim[0].dim_param")):
        path = tmp_path / "bad.onnx"
        path.write_bytes(m.SerializeToString().replace(old, new, 1))
        assert f"model.{where} is not UTF-8 text" in pytest.raises(SdcError, import_onnx, str(path)).value.args[0]


def test_constant_folding_is_bounded(monkeypatch):
    cos = h.make_node("ConstantOfShape", ["shape"], ["y"], name="big")
    m = model([cos], [], [f32("y", None)], [i64("shape", [3_000_000_000, 4])])
    assert "node 'big' (ConstantOfShape): ConstantOfShape's folded value would take 44.7 GiB, over the " \
           "allocation limit of 4.0 GiB (set SDC_MAX_ALLOC" in import_error(m)
    rng = h.make_node("Range", ["a", "b", "c"], ["y"], name="ramp")
    m = model([rng], [], [h.make_tensor_value_info("y", T.INT64, None)],
              [i64("a", 0), i64("b", 2**40), i64("c", 1)])
    assert "node 'ramp' (Range): Range(0, 1099511627776, 1) folded at compile time would take 8.0 TiB" in import_error(m)
    m = model([rng], [], [h.make_tensor_value_info("y", T.INT64, None)], [i64("a", 0), i64("b", 4), i64("c", 0)])
    assert "Range(0, 4, 0) has no finite length" in import_error(m)
    monkeypatch.setenv("SDC_MAX_ALLOC", "1K")
    m = model([cos], [], [f32("y", None)], [i64("shape", [16, 32])])
    assert "2.0 KiB, over the allocation limit of 1.0 KiB" in import_error(m)


def test_external_data_is_checked_and_read_in_bounds(tmp_path):
    w = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    m = model([h.make_node("Add", ["x", "w"], ["y"])], [f32("x", [4])], [f32("y", [4])], [w])
    (tmp_path / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())

    def with_external(**info) -> str:
        t = m.graph.initializer[0]
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.data_location = T.EXTERNAL
        del t.external_data[:]
        for k, v in dict(location="w.bin", **info).items():
            e = t.external_data.add()
            e.key, e.value = k, str(v)
        onnx.save(m, tmp_path / "m.onnx")
        return str(tmp_path / "m.onnx")

    import_onnx(with_external(length=16))  # the good one
    for info, message in (({"length": 2**40}, "declares 1099511627776 bytes at offset 0, 'w.bin' has 16 bytes"),
                          ({"offset": 2**40}, "offset 1099511627776 is past the end"),
                          ({"length": -5}, "length -5 is negative"),
                          ({"length": "12x"}, "length '12x' is not an integer")):
        assert message in pytest.raises(SdcError, import_onnx, with_external(**info)).value.args[0]


# ---------------------------------------------------------------- API and CLI


@pytest.mark.parametrize("fields, message", [
    ({"input_shapes": {"x": [-1, 4]}}, "'-1' is not a size"),
    ({"mesh": {"dp": -1}}, "bad mesh"),
    ({"mesh": {"dp": 10**30}}, "more than the limit of 65536"),
    ({"input_shapes": {"x": [10**30, 4]}}, "is larger than the limit"),
])
def test_compile_options_refuse_bad_values(fields, message):
    m = model([h.make_node("Relu", ["x"], ["y"])], [f32("x", ["B", 4])], [f32("y", ["B", 4])])
    assert message in pytest.raises(SdcError, sdc.compile, m, **fields).value.args[0]


def test_ir_text_that_is_binary_or_not_utf8(tmp_path):
    nul = tmp_path / "nul.mlir"
    nul.write_bytes(b"func.func @main() {\n\x00 return }")
    latin = tmp_path / "latin.mlir"
    latin.write_bytes(b'func.func @main() attributes {sdc.x = "\xff"} { return }')
    for path, message in ((nul, "nul.mlir:2: the text holds a NUL byte"), (latin, "not UTF-8 text")):
        for tool in (["-m", "sdc.cli.opt", str(path)], ["-m", "sdc", "compile", str(path), "-o", str(tmp_path / "o")]):
            r = subprocess.run([sys.executable, *tool], capture_output=True, text=True)
            assert r.returncode == 1 and message in r.stderr and "Traceback" not in r.stderr, r.stderr



@pytest.mark.parametrize("element", ["i640", "f16", "ui8"])
def test_a_dense_array_the_bindings_cannot_read_is_one_error(tmp_path, element):
    # Found by the fuzzer (ir-text:61:81772): `array<i640: ...>` parsed, then the verifier's read of it
    # threw inside MLIR's C++ and aborted sdc-opt (exit -6). The same attribute of i64 still parses.
    value = "1.0" if element.startswith("f") else "0"
    text = ('func.func @pad(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {\n'
            f'  %0 = "sdc.pad"(%x) {{mode = "constant", pads = array<{element}: {value}, {value}, {value}, {value}>}}'
            ' : (tensor<2x3xf32>) -> tensor<2x3xf32>\n  return %0 : tensor<2x3xf32>\n}\n')
    bad = tmp_path / "bad.mlir"
    bad.write_text(text)
    r = subprocess.run([sys.executable, "-m", "sdc.cli.opt", str(bad)], capture_output=True, text=True)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"bad.mlir:2: a dense array of element type {element}" in r.stderr
    good = tmp_path / "good.mlir"
    good.write_text(text.replace(f"array<{element}: {value}, {value}, {value}, {value}>", "array<i64: 0, 0, 0, 0>"))
    r = subprocess.run([sys.executable, "-m", "sdc.cli.opt", str(good)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------- run-time inputs

PROGRAM = """
func.func @main(%x: tensor<?x8xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["B", 8]>}) -> tensor<?x8xf32> {
  %0 = "sdc.exp"(%x) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}
"""


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("a") / "m.sdc"
    compile_module(parse_module(PROGRAM), {}, output=path)
    return path


def test_big_endian_and_strided_inputs_run(pristine):
    exe = sdc.runtime.load(pristine)
    x = np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)
    # (the last: one row read backwards, found by the fuzzer (run-inputs:12:10024); numpy calls a size-1 dim
    # of negative stride C-contiguous, torch.from_numpy refuses it)
    for given in (x.astype(">f4"), np.asfortranarray(x), x[::-1].copy()[::-1], np.repeat(x, 2, axis=0)[::2],
                  x[::-1][2:3]):
        want = np.exp(given.astype(np.float64))
        for _ in range(2):  # checked in full, then as a remembered signature
            np.testing.assert_allclose(np.asarray(exe(given)[0]), want, rtol=1e-5)


def test_zero_stride_input_is_not_copied_in_full(pristine):
    exe = sdc.runtime.load(pristine)
    huge = np.broadcast_to(np.float32(1), (2**40, 8))
    with pytest.raises(SdcError, match=r"input 'x' \(a broadcast view of shape \[1099511627776, 8\]\) would take"):
        exe(huge)


# ---------------------------------------------------------------- artifacts


@pytest.fixture
def artifact(pristine, tmp_path) -> Path:
    copy = tmp_path / "m.sdc"
    shutil.copytree(pristine, copy)
    return copy


def rehash(root: Path) -> None:
    manifest = json.loads((root / "manifest.json").read_text())
    for rel in manifest["files"]:
        data = (root / rel).read_bytes()
        manifest["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (root / "manifest.json").write_text(json.dumps(manifest))


def edit(root: Path, name: str, change) -> None:
    doc = json.loads((root / name).read_text())
    change(doc)
    (root / name).write_text(json.dumps(doc))
    rehash(root)


def test_json_reader_limits():
    with pytest.raises(jsonio.JsonError, match="nests arrays/objects more than 64 deep"):
        jsonio.loads("[" * 100000 + "]" * 100000)
    assert jsonio.loads('{"a": "[[[[" }') == {"a": "[[[["}  # brackets in strings do not count
    with pytest.raises(jsonio.JsonError, match="over the limit"):
        jsonio.loads(b"[" + b"0," * 100 + b"0]", max_bytes=64)
    with pytest.raises(jsonio.JsonError, match="NaN is not JSON"):
        jsonio.loads("[NaN]")


def test_deeply_nested_plan_is_one_error(artifact):
    (artifact / "plan.json").write_text("[" * 100000 + "]" * 100000)
    rehash(artifact)
    with pytest.raises(SdcError, match="plan.json: nests arrays/objects more than 64 deep"):
        sdc.runtime.load(artifact)


@pytest.mark.parametrize("name, change, message", [
    ("manifest.json", lambda m: m.update(world_size=10**30), "world_size must be between 1 and 65536"),
    ("manifest.json", lambda m: m.update(mesh={"dp": 2}), r"mesh \{'dp': 2\} has 2 devices, world_size is 1"),
    ("manifest.json", lambda m: m["entry"].update(guards=[{"condition": "B + " * 50000 + "1 > 0"}]),
     "characters long, more than the limit"),
    ("manifest.json", lambda m: m["entry"]["inputs"][0].update(dtype="f16"),
     r"rank 0: input 'x' \(value 'v0'\) is f32, manifest.json says f16"),
    ("manifest.json", lambda m: m["entry"]["inputs"][0].update(shape=["B", 9]), "dim 1 is 8, manifest.json says 9"),
    ("manifest.json", lambda m: m["entry"]["outputs"][0].update(shape=["B"]), "has rank 2, manifest.json says 1"),
    ("manifest.json", lambda m: m.update(compile_options=7), "field 'compile_options' must be an object"),
    ("plan.json", lambda p: p.update(world_size=2), "plan.json: 'world_size' is 2, manifest.json says 1"),
    ("plan.json", lambda p: p.update(shardings=5), "'shardings' must be"),
])
def test_manifest_and_plan_are_checked_and_cross_checked(artifact, name, change, message):
    edit(artifact, name, change)
    with pytest.raises(SdcError, match=message):
        sdc.runtime.load(artifact)
    r = subprocess.run([sys.executable, "-m", "sdc", "inspect", str(artifact)], capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.startswith("error: bad artifact") and "Traceback" not in r.stderr


def _rewrite_header(root: Path, change) -> None:
    path = root / "weights" / "rank0.safetensors"
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    change(header)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + n:])
    rehash(root)


@pytest.fixture
def weighted(tmp_path) -> Path:
    path = tmp_path / "w.sdc"
    program = PROGRAM.replace('%0 = "sdc.exp"(%x)', '%w = "sdc.parameter"() {name = "w"} : () -> tensor<8xf32>\n'
                              '  %1 = "sdc.mul"(%x, %w) : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>\n'
                              '  %0 = "sdc.exp"(%1)')
    compile_module(parse_module(program), {"w": np.ones(8, np.float32)}, output=path)
    return path


@pytest.mark.parametrize("change, message", [
    (lambda hd: hd["w"].update(data_offsets="0-32"), "data_offsets must be two sizes"),
    (lambda hd: hd["w"].update(data_offsets=[0, 2**40]), "data_offsets outside the file"),
    (lambda hd: hd["w"].update(shape=[9]), "data_offsets do not match the dtype and shape"),
    (lambda hd: hd["w"].update(dtype=["F32"]), "unsupported dtype"),
    (lambda hd: hd.update(w=3), "not an object"),
])
def test_safetensors_header_entries_are_type_checked(weighted, change, message):
    _rewrite_header(weighted, change)
    exe_error = pytest.raises(SdcError, lambda: sdc.runtime.load(weighted)(np.ones((2, 8), np.float32)))
    assert message in str(exe_error.value)


def test_folding_the_models_bad_constants_is_a_model_error():
    gather = h.make_node("Gather", ["c", "i"], ["y"], name="g", axis=0)
    m = model([gather], [], [h.make_tensor_value_info("y", T.INT64, None)], [i64("c", [1, 2, 3]), i64("i", [7])])
    assert "node 'g' (Gather): evaluating sdc.gather on the model's constants failed" in import_error(m)
    div = h.make_node("Div", ["a", "b"], ["y"], name="d")
    m = model([div], [], [h.make_tensor_value_info("y", T.INT64, None)], [i64("a", [4]), i64("b", [0])])
    assert "node 'd' (Div): evaluating sdc.div on the model's constants failed" in import_error(m)
    shape = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "i"], ["y"], name="g", axis=0)]
    m = model(shape, [f32("x", ["B", 4])], [h.make_tensor_value_info("y", T.INT64, None)], [i64("i", 2049)])
    assert "node 'g' (Gather): Gather of a shape vector: index 2049 is out of bounds" in import_error(m)


def test_range_bounds_must_be_scalars():
    # Found by the fuzzer (onnx-struct:11:956): a Range input rewired to a 3-element constant.
    rng = h.make_node("Range", ["s", "l", "d"], ["y"], name="range")
    m = model([rng], [], [h.make_tensor_value_info("y", T.INT64, None)], [i64("s", [0, 1, 2]), i64("l", 5), i64("d", 1)])
    assert "node 'range' (Range): Range start must be a scalar, found shape [3]" in import_error(m)


def test_a_long_range_of_constants_runs_at_run_time():
    """Found by the fuzzer (onnx-bytes:2203:67110): a flipped byte made a Range of constants 134M long,
    which the folder computed in three 1 GiB tensors. A constant Range over FOLDED_RANGE_ELEMENTS is
    an iota at run time: the artifact stores no such weight, and the values match onnxruntime."""
    import onnxruntime as ort

    import sdc
    from sdc.frontend.onnx_ops import FOLDED_RANGE_ELEMENTS

    n = FOLDED_RANGE_ELEMENTS + 5
    for dtype, start, step in ((T.FLOAT, 0.5, 1.5), (T.INT64, -3, 2)):
        cast = np.float32 if dtype == T.FLOAT else np.int64
        bounds = [h.make_tensor(k, dtype, [], [cast(v)]) for k, v in (("s", start), ("l", start + n * step), ("d", step))]
        rng = h.make_node("Range", ["s", "l", "d"], ["y"], name="range")
        m = model([rng], [], [h.make_tensor_value_info("y", dtype, [n])], bounds)
        exe = sdc.compile(m)
        assert sum(w.numel() for w in exe._executor.initial if w is not None) < 16  # the three bounds at most
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {})[0]
        out = exe()
        got = np.asarray(out[0] if isinstance(out, (list, tuple)) else out)
        assert got.shape == (n,)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


def test_a_graph_output_without_a_name():
    # Found by the fuzzer (onnx-bytes:11:6945): a flipped byte emptied an output's name.
    relu = h.make_node("Relu", ["x"], ["y"], name="r")
    m = model([relu], [f32("x", [2])], [f32("", [2])])
    assert "graph output #0 has an empty name" in import_error(m)


def test_axes_out_of_range_and_empty_scalars_are_model_errors():
    # Found by the fuzzer: Split of a rank-0 input (onnx-struct:11:30816), a Clip bound with no
    # elements (onnx-bytes:11:45470). Every op reads its axes through one check.
    split = h.make_node("Split", ["c"], ["a", "b"], name="split", axis=1)
    m = model([split], [], [h.make_tensor_value_info(n, T.INT64, None) for n in "ab"], [i64("c", 3)])
    assert "node 'split' (Split): axis 1 is out of range for rank 0" in import_error(m)
    softmax = h.make_node("Softmax", ["x"], ["y"], name="sm", axis=2)
    m = model([softmax], [f32("x", [2, 3])], [f32("y", [2, 3])])
    assert "node 'sm' (Softmax): axis 2 is out of range for rank 2" in import_error(m)
    clip = h.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip")
    empty = numpy_helper.from_array(np.zeros(0, np.float32), "hi")
    m = model([clip], [f32("x", [2])], [f32("y", [2])], [numpy_helper.from_array(np.float32(0), "lo"), empty])
    assert "node 'clip' (Clip): Clip max must hold one value, found 0" in import_error(m)


def test_fewer_results_than_outputs_and_dims_past_int64():
    # Found by the fuzzer: a Split whose sizes name fewer parts than its outputs (onnx-bytes:11:48675),
    # a Tile whose repeats overflow int64 (onnx-bytes:11:49545).
    split = h.make_node("Split", ["x", "sp"], ["a", "b"], name="split", axis=0)
    m = model([split], [f32("x", [4])], [f32("a", None), f32("b", None)], [i64("sp", [4])])
    assert "node 'split' (Split) has 2 outputs but computes 1" in import_error(m)
    tile = h.make_node("Tile", ["x", "r"], ["y"], name="tile")
    m = model([tile], [f32("x", [4])], [f32("y", None)], [i64("r", [2**62])])
    assert re.search(r"node 'tile' \(Tile\): a dim of \d+ cannot be a tensor dim \(sizes are 0 to 2\^62\)", import_error(m))


STATIC_CHAIN = """
func.func @main(%x: tensor<4x8xf32> {sdc.name = "x"}) -> tensor<4x8xf32> {
  %0 = "sdc.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = "sdc.softmax"(%0) {axis = -1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = "sdc.log_softmax"(%1) {axis = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}
"""


def test_inspect_reads_the_arenas_report_fields_defensively(tmp_path):
    # Found by the fuzzer (artifact:12:11968): a string where the arena's report-only size was.
    path = tmp_path / "chain.sdc"
    compile_module(parse_module(STATIC_CHAIN), {}, output=path)
    assert json.loads((path / "plan.json").read_text())["ranks"][0].get("arena"), "the chain has a memory plan"
    edit(path, "plan.json", lambda p: p["ranks"][0]["arena"].update(unshared_bytes="many", max_live_bytes=[1]))
    r = subprocess.run([sys.executable, "-m", "sdc", "inspect", str(path)], capture_output=True, text=True)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "memory plan: arena" in r.stdout and "without reuse" not in r.stdout


def test_an_input_dim_past_int64_is_a_model_error():
    # Found by the fuzzer (onnx-struct:12:1091): an input declared with a dim of 2^62.
    relu = h.make_node("Relu", ["x"], ["y"], name="r")
    m = model([relu], [f32("x", [2**62, 2])], [f32("y", None)])
    assert "input 'x' dim 0 is 4611686018427387904: too large for a tensor dim" in import_error(m)


def test_a_shape_value_reshaped_to_a_symbolic_shape():
    # Found by the fuzzer (onnx-struct:21:12071): a Reshape's data rewired to a dim taken from Shape.
    nodes = [h.make_node("Shape", ["x"], ["sh"]), h.make_node("Gather", ["sh", "i"], ["t"], axis=0),
             h.make_node("Reshape", ["t", "x_shape"], ["r"], name="reshape"),
             h.make_node("Shape", ["x"], ["x_shape"])]
    m = model(nodes, [f32("x", ["B", "T", 8])], [h.make_tensor_value_info("r", T.INT64, None)], [i64("i", [1])])
    assert "node 'reshape' (Reshape): a shape value of shape [1] reshaped to [B, T, 8]" in import_error(m)


def test_a_slice_of_a_shape_value_checks_its_axes_and_steps():
    # Found by the fuzzer (onnx-struct:51:35491): a Slice of a rank-0 shape value (a dim taken from
    # Shape by a scalar Gather) with axis 1 divided by the rank 0.
    def sliced(axis: int, step: int):
        nodes = [h.make_node("Shape", ["x"], ["sh"]), h.make_node("Gather", ["sh", "i"], ["t"], axis=0),
                 h.make_node("Slice", ["t", "st", "en", "ax", "sp"], ["y"], name="slice")]
        return model(nodes, [f32("x", ["B", 4])], [h.make_tensor_value_info("y", T.INT64, None)],
                     [i64("i", 0), i64("st", [0]), i64("en", [1]), i64("ax", [axis]), i64("sp", [step])])

    assert "node 'slice' (Slice): Slice axis 1 is out of range for a shape value of rank 0" in import_error(sliced(1, 1))
    nodes = [h.make_node("Shape", ["x"], ["sh"]), h.make_node("Slice", ["sh", "st", "en", "ax", "sp"], ["y"], name="slice")]
    m = model(nodes, [f32("x", ["B", 4])], [h.make_tensor_value_info("y", T.INT64, None)],
              [i64("st", [0]), i64("en", [2]), i64("ax", [0]), i64("sp", [0])])
    assert "node 'slice' (Slice): Slice step 0" in import_error(m)
