"""The `matmul` template: one `sdc.matmul` (2-D or batched, transposes, broadcast batch dims) and the
elementwise epilogue sdc-fuse puts after it (bias, activation, residual add, cast).

The domain is the product's result shape plus its contracting dim K, `(*batch, M, N, K)`. The product
is one `dot` node (its operands are read tile by tile in a renderer's K loop, so they are arguments
without `load` nodes); the epilogue's nodes are *tile* values (they vary over M or N) or per-batch
ones. Layout casts before the matmul only change where its operands sit and are read through; any
other op before it (a prologue) keeps the reference backend.
"""

from __future__ import annotations

from sdc.codegen.kernel.lowering import _AnchoredLowering, is_row_op
from sdc.codegen.kernel.program import MATMUL, KernelProgram, LoweringError, TensorArg

MATMUL_DTYPES = frozenset({"f16", "bf16", "f32"})  # operand types of the template (f32 accumulation)


class _MatmulLowering(_AnchoredLowering):
    """The `matmul` template: [layout_cast...] matmul [elementwise epilogue...].

    Domain `(*batch, M, N, K)`: the product's result shape, then the contracting dim. An operand maps
    its batch dims right-aligned onto the batch dims (None where it broadcasts), its last two onto
    (M, K) for lhs and (K, N) for rhs, swapped when the op transposes it: a transpose is only a
    different stride. The epilogue maps onto `(*batch, M, N)` as in the elementwise template."""

    def run(self) -> KernelProgram:
        at, mm, alias = self._anchor("matmul")
        epilogue = self.ops[at + 1:]
        for e in epilogue:
            self._check_op(e)
            if is_row_op(e["op"]):
                raise LoweringError(f"'sdc.{e['op']}' after 'sdc.matmul' (its epilogue is elementwise)")
        lhs_id, rhs_id = (alias.get(v, v) for v in mm["inputs"])
        lhs, rhs, out_id = self.values[lhs_id], self.values[rhs_id], mm["outputs"][0]
        dtype = lhs["dtype"]
        if dtype not in MATMUL_DTYPES or rhs["dtype"] != dtype:
            raise LoweringError(f"'sdc.matmul' of {dtype} x {rhs['dtype']} (the template multiplies "
                                f"{'/'.join(sorted(MATMUL_DTYPES))})")
        if len(lhs["shape"]) < 2 or len(rhs["shape"]) < 2:
            raise LoweringError("'sdc.matmul' with a 1-D operand (a matrix-vector product)")
        out_shape = list(self.values[out_id]["shape"])
        for vid in self.outputs:
            if list(self.values[vid]["shape"]) != out_shape:
                raise LoweringError(f"result '{vid}' has shape {list(self.values[vid]['shape'])}, the product "
                                    f"{out_shape}")
        nb = len(out_shape) - 2
        rows, cols, inner = nb, nb + 1, nb + 2
        transpose_lhs, transpose_rhs = bool(mm["attrs"].get("transpose_lhs")), bool(mm["attrs"].get("transpose_rhs"))
        k_size = lhs["shape"][-2 if transpose_lhs else -1]
        self.template = MATMUL
        self.rank = nb + 2
        self.domain = tuple(d if isinstance(d, int) else None for d in [*out_shape, k_size])
        self.rows, self.cols = rows, cols
        for vid in self.outputs:
            self._set_map(vid, tuple(range(nb + 2)))
        for e in reversed(epilogue):
            if e["outputs"][0] in self.maps:
                self._map_operands(e, self.maps[e["outputs"][0]])
        if out_id not in self.maps:
            raise LoweringError("nothing in the group reads the product")
        if self.maps[out_id] != tuple(None if d == 1 else i for i, d in enumerate(out_shape)):
            raise LoweringError(f"the product is read with the index map {list(self.maps[out_id])}")

        def operand(vid: str, shape: list, first: int, second: int, transposed: bool) -> int:
            batch = tuple(range(nb))[nb - (len(shape) - 2):] if len(shape) > 2 else ()
            m = batch + ((second, first) if transposed else (first, second))
            self.args.append(TensorArg(vid, dtype, tuple(None if shape[j] == 1 else d for j, d in enumerate(m))))
            return len(self.args) - 1

        a = operand(lhs_id, list(lhs["shape"]), rows, inner, transpose_lhs)
        b = operand(rhs_id, list(rhs["shape"]), inner, cols, transpose_rhs)
        attrs = {"lhs": a, "rhs": b, **({"input_precision": self.input_precision} if dtype == "f32" else {})}
        self.env[out_id] = self._node("dot", (), self.values[out_id]["dtype"], row=True, attrs=attrs)
        live = [e for e in epilogue if e["outputs"][0] in self.maps]
        for e in live:
            self._lower(e)
        tile: dict[int, bool] = {}
        for n in self.nodes:  # which values depend on the product (full tiles)
            tile[n.id] = n.op == "dot" or any(tile[x] for x in n.args)
        results = self._results()
        for r, node in results:
            if not tile[node]:
                raise LoweringError(f"result '{r.value}' does not depend on the product")
        ops = [*(e["op"] for e in self.ops[:at]), "matmul", *(e["op"] for e in live)]
        return KernelProgram(MATMUL, self.domain, self.args, results, self.nodes, ops)

    def _is_row(self, vid: str) -> bool:
        """Whether a value loaded by the epilogue varies over the tile (M or N), not only per batch."""
        m = self.maps[vid]
        return self.rows in m or self.cols in m
