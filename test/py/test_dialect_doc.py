"""docs/dialect.md against the op definitions, and every op's example against the verifier."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sdc.dialect import docgen
from sdc.dialect.attrs import read_dims, read_mesh, to_python
from sdc.dialect.ir import module_mesh, read_attrs, tensor_spec
from sdc.dialect.op_classes import infer_results, new_context, verify_op
from sdc.dialect.hooks import OpKind
from sdc.dialect.opdef import ATTR_KINDS, AttrSpec, OpDef, all_ops, attr
from sdc.ir_text import parse_module
from sdc.mlir import ir

DOC = Path(__file__).resolve().parents[2] / "docs" / "dialect.md"
OPS = all_ops()
REGENERATE = "docs/dialect.md is stale: run `python -m sdc.dialect.docgen > docs/dialect.md`"


def test_doc_matches_definitions():
    assert DOC.read_text() == docgen.render(), REGENERATE


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_op_is_documented(name):
    text = DOC.read_text()
    assert f"### `sdc.{name}`\n" in text, REGENERATE
    section = text.split(f"### `sdc.{name}`\n", 1)[1].split("\n### ", 1)[0]
    op = OPS[name]
    assert op.summary in section and op.doc in section and op.example in section
    for attr_name in op.attrs:
        assert f"| `{attr_name}` |" in section


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_op_has_summary_doc_example(name):
    op = OPS[name]
    assert op.name == name
    assert op.summary.strip(), f"sdc.{name} has no summary"
    assert op.doc.strip(), f"sdc.{name} has no doc"
    assert op.example.strip(), f"sdc.{name} has no example"
    assert f'"sdc.{name}"(' in op.example, f"the example of sdc.{name} shows another op"
    assert op.family, f"sdc.{name} has no family"


# ---------------------------------------------------------------- examples parse and verify


def example_module(example: str) -> str:
    """The one-op example inside a function whose arguments are its operands, in a module with
    a mesh that has every axis the example names (size 2)."""
    call = re.search(r'"sdc\.\w+"\(([^)]*)\)', example)
    operands = [s.strip() for s in call.group(1).split(",") if s.strip()]
    signature = example.rsplit(" : ", 1)[1]
    with new_context():
        fn_type = ir.FunctionType(ir.Type.parse(signature))
        operand_types = [str(t) for t in fn_type.inputs]
    assert len(operand_types) == len(operands), example
    args = ", ".join(f"{name}: {t}" for name, t in zip(operands, operand_types))
    axes = []
    for group in re.findall(r"mesh_axes = \[([^\]]*)\]", example):
        axes += [a.strip().strip('"') for a in group.split(",") if a.strip()]
    mesh = ""
    if axes:
        names = ", ".join(f'"{a}"' for a in dict.fromkeys(axes))
        sizes = ", ".join("2" for _ in dict.fromkeys(axes))
        mesh = f" attributes {{sdc.mesh = #sdc.mesh<[{names}], array<i64: {sizes}>>}}"
    return f"module{mesh} {{\n  func.func @example({args}) {{\n    {example}\n    return\n  }}\n}}\n"


def _the_op(module: ir.Operation, name: str) -> ir.Operation:
    fn = module.regions[0].blocks[0].operations[0]
    ops = [op.operation for op in fn.regions[0].blocks[0].operations if op.operation.name == f"sdc.{name}"]
    assert len(ops) == 1
    return ops[0]


@pytest.mark.parametrize("name", sorted(OPS))
def test_example_parses_and_verifies(name):
    opdef = OPS[name]
    ctx = new_context()
    module = parse_module(example_module(opdef.example), source_name=f"sdc.{name}.example", ctx=ctx)
    with ctx:
        op = _the_op(module, name)
        assert verify_op(op) is None
        declared = [tensor_spec(r.type) for r in op.results]
        inferred = infer_results(opdef, [tensor_spec(v.type) for v in op.operands], read_attrs(opdef, op),
                                 module_mesh(op))
    if inferred is not None:
        # The example teaches the shape rule: its result types are exactly the inferred ones.
        assert declared == inferred


def test_example_module_rejects_a_wrong_result():
    # The harness above must be able to fail: a verifying parse rejects a bad result type.
    bad = OPS["add"].example.replace("-> tensor<?x3xf32>", "-> tensor<?x4xf32>")
    with pytest.raises(Exception, match="dim 1 is 4, expected 3"):
        parse_module(example_module(bad))


# ---------------------------------------------------------------- the generator


def test_docgen_is_generic_over_the_registry():
    op = OpDef(
        name="frobnicate", kind=OpKind.SIGNAL, summary="frobnicates", doc="Frobnicates `x` | twice.",
        operands=("x", "rest"), variadic_operand=True, min_operands=2, results=("out",), pure=False,
        attrs={"mode": attr("enum", "a", "how", ("a", "b")), "k": attr("ints", doc="sizes"),
               "eps": attr("float", float("-inf"))},
        shape=None, ref=lambda env, a, *xs: xs[0],
        example='%2 = "sdc.frobnicate"(%0, %1) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>',
    )
    text = docgen.render({"add": OPS["add"], "frobnicate": op})
    assert "## Signal\n" in text  # a kind outside FAMILY_ORDER: its own section, after the ordered ones
    assert text.index("## Elementwise binary") < text.index("## Signal")
    assert "[`sdc.frobnicate`](#sdcfrobnicate)" in text
    section = text.split("### `sdc.frobnicate`\n", 1)[1]
    assert "`rest` (variadic, at least 2)" in section
    assert "type declared, not inferred" in section
    assert "Side effects: yes" in section
    assert '| `mode` | enum: `"a"`, `"b"` | `"a"` | how |' in section
    assert "| `k` | ints | required | sizes |" in section
    assert "| `eps` | float | `-inf` | - |" in section
    assert "Frobnicates `x` | twice." in section  # prose is kept as written
    assert op.example in section


def test_main_prints_the_reference(capsys):
    assert docgen.main() == 0
    assert capsys.readouterr().out == docgen.render()


def test_every_attribute_kind_has_a_syntax_that_reads_back():
    assert set(docgen.KIND_SYNTAX) == set(ATTR_KINDS)
    with new_context():
        for kind, (example, _) in docgen.KIND_SYNTAX.items():
            spec = AttrSpec(kind, choices=("tanh",))
            value = to_python(spec, ir.Attribute.parse(example))
            assert value is not None, kind
        assert to_python(AttrSpec("shape"), ir.Attribute.parse(docgen.KIND_SYNTAX["shape"][0])) == ["B", -1, 64]


def test_sdc_attribute_examples_in_the_intro_parse():
    text = DOC.read_text()
    examples = re.findall(r"\| `(#sdc\.\w+)` \| `([^`]*)` \|", text)
    assert {name for name, _ in examples} == {"#sdc.layout", "#sdc.dims", "#sdc.guard", "#sdc.mesh", "#sdc.sharding"}
    with new_context():
        parsed = {name: ir.Attribute.parse(example) for name, example in examples}
        assert read_mesh(parsed["#sdc.mesh"]) == {"dp": 2, "tp": 2}
        assert read_dims(parsed["#sdc.dims"]) == ["B", 3, "H", "W"]
        assert to_python(AttrSpec("layout"), parsed["#sdc.layout"]) == [0, 2, 3, 1]


def test_every_mlir_block_in_the_intro_names_real_ops():
    intro = DOC.read_text().split("\n## Ops\n", 1)[0]
    for name in re.findall(r'"sdc\.(\w+)"', intro):
        assert name in OPS

