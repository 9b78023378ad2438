"""sdc-layout-constraints: choose a physical layout for every tensor, and cast only where needed.

Options: target (str, default `sdc.target.DEFAULT_TARGET`, "cpu"): a name from the target registry;
its layout preferences (`Target.preferred_layouts`) make the layout table
(`sdc.transforms.layout_model.layout_table`).

The pass reads each function into a `LayoutProblem`, solves it for the least total cost over the
whole function (`layout_model.solve`: op preferences plus the bytes casts move, minimized exactly
by a min cut), and writes the answer back:

- every op whose results have rank >= 2 gets `sdc.layout`, the layout it writes its result in
  (an array of them for several results); a parameter or constant gets the layout it is stored in,
  so a weight is stored the way its consumer reads it and needs no cast;
- an `sdc.layout_cast` goes wherever a consumer reads a tensor in a layout it does not have, one per
  tensor and layout, with `sdc.reason` saying why; casts of weights fold into a copy of the weight
  stored in the wanted layout;
- layout casts already in the input are logical identities: they are removed first (casts that undo
  each other vanish with them), and the solver places its own.

Requests: `sdc.layout` present before the pass pins a layout: on an op, the layout its result must
have (the op must be able to run that way on the target: an impossible request is an error at the
op); on a parameter or constant, how it is stored; as an argument attribute, how the caller passes
the argument; as a result attribute, how the caller wants the result (default: row-major). Since the
pass writes `sdc.layout`, running it twice changes nothing. Dynamic dims count as
`layout_model.DYNAMIC_DIM` in byte estimates; they never turn the pass off. Run it before sdc-fuse.
"""

from __future__ import annotations

from dataclasses import dataclass

from sdc import dtypes
from sdc.diagnostics import DiagnosticSink
from sdc.dialect import attrs as A
from sdc.dialect.attrs import AttrError
from sdc.dialect.ir import defining_op, op_label, read_attrs, tensor_spec
from sdc.dialect.builder import create
from sdc.dialect.opdef import OPS, weight_ops
from sdc.dialect.shapes import is_static
from sdc.mlir import ir
from sdc.target import DEFAULT_TARGET, TARGETS, target_option_error
from sdc.transforms import layout_model as lm
from sdc.transforms.base import ModulePass, PassOptionError, walk_ops

LAYOUT_ATTR = "sdc.layout"
REASON_ATTR = "sdc.reason"


@dataclass(frozen=True)
class LayoutConstraintsPass(ModulePass):
    """Options: target (str, default "cpu", `sdc.target.DEFAULT_TARGET`): the target whose layout
    preferences decide; any name in the target registry."""

    name = "sdc-layout-constraints"
    summary = "assign per-target tensor layouts minimizing whole-function cost; insert minimal layout_casts"
    target: str = DEFAULT_TARGET
    always_written = ("target",)

    def __post_init__(self):
        if self.target not in TARGETS:
            raise PassOptionError(target_option_error(self.name, self.target))

    def run(self, module: ir.Operation, diag: DiagnosticSink) -> None:
        for fn in walk_ops(module, "func.func"):
            if fn.regions[0].blocks:
                _FunctionLayouts(fn, self.target, diag).run()


class _FunctionLayouts:
    def __init__(self, fn: ir.Operation, target: str, diag: DiagnosticSink):
        self.fn = fn
        self.block = fn.regions[0].blocks[0]
        self.target = target
        self.diag = diag
        self.tensors: list[lm.TensorInfo] = []
        self.values: list[ir.Value] = []
        self.index: dict = {}  # ir.Value -> tensor index
        self.ops: list[lm.OpInfo] = []
        self.op_handles: list[ir.Operation] = []
        self.weight_ops: dict[int, ir.Operation] = {}  # tensor index -> its parameter/constant op

    def run(self) -> None:
        body = [op.operation for op in self.block.operations]
        nested = [op for op in body for inner in walk_ops(op, "sdc.fusion")]
        if nested:
            self.diag.error(nested[0], "sdc-layout-constraints runs before sdc-fuse: found 'sdc.fusion'")
            return
        body = self._strip_layout_casts(body)
        errors_before = len(self.diag.diagnostics)
        problem = self._read(body)
        if len(self.diag.diagnostics) > errors_before or problem is None:
            return
        try:
            solution = lm.solve(problem)
        except lm.LayoutRequestError as e:
            where = self.op_handles[e.op] if e.op is not None else self.fn
            self.diag.error(where, str(e))
            return
        self._write(problem, solution)

    # ------------------------------------------------------------ reading

    def _strip_layout_casts(self, body: list[ir.Operation]) -> list[ir.Operation]:
        kept = []
        for op in body:
            if op.name == "sdc.layout_cast":
                op.results[0].replace_all_uses_with(op.operands[0])
                op.erase()
            else:
                kept.append(op)
        return kept

    def _tensor(self, value: ir.Value, source: str, pinned=None, label: str = "") -> int:
        spec = tensor_spec(value.type)
        shape = tuple(d if is_static(d) else None for d in spec.shape)
        self.tensors.append(lm.TensorInfo(shape, dtypes.itemsize(spec.dtype), source, pinned, label))
        self.values.append(value)
        self.index[value] = len(self.tensors) - 1
        return len(self.tensors) - 1

    def _read(self, body: list[ir.Operation]) -> lm.LayoutProblem | None:
        arg_pins = self._signature_pins("arg_attrs", len(self.block.arguments))
        for i, arg in enumerate(self.block.arguments):
            if not _is_ranked_tensor(arg.type):
                continue
            pin = self._checked_pin(self.fn, arg_pins[i], tensor_spec(arg.type).rank, f"argument #{i}")
            self._tensor(arg, "argument", pin, f"function argument #{i}")
        outputs = []
        for op in body:
            if op.name == "func.return":
                res_pins = self._signature_pins("res_attrs", len(op.operands))
                for i, value in enumerate(op.operands):
                    if value in self.index:
                        rank = self.tensors[self.index[value]].rank
                        outputs.append((self.index[value], self._checked_pin(self.fn, res_pins[i], rank,
                                                                             f"result #{i}")))
                continue
            if not op.name.startswith("sdc.") or op.name[4:] not in OPS:
                self.diag.error(op, f"sdc-layout-constraints cannot place '{op.name}'")
                return None
            self._read_op(op)
        return lm.LayoutProblem(self.target, self.tensors, self.ops, outputs)

    def _read_op(self, op: ir.Operation) -> None:
        opdef = OPS[op.name[4:]]
        ranks = [tensor_spec(r.type).rank for r in op.results]
        pins = self._op_pins(op, ranks)
        if op.name in weight_ops():
            t = self._tensor(op.results[0], "weight", pins[0] if pins else None, op_label(op))
            self.weight_ops[t] = op
            return
        try:
            attrs = read_attrs(opdef, op)
        except AttrError as e:
            self.diag.error(op, f"'{op.name}' {e}")
            return
        operands = tuple(self.index[v] for v in op.operands)
        results = tuple(self._tensor(r, "op") for r in op.results)
        axes, keepdims = _reduced_axes(attrs, self.tensors[operands[0]].rank if operands else 0)
        self.ops.append(lm.OpInfo(opdef.name, opdef.kind.value, operands, results, axes, keepdims,
                                  tuple(pins) if pins else (), op_label(op)))
        self.op_handles.append(op)

    def _signature_pins(self, key: str, n: int) -> list:
        if key not in self.fn.attributes:
            return [None] * n
        out = []
        for attrs in ir.ArrayAttr(self.fn.attributes[key]):
            attrs = ir.DictAttr(attrs)
            out.append(attrs[LAYOUT_ATTR] if LAYOUT_ATTR in attrs else None)
        return out + [None] * (n - len(out))

    def _op_pins(self, op: ir.Operation, ranks: list[int]) -> list:
        if LAYOUT_ATTR not in op.attributes:
            return []
        attr = op.attributes[LAYOUT_ATTR]
        if isinstance(attr, ir.ArrayAttr):
            items = list(attr)
            if len(items) != len(ranks):
                self.diag.error(op, f"'{LAYOUT_ATTR}' has {len(items)} layouts, the op has {len(ranks)} results")
                return []
        else:
            items = [attr] * len(ranks)
        return [self._checked_pin(op, item, rank, f"result #{i}") for i, (item, rank) in enumerate(zip(items, ranks))]

    def _checked_pin(self, where, attr, rank: int, what: str) -> lm.Perm | None:
        if attr is None:
            return None
        try:
            perm = A.to_python(_LAYOUT_SPEC, attr)
        except AttrError as e:
            self.diag.error(where, f"'{LAYOUT_ATTR}' of {what} {e}")
            return None
        if not lm.is_permutation(perm, rank):
            self.diag.error(where, f"requested layout {perm} of {what} is not a permutation of its {rank} dims")
            return None
        return tuple(perm)

    # ------------------------------------------------------------ writing

    def _write(self, problem: lm.LayoutProblem, solution: lm.LayoutSolution) -> None:
        for o, op in enumerate(self.op_handles):
            results = problem.ops[o].results
            if any(problem.tensors[t].rank >= 2 for t in results):
                layouts = [A.layout(list(solution.tensor_layouts[t])) for t in results]
                op.attributes[LAYOUT_ATTR] = layouts[0] if len(layouts) == 1 else ir.ArrayAttr.get(layouts)
        for t, op in self.weight_ops.items():
            if problem.tensors[t].rank >= 2:
                op.attributes[LAYOUT_ATTR] = A.layout(list(solution.tensor_layouts[t]))
        returns = [op.operation for op in self.block.operations if op.operation.name == "func.return"]
        for cast in solution.casts:
            self._insert_cast(cast, returns[0] if returns else None)

    def _consumer_ops(self, cast: lm.Cast, ret: ir.Operation | None) -> list[tuple[ir.Operation, int]]:
        out = []
        for o, i in cast.consumers:
            if o >= 0:
                out.append((self.op_handles[o], i))
            else:
                out.append((ret, i))
        return out

    def _insert_cast(self, cast: lm.Cast, ret: ir.Operation | None) -> None:
        value = self.values[cast.tensor]
        consumers = self._consumer_ops(cast, ret)
        positions = [op for op, _ in consumers]
        first = positions[0]
        for op in positions[1:]:
            if op.is_before_in_block(first):
                first = op
        if cast.tensor in self.weight_ops:  # fold: a copy of the weight, stored as the consumer reads it
            weight = self.weight_ops[cast.tensor]
            with ir.InsertionPoint(first):
                copy = weight.clone()
            copy.attributes[LAYOUT_ATTR] = A.layout(list(cast.target))
            new_value = copy.results[0]
        else:
            with ir.InsertionPoint(first):
                new = create("layout_cast", [value], {"layout": list(cast.target),
                                                      REASON_ATTR: ir.StringAttr.get(cast.reason)},
                             loc=_cast_location(value, first))
            new_value = new.results[0]
        for op, i in consumers:
            op.operands[i] = new_value


_LAYOUT_SPEC = OPS["layout_cast"].attrs["layout"]


def _is_ranked_tensor(t: ir.Type) -> bool:
    return isinstance(t.maybe_downcast() if hasattr(t, "maybe_downcast") else t, ir.RankedTensorType)


def _reduced_axes(attrs: dict, rank: int) -> tuple[tuple[int, ...], bool]:
    if "axes" in attrs and isinstance(attrs.get("axes"), list) and "keepdims" in attrs:
        axes = attrs["axes"] or list(range(rank))
        return tuple(sorted(a % rank for a in axes)) if rank else (), bool(attrs["keepdims"])
    if "axis" in attrs and "keepdims" in attrs and rank:
        return (attrs["axis"] % rank,), bool(attrs["keepdims"])
    return (), True


def _cast_location(value: ir.Value, consumer: ir.Operation) -> ir.Location:
    owner = defining_op(value)
    return consumer.location if owner is None else owner.location
