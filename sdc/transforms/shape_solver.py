"""A symbolic shape solver: `ShapeConstraintSet` over integer dims. Pure Python, no MLIR.

    cs = ShapeConstraintSet()
    n, m, k = cs.symbol("N"), cs.symbol("M"), cs.symbol("K")        # input dims, each >= 1
    cs.add_equal(k, n + m, origin=concat_op, reason="concat: ...")     # K = N + M
    cs.add_inequality(n, lo=1, hi=64)                                  # user bound
    cs.add_divisible(k, 2)                                             # split in two
    h = cs.symbol("H")
    out = cs.window(h, kernel=3, stride=2, pad_begin=1, pad_end=1)     # floor((H + 2 - 3)/2) + 1, and out >= 1
    sol = cs.solve()             # raises Contradiction (with the constraints that conflict)
    sol.simplify(k)              # M + N: the canonical form of any dim expression
    sol.guards                   # what a run time must check: ["K == M + N", "N <= 64", "(M + N) % 2 == 0", ...]

Dims are `Expr`s (sdc/dialect/symbolic.py, the one module of the symbolic algebra):
integer polynomials over symbol names and floor-division atoms (`(H + 1)//2`), with
arithmetic `+ - * // %` that returns a plain int whenever the result is constant, so shape
rules that test `isinstance(d, int)` see static dims as static. `Expr`, `parse`,
`floordiv` and `SolverError` are importable from here too.

What `solve()` does, in order:
1. equalities eliminate one symbol each (a symbol with coefficient +-1 outside any atom or
   product): opaque symbols first, then the most recently declared input symbol, so the
   first-declared symbol of a class stays its canonical representative;
2. every other constraint is rewritten in the remaining (free) symbols: constant ones are
   proven or refuted; those over one symbol fold into its interval and congruence class
   (closed forms for a window's `floor`, exact enumeration over one period for periodic
   ones such as `(H - 1)//2 == (H - 2)//2`, i.e. `H % 2 == 0`); a symbol whose interval
   closes on one value becomes static and the loop repeats;
3. what is left over several symbols is proven or refuted by interval arithmetic, or stays
   a residual: a run-time guard if it mentions input symbols only, an assumption if it
   mentions opaque ones (dims no input determines, such as a data-dependent size).

Every derived fact keeps the constraints it rests on, so a contradiction reports the chain
of constraints (each with the origin the caller gave it: the op that added it), and the
guard list carries `x >= 1` for a symbol only when some conclusion used that default.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Mapping

from sdc.dialect import symexpr
from sdc.dialect.symbolic import (ATOM, Expr, SolverError, atom_parts, exact_monomial_division, floordiv,  # noqa: F401
                                  is_simple, parse)  # (Expr, parse, floordiv, SolverError: public here too)

BIG = 1 << 62  # stands for "unbounded" in searches


# ================================================================ constraints


Just = Any  # a justification: None, or (constraint id or -1, (parent justifications...))


def _join(*parts: Just) -> Just:
    live = [p for p in parts if p is not None]
    if not live:
        return None
    if len(live) == 1:
        return live[0]
    return (-1, tuple(live))


@dataclass(frozen=True, eq=False)
class Constraint:
    """One constraint as the caller added it: `expr == 0`, `expr >= 0` or `expr % modulus == 0`."""

    id: int
    kind: str  # "eq", "ge", "div"
    expr: Expr
    text: str  # the condition as written, e.g. "K == M + N"
    origin: Any = None  # what added it (the pass gives the op); carried into explanations
    reason: str = ""  # why, in the caller's words
    modulus: Expr | None = None
    default: bool = False  # a symbol's default lower bound (dims are >= 1), not a caller's constraint

    def __str__(self) -> str:
        return self.text + (f"  ({self.reason})" if self.reason else "")


@dataclass(frozen=True, eq=False)
class Condition:
    """A condition over the symbols the solver could not decide: checked at run time (a guard) or assumed."""

    text: str  # in the guard grammar: ints, names, + - * // %, comparisons, and/or
    kind: str  # "equal" (SYMBOL == expr), "bound", "congruence", "relation"
    symbols: tuple[str, ...]
    constraints: tuple[Constraint, ...]  # the caller's constraints it comes from (defaults left out)

    def holds(self, env: Mapping[str, int]) -> bool:
        return _eval_condition(self.text, env)

    def __str__(self) -> str:
        return self.text


@dataclass
class Bounds:
    lo: int | None
    hi: int | None
    modulus: int = 1
    residue: int = 0

    def __str__(self) -> str:
        text = f"{'' if self.lo is None else self.lo}..{'' if self.hi is None else self.hi}"
        return text + (f" (= {self.residue} mod {self.modulus})" if self.modulus > 1 else "")


class Contradiction(Exception):
    """The constraints cannot all hold. `chain`: the caller's constraints involved, in the order added;
    `constraint`: the last of them (the one whose addition made the set contradictory)."""

    def __init__(self, detail: str, chain: list[Constraint]):
        self.detail = detail
        self.chain = chain
        self.constraint = chain[-1] if chain else None
        listed = "; ".join(c.text for c in chain)
        super().__init__(f"{detail}" + (f" (from: {listed})" if listed else ""))


@dataclass
class SymbolInfo:
    name: str
    order: int
    input: bool  # bound by an input at run time (checkable); else opaque
    origin: Any = None
    default_bound: Constraint | None = None


# ================================================================ the constraint set


class ShapeConstraintSet:
    """Constraints over symbolic integer dims; `solve()` decides what it can (see the module docstring)."""

    def __init__(self) -> None:
        self.constraints: list[Constraint] = []
        self.symbols: dict[str, SymbolInfo] = {}
        self._fresh = 0

    # ------------------------------------------------------------ symbols and expressions

    def symbol(self, name: str, *, input: bool = True, origin: Any = None, reason: str = "") -> Expr:
        """Declare a symbol (once; later calls return it). Input symbols are >= 1 by default, opaque ones >= 0."""
        if name[:1] == ATOM or not name:
            raise SolverError(f"'{name}' is not a symbol name")
        if name not in self.symbols:
            info = SymbolInfo(name, len(self.symbols), input, origin)
            self.symbols[name] = info
            floor = 1 if input else 0
            info.default_bound = self._add("ge", Expr.symbol(name).plus(Expr.const(-floor)), f"{name} >= {floor}",
                                           origin, reason or f"{name} is a size", default=True)
        return Expr.symbol(name)

    def fresh(self, prefix: str = "_", *, origin: Any = None, reason: str = "") -> Expr:
        """A new opaque symbol: a dim no input determines (such as a data-dependent size)."""
        while True:
            name = f"{prefix}{self._fresh}"
            self._fresh += 1
            if name not in self.symbols:
                return self.symbol(name, input=False, origin=origin, reason=reason or "an unknown size")

    def expr(self, value) -> Expr:
        """Any dim (int, symbol name, dim text, sympy expression, Expr) as an Expr, declaring new symbols."""
        e = Expr.of(value)
        for name in sorted(e.symbols()):
            if name not in self.symbols:
                self.symbol(name)
        return e

    # ------------------------------------------------------------ constraints

    def add_equal(self, a, b, *, origin: Any = None, reason: str = "") -> Constraint:
        """a == b."""
        ea, eb = self.expr(a), self.expr(b)
        return self._add("eq", ea.plus(eb, -1), f"{ea.text()} == {eb.text()}", origin, reason)

    def add_linear(self, terms, const: int = 0, *, origin: Any = None, reason: str = "") -> Constraint:
        """sum(coeff * dim) + const == 0, terms as {dim: coeff} or [(coeff, dim), ...]; a dim may be a
        product (`B*S`)."""
        pairs = [(c, d) for d, c in terms.items()] if isinstance(terms, Mapping) else list(terms)
        total = Expr.const(const)
        for coeff, dim in pairs:
            if not isinstance(coeff, int):
                raise SolverError(f"coefficient {coeff!r} of {dim} is not an integer")
            total = total.plus(self.expr(dim), coeff)
        lhs, rhs = _sides(total)
        return self._add("eq", total, f"{lhs} == {rhs}", origin, reason)

    def add_inequality(self, expr, lo=None, hi=None, *, origin: Any = None, reason: str = "") -> list[Constraint]:
        """lo <= expr <= hi (either may be None); lo and hi may be dims too."""
        e = self.expr(expr)
        out = []
        if lo is not None:
            lo_e = self.expr(lo)
            out.append(self._add("ge", e.plus(lo_e, -1), f"{e.text()} >= {lo_e.text()}", origin, reason))
        if hi is not None:
            hi_e = self.expr(hi)
            out.append(self._add("ge", hi_e.plus(e, -1), f"{e.text()} <= {hi_e.text()}", origin, reason))
        return out

    def add_divisible(self, expr, divisor, *, origin: Any = None, reason: str = "") -> Constraint:
        """expr % divisor == 0 (divisor a positive int, or a dim)."""
        e, d = self.expr(expr), self.expr(divisor)
        if d.is_const and d.constant <= 0:
            raise SolverError(f"divisor {d.constant} must be positive")
        dt = d.text() if is_simple(d) else f"({d.text()})"
        et = e.text() if is_simple(e) else f"({e.text()})"
        return self._add("div", e, f"{et} % {dt} == 0", origin, reason, modulus=d)

    def window(self, size, kernel, stride: int = 1, pad_begin: int = 0, pad_end: int = 0, dilation: int = 1,
               ceil_mode: bool = False, *, origin: Any = None, reason: str = ""):
        """The output length of a sliding window (convolution, pooling), recording that it is >= 1.

        floor((size + pads - dilation*(kernel-1) - 1) / stride) + 1, or with `ceil_mode` rounded up,
        less one when the last window would start in the end padding (ONNX and torch agree).
        Returns an int when static, else an Expr.
        """
        out = window_expr(self.expr(size), self.expr(kernel), stride, pad_begin, pad_end, dilation, ceil_mode)
        if not out.is_const:
            span = self.expr(kernel).plus(Expr.const(-1)).scaled(dilation).plus(Expr.const(1))
            self._add("ge", out.plus(Expr.const(-1)), f"{out.text()} >= 1", origin,
                      reason or f"the window ({span.text()}) must fit in the padded input")
        return out.value()

    def add_window(self, out, size, kernel, stride: int = 1, pad_begin: int = 0, pad_end: int = 0,
                   dilation: int = 1, ceil_mode: bool = False, *, origin: Any = None, reason: str = "") -> Constraint:
        """out == the window arithmetic of `window`, and out >= 1."""
        expected = self.window(size, kernel, stride, pad_begin, pad_end, dilation, ceil_mode, origin=origin,
                               reason=reason)
        return self.add_equal(out, expected, origin=origin, reason=reason)

    def _add(self, kind: str, expr: Expr, text: str, origin: Any, reason: str, modulus: Expr | None = None,
             default: bool = False) -> Constraint:
        for name in expr.symbols() | (modulus.symbols() if modulus is not None else frozenset()):
            if name not in self.symbols:
                self.symbol(name)
        c = Constraint(len(self.constraints), kind, expr, text, origin, reason, modulus, default)
        self.constraints.append(c)
        return c

    # ------------------------------------------------------------ solving

    def solve(self) -> "Solution":
        """Decide what can be decided; raises Contradiction when the constraints cannot all hold."""
        return _Solver(self).run()


def window_expr(size: Expr, kernel: Expr, stride: int, pad_begin: int, pad_end: int, dilation: int,
                ceil_mode: bool) -> Expr:
    span = kernel.plus(Expr.const(-1)).scaled(dilation).plus(Expr.const(1))
    n = size.plus(Expr.const(pad_begin + pad_end)).plus(span, -1)
    s = Expr.const(stride)
    if not ceil_mode:
        return floordiv(n, s).plus(Expr.const(1))
    out = floordiv(n.plus(Expr.const(stride - 1)), s).plus(Expr.const(1))
    # The last window starts at ceil(n/s)*s = n + ((-n) mod s); it starts in the end padding when
    # (-n) mod s >= span - pad_end =: q, and then there is one window less.
    q = span.plus(Expr.const(-pad_end))
    if q.is_const and q.constant > stride - 1:
        return out
    if q.is_const and q.constant <= 0:
        return out.plus(Expr.const(-1))
    correction = floordiv(n.scaled(-1).plus(Expr.const(stride)).plus(q, -1), s).plus(floordiv(n.scaled(-1), s), -1)
    return out.plus(correction, -1)


def _sides(e: Expr) -> tuple[str, str]:
    """Split `e == 0` into readable sides: positive terms left, the rest right."""
    pos = Expr({m: c for m, c in e.terms.items() if c > 0 and m})
    neg = Expr({m: -c for m, c in e.terms.items() if c < 0 and m})
    k = e.constant
    if not pos.terms and not neg.terms:
        return str(k), "0"
    if not pos.terms:
        pos, neg, k = neg, pos, -k
    if k > 0:
        pos = pos.plus(Expr.const(k))
    elif k < 0:
        neg = neg.plus(Expr.const(-k))
    return pos.text(), neg.text()


# ================================================================ the solution


@dataclass
class Solution:
    """What solve() found.

    `canonical`: every symbol's canonical expression (a free symbol maps to itself; a static one to an int).
    `bounds`: interval and congruence of each free symbol, as proven.
    `facts`: the caller's constraints proven at compile time.
    `guards`: conditions over input symbols left for run time (each with the constraints it comes from).
    `assumptions`: conditions over opaque symbols nothing can check.
    """

    canonical: dict[str, Any]
    bounds: dict[str, Bounds]
    facts: list[Constraint]
    guards: list[Condition]
    assumptions: list[Condition]
    _subst: dict[str, Expr] = field(default_factory=dict, repr=False)
    inputs: frozenset = frozenset()

    def simplify(self, dim):
        """The canonical form of a dim: an int when the solver proved it static, else an Expr.
        Floors of a symbol with a known congruence reduce: with H % 2 == 0, (H + 1)//2 is H//2."""
        e = Expr.of(dim).subst(self._subst)
        return self._with_congruences(e).value()

    def _with_congruences(self, e: Expr) -> Expr:
        mapping = {}
        for name in e.atoms():
            num, den = atom_parts(name)
            if not den.is_const or num.depth():
                continue
            value = self._constant_floor(num, den.constant)
            if value is not None:  # (H + 1)//2 with 13 <= H <= 14 is 7
                mapping[name] = Expr.const(value)
                continue
            if len(num.symbols()) != 1:
                continue
            x = next(iter(num.symbols()))
            b = self.bounds.get(x)
            if b is None or b.modulus == 1 or not all(m in ((), (x,)) for m in num.terms):
                continue
            p, k, d, m = num.terms.get((x,), 0), num.constant, den.constant, b.modulus
            if p <= 0 or (p * m) % d:
                continue
            # x = m*q + r with q = x//m: floor((p*x + k)/d) = (p*m/d)*q + floor((p*r + k)/d)
            q = floordiv(Expr.symbol(x), Expr.const(m))
            mapping[name] = q.scaled(p * m // d).plus(Expr.const((p * b.residue + k) // d))
        if not mapping:
            return e
        out = Expr({})
        for mono, c in e.terms.items():
            term = Expr.const(c)
            for f in mono:
                term = term.times(mapping.get(f) or Expr({(f,): 1}))
            out = out.plus(term)
        return out

    def _constant_floor(self, num: Expr, d: int) -> int | None:
        """floor(num / d) when the bounds of num's symbols leave it one value (num linear)."""
        lo = hi = num.constant
        for mono, c in num.terms.items():
            if not mono:
                continue
            if len(mono) != 1 or mono[0] not in self.bounds:
                return None
            b = self.bounds[mono[0]]
            low, high = (b.lo, b.hi) if c > 0 else (b.hi, b.lo)
            if low is None or high is None:
                return None
            lo += c * low
            hi += c * high
        return lo // d if lo // d == hi // d else None

    def is_static(self, dim) -> bool:
        return isinstance(self.simplify(dim), int)

    def free_symbols(self) -> list[str]:
        return [s for s, v in self.canonical.items() if isinstance(v, Expr) and v == Expr.symbol(s)]

    def accepts(self, env: Mapping[str, int]) -> bool:
        """Whether values of the input symbols pass what the runtime checks: static input dims (their
        types) and every guard."""
        for name in self.inputs:
            value = self.canonical.get(name)
            if isinstance(value, int) and name in env and env[name] != value:
                return False
        return all(g.holds(env) for g in self.guards)

    def relations(self) -> list[str]:
        """Every relation established among the symbols, as text: each eliminated symbol's definition
        (`M == N`, `B == 8`), then the guards and assumptions (bounds, congruences, residual relations)."""
        out: list[str] = []
        for name, value in self.canonical.items():
            if not (isinstance(value, Expr) and value == Expr.symbol(name)):
                out.append(f"{name} == {value.text() if isinstance(value, Expr) else value}")
        seen = set(out)
        for cond in self.guards + self.assumptions:
            if cond.text not in seen:
                out.append(cond.text)
                seen.add(cond.text)
        return out


# ================================================================ the solver


@dataclass
class _Pending:
    constraint: Constraint
    expr: Expr  # resolved
    just: Just
    modulus: int | None = None  # a divisibility constraint's modulus, when constant (normalized with expr)


class _Solver:
    ENUMERATION_LIMIT = 4096

    def __init__(self, cs: ShapeConstraintSet):
        self.cs = cs
        self.info = cs.symbols
        self.subst: dict[str, Expr] = {}
        self.subst_just: dict[str, Just] = {}
        self.occurs: dict[str, set[str]] = {}
        self.eliminated_by: dict[str, tuple[Constraint | None, Just]] = {}
        self.facts: list[tuple[Constraint, Just]] = []  # this round's
        self.eq_facts: list[tuple[Constraint, Just]] = []  # equalities proven while eliminating (permanent)
        # per free symbol: guard-level bounds (from constraints over that symbol alone)
        self.lo: dict[str, tuple[int, Just]] = {}
        self.lo_default: dict[str, bool] = {}  # whether x's lower bound is a default (dims >= 1), maybe resolved
        self.hi: dict[str, tuple[int, Just]] = {}
        self.cong: dict[str, tuple[int, int, Just]] = {}
        self.folded: dict[str, list[Constraint]] = {}  # symbol -> constraints folded into its bounds
        self.residual_single: list[_Pending] = []
        self.residual_multi: list[_Pending] = []
        self.residual_sets: list[tuple[str, int, frozenset, _Pending]] = []  # (symbol, period, residues, source)
        self.used: list[Just] = []  # justifications of conclusions drawn (to find the defaults they rest on)

    # ------------------------------------------------------------ justifications

    def _chain(self, *justs: Just) -> list[Constraint]:
        ids: set[int] = set()
        stack = [j for j in justs if j is not None]
        seen: set[int] = set()
        while stack:
            j = stack.pop()
            if id(j) in seen:
                continue
            seen.add(id(j))
            cid, parents = j
            if cid >= 0:
                ids.add(cid)
            stack.extend(p for p in parents if p is not None)
        return [self.cs.constraints[i] for i in sorted(ids)]

    def _fail(self, detail: str, *justs: Just):
        raise Contradiction(detail, self._chain(*justs))

    def _use(self, c: Constraint, just: Just) -> None:
        """A conclusion about c rests on `just` (a default it contains becomes a guard), unless c is a default."""
        if not c.default:
            self.used.append(just)

    @staticmethod
    def _leaf(c: Constraint) -> Just:
        return (c.id, ())

    # ------------------------------------------------------------ substitution

    def resolve(self, e: Expr) -> tuple[Expr, Just]:
        hit = e.symbols() & self.subst.keys()
        if not hit:
            return e, None
        return e.subst({s: self.subst[s] for s in hit}), _join(*(self.subst_just[s] for s in sorted(hit)))

    def eliminate(self, x: str, value: Expr, just: Just, source: Constraint | None) -> None:
        assert x not in value.symbols()
        for y in self.occurs.pop(x, ()):
            if y in self.subst:
                self.subst[y] = self.subst[y].subst({x: value})
                self.subst_just[y] = _join(self.subst_just[y], just)
                for s in value.symbols():
                    self.occurs.setdefault(s, set()).add(y)
        self.subst[x] = value
        self.subst_just[x] = just
        self.eliminated_by[x] = (source, just)
        for s in value.symbols():
            self.occurs.setdefault(s, set()).add(x)

    # ------------------------------------------------------------ the main loop

    def run(self) -> Solution:
        cons = self.cs.constraints
        eqs = [c for c in cons if c.kind == "eq"]
        others = [c for c in cons if c.kind != "eq"]
        deferred: list[_Pending] = []
        for c in eqs:
            p = self._equality(c, c.expr, self._leaf(c))
            if p is not None:
                deferred.append(p)
        for _ in range(len(self.info) + 2):
            pinned = self._round(others, deferred)
            if not pinned:
                break
        self._multi()
        return self._solution()

    def _equality(self, c: Constraint, expr: Expr, just: Just) -> _Pending | None:
        r, rj = self.resolve(expr)
        j = _join(just, rj)
        if r.is_const:
            if r.constant != 0:
                self._fail(self._false(c, f"{r.constant} == 0"), j)
            self.eq_facts.append((c, j))
            return None
        r, cj = self._cancel_common_factor(r)
        j = _join(j, cj)
        g = 0
        for mono, coeff in r.terms.items():
            if mono:
                g = math.gcd(g, coeff)
        if g > 1:
            if r.constant % g:
                self._fail(f"{c.text} cannot hold: {_sides_text(r)} has no integer solution", j)
            r = Expr({m: v // g for m, v in r.terms.items()})
        x = self._pivot(r)
        if x is None:
            return _Pending(c, r, j)
        coeff = r.terms[(x,)]
        rest = r.plus(Expr.symbol(x), -coeff)
        self.eliminate(x, rest.scaled(-coeff), j, c)
        return None

    def _false(self, c: Constraint, reduced: str) -> str:
        """Why a constraint that became constant is false: the values its symbols were given."""
        given = [f"{s} = {self.subst[s].text()}" for s in sorted(c.expr.symbols(), key=lambda s: self.info[s].order)
                 if s in self.subst]
        if given:
            return f"{c.text} is false with {', '.join(given)}"
        return f"{c.text} is false (it reduces to {reduced})"

    def _cancel_common_factor(self, r: Expr) -> tuple[Expr, Just]:
        """B*S - B*T == 0 with B >= 1 is S - T == 0."""
        if () in r.terms or len(r.terms) < 2:
            return r, None
        common = None
        for mono in r.terms:
            fs = set(mono)
            common = fs if common is None else common & fs
            if not common:
                return r, None
        just = None
        for f in sorted(common):
            if f[0] == ATOM or f not in self.info:
                continue
            lo = self._lo(f)
            if lo is None or lo[0] < 1:
                continue
            out = {}
            for mono, c in r.terms.items():
                rest = list(mono)
                rest.remove(f)
                out[tuple(rest)] = c
            r = Expr(out)
            just = _join(just, lo[1])
            self.used.append(lo[1])
            if () in r.terms:
                break
        return r, just

    def _pivot(self, r: Expr) -> str | None:
        best = None
        best_key = None
        for mono, coeff in r.terms.items():
            if len(mono) != 1 or abs(coeff) != 1 or mono[0][0] == ATOM:
                continue
            x = mono[0]
            if r.linear_coeff(x) is None:
                continue
            info = self.info[x]
            key = (not info.input, info.order)
            if best_key is None or key > best_key:
                best, best_key = x, key
        return best

    # ------------------------------------------------------------ one round: fold single-symbol constraints

    def _round(self, others: list[Constraint], deferred: list[_Pending]) -> bool:
        """Fold what is over one symbol, retry equalities that had no pivot, pin closed intervals.
        True when something was eliminated (the caller runs another round)."""
        self.lo, self.hi, self.cong, self.folded = {}, {}, {}, {}
        self.lo_default = {}
        self.residual_single, self.residual_multi, self.residual_sets = [], [], []
        self.facts, self.used = [], []
        singles: dict[str, list[_Pending]] = {}
        for c in others:
            r, rj = self.resolve(c.expr)
            self._sort(self._classify(c, r, _join(self._leaf(c), rj)), singles)
        self._fold_all(singles)
        # Equalities without a pivot: the bounds now known may cancel a common factor (B*S == B*T).
        progressed = False
        still: list[_Pending] = []
        for p in deferred:
            q = self._equality(p.constraint, p.expr, p.just)
            if q is None:
                progressed = True
            else:
                still.append(q)
        deferred[:] = still
        if progressed:
            return True
        singles = {}
        for p in still:
            self._sort(p, singles)
        self._fold_all(singles)
        pins = self._pins()
        for x, value, just in pins:
            self.eliminate(x, Expr.const(value), just, None)
        return bool(pins)

    def _sort(self, p: _Pending | None, singles: dict[str, list[_Pending]]) -> None:
        if p is None:
            return
        c = p.constraint
        names = p.expr.symbols() | (c.modulus.symbols() if c.kind == "div" and c.modulus is not None else frozenset())
        if len(names) == 1 and (c.kind != "div" or self._const_modulus(c, p) is not None):
            singles.setdefault(next(iter(names)), []).append(p)
        else:
            self.residual_multi.append(p)

    def _fold_all(self, singles: dict[str, list[_Pending]]) -> None:
        for x in sorted(singles, key=lambda s: self.info[s].order):
            seen: dict[tuple, _Pending] = {}
            for p in sorted(singles[x], key=lambda p: (not self._is_linear(p.expr, x), p.constraint.id)):
                key = (p.constraint.kind, p.expr, p.modulus)
                first = seen.get(key)
                if first is not None:  # the same condition again (a repeated block): it holds when the first does
                    self.facts.append((p.constraint, _join(p.just, first.just)))
                    continue
                seen[key] = p
                self._fold(x, p)

    def _const_modulus(self, c: Constraint, p: _Pending) -> int | None:
        return p.modulus

    def _classify(self, c: Constraint, r: Expr, j: Just) -> _Pending | None:
        """Constant constraints are decided here (fact or contradiction); others come back."""
        if c.kind == "div":
            m, mj = self.resolve(c.modulus)
            j = _join(j, mj)
            if m.is_const:
                k = m.constant
                if k <= 0:
                    self._fail(f"{c.text} cannot hold: the divisor is {k}", j)
                r = Expr({mono: v % k for mono, v in r.terms.items() if v % k})
                if r.is_const:
                    if r.constant % k:
                        self._fail(f"{c.text} cannot hold: the remainder is {r.constant % k}", j)
                    self.facts.append((c, j))
                    return None
                g = k
                for v in r.terms.values():
                    g = math.gcd(g, v)
                if g > 1:  # (2*H + 2*W) % 4 == 0 is (H + W) % 2 == 0
                    r = Expr({mono: v // g for mono, v in r.terms.items()})
                    return _Pending(c, r, j, k // g)
                return _Pending(c, r, j, k)
            else:
                q = exact_monomial_division(r, m)
                if q is not None:
                    self.facts.append((c, j))
                    return None
            return _Pending(c, r, j)
        if r.is_const:
            ok = r.constant == 0 if c.kind == "eq" else r.constant >= 0
            if not ok:
                self._fail(self._false(c, f"{r.constant} {'==' if c.kind == 'eq' else '>='} 0"), j)
            self.facts.append((c, j))
            return None
        return _Pending(c, r, j)

    @staticmethod
    def _is_linear(e: Expr, x: str) -> bool:
        return all(m == () or m == (x,) for m in e.terms)

    # ------------------------------------------------------------ bounds of one symbol

    def _lo(self, x: str) -> tuple[int, Just] | None:
        return self.lo.get(x)

    def _bound(self, x: str, c: Constraint | None, just: Just, lo: int | None = None, hi: int | None = None) -> None:
        """Tighten x's interval from constraint c; a constraint the interval already implies is a fact."""
        tightened = False
        implied_by = []
        default = c is not None and c.default
        if lo is not None:
            cur = self.lo.get(x)
            if cur is None or lo > cur[0]:
                self.lo[x] = (lo, just)
                self.lo_default[x] = default
                tightened = True
            else:
                implied_by.append(cur[1])
        if hi is not None:
            cur = self.hi.get(x)
            if cur is None or hi < cur[0]:
                self.hi[x] = (hi, just)
                tightened = True
            else:
                implied_by.append(cur[1])
        if c is not None and not c.default:
            self.used.extend(implied_by)
        if c is not None:
            if tightened:
                self.folded.setdefault(x, []).append(c)
            else:
                self.facts.append((c, _join(just, *implied_by)))
        self._check_interval(x)

    def _check_interval(self, x: str) -> None:
        lo, hi = self.lo.get(x), self.hi.get(x)
        if lo is not None and hi is not None and lo[0] > hi[0]:
            self._fail(f"{x} would have to be at least {lo[0]} and at most {hi[0]}", lo[1], hi[1])
        m = self.cong.get(x)
        if m is not None and lo is not None and hi is not None:
            first = _round_up(lo[0], m[0], m[1])
            if first > hi[0]:
                self._fail(f"no value of {x} in {lo[0]}..{hi[0]} is {m[1]} modulo {m[0]}", lo[1], hi[1], m[2])

    def _set_cong(self, x: str, modulus: int, residue: int, just: Just) -> None:
        residue %= modulus
        if modulus == 1:
            return
        cur = self.cong.get(x)
        if cur is None:
            self.cong[x] = (modulus, residue, just)
        else:
            merged = _crt(cur[0], cur[1], modulus, residue)
            if merged is None:
                self._fail(f"{x} cannot be {cur[1]} modulo {cur[0]} and {residue} modulo {modulus}", cur[2], just)
            self.cong[x] = (merged[0], merged[1], _join(cur[2], just))
        self._check_interval(x)

    def _interval(self, x: str) -> tuple[int, int | None, Just]:
        """The current interval of x, adjusted to its congruence class (lo defaults to the symbol's floor)."""
        lo = self.lo.get(x)
        hi = self.hi.get(x)
        lo_v = lo[0] if lo else -BIG
        hi_v = hi[0] if hi else None
        m = self.cong.get(x)
        if m is not None:
            lo_v = _round_up(lo_v, m[0], m[1]) if lo else lo_v
            hi_v = _round_down(hi_v, m[0], m[1]) if hi_v is not None else None
        return lo_v, hi_v, _join(lo[1] if lo else None, hi[1] if hi else None, m[2] if m else None)

    # ------------------------------------------------------------ folding one constraint over one symbol

    def _fold(self, x: str, p: _Pending) -> None:
        c, r, j = p.constraint, p.expr, p.just
        self.folded.setdefault(x, [])
        if self._is_linear(r, x):
            a, b = r.terms.get((x,), 0), r.constant
            if c.kind == "ge":
                if a > 0:
                    self._bound(x, c, j, lo=-(b // a))  # ceil(-b/a)
                else:
                    self._bound(x, c, j, hi=b // -a)
                return
            if c.kind == "eq":
                if b % a:
                    self._fail(f"{c.text} cannot hold: {_sides_text(r)} has no integer solution", j)
                self._bound(x, c, j, lo=-b // a, hi=-b // a)
                return
            else:
                m = self._const_modulus(c, p)
                g = math.gcd(a, m)
                if b % g:
                    self._fail(f"{c.text} cannot hold: {_sides_text(r)} is never a multiple of {m}", j)
                mm = m // g
                self._set_cong(x, mm, (-b // g) * _inverse(a // g, mm) if mm > 1 else 0, j)
                self.folded[x].append(c)
            return
        if not self._closed_form(x, c, r, j):
            self._predicate(x, p)

    def _closed_form(self, x: str, c: Constraint, r: Expr, j: Just) -> bool:
        """c_a*floor((p*x + k)/d) + c0 (op) 0 with p > 0: a window's output, solved exactly."""
        if c.kind == "div":
            return False
        atoms = [m for m in r.terms if m]
        if len(atoms) != 1 or len(atoms[0]) != 1 or atoms[0][0][0] != ATOM:
            return False
        name = atoms[0][0]
        num, den = atom_parts(name)
        if not den.is_const or not self._is_linear(num, x):
            return False
        ca, c0 = r.terms[atoms[0]], r.constant
        p, k, d = num.terms.get((x,), 0), num.constant, den.constant
        if p <= 0:
            return False
        if c.kind == "eq":
            if c0 % ca:
                self._fail(f"{c.text} cannot hold: {_sides_text(r)} has no integer solution", j)
            t = -c0 // ca  # floor((p x + k)/d) == t  <=>  t*d <= p x + k <= t*d + d - 1
            self._bound(x, c, j, lo=_ceil_div(t * d - k, p), hi=(t * d + d - 1 - k) // p)
            return True
        if ca > 0:  # floor(...) >= t with t = ceil(-c0/ca)  <=>  p x + k >= t*d
            t = _ceil_div(-c0, ca)
            self._bound(x, c, j, lo=_ceil_div(t * d - k, p))
        else:  # floor(...) <= t with t = floor(c0/-ca)  <=>  p x + k <= t*d + d - 1
            t = c0 // -ca
            self._bound(x, c, j, hi=(t * d + d - 1 - k) // p)
        return True

    def _predicate(self, x: str, p: _Pending) -> None:
        """Any other constraint over x alone: periodic, monotone, or small enough to enumerate."""
        c, r, j = p.constraint, p.expr, p.just
        test = self._tester(c, r, p)
        lo, hi, bj = self._interval(x)
        shape = _floor_linear(r, x)
        if shape is not None:
            slope, period, monotone = shape
            if c.kind == "div":
                m = self._const_modulus(c, p)
                period = period * m
                slope = Fraction(0)
            if slope == 0 and period <= self.ENUMERATION_LIMIT:
                self._periodic(x, p, test, period)
                return
            if monotone != 0 and c.kind in ("ge", "eq"):
                self._monotone(x, p, r, monotone)
                return
        if hi is not None and lo > -BIG and hi - lo <= self.ENUMERATION_LIMIT:
            allowed = [v for v in range(lo, hi + 1) if test(v)]
            self._use(c, bj)
            jj = _join(j, bj)
            if not allowed:
                self._fail(f"{c.text} holds for no {x} in {lo}..{hi}", jj)
            if allowed == list(range(allowed[0], allowed[-1] + 1)):
                self._bound(x, c, jj, lo=allowed[0], hi=allowed[-1])
                return
        self.residual_single.append(p)

    def _tester(self, c: Constraint, r: Expr, p: _Pending) -> Callable[[int], bool]:
        x = next(iter(r.symbols()))
        g = _evaluator(r, x)

        def f(v: int):
            try:
                return g(v)
            except ZeroDivisionError:  # a floor by a dim that is 0 here: the constraint is undefined
                return None

        if c.kind == "eq":
            return lambda v: f(v) == 0
        if c.kind == "ge":
            return lambda v: (f(v) if f(v) is not None else -1) >= 0
        m = self._const_modulus(c, p)
        return lambda v: f(v) is not None and f(v) % m == 0

    def _periodic(self, x: str, p: _Pending, test, period: int) -> None:
        """The constraint depends on x modulo `period` only: the residues that pass, within x's
        congruence class if it has one, fold into a congruence when they form one class."""
        c, j = p.constraint, p.just
        cong = self.cong.get(x)
        m, r = (cong[0], cong[1]) if cong else (1, 0)
        span = period * m // math.gcd(period, m)
        if span > self.ENUMERATION_LIMIT:
            span, m, r = period, 1, 0
            cong = None
        jj = _join(j, cong[2]) if cong else j
        candidates = range(r, span, m)
        residues = frozenset(v for v in candidates if test(v))
        if not residues:
            self._fail(f"{c.text} holds for no {x}" + (f" that is {r} modulo {m}" if m > 1 else ""), jj)
        if len(residues) == len(candidates):
            self.facts.append((c, jj))
            return
        period, residues = _minimal_period(span, residues)
        if len(residues) == 1:
            self._set_cong(x, period, next(iter(residues)), jj)
            self.folded[x].append(c)
            return
        self.residual_sets.append((x, period, residues, p))

    def _monotone(self, x: str, p: _Pending, r: Expr, direction: int) -> None:
        """r is non-decreasing (direction 1) or non-increasing (-1) in x: its solution set is an interval."""
        c, j = p.constraint, p.just
        lo, hi, bj = self._interval(x)
        lo_search = lo if lo > -BIG else -BIG
        hi_search = hi if hi is not None else BIG
        g = _evaluator(r, x)
        f = g if direction > 0 else (lambda v: -g(v))
        # f is non-decreasing. ge: f(v) >= 0 (direction 1) / -f(v) >= 0 i.e. f(v) <= 0 (direction -1).
        first_ge = _first(lambda v: f(v) >= 0, lo_search, hi_search)  # first v with f >= 0
        last_le = _last(lambda v: f(v) <= 0, lo_search, hi_search)  # last v with f <= 0
        jj = _join(j, bj)
        self._use(c, bj)
        if c.kind == "eq":
            if first_ge is None or last_le is None or first_ge > last_le:
                self._fail(f"{c.text} holds for no {x}" + (f" in {lo}..{hi}" if hi is not None else ""), jj)
            self._bound(x, c, jj, lo=first_ge, hi=last_le)
        elif direction > 0:
            if first_ge is None:
                self._fail(f"{c.text} holds for no {x}" + (f" up to {hi}" if hi is not None else ""), jj)
            self._bound(x, c, jj, lo=first_ge)
        else:
            if last_le is None:
                self._fail(f"{c.text} holds for no {x} from {lo}", jj)
            self._bound(x, c, jj, hi=last_le if last_le < BIG else None)

    def _pins(self) -> list[tuple[str, int, Just]]:
        pins = []
        for x in self.lo.keys() & self.hi.keys():
            lo, hi, just = self._interval(x)
            if hi is not None and lo == hi:
                pins.append((x, lo, just))
        return sorted(pins, key=lambda t: self.info[t[0]].order)

    # ------------------------------------------------------------ constraints over several symbols

    def _multi(self) -> None:
        lo = {x: (v, j) for x, (v, j) in self.lo.items()}
        hi = {x: (v, j) for x, (v, j) in self.hi.items()}
        for x, (m, res, jm) in self.cong.items():
            if x in lo:
                lo[x] = (_round_up(lo[x][0], m, res), _join(lo[x][1], jm))
            if x in hi:
                hi[x] = (_round_down(hi[x][0], m, res), _join(hi[x][1], jm))
        # Bounds propagated through the linear residuals only detect contradictions: using them
        # to prove a residual could prove it from itself.
        plo, phi = dict(lo), dict(hi)
        linear = [p for p in self.residual_multi if p.constraint.kind in ("ge", "eq")
                  and all(len(mono) <= 1 and (not mono or mono[0][0] != ATOM) for mono in p.expr.terms)]
        for _ in range(3):
            changed = False
            for p in linear:
                changed |= self._propagate(p, plo, phi)
            if not changed:
                break
        kept = []
        for p in self.residual_multi:
            verdict = self._decide(p, lo, hi)
            if verdict is None:
                kept.append(p)
        self.residual_multi = kept

    def _propagate(self, p: _Pending, lo, hi) -> bool:
        """Tighten each variable's bounds from sum(a_i x_i) + c >= 0 (or == 0) and the others' bounds."""
        r = p.expr
        changed = False
        rows = [r] if p.constraint.kind == "ge" else [r, r.scaled(-1)]
        for row in rows:
            terms = [(m[0], c) for m, c in row.terms.items() if m]
            for x, a in terms:
                total, just = row.constant, p.just
                ok = True
                for y, b in terms:
                    if y == x:
                        continue
                    bound = hi.get(y) if b > 0 else lo.get(y)
                    if bound is None:
                        ok = False
                        break
                    total += b * bound[0]
                    just = _join(just, bound[1])
                if not ok:
                    continue
                # a*x + total >= 0
                if a > 0:
                    v = _ceil_div(-total, a)
                    if x not in lo or v > lo[x][0]:
                        lo[x] = (v, just)
                        changed = True
                else:
                    v = total // -a
                    if x not in hi or v < hi[x][0]:
                        hi[x] = (v, just)
                        changed = True
                if x in lo and x in hi and lo[x][0] > hi[x][0]:
                    self._fail(f"{x} would have to be at least {lo[x][0]} and at most {hi[x][0]}", lo[x][1], hi[x][1])
        return changed

    def _decide(self, p: _Pending, lo, hi) -> bool | None:
        c, r = p.constraint, p.expr
        if c.kind == "div":
            return None
        rng = _range_of(r, lo, hi)
        if rng is None:
            return None
        (mn, mx), bj = rng
        j = _join(p.just, bj)
        if c.kind == "ge":
            if mn is not None and mn >= 0:
                self.facts.append((c, j))
                self._use(c, bj)
                return True
            if mx is not None and mx < 0:
                self._fail(f"{c.text} cannot hold within the bounds of {', '.join(sorted(r.symbols()))}", j)
        else:
            if mn is not None and mx is not None and mn == mx == 0:
                self.facts.append((c, j))
                self._use(c, bj)
                return True
            if (mn is not None and mn > 0) or (mx is not None and mx < 0):
                self._fail(f"{c.text} cannot hold: {_sides_text(r)} is never true within the bounds", j)
        return None

    # ------------------------------------------------------------ the result

    def _solution(self) -> Solution:
        info = self.info
        inputs = frozenset(s for s, i in info.items() if i.input)
        canonical: dict[str, Any] = {}
        for name in info:
            canonical[name] = self.subst[name].value() if name in self.subst else Expr.symbol(name)
        # Which default bounds (dims >= 1) did some conclusion rest on?
        all_facts = self.eq_facts + self.facts
        needed_defaults = {c.id for c in self._chain(*self.used, *(j for c, j in all_facts if not c.default),
                                                     *(self.subst_just.values())) if c.default}
        guards: list[Condition] = []
        assumptions: list[Condition] = []

        def emit(text: str, kind: str, names, constraints) -> None:
            names = tuple(sorted(set(names), key=lambda s: info[s].order))
            unique = list({c.id: c for c in constraints}.values())
            cons = tuple(c for c in unique if not c.default) or tuple(unique)
            cond = Condition(text, kind, names, cons)
            (guards if all(info[s].input for s in names) else assumptions).append(cond)

        # 1. eliminated symbols: x == its canonical expression, a guard for an input symbol (unless
        #    static: a static input dim becomes part of the input's type, which the runtime checks
        #    first), an assumption for an opaque one (a data-dependent size taken to equal it).
        for x in sorted(self.subst, key=lambda s: info[s].order):
            value = self.subst[x]
            if value.is_const:
                continue
            source, just = self.eliminated_by[x]
            emit(f"{x} == {value.text()}", "equal", (x, *value.symbols()), self._chain(just))
        # 2. bounds and congruences of free symbols, from constraints over each alone
        bounds: dict[str, Bounds] = {}
        for x in info:
            if x in self.subst:
                continue
            lo, hi, cg = self.lo.get(x), self.hi.get(x), self.cong.get(x)
            bounds[x] = Bounds(lo[0] if lo else None, hi[0] if hi else None, cg[0] if cg else 1, cg[1] if cg else 0)
            lo_cons = self._chain(lo[1]) if lo else []
            # A lower bound that is some dim's default (>= 1, perhaps through an equality) is a guard
            # only when a conclusion rested on it.
            show_lo = lo is not None and (not self.lo_default.get(x) or any(c.id in needed_defaults for c in lo_cons
                                                                               if c.default))
            hi_cons = self._chain(hi[1]) if hi else []
            if show_lo and hi is not None:
                emit(f"{lo[0]} <= {x} <= {hi[0]}", "bound", (x,), lo_cons + hi_cons)
            elif show_lo:
                emit(f"{x} >= {lo[0]}", "bound", (x,), lo_cons)
            elif hi is not None:
                emit(f"{x} <= {hi[0]}", "bound", (x,), hi_cons)
            if cg is not None:
                emit(f"{x} % {cg[0]} == {cg[1]}", "congruence", (x,), self._chain(cg[2]))
        # 3. residual relations
        for x, period, residues, p in self.residual_sets:
            text = " or ".join(f"{x} % {period} == {v}" for v in sorted(residues))
            emit(text, "relation", (x,), self._chain(p.just))
        for p in self.residual_single + self.residual_multi:
            emit(_condition_text(p, self.resolve), "relation", p.expr.symbols(),
                 self._chain(p.just))
        facts = [c for c, _ in all_facts if not c.default]
        return Solution(canonical, bounds, facts, guards, assumptions, dict(self.subst), inputs)


# ================================================================ helpers


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def _round_up(v: int, m: int, r: int) -> int:
    return v + ((r - v) % m)


def _round_down(v: int, m: int, r: int) -> int:
    return v - ((v - r) % m)


def _inverse(a: int, m: int) -> int:
    return pow(a % m, -1, m) if m > 1 else 0


def _crt(m1: int, r1: int, m2: int, r2: int) -> tuple[int, int] | None:
    g = math.gcd(m1, m2)
    if (r2 - r1) % g:
        return None
    lcm = m1 // g * m2
    k = ((r2 - r1) // g * _inverse(m1 // g, m2 // g)) % (m2 // g) if m2 // g > 1 else 0
    return lcm, (r1 + m1 * k) % lcm


def _minimal_period(period: int, residues: frozenset) -> tuple[int, frozenset]:
    """The smallest period p dividing `period` that describes the same residue set."""
    for p in range(1, period + 1):
        if period % p:
            continue
        reduced = frozenset(v % p for v in residues)
        if all(((v % p) in reduced) == (v in residues) for v in range(period)):
            return p, reduced
    return period, residues


def _floor_linear(r: Expr, x: str) -> tuple[Fraction, int, int] | None:
    """For r = a*x + b + sum(c_i * floor((p_i*x + k_i)/d_i)): (slope, period, monotone direction or 0)."""
    slope = Fraction(0)
    period = 1
    signs = set()
    for mono, c in r.terms.items():
        if not mono:
            continue
        if len(mono) != 1:
            return None
        f = mono[0]
        if f == x:
            slope += c
            signs.add(1 if c > 0 else -1)
            continue
        if f[0] != ATOM:
            return None
        num, den = atom_parts(f)
        if not den.is_const or not all(m == () or m == (x,) for m in num.terms):
            return None
        p, d = num.terms.get((x,), 0), den.constant
        slope += Fraction(c * p, d)
        period = period * d // math.gcd(period, d)
        if c * p:
            signs.add(1 if c * p > 0 else -1)
    monotone = 0 if len(signs) != 1 else next(iter(signs))
    return slope, period, monotone


def _evaluator(r: Expr, x: str) -> Callable[[int], int]:
    """r as a function of x alone; a direct closure for a*x + b + sum(c * floor((p*x + k)/d))."""
    const = r.constant
    linear = 0
    floors = []
    for mono, c in r.terms.items():
        if not mono:
            continue
        if mono == (x,):
            linear += c
            continue
        if len(mono) != 1 or mono[0][0] != ATOM:
            return lambda v: r.evaluate({x: v})
        num, den = atom_parts(mono[0])
        if not den.is_const or not all(m == () or m == (x,) for m in num.terms):
            return lambda v: r.evaluate({x: v})
        floors.append((c, num.terms.get((x,), 0), num.constant, den.constant))
    return lambda v: const + linear * v + sum(c * ((p * v + k) // d) for c, p, k, d in floors)


def _first(pred, lo: int, hi: int) -> int | None:
    """The least v in [lo, hi] with pred(v), pred monotone false..true; None if none."""
    if lo > hi:
        return None
    if pred(lo):
        return lo
    step = 1
    prev = lo
    while True:
        cur = min(lo + step, hi)
        if pred(cur):
            break
        if cur == hi:
            return None
        prev = cur
        step *= 2
    a, b = prev, cur  # pred(a) false, pred(b) true
    while b - a > 1:
        mid = (a + b) // 2
        if pred(mid):
            b = mid
        else:
            a = mid
    return b


def _last(pred, lo: int, hi: int) -> int | None:
    """The greatest v in [lo, hi] with pred(v), pred monotone true..false; None if none."""
    if lo > hi or not pred(lo):
        return None
    step = 1
    prev = lo
    while True:
        cur = min(lo + step, hi)
        if not pred(cur):
            break
        if cur == hi:
            return hi
        prev = cur
        step *= 2
    a, b = prev, cur  # pred(a) true, pred(b) false
    while b - a > 1:
        mid = (a + b) // 2
        if pred(mid):
            a = mid
        else:
            b = mid
    return a


def _range_of(r: Expr, lo, hi) -> tuple[tuple[int | None, int | None], Just] | None:
    """Interval of r from the symbols' intervals (None where unbounded)."""
    just = None
    total_lo: int | None = 0
    total_hi: int | None = 0
    for mono, c in r.terms.items():
        mlo, mhi = 1, 1
        for f in mono:
            iv = _factor_range(f, lo, hi)
            if iv is None:
                return None
            (flo, fhi), fj = iv
            just = _join(just, fj)
            mlo, mhi = _mul_interval(mlo, mhi, flo, fhi)
        tlo, thi = _mul_interval(mlo, mhi, c, c)
        total_lo = None if total_lo is None or tlo is None else total_lo + tlo
        total_hi = None if total_hi is None or thi is None else total_hi + thi
    return (total_lo, total_hi), just


def _factor_range(f: str, lo, hi):
    if f[0] == ATOM:
        num, den = atom_parts(f)
        if not den.is_const:
            return None
        rng = _range_of(num, lo, hi)
        if rng is None:
            return None
        (nlo, nhi), j = rng
        d = den.constant
        return ((None if nlo is None else nlo // d), (None if nhi is None else nhi // d)), j
    a, b = lo.get(f), hi.get(f)
    if a is None:
        return None  # every symbol has a lower bound (its default); without one, give up
    return (a[0], b[0] if b else None), _join(a[1], b[1] if b else None)


def _mul_interval(alo, ahi, blo, bhi):
    """[alo, ahi] * [blo, bhi] with None as +infinity in the upper ends (lower ends are finite here)."""
    if alo is None or blo is None:
        return None, None
    cands = []
    unbounded_hi = unbounded_lo = False
    for x in (alo, ahi):
        for y in (blo, bhi):
            if x is None or y is None:
                other = y if x is None else x
                if other is None or other > 0:
                    unbounded_hi = True
                elif other < 0:
                    unbounded_lo = True
                else:
                    cands.append(0)
            else:
                cands.append(x * y)
    lo_v = None if unbounded_lo else min(cands) if cands else None
    hi_v = None if unbounded_hi else max(cands) if cands else None
    return lo_v, hi_v


def _sides_text(r: Expr) -> str:
    lhs, rhs = _sides(r)
    return f"{lhs} == {rhs}"


def _condition_text(p: _Pending, resolve) -> str:
    """A residual constraint, in the canonical symbols, as a guard condition."""
    c, r = p.constraint, p.expr
    if c.kind == "eq":
        return _sides_text(r)
    if c.kind == "ge":
        pos = Expr({m: v for m, v in r.terms.items() if v > 0 and m})
        neg = Expr({m: -v for m, v in r.terms.items() if v < 0 and m})
        k = r.constant
        if not pos.terms:  # k - neg >= 0
            return f"{neg.text()} <= {k}"
        if k > 0:
            pos = pos.plus(Expr.const(k))
        elif k < 0:
            neg = neg.plus(Expr.const(-k))
        return f"{pos.text()} >= {neg.text()}"
    m = Expr.const(p.modulus) if p.modulus is not None else resolve(c.modulus)[0]
    mt = m.text() if is_simple(m) else f"({m.text()})"
    rt = r.text() if is_simple(r) else f"({r.text()})"
    return f"{rt} % {mt} == 0"


def _eval_condition(text: str, env: Mapping[str, int]) -> bool:
    """Whether a condition the solver wrote (symexpr's condition grammar) holds for these values."""
    return bool(_compiled_condition(text)(env))


@functools.lru_cache(maxsize=4096)
def _compiled_condition(text: str) -> Callable[[Mapping[str, int]], Any]:
    return symexpr.evaluator(symexpr.parse_condition(text))


__all__ = ["Expr", "ShapeConstraintSet", "Solution", "Constraint", "Condition", "Contradiction", "Bounds",
           "SolverError", "parse", "floordiv", "window_expr", "atom_parts"]
