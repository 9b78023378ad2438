"""The lowering of a kernel group to a `KernelProgram` (program.py): the base class every template
builds on, and the `elementwise` and `row` templates themselves.

The input is what the planner has for one `launch` step: its ops (plan.json op entries, in order),
the values it reads and the values it writes, and the values table.

- `elementwise`: the domain is the group's result shape; every value is computed at each index of
  it, so broadcasting is index arithmetic (each argument's stride is 0 along a dim it broadcasts).
- `row`: the group holds row reductions (softmax, log_softmax, layer_norm, rms_norm, reduce_*)
  over the last dim of one domain (fuse.py groups only reductions that share one); one program
  per row. Values are *row* values (vary along the last dim) or *scalar* ones (one per row:
  reduction results and what is computed from them alone).

A `gather` (an embedding lookup: `data[..., indices, ...]` along one axis) runs in the elementwise
template: each gathered table adds one domain dim after the iterated ones (`KernelProgram.iterated`),
its size along the axis, which the grid does not run over; the table's map names that dim there, so
the launcher passes its size and the table's stride along the axis like any other, and the kernel
loads `table + offset + index * stride`. A negative index counts from the end as in the reference;
one out of range reads 0 (a kernel cannot raise; the reference raises an IndexError).

How a value's dims map onto the domain follows numpy broadcasting (right-aligned), except where an
op says otherwise (batch_norm's per-channel operands, a norm's scale and bias, a reduction without
keepdims). The maps are found backwards from the results; a value that two readers would map
differently, or any op or dtype outside the renderer's set, raises `LoweringError`, and the group
keeps the reference backend.

What the lowering knows about an op is on its OpDef (sdc/dialect/hooks.py): `kernel_form` (one node
the renderer renders, written out here in `_lower_<op>`, or a row reduction), `row_reduce` (a plain
reduction's primitive), `vector_operands` (operands indexed by one dim of operand 0) and
`kernel_floats_only` (integer operands keep the reference).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from sdc import dtypes
from sdc.codegen.kernel.program import (ELEMENTWISE, KERNEL_DTYPES, ROW, KernelProgram, LoweringError, Node,
                                        TensorArg)
from sdc.dialect.hooks import KernelForm
from sdc.dialect.opdef import all_ops, get_op
from sdc.runtime.format import decode_value


def is_row_op(name: str) -> bool:
    """Whether ops named `name` are row reductions (the row template's; `OpDef.kernel_form`)."""
    op = all_ops().get(name)
    return op is not None and op.kernel_form == KernelForm.ROW


class _Lowering:
    def __init__(self, ops, inputs, outputs, values, supported, weight):
        self.ops = list(ops)
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.values = values
        self.supported = supported
        self.weight = weight
        self.nodes: list[Node] = []
        self.env: dict[str, int] = {}  # value id -> node
        self.args: list[TensorArg] = []
        self.maps: dict[str, tuple[int | None, ...]] = {}

    def run(self) -> KernelProgram:
        if not self.outputs:
            raise LoweringError("the group writes nothing")
        for e in self.ops:
            self._check_op(e)
        template = ROW if any(is_row_op(e["op"]) for e in self.ops) else ELEMENTWISE
        domain_shape = self._domain_shape(template)
        self.rank = len(domain_shape)
        if template == ROW and (self.rank == 0 or domain_shape[-1] == 1):
            raise LoweringError("a row reduction over a dim of size 1")
        self.identity = tuple(None if d == 1 else i for i, d in enumerate(domain_shape))
        self.template = template
        self.tables: dict[str, int] = {}  # a gather's result -> the domain dim of its table's size along the axis
        for e in self.ops:
            if e["op"] == "gather":
                data = self.values[e["inputs"][0]]["shape"]
                self.tables[e["outputs"][0]] = len(domain_shape)
                domain_shape = [*domain_shape, data[e["attrs"]["axis"] % len(data)]]
        self.domain = tuple(d if isinstance(d, int) else None for d in domain_shape)
        self._assign_maps()
        live = self._live_ops()
        for e in live:
            self._lower(e)
        return KernelProgram(template, self.domain, self.args, self._results(), self.nodes, [e["op"] for e in live],
                             iterated=self.rank if self.tables else None)

    def _results(self) -> list[tuple[TensorArg, int]]:
        results = []
        producers = {v: e for e in self.ops for v in e["outputs"]}
        for vid in self.outputs:
            v = self.values[vid]
            layout = None
            e = producers[vid]
            if e["op"] == "layout_cast" and list(e["attrs"]["layout"]) != list(range(len(v["shape"]))):
                layout = tuple(e["attrs"]["layout"])
            results.append((TensorArg(vid, v["dtype"], self.maps[vid], layout), self.env[vid]))
        return results

    # ------------------------------------------------------------ checks

    def _check_op(self, e: Mapping) -> None:
        name = e["op"]
        op = all_ops().get(name)
        # an op the lowering writes out itself (in primitives every renderer has, or in its row template)
        # needs no form of the renderer's
        if op is None or (name not in self.supported and op.kernel_form == KernelForm.RENDERED):
            raise LoweringError(f"no kernel template or renderer form for 'sdc.{name}'")
        if len(e["outputs"]) != 1:
            raise LoweringError(f"'sdc.{name}' has {len(e['outputs'])} results")
        for vid in [*e["inputs"], *e["outputs"]]:
            dtype = self.values[vid]["dtype"]
            if dtype not in KERNEL_DTYPES:
                raise LoweringError(f"'sdc.{name}' on {dtype}")
        x = self.values[e["inputs"][0]] if e["inputs"] else None
        if op.kernel_form == KernelForm.ROW:
            if not dtypes.is_float(x["dtype"]):
                raise LoweringError(f"'sdc.{name}' on {x['dtype']} (row kernels reduce floats)")
            rank = len(x["shape"])
            if rank == 0:
                raise LoweringError(f"'sdc.{name}' of a rank-0 tensor")
            a = e["attrs"]
            if op.row_reduce is not None:
                axes = sorted(ax % rank for ax in a.get("axes") or range(rank)) if rank else []
                if axes != [rank - 1]:
                    raise LoweringError(f"'sdc.{name}' over axes {axes} (row kernels reduce the last dim)")
            elif a.get("axis", -1) % rank != rank - 1:
                raise LoweringError(f"'sdc.{name}' along axis {a.get('axis')} (row kernels reduce the last dim)")
        if op.kernel_floats_only and not dtypes.is_float(x["dtype"]):
            raise LoweringError(f"integer 'sdc.{name}'")
        if name == "pow" and _scalar(self.weight(e["inputs"][1])) not in POW_EXPONENTS:
            raise LoweringError("'sdc.pow' with an exponent other than a constant " + "/".join(map(str, POW_EXPONENTS)))
        if name == "gather":
            if any(is_row_op(o["op"]) for o in self.ops):
                raise LoweringError("'sdc.gather' in a row kernel (it runs in the elementwise template)")
            if e["inputs"][0] not in self.inputs:
                raise LoweringError("'sdc.gather' of a table the group computes (it loads the table from memory)")
            if not dtypes.is_integer(self.values[e["inputs"][1]]["dtype"]):
                raise LoweringError(f"'sdc.gather' with {self.values[e['inputs'][1]]['dtype']} indices")

    def _domain_shape(self, template: str) -> list:
        shapes = {tuple(self.values[v]["shape"]) for v in self.outputs}
        if template == ELEMENTWISE:
            if len(shapes) != 1:
                raise LoweringError(f"results of different shapes {sorted(map(list, shapes))}")
            return list(next(iter(shapes)))
        domains = {tuple(self.values[e["inputs"][0]]["shape"]) for e in self.ops if is_row_op(e["op"])}
        if len(domains) != 1:
            raise LoweringError(f"reductions over different shapes {sorted(map(list, domains))}")
        return list(next(iter(domains)))

    # ------------------------------------------------------------ index maps

    def _assign_maps(self) -> None:
        """Each value's map onto the domain, from the results backwards."""
        produced = {v: e for e in self.ops for v in e["outputs"]}
        for vid in self.outputs:
            e = produced[vid]
            rank = len(self.values[vid]["shape"])
            if get_op(e["op"]).row_reduce is not None and not e["attrs"].get("keepdims"):
                self._set_map(vid, tuple(range(self.rank - 1)))
            else:
                self._set_map(vid, self._right_aligned(rank, tuple(range(self.rank)), vid))
        for e in reversed(self.ops):
            out = e["outputs"][0]
            if out not in self.maps:
                continue  # nobody reads it: the kernel does not compute it
            self._map_operands(e, self.maps[out])

    def _map_operands(self, e: Mapping, m: tuple) -> None:
        """The maps of op `e`'s operands, given the map `m` of its result."""
        name = e["op"]
        if name == "gather":  # out = data[:axis] + indices + data[axis+1:]: the table's axis is its own dim
            data, indices = e["inputs"]
            rank = len(self.values[data]["shape"])
            axis, count = e["attrs"]["axis"] % rank, len(self.values[indices]["shape"])
            self._set_map(indices, m[axis:axis + count])
            self._set_map(data, (*m[:axis], self.tables[e["outputs"][0]], *m[axis + count:]))
            return
        op = get_op(name)
        for i, vid in enumerate(e["inputs"]):
            rank = len(self.values[vid]["shape"])
            if i in op.vector_operands:  # a vector along one dim of operand 0 (the result's dims)
                self._set_map(vid, (m[op.vector_operands[i]],))
            elif op.row_reduce is not None:  # the operand runs along the reduced (last) dim
                kept = m[:-1] if e["attrs"].get("keepdims") else m
                self._set_map(vid, kept + (self.rank - 1,))
            else:
                self._set_map(vid, self._right_aligned(rank, m, vid))
        if op.kernel_form == KernelForm.ROW and self.maps[e["inputs"][0]] != self.identity:
            raise LoweringError(f"'sdc.{name}' does not reduce over the kernel's domain")

    def _right_aligned(self, rank: int, m: tuple, vid: str) -> tuple:
        if rank > len(m):
            raise LoweringError(f"value '{vid}' has more dims than the kernel's domain")
        return m[len(m) - rank:]

    def _set_map(self, vid: str, m: tuple) -> None:
        shape = self.values[vid]["shape"]
        m = tuple(None if shape[j] == 1 else d for j, d in enumerate(m))  # size 1: broadcast, never indexed
        old = self.maps.get(vid)
        if old is not None and old != m:
            raise LoweringError(f"value '{vid}' is read with two different index maps {list(old)} and {list(m)}")
        self.maps[vid] = m

    def _live_ops(self) -> list[Mapping]:
        return [e for e in self.ops if e["outputs"][0] in self.maps]

    def _is_row(self, vid: str) -> bool:
        return self.template == ELEMENTWISE or (self.rank - 1) in self.maps[vid]

    # ------------------------------------------------------------ nodes

    def _node(self, op: str, args: Sequence[int], dtype: str, row: bool | None = None, **kw) -> int:
        if row is None:
            row = any(self.nodes[a].row for a in args) if args else True
        self.nodes.append(Node(len(self.nodes), op, tuple(args), dtype, row, **kw))
        return len(self.nodes) - 1

    def _const(self, value: Any, dtype: str) -> int:
        return self._node("const", (), dtype, row=False, value=value)

    def _operand(self, vid: str, fold: bool = True) -> int:
        """The node of a value the op reads; a one-element weight becomes a constant unless `fold` is off
        (operands the renderer needs as tensors: random_uniform's seed and offset)."""
        if vid in self.env:
            return self.env[vid]
        if vid not in self.inputs:
            raise LoweringError(f"value '{vid}' is read before the group computes it")
        v = self.values[vid]
        scalar = _scalar(self.weight(vid)) if fold else None
        if scalar is not None:
            self.env[vid] = self._const(scalar, v["dtype"])
            return self.env[vid]
        self.args.append(TensorArg(vid, v["dtype"], self.maps[vid]))
        self.env[vid] = self._node("load", (), v["dtype"], row=self._is_row(vid), arg=len(self.args) - 1)
        return self.env[vid]

    def _operands(self, e: Mapping, fold: bool = True) -> list[int]:
        return [self._operand(v, fold) for v in e["inputs"]]

    def _lower(self, e: Mapping) -> None:
        """Op `e` as nodes: a plain reduction's primitive, the op's own `_lower_<op>` (the ops whose
        `kernel_form` is not RENDERED, and random_uniform), or else one node the renderer renders."""
        name, out = e["op"], e["outputs"][0]
        dtype = self.values[out]["dtype"]
        if get_op(name).row_reduce is not None:
            self.env[out] = self._lower_reduction(e, dtype)
            return
        lower = getattr(self, f"_lower_{name}", None)
        if lower is not None:
            self.env[out] = lower(e, dtype)
        else:
            self.env[out] = self._node(name, self._operands(e), dtype, attrs=dict(e["attrs"]))

    def _lower_layout_cast(self, e, dtype) -> int:
        """The same values; the result's layout is where they are stored."""
        return self._operand(e["inputs"][0])

    def _lower_gather(self, e, dtype) -> int:
        """The table is an argument without a load node: the gather node indexes it."""
        data, indices = e["inputs"]
        index = self._operand(indices)
        self.args.append(TensorArg(data, self.values[data]["dtype"], self.maps[data]))
        return self._node("gather", [index], dtype, arg=len(self.args) - 1, attrs={"dim": self.tables[e["outputs"][0]]})

    def _lower_pow(self, e, dtype) -> int:
        x, exponent = self._operands(e)
        return self._power(x, float(self.nodes[exponent].value), dtype)

    def _power(self, x: int, exponent: float, dtype: str) -> int:
        """x ** exponent for a constant exponent of POW_EXPONENTS, as the primitives every renderer has."""
        if exponent == 1.0:
            return x
        if exponent == 0.5:
            return self._node("sqrt", [x], dtype)
        if exponent == -1.0:
            return self._node("div", [self._const(1.0, dtype), x], dtype)
        square = self._node("mul", [x, x], dtype)
        return square if exponent == 2.0 else self._node("mul", [square, x], dtype)

    def _lower_random_uniform(self, e, dtype) -> int:
        """Element i draws counter offset + i, i its row-major index: in the elementwise template, when the
        value spans the whole domain, that is the domain's flat index (the renderer's `idx`). Its seed and
        offset stay tensors (the renderer reads them), never constants."""
        args = self._operands(e, fold=False)
        out = e["outputs"][0]
        if self.template != ELEMENTWISE:
            raise LoweringError(f"'sdc.random_uniform' in a {self.template} kernel (it draws by the flat index of "
                                "the elementwise template)")
        if self.maps[out] != self.identity:
            raise LoweringError("'sdc.random_uniform' broadcast over the kernel's domain (its flat index is not "
                                "the domain's)")
        if any(self.nodes[a].op == "const" for a in args):
            raise LoweringError("'sdc.random_uniform' of a constant seed or offset folded by another reader")
        return self._node("random_uniform", args, dtype, attrs=dict(e["attrs"]))

    def _lower_cast(self, e, dtype) -> int:
        args = self._operands(e)
        return self._node("cast", args, dtype, attrs={"from": self.nodes[args[0]].dtype})

    def _lower_batch_norm(self, e, dtype) -> int:
        x, scale, bias, mean, var = self._operands(e)
        eps = self._const(float(e["attrs"]["epsilon"]), dtype)
        inv = self._node("rsqrt", [self._node("add", [var, eps], dtype)], dtype)
        y = self._node("mul", [self._node("sub", [x, mean], dtype), inv], dtype)
        return self._node("add", [self._node("mul", [y, scale], dtype), bias], dtype)

    def _rowlen(self, dtype: str) -> int:
        return self._node("rowlen", (), dtype, row=False)

    def _reduce(self, kind: str, x: int, dtype: str) -> int:
        return self._node(kind, [x], dtype, row=False)

    def _lower_softmax(self, e, dtype) -> int:
        (x,) = self._operands(e)
        shifted = self._node("sub", [x, self._reduce("max", x, dtype)], dtype)
        ex = self._node("exp", [shifted], dtype)
        return self._node("div", [ex, self._reduce("sum", ex, dtype)], dtype)

    def _lower_log_softmax(self, e, dtype) -> int:
        (x,) = self._operands(e)
        shifted = self._node("sub", [x, self._reduce("max", x, dtype)], dtype)
        total = self._reduce("sum", self._node("exp", [shifted], dtype), dtype)
        return self._node("sub", [shifted, self._node("log", [total], dtype)], dtype)

    def _lower_layer_norm(self, e, dtype) -> int:
        x, scale, bias = self._operands(e)
        n = self._rowlen(dtype)
        mean = self._node("div", [self._reduce("sum", x, dtype), n], dtype)
        centered = self._node("sub", [x, mean], dtype)
        var = self._node("div", [self._reduce("sum", self._node("mul", [centered, centered], dtype), dtype), n], dtype)
        eps = self._const(float(e["attrs"]["epsilon"]), dtype)
        inv = self._node("rsqrt", [self._node("add", [var, eps], dtype)], dtype)
        y = self._node("mul", [self._node("mul", [centered, inv], dtype), scale], dtype)
        return self._node("add", [y, bias], dtype)

    def _lower_rms_norm(self, e, dtype) -> int:
        x, scale = self._operands(e)
        n = self._rowlen(dtype)
        mean_square = self._node("div", [self._reduce("sum", self._node("mul", [x, x], dtype), dtype), n], dtype)
        eps = self._const(float(e["attrs"]["epsilon"]), dtype)
        y = self._node("mul", [x, self._node("rsqrt", [self._node("add", [mean_square, eps], dtype)], dtype)], dtype)
        if dtype in ("f16", "bf16"):  # the reference rounds the normalized value before scaling it
            y = self._node("cast", [y], dtype, attrs={"from": "f32"})
        return self._node("mul", [y, scale], dtype)

    def _lower_reduction(self, e, dtype) -> int:
        (x,) = self._operands(e)
        how = get_op(e["op"]).row_reduce
        r = self._reduce(how.primitive, x, dtype)
        if how.mean:
            r = self._node("div", [r, self._rowlen(dtype)], dtype)
        return r


POW_EXPONENTS = (0.5, 1.0, 2.0, 3.0, -1.0)


def _no_weight(name: str) -> Any:
    raise ValueError(f"an attribute holds weight '{name}'")


def _decoded(e: Mapping) -> Mapping:
    """An op entry whose attributes hold numbers: plan.json spells a non-finite float as
    {"float": "inf"} (sdc.runtime.format), which every lowering and renderer would otherwise meet
    (clip's bounds, an epsilon)."""
    attrs = e.get("attrs") or {}
    try:
        decoded = {k: decode_value(v, _no_weight) for k, v in attrs.items()}
    except ValueError as err:
        raise LoweringError(f"'sdc.{e['op']}': {err}") from None
    return {**e, "attrs": decoded}


def _scalar(t: Any) -> float | int | bool | None:
    """A one-element weight's value as a Python number (None for anything else)."""
    if t is None or not hasattr(t, "numel") or t.numel() != 1:
        return None
    value = t.reshape(()).item()
    return value


DOT_PRECISIONS = ("ieee", "tf32")  # tl.dot's input_precision for f32 operands: exact f32, or tf32 tensor cores


class _AnchoredLowering(_Lowering):
    """A template built around one op of the group (a matmul, a convolution): layout casts of its
    operands before it, an elementwise epilogue after it, computed on its f32 accumulator."""

    def __init__(self, ops, inputs, outputs, values, supported, weight, input_precision: str):
        super().__init__(ops, inputs, outputs, values, supported, weight)
        if input_precision not in DOT_PRECISIONS:
            raise ValueError(f"input_precision must be one of {DOT_PRECISIONS}, found {input_precision!r}")
        self.input_precision = input_precision

    def _anchor(self, name: str) -> tuple[int, dict, dict[str, str]]:
        """The group's one `sdc.<name>` op: its index, its entry, and what the layout casts before it
        alias (a cast's result -> the value it re-lays out)."""
        if not self.outputs:
            raise LoweringError("the group writes nothing")
        at = [i for i, e in enumerate(self.ops) if e["op"] == name]
        if len(at) != 1:
            raise LoweringError(f"{len(at)} 'sdc.{name}' ops in one group")
        alias: dict[str, str] = {}
        for e in self.ops[:at[0]]:
            if e["op"] != "layout_cast":
                raise LoweringError(f"'sdc.{e['op']}' before 'sdc.{name}' (the {name} template fuses an epilogue, "
                                    "not a prologue)")
            if e["outputs"][0] in self.outputs:
                raise LoweringError(f"a layout_cast before 'sdc.{name}' is also a result of the group")
            alias[e["outputs"][0]] = alias.get(e["inputs"][0], e["inputs"][0])
        return at[0], self.ops[at[0]], alias
