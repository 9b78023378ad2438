"""The symbolic algebra in one place (sdc/dialect/symbolic.py): structure and behaviour.

Structure: no module of sdc but the algebra imports sympy (module level or deferred), and the
solver's expression type lives in the dialect layer. Behaviour: the sympy dims the frontends build
through the algebra, the solver's `Expr` and the grammar agree with Python's integer arithmetic on
random values.
"""

from __future__ import annotations

import ast
import pickle
import random
import subprocess
import sys
from pathlib import Path

import pytest
import sympy

from sdc.dialect import shapes, symbolic, symexpr
from sdc.dialect.symbolic import DYN, Expr
from sdc.transforms import shape_solver

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sdc"
ALGEBRA = PACKAGE / "dialect" / "symbolic.py"


def _imported_modules(path: Path) -> set[str]:
    """Every module an `import` statement anywhere in the file names (function bodies included)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return out


def _imports_sympy(path: Path) -> bool:
    return any(m == "sympy" or m.startswith("sympy.") for m in _imported_modules(path))


# ---------------------------------------------------------------- structure


def test_only_the_algebra_module_imports_sympy():
    offenders = sorted(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")
                       if p != ALGEBRA and _imports_sympy(p))
    assert not offenders, f"modules importing sympy outside sdc/dialect/symbolic.py: {offenders}"
    assert _imports_sympy(ALGEBRA)  # the check sees deferred imports (the algebra has only those)


def test_the_check_sees_a_deferred_sympy_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from sympy.core import Integer\n    return Integer(1)\n")
    assert _imports_sympy(module)
    module.write_text("import sympyish\nfrom torch.utils import _sympy\n")
    assert not _imports_sympy(module)


def test_the_solver_expression_type_lives_in_the_dialect():
    assert Expr.__module__ == "sdc.dialect.symbolic"
    assert shape_solver.Expr is Expr and shape_solver.parse is symbolic.parse
    assert shape_solver.floordiv is symbolic.floordiv and shape_solver.SolverError is symbolic.SolverError
    transforms = PACKAGE / "transforms"
    classes = sorted(f"{p.name}:{node.name}" for p in transforms.rglob("*.py")
                     for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
                     if isinstance(node, ast.ClassDef) and node.name == "Expr")
    assert not classes, f"an expression type defined outside the dialect: {classes}"


def test_unknown_dims_are_the_algebra_s():
    assert shapes.DYN is DYN and shapes.is_static is symbolic.is_static
    assert pickle.loads(pickle.dumps(DYN)) is DYN
    assert (DYN + 3) is DYN and (2 * DYN) is DYN and (7 // DYN) is DYN and (-DYN) is DYN


def test_dyn_and_the_grammar_load_no_sympy():
    code = ("import sys; from sdc.dialect import shapes, symbolic; "
            "d = symbolic.parse('(H + 1)//2'); v = d.evaluate({'H': 5}); u = shapes.DYN * 2 + 1; "
            "print(v, u, [m for m in sys.modules if m.split('.')[0] == 'sympy'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["3", "?", "[]"]


# ---------------------------------------------------------------- behaviour


def _random_dim_text(rng: random.Random, depth: int = 3) -> str:
    """A random dim expression over H and W with positive divisors (every value defined)."""
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(["H", "W", str(rng.randint(0, 9))])
    op = rng.choice(["+", "-", "*", "//", "%"])
    lhs = _random_dim_text(rng, depth - 1)
    if op in ("//", "%"):
        return f"({lhs}){op}{rng.randint(1, 5)}"
    return f"({lhs}) {op} ({_random_dim_text(rng, depth - 1)})"


def _python_value(text: str, env: dict[str, int]) -> int:
    return eval(text, {"__builtins__": {}}, dict(env))  # the grammar is Python's integer arithmetic


def test_every_kind_of_dim_prints_in_the_grammar_with_its_value():
    rng = random.Random(7)
    for _ in range(200):
        text = _random_dim_text(rng)
        envs = [{"H": rng.randint(1, 40), "W": rng.randint(1, 40)} for _ in range(5)]
        expr = symbolic.parse(text)
        forms = [symexpr.parse(text), expr]
        try:
            forms.append(expr.to_sympy())
        except TypeError:  # an Expr that is an int has no sympy form of its own
            pass
        for form in forms:
            printed = symbolic.to_text(form)
            for env in envs:
                assert symexpr.evaluate(printed, env) == _python_value(text, env), (text, type(form), printed)


def test_sympy_dims_through_the_algebra_agree_with_python():
    h, w = symbolic.size_symbol("H"), symbolic.size_symbol("W")
    assert h.is_integer and h.is_positive and h.name == "H"
    cases = [
        (symbolic.floor_div(h + 1, 2), lambda H, W: (H + 1) // 2),
        (symbolic.ceiling_div(h, 3), lambda H, W: -(-H // 3)),
        (symbolic.mod(h * w, 4), lambda H, W: H * W % 4),
        (symbolic.maximum(h, w), max),
        (symbolic.minimum(h, w - 1), lambda H, W: min(H, W - 1)),
        (symbolic.product([h, 2, w]), lambda H, W: 2 * H * W),
        (symbolic.add(h, symbolic.mul(3, w)), lambda H, W: H + 3 * W),
        (symbolic.difference(h + w, w), lambda H, W: H),
    ]
    rng = random.Random(3)
    for expr, reference in cases:
        for _ in range(10):
            H, W = rng.randint(1, 50), rng.randint(1, 50)
            assert int(expr.subs({h: H, w: W})) == reference(H, W), expr


def test_sym_int_and_the_predicates():
    import numpy as np

    h = symbolic.size_symbol("H")
    assert symbolic.sym_int(np.int64(4)) == 4 and type(symbolic.sym_int(np.int64(4))) is int
    assert symbolic.sym_int(symbolic.integer(6) / 2) == 3 and type(symbolic.sym_int(symbolic.integer(6) / 2)) is int
    assert symbolic.sym_int((h * 2 + 2) / 2 - 1) == h
    assert symbolic.sym_int(DYN) is DYN
    assert symbolic.is_symbolic(h) and not symbolic.is_symbolic(3) and not symbolic.is_symbolic(DYN)
    assert symbolic.is_integer_value(4) and symbolic.is_integer_value(symbolic.integer(4))
    assert not symbolic.is_integer_value(h) and not symbolic.is_integer_value(sympy.oo)
    assert symbolic.equal(h + h, 2 * h) and not symbolic.equal(h, h + 1) and symbolic.equal(3, 3)
    assert symbolic.is_maximum(symbolic.maximum(h, symbolic.size_symbol("W")))
    assert not symbolic.is_maximum(symbolic.maximum(h, 1))  # H >= 1: sympy resolves it to H


def test_quotients():
    h, w = symbolic.size_symbol("H"), symbolic.size_symbol("W")
    assert symbolic.polynomial_quotient(h * w * 6, 6 * w) == h
    assert symbolic.polynomial_quotient(h * w * w, w) == h * w
    assert symbolic.polynomial_quotient(symbolic.integer(12), 4) == 3
    assert symbolic.polynomial_quotient(h, 2) is None  # H/2 is not a dim
    assert symbolic.polynomial_quotient(h, w) is None
    assert symbolic.polynomial_quotient(h * w * 6, 3 * w) is None  # 2*H holds a number: not taken
    assert symbolic.integral_quotient(symbolic.product([h, 4, w]), symbolic.product([2, w])) == 2 * h
    assert symbolic.integral_quotient(symbolic.product([h, 3]), symbolic.integer(2)) is None


def test_expr_from_and_to_sympy_agree_on_random_values():
    h, w = symbolic.size_symbol("H"), symbolic.size_symbol("W")
    built = [symbolic.floor_div(h * 3 + w, 4) + symbolic.mod(w, 3) - h * w,
             symbolic.ceiling_div(h + 2, 3) * 2, (h + 1) ** 2]
    rng = random.Random(11)
    for e in built:
        expr = Expr.of(e)
        back = expr.to_sympy({"H": h, "W": w})
        for _ in range(10):
            env = {"H": rng.randint(1, 60), "W": rng.randint(1, 60)}
            direct = int(e.subs({h: env["H"], w: env["W"]}))
            assert expr.evaluate(env) == direct and int(back.subs({h: env["H"], w: env["W"]})) == direct


def test_a_sympy_dim_outside_the_grammar_is_refused():
    h = symbolic.size_symbol("H")
    with pytest.raises(symexpr.SymExprError, match="cannot express"):
        symbolic.to_text(symbolic.maximum(h, symbolic.size_symbol("W")))
    with pytest.raises(TypeError, match="symbolic.to_text"):
        symexpr.to_text(h)
