"""The dialect verifier through the parser: located errors (FILE:LINE:COL) for bad ops, and
building ops from Python with inferred result types."""

from __future__ import annotations

import numpy as np
import pytest

from sdc.diagnostics import SdcError, SourceLoc
from sdc.dialect.ir import op_attributes, tensor_spec
from sdc.dialect.builder import create
from sdc.dialect.op_classes import new_context, verify_op
from sdc.dialect.shapes import DYN, TensorSpec
from sdc.ir_text import parse_module
from sdc.mlir import func, ir

# Each case: IR whose line marked `// <-` holds the bad op, and the message expected there.
BAD_OPS = {
    "shape rule": ('''func.func @f(%a: tensor<3x4xf32>, %b: tensor<5x6xf32>) {
  %0 = "sdc.matmul"(%a, %b) : (tensor<3x4xf32>, tensor<5x6xf32>) -> tensor<3x6xf32> // <-
  return
}''', "'sdc.matmul' op contracting dims differ: lhs has 4, rhs has 5"),
    "declared result": ('''func.func @f(%a: tensor<3x4xf32>) {
  %c = "sdc.neg"(%a) : (tensor<3x4xf32>) -> tensor<3x4xf32>
      %0 = "sdc.exp"(%c) : (tensor<3x4xf32>) -> tensor<3x5xf32> // <-
  return
}''', "'sdc.exp' op result #0 dim 1 is 5, expected 4 (inferred type tensor<3x4xf32>)"),
    "result element type": ('''func.func @f(%a: tensor<3xf32>, %b: tensor<3xf32>) {
  %0 = "sdc.lt"(%a, %b) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32> // <-
  return
}''', "'sdc.lt' op result #0 element type is f32, expected i1"),
    "result rank": ('''func.func @f(%a: tensor<3x4xf32>) {
  %0 = "sdc.reduce_sum"(%a) {axes = array<i64: 1>} : (tensor<3x4xf32>) -> tensor<3x1xf32> // <-
  return
}''', "'sdc.reduce_sum' op result #0 has rank 2, expected 1 (tensor<3xf32>)"),
    "unknown attribute": ('''func.func @f(%a: tensor<3xf32>) {
  %0 = "sdc.relu"(%a) {alpha = 1.0 : f64} : (tensor<3xf32>) -> tensor<3xf32> // <-
  return
}''', "'sdc.relu' op has unknown attribute 'alpha' (known: none)"),
    "missing attribute": ('''func.func @f(%a: tensor<3x4xf32>) {
  %0 = "sdc.transpose"(%a) : (tensor<3x4xf32>) -> tensor<4x3xf32> // <-
  return
}''', "'sdc.transpose' op requires attribute 'perm'"),
    "attribute kind": ('''func.func @f(%a: tensor<3xf32>) {
  %0 = "sdc.softmax"(%a) {axis = "last"} : (tensor<3xf32>) -> tensor<3xf32> // <-
  return
}''', "'sdc.softmax' op attribute 'axis' expected an integer attribute, found \"last\""),
    "enum choice": ('''func.func @f(%a: tensor<3xf32>) {
  %0 = "sdc.gelu"(%a) {approximate = "fast"} : (tensor<3xf32>) -> tensor<3xf32> // <-
  return
}''', "'sdc.gelu' op attribute 'approximate' expected one of 'none', 'tanh', found 'fast'"),
    "operand count": ('''func.func @f(%a: tensor<3xf32>) {
  %0 = "sdc.add"(%a) : (tensor<3xf32>) -> tensor<3xf32> // <-
  return
}''', "'sdc.add' op expects 2 operands, found 1"),
    "result count": ('''func.func @f(%a: tensor<3x4xf32>) {
  %0:3 = "sdc.split"(%a) {axis = 1 : i64, parts = 2 : i64} : (tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>) // <-
  return
}''', "'sdc.split' op has 3 results, the shape rule gives 2"),
    "unranked operand": ('''func.func @f(%a: tensor<*xf32>) {
  %0 = "sdc.neg"(%a) : (tensor<*xf32>) -> tensor<*xf32> // <-
  return
}''', "'sdc.neg' op operand #0 must be a ranked tensor, found tensor<*xf32>"),
    "element type": ('''func.func @f(%a: tensor<2xcomplex<f32>>) {
  %0 = "sdc.neg"(%a) : (tensor<2xcomplex<f32>>) -> tensor<2xcomplex<f32>> // <-
  return
}''', "'sdc.neg' op operand #0 has unsupported element type complex<f32>"),
    "mesh": ('''module attributes {sdc.mesh = #sdc.mesh<["dp"], array<i64: 2>>} {
  func.func @f(%a: tensor<3xf32>) {
    %0 = "sdc.all_gather"(%a) {axis = 0 : i64, mesh_axes = ["tp"]} : (tensor<3xf32>) -> tensor<6xf32> // <-
    return
  }
}''', "'sdc.all_gather' op mesh axis 'tp' is not in the mesh (axes: 'dp')"),
    "unknown op": ('''func.func @f(%a: tensor<3xf32>) {
  %0 = "sdc.frobnicate"(%a) : (tensor<3xf32>) -> tensor<3xf32> // <-
  return
}''', "unregistered operation 'sdc.frobnicate'"),
}


def _marked(text: str) -> SourceLoc:
    """Where the op on the marked line starts (the result list, or the op name when there is none)."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.endswith("// <-"):
            return SourceLoc("bad.mlir", number, line.index('"sdc.') + 1)
    raise AssertionError("no marked line")


@pytest.mark.parametrize("case", list(BAD_OPS))
def test_verifier_errors_are_located(case):
    text, message = BAD_OPS[case]
    with pytest.raises(SdcError) as info:
        parse_module(text, source_name="bad.mlir")
    (diag,) = [d for d in info.value.diagnostics if d.severity == "error"]
    assert diag.loc == _marked(text)
    assert message in diag.message
    where = _marked(text)
    assert info.value.format().startswith(f"bad.mlir:{where.line}:{where.col}: error: ")


def test_syntax_errors_are_located():
    text = 'func.func @f(%a: tensor<3xf32>) {\n  %0 = "sdc.neg"(%a) : (tensor<3xf32>) ->\n  return\n}'
    with pytest.raises(SdcError) as info:
        parse_module(text, source_name="bad.mlir")
    assert info.value.diagnostics[0].loc.file == "bad.mlir"
    assert info.value.diagnostics[0].loc.line in (2, 3)


def test_the_first_line_keeps_its_columns():
    # The implicit module for several top-level ops must not shift positions.
    text = '\nfunc.func @f(%a: tensor<3xf32>) {\n  return\n}\nfunc.func @g(%a: tensor<3xf32>) {\n' \
           '  %0 = "sdc.exp"(%a) : (tensor<3xf32>) -> tensor<4xf32> // <-\n  return\n}'
    with pytest.raises(SdcError) as info:
        parse_module(text, source_name="bad.mlir")
    assert info.value.diagnostics[0].loc == _marked(text)


def test_a_good_module_parses():
    module = parse_module('''module {
  func.func @f(%a: tensor<?x4xf32> {sdc.dims = #sdc.dims<["B", 4]>}) -> tensor<?x8xf32> {
    %0 = "sdc.concat"(%a, %a) {axis = 1 : i64} : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x8xf32>
    return %0 : tensor<?x8xf32>
  }
}''')
    assert module.name == "builtin.module"


def test_concat_of_unequal_parts_verifies():
    # Fixed-arity operands each get their own IRDL constraint, so their types may differ.
    parse_module('''func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) {
  %0 = "sdc.concat"(%a, %b) {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  return
}''')


# ---------------------------------------------------------------- building ops


def _build(arg_types: list[str], body) -> ir.Operation:
    """A module with one function over `arg_types` whose body `body(args)` builds and returns ops."""
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        types = [ir.Type.parse(t) for t in arg_types]
        fn = func.FuncOp("f", ir.FunctionType.get(types, []))
        block = fn.add_entry_block()
        with ir.InsertionPoint(block):
            ops = body(list(block.arguments))
            func.ReturnOp([])
    return module, ops


def test_create_infers_result_types():
    with new_context(), ir.Location.unknown():
        module, ops = _build(["tensor<?x16x64xf32>", "tensor<32x64xf32>"], lambda a: [
            create("matmul", a, {"transpose_rhs": True}),
            create("reshape", [a[1]], {"shape": [-1, 8, "S"]}),
        ])
        matmul, reshape = ops
        assert [tensor_spec(r.type) for r in matmul.results] == [TensorSpec((DYN, 16, 32), "f32")]
        assert [tensor_spec(r.type) for r in reshape.results] == [TensorSpec((DYN, 8, DYN), "f32")]
        # Every default is written out, so the printed op is complete.
        assert set(op_attributes(matmul)) == {"transpose_lhs", "transpose_rhs"}
        assert verify_op(matmul) is None and verify_op(reshape) is None
        assert module.operation.verify()
        reparsed = parse_module(str(module))
        assert '"sdc.matmul"' in str(reparsed)


def test_create_with_a_constant_and_a_mesh():
    with new_context(), ir.Location.unknown():
        module, (const, gather) = _build(["tensor<6x4xf32>"], lambda a: [
            c := create("constant", [], {"value": np.array([[0, 5], [-1, 2]], dtype=np.int64)}),
            create("gather", [a[0], c.results[0]], {"axis": 0}),
        ])
        assert str(gather.results[0].type) == "tensor<2x2x4xf32>"
        assert str(const.results[0].type) == "tensor<2x2xi64>"
        module2, (reduce_scatter,) = _build(["tensor<8x4xf32>"], lambda a: [
            create("reduce_scatter", a, {"mesh_axes": ["tp"], "axis": 0}, mesh={"tp": 4})])
        assert str(reduce_scatter.results[0].type) == "tensor<2x4xf32>"


def test_create_refuses_incomplete_ops():
    with new_context(), ir.Location.unknown():
        with pytest.raises(ValueError, match="sdc.transpose needs attribute\\(s\\) perm"):
            _build(["tensor<2x3xf32>"], lambda a: [create("transpose", a)])
        with pytest.raises(ValueError, match="sdc.parameter needs explicit result types"):
            _build([], lambda a: [create("parameter", [], {"name": "w"})])
