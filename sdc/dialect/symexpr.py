"""The one grammar of symbolic dims, `"B"`, `"B*S"`, `"(H + 1)//2"`, and of the guards over them.

Every reader of dim text goes through `parse` (the verifier and the interpreter evaluating a
`shape` entry, the shape solver reading `sdc.dims`, the sharding cost model) and every reader of a
guard condition through `parse_condition` (the runtime's input checks, the shape pass reading
recorded guards, the solver checking its own conditions), so the grammar and its error messages are
defined once. It imports neither MLIR nor sympy: the runtime evaluates guards with it. The
arithmetic over dims (the solver's `Expr`, the frontends' sympy dims, DYN) lives in
sdc/dialect/symbolic.py, which reads and prints through this grammar.

The grammar is a small subset of Python's, with Python's precedence and integer semantics (`//`
and `%` round toward negative infinity, as the shape rules compute them):

    condition := disjunct ("or" disjunct)*
    disjunct  := negation ("and" negation)*
    negation  := "not" negation | compare
    compare   := sum (("==" | "!=" | "<" | "<=" | ">" | ">=") sum)*      (chains, as in Python)
    sum       := product (("+" | "-") product)*
    product   := unary (("*" | "//" | "%") unary)*
    unary     := "-" unary | INT | NAME | "(" condition ")"

A dim expression is a condition without comparisons and and/or/not. The parse is a tree of a few
frozen node classes (`Int`, `Sym`, `Neg`, `BinOp`; for conditions `Compare`, `BoolOp`, `Not`);
`fold` walks it bottom-up without recursion, and the readers build what they need from it (a
closure that evaluates it, the solver's polynomial `Expr`, canonical text). The parser needs no
recursion either; trees deeper than MAX_DEPTH (and literals longer than MAX_INT_DIGITS) are refused
with a SymExprError, so no input can make a reader overflow the stack.
"""

from __future__ import annotations

import functools
import keyword
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, TypeVar, Union

MAX_DEPTH = 256  # how deeply operations (and parentheses) may nest
MAX_INT_DIGITS = 100  # a dim is an int64: a longer literal is a mistake (and int() refuses ~4300 digits)

ALLOWED = "ints, names, + - * // % and parentheses"
ALLOWED_IN_CONDITIONS = "integers, symbol names, + - * // %, comparisons and and/or/not"


class SymExprError(ValueError):
    """Text outside the grammar, or a symbol without a value.

    `reason` says what is wrong with the text's structure (empty, unbalanced parentheses, ...);
    `token` is the operator or word outside the grammar when that is the problem. Readers that word
    their own messages (the runtime's guards) build them from these.
    """

    def __init__(self, message: str, text: str = "", reason: str = "", token: str = ""):
        super().__init__(message)
        self.text = text
        self.reason = reason
        self.token = token


def quoted(text: str) -> str:
    """`'text'` for a message; a very long text is cut (a message stays one readable line)."""
    return f"'{text}'" if len(text) <= _QUOTE else f"'{text[:_QUOTE - 20]}...' ({len(text)} characters)"


_QUOTE = 200

# ---------------------------------------------------------------- the tree


@dataclass(frozen=True, slots=True)
class Int:
    value: int


@dataclass(frozen=True, slots=True)
class Sym:
    name: str


@dataclass(frozen=True, slots=True)
class Neg:
    operand: "Node"


@dataclass(frozen=True, slots=True)
class BinOp:
    op: str  # "+", "-", "*", "//", "%"
    lhs: "Node"
    rhs: "Node"


@dataclass(frozen=True, slots=True)
class Compare:
    """`terms[0] ops[0] terms[1] ops[1] terms[2] ...`: a chain, true when every link holds."""

    ops: tuple[str, ...]  # "==", "!=", "<", "<=", ">", ">="
    terms: tuple["Node", ...]


@dataclass(frozen=True, slots=True)
class BoolOp:
    op: str  # "and", "or"
    parts: tuple["Node", ...]


@dataclass(frozen=True, slots=True)
class Not:
    operand: "Node"


Node = Union[Int, Sym, Neg, BinOp, Compare, BoolOp, Not]
NODE_TYPES = (Int, Sym, Neg, BinOp, Compare, BoolOp, Not)
_CONDITION_NODES = (Compare, BoolOp, Not)

T = TypeVar("T")


def children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, (Neg, Not)):
        return (node.operand,)
    if isinstance(node, BinOp):
        return (node.lhs, node.rhs)
    if isinstance(node, Compare):
        return node.terms
    if isinstance(node, BoolOp):
        return node.parts
    return ()


def fold(node: Node, build: Callable[[Node, list], T]) -> T:
    """`build(node, [results of its children])`, bottom-up, children left to right; no recursion."""
    out: list = []
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        n, ready = stack.pop()
        kids = children(n)
        if ready or not kids:
            k = len(kids)
            args = out[len(out) - k:] if k else []
            if k:
                del out[len(out) - k:]
            out.append(build(n, args))
            continue
        stack.append((n, True))
        stack.extend((c, False) for c in reversed(kids))
    return out[0]


def free_symbols(expr: Node | str) -> tuple[str, ...]:
    """The symbol names, in order of first appearance (text is parsed as a dim expression)."""
    node = parse(expr) if isinstance(expr, str) else expr
    seen: dict[str, None] = {}
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Sym):
            seen.setdefault(n.name)
        stack.extend(reversed(children(n)))
    return tuple(seen)


def is_dim_expression(node: Node) -> bool:
    """True when the tree has no comparison or and/or/not anywhere."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, _CONDITION_NODES):
            return False
        stack.extend(children(n))
    return True


# ---------------------------------------------------------------- parsing

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(\*\*|//|==|!=|<=|>=|<<|>>|->|:=|\S))")
_ARITH = {"+": 5, "-": 5, "*": 6, "//": 6, "%": 6}
_COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")
_PREC = {"or": 1, "and": 2, "not": 3, **{c: 4 for c in _COMPARE_OPS}, **_ARITH, "neg": 7}
_ATOM = 8
_WORDS = ("and", "or", "not")


class _Syntax(Exception):
    def __init__(self, reason: str = "", token: str = ""):
        self.reason = reason
        self.token = token


@dataclass(slots=True)
class _Item:
    """An operand on the parser's stack: the tree, its depth, and whether it was parenthesized
    (`(a < b) < c` is not the chain `a < b < c`)."""

    node: Node
    depth: int
    grouped: bool = False


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) pairs: kind "int", "name", "op" (inside the grammar) or "bad" (outside it)."""
    out = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        pos = m.end()
        number, name, op = m.groups()
        if number is not None:
            if len(number) > MAX_INT_DIGITS:
                raise _Syntax(f"the integer {number[:12]}... has {len(number)} digits (at most {MAX_INT_DIGITS})")
            out.append(("int", number))
        elif name is not None:
            if name in _WORDS:
                out.append(("op", name))
            elif keyword.iskeyword(name):
                out.append(("bad", name))
            else:
                out.append(("name", name))
        elif op in _PREC or op in ("(", ")"):
            out.append(("op", op))
        else:
            out.append(("bad", op))
    return out


def _reduce(operands: list[_Item], op: str) -> None:
    """Apply operator `op` to the operand(s) on top of the stack."""
    if op in ("neg", "not"):
        item = operands.pop()
        if op == "neg" and isinstance(item.node, Int):
            node: Node = Int(-item.node.value)
            depth = item.depth
        else:
            node = Neg(item.node) if op == "neg" else Not(item.node)
            depth = item.depth + 1
        _push(operands, node, depth)
        return
    rhs, lhs = operands.pop(), operands.pop()
    depth = 1 + max(lhs.depth, rhs.depth)
    if op in _ARITH:
        node = BinOp(op, lhs.node, rhs.node)
    elif op in _COMPARE_OPS:
        if isinstance(lhs.node, Compare) and not lhs.grouped:
            node, depth = Compare(lhs.node.ops + (op,), lhs.node.terms + (rhs.node,)), max(lhs.depth, rhs.depth + 1)
        else:
            node = Compare((op,), (lhs.node, rhs.node))
    else:
        if isinstance(lhs.node, BoolOp) and lhs.node.op == op and not lhs.grouped:
            node, depth = BoolOp(op, lhs.node.parts + (rhs.node,)), max(lhs.depth, rhs.depth + 1)
        else:
            node = BoolOp(op, (lhs.node, rhs.node))
    _push(operands, node, depth)


def _push(operands: list[_Item], node: Node, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise _Syntax(f"it nests more than {MAX_DEPTH} deep")
    operands.append(_Item(node, depth))


def _parse_tree(text: str) -> Node:
    """Operator precedence parsing with explicit stacks (so deep nesting is an error, not a crash)."""
    operands: list[_Item] = []
    ops: list[str] = []  # operators and "(" waiting for their right side
    want_operand = True
    for kind, tok in _tokens(text):
        if kind == "bad":
            raise _Syntax(token=tok)
        if want_operand:
            if kind == "int":
                _push(operands, Int(int(tok)), 1)
                want_operand = False
            elif kind == "name":
                _push(operands, Sym(tok), 1)
                want_operand = False
            elif tok in ("(", "-", "not"):
                ops.append("neg" if tok == "-" else tok)
                if len(ops) > MAX_DEPTH:
                    raise _Syntax(f"it nests more than {MAX_DEPTH} deep")
            elif tok == "+":
                raise _Syntax(token="unary +")
            elif tok == ")":
                raise _Syntax("'()' holds nothing" if ops and ops[-1] == "(" else "a ')' follows an operator")
            else:
                raise _Syntax(f"'{tok}' has no operand before it")
            continue
        if kind in ("int", "name") or tok in ("(", "not"):
            raise _Syntax(f"'{tok}' follows an operand without an operator between them")
        if tok == ")":
            while ops and ops[-1] != "(":
                _reduce(operands, ops.pop())
            if not ops:
                raise _Syntax("a ')' closes no '('")
            ops.pop()
            operands[-1].grouped = True
            continue
        prec = _PREC[tok]
        # Left-associative: reduce what binds at least as tightly. Prefix operators on the stack
        # bind their operand first (`-a*b` is `(-a)*b`, `not a == b` is `not (a == b)`).
        while ops and ops[-1] != "(" and _PREC[ops[-1]] >= prec:
            _reduce(operands, ops.pop())
        ops.append(tok)
        want_operand = True
    if want_operand:
        raise _Syntax("it is empty" if not operands and not ops else "it ends without an operand")
    while ops:
        op = ops.pop()
        if op == "(":
            raise _Syntax("a '(' is never closed")
        _reduce(operands, op)
    return operands[0].node


@functools.lru_cache(maxsize=4096)
def parse(text: str) -> Node:
    """A dim expression as a tree; SymExprError for anything outside the grammar."""
    try:
        node = _parse_tree(text)
    except _Syntax as e:
        if e.token:
            raise SymExprError(f"{quoted(text)} is not a dim expression (allowed: {ALLOWED})", text, token=e.token) from None
        raise SymExprError(f"{quoted(text)} is not a dim expression: {e.reason}", text, reason=e.reason) from None
    if not is_dim_expression(node):
        raise SymExprError(f"{quoted(text)} is not a dim expression (allowed: {ALLOWED})", text,
                           token=_first_condition_op(node))
    return node


@functools.lru_cache(maxsize=1024)
def parse_condition(text: str) -> Node:
    """A guard condition (`H % 2 == 0`, `1 <= B <= 64`, `N == M and M > 1`) as a tree."""
    try:
        return _parse_tree(text)
    except _Syntax as e:
        if e.token:
            raise SymExprError(f"{quoted(text)} uses '{e.token}' (allowed: {ALLOWED_IN_CONDITIONS})", text,
                               token=e.token) from None
        raise SymExprError(f"{quoted(text)} is not a condition: {e.reason}", text, reason=e.reason) from None


def _first_condition_op(node: Node) -> str:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Compare):
            return n.ops[0]
        if isinstance(n, BoolOp):
            return n.op
        if isinstance(n, Not):
            return "not"
        stack.extend(children(n))
    return ""


# ---------------------------------------------------------------- evaluating

Evaluator = Callable[[Mapping[str, int]], Any]

_BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv, "%": operator.mod}
_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
            ">=": operator.ge}


def _compile_node(node: Node, kids: list[Evaluator]) -> Evaluator:
    if isinstance(node, Int):
        value = node.value
        return lambda env: value
    if isinstance(node, Sym):
        name = node.name
        return lambda env: env[name]
    if isinstance(node, Neg):
        (inner,) = kids
        return lambda env: -inner(env)
    if isinstance(node, Not):
        (inner,) = kids
        return lambda env: not inner(env)
    if isinstance(node, BinOp):
        fn, (lhs, rhs) = _BINARY[node.op], kids
        return lambda env: fn(lhs(env), rhs(env))
    if isinstance(node, BoolOp):
        if node.op == "and":
            return lambda env: all(p(env) for p in kids)
        return lambda env: any(p(env) for p in kids)
    links = [_COMPARE[o] for o in node.ops]

    def compare(env):
        lhs = kids[0](env)
        for fn, term in zip(links, kids[1:]):
            rhs = term(env)
            if not fn(lhs, rhs):
                return False
            lhs = rhs
        return True

    return compare


def evaluator(node: Node) -> Evaluator:
    """A function of the symbols' values (a mapping) that computes the tree, with Python's integer
    semantics; and/or short-circuit. A missing symbol raises KeyError, `//` or `%` by 0 ZeroDivisionError."""
    return fold(node, _compile_node)


@functools.lru_cache(maxsize=4096)
def _compiled(text: str) -> Evaluator:
    return evaluator(parse(text))


def evaluate(expr: Node | str, symbols: Mapping[str, int]) -> int:
    """The value of a dim expression given its symbols' values (SymExprError for an unbound one)."""
    if isinstance(expr, str) and expr in symbols:
        return int(symbols[expr])
    fn = _compiled(expr) if isinstance(expr, str) else evaluator(expr)
    try:
        return int(fn(symbols))
    except KeyError as e:
        name = e.args[0] if e.args else "?"
        raise SymExprError(f"symbolic dim '{name}' is not bound by any input", str(expr)) from None


# ---------------------------------------------------------------- printing


def _print_node(node: Node, kids: list[tuple[str, int]]) -> tuple[str, int]:
    """(text, precedence) of a node, given its children's."""
    if isinstance(node, Int):
        return str(node.value), (_PREC["neg"] if node.value < 0 else _ATOM)
    if isinstance(node, Sym):
        return node.name, _ATOM
    if isinstance(node, Neg):
        (text, prec), = kids
        return "-" + (text if prec >= _PREC["neg"] else f"({text})"), _PREC["neg"]
    if isinstance(node, Not):
        (text, prec), = kids
        return "not " + (text if prec >= _PREC["not"] else f"({text})"), _PREC["not"]
    if isinstance(node, BinOp):
        mine = _PREC[node.op]
        (lt, lp), (rt, rp) = kids
        if node.op in ("//", "%"):
            # As the solver writes them: floor and remainder operands are one name or number, else
            # parenthesized, `(H + 1)//2`, `(2*H) % 4`.
            lt = lt if lp == _ATOM else f"({lt})"
            rt = rt if rp == _ATOM else f"({rt})"
        else:
            floor_l = isinstance(node.lhs, BinOp) and node.lhs.op in ("//", "%")
            floor_r = isinstance(node.rhs, BinOp) and node.rhs.op in ("//", "%")
            lt = lt if lp >= mine and not (node.op == "*" and floor_l) else f"({lt})"
            rt = rt if rp > mine and not (node.op == "*" and floor_r) else f"({rt})"
        sep = node.op if node.op in ("*", "//") else f" {node.op} "
        return f"{lt}{sep}{rt}", mine
    if isinstance(node, Compare):
        parts = [text if prec > _PREC["=="] else f"({text})" for text, prec in kids]
        out = parts[0]
        for op, part in zip(node.ops, parts[1:]):
            out += f" {op} {part}"
        return out, _PREC["=="]
    mine = _PREC[node.op]
    return f" {node.op} ".join(text if prec > mine else f"({text})" for text, prec in kids), mine


def to_text(expr: Node | int) -> str:
    """Canonical text of a tree (`(H + 1)//2`, `2*B*S - 1`, `1 <= B <= 64`) or of an int. Other dim
    values (the solver's `Expr`, sympy expressions) print through `sdc.dialect.symbolic.to_text`."""
    if isinstance(expr, int):
        return str(expr)
    if not isinstance(expr, NODE_TYPES):
        raise TypeError(f"symexpr.to_text prints grammar trees and ints, not {type(expr).__name__} "
                        "(sdc.dialect.symbolic.to_text prints every dim value)")
    return fold(expr, _print_node)[0]
