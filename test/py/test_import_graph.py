"""The import graph of sdc/: no circles where the layering says there must be none.

The graph is read from the source (ast), not from a running interpreter, so a circle is found
even when it never bites at run time. Two kinds of edge:

- module level: an `import` that runs when the module is imported (also inside module-level
  `if`/`try`/`class` blocks, but not under `if TYPE_CHECKING:`);
- deferred: an `import` inside a function. A deferred import that goes back up a layer is how
  a circle gets hidden rather than removed, so the frontend and dialect checks count both.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sdc"

Graph = dict[str, set[str]]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(body: list[ast.stmt], deferred: bool, typing: bool = False):
    """Import statements of a block: at module level only, or (deferred) in function bodies too;
    (typing) also those under `if TYPE_CHECKING:`."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if deferred:
                yield from (n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)))
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _import_nodes(node.body if typing else node.orelse, deferred, typing)
            if typing:
                yield from _import_nodes(node.orelse, deferred, typing)
        else:
            for block in _blocks(node):
                yield from _import_nodes(block, deferred, typing)


def _blocks(node: ast.stmt):
    """The statement lists nested in a compound statement (if, try, with, class, for, while)."""
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if isinstance(block, list):
            yield block
    for handler in getattr(node, "handlers", None) or []:
        yield handler.body


def resolve(node: ast.Import | ast.ImportFrom, importer: str, modules: set[str], is_package: bool) -> set[str]:
    """The sdc modules an import statement loads: `from sdc.frontend import onnx_ops` is the module
    sdc.frontend.onnx_ops, `from sdc.frontend.values import V` is sdc.frontend.values."""
    found = set()
    if isinstance(node, ast.Import):
        for alias in node.names:
            name = alias.name
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
        return found
    if node.level:
        base = importer if is_package else importer.rpartition(".")[0]
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        source = f"{base}.{node.module}" if node.module else base
    else:
        source = node.module or ""
    for alias in node.names:
        candidate = f"{source}.{alias.name}"
        if candidate in modules:
            found.add(candidate)
        elif source in modules:
            found.add(source)
    return found


def import_graph(deferred: bool, typing: bool = False) -> Graph:
    modules = all_modules()
    names = set(modules)
    graph: Graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        edges: set[str] = set()
        for node in _import_nodes(tree.body, deferred, typing):
            edges |= resolve(node, name, names, path.name == "__init__.py")
        edges.discard(name)
        graph[name] = edges
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def subgraph(graph: Graph, keep) -> Graph:
    return {v: {w for w in ws if keep(w)} for v, ws in graph.items() if keep(v)}


def collapse(graph: Graph, package: str) -> Graph:
    """The graph with every module of `package` (and the package itself) as one node."""
    def node(m: str) -> str:
        return package if _within(m, package) else m

    out: Graph = {}
    for v, ws in graph.items():
        out.setdefault(node(v), set()).update(node(w) for w in ws if node(w) != node(v))
    return out


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _onnx_frontend(name: str) -> bool:
    return name.startswith("sdc.frontend.onnx")


def _mlir_or_dialect(name: str) -> bool:
    return name == "sdc.mlir" or name == "sdc.dialect" or name.startswith("sdc.dialect.")


def _codegen(name: str) -> bool:
    return name.startswith("sdc.codegen.")


# the codegen backends: one package each, over the kernel IR of sdc/codegen/kernel/
BACKENDS = ("sdc.codegen.triton", "sdc.codegen.cuda", "sdc.codegen.c", "sdc.codegen.torch")


def _backend(name: str) -> str | None:
    return next((b for b in BACKENDS if name == b or name.startswith(b + ".")), None)


# ---------------------------------------------------------------- the walker itself


def test_cycles_finds_a_circle_and_only_circles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_resolve_names_modules_not_attributes():
    modules = {"sdc", "sdc.frontend", "sdc.frontend.onnx_ops", "sdc.frontend.values"}
    (from_package,) = ast.parse("from sdc.frontend import onnx_ops, FRONTENDS").body
    assert resolve(from_package, "sdc.x", modules, False) == {"sdc.frontend.onnx_ops", "sdc.frontend"}
    (from_module,) = ast.parse("from sdc.frontend.values import V").body
    assert resolve(from_module, "sdc.x", modules, False) == {"sdc.frontend.values"}
    (relative,) = ast.parse("from .values import V").body
    assert resolve(relative, "sdc.frontend.onnx_ops", modules, False) == {"sdc.frontend.values"}
    (plain,) = ast.parse("import sdc.frontend.values.thing").body
    assert resolve(plain, "sdc.x", modules, False) == {"sdc.frontend.values"}


def test_collapse_finds_a_circle_through_a_package():
    graph = {"p.a": {"q"}, "q": {"p.b"}, "p.b": set()}
    assert cycles(graph) == [] and cycles(collapse(graph, "p")) == [["p", "q"]]


def test_the_graph_sees_module_level_and_deferred_imports():
    top, everything = import_graph(deferred=False), import_graph(deferred=True)
    assert "sdc.frontend.onnx_ops" in top["sdc.frontend.onnx"]
    assert "sdc.frontend.onnx" not in top["sdc.frontend"]  # the registry imports its frontends lazily
    assert "sdc.frontend.onnx" in everything["sdc.frontend"]


# ---------------------------------------------------------------- the layering


def test_no_import_circle_in_the_onnx_frontend():
    found = cycles(subgraph(import_graph(deferred=True), _onnx_frontend))
    assert not found, f"import circles among sdc/frontend/onnx*.py (deferred imports included): {found}"


def test_no_import_circle_between_mlir_and_the_dialect():
    found = cycles(subgraph(import_graph(deferred=True), _mlir_or_dialect))
    assert not any("sdc.mlir" in c for c in found), f"sdc/mlir.py and sdc/dialect/ import each other: {found}"


DRIVERS = ("sdc.compiler", "sdc.torch_compile", "sdc.train")  # compile a model: above every frontend


def test_no_frontend_imports_a_driver():
    """`compiler -> frontend -> frontend.torch -> frontend/torch/backend.py -> compiler` was a circle:
    the torch.compile backend compiles graphs, so it is a driver (sdc/torch_compile.py), and no
    frontend module imports one (deferred imports included)."""
    graph = import_graph(deferred=True)
    upward = sorted((v, w) for v, ws in graph.items() if _within(v, "sdc.frontend")
                    for w in ws if any(_within(w, d) for d in DRIVERS))
    assert not upward, f"frontend modules importing a driver: {upward}"
    assert not [c for c in cycles(graph) if "sdc.compiler" in c]


def test_the_dialect_is_in_no_circle_with_the_modules_above_it():
    """`dialect/ops/custom.py <-> custom_ops.py` was a circle through the dialect package (the
    registry imported the dialect's shapes, the dialect's op the registry): the registry is the
    dialect's (sdc/dialect/custom_registry.py), `sdc.custom_ops` its public face."""
    graph = import_graph(deferred=True)
    assert "sdc.custom_ops" not in collapse(graph, "sdc.dialect")["sdc.dialect"]
    found = [c for c in cycles(collapse(graph, "sdc.dialect")) if "sdc.dialect" in c]
    assert not found, f"import circles through sdc/dialect/ (deferred imports included): {found}"


def test_no_import_circle_in_codegen():
    """Deferred imports and those under `if TYPE_CHECKING:` included: the kernel IR, its templates
    and each backend's renderer import one way only (a renderer imports its template modules, they
    import the kernel IR)."""
    found = cycles(subgraph(import_graph(deferred=True, typing=True), _codegen))
    assert not found, f"import circles among sdc/codegen/ modules: {found}"


def test_the_walker_sees_type_checking_imports_when_asked():
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import sdc.a\n")
    assert [n.names[0].name for n in _import_nodes(tree.body, deferred=False, typing=True)][-1] == "sdc.a"
    assert all(n.names[0].name != "sdc.a" for n in _import_nodes(tree.body, deferred=False))


def test_the_kernel_ir_imports_no_backend_and_no_backend_another():
    graph = import_graph(deferred=True, typing=True)
    assert "sdc.codegen.kernel" in graph and all(b in graph for b in BACKENDS)
    crossing = sorted((v, w) for v, ws in graph.items() for w in ws
                      if _backend(v) and _backend(w) and _backend(v) != _backend(w))
    assert not crossing, f"a codegen backend imports another backend: {crossing}"
    upward = sorted((v, w) for v, ws in graph.items() if v.startswith("sdc.codegen.kernel") for w in ws
                    if _backend(w))
    assert not upward, f"the kernel IR imports a backend: {upward}"


def test_no_import_circle_through_the_runtimes_executor():
    """The executor imports the runs of C kernels (c_segment, c_runs), which take its instruction
    classes from sdc/runtime/instructions.py: nothing it imports imports it back, deferred imports included."""
    found = cycles(subgraph(import_graph(deferred=True), lambda name: name.startswith("sdc.runtime")))
    assert not any("sdc.runtime.executor" in c for c in found), f"import circles through the executor: {found}"


def test_report_other_import_circles(capsys):
    """Reported, not failed: circles elsewhere in sdc/ are for the layers that own them."""
    graph = import_graph(deferred=False)
    assert len(graph) > 50  # the walk found the package
    module_level = cycles(graph)
    hidden = [c for c in cycles(import_graph(deferred=True)) if c not in module_level]
    with capsys.disabled():
        for c in module_level:
            print(f"\nnote: module-level import circle: {' <-> '.join(c)}")
        for c in hidden:
            print(f"\nnote: import circle through deferred imports: {' <-> '.join(c)}")


# ---------------------------------------------------------------- what the runtime loads


def test_the_runtime_imports_no_mlir_bindings():
    code = "import sdc.runtime; import sys; print(any(m.startswith('torch_mlir') for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize("package", ["sdc.runtime", "sdc.frontend"])
def test_no_frontend_is_loaded_by_importing(package):
    code = (f"import {package}; import sys; "
            "print(sorted(m for m in sys.modules if m.startswith(('onnx', 'sdc.frontend.onnx'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# ---------------------------------------------------------------- op knowledge ([3.1] item 1)


def test_fuse_and_the_attention_matcher_do_not_import_each_other():
    graph = import_graph(deferred=True)
    pair = {"sdc.transforms.fuse", "sdc.transforms.attention_pattern"}
    assert not any(pair <= set(c) for c in cycles(subgraph(graph, lambda m: m in pair)))


def test_the_transforms_import_no_codegen():
    """Codegen sits above the passes: a pass that needs a fact of the planner's (the memory plan's
    lifetimes) gets it from a module of its own layer or from the OpDef."""
    graph = import_graph(deferred=True)
    upward = sorted(f"{m} -> {t}" for m, ts in graph.items() if m.startswith("sdc.transforms")
                    for t in ts if t.startswith("sdc.codegen"))
    assert not upward, upward
