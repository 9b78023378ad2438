"""What a pass knows about an op lives on the op's OpDef (sdc/dialect/hooks.py), not in a table of
op names: no module outside sdc/dialect/ keys on op-name string literals.

The check reads the source (ast): a dict, set, tuple or list literal that holds two or more sdc op
names (`"matmul"` or `"sdc.matmul"`) is a table of names, and so is the collection of a
`name in (...)` test. A single-op match (`op.name == "sdc.reshape"`, a rewrite pattern's root) is
fine. The frontends' import tables (source op -> sdc op) are theirs, so sdc/frontend/ is not read.
A codegen backend's tables of the scalar formulas' primitives (sdc/dialect/scalar.py: `add`, `exp`,
`eq`, ... share op names) are how a renderer supplies primitives, so in a backend package a literal
whose names are all primitives is not a table of ops.

Modules other helpers of [3.1] are cleaning are on `IN_PROGRESS`, each naming the tables left; a
handful of literals that spell op names without being op knowledge are on `NOT_OP_TABLES`, each
with why. Both lists shrink: an entry that no longer matches anything fails the test too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sdc.dialect import scalar
from sdc.dialect.opdef import all_ops

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sdc"
NOT_READ = ("sdc/dialect/", "sdc/frontend/")
BACKEND_PACKAGES = ("sdc/codegen/c/", "sdc/codegen/cuda/", "sdc/codegen/triton/")
PRIMITIVES = frozenset(scalar.PRIMITIVES) | scalar.PREDICATES

# Being cleaned by other helpers of [3.1] right now; each entry names the tables left there.
IN_PROGRESS = {
    "sdc/codegen/plan.py": "weight ops, foldable elementwise ops, the templates' op names",
    "sdc/runtime/c_conv.py": "the pooling ops the C kernels take",
    "sdc/runtime/kernel_choice.py": "the ops sdc's C kernel library (c_conv.c) computes, and their fit tests",
    "sdc/codegen/calls_as_one.py": "the view ops a C segment maps, the ops a C run holds (c_segment/c_runs' own)",
    "sdc/runtime/c_runs.py": "the ops a C run may hold",
    "sdc/runtime/c_segment.py": "the view ops a C segment maps",
    "sdc/runtime/distributed.py": "the reductions of a collective",
    "sdc/runtime/executor.py": "_direct_kernel's op table, bias-add and softmax/reduction fast paths",
    "sdc/runtime/reference_kernels.py": "FRESH_RESULT, the activations and binary ops of the fused epilogues",
}

# (module, the op names of the literal) -> why it is not a table of op knowledge.
NOT_OP_TABLES = {
    ("sdc/transforms/canonicalize.py", ("sdc.cast", "sdc.reshape", "sdc.transpose")):
        "sdc-canonicalize's pattern table: each pattern listed under the op it matches",
    ("sdc/transforms/fold_conv_batch_norm.py", ("sdc.add", "sdc.mul")):
        "the fold's pattern: a convolution's per-channel shift (add) or scale (mul)",
    ("sdc/transforms/shape_solver.py", ("eq", "ge")):
        "constraint kinds (e == 0, e >= 0), not op names",
    ("sdc/codegen/kernel/program.py", ("conv", "matmul")):
        "template names (the kernel IR's), which two ops share",
    ("sdc/codegen/kernel/program.py", ("max", "min")):
        "the kernel IR's reduction primitives",
    ("sdc/cli/sharding_report.py", ("sdc.all_slice", "sdc.slice")):
        "a walk back through the ops that cut a block of a weight (a pattern, two ops)",
}


def op_names() -> frozenset[str]:
    short = set(all_ops())
    return frozenset(short | {f"sdc.{n}" for n in short})


def _members(node: ast.AST) -> list[ast.expr] | None:
    if isinstance(node, (ast.Set, ast.List, ast.Tuple)):
        return list(node.elts)
    if isinstance(node, ast.Dict):
        return [k for k in node.keys if k is not None]
    return None


def name_tables(source: str, names: frozenset[str]) -> list[tuple[int, tuple[str, ...]]]:
    """(line, the op names) of each literal in `source` that holds two or more of `names`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        members = _members(node)
        if members is None:
            continue
        hits = sorted({m.value for m in members
                       if isinstance(m, ast.Constant) and isinstance(m.value, str) and m.value in names})
        if len(hits) >= 2:
            found.append((node.lineno, tuple(hits)))
    return sorted(found)


def modules() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py"))
            if not str(p.relative_to(ROOT)).startswith(NOT_READ)]


def offenders() -> tuple[list[str], set[str], set[tuple[str, tuple[str, ...]]]]:
    """Every table of op names outside the lists, as `file:line: names`; and the entries of
    IN_PROGRESS and NOT_OP_TABLES that matched something."""
    names = op_names()
    out, in_progress, not_tables = [], set(), set()
    for path in modules():
        rel = str(path.relative_to(ROOT))
        for line, hits in name_tables(path.read_text(encoding="utf-8"), names):
            if rel.startswith(BACKEND_PACKAGES) and set(hits) <= PRIMITIVES:
                continue  # a renderer's primitives
            if rel in IN_PROGRESS:
                in_progress.add(rel)
            elif (rel, hits) in NOT_OP_TABLES:
                not_tables.add((rel, hits))
            else:
                out.append(f"{rel}:{line}: {', '.join(hits)}")
    return out, in_progress, not_tables


# ---------------------------------------------------------------- the checker itself


def test_the_checker_finds_tables_and_memberships_not_single_matches():
    names = frozenset({"add", "mul", "sdc.add", "sdc.mul", "exp"})
    source = '''
CHEAP = {"add", "mul"}
COST = {"exp": 8, "sdc.add": 1}
def f(op):
    if op.name in ("sdc.add", "sdc.mul"):
        return 1
    if op.name == "sdc.add" or op.name == "exp":
        return 2
    return ["add", "other"]
'''
    assert name_tables(source, names) == [(2, ("add", "mul")), (3, ("exp", "sdc.add")), (5, ("sdc.add", "sdc.mul"))]


def test_the_lists_name_real_modules():
    for rel, _ in NOT_OP_TABLES:
        assert (ROOT / rel).is_file(), rel
    for rel in IN_PROGRESS:
        assert (ROOT / rel).is_file(), rel
        assert not rel.startswith(("sdc/transforms/", "sdc/codegen/memory.py")), f"{rel} is cleaned: not in progress"


# ---------------------------------------------------------------- the tree


def test_no_module_outside_the_dialect_keys_on_op_names():
    found, _, _ = offenders()
    assert not found, ("tables of op names outside sdc/dialect/ (put the fact on the OpDef, "
                       "sdc/dialect/hooks.py):\n" + "\n".join(found))


def test_every_allowed_entry_still_matches():
    """An entry that matches nothing any more was cleaned up: remove it, so the lists only shrink."""
    _, in_progress, not_tables = offenders()
    stale = sorted(set(IN_PROGRESS) - in_progress) + sorted(f"{m}: {h}" for m, h in set(NOT_OP_TABLES) - not_tables)
    assert not stale, "allow-list entries that match nothing (remove them): " + "; ".join(stale)


@pytest.mark.parametrize("rel", ["sdc/transforms/mixed_precision.py", "sdc/transforms/fuse.py",
                                 "sdc/transforms/layout_model.py", "sdc/transforms/sharding.py",
                                 "sdc/transforms/recompute.py", "sdc/transforms/attention_pattern.py",
                                 "sdc/codegen/memory.py"])
def test_the_cleaned_passes_hold_no_name_table(rel):
    assert name_tables((ROOT / rel).read_text(encoding="utf-8"), op_names()) == []
