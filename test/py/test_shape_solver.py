"""The shape solver on its own: expressions, each kind of constraint, explanations, and
property tests against brute force on small random systems."""

from __future__ import annotations

import itertools
import math

import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdc.transforms.shape_solver import Contradiction, Expr, ShapeConstraintSet, SolverError, parse, window_expr

# ---------------------------------------------------------------- expressions


def test_arithmetic_gives_ints_when_static():
    n = Expr.symbol("N")
    assert (n - n) == 0 and isinstance(n - n, int)
    assert isinstance((n + 3) * 2 - 2 * n, int)
    assert str(2 * n + 1) == "2*N + 1"
    assert str(n * Expr.symbol("B") * 4) == "4*B*N"
    assert not isinstance(n + 1, int)


def test_floor_normal_form():
    h = Expr.symbol("H")
    assert str((h + 2 - 3) // 2 + 1) == "(H + 1)//2"  # a 3x3 stride-2 pad-1 convolution
    assert (2 * h + 1) // 2 == h  # exact parts come out of the floor
    assert str((h // 2 + 1) // 2) == "(H + 2)//4"  # nested floors collapse
    assert ((h - 1) // 2) == ((h + 1) // 2) - 1
    assert str(h % 4) == "H - 4*(H//4)"
    assert (Expr.symbol("B") * Expr.symbol("S") * 64) // Expr.symbol("B") == 64 * Expr.symbol("S")


@pytest.mark.parametrize("text", ["B*S", "(H + 1)//2", "N - 1", "2*M + N", "(H + 3)//4 - 1", "B*(S//2)"])
def test_text_round_trip(text):
    e = parse(text)
    assert parse(str(e)) == e
    env = {"B": 3, "S": 10, "H": 7, "N": 5, "M": 2}
    assert e.evaluate(env) == eval(text, {}, dict(env))


def test_sympy_in_and_out():
    H, B = sympy.symbols("H B", integer=True, positive=True)
    e = Expr.of(sympy.floor((H + 1) / 2) + B * H)
    assert e == parse("(H + 1)//2 + B*H")
    back = e.to_sympy()
    assert back.subs({sympy.Symbol("H", integer=True): 9, sympy.Symbol("B", integer=True): 2}) == 5 + 18


def test_bad_expressions():
    with pytest.raises(SolverError):
        parse("H ** 2")
    with pytest.raises(SolverError):
        parse("H / 2")


def test_symbolic_dims_refuse_ordering():
    with pytest.raises(TypeError):
        Expr.symbol("N") < 3


# ---------------------------------------------------------------- each kind of constraint


def test_equalities_pick_the_first_symbol_as_representative():
    cs = ShapeConstraintSet()
    n, m = cs.symbol("N"), cs.symbol("M")
    cs.add_equal(m, n, origin="add")
    sol = cs.solve()
    assert sol.simplify(m) == n
    assert [g.text for g in sol.guards] == ["M == N"]
    assert sol.guards[0].constraints[0].origin == "add"
    assert sol.accepts({"N": 3, "M": 3}) and not sol.accepts({"N": 2, "M": 3})


def test_linear_relation_from_a_concat():
    cs = ShapeConstraintSet()
    cs.symbol("N"), cs.symbol("M"), cs.symbol("K")
    cs.add_linear({"K": 1, "N": -1, "M": -1}, origin="concat")
    sol = cs.solve()
    assert str(sol.simplify("K")) == "M + N"
    assert [g.text for g in sol.guards] == ["K == M + N"]
    assert sol.accepts({"N": 2, "M": 3, "K": 5}) and not sol.accepts({"N": 2, "M": 3, "K": 6})


def test_products_from_reshapes():
    cs = ShapeConstraintSet()
    cs.add_equal("T", "B*S*64")
    cs.add_equal("B*S", "B*4")  # a common factor >= 1 cancels: S == 4
    sol = cs.solve()
    assert sol.simplify("S") == 4
    assert str(sol.simplify("T")) == "256*B"


def test_static_through_equalities():
    cs = ShapeConstraintSet()
    cs.add_equal("K", 64, origin="matmul")
    cs.add_equal("N + K", "M")
    sol = cs.solve()
    assert sol.simplify("K") == 64
    assert str(sol.simplify("M")) == "N + 64"
    assert [g.text for g in sol.guards] == ["M == N + 64"]


def test_bounds_and_user_ranges():
    cs = ShapeConstraintSet()
    cs.add_inequality("B", lo=1, hi=64, origin="user")
    cs.add_inequality("B", hi=100)
    sol = cs.solve()
    assert (sol.bounds["B"].lo, sol.bounds["B"].hi) == (1, 64)
    assert [g.text for g in sol.guards] == ["1 <= B <= 64"]
    assert "B <= 100" in [c.text for c in sol.facts]


def test_a_closed_range_pins_the_symbol():
    cs = ShapeConstraintSet()
    cs.add_inequality("B", lo=8, hi=8)
    cs.add_equal("N", "2*B")
    sol = cs.solve()
    assert sol.simplify("B") == 8 and sol.simplify("N") == 16
    assert sol.guards == []  # static input dims are checked through their types
    assert sol.accepts({"B": 8, "N": 16}) and not sol.accepts({"B": 7, "N": 14})


def test_divisibility_folds_into_a_congruence():
    cs = ShapeConstraintSet()
    cs.add_divisible("3*H", 6, origin="split")
    cs.add_divisible("2*H + 2*W", 4)
    sol = cs.solve()
    assert sol.bounds["H"].modulus == 2
    texts = [g.text for g in sol.guards]
    assert texts == ["H % 2 == 0", "(H + W) % 2 == 0"]


def test_divisibility_known_by_construction_is_a_fact():
    cs = ShapeConstraintSet()
    cs.add_divisible("3*S*B", 3)
    cs.add_divisible("B*S*64", "B")
    sol = cs.solve()
    assert sol.guards == [] and len(sol.facts) == 2


def test_window_arithmetic():
    cs = ShapeConstraintSet()
    out = cs.window("H", kernel=3, stride=2, pad_begin=1, pad_end=1)
    assert str(out) == "(H + 1)//2"
    cs.add_equal(out, 7, origin="flatten")  # a dense layer after it wants 7
    sol = cs.solve()
    assert [g.text for g in sol.guards] == ["13 <= H <= 14"]
    assert not sol.is_static("H") and sol.is_static(out)


def test_add_window_relates_an_output_symbol():
    cs = ShapeConstraintSet()
    cs.symbol("H"), cs.symbol("O")
    cs.add_window("O", "H", kernel=5, stride=1, pad_begin=0, pad_end=0, origin="pool")  # O == H - 4, O >= 1
    sol = cs.solve()
    assert str(sol.simplify("O")) == "H - 4"
    assert [g.text for g in sol.guards] == ["O == H - 4", "H >= 5"]
    assert sol.accepts({"H": 9, "O": 5}) and not sol.accepts({"H": 9, "O": 4}) and not sol.accepts({"H": 4, "O": 0})


def test_two_branches_of_different_windows_must_agree():
    cs = ShapeConstraintSet()
    a = cs.window("H", kernel=3, stride=2, pad_begin=1, pad_end=1)  # (H + 1)//2
    b = cs.window("H", kernel=2, stride=2)  # H//2
    cs.add_equal(a, b, origin="add")
    sol = cs.solve()
    texts = [g.text for g in sol.guards]
    assert "H % 2 == 0" in texts and "H >= 2" in texts


def test_window_too_large_for_a_static_bound():
    cs = ShapeConstraintSet()
    cs.add_inequality("H", hi=4, origin="user")
    cs.window("H", kernel=7, origin="conv")
    with pytest.raises(Contradiction) as e:
        cs.solve()
    assert [c.origin for c in e.value.chain] == ["user", "conv"]


def test_ceil_mode_window():
    for size, k, s, pb, pe in itertools.product(range(1, 12), (1, 2, 3), (1, 2, 3), (0, 1), (0, 1, 2)):
        expected = _window(size, k, s, pb, pe, 1, True)
        got = window_expr(Expr.symbol("H"), Expr.const(k), s, pb, pe, 1, True).evaluate({"H": size})
        assert got == expected, (size, k, s, pb, pe)


# ---------------------------------------------------------------- contradictions and their chains


def test_contradiction_chain_names_the_ops():
    cs = ShapeConstraintSet()
    n, m = cs.symbol("N", origin="x"), cs.symbol("M", origin="y")
    k = cs.symbol("K", origin="z")
    cs.add_equal(k, n + m, origin="concat")
    cs.add_equal("P", 3, origin="unrelated")
    cs.add_equal(k, n, origin="add")
    with pytest.raises(Contradiction) as e:
        cs.solve()
    chain = e.value.chain
    assert [c.origin for c in chain] == ["y", "concat", "add"]
    assert e.value.constraint.origin == "add"
    assert chain[0].default  # M >= 1, the default every input dim carries


def test_static_contradiction():
    cs = ShapeConstraintSet()
    cs.add_equal("K", 64, origin="a")
    cs.add_equal("K", 32, origin="b")
    with pytest.raises(Contradiction) as e:
        cs.solve()
    assert [c.origin for c in e.value.chain] == ["a", "b"]


def test_congruence_clash():
    cs = ShapeConstraintSet()
    cs.add_divisible("H", 2, origin="a")
    cs.add_divisible("H + 1", 4, origin="b")
    with pytest.raises(Contradiction) as e:
        cs.solve()
    assert {c.origin for c in e.value.chain} == {"a", "b"}


def test_default_lower_bound_is_a_guard_only_when_used():
    cs = ShapeConstraintSet()
    cs.add_equal("M", "N")  # M is declared first: it stays, N is eliminated
    assert [g.text for g in cs.solve().guards] == ["N == M"]
    cs = ShapeConstraintSet()
    cs.add_inequality("N + M", lo=2)  # true because each is >= 1: that must be checked at run time
    assert sorted(g.text for g in cs.solve().guards) == ["M >= 1", "N >= 1"]


def test_opaque_symbols_give_assumptions_not_guards():
    cs = ShapeConstraintSet()
    u = cs.fresh(origin="nonzero")
    cs.add_equal(u, "N", origin="add")  # the opaque one is eliminated: no guard
    v = cs.fresh()
    cs.add_divisible(v, 4)
    sol = cs.solve()
    assert sol.guards == []
    assert [a.text for a in sol.assumptions] == [f"{u} == N", f"{v} % 4 == 0"]


# ---------------------------------------------------------------- property tests against brute force

SYMS = ("A", "B", "C")
DOMAIN = range(1, 9)


def _window(size, k, s, pb, pe, dil, ceil_mode):
    span = dil * (k - 1) + 1
    n = size + pb + pe - span
    if not ceil_mode:
        return n // s + 1
    out = -((-n) // s) + 1
    if (out - 1) * s >= size + pb:
        out -= 1
    return out


# A term is a tree; each has an Expr and a plain-Python evaluation, built independently.
leaf = st.one_of(st.sampled_from(SYMS).map(lambda s: ("sym", s)), st.integers(-3, 6).map(lambda k: ("const", k)))


def _extend(children):
    return st.one_of(
        st.tuples(st.just("add"), children, children),
        st.tuples(st.just("scale"), st.integers(-2, 3), children),
        st.tuples(st.just("mul"), st.sampled_from(SYMS).map(lambda s: ("sym", s)), children),
        st.tuples(st.just("window"), st.sampled_from(SYMS).map(lambda s: ("sym", s)), st.integers(1, 3),
                  st.integers(1, 3), st.integers(0, 2), st.integers(0, 2), st.integers(1, 2), st.booleans()),
        st.tuples(st.just("floordiv"), children, st.integers(1, 4)),
    )


terms = st.recursive(leaf, _extend, max_leaves=4)


def to_expr(t):
    kind = t[0]
    if kind == "sym":
        return Expr.symbol(t[1])
    if kind == "const":
        return Expr.const(t[1])
    if kind == "add":
        return to_expr(t[1]).plus(to_expr(t[2]))
    if kind == "scale":
        return to_expr(t[2]).scaled(t[1])
    if kind == "mul":
        return to_expr(t[1]).times(to_expr(t[2]))
    if kind == "floordiv":
        return to_expr(t[1]).floordiv(Expr.const(t[2]))
    _, size, k, s, pb, pe, dil, ceil_mode = t
    return window_expr(to_expr(size), Expr.const(k), s, pb, pe, dil, ceil_mode)


def value(t, env):
    kind = t[0]
    if kind == "sym":
        return env[t[1]]
    if kind == "const":
        return t[1]
    if kind == "add":
        return value(t[1], env) + value(t[2], env)
    if kind == "scale":
        return t[1] * value(t[2], env)
    if kind == "mul":
        return value(t[1], env) * value(t[2], env)
    if kind == "floordiv":
        return value(t[1], env) // t[2]
    _, size, k, s, pb, pe, dil, ceil_mode = t
    return _window(value(size, env), k, s, pb, pe, dil, ceil_mode)


constraint = st.one_of(
    st.tuples(st.just("eq"), terms, terms),
    st.tuples(st.just("ge"), terms, st.integers(-2, 8)),
    st.tuples(st.just("le"), terms, st.integers(1, 12)),
    st.tuples(st.just("div"), terms, st.integers(2, 4)),
)


def holds(c, env) -> bool:
    kind, t, other = c
    v = value(t, env)
    if kind == "eq":
        return v == value(other, env)
    if kind == "ge":
        return v >= other
    if kind == "le":
        return v <= other
    return v % other == 0


def add(cs: ShapeConstraintSet, c, index: int) -> None:
    kind, t, other = c
    if kind == "eq":
        cs.add_equal(to_expr(t), to_expr(other), origin=index)
    elif kind == "ge":
        cs.add_inequality(to_expr(t), lo=other, origin=index)
    elif kind == "le":
        cs.add_inequality(to_expr(t), hi=other, origin=index)
    else:
        cs.add_divisible(to_expr(t), other, origin=index)


def assignments():
    return [dict(zip(SYMS, vals)) for vals in itertools.product(DOMAIN, repeat=len(SYMS))]


ALL = assignments()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(constraint, min_size=1, max_size=4))
def test_solver_agrees_with_brute_force(system):
    cs = ShapeConstraintSet()
    for s in SYMS:
        cs.symbol(s)
    for i, c in enumerate(system):
        add(cs, c, i)
    try:
        sol = cs.solve()
    except Contradiction as e:
        # Real: no assignment satisfies the constraints of the chain alone (defaults hold in DOMAIN).
        chain = [system[c.origin] for c in e.chain if not c.default]
        assert chain, "a contradiction needs at least one of the caller's constraints"
        assert not any(all(holds(c, env) for c in chain) for env in ALL), (str(e), chain)
        return
    for env in ALL:
        satisfied = all(holds(c, env) for c in system)
        assert sol.accepts(env) == satisfied, (env, satisfied, [g.text for g in sol.guards])
        if satisfied:
            for name in SYMS:
                canon = sol.canonical[name]
                got = canon if isinstance(canon, int) else canon.evaluate(env)
                assert got == env[name], (name, canon, env)
            for c in system:  # derived expressions: the canonical form of each term has its value
                simple = sol.simplify(to_expr(c[1]))
                got = simple if isinstance(simple, int) else simple.evaluate(env)
                assert got == value(c[1], env), (c[1], simple, env)


@settings(max_examples=100, deadline=None)
@given(st.lists(constraint, min_size=1, max_size=3), st.sampled_from(SYMS), st.integers(1, 4), st.integers(4, 10))
def test_user_bounds_and_brute_force(system, sym, lo, hi):
    system = system + [("ge", ("sym", sym), lo), ("le", ("sym", sym), hi)]
    cs = ShapeConstraintSet()
    for i, c in enumerate(system):
        add(cs, c, i)
    for s in SYMS:
        cs.symbol(s)
    try:
        sol = cs.solve()
    except Contradiction as e:
        chain = [system[c.origin] for c in e.chain if not c.default]
        assert not any(all(holds(c, env) for c in chain) for env in ALL)
        return
    for env in ALL:
        assert sol.accepts(env) == all(holds(c, env) for c in system), env


@settings(max_examples=100, deadline=None)
@given(terms, terms)
def test_expression_arithmetic_matches_python(a, b):
    ea, eb = to_expr(a), to_expr(b)
    for env in ALL[::37]:
        va, vb = value(a, env), value(b, env)
        assert ea.evaluate(env) == va
        assert ea.plus(eb).evaluate(env) == va + vb
        assert ea.times(eb).evaluate(env) == va * vb
        assert parse(ea.text()).evaluate(env) == va
        if vb > 0 and isinstance(eb.value(), int):
            assert ea.floordiv(eb).evaluate(env) == va // vb
            assert ea.mod(eb).evaluate(env) == va % vb


def test_gcd_helpers_sanity():
    assert math.gcd(0, 6) == 6  # the solver relies on gcd(0, x) == x when normalizing
