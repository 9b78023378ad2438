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
- The peak of an op order is estimated with the memory plan's own measure
  (`sdc.codegen.memory.max_live_bytes` over `Buffer`s: a value is live from the op that makes it
  through the last op that reads it; inputs, weights and entry results are not planned, as there).
  The report gives the greedy arena placement (`memory.place`) of the final order too.
- With no budget nothing changes: keeping every activation is the cheapest overall (no work is
  repeated). With a budget, while the estimated peak is above it, the pass picks one more *move*: a
  forward op (or kernel group) that is pure, whose result a backward op or an op already chosen
  reads, alone or with its recomputable producers up to four levels back (recomputing
  `add(matmul(x, w), b)` frees memory only with the matmul). A move that meets the budget wins,
  the cheapest first (one per op, eight per matmul, convolution or attention); otherwise the one
  with the lowest peak, ties broken by the smaller sum of bytes x lifetime. A recomputed op is
  cloned into the backward right before its first backward reader (its recomputed operands before
  it, once) and every backward reader takes the clone. Clones carry the unit attribute
  `sdc.recomputed`.
- A budget below the lowest peak it reaches is an error at the function, saying that minimum.

The choice works on plain data (`JointGraph`, `choose`), unit-testable without MLIR; the IR step
(`_apply`) only clones and rewires. The module records the outcome as `sdc.recompute`, a dictionary
attribute (`budget`, `peak`, `peak_before`, `arena`, `recomputed`), which `report(module)` reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sdc import dtypes
from sdc.codegen.memory import ALIGNMENT, Buffer, max_live_bytes, place
from sdc.diagnostics import DiagnosticSink, SdcError
from sdc.dialect.ir import entry_function, result_names, tensor_spec
from sdc.dialect.opdef import OPS
from sdc.dialect.shapes import is_static
from sdc.fmt import format_bytes
from sdc.mlir import ir
from sdc.transforms.base import ModulePass

RECOMPUTED_ATTR = "sdc.recomputed"  # on a clone made in the backward
REPORT_ATTR = "sdc.recompute"  # on the module: what the pass planned
TRAINING_PREFIXES = ("grad.", "next.")  # results that are not the forward's
WEIGHT_OPS = ("sdc.parameter", "sdc.constant")
NOT_RECOMPUTED_FAMILIES = ("collective", "sharding", "custom")  # side effects, or opaque
HEAVY_FAMILIES = ("contraction", "convolution", "attention")  # cost a recomputation more


@dataclass(frozen=True)
class OpNode:
    """One op of the entry block: the value ids it reads and makes, whether it is forward, and, for
    a forward op that may be recomputed, what that costs (0: it may not)."""

    operands: tuple[int, ...]
    results: tuple[int, ...]
    forward: bool
    cost: int = 0


@dataclass
class JointGraph:
    """The forward+backward program as plain data. `sizes` holds the planned values' bytes (the
    intermediates of static size that are not weights or entry results); value ids not in
    `producer` are entry inputs."""

    ops: list[OpNode]
    sizes: dict[int, int]
    producer: dict[int, int] = field(default_factory=dict)

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
        """The planned values of the order with `recompute` cloned, with their lifetimes."""
        born: dict[tuple[int, bool], int] = {}
        last: dict[tuple[int, bool], int] = {}
        for t, (i, clone) in enumerate(self.schedule(recompute)):
            op = self.ops[i]
            reads_clones = clone or not op.forward
            for v in op.operands:
                p = self.producer.get(v)
                key = (v, reads_clones and p is not None and p in recompute)
                last[key] = t
            for v in op.results:
                born[(v, clone)] = t
        return [Buffer(f"{v}{'r' if clone else ''}", self.sizes[v], t, last.get((v, clone), t))
                for (v, clone), t in born.items() if v in self.sizes]

    def peak(self, recompute: frozenset[int]) -> int:
        return max_live_bytes(self.buffers(recompute), ALIGNMENT)


@dataclass(frozen=True)
class Choice:
    """What `choose` decided: the ops to recompute, the estimated peak before and after, and the
    greedy arena placement of the final order."""

    recompute: frozenset[int]
    peak_before: int
    peak: int
    arena: int


def choose(graph: JointGraph, budget: int | None) -> Choice:
    """The activations to recompute so that the estimated peak is at most `budget` (None: none).
    Raises SdcError, naming the lowest peak reached, when the budget cannot be met."""
    chosen: frozenset[int] = frozenset()
    before = peak = graph.peak(chosen)
    if budget is not None and peak > budget:
        area = _area(graph.buffers(chosen))
        while peak > budget:
            trials = []
            for move in graph.moves(chosen):
                bufs = graph.buffers(chosen | move)
                trials.append((max_live_bytes(bufs, ALIGNMENT), _area(bufs), graph.cost(move), sorted(move), move))
            fits = [t for t in trials if t[0] <= budget]
            best = min(fits, key=lambda t: (t[2], t[1], t[3])) if fits else min(trials, default=None)
            if best is None or (best[0], best[1]) >= (peak, area):
                break  # nothing left lowers the peak or shortens a lifetime
            peak, area, chosen = best[0], best[1], chosen | best[4]
        if peak > budget:
            raise SdcError(f"memory budget {format_bytes(budget)} ({budget} bytes) is below what recomputation "
                           f"reaches: the lowest planned peak is {format_bytes(peak)} ({peak} bytes)")
    return Choice(chosen, before, peak, place(graph.buffers(chosen), ALIGNMENT).size)


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
        try:
            choice = choose(graph, self.memory_budget or None)
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
                "recomputed": ir.IntegerAttr.get(i64, len(choice.recompute)),
            })


def report(module: ir.Operation) -> dict[str, int] | None:
    """What sdc-recompute recorded on `module` (None when it did not run)."""
    attrs = module.operation.attributes if hasattr(module, "operation") else module.attributes
    if REPORT_ATTR not in attrs:
        return None
    d = ir.DictAttr(attrs[REPORT_ATTR])
    return {k: ir.IntegerAttr(d[k]).value for k in ("budget", "peak_before", "peak", "arena", "recomputed")}


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


def _recompute_cost(op: ir.Operation) -> int:
    """What recomputing `op` costs (0: it may not be recomputed): one per op, more for the heavy
    families; a fusion group is the sum of its ops."""
    ops = _inner_ops(op) if op.regions else [op]
    if op.regions and op.name != "sdc.fusion":
        return 0
    cost = 0
    for o in ops:
        opdef = OPS.get(o.name[4:]) if o.name.startswith("sdc.") else None
        if opdef is None or not opdef.pure or opdef.family in NOT_RECOMPUTED_FAMILIES or o.regions:
            return 0
        cost += 8 if opdef.family in HEAVY_FAMILIES else 1
    return cost


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
        cost = _recompute_cost(op)
        weight = op.name in WEIGHT_OPS or (cost > 0 and bool(reads[i]) and all(v in weights for v in reads[i]))
        for r in op.results:
            if weight:
                weights.add(r)
            size = _bytes(r)
            if size is not None and not weight and r not in outputs:
                sizes[vid(r)] = size
        nodes.append(OpNode(tuple(vid(v) for v in reads[i]), tuple(vid(r) for r in op.results), i in forward,
                            cost if i in forward and not weight else 0))
    return JointGraph(nodes, sizes), reads


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
