"""The `attention` template: softmax(Q K^T * scale [+ mask]) V as one flash-style kernel.

sdc-fuse merges an attention's three groups into one `kind = "attention"` group when
`sdc.transforms.attention_pattern.match_attention` accepts its ops (targets with a Triton
backend); this module lowers what that matcher found (sdc/codegen/triton/attention.py renders it).
It never sees anything the matcher refused, so an attention it cannot take keeps the kernels it had.

The domain is `(*batch, M, N, K, E)`: the scores' shape `[*batch, Sq, Sk]`, then the head dims of
q/k (K = D) and of v (E = Dv). q maps onto `(*batch, M, K)`, k onto `(*batch, K, N)` and v onto
`(*batch, N, E)`, each pair swapped when the op transposes it (a transpose is only strides); batch
dims an operand broadcasts (absent, or of size 1) have stride 0. The score chain (scale, mask,
casts, any SCORE_OPS) becomes nodes over the `[BLOCK_M, BLOCK_N]` score tile, as in the matmul
template's epilogue: a mask `[B, 1, 1, Sk]` loads as a row of key values, a causal `[Sq, Sk]` mask
as a tile, a scalar once; one-element weights are constants. A node that does not vary along the
keys (`Node.row` False here) is computed once, before the key loop.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from sdc.codegen.kernel.lowering import _Lowering
from sdc.codegen.kernel.program import ATTENTION, KernelProgram, LoweringError, TensorArg, WeightLookup
from sdc.transforms.attention_pattern import AttentionMatch, NotAttention, causal_mask, match_attention


class _AttentionLowering(_Lowering):
    def __init__(self, ops, inputs, outputs, values, supported, weight, input_precision: str):
        super().__init__(ops, inputs, outputs, values, supported, weight)
        self.input_precision = input_precision

    def run(self) -> KernelProgram:
        try:
            match = match_attention(self.ops, self.values, self.outputs, self._splat)
        except NotAttention as e:
            raise LoweringError(f"not an attention the flash kernel takes: {e}") from None
        shape = lambda vid: list(self.values[vid]["shape"])  # noqa: E731
        s = self.ops[match.qk]["outputs"][0]
        scores = shape(s)
        nb = len(scores) - 2
        head = shape(match.q)[-2 if match.transpose_q else -1]
        value_dim = shape(match.v)[-2 if match.transpose_v else -1]
        rows, cols, inner, outer = nb, nb + 1, nb + 2, nb + 3
        self.template = ATTENTION
        self.rank = nb + 2
        self.rows, self.cols = rows, cols
        self.domain = tuple(d if isinstance(d, int) else None for d in [*scores, head, value_dim])
        for i in match.chain:
            self._check_op(self.ops[i])
        identity = tuple(None if d == 1 else i for i, d in enumerate(scores))
        self._set_map(match.scores, tuple(range(nb + 2)))
        for i in reversed(match.chain):
            e = self.ops[i]
            if e["outputs"][0] in self.maps:
                self._map_operands(e, self.maps[e["outputs"][0]])
        if self.maps.get(s) != identity:
            raise LoweringError(f"the scores are read with the index map {list(self.maps.get(s, ()))}")

        def operand(vid: str, first: int, second: int, transposed: bool) -> int:
            dims = shape(vid)
            batch = tuple(range(nb))[nb - (len(dims) - 2):] if len(dims) > 2 else ()
            if len(dims) - 2 > nb:
                raise LoweringError(f"'{vid}' has more batch dims than the scores")
            m = batch + ((second, first) if transposed else (first, second))
            self.args.append(TensorArg(vid, self.values[vid]["dtype"],
                                       tuple(None if dims[j] == 1 else d for j, d in enumerate(m))))
            return len(self.args) - 1

        q = operand(match.q, rows, inner, match.transpose_q)
        k = operand(match.k, inner, cols, match.transpose_k)
        v = operand(match.v, cols, outer, match.transpose_v)
        precision = {"input_precision": self.input_precision} if self.values[match.q]["dtype"] == "f32" else {}
        self.env[s] = self._node("dot", (), self.values[s]["dtype"], row=True, attrs={"lhs": q, "rhs": k, **precision})
        causal = causal_mask(self.ops, match, self.values, self._constant)
        if causal is not None:  # the mask's values where keys are kept; the kernel compares indices for the rest
            for vid, kept in causal.kept.items():
                self.env[vid] = self._const(kept, self.values[vid]["dtype"])
        for i in self._needed(match):
            self._lower(self.ops[i])
        probs_dtype = self.values[match.probs]["dtype"]
        pv_precision = {"pv_input_precision": self.input_precision} if probs_dtype == "f32" else {}
        empty = {"zero_empty_rows": True} if match.zero_empty_rows else {}
        if causal is not None:
            empty["causal"] = causal.offset
        product_dtype = self.values[match.product]["dtype"]
        if product_dtype != self.values[match.output]["dtype"]:  # casts after the matmul: round to it first
            empty["round_to"] = product_dtype
        out = self._node(ATTENTION, (self.env[match.scores],), self.values[match.output]["dtype"], row=False,
                         attrs={"v": v, "p_dtype": probs_dtype, **pv_precision, **empty})
        out_shape = shape(match.output)
        out_map = tuple(None if out_shape[j] == 1 else d for j, d in enumerate([*range(nb), rows, outer]))
        result = TensorArg(match.output, self.values[match.output]["dtype"], out_map)
        names = [e["op"] for e in self.ops]
        return KernelProgram(ATTENTION, self.domain, self.args, [(result, out)], self.nodes, names)

    def _needed(self, match: AttentionMatch) -> list[int]:
        """The chain's ops that the softmax's operand needs, in order: all of them, less the mask ops
        whose values a causal mask replaced by constants."""
        wanted, out = {match.scores}, []
        for i in reversed(match.chain):
            e = self.ops[i]
            result = e["outputs"][0]
            if result in wanted and result in self.maps and result not in self.env:
                out.append(i)
                wanted.update(e["inputs"])
        return out[::-1]

    def _constant(self, vid: str):
        """A weight's values as a numpy array (floats in float64), for `causal_mask`; None for anything else."""
        t = self.weight(vid)
        if t is None or not hasattr(t, "numpy"):
            return None
        t = t.detach().cpu()
        return (t.double() if t.is_floating_point() else t).numpy()

    def _splat(self, vid: str) -> float | None:
        """A weight's value when all its elements are one value (the empty-row fix-up's -inf and 0)."""
        t = self.weight(vid)
        if t is None or not hasattr(t, "reshape") or t.numel() == 0:
            return None
        flat = t.reshape(-1)
        return float(flat[0]) if bool((flat == flat[0]).all()) else None

    def _is_row(self, vid: str) -> bool:
        """Whether a value the chain loads varies along the keys (it is then loaded in the key loop)."""
        return self.cols in self.maps[vid]


def lower_attention(ops: Sequence[Mapping], inputs: Sequence[str], outputs: Sequence[str],
                    values: Mapping[str, Mapping], supported: frozenset[str], weight: WeightLookup,
                    input_precision: str) -> KernelProgram:
    """The kernel IR of an attention group (LoweringError when `match_attention` refuses it)."""
    return _AttentionLowering(ops, inputs, outputs, values, supported, weight, input_precision).run()


def is_attention(ops: Sequence[Mapping]) -> bool:
    """Whether a group's ops are for the attention lowering: two matmuls and a softmax."""
    names = [e["op"] for e in ops]
    return names.count("matmul") == 2 and "softmax" in names
