"""The symbolic algebra of dims, in one place: unknown dims, the polynomial `Expr`, and sympy dims.

Three kinds of dim value meet in sdc, and this module owns the arithmetic of all three (text goes
through the one grammar of sdc/dialect/symexpr.py, which this module builds on):

- `DYN`, a dim unknown at compile time: it absorbs arithmetic, so a shape rule reads like the
  formula it implements (`(size + pad - k) // stride + 1` is DYN when size is);
- `Expr`, an integer polynomial over symbol names and floor-division atoms (`(H + 1)//2`), with
  `+ - * // %` that return a plain int whenever the result is constant. The shape solver
  (sdc/transforms/shape_solver.py) works on these: at ten thousand ops a sympy substitution per
  constraint is seconds, this is milliseconds. `parse` / `from_tree` read dim text into an Expr,
  `Expr.text` prints it back in the grammar;
- sympy expressions, what the frontends compute with while importing (symbolic shape vectors,
  torch.export's sizes). The frontends build and test them only through the functions at the end
  of this module (`size_symbol`, `sym_int`, `floor_div`, `maximum`, ...), `sympy_text` prints them
  in the grammar and `Expr.from_sympy` / `Expr.to_sympy` convert between the two.

No other module of sdc imports sympy (test/py/test_symbolic.py checks it), and this one imports it
only inside the functions that need it: the runtime uses DYN and the grammar without loading sympy.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Union

from sdc.dialect import symexpr
from sdc.dialect.symexpr import SymExprError

ATOM = "\u230a"  # prefix of floor-division atom names: "⌊<num>//<den>"

Mono = tuple  # a sorted tuple of factor names (symbols and atoms); () is the constant term


class SolverError(ValueError):
    """A value that cannot be read as a dim expression. Named for the shape solver, whose error it was
    before the algebra moved here; `shape_solver.SolverError` is this class."""


# ================================================================ unknown dims


class _Dynamic:
    """A dim unknown at compile time. Absorbs arithmetic."""

    _instance: "_Dynamic | None" = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "?"

    def _absorb(self, other):
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _absorb
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _absorb

    def __neg__(self):
        return self

    def __reduce__(self):
        return (_Dynamic, ())


DYN = _Dynamic()
Dim = Union[int, _Dynamic]


def is_static(d) -> bool:
    return isinstance(d, int)


# ================================================================ expressions


def _accumulate(terms: dict, mono: tuple, c: int) -> None:
    """Add `c` to the coefficient of `mono`, dropping the term when it cancels."""
    v = terms.get(mono, 0) + c
    if v:
        terms[mono] = v
    else:
        terms.pop(mono, None)


class Expr:
    """An integer polynomial over symbols and floor atoms: `{monomial: coefficient}`.

    Immutable. Arithmetic with ints and other Exprs gives an Expr, or an int when the result
    is constant. `floor(a / b)` of an Expr is an atom (a factor name starting with ATOM),
    normalized so that equal floors are equal atoms: `(H - 1)//2 + 1` is `(H + 1)//2`.
    """

    __slots__ = ("terms", "_hash", "_symbols", "_text")

    def __init__(self, terms: dict):
        self.terms = terms
        self._hash = None
        self._symbols = None
        self._text = None

    # ------------------------------------------------------------ construction

    @staticmethod
    def symbol(name: str) -> "Expr":
        return Expr({(name,): 1})

    @staticmethod
    def const(value: int) -> "Expr":
        return Expr({(): int(value)} if value else {})

    @staticmethod
    def of(value) -> "Expr":
        """An Expr (possibly constant) from an int, a symbol name or dim text, an Expr or a sympy expression."""
        if isinstance(value, Expr):
            return value
        if isinstance(value, bool):
            raise SolverError(f"{value!r} is not a dim")
        if isinstance(value, int):
            return Expr.const(value)
        if isinstance(value, str):
            return parse(value)
        if hasattr(value, "free_symbols") and hasattr(value, "func"):
            return Expr.from_sympy(value)
        if type(value).__name__ == "int64" or hasattr(value, "__index__"):
            return Expr.const(int(value))
        raise SolverError(f"{value!r} is not a dim expression")

    # ------------------------------------------------------------ inspection

    @property
    def is_const(self) -> bool:
        return not self.terms or (len(self.terms) == 1 and () in self.terms)

    @property
    def constant(self) -> int:
        return self.terms.get((), 0)

    def value(self):
        """The plain value: an int when constant, else this Expr."""
        return self.constant if self.is_const else self

    def symbols(self) -> frozenset:
        """Every symbol name, including those inside atoms."""
        if self._symbols is None:
            out = set()
            for mono in self.terms:
                for f in mono:
                    if f[0] == ATOM:
                        num, den = _ATOMS[f]
                        out |= num.symbols() | den.symbols()
                    else:
                        out.add(f)
            self._symbols = frozenset(out)
        return self._symbols

    def factors(self) -> set:
        """The top-level factor names: symbols and atoms."""
        return {f for mono in self.terms for f in mono}

    def atoms(self) -> set:
        return {f for f in self.factors() if f[0] == ATOM}

    def depth(self) -> int:
        """How deeply floors nest in this expression (0: none). Callers bound it: expressions are
        trees, so a long chain of ops that each take a floor of the last would grow without end."""
        return max((_DEPTH[f] for mono in self.terms for f in mono if f[0] == ATOM), default=0)

    def linear_coeff(self, name: str) -> int | None:
        """The coefficient of `name` if it occurs only as the monomial (name,) — not in products or atoms."""
        coeff = None
        for mono, c in self.terms.items():
            if mono == (name,):
                coeff = c
            elif name in mono:
                return None
            else:
                for f in mono:
                    if f[0] == ATOM and name in _ATOMS[f][0].symbols() | _ATOMS[f][1].symbols():
                        return None
        return coeff

    # ------------------------------------------------------------ arithmetic (Expr out)

    def plus(self, other: "Expr", scale: int = 1) -> "Expr":
        out = dict(self.terms)
        for mono, c in other.terms.items():
            _accumulate(out, mono, scale * c)
        return Expr(out)

    def scaled(self, k: int) -> "Expr":
        if k == 0:
            return Expr({})
        return Expr({m: c * k for m, c in self.terms.items()})

    def times(self, other: "Expr") -> "Expr":
        if other.is_const:
            return self.scaled(other.constant)
        if self.is_const:
            return other.scaled(self.constant)
        out: dict = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in other.terms.items():
                _accumulate(out, tuple(sorted(m1 + m2)) if m1 and m2 else (m1 or m2), c1 * c2)
        return Expr(out)

    def floordiv(self, other: "Expr") -> "Expr":
        return floordiv(self, other)

    def mod(self, other: "Expr") -> "Expr":
        return self.plus(other.times(floordiv(self, other)), -1)

    # ------------------------------------------------------------ operators (int out when constant)

    def __add__(self, other):
        return self.plus(_operand(other)).value()

    __radd__ = __add__

    def __sub__(self, other):
        return self.plus(_operand(other), -1).value()

    def __rsub__(self, other):
        return _operand(other).plus(self, -1).value()

    def __mul__(self, other):
        return self.times(_operand(other)).value()

    __rmul__ = __mul__

    def __neg__(self):
        return self.scaled(-1).value()

    def __floordiv__(self, other):
        return floordiv(self, _operand(other)).value()

    def __rfloordiv__(self, other):
        return floordiv(_operand(other), self).value()

    def __mod__(self, other):
        return self.mod(_operand(other)).value()

    def __rmod__(self, other):
        return _operand(other).mod(self).value()

    def __eq__(self, other):
        if isinstance(other, Expr):
            return self.terms == other.terms
        if isinstance(other, int) and not isinstance(other, bool):
            return self.is_const and self.constant == other
        return NotImplemented

    def __hash__(self):
        if self._hash is None:
            self._hash = hash(frozenset(self.terms.items()))
        return self._hash

    def __lt__(self, other):
        raise TypeError(f"cannot order the symbolic dim {self} at compile time")

    __le__ = __gt__ = __ge__ = __lt__

    def __bool__(self):
        return bool(self.terms)

    def __repr__(self) -> str:
        return self.text()

    __str__ = __repr__

    # ------------------------------------------------------------ substitution and evaluation

    def subst(self, mapping: Mapping[str, "Expr"]) -> "Expr":
        """Replace symbols by Exprs (inside atoms too, re-normalizing them)."""
        if not mapping or not (self.symbols() & mapping.keys()):
            return self
        out = Expr({})
        for mono, c in self.terms.items():
            prod = Expr.const(c)
            for f in mono:
                if f in mapping:
                    prod = prod.times(mapping[f])
                elif f[0] == ATOM:
                    num, den = _ATOMS[f]
                    prod = prod.times(floordiv(num.subst(mapping), den.subst(mapping)))
                else:
                    prod = prod.times(Expr({(f,): 1}))
            out = out.plus(prod)
        return out

    def evaluate(self, env: Mapping[str, int]) -> int:
        """The value for integer values of the symbols (KeyError for a missing one)."""
        total = 0
        for mono, c in self.terms.items():
            v = c
            for f in mono:
                if f[0] == ATOM:
                    num, den = _ATOMS[f]
                    v *= num.evaluate(env) // den.evaluate(env)
                else:
                    v *= env[f]
            total += v
        return total

    # ------------------------------------------------------------ text

    def text(self) -> str:
        """In the dim-expression grammar of sdc/dialect/symexpr.py: `M + N`, `(H + 1)//2`, `2*B*S - 1`."""
        if self._text is None:
            self._text = self._render()
        return self._text

    def _render(self) -> str:
        if not self.terms:
            return "0"
        folded = self._floor_plus_const()
        if folded is not None:
            return folded
        parts: list[tuple[int, str]] = []
        for mono in sorted(self.terms, key=_mono_order):
            c = self.terms[mono]
            if not mono:
                parts.append((c, str(abs(c))))
                continue
            # -(a)//b would parse as (-a)//b: a leading negated floor keeps its parentheses
            wrap = len(mono) > 1 or abs(c) != 1 or (c < 0 and not parts)
            body = "*".join(_factor_text(f, wrap) for f in mono)
            parts.append((c, body if abs(c) == 1 else f"{abs(c)}*{body}"))
        first_c, first = parts[0]
        out = ("-" + first) if first_c < 0 else first
        for c, body in parts[1:]:
            out += (" - " if c < 0 else " + ") + body
        return out

    def _floor_plus_const(self) -> str | None:
        """`(x + 2)//3 - 1` reads better as `(x - 1)//3`: one floor plus a constant, printed as one floor."""
        if len(self.terms) != 2 or () not in self.terms:
            return None
        (mono, c), = [(m, v) for m, v in self.terms.items() if m]
        if c != 1 or len(mono) != 1 or mono[0][0] != ATOM:
            return None
        num, den = _ATOMS[mono[0]]
        if not den.is_const:
            return None
        num = num.plus(Expr.const(self.constant * den.constant))
        return f"{num.text() if is_simple(num) else '(' + num.text() + ')'}//{den.constant}"

    # ------------------------------------------------------------ sympy

    def to_sympy(self, symbols: Mapping[str, Any] | None = None):
        """As a sympy expression; symbols are `integer=True` sympy Symbols unless `symbols` maps them."""
        import sympy

        terms = []
        for mono, c in self.terms.items():
            factors = [sympy.Integer(c)]
            for f in mono:
                if f[0] == ATOM:
                    num, den = _ATOMS[f]
                    factors.append(sympy.floor(num.to_sympy(symbols) / den.to_sympy(symbols)))
                else:
                    factors.append(symbols[f] if symbols and f in symbols else sympy.Symbol(f, integer=True))
            terms.append(sympy.Mul(*factors))
        return sympy.Add(*terms)

    @staticmethod
    def from_sympy(e) -> "Expr":
        import sympy

        if isinstance(e, (int,)) or e.is_Integer:
            return Expr.const(int(e))
        if e.is_Symbol:
            return Expr.symbol(e.name)
        if isinstance(e, sympy.Add):
            out = Expr({})
            for a in e.args:
                out = out.plus(Expr.from_sympy(a))
            return out
        if isinstance(e, sympy.Mul):
            num, den = sympy.fraction(e)
            if den != 1:
                return floordiv(Expr.from_sympy(num), Expr.from_sympy(den))
            out = Expr.const(1)
            for a in e.args:
                out = out.times(Expr.from_sympy(a))
            return out
        if isinstance(e, sympy.Pow) and e.exp.is_Integer and int(e.exp) >= 0:
            out = Expr.const(1)
            base = Expr.from_sympy(e.base)
            for _ in range(int(e.exp)):
                out = out.times(base)
            return out
        if isinstance(e, sympy.floor):
            num, den = sympy.fraction(sympy.together(e.args[0]))
            return floordiv(Expr.from_sympy(num), Expr.from_sympy(den))
        if isinstance(e, sympy.ceiling):
            num, den = sympy.fraction(sympy.together(e.args[0]))
            return floordiv(Expr.from_sympy(num).scaled(-1), Expr.from_sympy(den)).scaled(-1)
        if isinstance(e, sympy.Mod):
            return Expr.from_sympy(e.args[0]).mod(Expr.from_sympy(e.args[1]))
        raise SolverError(f"cannot read the sympy expression {e} as a dim")


def _operand(x) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, int) and not isinstance(x, bool):
        return Expr.const(x)
    return Expr.of(x)


def _mono_order(mono: Mono):
    return (not mono, -len(mono), mono)


def _factor_text(name: str, in_product: bool) -> str:
    if name[0] != ATOM:
        return name
    num, den = _ATOMS[name]
    n = num.text()
    d = den.text()
    n = n if is_simple(num) else f"({n})"
    d = d if is_simple(den) else f"({d})"
    text = f"{n}//{d}"
    return f"({text})" if in_product else text


def is_simple(e: Expr) -> bool:
    if e.is_const:
        return e.constant >= 0
    return len(e.terms) == 1 and all(len(m) == 1 and m[0][0] != ATOM for m in e.terms) and \
        next(iter(e.terms.values())) == 1


# ---------------------------------------------------------------- floor atoms

_ATOMS: dict[str, tuple[Expr, Expr]] = {}
_DEPTH: dict[str, int] = {}  # how deeply an atom nests floors (1: none inside)


def _atom(num: Expr, den: Expr) -> Expr:
    name = f"{ATOM}{num.text()}//{den.text()}"
    if name not in _ATOMS:
        _ATOMS[name] = (num, den)
        _DEPTH[name] = 1 + max(num.depth(), den.depth())
    return Expr({(name,): 1})


def atom_parts(name: str) -> tuple[Expr, Expr]:
    """(numerator, denominator) of a floor atom."""
    return _ATOMS[name]


def floordiv(num: Expr, den: Expr) -> Expr:
    """floor(num / den), normalized. Division by a non-constant keeps an opaque atom unless exact."""
    if den.is_const:
        d = den.constant
        if d == 0:
            raise SolverError(f"division of {num.text()} by zero")
        if d < 0:
            return floordiv(num.scaled(-1), Expr.const(-d))
        return _floordiv_int(num, d)
    quotient = exact_monomial_division(num, den)
    if quotient is not None:
        return quotient
    return _atom(num, den)


def _floordiv_int(num: Expr, d: int) -> Expr:
    if d == 1:
        return num
    whole: dict = {}
    rest: dict = {}
    for mono, c in num.terms.items():
        q, r = divmod(c, d)
        if q:
            whole[mono] = q
        if r:
            rest[mono] = r
    r0 = rest.pop((), 0)
    if not rest:  # floor(d*P + r0 / d) with 0 <= r0 < d is P
        return Expr(whole)
    g = d
    for c in rest.values():
        g = math.gcd(g, c)
    if g > 1:  # floor((g*X + r0)/(g*k)) == floor((X + r0//g)/k)
        rest = {m: c // g for m, c in rest.items()}
        r0 //= g
        d //= g
    if d == 1:
        return Expr(whole).plus(Expr(rest)).plus(Expr.const(r0))
    if len(rest) == 1:
        (mono, c), = rest.items()
        if c == 1 and len(mono) == 1 and mono[0][0] == ATOM:  # floor((floor(n/a) + r0)/d) == floor((n + r0*a)/(a*d))
            inner_num, inner_den = _ATOMS[mono[0]]
            if inner_den.is_const:
                a = inner_den.constant
                return Expr(whole).plus(_floordiv_int(inner_num.plus(Expr.const(r0 * a)), a * d))
    inner = Expr(rest).plus(Expr.const(r0))
    return Expr(whole).plus(_atom(inner, Expr.const(d)))


def exact_monomial_division(num: Expr, den: Expr) -> Expr | None:
    """num / den when den is c*monomial dividing every term of num exactly (B*S*H / B == S*H)."""
    if len(den.terms) != 1:
        return None
    (dmono, dc), = den.terms.items()
    out = {}
    for mono, c in num.terms.items():
        if c % dc:
            return None
        rest = list(mono)
        for f in dmono:
            if f not in rest:
                return None
            rest.remove(f)
        out[tuple(rest)] = c // dc
    return Expr(out)


# ---------------------------------------------------------------- parsing text


def parse(text: str, symbol: Callable[[str], Expr] | None = None) -> Expr:
    """A dim expression (`B*S`, `(H + 1)//2`, `N - 1`) as an Expr; names become symbols.

    The text is read by the one grammar of sdc/dialect/symexpr.py; its tree is folded into an Expr here.
    """
    try:
        tree = symexpr.parse(text.strip())
    except SymExprError as e:
        raise SolverError(str(e)) from None
    return from_tree(tree, symbol or Expr.symbol)


def from_tree(tree: symexpr.Node, symbol: Callable[[str], Expr] = Expr.symbol) -> Expr:
    """The Expr of a dim-expression tree (symexpr.parse); `symbol` makes each name's Expr."""

    def build(node, kids: list[Expr]) -> Expr:
        if isinstance(node, symexpr.Int):
            return Expr.const(node.value)
        if isinstance(node, symexpr.Sym):
            return symbol(node.name)
        if isinstance(node, symexpr.Neg):
            return kids[0].scaled(-1)
        if isinstance(node, symexpr.BinOp):
            a, b = kids
            if node.op == "+":
                return a.plus(b)
            if node.op == "-":
                return a.plus(b, -1)
            if node.op == "*":
                return a.times(b)
            if node.op == "//":
                return floordiv(a, b)
            return a.mod(b)
        raise SolverError(f"'{symexpr.to_text(tree)}' is not a dim expression (allowed: {symexpr.ALLOWED})")

    return symexpr.fold(tree, build)


# ================================================================ text of any dim


def to_text(expr) -> str:
    """Any dim in the grammar of sdc/dialect/symexpr.py: an int, a grammar tree, an `Expr`, or an
    integer-valued sympy expression (what the frontends build); SymExprError when a sympy
    expression has no form in the grammar."""
    if isinstance(expr, Expr):
        return expr.text()
    if isinstance(expr, int) or isinstance(expr, symexpr.NODE_TYPES):
        return symexpr.to_text(expr)
    return sympy_text(expr)


def sympy_text(expr) -> str:
    """An integer-valued sympy expression (or an int) in the grammar: `(H + 1)//2 + B*H`."""
    if isinstance(expr, int):
        return str(expr)
    import sympy

    if expr.is_Integer:
        return str(int(expr))
    if expr.is_Symbol:
        return expr.name
    if isinstance(expr, sympy.Add):
        terms = [sympy_text(a) for a in sympy.Add.make_args(expr)]
        out = terms[0]
        for t in terms[1:]:
            out += f" - {t[1:]}" if t.startswith("-") else f" + {t}"
        return out
    if isinstance(expr, sympy.Mul):
        coeff, rest = expr.as_coeff_Mul()
        if coeff == -1:
            return "-" + _sympy_operand(rest)
        return "*".join(_sympy_operand(a) for a in sympy.Mul.make_args(expr))
    if isinstance(expr, sympy.floor):
        num, den = sympy.fraction(sympy.together(expr.args[0]))
        return f"{_sympy_operand(num)}//{_sympy_operand(den)}"
    if isinstance(expr, sympy.Mod):
        return f"{_sympy_operand(expr.args[0])} % {_sympy_operand(expr.args[1])}"
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
        return "*".join([_sympy_operand(expr.base)] * int(expr.exp))
    raise SymExprError(f"cannot express {expr} as a dim expression")


def _sympy_operand(expr) -> str:
    text = sympy_text(expr)
    return text if text.replace("_", "").isalnum() else f"({text})"


# ================================================================ sympy dims (the frontends')
#
# While importing, the frontends compute shapes over sympy expressions (a Shape -> Gather ->
# Concat -> Reshape chain evaluated at compile time, torch.export's size expressions). They build
# and test them through these functions only, so sympy stays an engine behind this module. Each
# function accepts ints and sympy expressions alike; results are sympy expressions unless
# `sym_int` normalized them.


def size_symbol(name: str):
    """The sympy symbol of the dim `name`: an integer >= 1."""
    import sympy

    return sympy.Symbol(name, integer=True, positive=True)


def is_symbolic(value) -> bool:
    """True for a sympy expression (a symbolic dim, or an integer torch recorded as one)."""
    import sympy

    return isinstance(value, sympy.Basic)


def is_integer_value(value) -> bool:
    """An int, or a sympy integer (not an infinity, not an expression)."""
    if isinstance(value, int):
        return True
    import sympy

    return isinstance(value, sympy.Integer)


def sym_int(d):
    """Normalize a dim: a Python int for numbers (numpy ones too), a simplified sympy expression
    for symbolic ones; anything else (DYN) as it is."""
    import numpy as np

    if isinstance(d, (int, np.integer)):
        return int(d)
    if is_symbolic(d):
        import sympy

        d = sympy.simplify(d) if not d.is_Atom else d
        if d.is_Integer:
            return int(d)
        return d
    return d


def as_sympy(value):
    """An int (or a sympy expression) as a sympy expression."""
    import sympy

    return sympy.sympify(value)


def integer(value: int):
    """The sympy integer `value`."""
    import sympy

    return sympy.Integer(value)


def simplify(value):
    """sympy's canonical simplification of a dim (an int comes back as a sympy integer)."""
    import sympy

    return sympy.simplify(value)


def difference(a, b):
    """a - b, simplified (its sign tells whether `b <= a` is proven, refuted or open)."""
    return simplify(as_sympy(a) - as_sympy(b))


def equal(a, b) -> bool:
    """True when sympy proves a == b (ints compare as ints)."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return bool(simplify(a - b) == 0)


def product(dims):
    """The product of `dims` as a sympy expression, not normalized (`sym_int` it); DYN absorbs it."""
    total = integer(1)
    for d in dims:
        total *= d
    return total


def add(*terms):
    """sympy's sum of `terms`."""
    import sympy

    return sympy.Add(*terms)


def mul(*factors):
    """sympy's product of `factors`."""
    import sympy

    return sympy.Mul(*factors)


def floor_div(a, b):
    """floor(a / b) over dims."""
    import sympy

    return sympy.floor(sympy.sympify(a) / b)


def ceiling_div(a, b):
    """ceil(a / b) over dims."""
    import sympy

    return sympy.ceiling(sympy.sympify(a) / b)


def mod(a, b):
    """a mod b over dims (sympy's Mod: the sign of b, as Python's %)."""
    import sympy

    return sympy.Mod(a, b)


def maximum(a, b):
    import sympy

    return sympy.Max(a, b)


def minimum(a, b):
    import sympy

    return sympy.Min(a, b)


def is_maximum(value) -> bool:
    """True when `value` is a max that sympy could not resolve."""
    import sympy

    return isinstance(value, sympy.Max)


def polynomial_quotient(a, b):
    """a / b (normalized by `sym_int`) when it is an int, or a polynomial of symbols holding no number at
    all (`H*W`; not `2*H` nor `H + 1`: sympy's integers are Rationals too, and this test keeps the
    frontends' conservative reading); None else."""
    import sympy

    quotient = sym_int(sympy.simplify(a / b))
    if isinstance(quotient, int) or quotient.is_polynomial() and not quotient.has(sympy.Rational):
        return quotient
    return None


def integral_quotient(total, known):
    """total / known, simplified, when sympy finds it an integer (no half-integer left), else None."""
    import sympy

    inferred = sympy.simplify(total / known)
    if not (inferred.is_Integer or (inferred.is_integer and not inferred.has(sympy.Rational(1, 2)))):
        return None
    return inferred
