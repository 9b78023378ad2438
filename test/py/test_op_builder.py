"""One builder of sdc ops (sdc/dialect/builder.py): what `OpBuilder` builds, and that no module
outside the builder creates sdc ops another way.

The structure checks read the source (ast) of sdc/: an `Operation.create` call outside the builder
must name a non-sdc op as a string literal (`"func.return"`); the generated op classes are not
instantiated outside the modules that define them; and the only classes that build sdc ops for
others are the dialect's `OpBuilder` and the frontends' `Builder`, which creates through it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from sdc.dialect import builder as B
from sdc.dialect import op_classes
from sdc.dialect.builder import OpBuilder, create, create_fusion, create_yield
from sdc.dialect.ir import op_attributes, tensor_spec
from sdc.dialect.op_classes import new_context, verify_op
from sdc.dialect.shapes import TensorSpec
from sdc.interpreter import interpret
from sdc.mlir import func, ir

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sdc"
BUILDER = "sdc/dialect/builder.py"
# (module, class) -> why it may build sdc ops for others
BUILDER_CLASSES = {
    (BUILDER, "OpBuilder"): "the builder: an insertion point, a location, cached scalars",
    ("sdc/frontend/builder.py", "Builder"): "the frontends': folding, symbolic dims and parameter names over `create`",
}
# op classes -> the module that defines them (the only one that may name them)
OP_CLASS_NAMES = {"OP_CLASSES": "sdc/dialect/op_classes.py", "FusionOp": "sdc/dialect/structure.py",
                  "YieldOp": "sdc/dialect/structure.py"}


# ---------------------------------------------------------------- the source checks


def _sources() -> list[tuple[str, ast.Module]]:
    return [(p.relative_to(ROOT).as_posix(), ast.parse(p.read_text(), filename=str(p)))
            for p in sorted(PACKAGE.rglob("*.py"))]


def _operation_creates(tree: ast.Module) -> list[tuple[int, str]]:
    """`Operation.create(...)` calls that may create an sdc op: (line, the name argument as written)."""
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "create"):
            continue
        owner = node.func.value
        if not ((isinstance(owner, ast.Attribute) and owner.attr == "Operation")
                or (isinstance(owner, ast.Name) and owner.id == "Operation")):
            continue
        name = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "name"), None)
        if isinstance(name, ast.Constant) and isinstance(name.value, str) and not name.value.startswith("sdc."):
            continue  # another dialect's op, by its literal name
        out.append((node.lineno, ast.unparse(name) if name is not None else "<no name>"))
    return out


def _builder_classes(tree: ast.Module) -> list[str]:
    """Classes that build sdc ops for others: subclasses of OpBuilder, classes with the derivative
    rules' interface (`op` and `ops` methods), and `*Builder` classes that create ops."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = {ast.unparse(b).rpartition(".")[2] for b in node.bases}
        methods = {f.name for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if "OpBuilder" in bases or {"op", "ops"} <= methods or node.name.endswith("Builder") and _creates_ops(node):
            out.append(node.name)
    return out


def _creates_ops(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and ast.unparse(n.func).rpartition(".")[2] in ("create", "OpBuilder")
               for n in ast.walk(node))


def test_the_checks_find_what_they_look_for():
    planted = ast.parse('''
from sdc.mlir import ir
def f(name, x):
    ir.Operation.create("func.return", operands=[x])
    ir.Operation.create("sdc.add", operands=[x, x])
    ir.Operation.create(name, operands=[x])
class MyBuilder:
    def op(self, name, *xs):
        return create(name, list(xs)).results[0]
class Sub(OpBuilder):
    pass
class Rules:
    def op(self, name, *xs): ...
    def ops(self, name, *xs): ...
class PlanBuilder:
    def step(self):
        return {"launch": 1}
class Step:
    def op(self):
        return "launch"
''')
    assert _operation_creates(planted) == [(5, "'sdc.add'"), (6, "name")]
    assert _builder_classes(planted) == ["MyBuilder", "Sub", "Rules"]


def test_only_the_builder_creates_sdc_ops():
    found = [f"{rel}:{line}: Operation.create({name})" for rel, tree in _sources() if rel != BUILDER
             for line, name in _operation_creates(tree)]
    assert not found, ("create sdc ops through sdc/dialect/builder.py (create, create_fusion, create_yield), "
                       f"not ir.Operation.create: {found}")


def test_the_op_classes_are_named_only_where_they_are_defined():
    found = []
    for rel, tree in _sources():
        for node in ast.walk(tree):
            name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
            if name in OP_CLASS_NAMES and OP_CLASS_NAMES[name] != rel:
                found.append(f"{rel}:{node.lineno}: {name}")
    assert not found, f"the generated op classes build ops outside the builder: {found}"


def test_one_builder_class():
    found = {(rel, name) for rel, tree in _sources() for name in _builder_classes(tree)}
    assert found == set(BUILDER_CLASSES), f"builders of sdc ops: {sorted(found)}; expected {sorted(BUILDER_CLASSES)}"
    frontend = dict(_sources())["sdc/frontend/builder.py"]
    imported = {(n.module, a.name) for n in ast.walk(frontend) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert ("sdc.dialect.builder", "create") in imported


def test_op_classes_create_is_the_builders():
    assert op_classes.create is B.create
    assert op_classes.infer_results is B.infer_results


# ---------------------------------------------------------------- what OpBuilder builds


def _function(arg_types: list[str]):
    """A module with one function over `arg_types`, its block and its `func.return` (of nothing yet)."""
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        fn = func.FuncOp("f", ir.FunctionType.get([ir.Type.parse(t) for t in arg_types], []))
        block = fn.add_entry_block()
        with ir.InsertionPoint(block):
            ret = func.ReturnOp([])
    return module, fn, block, ret.operation


def _return(fn, ret, values):
    with ir.InsertionPoint(ret), ret.location:
        ir.Operation.create("func.return", operands=list(values))
    ret.erase()
    fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
        [a.type for a in fn.regions[0].blocks[0].arguments], [v.type for v in values]))


def test_op_builder_inserts_at_its_point_with_its_location():
    with new_context(), ir.Location.unknown():
        module, fn, block, ret = _function(["tensor<4x3xf32>", "tensor<3xf32>"])
        x, bias = block.arguments
        loc = ir.Location.name("fc1", childLoc=ir.Location.file("model.onnx", 7, 0))
        b = OpBuilder(ir.InsertionPoint(ret), loc)
        y = b.op("add", b.op("matmul", x, b.op("reshape", bias, shape=[3, 1])), b.op("neg", b.op("relu", x)))
        names = [op.operation.name for op in block.operations]
        assert names == ["sdc.reshape", "sdc.matmul", "sdc.relu", "sdc.neg", "sdc.add", "func.return"]
        assert [op.name for op in b.created] == names[:-1]
        assert str(y.type) == "tensor<4x3xf32>"  # [4, 1] + [4, 3] broadcasts
        assert all(str(op.location) == 'loc("fc1"("model.onnx":7:0))' for op in b.created)
        assert all(verify_op(op) is None for op in b.created)
        # attributes are encoded by their kinds, defaults written out
        matmul = b.created[1]
        assert {k: str(v) for k, v in op_attributes(matmul).items()} == {"transpose_lhs": "false",
                                                                        "transpose_rhs": "false"}
        assert str(b.created[0].attributes["shape"]) == "[3, 1]"  # a dims attribute: ints or dim names


def test_op_builder_scalars_are_built_once_per_number_and_dtype():
    with new_context(), ir.Location.unknown():
        module, fn, block, ret = _function([])
        b = OpBuilder(ir.InsertionPoint(ret))
        half = b.scalar(0.5, "f32")
        assert b.scalar(0.5, "f32") is half
        assert b.scalar(0.5, "f16") is not half and b.scalar(2.0, "f32") is not half
        low = b.scalar(0.25, "bf16")  # numpy has no bf16 literal: an f32 constant, cast
        assert b.created[-1].name == "sdc.cast" and str(low.type) == "tensor<bf16>"
        assert [op.name for op in b.created].count("sdc.constant") == 4  # 0.5 f32, 0.5 f16, 2.0 f32, 0.25 f32
        other = OpBuilder(ir.InsertionPoint(ret), scalars=b.scalars)  # shared: the same point
        assert other.scalar(0.5, "f32") is half and not other.created
        _return(fn, ret, [half, low])
        assert module.operation.verify()
        outs = interpret(module, [])
        assert outs[0].dtype == np.float32 and float(outs[0]) == 0.5
        assert float(outs[1]) == 0.25


def test_op_builder_program_computes_what_numpy_does():
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((5, 8)).astype(np.float32), rng.standard_normal((3, 8)).astype(np.float32)
    with new_context(), ir.Location.unknown():
        module, fn, block, ret = _function(["tensor<5x8xf32>", "tensor<3x8xf32>"])
        b = OpBuilder(ir.InsertionPoint(ret))
        a, v = block.arguments
        y = b.op("mul", b.op("exp", b.op("matmul", a, v, transpose_rhs=True)), b.scalar(0.5, "f32"))
        s = b.op("reduce_sum", y, axes=[1], keepdims=True)
        _return(fn, ret, [b.op("div", y, s)])
        assert module.operation.verify()
        (got,) = interpret(module, [x, w])
    e = np.exp(x.astype(np.float64) @ w.T.astype(np.float64)) * 0.5
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_op_builder_fills_slot_segments_and_takes_a_mesh():
    with new_context(), ir.Location.unknown():
        module, fn, block, ret = _function(["tensor<8x4xf32>"])
        (x,) = block.arguments
        b = OpBuilder(ir.InsertionPoint(ret), mesh={"tp": 4})
        (part,) = b.ops("reduce_scatter", x, mesh_axes=["tp"], axis=0)
        assert tensor_spec(part.type) == TensorSpec((2, 4), "f32")
        op = b.create("custom", [x, x], {"name": "pair", "attributes": "{}"},
                      result_types=[x.type, x.type, x.type])
        sizes = op.attributes["operandSegmentSizes"]
        assert list(ir.DenseI32ArrayAttr(sizes)) == [1, 1] + [0] * 6
        assert list(ir.DenseI32ArrayAttr(op.attributes["resultSegmentSizes"])) == [1, 1, 1, 0]
        with pytest.raises(ValueError, match="sdc.custom takes 0 to 8 operands, found 9"):
            b.create("custom", [x] * 9, {"name": "pair", "attributes": "{}"}, result_types=[x.type])


def test_fusion_and_yield_are_built_by_the_builder():
    with new_context(), ir.Location.unknown():
        module, fn, block, ret = _function(["tensor<4xf32>"])
        (x,) = block.arguments
        loc = ir.Location.name("g")
        y = create("exp", [x], ip=ir.InsertionPoint(ret), loc=loc)
        fusion = create_fusion("elementwise", [x.type], loc=loc, ip=ir.InsertionPoint(ret))
        body = fusion.regions[0].blocks[0]
        terminator = create_yield([y.results[0]], loc=loc, ip=ir.InsertionPoint(body))
        y.move_before(terminator)
        _return(fn, ret, [fusion.results[0]])
        assert module.operation.verify()
        assert fusion.name == "sdc.fusion" and ir.StringAttr(fusion.attributes["kind"]).value == "elementwise"
        assert [op.operation.name for op in body.operations] == ["sdc.exp", "sdc.yield"]
        data = np.random.default_rng(1).standard_normal(4).astype(np.float32)
        (got,) = interpret(module, [data])
    np.testing.assert_allclose(got, np.exp(data), rtol=1e-6)
