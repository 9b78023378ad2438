"""sdc/dialect/ir.py: the IR accessors every layer shares, and the structure rules that keep them shared.

The structure tests read sdc/ as source (Python's ast), so they fail the moment a layer imports
the interpreter again or someone redefines an accessor locally.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sdc.diagnostics import SdcError
from sdc.dialect.attrs import AttrError
from sdc.dialect.ir import (ARG_ATTRS, RES_ATTRS, arg_dims, arg_names, attr_dicts, defined_functions, entry_function,
                            op_label, op_location, result_dims, result_names)
from sdc.ir_text import parse_module

SDC = Path(__file__).resolve().parents[2] / "sdc"

# Layers below the interpreter: they must not import it (it is a user of the dialect, not a library).
NO_INTERPRETER = ("codegen", "transforms", "frontend", "runtime", "dialect")
# Defined once, in sdc/dialect/ir.py (or, for parse_module, sdc/ir_text.py); everyone imports them.
ACCESSORS = {name: "dialect/ir.py" for name in (
    "arg_names", "arg_dims", "result_names", "result_dims", "entry_function", "defined_functions", "op_label",
    "op_location", "attr_dicts", "tensor_spec", "read_attrs", "op_attributes", "module_mesh", "shard_counts")}
ACCESSORS["parse_module"] = "ir_text.py"


def _sources() -> list[tuple[str, ast.Module]]:
    return [(p.relative_to(SDC).as_posix(), ast.parse(p.read_text(encoding="utf-8"), str(p)))
            for p in sorted(SDC.rglob("*.py"))]


def _imports(tree: ast.Module) -> set[str]:
    """Every module an `import` or `from ... import` names, anywhere in the file (lazy imports too)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def test_layers_below_the_interpreter_do_not_import_it():
    offenders = [rel for rel, tree in _sources()
                 if rel.split("/")[0] in NO_INTERPRETER and "sdc.interpreter" in _imports(tree)]
    assert offenders == [], f"these import sdc.interpreter (use sdc.dialect.ir / sdc.ir_text): {offenders}"


def test_only_the_package_face_imports_the_interpreter():
    users = sorted(rel for rel, tree in _sources() if rel != "interpreter.py" and "sdc.interpreter" in _imports(tree))
    assert set(users) <= {"__init__.py", "cli/main.py", "onnx_backend.py", "conformance.py"}, users


def test_accessors_are_defined_once():
    found = []
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ACCESSORS and \
                    rel != ACCESSORS[node.name]:
                found.append(f"{rel}:{node.lineno} defines {node.name}")
    assert found == [], found


def test_only_the_dim_grammar_parses_expression_text():
    """One parser for dim and guard text (sdc/dialect/symexpr.py): nothing else walks Python's ast,
    except the custom-op registry (dialect/custom_registry.py), which reads the parameter list of a
    user's Triton kernel: Python source."""
    users = [rel for rel, tree in _sources() if "ast" in _imports(tree)]
    assert users == ["dialect/custom_registry.py"], users


# ---------------------------------------------------------------- the accessors

MODULE = """
module {
  func.func private @declared(tensor<2xf32>) -> tensor<2xf32>
  func.func @main(%x: tensor<?x4xf32> {sdc.name = "tokens", sdc.dims = #sdc.dims<["B", 4]>},
                  %y: tensor<4xf32>) -> (tensor<?x4xf32> {sdc.name = "logits", sdc.dims = #sdc.dims<["B", 4]>},
                                         tensor<4xf32>) {
    %0 = "sdc.add"(%x, %y) : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32> loc("fc1"("m.onnx":0:0))
    %1 = "sdc.neg"(%y) : (tensor<4xf32>) -> tensor<4xf32> loc("f.mlir":7:9)
    %2 = "sdc.neg"(%1) : (tensor<4xf32>) -> tensor<4xf32> loc(unknown)
    return %0, %2 : tensor<?x4xf32>, tensor<4xf32>
  }
}
"""


@pytest.fixture(scope="module")
def module():
    return parse_module(MODULE)


def _ops(module) -> list:
    fn = entry_function(module)
    return [op.operation for op in fn.regions[0].blocks[0].operations][:3]


def test_names_and_dims_of_the_entry_signature(module):
    with module.context:
        fn = entry_function(module)
        assert arg_names(fn) == ["tokens", "arg1"]
        assert result_names(fn) == ["logits", "output1"]
        assert arg_dims(fn) == [["B", 4], None]
        assert result_dims(fn) == [["B", 4], None]
        assert [sorted(d) for d in attr_dicts(fn, ARG_ATTRS)] == [["sdc.dims", "sdc.name"], []]
        assert len(attr_dicts(fn, RES_ATTRS)) == 2


def test_defined_functions_skip_declarations(module):
    with module.context:
        names = [f.attributes["sym_name"] for f in defined_functions(module)]
        assert [str(n) for n in names] == ['"main"']


def test_entry_function_choice_and_errors():
    two = """
    func.func @a(%x: tensor<2xf32>) -> tensor<2xf32> { return %x : tensor<2xf32> }
    func.func @b(%x: tensor<2xf32>) -> tensor<2xf32> { return %x : tensor<2xf32> }
    """
    m = parse_module(two)
    with m.context:
        assert str(entry_function(m, "b").attributes["sym_name"]) == '"b"'
        with pytest.raises(SdcError, match=r"cannot choose an entry function: no @main among a, b"):
            entry_function(m)
        with pytest.raises(SdcError, match=r"no function named 'c' \(functions: a, b\)"):
            entry_function(m, "c")


def test_op_labels_and_locations(module):
    with module.context:
        named, filed, unknown = _ops(module)
        assert op_location(named) == "fc1"
        assert op_location(named, file_first=True) == "m.onnx:0:0"
        assert op_label(named) == "'sdc.add' at fc1"
        assert op_location(filed) == "f.mlir:7:9"
        assert op_label(filed) == "'sdc.neg' at f.mlir:7:9"
        assert op_location(unknown) == ""
        assert op_label(unknown) == "'sdc.neg'"


def test_a_malformed_dims_annotation_raises_or_is_skipped():
    bad = """
    func.func @main(%x: tensor<?xf32> {sdc.dims = ["N"]}) -> tensor<?xf32> { return %x : tensor<?xf32> }
    """
    m = parse_module(bad)
    with m.context:
        fn = entry_function(m)
        with pytest.raises(AttrError, match="expected #sdc.dims"):
            arg_dims(fn)
        assert arg_dims(fn, skip_bad=True) == [None]
