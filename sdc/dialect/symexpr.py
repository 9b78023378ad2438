"""Symbolic dim expressions in attributes: `"B"`, `"B*S"`, `"(H+1)//2"`.

The text grammar is deliberately small — integers, symbol names, `+ - * // %` and
parentheses — so the runtime can evaluate it without sympy or eval(). `to_text` prints a
sympy expression (what the frontends and the shape solver manipulate) in that grammar.
"""

from __future__ import annotations

import ast
from typing import Mapping


class SymExprError(ValueError):
    pass


_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}


def evaluate(text: str, symbols: Mapping[str, int]) -> int:
    """The value of a dim expression given its symbols' values."""
    if text in symbols:
        return int(symbols[text])
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise SymExprError(f"'{text}' is not a dim expression") from None
    return _eval(tree.body, symbols, text)


def _eval(node, symbols, text) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in symbols:
            raise SymExprError(f"symbolic dim '{node.id}' is not bound by any input")
        return int(symbols[node.id])
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval(node.left, symbols, text), _eval(node.right, symbols, text))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, symbols, text)
    raise SymExprError(f"'{text}' is not a dim expression (allowed: ints, names, + - * // % and parentheses)")


def names(text: str) -> set[str]:
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise SymExprError(f"'{text}' is not a dim expression") from None
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def to_text(expr) -> str:
    """Print a sympy expression (integer-valued) in the dim-expression grammar."""
    import sympy

    if isinstance(expr, int):
        return str(expr)
    if expr.is_Integer:
        return str(int(expr))
    if expr.is_Symbol:
        return expr.name
    if isinstance(expr, sympy.Add):
        terms = [to_text(a) for a in sympy.Add.make_args(expr)]
        out = terms[0]
        for t in terms[1:]:
            out += f" - {t[1:]}" if t.startswith("-") else f" + {t}"
        return out
    if isinstance(expr, sympy.Mul):
        coeff, rest = expr.as_coeff_Mul()
        if coeff == -1:
            return "-" + _paren(rest)
        return "*".join(_paren(a) for a in sympy.Mul.make_args(expr))
    if isinstance(expr, sympy.floor):
        num, den = sympy.fraction(sympy.together(expr.args[0]))
        return f"{_paren(num)}//{_paren(den)}"
    if isinstance(expr, sympy.Mod):
        return f"{_paren(expr.args[0])} % {_paren(expr.args[1])}"
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
        return "*".join([_paren(expr.base)] * int(expr.exp))
    raise SymExprError(f"cannot express {expr} as a dim expression")


def _paren(expr) -> str:
    text = to_text(expr)
    return text if text.replace("_", "").isalnum() else f"({text})"
