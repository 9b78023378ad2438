"""The layout cost model and its whole-function solver, on plain Python data (no MLIR).

`sdc.transforms.layout_constraints` reads a function into a `LayoutProblem`, calls `solve`, and
writes the `LayoutSolution` back into the IR. Everything here is unit-tested on its own.

Layouts
    A layout is a permutation: `perm[i]` is the logical dim stored at physical position i, so NCHW
    data stored NHWC is `(0, 2, 3, 1)`. Types stay logical; a layout only says how the bytes lie.
    A tensor of rank >= 2 has two candidate layouts: row-major (the identity) and one other. For a
    tensor an op produces, the other is what that op writes when it runs in its alternative layout
    kind (channels-last `(0, 2, .., r-1, 1)` for rank >= 3, transposed `(1, 0)` for rank 2); for a
    weight it is the layout its consumers want, so the weight is stored that way; a requested
    (pinned) layout takes its place. Two layouts of one tensor are *equivalent* when they order the
    dims that are not statically 1 the same way: the bytes lie in the same order (a [1, 2048, 1, 1]
    tensor is the same memory NCHW and NHWC), and a cast between them moves nothing.

Rules (rule_for, layout_table)
    Per target, per op, a `Rule`: how the op's operands and results follow the layout it runs in
    (its `relation`, from the op's `OpDef.layout` hook: a default per op kind, sdc/dialect/hooks.py),
    and the relative cost of each layout kind it accepts. The rules are target-neutral except where
    the target registry (`sdc.target`) says an op kind or op prefers a layout
    (`Target.preferred_layouts`): a new target is a registry entry, not a table.
      uniform      operands of the op's rank follow its layout; broadcast operands of lower rank follow
                   it projected onto their (trailing) dims; results have its layout
      reduce       the operand follows the op's layout; a result without the reduced axes has that
                   layout with them left out (the axes are remapped, not the data)
      contraction  each operand may be row-major or have its last two dims swapped (the kernel reads
                   either); the result is row-major
      rigid        everything row-major (reshape, gather, collectives, ...)

Costs (bytes of memory traffic)
    A layout_cast costs twice the bytes of its tensor (it reads and writes them). An op running in
    a layout kind costs `relative cost x its traffic` (the bytes of its operands and results). A
    dynamic dim counts as DYNAMIC_DIM. One cast serves every consumer that wants the same layout.

Solver
    One binary variable per op that accepts two layout kinds (its results share it) and per weight
    (row-major, or the layout its consumers want); arguments and rigid ops are fixed. The energy is
    a sum of unary terms (op preferences, plus one byte toward row-major to break ties), terms that
    charge a cast when a consumer reads a tensor in a layout it does not accept, and shared terms
    that charge one cast for a group of such consumers. Every term is submodular, so an s-t minimum
    cut gives the exact minimum over the whole function (Kolmogorov & Zabih, "What energy functions
    can be minimized via graph cuts?", 2004). A term that is not submodular (no shipped table makes
    one) is approximated, and the result polished by single flips; `solution.exact` says which.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Sequence

from sdc.dialect.hooks import DYNAMIC_DIM  # noqa: F401  (re-exported: the passes' byte estimates)
from sdc.dialect.hooks import KIND_DEFAULTS, OpKind
from sdc.dialect.hooks import LayoutRule as OpLayoutRule
from sdc.dialect.opdef import all_ops
from sdc.target import get_target

Perm = tuple[int, ...]

ROW_MAJOR = "row_major"
CHANNELS_LAST = "channels_last"
KINDS = (ROW_MAJOR, CHANNELS_LAST)

# DYNAMIC_DIM (from sdc/dialect/hooks.py): what a dim unknown at compile time counts as in byte estimates

# ---------------------------------------------------------------- permutations


def identity(rank: int) -> Perm:
    return tuple(range(rank))


def alternative(rank: int) -> Perm | None:
    """The non-row-major candidate of a rank: channels-last for rank >= 3, transposed for rank 2."""
    if rank >= 3:
        return (0, *range(2, rank), 1)
    if rank == 2:
        return (1, 0)
    return None


def kind_layout(kind: str, rank: int) -> Perm:
    if kind == CHANNELS_LAST:
        return alternative(rank) or identity(rank)
    return identity(rank)


def is_permutation(perm: Sequence[int], rank: int) -> bool:
    return sorted(perm) == list(range(rank))


def inverse(perm: Sequence[int]) -> Perm:
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = i
    return tuple(out)


def physical_order(shape: Sequence[int | None], perm: Sequence[int]) -> Perm:
    """The dims that are not statically 1, in the order the layout stores them."""
    return tuple(p for p in perm if shape[p] != 1)


def equivalent(shape: Sequence[int | None], a: Sequence[int], b: Sequence[int]) -> bool:
    """Whether two layouts of a tensor of `shape` store its bytes in the same order."""
    return physical_order(shape, a) == physical_order(shape, b)


def project(perm: Sequence[int], rank: int) -> Perm:
    """A layout of rank len(perm) seen by an operand of lower `rank` aligned to the trailing dims
    (numpy broadcasting): the order of those dims, renumbered."""
    offset = len(perm) - rank
    return tuple(p - offset for p in perm if p >= offset)


def drop_axes(perm: Sequence[int], axes: Iterable[int]) -> Perm:
    """A layout with some dims removed (a reduction without keepdims), renumbered."""
    gone = set(axes)
    return tuple(p - sum(1 for a in gone if a < p) for p in perm if p not in gone)


def swap_last_two(rank: int) -> Perm:
    return (*range(rank - 2), rank - 1, rank - 2)


def numel(shape: Sequence[int | None]) -> int:
    n = 1
    for d in shape:
        n *= DYNAMIC_DIM if d is None else d
    return n


# ---------------------------------------------------------------- tables


@dataclass(frozen=True)
class Rule:
    """How an op meets layouts on one target.

    `costs` maps each layout kind the op accepts to its relative cost (times the op's traffic);
    a kind it does not list it cannot run in. `why` is shown when a cast is explained.
    """

    relation: str
    costs: dict[str, float]
    why: str = ""


RELATIONS = ("uniform", "reduce", "contraction", "rigid")
_ANY = {ROW_MAJOR: 0.0, CHANNELS_LAST: 0.0}
_COSTS = {"uniform": _ANY, "reduce": _ANY, "contraction": {ROW_MAJOR: 0.0}, "rigid": {ROW_MAJOR: 0.0}}
"""The layouts each relation accepts, at no cost, before a target's preferences."""
_UNKNOWN = OpLayoutRule("rigid", "this op reads and writes row-major tensors")


def _rule(target: str, rule: OpLayoutRule, keys: Sequence[str]) -> Rule:
    """An op's layout rule (`OpDef.layout`) on `target`: the relation's costs, unless the target
    prefers one layout for the op (`Target.preferred_layouts`, by op kind or op name)."""
    for pref in get_target(target).preferred_layouts:
        if pref.op in keys:
            other = ROW_MAJOR if pref.layout == CHANNELS_LAST else CHANNELS_LAST
            return Rule(rule.relation, {pref.layout: 0.0, other: pref.other_cost}, pref.why)
    return Rule(rule.relation, dict(_COSTS[rule.relation]), rule.why)


@lru_cache(maxsize=None)
def layout_table(target: str) -> dict[str, Rule]:
    """Every op's rule on `target` by op name (an op whose rule depends on its operands' ranks, such
    as gather, with the rule of its general case), and "*" for ops this table does not know. SdcError
    for an unknown target."""
    table = {name: rule_for(target, name) for name in all_ops()}
    table["*"] = _rule(target, _UNKNOWN, ())
    return table


def rule_for(target: str, name: str, family: str = "", operand_ranks: Sequence[int] = ()) -> Rule:
    """The rule of an op (`name` without the `sdc.` prefix) on `target`, from its OpDef's layout
    hook (given its operand ranks, for a rule that depends on them). An op this process does not
    define gets its kind's default when `family` names an op kind, and so does an op kind named as
    `name` (what `Target.preferred_layouts` names); anything else the rigid rule."""
    opdef = all_ops().get(name)
    if opdef is not None:
        return _rule(target, opdef.layout_rule(operand_ranks), (opdef.kind.value, name))
    for kind in (OpKind.named(family), OpKind.named(name)):
        if kind is not None and isinstance(KIND_DEFAULTS[kind].layout, OpLayoutRule):
            return _rule(target, KIND_DEFAULTS[kind].layout, (kind.value, name))
    return _rule(target, _UNKNOWN, ())


# ---------------------------------------------------------------- the problem


@dataclass
class TensorInfo:
    shape: tuple[int | None, ...]  # None: dynamic
    itemsize: int
    source: str = "op"  # "op" (an op's result), "argument" (fixed by the caller), "weight" (stored as wanted)
    pinned: Perm | None = None  # a requested layout
    label: str = ""  # how explanations name it

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return numel(self.shape) * self.itemsize


@dataclass
class OpInfo:
    name: str  # without the `sdc.` prefix
    family: str  # the op's kind (`OpKind`'s value): the rule of an op this process does not define
    operands: tuple[int, ...]
    results: tuple[int, ...]
    axes: tuple[int, ...] = ()  # reduced axes (non-negative), for the reduce relation
    keepdims: bool = True
    pinned: tuple[Perm | None, ...] = ()  # requested result layouts
    label: str = ""


@dataclass
class LayoutProblem:
    target: str
    tensors: list[TensorInfo]
    ops: list[OpInfo]
    outputs: list[tuple[int, Perm | None]]  # returned tensors and the layout the caller wants (None: row-major)


class LayoutRequestError(ValueError):
    """A requested layout that cannot hold; `op` is the index of the op (or None for an output)."""

    def __init__(self, message: str, op: int | None = None):
        super().__init__(message)
        self.op = op


# ---------------------------------------------------------------- what an op needs and makes


class OpModel:
    """An op under its rule: the layouts it reads and writes in each kind it accepts."""

    def __init__(self, problem: LayoutProblem, index: int):
        self.index = index
        self.op = op = problem.ops[index]
        self.rule = rule_for(problem.target, op.name, op.family, [problem.tensors[t].rank for t in op.operands])
        ranks = [problem.tensors[t].rank for t in (op.results or op.operands)]
        if self.rule.relation == "reduce" and op.operands:
            ranks = [problem.tensors[op.operands[0]].rank]
        self.rank = ranks[0] if ranks else 0
        self.tensors = problem.tensors
        kinds = [k for k in KINDS if k in self.rule.costs]
        if self.rank < 2 or alternative(self.rank) is None:
            kinds = [k for k in kinds if k == ROW_MAJOR] or kinds[:1]
        self.kinds = kinds
        traffic = sum(problem.tensors[t].nbytes for t in (*op.operands, *op.results))
        self.traffic = traffic

    def layout(self, kind: str) -> Perm:
        return kind_layout(kind, self.rank)

    def required(self, kind: str, i: int) -> tuple[Perm, ...]:
        """Layouts operand i may arrive in (the first is what a cast makes)."""
        rank = self.tensors[self.op.operands[i]].rank
        relation = self.rule.relation
        if relation in ("uniform", "reduce"):
            if rank == self.rank:
                return (self.layout(kind),)
            if rank < self.rank:
                return (project(self.layout(kind), rank),)
            return (identity(rank),)
        if relation == "contraction" and rank >= 2:
            return (identity(rank), swap_last_two(rank))
        return (identity(rank),)

    def produced(self, kind: str, j: int) -> Perm:
        rank = self.tensors[self.op.results[j]].rank
        relation = self.rule.relation
        if relation == "uniform":
            return self.layout(kind) if rank == self.rank else (
                project(self.layout(kind), rank) if rank < self.rank else identity(rank))
        if relation == "reduce":
            if rank == self.rank:
                return self.layout(kind)
            dropped = drop_axes(self.layout(kind), self.op.axes)
            return dropped if len(dropped) == rank else identity(rank)
        return identity(rank)

    def cost(self, kind: str) -> int:
        return int(round(self.rule.costs[kind] * self.traffic))


# ---------------------------------------------------------------- energy and min cut


class _Graph:
    """Dinic's max flow on integer capacities."""

    def __init__(self):
        self.adj: list[list[int]] = []
        self.to: list[int] = []
        self.cap: list[int] = []

    def node(self) -> int:
        self.adj.append([])
        return len(self.adj) - 1

    def edge(self, u: int, v: int, c: int) -> None:
        if c <= 0 or u == v:
            return
        self.adj[u].append(len(self.to))
        self.to.append(v)
        self.cap.append(c)
        self.adj[v].append(len(self.to))
        self.to.append(u)
        self.cap.append(0)

    def max_flow(self, s: int, t: int) -> int:
        flow = 0
        n = len(self.adj)
        while True:
            level = [-1] * n
            level[s] = 0
            queue = deque([s])
            while queue:
                u = queue.popleft()
                for e in self.adj[u]:
                    if self.cap[e] > 0 and level[self.to[e]] < 0:
                        level[self.to[e]] = level[u] + 1
                        queue.append(self.to[e])
            if level[t] < 0:
                return flow
            it = [0] * n
            while True:
                pushed = self._push(s, t, level, it)
                if not pushed:
                    break
                flow += pushed

    def _push(self, s: int, t: int, level: list[int], it: list[int]) -> int:
        # Iterative DFS along the level graph; returns the bottleneck of one augmenting path.
        path: list[int] = []
        u = s
        while True:
            if u == t:
                bottleneck = min(self.cap[e] for e in path)
                for e in path:
                    self.cap[e] -= bottleneck
                    self.cap[e ^ 1] += bottleneck
                return bottleneck
            advanced = False
            while it[u] < len(self.adj[u]):
                e = self.adj[u][it[u]]
                v = self.to[e]
                if self.cap[e] > 0 and level[v] == level[u] + 1:
                    path.append(e)
                    u = v
                    advanced = True
                    break
                it[u] += 1
            if advanced:
                continue
            if not path:
                return 0
            level[u] = -1  # dead end: never visit again in this phase
            e = path.pop()
            u = self.to[e ^ 1]
            it[u] += 1

    def source_side(self, s: int) -> set[int]:
        seen = {s}
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for e in self.adj[u]:
                if self.cap[e] > 0 and self.to[e] not in seen:
                    seen.add(self.to[e])
                    queue.append(self.to[e])
        return seen


class Energy:
    """A sum of unary, pairwise and shared terms over binary variables, minimized by a cut.

    Label 0 is the source side of the cut, label 1 the sink side.
    """

    def __init__(self, n: int):
        self.n = n
        self.constant = 0
        self.unary = [[0, 0] for _ in range(n)]
        self.pairwise: list[tuple[int, int, int]] = []  # (i, j, w): w when x_i = 0 and x_j = 1
        self.any_terms: list[tuple[int | None, int, int, tuple[int, ...], int]] = []
        self.exact = True

    def add_unary(self, i: int, label: int, w: int) -> None:
        self.unary[i][label] += w

    def add_pair(self, i: int, j: int, table: tuple[int, int, int, int]) -> None:
        """E(x_i, x_j) = table[2 * x_i + x_j]."""
        a, b, c, d = table
        self.constant += a
        self.unary[i][1] += c - a
        self.unary[j][1] += d - c
        lam = b + c - a - d
        if lam < 0:
            self.exact = False
            lam = 0
        if lam:
            self.pairwise.append((i, j, lam))

    def add_any(self, x: int | None, a: int, k: int, triggers: Sequence[int], w: int) -> None:
        """w once if x = a (always, when x is None) and any trigger variable has label k."""
        self.any_terms.append((x, a, k, tuple(triggers), w))

    def minimize(self) -> list[int]:
        inf = 1 + self.constant + sum(abs(u) for pair in self.unary for u in pair) + sum(
            w for *_, w in self.pairwise) + sum(t[-1] for t in self.any_terms)
        g = _Graph()
        s, t = g.node(), g.node()
        nodes = [g.node() for _ in range(self.n)]
        for i, (u0, u1) in enumerate(self.unary):
            low = min(u0, u1)
            g.edge(s, nodes[i], u1 - low)  # cut when x_i = 1
            g.edge(nodes[i], t, u0 - low)  # cut when x_i = 0
        for i, j, w in self.pairwise:
            g.edge(nodes[i], nodes[j], w)
        for x, a, k, triggers, w in self.any_terms:
            aux = g.node()
            if k == 1:  # aux must join the sink side when a trigger does
                for v in triggers:
                    g.edge(aux, nodes[v], inf)
                g.edge(s if x is None else nodes[x], aux, w)
            else:
                for v in triggers:
                    g.edge(nodes[v], aux, inf)
                g.edge(aux, t if x is None else nodes[x], w)
        g.max_flow(s, t)
        side = g.source_side(s)
        return [0 if nodes[i] in side else 1 for i in range(self.n)]


# ---------------------------------------------------------------- the solution


@dataclass
class Cast:
    tensor: int
    source: Perm  # the layout the tensor has
    target: Perm  # the layout the consumers read
    consumers: list[tuple[int, int]]  # (op index, operand index); op index -1: the function's output #operand
    nbytes: int  # bytes moved (read and write)
    reason: str = ""


@dataclass
class LayoutSolution:
    tensor_layouts: list[Perm]  # the layout each tensor is produced (or stored) in
    op_kinds: list[str]  # the layout kind each op runs in
    casts: list[Cast]
    op_cost: int
    cast_cost: int
    exact: bool = True

    @property
    def cost(self) -> int:
        return self.op_cost + self.cast_cost


class _Setup:
    """The problem as variables: which tensors and ops are free, and their two candidate layouts."""

    def __init__(self, problem: LayoutProblem):
        self.problem = problem
        self.models = [OpModel(problem, i) for i in range(len(problem.ops))]
        n_tensors = len(problem.tensors)
        self.producer: list[tuple[int, int] | None] = [None] * n_tensors
        self.consumers: list[list[tuple[int, int]]] = [[] for _ in range(n_tensors)]
        for o, op in enumerate(problem.ops):
            for j, t in enumerate(op.results):
                self.producer[t] = (o, j)
            for i, t in enumerate(op.operands):
                self.consumers[t].append((o, i))
        for i, (t, _) in enumerate(problem.outputs):
            self.consumers[t].append((-1, i))
        self._check_pins()
        self.n_vars = 0
        self.op_var: list[int | None] = []
        self.op_fixed: list[str] = []
        for model in self.models:
            if len(model.kinds) == 2:
                self.op_var.append(self._new_var())
                self.op_fixed.append("")
            else:
                self.op_var.append(None)
                self.op_fixed.append(model.kinds[0] if model.kinds else ROW_MAJOR)
        self.candidates: list[tuple[Perm, Perm | None]] = []
        self.tensor_var: list[int | None] = []
        self.tensor_fixed: list[int] = []
        for t, info in enumerate(problem.tensors):
            self._tensor_variable(t, info)

    def _new_var(self) -> int:
        self.n_vars += 1
        return self.n_vars - 1

    def _check_pins(self) -> None:
        for o, model in enumerate(self.models):
            pins = model.op.pinned
            if not any(p is not None for p in pins):
                continue
            fitting = []
            for kind in model.kinds:
                if all(pin is None or equivalent(self.problem.tensors[t].shape, model.produced(kind, j), pin)
                       for j, (t, pin) in enumerate(zip(model.op.results, pins))):
                    fitting.append(kind)
            if not fitting:
                wanted = [list(p) for p in pins if p is not None]
                can = " or ".join(str(list(model.produced(k, 0))) for k in model.kinds) if model.op.results else "[]"
                raise LayoutRequestError(
                    f"'sdc.{model.op.name}' cannot produce layout {wanted[0] if len(wanted) == 1 else wanted} "
                    f"on target {self.problem.target} (it produces {can})", o)
            model.kinds = fitting

    def _tensor_variable(self, t: int, info: TensorInfo) -> None:
        ident = identity(info.rank)
        if self.producer[t] is not None:
            o, j = self.producer[t]
            model = self.models[o]
            var = self.op_var[o]
            if var is None:
                self.candidates.append((model.produced(self.op_fixed[o], j), None))
                self.tensor_var.append(None)
                self.tensor_fixed.append(0)
            else:
                self.candidates.append((model.produced(model.kinds[0], j), model.produced(model.kinds[1], j)))
                self.tensor_var.append(var)
                self.tensor_fixed.append(0)
            return
        if info.pinned is not None and not equivalent(info.shape, info.pinned, ident):
            self.candidates.append((ident, tuple(info.pinned)))
            self.tensor_var.append(None)
            self.tensor_fixed.append(1)
            return
        if info.source == "weight" and info.rank >= 2:
            wanted = self._wanted_by_consumers(t)
            if wanted is not None:
                self.candidates.append((ident, wanted))
                self.tensor_var.append(self._new_var())
                self.tensor_fixed.append(0)
                return
        self.candidates.append((ident, None))
        self.tensor_var.append(None)
        self.tensor_fixed.append(0)

    def _wanted_by_consumers(self, t: int) -> Perm | None:
        """The non-row-major layout the consumers of a weight ask for most (by bytes of their traffic)."""
        shape = self.problem.tensors[t].shape
        votes: dict[Perm, int] = {}
        for o, i in self.consumers[t]:
            if o < 0:
                continue
            model = self.models[o]
            for kind in model.kinds:
                first = model.required(kind, i)[0]
                if not equivalent(shape, first, identity(len(shape))):
                    votes[first] = votes.get(first, 0) + model.traffic + 1
        return max(votes, key=votes.get) if votes else None

    # ------------------------------------------------------------ reading a labelling

    def layout_of(self, t: int, labels: list[int]) -> Perm:
        var = self.tensor_var[t]
        label = self.tensor_fixed[t] if var is None else labels[var]
        return self.candidates[t][label]

    def kind_of(self, o: int, labels: list[int]) -> str:
        var = self.op_var[o]
        return self.op_fixed[o] if var is None else self.models[o].kinds[labels[var]]

    def accepted(self, t: int, consumer: tuple[int, int], kind: str | None) -> tuple[Perm, ...]:
        o, i = consumer
        if o < 0:
            wanted = self.problem.outputs[i][1]
            return (tuple(wanted) if wanted is not None else identity(self.problem.tensors[t].rank),)
        return self.models[o].required(kind, i)

    def casts_for(self, labels: list[int]) -> list[Cast]:
        casts: dict[tuple[int, Perm], Cast] = {}
        for t, info in enumerate(self.problem.tensors):
            have = self.layout_of(t, labels)
            for consumer in self.consumers[t]:
                kind = self.kind_of(consumer[0], labels) if consumer[0] >= 0 else None
                options = self.accepted(t, consumer, kind)
                if any(equivalent(info.shape, have, r) for r in options):
                    continue
                key = (t, physical_order(info.shape, options[0]))
                if key not in casts:
                    moved = 0 if info.source == "weight" else 2 * info.nbytes  # a weight's cast folds away
                    casts[key] = Cast(t, have, options[0], [], moved)
                casts[key].consumers.append(consumer)
        return list(casts.values())

    def cost_of(self, labels: list[int]) -> tuple[int, int]:
        op_cost = sum(m.cost(self.kind_of(o, labels)) for o, m in enumerate(self.models))
        cast_cost = sum(c.nbytes for c in self.casts_for(labels))
        return op_cost, cast_cost

    # ------------------------------------------------------------ the energy

    def energy(self) -> Energy:
        """The energy in scaled units: real bytes times `scale`, plus tie-breaks worth less than one
        byte in total. Ties go to row-major ops and weights, and then to casts at the function's
        boundary (a cast inside the function costs a little more than one at its entry or exit)."""
        n_edges = sum(len(c) for c in self.consumers)
        self.tie_op = 1
        self.tie_cast = len(self.models) + len(self.problem.tensors) + 1
        self.scale = self.tie_cast * (n_edges + 1) + 1
        energy = Energy(self.n_vars)
        for o, model in enumerate(self.models):
            var = self.op_var[o]
            if var is None:
                energy.constant += self.scale * model.cost(self.op_fixed[o])
                continue
            energy.add_unary(var, 0, self.scale * model.cost(model.kinds[0]))
            energy.add_unary(var, 1, self.scale * model.cost(model.kinds[1])
                             + (self.tie_op if model.kinds[1] != ROW_MAJOR else 0))
        for t in range(len(self.problem.tensors)):
            if self.tensor_var[t] is not None and self.producer[t] is None:
                energy.add_unary(self.tensor_var[t], 1, self.tie_op)  # a weight stays row-major unless that helps
            self._cast_terms(energy, t)
        return energy

    def _cast_terms(self, energy: Energy, t: int) -> None:
        """Cast charges for the consumers of tensor t.

        Consumers that want the same layout share one cast: a group (tensor label, cast target)
        costs the cast once when any of its triggers fires. A consumer whose charge depends on
        both its own layout and the tensor's in a way one cast cannot serve gets a pairwise term.
        """
        info = self.problem.tensors[t]
        x = self.tensor_var[t]
        labels = [0, 1] if x is not None else [self.tensor_fixed[t]]
        groups: dict[tuple[int, Perm, bool], dict] = {}
        inner_tensor = self.producer[t] is not None
        folded = info.source == "weight"  # a weight's cast is a second copy stored that way: free at run time

        def weight(inside: bool) -> int:
            if folded:
                return self.tie_cast
            return self.scale * 2 * info.nbytes + (self.tie_cast if inside else 0)

        def group(a: int, target: Perm, inside: bool) -> dict:
            key = (a, physical_order(info.shape, target), inside)
            return groups.setdefault(key, {"certain": False, 0: [], 1: []})

        for consumer in self.consumers[t]:
            o = consumer[0]
            inside = inner_tensor and o >= 0
            m = self.op_var[o] if o >= 0 else None
            kinds = self.models[o].kinds if m is not None else [self.op_fixed[o] if o >= 0 else None]
            # need[a][k]: the cast target when the tensor has label a and the consumer kind k (None: no cast)
            need = {}
            for a in labels:
                have = self.candidates[t][a]
                for k, kind in enumerate(kinds):
                    options = self.accepted(t, consumer, kind)
                    need[a, k] = None if any(equivalent(info.shape, have, r) for r in options) else options[0]
            if m is None:
                for (a, _), target in need.items():
                    if target is not None:
                        group(a, target, inside)["certain"] = True
                continue
            assert m != x, "a tensor cannot be its own consumer's result"
            if x is None or (need[0, 0] is None and need[1, 1] is None):
                for (a, k), target in need.items():
                    if target is not None:
                        group(a, target, inside)[k].append(m)
                continue
            w = weight(inside)
            energy.add_pair(x, m, tuple(0 if need[a, k] is None else w for a in (0, 1) for k in (0, 1)))
        for (a, _, inside), g in groups.items():
            w = weight(inside)
            if g["certain"]:
                if x is None:
                    energy.constant += w
                else:
                    energy.add_unary(x, a, w)
                continue
            for k in (0, 1):
                if g[k]:
                    energy.add_any(x, a, k, g[k], w)


def solve(problem: LayoutProblem) -> LayoutSolution:
    """The layout assignment of least total cost (see the module docstring)."""
    setup = _Setup(problem)
    energy = setup.energy()
    labels = energy.minimize()
    exact = energy.exact
    if not exact:
        labels = _polish(setup, labels)
    op_cost, cast_cost = setup.cost_of(labels)
    casts = setup.casts_for(labels)
    for cast in casts:
        cast.reason = _explain(setup, cast, labels)
    return LayoutSolution(
        tensor_layouts=[setup.layout_of(t, labels) for t in range(len(problem.tensors))],
        op_kinds=[setup.kind_of(o, labels) for o in range(len(problem.ops))],
        casts=casts, op_cost=op_cost, cast_cost=cast_cost, exact=exact)


def _polish(setup: _Setup, labels: list[int]) -> list[int]:
    """Single-variable flips while they lower the true cost (after an approximated term)."""
    best = sum(setup.cost_of(labels))
    improved = True
    while improved:
        improved = False
        for v in range(len(labels)):
            labels[v] ^= 1
            cost = sum(setup.cost_of(labels))
            if cost < best:
                best, improved = cost, True
            else:
                labels[v] ^= 1
    return labels


def brute_force(problem: LayoutProblem) -> tuple[int, list[int]]:
    """The least cost by trying every labelling (for tests on small problems)."""
    setup = _Setup(problem)
    best = None
    for labels in itertools.product((0, 1), repeat=setup.n_vars):
        cost = sum(setup.cost_of(list(labels)))
        if best is None or cost < best[0]:
            best = (cost, list(labels))
    return best


def _explain(setup: _Setup, cast: Cast, labels: list[int]) -> str:
    problem = setup.problem
    info = problem.tensors[cast.tensor]
    o, i = cast.consumers[0]
    if o < 0:
        wanted = problem.outputs[i][1]
        need = (f"function result #{i} is returned in {list(cast.target)}"
                + (" (requested)" if wanted is not None else " (row-major, the caller's layout)"))
    else:
        model = setup.models[o]
        kind = setup.kind_of(o, labels)
        need = (f"operand #{i} of {model.op.label or 'sdc.' + model.op.name} is read in {list(cast.target)}: "
                f"it runs {kind} on {problem.target}" + (f" ({model.rule.why})" if model.rule.why else ""))
    more = len(cast.consumers) - 1
    if more:
        need += f" (as {more} more use{'s' if more > 1 else ''} read{'' if more > 1 else 's'} it)"
    produced = setup.producer[cast.tensor]
    if produced is not None:
        origin = setup.models[produced[0]].op.label or "sdc." + setup.models[produced[0]].op.name
        source = f"{origin} produces {list(cast.source)}"
    elif info.source == "argument":
        source = f"{info.label or 'the argument'} arrives in {list(cast.source)}"
    else:
        source = f"{info.label or 'the weight'} is stored in {list(cast.source)}"
    return f"{need}; {source}"
