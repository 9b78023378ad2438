"""sdc-recompute: under a memory budget, recompute forward activations in the backward pass instead
of keeping them alive from the forward pass to their backward readers.

    sdc-recompute{memory-budget=4000000}      bytes; 0: no budget (keep every activation)

Why: after sdc-autodiff the forward and backward are one program, and every forward value a
derivative rule reads (an *activation*) stays live from the forward op that makes it to the
backward op that reads it, so the peak of a training step is set by the activations kept across
the turn from forward to backward. Recomputing some of them from values that are kept anyway (the
inputs, the parameters, other kept activations) shortens those lifetimes at the price of the
recomputation.

Where it runs: in the compile pipeline right after sdc-fuse (`CompileOptions.memory_budget`), on
the kernel groups, so the values whose lifetimes it plans are those the memory plan places (fusion
also moves derivative arithmetic that reads only forward values, such as `1 - tanh(x)^2`, into the
forward group, which changes what is kept). It works on any entry function with `grad.*` or `next.*`
results (after sdc-autodiff, and sdc-optimizer-step, whose update counts towards the peak too):
- The *forward* ops are those the other results (the loss) depend on; every other op is backward
  (or the optimizer update). What an op reads is its operands and, for an `sdc.fusion`, the outer
  values its region captures.
- The peak of an op order is the memory plan's own: the order (with its clones) is written as plan
  steps and placed by `lifetimes.rank_buffers` and `lifetimes.place`, so what the planner leaves to the
  allocator (entry results and what they may view, weights, values of unknown size) and its
  placement's fragmentation are counted as the artifact will count them (`JointGraph.arena`).
- With no budget nothing changes: keeping every activation is the cheapest overall (no work is
  repeated). With a budget above that arena, nothing changes either.
- Otherwise the choice is a minimum cut over the forward ops (`min_cut`, AOTAutograd's min-cut
  partitioner in spirit): keeping an op's results costs their bytes, recomputing it costs its flops
  times a price in bytes per flop; impure, random, opaque ops and collectives are never recomputed,
  heavy ones (contraction, convolution, attention) only when nothing cheaper fits. The price is swept
  from dear to nearly free (`SWEEP`) and the first cut whose arena meets the budget wins (the least
  recomputation that fits); failing that, a greedy search (`_greedy`: an op with its recomputable
  producers up to four levels back, the cheapest move that meets the budget, else the one with the
  lowest arena) goes on from the best cut. A recomputed op is cloned into the backward right before
  its first backward reader (its recomputed operands before it, once) and every backward reader
  takes the clone. Clones carry the unit attribute `sdc.recomputed`.
- A budget below the lowest arena it reaches is an error at the function, saying that minimum.
- A module attribute `sdc.recompute_cut = {bytes_per_flop, heavy}` (`cut_request`) asks for that one
  cut instead: `sdc.compile_train` measures the artifacts of the sweep's cuts when the planner's later
  decisions put the real arena above the budget (docs/training.md).

The choice works on plain data (`JointGraph`, `min_cut`, `choose`), unit-testable without MLIR; the IR
step (`_apply`) only clones and rewires. The module records the outcome as `sdc.recompute`, a
dictionary attribute (`budget`, `peak_before`, `peak` = `arena`, `max_live`, `recomputed`), which
`report(module)` reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sdc import dtypes
from sdc.diagnostics import DiagnosticSink, SdcError
from sdc.dialect.ir import entry_function, result_names, tensor_spec
from sdc.dialect.hooks import Recompute
from sdc.dialect.opdef import OPS, weight_ops
from sdc.dialect.shapes import is_static
from sdc.fmt import format_bytes
from sdc.mlir import ir
from sdc.transforms.base import ModulePass
from sdc.transforms.lifetimes import ALIGNMENT, LAUNCH, Buffer, max_live_bytes, place, rank_buffers

RECOMPUTED_ATTR = "sdc.recomputed"  # on a clone made in the backward
REPORT_ATTR = "sdc.recompute"  # on the module: what the pass planned
CUT_ATTR = "sdc.recompute_cut"  # on the module, from sdc.compile_train: {bytes_per_flop, heavy}, a fixed cut
TRAINING_PREFIXES = ("grad.", "next.")  # results that are not the forward's


@dataclass(frozen=True)
class OpNode:
    """One op of the entry block: the value ids it reads and makes, whether it is forward, and, for
    a forward op that may be recomputed, what that costs in flops (0: it may not). `heavy` marks a
    contraction, convolution or attention: its output is saved unless nothing cheaper meets the
    budget."""

    operands: tuple[int, ...]
    results: tuple[int, ...]
    forward: bool
    cost: int = 0
    heavy: bool = False
    kernel: tuple[str, ...] = ()  # the sdc op names it runs (an `sdc.fusion`: its region's), for view rules


@dataclass
class JointGraph:
    """The forward+backward program as plain data. `sizes` holds the planned values' bytes (the
    intermediates of static size that are not weights or entry results); value ids not in
    `producer` are entry inputs."""

    ops: list[OpNode]
    sizes: dict[int, int]
    producer: dict[int, int] = field(default_factory=dict)
    returned: frozenset[int] = frozenset()  # entry results: not planned, and what they read may be viewed
    weights: frozenset[int] = frozenset()  # weights and what is computed from weights only: not planned

    def __post_init__(self) -> None:
        self.producer = {v: i for i, op in enumerate(self.ops) for v in op.results}

    def moves(self, chosen: frozenset[int], depth: int = 4) -> list[frozenset[int]]:
        """The sets of ops the search may add to `chosen` next: for each forward op that may be
        recomputed and whose result a backward op or a chosen op reads, the op alone, then with its
        recomputable producers, level by level up to `depth` levels (recomputing `add(matmul(x, w), b)`
        frees memory only when the matmul is recomputed too)."""
        readers = {v for i, op in enumerate(self.ops) if not op.forward or i in chosen for v in op.operands}
        out: list[frozenset[int]] = []
        for i, op in enumerate(self.ops):
            if i in chosen or not (op.forward and op.cost > 0):
                continue
            if not any(v in readers and v in self.sizes for v in op.results):
                continue
            level = {i}
            move = frozenset(level)
            out.append(move)
            for _ in range(depth):
                level = {p for j in level for v in self.ops[j].operands
                         if (p := self.producer.get(v)) is not None and self.ops[p].cost > 0
                         and p not in chosen and p not in move}
                if not level:
                    break
                move = move | level
                out.append(move)
        return out

    def cost(self, ops: frozenset[int]) -> int:
        return sum(self.ops[i].cost for i in ops)

    def schedule(self, recompute: frozenset[int]) -> list[tuple[int, bool]]:
        """The op order with clones: (op index, is a clone). A clone goes right before the first
        backward op that needs it, after the clones of its own recomputed operands."""
        order: list[tuple[int, bool]] = []
        cloned: set[int] = set()

        def need(i: int) -> None:
            if i in cloned:
                return
            cloned.add(i)
            for v in self.ops[i].operands:
                p = self.producer.get(v)
                if p is not None and p in recompute:
                    need(p)
            order.append((i, True))

        for i, op in enumerate(self.ops):
            if not op.forward:
                for v in op.operands:
                    p = self.producer.get(v)
                    if p is not None and p in recompute:
                        need(p)
            order.append((i, False))
        return order

    def buffers(self, recompute: frozenset[int]) -> list[Buffer]:
        """The planned values of the order with `recompute` cloned, with their lifetimes, by the memory
        plan's own rules (`lifetimes.rank_buffers` over the order written as plan steps): what is left to
        the allocator (entry results, weights, values of unknown size, what an entry result may view)
        and how views stretch lifetimes are the planner's decisions, not a copy of them here."""
        values: dict[str, dict] = {}
        steps: list[dict] = []
        for i, clone in self.schedule(recompute):
            op = self.ops[i]
            reads_clones = clone or not op.forward
            inputs = []
            for v in op.operands:
                p = self.producer.get(v)
                inputs.append(f"{v}r" if reads_clones and p is not None and p in recompute else f"{v}")
            outputs = [f"{v}r" if clone else f"{v}" for v in op.results]
            for name, v in zip(outputs, op.results):
                values[name] = ({"dtype": "i8", "shape": [self.sizes[v]]} if v in self.sizes
                                else {"weight": True} if v in self.weights else {"dtype": "i8", "shape": ["?"]})
            steps.append({"kind": LAUNCH, "inputs": inputs, "outputs": outputs,
                          "kernel": {"backend": "reference", "ops": [{"op": name} for name in op.kernel]}})
        for v in self.producer:
            values.setdefault(f"{v}", {"dtype": "i8", "shape": ["?"]})
        return rank_buffers(values, [f"{v}" for v in sorted(self.returned)], steps, {})

    def arena(self, recompute: frozenset[int]) -> int:
        """The arena the memory plan's placement (`lifetimes.place`) gives the order with `recompute`:
        what the artifact will report, fragmentation included."""
        return place(self.buffers(recompute), ALIGNMENT).size

    def peak(self, recompute: frozenset[int]) -> int:
        return max_live_bytes(self.buffers(recompute), ALIGNMENT)


@dataclass(frozen=True)
class Choice:
    """What `choose` decided: the ops to recompute, and the arena (`JointGraph.arena`: the memory
    plan's placement) of the order without and with them; `max_live` is the final order's lower
    bound (`lifetimes.max_live_bytes`), which no placement beats."""

    recompute: frozenset[int]
    peak_before: int
    peak: int
    max_live: int

    @property
    def arena(self) -> int:
        return self.peak


INF = float("inf")
# Bytes one flop of recomputation is worth, tried from dear (nothing is recomputed) to nearly free.
BYTES_PER_FLOP = tuple(2.0 ** k for k in range(12, -13, -2)) + (1e-6,)


def _max_flow_source_side(n: int, edges: list[tuple[int, int, float]], source: int, sink: int) -> set[int]:
    """The nodes on the source side of a minimum `source`-`sink` cut of the graph with `n` nodes and
    the given capacitated edges (Dinic's max flow, then what the residual graph still reaches)."""
    head: list[list[int]] = [[] for _ in range(n)]
    to: list[int] = []
    cap: list[float] = []
    for a, b, c in edges:
        head[a].append(len(to)); to.append(b); cap.append(c)
        head[b].append(len(to)); to.append(a); cap.append(0.0)
    eps = 1e-9

    def levels() -> list[int]:
        level = [-1] * n
        level[source] = 0
        queue = [source]
        for a in queue:
            for e in head[a]:
                if cap[e] > eps and level[to[e]] < 0:
                    level[to[e]] = level[a] + 1
                    queue.append(to[e])
        return level

    while (level := levels())[sink] >= 0:
        cursor = [0] * n
        while True:  # one augmenting path of the level graph at a time, iteratively (deep graphs)
            path: list[int] = []  # edge ids from the source
            a = source
            while a != sink:
                while cursor[a] < len(head[a]):
                    e = head[a][cursor[a]]
                    if cap[e] > eps and level[to[e]] == level[a] + 1:
                        break
                    cursor[a] += 1
                else:
                    if a == source:
                        break
                    level[a] = -1  # a dead end: never again in this phase
                    a = to[path.pop() ^ 1]
                    cursor[a] += 1
                    continue
                path.append(head[a][cursor[a]])
                a = to[path[-1]]
            if a != sink:
                break
            amount = min(cap[e] for e in path)
            for e in path:
                cap[e] -= amount
                cap[e ^ 1] += amount
    level = levels()
    return {a for a in range(n) if level[a] >= 0}


def min_cut(graph: JointGraph, bytes_per_flop: float, heavy: bool = False) -> frozenset[int]:
    """The forward ops to recompute that minimise (bytes kept from the forward for the backward) +
    `bytes_per_flop` x (flops recomputed), as a minimum cut (the formulation of AOTAutograd's min-cut
    partitioner): each forward op i is two nodes, in_i -> out_i with its results' bytes (cutting it
    keeps them); a backward reader makes out_i -> sink infinite, and an op that reads i makes
    out_i -> in_j infinite, so every path from what the forward has to what the backward needs is
    cut at a kept value; source -> in_i carries i's recomputation cost, infinite for an op that may
    not be recomputed (impure, random, opaque, and a `heavy` one unless `heavy`). Weights and entry
    inputs are free: kept anyway. An op whose in-node falls on the sink side is recomputed."""
    forward = [i for i, op in enumerate(graph.ops) if op.forward]
    node = {i: 2 + 2 * k for k, i in enumerate(forward)}  # in_i; out_i is node + 1
    source, sink, n = 0, 1, 2 + 2 * len(forward)
    edges: list[tuple[int, int, float]] = []
    free: set[int] = set()  # forward ops whose results are kept anyway (weights) or unplanned
    for i in forward:
        op = graph.ops[i]
        planned = [v for v in op.results if v in graph.sizes]
        recomputable = op.cost > 0 and (heavy or not op.heavy)
        if op.cost == 0 and not planned:
            free.add(i)  # a weight or an entry result: no memory to plan, nothing to recompute
        edges.append((node[i], node[i] + 1, float(sum(graph.sizes[v] for v in planned))))
        edges.append((source, node[i], bytes_per_flop * op.cost if recomputable else INF))
    for j, op in enumerate(graph.ops):
        for v in op.operands:
            i = graph.producer.get(v)
            if i is None or i not in node or i in free:
                continue
            edges.append((node[i] + 1, sink if not op.forward else node[j], INF))
    side = _max_flow_source_side(n, edges, source, sink)
    return frozenset(i for i in forward if node[i] not in side and i not in free)


# The cuts `choose` tries, in order: from the least recomputation to the most.
SWEEP: tuple[tuple[float, bool], ...] = tuple((w, heavy) for heavy in (False, True) for w in BYTES_PER_FLOP)


def choose(graph: JointGraph, budget: int | None) -> Choice:
    """The activations to recompute so that the planned arena is at most `budget` (None: nothing is
    recomputed, the cheapest overall). The minimum cut is swept from recomputation that is dear to
    recomputation that is nearly free, first with heavy ops kept, then with them allowed; the first
    cut whose arena meets the budget wins (the least recomputation that fits). Short of that, the
    greedy search (`_greedy`) goes on from the cut with the lowest arena. Raises SdcError, naming
    the lowest arena reached, when the budget cannot be met."""
    none: frozenset[int] = frozenset()
    before = graph.arena(none)
    if budget is None or before <= budget:
        return Choice(none, before, before, graph.peak(none))
    best, best_arena = none, before
    seen: set[frozenset[int]] = {none}
    for weight, heavy in SWEEP:
        cut = min_cut(graph, weight, heavy)
        if cut in seen:
            continue
        seen.add(cut)
        arena = graph.arena(cut)
        if arena <= budget:
            return Choice(cut, before, arena, graph.peak(cut))
        if arena < best_arena:
            best, best_arena = cut, arena
    chosen, arena = _greedy(graph, best, best_arena, budget)
    if arena > budget:
        raise BudgetUnreachable(budget, arena)
    return Choice(chosen, before, arena, graph.peak(chosen))


class BudgetUnreachable(SdcError):
    """The budget is below the lowest arena recomputation reaches (`lowest`, in bytes)."""

    def __init__(self, budget: int, lowest: int):
        super().__init__(f"memory budget {format_bytes(budget)} ({budget} bytes) is below what recomputation "
                         f"reaches: the lowest planned peak is {format_bytes(lowest)} ({lowest} bytes)")
        self.budget, self.lowest = budget, lowest


def estimate_misses_budget(module: ir.Operation) -> bool:
    """Whether sdc-recompute ran on `module` and found its budget out of reach (it records that, with
    the lowest arena, before it fails): sdc.compile_train then measures the cuts itself."""
    return "unreachable" in (report(module) or {})


def fixed_cut(graph: JointGraph, bytes_per_flop: float, heavy: bool) -> Choice:
    """The choice of one cut of the sweep, whatever its arena (sdc.compile_train searches the sweep
    against the arena the artifact really gets, see `CUT_ATTR`)."""
    none: frozenset[int] = frozenset()
    cut = min_cut(graph, bytes_per_flop, heavy)
    return Choice(cut, graph.arena(none), graph.arena(cut), graph.peak(cut))


def cut_request(module: ir.Operation, bytes_per_flop: float, heavy: bool) -> None:
    """Ask the sdc-recompute that will run on `module` for the cut of (`bytes_per_flop`, `heavy`)
    instead of its own search under the budget."""
    with module.context:
        module.attributes[CUT_ATTR] = ir.DictAttr.get({
            "bytes_per_flop": ir.FloatAttr.get_f64(bytes_per_flop), "heavy": ir.BoolAttr.get(heavy)})


def _greedy(graph: JointGraph, chosen: frozenset[int], arena: int, budget: int) -> tuple[frozenset[int], int]:
    """Add moves (`JointGraph.moves`) to `chosen` one at a time while the arena is above `budget`: the
    cheapest move that meets it, else the one with the lowest arena (then the shortest lifetimes).
    Quadratic in the forward's size, so it only finishes what the cut left."""
    area = _area(graph.buffers(chosen))
    while arena > budget:
        trials = []
        for move in graph.moves(chosen):
            bufs = graph.buffers(chosen | move)
            trials.append((place(bufs, ALIGNMENT).size, _area(bufs), graph.cost(move), sorted(move), move))
        fits = [t for t in trials if t[0] <= budget]
        best = min(fits, key=lambda t: (t[2], t[1], t[3])) if fits else min(trials, default=None)
        if best is None or (best[0], best[1]) >= (arena, area):
            break  # nothing left lowers the arena or shortens a lifetime
        arena, area, chosen = best[0], best[1], chosen | best[4]
    return chosen, arena


def _area(buffers: list[Buffer]) -> int:
    return sum(b.size * (b.end - b.start + 1) for b in buffers)


# ---------------------------------------------------------------- the IR side


@dataclass(frozen=True)
class RecomputePass(ModulePass):
    """Options:
    memory-budget   the most bytes the step's planned intermediates may take at one time (the
                    estimate in the module doc); 0 (default): no budget, nothing is recomputed.
    """

    memory_budget: int = 0

    name = "sdc-recompute"
    summary = "recompute forward activations in the backward pass to fit a memory budget (after sdc-autodiff)"

    def run(self, module: ir.Operation, diag: DiagnosticSink) -> None:
        if self.memory_budget < 0:
            diag.error(module, f"sdc-recompute: memory-budget must be >= 0 bytes, found {self.memory_budget}")
            return
        try:
            fn = entry_function(module)
        except SdcError as e:
            diag.error(module, f"sdc-recompute: {e}")
            return
        block = fn.regions[0].blocks[0]
        ops = [op.operation for op in block.operations]
        names = result_names(fn)
        if not any(n.startswith(TRAINING_PREFIXES) for n in names):
            diag.error(fn, "sdc-recompute runs after sdc-autodiff: the entry function has no 'grad.*' or "
                           "'next.*' results")
            return
        graph, _ = _read(fn, ops, names)
        request = module.attributes[CUT_ATTR] if CUT_ATTR in module.attributes else None
        try:
            if request is not None:
                del module.attributes[CUT_ATTR]
                d = ir.DictAttr(request)
                choice = fixed_cut(graph, ir.FloatAttr(d["bytes_per_flop"]).value, ir.BoolAttr(d["heavy"]).value)
            else:
                choice = choose(graph, self.memory_budget or None)
        except BudgetUnreachable as e:
            with module.context:
                i64 = ir.IntegerType.get_signless(64)
                module.attributes[REPORT_ATTR] = ir.DictAttr.get({
                    "budget": ir.IntegerAttr.get(i64, e.budget), "unreachable": ir.IntegerAttr.get(i64, e.lowest)})
            diag.error(fn, f"sdc-recompute: {e}")
            return
        except SdcError as e:
            diag.error(fn, f"sdc-recompute: {e}")
            return
        _apply(ops, graph, choice.recompute)
        with module.context:
            i64 = ir.IntegerType.get_signless(64)
            module.attributes[REPORT_ATTR] = ir.DictAttr.get({
                "budget": ir.IntegerAttr.get(i64, self.memory_budget),
                "peak_before": ir.IntegerAttr.get(i64, choice.peak_before),
                "peak": ir.IntegerAttr.get(i64, choice.peak),
                "arena": ir.IntegerAttr.get(i64, choice.arena),
                "max_live": ir.IntegerAttr.get(i64, choice.max_live),
                "recomputed": ir.IntegerAttr.get(i64, len(choice.recompute)),
            })


def report(module: ir.Operation) -> dict[str, int] | None:
    """What sdc-recompute recorded on `module` (None when it did not run)."""
    attrs = module.operation.attributes if hasattr(module, "operation") else module.attributes
    if REPORT_ATTR not in attrs:
        return None
    d = ir.DictAttr(attrs[REPORT_ATTR])
    keys = ("budget", "peak_before", "peak", "arena", "max_live", "recomputed", "unreachable")
    return {k: ir.IntegerAttr(d[k]).value for k in keys if k in d}


def _inner_ops(op: ir.Operation) -> list[ir.Operation]:
    """The ops inside a region op (an `sdc.fusion`), its terminator excluded."""
    return [o.operation for region in op.regions for block in region.blocks for o in block.operations
            if o.operation.name != "sdc.yield"]


def _reads(op: ir.Operation, outer: set) -> list[ir.Value]:
    """What a top-level op reads: its operands and, for an `sdc.fusion`, the outer values its region
    uses (fusion regions capture them rather than taking operands)."""
    reads = list(op.operands)
    for inner in _inner_ops(op):
        reads += [v for v in inner.operands if v in outer and v not in reads]
    return reads


def _numel(value: ir.Value) -> int:
    """Elements of a value, a run-time dim counted as 1 (an estimate for costs only)."""
    if not isinstance(value.type, ir.RankedTensorType):
        return 1
    n = 1
    for d in tensor_spec(value.type).shape:
        n *= d if isinstance(d, int) and d > 0 else 1
    return n


def _recompute_cost(op: ir.Operation) -> tuple[int, bool]:
    """What recomputing `op` costs in flops (0: it may not be recomputed: impure, random, opaque) and
    whether it holds a heavy op. A flop per result element, for a heavy op twice the elements times
    its reduction length, estimated as sqrt(elements of the first two operands / result elements)
    (K for a matmul `[M, K] x [K, N]`); a fusion group is the sum of its ops."""
    ops = _inner_ops(op) if op.regions else [op]
    if op.regions and op.name != "sdc.fusion":
        return 0, False
    cost, heavy = 0, False
    for o in ops:
        opdef = OPS.get(o.name[4:]) if o.name.startswith("sdc.") else None
        if opdef is None or opdef.recompute == Recompute.NEVER or o.regions:
            return 0, False
        out = sum(_numel(r) for r in o.results) or 1
        if opdef.recompute == Recompute.HEAVY and len(o.operands) >= 2:
            heavy = True
            cost += 2 * out * max(1, round((_numel(o.operands[0]) * _numel(o.operands[1]) / out) ** 0.5))
        else:
            cost += out
    return cost, heavy


def _read(fn: ir.Operation, ops: list[ir.Operation], names: list[str]) -> tuple[JointGraph, list[list[ir.Value]]]:
    """The entry block as a JointGraph, and what each op reads (the values behind its operand ids)."""
    ids: dict[ir.Value, int] = {}

    def vid(v: ir.Value) -> int:
        return ids.setdefault(v, len(ids))

    block = fn.regions[0].blocks[0]
    outer = set(block.arguments) | {r for op in ops for r in op.results}
    reads = [_reads(op, outer) for op in ops]
    producer = {r: op for op in ops for r in op.results}
    ret = ops[-1]
    returned = list(ret.operands)
    forward: set[int] = set()
    index = {op: i for i, op in enumerate(ops)}
    stack = [index[producer[v]] for v, n in zip(returned, names) if not n.startswith(TRAINING_PREFIXES)
             and v in producer]
    while stack:
        i = stack.pop()
        if i in forward:
            continue
        forward.add(i)
        stack.extend(index[producer[v]] for v in reads[i] if v in producer)
    weights: set[ir.Value] = set()
    sizes: dict[int, int] = {}
    nodes: list[OpNode] = []
    outputs = set(returned)
    for i, op in enumerate(ops):
        cost, heavy = _recompute_cost(op)
        weight = op.name in weight_ops() or (cost > 0 and bool(reads[i]) and all(v in weights for v in reads[i]))
        for r in op.results:
            if weight:
                weights.add(r)
            size = _bytes(r)
            if size is not None and not weight and r not in outputs:
                sizes[vid(r)] = size
        nodes.append(OpNode(tuple(vid(v) for v in reads[i]), tuple(vid(r) for r in op.results), i in forward,
                            cost if i in forward and not weight else 0, heavy,
                            tuple(o.name for o in (_inner_ops(op) if op.regions else [op]))))
    return JointGraph(nodes, sizes, returned=frozenset(vid(v) for v in outputs if v in ids),
                      weights=frozenset(vid(v) for v in weights)), reads


def _bytes(value: ir.Value) -> int | None:
    if not isinstance(value.type, ir.RankedTensorType):
        return None
    spec = tensor_spec(value.type)
    if not all(is_static(d) for d in spec.shape):
        return None
    n = dtypes.itemsize(spec.dtype)
    for d in spec.shape:
        n *= d
    return n


def _rewire(op: ir.Operation, versions: dict[ir.Value, ir.Value]) -> None:
    """Make `op` (and the ops of its region) read `versions[v]` wherever it read an outer value `v`."""
    for o in [op, *_inner_ops(op)]:
        for k, v in enumerate(list(o.operands)):
            if v in versions:
                o.operands[k] = versions[v]


def _apply(ops: list[ir.Operation], graph: JointGraph, recompute: frozenset[int]) -> None:
    """Clone the recomputed ops into the backward, in `graph.schedule`'s order (each right before the
    backward op it is made for), and rewire the clones and the backward readers to the clones."""
    if not recompute:
        return
    versions: dict[ir.Value, ir.Value] = {}  # a recomputed value -> its clone's
    order = graph.schedule(recompute)
    for t, (i, clone) in enumerate(order):
        if not clone:
            continue
        anchor = next(ops[j] for j, c in order[t + 1:] if not c)
        with ir.InsertionPoint(anchor):
            copy = ops[i].clone()
        copy.attributes[RECOMPUTED_ATTR] = ir.UnitAttr.get(copy.context)
        _rewire(copy, versions)
        versions.update(zip(ops[i].results, copy.results))
    for i, op in enumerate(ops):
        if not graph.ops[i].forward:
            _rewire(op, versions)
