"""Sharding as plain data: per-op factor rules, propagation with priorities, resharding plans.

No MLIR here: `sdc-sharding-propagation` (sharding_propagation.py) reads a function into a `Graph`,
calls `solve`, and writes the result back; `sdc-spmd-partition` (spmd_partition.py) asks `plan_op`
what each op needs and `reshard` which collectives get a value there. The unit tests drive these
functions directly (test/py/test_sharding.py).

Factor rules. An op's rule names the *factors* of its iteration space and, for every dim of every
operand and result, the factor it runs over (None: a broadcast dim of size 1). It reads like an
einsum: matmul is `mk,kn->mn` with `k` a reduction factor. Splitting a factor over a mesh axis
splits every dim that runs over it; a factor's kind says what that costs:

    parallel    results are split the same way (batch, rows, heads, channels)
    reduction   each device sums a part: the result is a partial sum over that axis (matmul's k,
                reduce_sum's axes, a convolution's input channels)
    masked      gather's indexed dim: each device gathers the indices that fall in its block and
                zeroes the rest, a partial sum too (an embedding split by vocabulary)
    blocked     must not be split (softmax's axis, a convolution's window, layer norm's dims)

Rules are written once per structure (`FACTOR_RULES`); each op names its rule where it is defined
(`OpDef.sharding`, a default per op kind). The fallback rule, everything blocked, gathers an op's
operands whole and makes its results whole.

Propagation. Every tensor dim holds a state: the mesh axes splitting it, a priority (lower wins)
and its origin (the annotation or default it came from). Seeds are user annotations (priority 0),
then the defaults: data parallel splits the batch dim of the inputs over `dp` (priority 10), tensor
parallel on `tp` (priority 20) splits embedding tables by vocabulary and pairs linear layers
Megatron-style. Each op merges the states of the dims on each of its factors, keeps the best
priority, and writes it to the dims of that factor that hold worse or none, forward and backward
through the graph until nothing changes. Between equal priorities that disagree, the one whose
resharding costs fewer bytes wins; two different user annotations that disagree at an op other
than `sdc.shard` are an error (`Conflict`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from sdc.dialect import symexpr
from sdc.dialect.hooks import KIND_DEFAULTS, OpKind, ShardingRule
from sdc.dialect.mesh import Mesh, Sharding, local_dim
from sdc.dialect.opdef import all_ops
from sdc.fmt import format_bytes

Dim = "int | str | None"  # a static size, a symbolic dim expression, or unknown

PARALLEL, REDUCTION, MASKED, BLOCKED = "parallel", "reduction", "masked", "blocked"

USER, DATA_PARALLEL, TENSOR_PARALLEL = 0, 10, 20
UNSET = 1 << 30

SYMBOL_HINT = 128  # the size assumed for a symbolic dim when comparing costs


class ShardingError(ValueError):
    pass


# ---------------------------------------------------------------- factor rules


@dataclass
class FactorRule:
    """An op's factors: their kinds, and the factor of each operand and result dim (None: not split).

    `linear` says which operands may hold partial sums that the result keeps: "unary" (the only
    operand), "all" (every operand, as for add), "one" (any one operand, as for mul and matmul),
    "lhs" (the first operand only, as for div and gather). `shape_attrs` are attributes that list
    one entry per result dim (a reshape's `shape`), rewritten to local sizes. `roles` tag factors
    for the defaults: "contract" / "lhs_free" / "rhs_free" of a matmul, "in_channels" /
    "out_channels" of a convolution, "groups" when a factor also divides the `groups` attribute.
    """

    kinds: list[str]
    operands: list[list[int | None]]
    results: list[list[int | None]]
    linear: str = ""
    shape_attrs: tuple[str, ...] = ()
    roles: dict[int, str] = field(default_factory=dict)

    def einsum(self) -> str:
        """The rule as text, e.g. `mk,kn->mn` with reduction factors listed after it."""
        letters = "abcdefghijklmnopqrstuvwxyz"
        order: dict[int, int] = {}
        for row in [*self.operands, *self.results]:
            for f in row:
                if f is not None and f not in order:
                    order[f] = len(order)

        def name(f):
            return "1" if f is None else letters[order[f] % 26] + ("'" * (order[f] // 26))

        text = ",".join("".join(name(f) for f in dims) for dims in self.operands)
        text += "->" + ",".join("".join(name(f) for f in dims) for dims in self.results)
        notes = [f"{name(f)}:{self.kinds[f]}" for f in sorted(order, key=order.get) if self.kinds[f] != PARALLEL]
        return text + (f" ({' '.join(notes)})" if notes else "")

    def role(self, name: str) -> int | None:
        for f, r in self.roles.items():
            if r == name:
                return f
        return None


class _Factors:
    def __init__(self):
        self.kinds: list[str] = []

    def new(self, kind: str = PARALLEL) -> int:
        self.kinds.append(kind)
        return len(self.kinds) - 1


def _is_one(d) -> bool:
    return d == 1


def _same(a, b) -> bool:
    return a is not None and b is not None and a == b


def elementwise_rule(operands: Sequence[Sequence], results: Sequence[Sequence], linear: str = "") -> FactorRule:
    """numpy broadcasting: operands align to the right of the result; a size-1 dim under a larger one
    is broadcast (no factor)."""
    fs = _Factors()
    out = results[0]
    res = [fs.new() for _ in out]
    ops = []
    for dims in operands:
        offset = len(out) - len(dims)
        row = []
        for j, d in enumerate(dims):
            i = j + offset
            row.append(None if (_is_one(d) and not _is_one(out[i])) or i < 0 else res[i])
        ops.append(row)
    return FactorRule(fs.kinds, ops, [list(res) for _ in results], linear)


def fallback_rule(operands: Sequence[Sequence], results: Sequence[Sequence]) -> FactorRule:
    fs = _Factors()
    return FactorRule(fs.kinds, [[fs.new(BLOCKED) for _ in dims] for dims in operands],
                      [[fs.new(BLOCKED) for _ in dims] for dims in results])


def _axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


def _matmul_rule(operands, results, attrs) -> FactorRule:
    lhs, rhs = operands
    out = results[0]
    fs = _Factors()
    k = fs.new(REDUCTION)
    lrow: list = [None] * len(lhs)
    rrow: list = [None] * len(rhs)
    orow: list = [None] * len(out)
    roles = {k: "contract"}
    m = n = None
    if len(lhs) >= 2:
        m = fs.new()
        roles[m] = "lhs_free"
        mi, ki = (len(lhs) - 1, len(lhs) - 2) if attrs.get("transpose_lhs") else (len(lhs) - 2, len(lhs) - 1)
        lrow[mi], lrow[ki] = m, k
    else:
        lrow[0] = k
    if len(rhs) >= 2:
        n = fs.new()
        roles[n] = "rhs_free"
        ki, ni = (len(rhs) - 1, len(rhs) - 2) if attrs.get("transpose_rhs") else (len(rhs) - 2, len(rhs) - 1)
        rrow[ki], rrow[ni] = k, n
    else:
        rrow[0] = k
    tail = [f for f in (m, n) if f is not None]
    batch_rank = len(out) - len(tail)
    for i, f in enumerate(tail):
        orow[batch_rank + i] = f
    for i in range(batch_rank):
        f = fs.new()
        orow[i] = f
        for row, dims in ((lrow, lhs), (rrow, rhs)):
            nb = len(dims) - 2
            j = i - (batch_rank - nb)
            if 0 <= j < nb and not (_is_one(dims[j]) and not _is_one(out[i])):
                row[j] = f
    return FactorRule(fs.kinds, [lrow, rrow], [orow], "one", roles=roles)


def _conv_rule(operands, results, attrs) -> FactorRule:
    x, w = operands[:2]
    out = results[0]
    fs = _Factors()
    groups = attrs.get("groups", 1)
    n = fs.new()
    xrow: list = [n] + [None] * (len(x) - 1)
    wrow: list = [None] * len(w)
    orow: list = [n] + [None] * (len(out) - 1)
    roles = {}
    if groups == 1:
        o, c = fs.new(), fs.new(REDUCTION)
        roles = {o: "out_channels", c: "in_channels"}
        xrow[1], wrow[0], wrow[1], orow[1] = c, o, c, o
    elif _same(x[1], groups) and _same(w[0], groups) and _is_one(w[1]):
        ch = fs.new()  # depthwise: one factor runs over the channels and the groups
        roles = {ch: "groups"}
        xrow[1], wrow[0], orow[1] = ch, ch, ch
    else:
        xrow[1], wrow[0], wrow[1], orow[1] = fs.new(BLOCKED), fs.new(BLOCKED), fs.new(BLOCKED), fs.new(BLOCKED)
    for i in range(2, len(x)):
        xrow[i] = fs.new(BLOCKED)
    for i in range(2, len(w)):
        wrow[i] = fs.new(BLOCKED)
    for i in range(2, len(out)):
        orow[i] = fs.new(BLOCKED)
    rows = [xrow, wrow] + [[fs.new(BLOCKED) for _ in d] for d in operands[2:]]
    return FactorRule(fs.kinds, rows, [orow], "one" if len(operands) == 2 else "", roles=roles)


def _conv_weight_grad_rule(operands, results, attrs) -> FactorRule:
    """`nce,noe->ock`: the batch is a reduction (data parallel gives partial weight gradients, which
    the gradient all-reduce sums), channels are parallel, the window dims blocked."""
    x, g = operands
    out = results[0]
    groups = attrs.get("groups", 1)
    fs = _Factors()
    n = fs.new(REDUCTION)
    xrow: list = [n] + [None] * (len(x) - 1)
    grow: list = [n] + [None] * (len(g) - 1)
    orow: list = [None] * len(out)
    roles: dict[int, str] = {}
    if groups == 1:
        c, o = fs.new(), fs.new()
        xrow[1], grow[1], orow[0], orow[1] = c, o, o, c
    elif _same(x[1], groups) and _same(g[1], groups) and _is_one(out[1]):
        ch = fs.new()  # depthwise: one factor runs over the channels and the groups
        roles = {ch: "groups"}
        xrow[1], grow[1], orow[0] = ch, ch, ch
    else:
        xrow[1], grow[1], orow[0], orow[1] = fs.new(BLOCKED), fs.new(BLOCKED), fs.new(BLOCKED), fs.new(BLOCKED)
    for row, dims in ((xrow, x), (grow, g), (orow, out)):
        for i in range(2, len(dims)):
            row[i] = fs.new(BLOCKED)
    return FactorRule(fs.kinds, [xrow, grow], [orow], "one", roles=roles)


def _conv_transpose_rule(operands, results, attrs) -> FactorRule:
    x, w = operands
    out = results[0]
    if attrs.get("groups", 1) != 1:
        return fallback_rule(operands, results)
    fs = _Factors()
    n, cin, cout = fs.new(), fs.new(REDUCTION), fs.new()
    xrow = [n, cin] + [fs.new(BLOCKED) for _ in x[2:]]
    wrow = [cin, cout] + [fs.new(BLOCKED) for _ in w[2:]]
    orow = [n, cout] + [fs.new(BLOCKED) for _ in out[2:]]
    return FactorRule(fs.kinds, [xrow, wrow], [orow], "one", roles={cout: "out_channels", cin: "in_channels"})


def _window_rule(operands, results, attrs, linear="") -> FactorRule:
    """N and C parallel, the window dims blocked (pooling); global pools give size-1 dims."""
    x = operands[0]
    out = results[0]
    fs = _Factors()
    n, c = fs.new(), fs.new()
    xrow = [n, c] + [fs.new(BLOCKED) for _ in x[2:]]
    orow = [n, c] + [None if _is_one(d) else fs.new(BLOCKED) for d in out[2:]]
    return FactorRule(fs.kinds, [xrow], [orow], linear)


def _axis_blocked_rule(operands, results, axes: Iterable[int], linear="") -> FactorRule:
    """Every dim parallel (shared between operand 0 and each result) except `axes`, which are blocked."""
    x = operands[0]
    axes = {_axis(a, len(x)) for a in axes}
    fs = _Factors()
    row = [fs.new(BLOCKED) if i in axes else fs.new() for i in range(len(x))]
    res = [list(row) if len(r) == len(x) else [fs.new(BLOCKED) for _ in r] for r in results]
    rows = [row] + [[fs.new(BLOCKED) for _ in d] for d in operands[1:]]
    return FactorRule(fs.kinds, rows, res, linear)


def _norm_rule(operands, results, attrs) -> FactorRule:
    """layer/rms norm: the dims before `axis` parallel; the normalized dims (and the scale and bias,
    which have exactly those dims) blocked."""
    x = operands[0]
    axis = _axis(attrs.get("axis", -1), len(x))
    fs = _Factors()
    row = [fs.new() if i < axis else fs.new(BLOCKED) for i in range(len(x))]
    params = [row[axis:] if len(p) == len(x) - axis else [fs.new(BLOCKED) for _ in p] for p in operands[1:]]
    return FactorRule(fs.kinds, [row] + params, [list(row)])


def _batch_norm_rule(operands, results, attrs) -> FactorRule:
    x = operands[0]
    fs = _Factors()
    row = [fs.new() for _ in x]
    params = [[row[1]] if len(p) == 1 and len(x) > 1 else [fs.new(BLOCKED) for _ in p] for p in operands[1:]]
    return FactorRule(fs.kinds, [row] + params, [list(row)])


def _reduce_rule(operands, results, attrs, summed: bool) -> FactorRule:
    """A reduction over `axes`; a sum's reduced dims may be split (each device sums its block: a
    partial sum), any other reduction's are blocked."""
    x = operands[0]
    axes = attrs.get("axes") or list(range(len(x)))
    axes = {_axis(a, len(x)) for a in axes}
    kind = REDUCTION if summed else BLOCKED
    fs = _Factors()
    row = [fs.new(kind) if i in axes else fs.new() for i in range(len(x))]
    if attrs.get("keepdims"):
        orow = [None if i in axes else row[i] for i in range(len(x))]
    else:
        orow = [row[i] for i in range(len(x)) if i not in axes]
    return FactorRule(fs.kinds, [row], [orow], "unary" if kind == REDUCTION else "")


def _arg_reduce_rule(operands, results, attrs) -> FactorRule:
    x = operands[0]
    axis = _axis(attrs.get("axis", 0), len(x))
    fs = _Factors()
    row = [fs.new(BLOCKED) if i == axis else fs.new() for i in range(len(x))]
    if attrs.get("keepdims"):
        orow = [None if i == axis else row[i] for i in range(len(x))]
    else:
        orow = [row[i] for i in range(len(x)) if i != axis]
    return FactorRule(fs.kinds, [row], [orow])


def _transpose_rule(operands, results, attrs) -> FactorRule:
    fs = _Factors()
    row = [fs.new() for _ in operands[0]]
    return FactorRule(fs.kinds, [row], [[row[p] for p in attrs["perm"]]], "unary")


def _broadcast_rule(operands, results, attrs) -> FactorRule:
    rule = elementwise_rule(operands, results, "unary")
    rule.shape_attrs = ("shape",)
    return rule


def _squeeze_rule(operands, results, attrs) -> FactorRule:
    x = operands[0]
    axes = {_axis(a, len(x)) for a in attrs.get("axes") or []}
    fs = _Factors()
    row = [None if i in axes else fs.new() for i in range(len(x))]
    return FactorRule(fs.kinds, [row], [[f for f in row if f is not None]], "unary")


def _unsqueeze_rule(operands, results, attrs) -> FactorRule:
    out = results[0]
    axes = {_axis(a, len(out)) for a in attrs.get("axes") or []}
    fs = _Factors()
    row = [fs.new() for _ in operands[0]]
    it = iter(row)
    return FactorRule(fs.kinds, [row], [[None if i in axes else next(it) for i in range(len(out))]], "unary")


def _concat_rule(operands, results, attrs) -> FactorRule:
    x = operands[0]
    axis = _axis(attrs["axis"], len(x))
    fs = _Factors()
    row = [fs.new() for _ in x]
    rows = [[fs.new(BLOCKED) if i == axis else row[i] for i in range(len(x))] for _ in operands]
    return FactorRule(fs.kinds, rows, [[fs.new(BLOCKED) if i == axis else row[i] for i in range(len(x))]], "all")


def _slice_rule(operands, results, attrs) -> FactorRule:
    x, out = operands[0], results[0]
    changed = {i for i in range(len(x)) if not _same(x[i], out[i])}
    return _axis_blocked_rule(operands, results, changed, "unary")


def _pad_rule(operands, results, attrs) -> FactorRule:
    x = operands[0]
    pads = list(attrs.get("pads") or [])
    n = len(x)
    padded = {i for i in range(n) if len(pads) == 2 * n and (pads[i] or pads[n + i])}
    linear = "unary" if attrs.get("mode", "constant") == "constant" and not attrs.get("value") else ""
    return _axis_blocked_rule(operands, results, padded, linear)


def _split_rule(operands, results, attrs) -> FactorRule:
    rule = _axis_blocked_rule(operands, results, [attrs["axis"]], "unary")
    axis = _axis(attrs["axis"], len(operands[0]))
    for r in rule.results:
        r[axis] = len(rule.kinds)
        rule.kinds.append(BLOCKED)
    return rule


def _gather_rule(operands, results, attrs) -> FactorRule:
    data, indices = operands
    axis = _axis(attrs.get("axis", 0), len(data))
    fs = _Factors()
    drow = [fs.new(MASKED) if i == axis else fs.new() for i in range(len(data))]
    irow = [fs.new() for _ in indices]
    orow = drow[:axis] + irow + drow[axis + 1:]
    return FactorRule(fs.kinds, [drow, irow], [orow], "lhs", roles={drow[axis]: "vocab"})


def _generator_rule(operands, results, attrs) -> FactorRule:
    """Ops without operands (parameter, constant, iota): every result dim free."""
    fs = _Factors()
    return FactorRule(fs.kinds, [], [[fs.new() for _ in r] for r in results])


def _identity_rule(operands, results, attrs) -> FactorRule:
    fs = _Factors()
    row = [fs.new() for _ in operands[0]]
    return FactorRule(fs.kinds, [row], [list(row)], "unary")


# ---------------------------------------------------------------- reshape


def _monomial(d) -> tuple[int, tuple[str, ...]] | None:
    """A dim as coefficient times a product of symbols, or None when it is not a plain product."""
    if isinstance(d, int):
        return (d, ())
    if not isinstance(d, str):
        return None
    try:
        tree = symexpr.parse(d)
    except symexpr.SymExprError:
        return None

    def build(node, kids: list) -> tuple[int, tuple[str, ...]] | None:
        if isinstance(node, symexpr.Int):
            return (node.value, ()) if node.value >= 0 else None
        if isinstance(node, symexpr.Sym):
            return (1, (node.name,))
        if isinstance(node, symexpr.BinOp) and node.op == "*" and None not in kids:
            (ca, sa), (cb, sb) = kids
            return ca * cb, sa + sb
        return None

    out = symexpr.fold(tree, build)
    return None if out is None else (out[0], tuple(sorted(out[1])))


def _mul(a, b):
    return (a[0] * b[0], tuple(sorted(a[1] + b[1])))


def _divides(a, b) -> bool:
    if a[0] == 0 or b[0] % a[0]:
        return False
    rest = list(b[1])
    for s in a[1]:
        if s not in rest:
            return False
        rest.remove(s)
    return True


def reshape_groups(src: Sequence, dst: Sequence) -> list[tuple[list[int], list[int]]] | None:
    """Match dims of a reshape into groups of equal products: ([src dims], [dst dims]) in order;
    size-1 dims may stand alone. None when the sizes cannot be matched."""
    a = [_monomial(d) for d in src]
    b = [_monomial(d) for d in dst]
    i = j = 0
    groups = []
    while i < len(a) or j < len(b):
        if i < len(a) and j < len(b) and src[i] is not None and src[i] == dst[j]:
            groups.append(([i], [j]))
            i, j = i + 1, j + 1
            continue
        if i < len(a) and _is_one(src[i]):
            groups.append(([i], []))
            i += 1
            continue
        if j < len(b) and _is_one(dst[j]):
            groups.append(([], [j]))
            j += 1
            continue
        if i >= len(a) or j >= len(b) or a[i] is None or b[j] is None:
            return None
        gi, gj, pi, pj = [i], [j], a[i], b[j]
        i, j = i + 1, j + 1
        while pi != pj:
            if _divides(pi, pj) and i < len(a) and a[i] is not None:
                pi = _mul(pi, a[i])
                gi.append(i)
                i += 1
            elif _divides(pj, pi) and j < len(b) and b[j] is not None:
                pj = _mul(pj, b[j])
                gj.append(j)
                j += 1
            else:
                return None
        groups.append((gi, gj))
    return groups


def _reshape_rule(operands, results, attrs) -> FactorRule:
    src, dst = operands[0], results[0]
    fs = _Factors()
    groups = reshape_groups(src, dst)
    if groups is None:
        rule = fallback_rule(operands, results)
        rule.shape_attrs = ("shape",)
        return rule
    srow: list = [None] * len(src)
    drow: list = [None] * len(dst)
    for gi, gj in groups:
        if not gi or not gj:
            for i in gi:
                srow[i] = None
            for j in gj:
                drow[j] = None
            continue
        # The major dims of a group share a factor: splitting them splits the flat block evenly.
        major = fs.new()
        srow[gi[0]] = drow[gj[0]] = major
        for i in gi[1:]:
            srow[i] = fs.new(BLOCKED)
        for j in gj[1:]:
            drow[j] = fs.new(BLOCKED)
    return FactorRule(fs.kinds, [srow], [drow], "unary", shape_attrs=("shape",))


# ---------------------------------------------------------------- the table


_FLOATS = ("f16", "bf16", "f32", "f64")


def _conversion_rule(operands, results, attrs, dtypes) -> FactorRule:
    """A cast: elementwise, and linear between float types (a partial sum stays one)."""
    linear = "unary" if len(dtypes) >= 2 and dtypes[0] in _FLOATS and dtypes[1] in _FLOATS else ""
    return elementwise_rule(operands, results, linear)


def _blocked_axis_rule(operands, results, attrs, hook: ShardingRule) -> FactorRule:
    """One blocked axis: the attribute `hook.axis` names (default -1), or the axis itself."""
    axis = attrs.get(hook.axis, -1) if isinstance(hook.axis, str) else hook.axis
    return _axis_blocked_rule(operands, results, [axis], hook.linear)


# rule name (an op's `OpDef.sharding.rule`) -> f(operands, results, attrs, hook, dtypes) -> FactorRule
FactorRuleFn = Callable[[Sequence[Sequence], Sequence[Sequence], dict, ShardingRule, Sequence[str]], FactorRule]
FACTOR_RULES: dict[str, FactorRuleFn] = {
    "elementwise": lambda o, r, a, h, d: elementwise_rule(o, r, h.linear),
    "conversion": lambda o, r, a, h, d: _conversion_rule(o, r, a, d),
    "identity": lambda o, r, a, h, d: _identity_rule(o, r, a),
    "generator": lambda o, r, a, h, d: _generator_rule(o, r, a),
    "contraction": lambda o, r, a, h, d: _matmul_rule(o, r, a),
    "convolution": lambda o, r, a, h, d: _conv_rule(o, r, a),
    "transposed_convolution": lambda o, r, a, h, d: _conv_transpose_rule(o, r, a),
    "convolution_weight_grad": lambda o, r, a, h, d: _conv_weight_grad_rule(o, r, a),
    "window": lambda o, r, a, h, d: _window_rule(o, r, a, h.linear),
    "reduction": lambda o, r, a, h, d: _reduce_rule(o, r, a, summed=h.linear == "unary"),
    "arg_reduction": lambda o, r, a, h, d: _arg_reduce_rule(o, r, a),
    "blocked_axis": lambda o, r, a, h, d: _blocked_axis_rule(o, r, a, h),
    "normalization": lambda o, r, a, h, d: _norm_rule(o, r, a),
    "batch_normalization": lambda o, r, a, h, d: _batch_norm_rule(o, r, a),
    "reshaping": lambda o, r, a, h, d: _reshape_rule(o, r, a),
    "permutation": lambda o, r, a, h, d: _transpose_rule(o, r, a),
    "broadcasting": lambda o, r, a, h, d: _broadcast_rule(o, r, a),
    "squeezing": lambda o, r, a, h, d: _squeeze_rule(o, r, a),
    "unsqueezing": lambda o, r, a, h, d: _unsqueeze_rule(o, r, a),
    "joining": lambda o, r, a, h, d: _concat_rule(o, r, a),
    "slicing": lambda o, r, a, h, d: _slice_rule(o, r, a),
    "padding": lambda o, r, a, h, d: _pad_rule(o, r, a),
    "splitting": lambda o, r, a, h, d: _split_rule(o, r, a),
    "gathering": lambda o, r, a, h, d: _gather_rule(o, r, a),
    "fallback": lambda o, r, a, h, d: fallback_rule(o, r),
}


def rule_for(name: str, family: str, attrs: dict, operands: Sequence[Sequence], results: Sequence[Sequence],
             dtypes: Sequence[str] = ()) -> FactorRule:
    """The factor rule of op `name` (short name) for operands and results of the given dims: the one
    its OpDef names (`OpDef.sharding`); an op this process does not define gets its kind's
    (`family`), else the fallback."""
    opdef = all_ops().get(name)
    if opdef is not None:
        hook = opdef.sharding
    elif OpKind.named(family) is not None:
        hook = KIND_DEFAULTS[OpKind.named(family)].sharding
    else:
        hook = ShardingRule("fallback")
    return FACTOR_RULES[hook.rule](operands, results, attrs, hook, dtypes)


# ---------------------------------------------------------------- the graph


@dataclass
class Value:
    dims: tuple
    itemsize: int = 4
    kind: str = "op"  # "input", "weight" (parameter or constant), "op", "output"
    label: str = ""
    producer: int | None = None
    users: list[int] = field(default_factory=list)


@dataclass
class Op:
    name: str
    rule: FactorRule
    operands: list[int]
    results: list[int]
    label: str = ""  # how messages name it: "'sdc.matmul' at fc1"
    loc: object = None  # where diagnostics go (the IR op); opaque here


@dataclass
class Graph:
    values: list[Value] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)

    def add_value(self, dims, itemsize=4, kind="op", label="") -> int:
        self.values.append(Value(tuple(dims), itemsize, kind, label))
        return len(self.values) - 1

    def add_op(self, name: str, rule: FactorRule, operands: Sequence[int], results: Sequence[int], label="",
               loc=None) -> int:
        index = len(self.ops)
        self.ops.append(Op(name, rule, list(operands), list(results), label or f"'sdc.{name}'", loc))
        for v in operands:
            self.values[v].users.append(index)
        for v in results:
            self.values[v].producer = index
        return index


@dataclass(frozen=True)
class DimState:
    axes: tuple[str, ...]
    priority: int
    origin: str


@dataclass
class Conflict:
    op: int
    message: str
    origins: tuple[str, str]


@dataclass
class Solution:
    shardings: list[Sharding]  # per value
    conflicts: list[Conflict]
    decisions: list[str]  # what the defaults chose, for --explain

    def __getitem__(self, v: int) -> Sharding:
        return self.shardings[v]


# ---------------------------------------------------------------- sizes and costs


def dim_size(d, hints: dict[str, int] | None = None) -> int:
    if isinstance(d, int):
        return d
    if d is None:
        return SYMBOL_HINT
    try:
        from sdc.dialect.symexpr import evaluate

        return max(1, evaluate(str(d), _Hints(hints or {})))
    except Exception:
        return SYMBOL_HINT


class _Hints(dict):
    def __contains__(self, key) -> bool:
        return True

    def __getitem__(self, key):
        return dict.get(self, key, SYMBOL_HINT)


def divisible(d, n: int) -> bool:
    """Whether a dim may be split n ways: static dims must divide; symbolic ones get a run-time guard."""
    if n == 1:
        return True
    if isinstance(d, int):
        return d % n == 0
    return d is not None


def local_bytes(dims: Sequence, itemsize: int, sharding: Sharding, mesh: Mesh, hints=None) -> float:
    n = float(itemsize)
    for i, d in enumerate(dims):
        n *= dim_size(d, hints) / (mesh.size(sharding.dims[i]) if i < sharding.rank else 1)
    return n


# ---------------------------------------------------------------- resharding


@dataclass(frozen=True)
class Step:
    """One collective of a resharding. `dim` is the gathered / sliced / scattered dim (for all_to_all
    the gathered one, `split` the newly split one)."""

    kind: str  # all_reduce, reduce_scatter, all_gather, all_slice, all_to_all
    axes: tuple[str, ...]
    dim: int | None = None
    split: int | None = None

    def apply(self, s: Sharding) -> Sharding:
        dims = [list(d) for d in s.dims]
        partial = list(s.partial)
        if self.kind == "all_reduce":
            partial = [a for a in partial if a not in self.axes]
        elif self.kind == "reduce_scatter":
            partial = [a for a in partial if a not in self.axes]
            dims[self.dim] += list(self.axes)
        elif self.kind == "all_gather":
            dims[self.dim] = dims[self.dim][:len(dims[self.dim]) - len(self.axes)]
        elif self.kind == "all_slice":
            dims[self.dim] += list(self.axes)
        elif self.kind == "all_to_all":
            dims[self.dim] = dims[self.dim][:len(dims[self.dim]) - len(self.axes)]
            dims[self.split] += list(self.axes)
        return Sharding(tuple(tuple(d) for d in dims), tuple(partial))

    def bytes_sent(self, before: float, mesh: Mesh) -> float:
        """Bytes each device sends (ring algorithms), `before` being its local bytes before the step."""
        n = mesh.size(self.axes)
        if n == 1 or self.kind == "all_slice":
            return 0.0
        if self.kind == "all_reduce":
            return 2.0 * (n - 1) / n * before
        if self.kind == "all_gather":
            return (n - 1) * before
        return (n - 1) / n * before  # reduce_scatter, all_to_all


def _mesh_order(axes: Iterable[str], mesh: Mesh) -> tuple[str, ...]:
    axes = set(axes)
    return tuple(a for a in mesh.axes if a in axes)


def reshard(src: Sharding, dst: Sharding, mesh: Mesh) -> list[Step]:
    """The collectives that turn a value sharded `src` into `dst` (same rank). Partial sums are reduced
    first (scattered straight into a newly split dim where one is wanted), then axes move between
    dims with all_to_all, then dims are sliced and gathered (slicing first where an axis is free, so
    less is gathered)."""
    if src.rank != dst.rank:
        raise ShardingError(f"cannot reshard {src} into {dst}: ranks differ")
    missing = [a for a in dst.partial if a not in src.partial]
    if missing:
        raise ShardingError(f"cannot make a partial sum over {', '.join(missing)} from {src}")
    steps: list[Step] = []
    cur = src

    def do(step: Step):
        nonlocal cur
        steps.append(step)
        cur = step.apply(cur)

    def used():
        return {a for d in cur.dims for a in d} | set(cur.partial)

    for a in [a for a in cur.partial if a not in dst.partial]:
        for d in range(cur.rank):
            have, want = cur.dims[d], dst.dims[d]
            if want[:len(have)] == have and len(want) > len(have) and want[len(have)] == a \
                    and a not in {x for dd in cur.dims for x in dd}:
                do(Step("reduce_scatter", (a,), d))
                break
    extra = [a for a in cur.partial if a not in dst.partial]
    if extra:
        do(Step("all_reduce", _mesh_order(extra, mesh)))
    moved = True
    while moved:
        moved = False
        for i in range(cur.rank):
            have, want = cur.dims[i], dst.dims[i]
            if not have or want[:len(have)] == have:
                continue
            a = have[-1]
            for j in range(cur.rank):
                if j != i and dst.dims[j] == cur.dims[j] + (a,):
                    do(Step("all_to_all", (a,), i, j))
                    moved = True
                    break
            if moved:
                break
    for j in range(cur.rank):
        have, want = cur.dims[j], dst.dims[j]
        while want[:len(have)] == have and len(want) > len(have) and want[len(have)] not in used():
            do(Step("all_slice", (want[len(have)],), j))
            have = cur.dims[j]
    for i in range(cur.rank):
        have, want = cur.dims[i], dst.dims[i]
        p = 0
        while p < min(len(have), len(want)) and have[p] == want[p]:
            p += 1
        if len(have) > p:
            do(Step("all_gather", have[p:], i))
    for j in range(cur.rank):
        have, want = cur.dims[j], dst.dims[j]
        if want[:len(have)] == have and len(want) > len(have):
            do(Step("all_slice", want[len(have):], j))
    if cur != dst:
        raise ShardingError(f"cannot reshard {src} into {dst}")
    return steps


def reshard_bytes(src: Sharding, dst: Sharding, dims: Sequence, itemsize: int, mesh: Mesh, hints=None) -> float:
    total = 0.0
    cur = src
    for step in reshard(src, dst, mesh):
        total += step.bytes_sent(local_bytes(dims, itemsize, cur, mesh, hints), mesh)
        cur = step.apply(cur)
    return total


# ---------------------------------------------------------------- what one op needs


@dataclass
class OpPlan:
    factor_axes: list[tuple[str, ...]]
    operands: list[Sharding]  # what each operand must be
    results: list[Sharding]  # what the op produces
    masked: dict[int, tuple[str, ...]] = field(default_factory=dict)  # masked factor -> its axes


def plan_op(op: Op, operand_shardings: Sequence[Sharding], result_dims: Sequence[Sequence[tuple] | None],
            graph: Graph, mesh: Mesh) -> OpPlan:
    """How `op` runs: the split of each factor, the sharding each operand must have, the sharding of
    each result as the op makes it. Parallel factors follow `result_dims` (the wanted per-dim axes of
    each result, None when free); reduction and masked factors follow the operands."""
    rule = op.rule
    nf = len(rule.kinds)
    axes: list[tuple[str, ...] | None] = [None] * nf
    used: set[str] = set()

    def fits(f: int, candidate: tuple[str, ...]) -> bool:
        if not candidate:
            return True
        if used & set(candidate):
            return False
        n = mesh.size(candidate)
        for rows, values in ((rule.operands, op.operands), (rule.results, op.results)):
            for row, v in zip(rows, values):
                for d, g in enumerate(row):
                    if g == f and not divisible(graph.values[v].dims[d], n):
                        return False
        return True

    def take(f: int, candidate: tuple[str, ...]) -> None:
        axes[f] = candidate if fits(f, candidate) else ()
        used.update(axes[f])

    for r, row in enumerate(rule.results):
        want = result_dims[r] if r < len(result_dims) else None
        for d, f in enumerate(row):
            if f is None or axes[f] is not None or rule.kinds[f] != PARALLEL:
                continue
            if want is not None:
                take(f, tuple(want[d]))
    # Parallel factors no result decides (free results) and reduction/masked factors: from operands,
    # the cheapest candidate to bring every operand to.
    for f in range(nf):
        if axes[f] is not None:
            continue
        if rule.kinds[f] == BLOCKED:
            axes[f] = ()
            continue
        candidates = []
        for row, s in zip(rule.operands, operand_shardings):
            for d, g in enumerate(row):
                if g == f and s.dims[d] and s.dims[d] not in candidates:
                    candidates.append(s.dims[d])
        best, best_cost = (), None
        for c in candidates:
            if not fits(f, c):
                continue
            cost = 0.0
            for row, s, v in zip(rule.operands, operand_shardings, op.operands):
                for d, g in enumerate(row):
                    if g == f and s.dims[d] != c:
                        value = graph.values[v]
                        cost += local_bytes(value.dims, value.itemsize, s, mesh)
            if best_cost is None or cost < best_cost:
                best, best_cost = c, cost
        axes[f] = best
        used.update(best)
    factor_axes = [a or () for a in axes]
    # Partial sums the result keeps (linear ops), from the operands that hold them.
    carried: tuple[str, ...] = ()
    carriers: list[int] = []
    partials = [tuple(a for a in s.partial if a not in used) for s in operand_shardings]
    if rule.linear == "unary" and partials:
        carried, carriers = partials[0], [0]
    elif rule.linear == "all" and partials:
        common = [a for a in partials[0] if all(a in p for p in partials[1:])]
        if common:
            carried, carriers = tuple(common), list(range(len(partials)))
    elif rule.linear in ("one", "lhs"):
        choices = [0] if rule.linear == "lhs" else range(len(partials))
        for i in choices:
            if i < len(partials) and partials[i]:
                carried, carriers = partials[i], [i]
                break
    required = []
    for i, row in enumerate(rule.operands):
        dims = tuple(factor_axes[f] if f is not None else () for f in row)
        required.append(Sharding(dims, carried if i in carriers else ()))
    made = [f for f in range(nf) if rule.kinds[f] in (REDUCTION, MASKED) and factor_axes[f]]
    partial_axes = [a for f in made for a in factor_axes[f]] + list(carried)
    partial = _mesh_order(partial_axes, mesh)
    results = [Sharding(tuple(factor_axes[f] if f is not None else () for f in row), partial)
               for row in rule.results]
    masked = {f: factor_axes[f] for f in range(nf) if rule.kinds[f] == MASKED and factor_axes[f]}
    return OpPlan(factor_axes, required, results, masked)


# ---------------------------------------------------------------- propagation


class Propagation:
    """The per-dim states of a graph's values, and the rules that move them across ops."""

    def __init__(self, graph: Graph, mesh: Mesh):
        self.graph = graph
        self.mesh = mesh
        self.state: list[list[DimState | None]] = [[None] * len(v.dims) for v in graph.values]
        self.closed: set[int] = set()  # values whose sharding a user fixed
        self.conflicts: list[Conflict] = []
        self._conflict_keys: set = set()

    # ------------------------------------------------------------ seeds

    def annotate(self, v: int, sharding: Sharding, origin: str, priority: int = USER, close: bool = True) -> None:
        self.state[v] = [DimState(tuple(a), priority, origin) for a in sharding.dims]
        if close:
            self.closed.add(v)

    def seed_dim(self, v: int, d: int, axes: tuple[str, ...], priority: int, origin: str) -> bool:
        if v in self.closed:
            return False
        cur = self.state[v][d]
        if cur is not None and cur.priority <= priority:
            return False
        if not divisible(self.graph.values[v].dims[d], self.mesh.size(axes)):
            return False
        if any(s is not None and i != d and set(s.axes) & set(axes) for i, s in enumerate(self.state[v])):
            return False
        self.state[v][d] = DimState(tuple(axes), priority, origin)
        return True

    def snapshot(self):
        return [list(s) for s in self.state], len(self.conflicts)

    def restore(self, snap) -> None:
        state, n = snap
        self.state = [list(s) for s in state]
        del self.conflicts[n:]

    # ------------------------------------------------------------ the fixpoint

    def run(self, max_sweeps: int = 64) -> None:
        ops = self.graph.ops
        dirty = set(range(len(ops)))
        for _ in range(max_sweeps):
            if not dirty:
                return
            for order in (range(len(ops)), reversed(range(len(ops)))):
                for i in order:
                    if i in dirty:
                        dirty.discard(i)
                        for v in self._propagate(i):
                            value = self.graph.values[v]
                            dirty.update(value.users)
                            if value.producer is not None:
                                dirty.add(value.producer)

    def _tensors(self, op: Op):
        rule = op.rule
        for row, v in zip(rule.operands, op.operands):
            yield row, v
        for row, v in zip(rule.results, op.results):
            yield row, v

    def _propagate(self, index: int) -> list[int]:
        op = self.graph.ops[index]
        rule = op.rule
        choices: dict[int, DimState] = {}
        for f, kind in enumerate(rule.kinds):
            if kind == BLOCKED:
                continue
            candidates: list[tuple[DimState, int, int]] = []
            for row, v in self._tensors(op):
                for d, g in enumerate(row):
                    if g == f and self.state[v][d] is not None:
                        candidates.append((self.state[v][d], v, d))
            if not candidates:
                continue
            best = min(c[0].priority for c in candidates)
            top = [c for c in candidates if c[0].priority == best]
            options = []
            for c in top:
                if c[0].axes not in [o.axes for o in options] and self._fits(op, f, c[0].axes):
                    options.append(c[0])
            if not options:
                continue
            if len(options) > 1:
                self._check_conflict(index, f, options)
                options.sort(key=lambda o: self._cost(op, f, o.axes))
            choices[f] = options[0]
        # One mesh axis splits one factor of the op: the better priority keeps it.
        taken: set[str] = set()
        for f in sorted(choices, key=lambda f: (choices[f].priority, f)):
            if set(choices[f].axes) & taken:
                clash = next(g for g in choices if g != f and set(choices[g].axes) & set(choices[f].axes))
                if choices[f].priority == USER and choices[clash].priority == USER and op.name != "shard" \
                        and choices[f].origin != choices[clash].origin:
                    self._conflict(index, f"sharding annotations split two dims of this op over mesh axis "
                                          f"'{sorted(set(choices[f].axes) & taken)[0]}'",
                                   choices[clash].origin, choices[f].origin)
                del choices[f]
                continue
            taken.update(choices[f].axes)
        changed = []
        for row, v in self._tensors(op):
            if v in self.closed:
                continue
            for d, f in enumerate(row):
                if f is None or f not in choices:
                    continue
                new = choices[f]
                cur = self.state[v][d]
                if cur is not None and cur.priority <= new.priority:
                    continue
                if any(s is not None and i != d and set(s.axes) & set(new.axes) and s.priority <= new.priority
                       for i, s in enumerate(self.state[v])):
                    continue
                for i, s in enumerate(self.state[v]):
                    if s is not None and i != d and set(s.axes) & set(new.axes):
                        self.state[v][i] = None
                self.state[v][d] = new
                changed.append(v)
        return changed

    def _fits(self, op: Op, f: int, axes: tuple[str, ...]) -> bool:
        n = self.mesh.size(axes)
        for row, v in self._tensors(op):
            for d, g in enumerate(row):
                if g == f and not divisible(self.graph.values[v].dims[d], n):
                    return False
        return True

    def _cost(self, op: Op, f: int, axes: tuple[str, ...]) -> float:
        """Bytes spent bringing every dim of factor `f` at this op to `axes` from what it holds."""
        cost = 0.0
        for row, v in self._tensors(op):
            value = self.graph.values[v]
            for d, g in enumerate(row):
                s = self.state[v][d]
                if g != f or s is None or s.axes == axes:
                    continue
                cur = Sharding(tuple(st.axes if st else () for st in self.state[v]))
                want = cur.with_dims([axes if i == d else (
                    () if set(cur.dims[i]) & set(axes) else cur.dims[i]) for i in range(len(cur.dims))])
                try:
                    cost += reshard_bytes(cur, want, value.dims, value.itemsize, self.mesh)
                except ShardingError:
                    cost += local_bytes(value.dims, value.itemsize, cur, self.mesh) * self.mesh.world_size
        return cost

    def _check_conflict(self, index: int, f: int, options: list[DimState]) -> None:
        users = [o for o in options if o.priority == USER]
        if len(users) < 2 or self.graph.ops[index].name == "shard":
            return
        a, b = users[0], users[1]
        if a.origin == b.origin:
            return
        what = lambda o: ",".join(o.axes) or "no axis"  # noqa: E731
        self._conflict(index, f"conflicting sharding annotations meet at this op: {a.origin} splits a dim over "
                              f"{what(a)}, {b.origin} splits it over {what(b)}", a.origin, b.origin)

    def _conflict(self, index: int, message: str, first: str, second: str) -> None:
        key = (index, message)
        if key not in self._conflict_keys:
            self._conflict_keys.add(key)
            self.conflicts.append(Conflict(index, message, (first, second)))

    # ------------------------------------------------------------ results

    def dims_of(self, v: int) -> tuple[tuple[str, ...], ...]:
        return tuple(s.axes if s is not None else () for s in self.state[v])

    def axes_at(self, op: Op, f: int) -> set[str]:
        out: set[str] = set()
        for row, v in self._tensors(op):
            for d, g in enumerate(row):
                if g == f and self.state[v][d] is not None:
                    out.update(self.state[v][d].axes)
        return out


# ---------------------------------------------------------------- the defaults


def _linear_roles(op: Op, graph: Graph) -> tuple[int, int, int, int] | None:
    """(weight operand, activation operand, in-features factor, out-features factor) of a linear layer:
    a matmul with a rank-2 weight, or a convolution whose weight is a weight."""
    rule = op.rule
    if op.name == "matmul":
        lhs, rhs = (graph.values[v] for v in op.operands)
        if rhs.kind == "weight" and len(rhs.dims) == 2 and lhs.kind != "weight":
            return 1, 0, rule.role("contract"), rule.role("rhs_free")
        if lhs.kind == "weight" and len(lhs.dims) == 2 and rhs.kind != "weight":
            return 0, 1, rule.role("contract"), rule.role("lhs_free")
        return None
    fin, fout = rule.role("in_channels"), rule.role("out_channels")  # a convolution's (transposed too)
    if fin is not None and fout is not None and graph.values[op.operands[1]].kind == "weight":
        return 1, 0, fin, fout
    return None


def _activation_dims(op: Op, operand: int, f: int) -> list[int]:
    return [d for d, g in enumerate(op.rule.operands[operand]) if g == f]


def _batch_dim(value: Value) -> int | None:
    names = ("b", "n", "bs", "batch", "batch_size", "batchsize", "nbatch")
    for d, size in enumerate(value.dims):
        if isinstance(size, str) and (size.lower() in names or "batch" in size.lower()):
            return d
    return 0 if value.dims and value.dims[0] != 1 else None


def apply_defaults(prop: Propagation, dp: str | None, tp: str | None) -> list[str]:
    """Seed the expert defaults; returns what was decided, one line each."""
    graph, mesh = prop.graph, prop.mesh
    notes: list[str] = []
    if dp and mesh.size([dp]) > 1:
        for v, value in enumerate(graph.values):
            if value.kind != "input" or v in prop.closed:
                continue
            d = _batch_dim(value)
            if d is not None and prop.seed_dim(v, d, (dp,), DATA_PARALLEL, f"data parallel on {dp}"):
                notes.append(f"{value.label}: dim {d} split over {dp} (data parallel)")
        prop.run()
    if not tp or mesh.size([tp]) == 1:
        return notes
    for op in graph.ops:
        if op.name != "gather":
            continue
        data = op.operands[0]
        f = op.rule.role("vocab")
        if graph.values[data].kind != "weight" or len(graph.values[data].dims) != 2 or f is None \
                or op.rule.operands[0].index(f) != 0 or tp in prop.axes_at(op, f) or tp in _used_at(prop, op):
            continue
        if prop.seed_dim(data, 0, (tp,), TENSOR_PARALLEL, f"embedding split by vocabulary on {tp}"):
            notes.append(f"{graph.values[data].label}: rows (vocabulary) split over {tp}")
            prop.run()
    for i, op in enumerate(graph.ops):
        roles = _linear_roles(op, graph)
        if roles is None:
            continue
        w, x, fin, fout = roles
        if tp in prop.axes_at(op, fin) or tp in prop.axes_at(op, fout) or tp in _used_at(prop, op):
            continue
        weight = op.operands[w]
        wdim = op.rule.operands[w].index(fout)
        before = _row_parallel_inputs(prop, graph, tp, exclude=i)
        snap = prop.snapshot()
        if not prop.seed_dim(weight, wdim, (tp,), TENSOR_PARALLEL, f"tensor parallel on {tp}"):
            continue
        prop.run()
        after = _row_parallel_inputs(prop, graph, tp, exclude=i)
        paired = sorted(after - before)
        if paired and len(prop.conflicts) == snap[1]:
            names = ", ".join(graph.ops[j].label for j in paired)
            notes.append(f"{op.label}: column-parallel over {tp}, paired with row-parallel {names}")
        else:
            prop.restore(snap)
    return notes


def _used_at(prop: Propagation, op: Op) -> set[str]:
    out: set[str] = set()
    for f in range(len(op.rule.kinds)):
        out |= prop.axes_at(op, f)
    return out


def _row_parallel_inputs(prop: Propagation, graph: Graph, tp: str, exclude: int) -> set[int]:
    """Linear layers whose activation arrives split over `tp` along its in-features (row-parallel)."""
    out = set()
    for j, op in enumerate(graph.ops):
        if j == exclude:
            continue
        roles = _linear_roles(op, graph)
        if roles is None:
            continue
        w, x, fin, fout = roles
        v = op.operands[x]
        if any(prop.state[v][d] is not None and tp in prop.state[v][d].axes for d in _activation_dims(op, x, fin)):
            out.add(j)
    return out


def solve(graph: Graph, mesh: Mesh, annotations: dict[int, tuple[Sharding, str]] | None = None,
          defaults: bool = True, dp: str = "dp", tp: str = "tp") -> Solution:
    """Shardings for every value of `graph`: user `annotations` (value -> (sharding, origin)), then the
    defaults, spread by propagation. Each value's partial axes are those its producer leaves."""
    prop = Propagation(graph, mesh)
    for v, (sharding, origin) in (annotations or {}).items():
        prop.annotate(v, sharding, origin)
    prop.run()
    decisions = apply_defaults(prop, dp if dp in mesh.axes else None, tp if tp in mesh.axes else None) \
        if defaults else []
    shardings = finish(graph, mesh, [prop.dims_of(v) for v in range(len(graph.values))],
                       {v: s for v, (s, _) in (annotations or {}).items()})
    return Solution(shardings, prop.conflicts, decisions)


def finish(graph: Graph, mesh: Mesh, dims: list[tuple], fixed: dict[int, Sharding] | None = None) -> list[Sharding]:
    """Complete per-value dims with the partial axes each producer leaves (walking the ops in order)."""
    fixed = fixed or {}
    out = [Sharding(tuple(d)) for d in dims]
    for v, s in fixed.items():
        out[v] = s
    for op in graph.ops:
        plan = plan_op(op, [out[v] for v in op.operands], [out[v].dims for v in op.results], graph, mesh)
        for v, made in zip(op.results, plan.results):
            if v not in fixed:
                out[v] = Sharding(out[v].dims, tuple(a for a in made.partial if a not in
                                                    {x for d in out[v].dims for x in d}))
    return out


def local_dims(dims: Sequence, sharding: Sharding, mesh: Mesh) -> list:
    return [local_dim(d, mesh.size(sharding.dims[i])) for i, d in enumerate(dims)]


def describe_bytes(dims: Sequence, itemsize: int) -> str:
    """A tensor's byte count as text: a number when static, else `4*B*256`-like."""
    coef = itemsize
    syms = []
    for d in dims:
        if isinstance(d, int):
            coef *= d
        elif d is None:
            syms.append("?")
        else:
            text = str(d)
            syms.append(text if re.match(r"^[A-Za-z0-9_]+$", text) else f"({text})")
    if not syms:
        return format_bytes(coef)
    return "*".join([str(coef)] + syms) + " B"


