"""The one dim-expression grammar (sdc/dialect/symexpr.py): parsing, printing, evaluation, errors.

Its readers (the shape solver, the runtime's guards, the verifier) are tested through their own
suites; these tests pin the grammar itself: Python's precedence and integer semantics, canonical
text that parses back to the same tree, and a clean SymExprError for anything else, however large
or deeply nested.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys

import pytest

from sdc.dialect.symexpr import (MAX_DEPTH, MAX_INT_DIGITS, BinOp, BoolOp, Compare, Int, Neg, Not, Sym, SymExprError,
                                 evaluate, evaluator, free_symbols, parse, parse_condition, to_text)

# ---------------------------------------------------------------- trees and precedence


def test_parse_builds_the_tree():
    assert parse("B") == Sym("B")
    assert parse("42") == Int(42)
    assert parse("B*S") == BinOp("*", Sym("B"), Sym("S"))
    assert parse("(H+1)//2") == BinOp("//", BinOp("+", Sym("H"), Int(1)), Int(2))


@pytest.mark.parametrize("text, tree", [
    ("a + b*c", BinOp("+", Sym("a"), BinOp("*", Sym("b"), Sym("c")))),
    ("a - b - c", BinOp("-", BinOp("-", Sym("a"), Sym("b")), Sym("c"))),  # left-associative
    ("a // b * c", BinOp("*", BinOp("//", Sym("a"), Sym("b")), Sym("c"))),
    ("a % b // c", BinOp("//", BinOp("%", Sym("a"), Sym("b")), Sym("c"))),
    ("-a*b", BinOp("*", Neg(Sym("a")), Sym("b"))),  # unary minus binds tighter than *, as in Python
    ("-3//2", BinOp("//", Int(-3), Int(2))),  # (-3)//2, a negative literal
    ("a - -b", BinOp("-", Sym("a"), Neg(Sym("b")))),
    ("((a))", Sym("a")),
])
def test_precedence_follows_python(text, tree):
    assert parse(text) == tree


def test_conditions():
    assert parse_condition("1 <= B <= 64") == Compare(("<=", "<="), (Int(1), Sym("B"), Int(64)))
    assert parse_condition("(a < b) < c") == Compare(("<",), (Compare(("<",), (Sym("a"), Sym("b"))), Sym("c")))
    assert parse_condition("a == 1 and b == 2 or not c") == BoolOp("or", (
        BoolOp("and", (Compare(("==",), (Sym("a"), Int(1))), Compare(("==",), (Sym("b"), Int(2))))),
        Not(Sym("c"))))
    assert parse_condition("not a == b") == Not(Compare(("==",), (Sym("a"), Sym("b"))))


# ---------------------------------------------------------------- printing


@pytest.mark.parametrize("text", [
    "B", "B*S", "(H + 1)//2", "N - 1", "2*M + N", "(H + 3)//4 - 1", "B*(S//2)", "H - 4*(H//4)", "-(H//2)",
    "-2*H", "-B*S", "a - (b - c)", "a*(b*c)", "(2*H) % 4", "M + N",
])
def test_canonical_text_round_trips(text):
    assert to_text(parse(text)) == text


@pytest.mark.parametrize("text, canonical", [
    ("B * S", "B*S"), ("( H+1 ) // 2", "(H + 1)//2"), ("((a + b))", "a + b"), ("a+(b+c)", "a + (b + c)"),
    ("H % 2", "H % 2"), ("(S//2)*B", "(S//2)*B"),
])
def test_printing_is_canonical(text, canonical):
    assert to_text(parse(text)) == canonical


@pytest.mark.parametrize("text", ["1 <= B <= 64", "(H + 1) % 2 == 0", "N == M and M > 1", "not A == 1 or B < 2",
                                  "(a < b) < c", "K == M + N"])
def test_condition_text_round_trips(text):
    assert to_text(parse_condition(text)) == text


def test_random_expressions_agree_with_python():
    """Evaluation matches Python's (`//` and `%` floor toward -inf, also on negatives), and the
    canonical text of a tree parses back to the same tree."""
    rng = random.Random(7)

    def gen(depth: int) -> str:
        if depth == 0 or rng.random() < 0.3:
            return rng.choice(["a", "b", "c", str(rng.randint(-9, 9))])
        r = rng.random()
        if r < 0.15:
            return "-" + gen(depth - 1)
        if r < 0.3:
            return f"({gen(depth - 1)})"
        return gen(depth - 1) + rng.choice([" + ", " - ", "*", "//", " % "]) + gen(depth - 1)

    checked = 0
    for _ in range(2000):
        text = gen(5)
        env = {"a": rng.randint(-7, 7), "b": rng.randint(-7, 7), "c": rng.randint(-7, 7)}
        try:
            want = eval(text, {}, dict(env))
        except ZeroDivisionError:
            with pytest.raises(ZeroDivisionError):
                evaluate(text, env)
            continue
        assert evaluate(text, env) == want, text
        assert parse(to_text(parse(text))) == parse(text), text
        checked += 1
    assert checked > 1000


@pytest.mark.parametrize("a", [-7, -1, 0, 5])
@pytest.mark.parametrize("b", [-3, 2])
def test_floor_division_and_remainder_on_negatives(a, b):
    assert evaluate("a // b", {"a": a, "b": b}) == a // b
    assert evaluate("a % b", {"a": a, "b": b}) == a % b
    assert evaluate("-a // b", {"a": a, "b": b}) == -a // b


def test_conditions_evaluate_and_short_circuit():
    holds = evaluator(parse_condition("B != 0 and N // B >= 2"))
    assert holds({"B": 0, "N": 5}) is False  # the right side (a division by 0) is never evaluated
    assert holds({"B": 2, "N": 5}) is True
    chain = evaluator(parse_condition("1 <= B <= 64"))
    assert [chain({"B": b}) for b in (0, 1, 64, 65)] == [False, True, True, False]


def test_free_symbols_in_order_of_appearance():
    assert free_symbols("S*B + S - H//2") == ("S", "B", "H")
    assert free_symbols(parse_condition("K == M + N and M >= 1")) == ("K", "M", "N")
    assert free_symbols("3 + 4") == ()


def test_evaluate_names_an_unbound_symbol():
    with pytest.raises(SymExprError, match="symbolic dim 'S' is not bound by any input"):
        evaluate("B*S", {"B": 2})


def test_sympy_expressions_print_in_the_grammar():
    sympy = pytest.importorskip("sympy")
    from sdc.dialect.symbolic import to_text  # sympy dims print through the algebra module
    h, b = sympy.symbols("H B", integer=True, positive=True)
    text = to_text(sympy.floor((h + 1) / 2) + b * h)
    assert evaluate(text, {"H": 9, "B": 2}) == 5 + 18


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("text, reason", [
    ("", "it is empty"),
    ("   ", "it is empty"),
    ("(N", "a '(' is never closed"),
    ("N)", "a ')' closes no '('"),
    ("(N))", "a ')' closes no '('"),
    ("N +", "it ends without an operand"),
    ("N N", "'N' follows an operand without an operator"),
    ("()", "'()' holds nothing"),
    ("* N", "'*' has no operand before it"),
])
def test_structural_errors(text, reason):
    with pytest.raises(SymExprError, match="is not a dim expression: " + re.escape(reason)) as e:
        parse(text)
    assert e.value.reason and not e.value.token
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("text, token", [
    ("N ** 2", "**"), ("N / 2", "/"), ("1.5", "."), ("N << 1", "<<"), ("+N", "unary +"), ("True", "True"),
    ("N if M else 1", "if"), ("N == 2", "=="), ("N and M", "and"), ("not N", "not"), ("f(N)", "follows"),
])
def test_operators_outside_the_grammar(text, token):
    if token == "follows":  # a call is two operands in a row: a structural error
        with pytest.raises(SymExprError, match="follows an operand"):
            parse(text)
        return
    with pytest.raises(SymExprError, match=r"is not a dim expression \(allowed: ints, names, \+ - \* // % and "
                                           r"parentheses\)") as e:
        parse(text)
    assert e.value.token == token


def test_condition_errors_name_the_token():
    with pytest.raises(SymExprError) as e:
        parse_condition("N ** 2 == 4")
    assert e.value.token == "**" and "uses '**'" in str(e.value)
    with pytest.raises(SymExprError, match="is not a condition: a '[(]' is never closed"):
        parse_condition("(N == 4")


def test_huge_integers_are_refused_cleanly():
    assert parse("9" * MAX_INT_DIGITS) == Int(int("9" * MAX_INT_DIGITS))
    text = "9" * 5000  # more digits than int() converts by default
    with pytest.raises(SymExprError, match=f"has 5000 digits \\(at most {MAX_INT_DIGITS}\\)") as e:
        parse(text)
    assert len(str(e.value)) < 300  # the message quotes a cut text


@pytest.mark.parametrize("text", [
    "(" * 100_000 + "1" + ")" * 100_000,
    "-" * 100_000 + "x",
    "not " * 50_000 + "x",
    "+".join(["a"] * 100_000),
    "a*(" * 5_000 + "b" + ")" * 5_000,
])
def test_deep_nesting_is_an_error_not_a_crash(text):
    parser = parse_condition if text.startswith("not") else parse
    with pytest.raises(SymExprError, match=f"nests more than {MAX_DEPTH} deep"):
        parser(text)


def test_nesting_up_to_the_limit_parses_and_evaluates():
    text = "+".join(["a"] * MAX_DEPTH)
    tree = parse(text)
    assert evaluate(tree, {"a": 2}) == 2 * MAX_DEPTH
    assert parse(to_text(tree)) == tree
    nested = "(" * (MAX_DEPTH - 1) + "1" + ")" * (MAX_DEPTH - 1)
    assert parse(nested) == Int(1)


def test_grammar_imports_neither_mlir_nor_sympy():
    code = ("import sys, sdc.dialect.symexpr as s; s.evaluate('(H + 1)//2', {'H': 3}); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sympy', 'torch_mlir', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

