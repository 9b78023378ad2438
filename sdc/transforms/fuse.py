"""sdc-fuse: group ops into kernels, one `sdc.fusion` region per group of two or more ops.

Options: target (str, default `sdc.target.DEFAULT_TARGET`, "cpu"): a name from the target registry;
its machine balance (`Target.flops_per_byte`) decides recomputation.

Groups (formed greedily in program order; each op joins the group of one of its producers, or
starts its own):
- chains of elementwise ops (and inference batch norm, a per-channel affine map);
- a reduction with its elementwise prologue and epilogue: a softmax or a layer/rms norm written out
  as reductions and elementwise ops is one group, as long as its reductions share one domain
  (input shape and axes);
- a matmul, convolution or pooling window with its elementwise epilogue (bias, activation,
  residual add, cast); it reads its operands from memory, so it starts its group;
- a layout_cast folds into the group of its producer (the group writes its output in the new
  layout) or, when the producer cannot take it, into the group of its consumer (the group reads its
  input that way); a group of casts only takes a convolution or matmul after it;
- on targets with a Triton backend, once those groups are formed, an attention's three groups
  (QK^T with its scale and mask, the softmax, PV) merge into one of kind "attention" where
  `attention_pattern.match_attention` accepts them (one flash kernel, docs/codegen.md).

A group never joins ops on different devices, ranks or stages (the `sdc.device`, `sdc.rank` and
`sdc.stage` attributes), never takes a collective or an op it cannot generate code for (shape ops,
gathers, ...: those stay alone), never takes two ops whose results have different layouts
(`sdc.layout`) at the same rank, and stays convex: no path leaves it and comes back, so the groups
still run in some order. IRDL gives every result of one `sdc.fusion` one type: a group whose
outputs would differ in type is split, by leaving the ops that make the odd outputs on their own.

Cost model (memory traffic, in bytes; dynamic dims count as `layout_model.DYNAMIC_DIM`):
- a kernel reads each value it takes from outside (inputs, weights) and writes each value used
  after it; a value inside a group never touches memory;
- recomputation: a cheap elementwise op (one result, at most CHEAP_FLOPS per element, operands
  from outside its group) whose result leaves its group for other groups that could compute it
  themselves is copied into them when
      copies x flops / Target.flops_per_byte  <  traffic saved,
  the traffic saved being the kernels' traffic without the copy minus with it (the value's write
  and reads, less the extra reads of its operands). Anything else is never duplicated.

`plan_groups` does the grouping on plain data (`FusionGraph`); the pass reads the IR into it and
builds the regions. `traffic` and `FusionReport` give the bytes before and after.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Hashable, Sequence

from sdc import dtypes
from sdc.diagnostics import DiagnosticSink
from sdc.dialect.attrs import AttrError
from sdc.dialect.builder import create_fusion, create_yield
from sdc.dialect.ir import read_attrs, tensor_spec
from sdc.dialect.hooks import TRANSCENDENTAL
from sdc.dialect.opdef import OPS, OpDef, weight_ops
from sdc.dialect.shapes import is_static
from sdc.dialect.structure import FUSION
from sdc.mlir import ir
from sdc.target import DEFAULT_TARGET, TARGETS, get_target, target_option_error
from sdc.transforms import layout_model as lm
from sdc.transforms.base import ModulePass, PassOptionError, walk_ops
from sdc.transforms.fusion_graph import (ANCHORS, BARRIER, ELEMENTWISE, LAYOUT, OPAQUE, REDUCTION,  # noqa: F401
                                         FusionGraph, Group, Grouping, Node, Value)

CHEAP_FLOPS = TRANSCENDENTAL  # elementwise ops at most this many flops per element may be recomputed
PLACE_ATTRS = ("sdc.device", "sdc.rank", "sdc.stage")

# ---------------------------------------------------------------- grouping


class _Greedy:
    def __init__(self, graph: FusionGraph, isolated: set[int]):
        self.graph = graph
        self.isolated = isolated
        self.group_of: list[int] = [-1] * len(graph.nodes)
        self.members: list[list[int]] = []
        self.kinds: list[str] = []
        self.sealed: list[bool] = []
        # reachability between groups, kept transitively closed as ops join: bit h of ancestors[g]
        # is set when some path of values leads from group h to group g (descendants: the reverse)
        self.ancestors: list[int] = []
        self.descendants: list[int] = []
        self.layouts: list[dict[int, tuple]] = []  # group -> rank -> layout it computes in
        self.domains: list[Hashable] = []
        self.places: list[Hashable] = []

    def run(self) -> list[list[int]]:
        for n, node in enumerate(self.graph.nodes):
            self._place(n, node)
        return self.members

    def _producer_group(self, v: int) -> int | None:
        p = self.graph.values[v].producer
        return None if p is None else self.group_of[p]

    def _place(self, n: int, node: Node) -> None:
        if node.kind in (OPAQUE, BARRIER) or n in self.isolated:
            self._new(n, node, sealed=True)
            return
        candidates: list[int] = []
        for v in node.operands:
            g = self._producer_group(v)
            if g is not None and g not in candidates:
                candidates.append(g)
        for g in candidates:
            if self._can_join(n, node, g):
                self._join(n, node, g)
                return
        self._new(n, node, sealed=False)

    def _only_casts(self, g: int) -> bool:
        return all(self.graph.nodes[m].kind == LAYOUT for m in self.members[g])

    def _can_join(self, n: int, node: Node, g: int) -> bool:
        if self.sealed[g] or self.places[g] != node.place:
            return False
        kind = self.kinds[g]
        if node.kind in ANCHORS:
            if not self._only_casts(g):
                return False  # a matmul/conv/pool reads its operands from memory; casts before it fold in
        elif node.kind == REDUCTION:
            if kind in ANCHORS:
                return False
            if self.domains[g] is not None and self.domains[g] != node.domain:
                return False
        # an op inside a group reads no layout_cast result of that group, unless the group is casts only
        if not self._only_casts(g):
            for v in node.operands:
                p = self.graph.values[v].producer
                if p is not None and self.group_of[p] == g and self.graph.nodes[p].kind == LAYOUT:
                    return False
        if node.kind != LAYOUT:
            for r in node.results:
                val = self.graph.values[r]
                have = self.layouts[g].get(val.rank)
                if have is not None and not lm.equivalent(val.shape, have, val.layout or lm.identity(val.rank)):
                    return False
        for v in node.operands:  # convexity: no path from g through another group back to this op
            h = self._producer_group(v)
            if h is not None and h != g and (self.ancestors[h] >> g) & 1:
                return False
        return True

    def _link(self, node: Node, g: int) -> None:
        """Record that group g now reads the groups making node's operands."""
        for v in node.operands:
            h = self._producer_group(v)
            if h is None or h == g or (self.ancestors[g] >> h) & 1:
                continue
            up = self.ancestors[h] | (1 << h)
            down = self.descendants[g] | (1 << g)
            for a in _bits(up):
                self.descendants[a] |= down
            for d in _bits(down):
                self.ancestors[d] |= up

    def _join(self, n: int, node: Node, g: int) -> None:
        self._link(node, g)
        self.members[g].append(n)
        self.group_of[n] = g
        if node.kind in ANCHORS:
            self.kinds[g] = node.kind
        elif node.kind == REDUCTION:
            if self.kinds[g] in (ELEMENTWISE, LAYOUT):
                self.kinds[g] = REDUCTION
            self.domains[g] = node.domain
        elif node.kind == ELEMENTWISE and self.kinds[g] == LAYOUT:
            self.kinds[g] = ELEMENTWISE
        self._note_layouts(node, g)

    def _new(self, n: int, node: Node, sealed: bool) -> None:
        g = len(self.members)
        self.members.append([n])
        self.kinds.append(node.kind)
        self.sealed.append(sealed)
        self.ancestors.append(0)
        self.descendants.append(0)
        self._link(node, g)
        self.layouts.append({})
        self.domains.append(node.domain if node.kind == REDUCTION else None)
        self.places.append(node.place)
        self.group_of[n] = g
        self._note_layouts(node, g)

    def _note_layouts(self, node: Node, g: int) -> None:
        if node.kind == LAYOUT:
            return
        for r in node.results:
            val = self.graph.values[r]
            self.layouts[g].setdefault(val.rank, val.layout or lm.identity(val.rank))


def _bits(mask: int):
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def kernel_order(graph: FusionGraph, groups: Sequence[Sequence[int]]) -> list[int]:
    """The groups in an order where each runs after the groups it reads from; ValueError if the
    groups are not convex (no such order exists)."""
    import heapq

    holder = {n: g for g, members in enumerate(groups) for n in members}
    reads: list[set[int]] = [set() for _ in groups]
    for g, members in enumerate(groups):
        for n in members:
            for v in graph.nodes[n].operands:
                p = graph.values[v].producer
                if p is not None and p not in members:
                    reads[g].add(holder[p])
    waiting = [len(r - {g}) for g, r in enumerate(reads)]
    readers: list[list[int]] = [[] for _ in groups]
    for g, r in enumerate(reads):
        for h in r - {g}:
            readers[h].append(g)
    ready = [g for g, w in enumerate(waiting) if not w]
    heapq.heapify(ready)
    order = []
    while ready:
        g = heapq.heappop(ready)
        order.append(g)
        for r in readers[g]:
            waiting[r] -= 1
            if not waiting[r]:
                heapq.heappush(ready, r)
    if len(order) != len(groups):
        raise ValueError("kernel groups read each other in a cycle")
    return order


def _holders(groups: Sequence[Sequence[int]]) -> dict[int, set[int]]:
    out: dict[int, set[int]] = defaultdict(set)
    for g, members in enumerate(groups):
        for n in members:
            out[n].add(g)
    return out


def group_outputs(graph: FusionGraph, groups: Sequence[Sequence[int]]) -> list[list[int]]:
    """The values each group writes for others: a result leaves when it is returned or read by an op
    in a group without its own copy of the producer. A node held by several groups writes from the
    first of them only."""
    consumers = graph.consumers()
    returned = set(graph.outputs)
    holders = _holders(groups)
    written: set[int] = set()
    out: list[list[int]] = []
    for members in groups:
        leaving = []
        for n in members:
            for r in graph.nodes[n].results:
                if r in written:
                    continue
                if r in returned or any(not (holders[n] & holders[c]) for c in consumers[r]):
                    leaving.append(r)
                    written.add(r)
        out.append(leaving)
    return out


def traffic(graph: FusionGraph, groups: Sequence[Sequence[int]]) -> int:
    """Bytes the kernels move: each group reads the values it takes from outside and writes the
    values others need (see `group_outputs`)."""
    total = 0
    for members, leaving in zip(groups, group_outputs(graph, groups)):
        inside = set(members)
        reads = {v for n in members for v in graph.nodes[n].operands
                 if graph.values[v].producer is None or graph.values[v].producer not in inside}
        total += sum(graph.values[v].nbytes for v in reads | set(leaving))
    return total


def traffic_unfused(graph: FusionGraph) -> int:
    """Bytes moved with one kernel per op."""
    return traffic(graph, [[n] for n in range(len(graph.nodes))])


def plan_groups(graph: FusionGraph, target: str = DEFAULT_TARGET) -> Grouping:
    """Kernel groups for `graph` (see the module docstring for the rules and the cost model)."""
    isolated: set[int] = set()
    while True:
        groups = [list(m) for m in _Greedy(graph, isolated).run()]
        recomputed = _recompute(graph, groups, get_target(target).flops_per_byte)
        odd = _odd_outputs(graph, groups) - isolated
        if not odd:
            break
        isolated |= odd
    kernel_order(graph, groups)  # the groups are convex: some order runs them all
    home = [-1] * len(graph.nodes)
    for g, members in enumerate(groups):
        for n in members:
            if home[n] < 0:
                home[n] = g
    return Grouping([Group(sorted(m), _group_kind(graph, m)) for m in groups], home, recomputed)


def _group_kind(graph: FusionGraph, members: Sequence[int]) -> str:
    kinds = {graph.nodes[n].kind for n in members}
    for kind in (*ANCHORS, REDUCTION, ELEMENTWISE, LAYOUT, OPAQUE, BARRIER):
        if kind in kinds:
            return kind
    return ELEMENTWISE


def _group_traffic(graph: FusionGraph, members: Sequence[int], holders: dict[int, set[int]],
                   consumers: list[list[int]], returned: set[int]) -> int:
    """One group's share of `traffic`: what it reads from outside and what it writes for others."""
    inside = set(members)
    moved: set[int] = set()
    for n in members:
        for v in graph.nodes[n].operands:
            if graph.values[v].producer not in inside:
                moved.add(v)
        for r in graph.nodes[n].results:
            if r in returned or any(not (holders[n] & holders[c]) for c in consumers[r]):
                moved.add(r)
    return sum(graph.values[v].nbytes for v in moved)


def _recompute(graph: FusionGraph, groups: list[list[int]], flops_per_byte: float) -> list[tuple[int, int]]:
    """Copy cheap elementwise ops into the groups that read their results, where the cost model says so."""
    consumers = graph.consumers()
    returned = set(graph.outputs)
    holders = _holders(groups)
    done: list[tuple[int, int]] = []
    for n, node in enumerate(graph.nodes):
        if not node.cheap or node.results[0] in returned or len(holders[n]) != 1:
            continue
        (g,) = holders[n]
        if any(graph.values[v].producer in groups[g] for v in node.operands):
            continue  # its operands are made in its own group: a copy elsewhere would need them written
        readers = consumers[node.results[0]]
        outside = [c for c in readers if g not in holders[c]]
        targets = sorted({h for c in outside for h in holders[c]})
        if not outside or any(graph.nodes[c].kind not in (ELEMENTWISE, REDUCTION, LAYOUT) for c in outside) \
                or any(_sealed(graph, groups[h]) or not _compatible(graph, node, groups[h]) for h in targets):
            continue
        involved = [g, *targets]
        before = sum(_group_traffic(graph, groups[h], holders, consumers, returned) for h in involved)
        trial = {h: sorted(groups[h] + [n]) for h in targets}
        trial[g] = list(groups[g])
        copies = len(targets)
        if len(outside) == len(readers):  # nothing in its own group reads it any more
            trial[g].remove(n)
            copies -= 1
        trial_holders = {**holders, n: (set(targets) | ({g} if n in trial[g] else set()))}
        after = sum(_group_traffic(graph, trial[h], trial_holders, consumers, returned) for h in involved)
        if copies * node.flops / flops_per_byte < before - after:
            for h, members in trial.items():
                groups[h][:] = members
            holders[n] = trial_holders[n]
            done.extend((n, h) for h in targets)
    kept = [g for g, m in enumerate(groups) if m]  # a group all of whose ops were copied out is gone
    renumber = {old: new for new, old in enumerate(kept)}
    groups[:] = [groups[g] for g in kept]
    return [(n, renumber[h]) for n, h in done]  # the copies' groups as the caller will number them


def _compatible(graph: FusionGraph, node: Node, members: Sequence[int]) -> bool:
    """Whether a copy of `node` may join a group: same place, and the same layout at its rank."""
    mine = graph.values[node.results[0]]
    for m in members:
        other = graph.nodes[m]
        if other.place != node.place:
            return False
        for r in other.results:
            val = graph.values[r]
            if other.kind != LAYOUT and val.rank == mine.rank and not lm.equivalent(
                    mine.shape, val.layout or lm.identity(val.rank), mine.layout or lm.identity(mine.rank)):
                return False
    return True


def _sealed(graph: FusionGraph, members: Sequence[int]) -> bool:
    return len(members) == 1 and graph.nodes[members[0]].kind in (OPAQUE, BARRIER)


def _odd_outputs(graph: FusionGraph, groups: list[list[int]]) -> set[int]:
    """Nodes whose results leave a fused group with a type other than the group's main output type."""
    odd: set[int] = set()
    for members, leaving in zip(groups, group_outputs(graph, groups)):
        if len(members) < 2 or len({graph.values[r].type for r in leaving}) <= 1:
            continue
        main = max(leaving, key=lambda r: (graph.values[r].nbytes, r))
        odd |= {graph.values[r].producer for r in leaving if graph.values[r].type != graph.values[main].type}
    return odd


# ---------------------------------------------------------------- the report


@dataclass
class FusionReport:
    kernels_before: int
    kernels_after: int
    groups: int  # fused groups (sdc.fusion regions)
    bytes_before: int
    bytes_after: int
    recomputed: int


def report(graph: FusionGraph, grouping: Grouping) -> FusionReport:
    kernels = [g.members for g in grouping.groups]
    return FusionReport(
        kernels_before=len(graph.nodes), kernels_after=len(kernels),
        groups=sum(1 for g in grouping.groups if g.fused),
        bytes_before=traffic_unfused(graph), bytes_after=traffic(graph, kernels),
        recomputed=len(grouping.recomputed))


# ---------------------------------------------------------------- the pass


@dataclass(frozen=True)
class FusePass(ModulePass):
    """Options: target (str, default "cpu", `sdc.target.DEFAULT_TARGET`): the target whose machine
    balance decides recomputation; any name in the target registry."""

    name = "sdc-fuse"
    summary = "group ops into kernels (sdc.fusion regions): elementwise chains, reductions, matmul/conv epilogues"
    target: str = DEFAULT_TARGET
    always_written = ("target",)

    def __post_init__(self):
        if self.target not in TARGETS:
            raise PassOptionError(target_option_error(self.name, self.target))

    def run(self, module: ir.Operation, diag: DiagnosticSink) -> None:
        for fn in walk_ops(module, "func.func"):
            if fn.regions[0].blocks:
                fuse_function(fn, self.target, diag)


class _Reader:
    """The function's top-level ops as a FusionGraph."""

    def __init__(self, fn: ir.Operation):
        self.block = fn.regions[0].blocks[0]
        self.values: list[Value] = []
        self.value_index: dict = {}
        self.nodes: list[Node] = []
        self.ops: list[ir.Operation] = []  # node -> op
        self.outputs: list[int] = []

    def value(self, v: ir.Value, producer: int | None) -> int:
        if v in self.value_index:
            return self.value_index[v]
        t = v.type
        ranked = isinstance(t.maybe_downcast() if hasattr(t, "maybe_downcast") else t, ir.RankedTensorType)
        if ranked:
            spec = tensor_spec(t)
            shape = tuple(d if is_static(d) else None for d in spec.shape)
            nbytes = lm.numel(shape) * dtypes.itemsize(spec.dtype)
        else:
            shape, nbytes = (), 0
        self.values.append(Value(nbytes, str(t), len(shape), shape, None, producer))
        self.value_index[v] = len(self.values) - 1
        return len(self.values) - 1

    def read(self) -> FusionGraph:
        for arg in self.block.arguments:
            self.value(arg, None)
        for op in self.block.operations:
            op = op.operation
            if op.name == "func.return":
                self.outputs = [self.value(v, None) for v in op.operands]
                continue
            if op.name in weight_ops():
                for r in op.results:
                    self.value(r, None)
                continue
            self._node(op)
        return FusionGraph(self.values, self.nodes, self.outputs)

    def _node(self, op: ir.Operation) -> None:
        n = len(self.nodes)
        if op.name == FUSION or not op.name.startswith("sdc.") or op.name[4:] not in OPS:
            operands = [self.value(v, None) for v in _captured(op)]
            kind, flops, domain = (OPAQUE if op.name == FUSION else BARRIER), 0, None
        else:
            opdef = OPS[op.name[4:]]
            operands = [self.value(v, None) for v in op.operands]
            kind = opdef.fusion
            try:
                attrs = read_attrs(opdef, op)
            except AttrError:
                attrs = {}
            flops = opdef.cost([tensor_spec(v.type) for v in op.operands], [tensor_spec(r.type) for r in op.results],
                               attrs).flops
            domain = _domain(opdef, op, attrs) if kind == REDUCTION else None
        results = [self.value(r, n) for r in op.results]
        layouts = _result_layouts(op)
        for r, layout in zip(results, layouts):
            self.values[r].layout = layout
        place = tuple(str(op.attributes[a]) if a in op.attributes else None for a in PLACE_ATTRS)
        self.nodes.append(Node(kind, tuple(operands), tuple(results), flops, domain, place, op.name))
        self.ops.append(op)


def _captured(op: ir.Operation) -> list[ir.Value]:
    """Values an op reads, its regions' reads from outside included."""
    inside: set = set()
    reads: list = []

    def visit(inner):
        inner = inner.operation if hasattr(inner, "operation") else inner
        for v in inner.operands:
            if v not in inside and v not in reads:
                reads.append(v)
        for r in inner.results:
            inside.add(r)
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return [v for v in reads if v not in inside]


def _result_layouts(op: ir.Operation) -> list:
    if "sdc.layout" not in op.attributes:
        return [None] * len(op.results)
    from sdc.dialect.attrs import to_python

    spec = OPS["layout_cast"].attrs["layout"]
    attr = op.attributes["sdc.layout"]
    items = list(attr) if isinstance(attr, ir.ArrayAttr) else [attr] * len(op.results)
    out = []
    for item in items:
        try:
            out.append(tuple(to_python(spec, item)))
        except AttrError:
            out.append(None)
    if op.name == "sdc.layout_cast":
        try:
            out = [tuple(to_python(spec, op.attributes["layout"]))]
        except AttrError:
            pass
    return out + [None] * (len(op.results) - len(out))


def _domain(opdef: OpDef, op: ir.Operation, attrs: dict) -> Hashable:
    spec = tensor_spec(op.operands[0].type)
    rank = spec.rank
    if opdef.reduced_axes is not None:
        axes = tuple(opdef.reduced_axes(rank, attrs))
    elif "axes" in attrs and isinstance(attrs.get("axes"), list):
        axes = tuple(sorted(a % rank for a in attrs["axes"])) if attrs["axes"] else tuple(range(rank))
    elif "axis" in attrs and rank:
        a = attrs["axis"] % rank
        axes = (a,)
    else:
        axes = tuple(range(2, rank))  # global pooling
    return (str(spec.shape), axes)


def read_graph(fn: ir.Operation) -> FusionGraph:
    """A function's top-level ops as a FusionGraph (parameters and constants are values from outside)."""
    return _Reader(fn).read()


def fuse_function(fn: ir.Operation, target: str, diag: DiagnosticSink | None = None) -> tuple[FusionGraph, Grouping]:
    """Group the function's ops and build the `sdc.fusion` regions; returns the graph and grouping."""
    reader = _Reader(fn)
    graph = reader.read()
    grouping = plan_groups(graph, target)
    if get_target(target).has_triton_backend:  # an attention's three groups become one flash kernel
        from sdc.transforms.attention_pattern import fuse_entries, merge_attention_groups

        grouping = merge_attention_groups(graph, grouping, *fuse_entries(reader.ops, reader.value_index))
    _build(reader, graph, grouping)
    return graph, grouping


def _build(reader: _Reader, graph: FusionGraph, grouping: Grouping) -> None:
    block = reader.block
    ret = next(op.operation for op in block.operations if op.operation.name == "func.return")
    position = {op.operation: i for i, op in enumerate(block.operations)}
    outputs = group_outputs(graph, [g.members for g in grouping.groups])
    firsts = [min(position[reader.ops[n]] for n in group.members) for group in grouping.groups]
    rank: dict = {}  # top-level op -> where it goes among equals (its first member's old position)
    moved: set[int] = set()
    for group, leaving, first in zip(grouping.groups, outputs, firsts):
        if not group.fused:
            moved.add(group.members[0])
            continue
        rank[_make_fusion(reader, group, leaving, moved, ret)] = first
    _reorder(block, ret, rank, position)


def _make_fusion(reader: _Reader, group: Group, leaving: list[int], moved: set[int],
                 ret: ir.Operation) -> ir.Operation:
    values = {i: v for v, i in reader.value_index.items()}
    loc = reader.ops[group.members[-1]].location
    fusion = create_fusion(group.kind, [values[r].type for r in leaving], loc=loc, ip=ir.InsertionPoint(ret))
    body = fusion.regions[0].blocks[0]
    terminator = create_yield([values[r] for r in leaving], loc=loc, ip=ir.InsertionPoint(body))
    copies: dict = {}  # a value of a recomputed op -> its copy's value in this group
    for n in group.members:
        op = reader.ops[n]
        if n not in moved:
            op.move_before(terminator)
            moved.add(n)
            continue
        copy = op.clone(ip=ir.InsertionPoint(terminator))
        copies.update(zip(op.results, copy.results))
    for inner in body.operations:
        inner = inner.operation
        for i, v in enumerate(inner.operands):
            if v in copies and _owner(copies[v]) != inner:
                inner.operands[i] = copies[v]
    for r, result in zip(leaving, fusion.results):
        for use in list(values[r].uses):
            owner = use.owner.operation if hasattr(use.owner, "operation") else use.owner
            if owner.parent != fusion:
                owner.operands[use.operand_number] = result
    return fusion


def _owner(value: ir.Value):
    owner = value.owner
    return owner.operation if hasattr(owner, "operation") else owner


def _reorder(block, ret: ir.Operation, rank: dict, position: dict) -> None:
    """Put the top-level ops in an order where every value is defined before its use (the groups are
    convex, so one exists), keeping the original order where it can."""
    import heapq

    everything = [op.operation for op in block.operations if op.operation != ret]
    keys = {op: rank.get(op, position.get(op, len(position))) for op in everything}
    produced_by = {r: op for op in everything for r in op.results}
    deps = {op: {produced_by[v] for v in _captured(op) if v in produced_by} - {op} for op in everything}
    waiting_on = {op: len(d) for op, d in deps.items()}
    users: dict = defaultdict(list)
    for op, d in deps.items():
        for dep in d:
            users[dep].append(op)
    serial = {op: i for i, op in enumerate(everything)}
    ready = [(keys[op], serial[op]) for op in everything if not waiting_on[op]]
    heapq.heapify(ready)
    order = []
    while ready:
        _, i = heapq.heappop(ready)
        op = everything[i]
        order.append(op)
        for user in users[op]:
            waiting_on[user] -= 1
            if not waiting_on[user]:
                heapq.heappush(ready, (keys[user], serial[user]))
    if len(order) != len(everything):  # pragma: no cover - convex groups always leave an order
        raise RuntimeError("sdc-fuse built a cycle between kernel groups")
    for op in order:
        op.move_before(ret)
