"""The `conv` template: a 2-d convolution as an implicit GEMM, epilogue fused.

A group `[layout_cast...] conv [elementwise epilogue...]` (the bias the planner merged into the
convolution, then residual add, relu or any other elementwise op, a cast) becomes one kernel. The
GEMM is M = N*OH*OW output pixels by Cout output channels, contracting over K = KH*KW*Cin; no
im2col buffer is written: each program's `[BLOCK_M, BLOCK_K]` slice of the patch matrix is loaded
straight from the input with the window's offsets, zero where the window reads padding.

Domain (the launcher's mechanism, docs/codegen.md): `(N, OH, OW, Cout, Cin, KH, KW, H, W)`. The
input `[N, C, H, W]` maps onto dims (0, 4, 7, 8), the weight `[O, C, KH, KW]` onto (3, 4, 5, 6), the
result and every epilogue tensor onto (0, 3, 1, 2). Every access goes through the strides the
launcher passes, so NHWC activations (channels-last, C the unit stride: the K loop runs along C
innermost and reads 16-byte vectors) and any weight layout take the same kernel. Strides, padding
and dilation are literals of the source; the batch may be dynamic, the image size may not (the
launcher learns a result's size from the operands' sizes, and OH/OW appear in none).

Not here (the group stays a reference group, with its reason): grouped and depthwise convolutions,
spatial ranks other than 2, f64 or integer operands, a prologue other than layout casts, an
epilogue that reads the convolution's own input or weight.

Which of the two cuda paths a convolution group takes (this template, or cuDNN through torch:
sdc/runtime/reference_kernels.py) is the planner's, by the compile option `conv_kernel` (default from
`SDC_CONV_KERNEL`): `cudnn` (the default: faster on the whole of ResNet-50 in the H200 benchmark) or
`triton`; with `cudnn` the Triton backend refuses the group with `CUDNN_REASON`.
"""

from __future__ import annotations

from typing import Any

from sdc.codegen.kernel.lowering import _AnchoredLowering, is_row_op
from sdc.codegen.kernel.matmul import MATMUL_DTYPES
from sdc.codegen.kernel.program import CONV, KernelProgram, LoweringError, TensorArg
from sdc.options import CONV_KERNEL_ENV

# The domain dims, by name (docs above).
BATCH, OUT_H, OUT_W, OUT_C, IN_C, KER_H, KER_W, IN_H, IN_W = range(9)
RESULT_MAP = (BATCH, OUT_C, OUT_H, OUT_W)  # [N, O, OH, OW] onto the domain
INPUT_MAP = (BATCH, IN_C, IN_H, IN_W)
WEIGHT_MAP = (OUT_C, IN_C, KER_H, KER_W)

# The physical order the planner stores a conv kernel's weight in (plan.py `_lay_out_conv_weight`):
# [KH, KW, Cin, Cout], so a tap's [BLOCK_K, BLOCK_N] weight tile has unit stride along Cout (the tile's
# fast dim) instead of the KH*KW*Cin stride of the frontends' [Cout, Cin, KH, KW].
CONV_WEIGHT_LAYOUT = (2, 3, 1, 0)

CUDNN_REASON = (f"convolution through one fused cuDNN call (conv_kernel='triton', or {CONV_KERNEL_ENV}=triton, "
                "selects the generated implicit-GEMM template)")
"""Why a convolution group stays a reference group when the options choose cuDNN (the planner's choice)."""


def lower_conv(ops, inputs, outputs, values, supported, weight, input_precision: str) -> KernelProgram:
    """The `conv` program of a convolution group (asked only when the compile option `conv_kernel`
    selects the template: the Triton backend refuses the group otherwise, with `CUDNN_REASON`)."""
    return _ConvLowering(ops, inputs, outputs, values, supported, weight, input_precision).run()


class _ConvLowering(_AnchoredLowering):
    def run(self) -> KernelProgram:
        at, conv, alias = self._anchor("conv")
        epilogue = self.ops[at + 1:]
        for e in epilogue:
            self._check_op(e)
            if is_row_op(e["op"]) or e["op"] == "conv":
                raise LoweringError(f"'sdc.{e['op']}' after 'sdc.conv' (its epilogue is elementwise)")
        x_id, w_id = (alias.get(v, v) for v in conv["inputs"][:2])
        bias_id = conv["inputs"][2] if len(conv["inputs"]) > 2 else None
        x, w, out_id = self.values[x_id], self.values[w_id], conv["outputs"][0]
        a = conv["attrs"]
        if len(x["shape"]) != 4:
            raise LoweringError(f"'sdc.conv' with {len(x['shape']) - 2} spatial dims (the template is 2-d)")
        if int(a.get("groups", 1)) != 1:
            raise LoweringError(f"'sdc.conv' with groups = {a['groups']} (the template has groups = 1)")
        dtype = x["dtype"]
        if dtype not in MATMUL_DTYPES or w["dtype"] != dtype or (bias_id and self.values[bias_id]["dtype"] != dtype):
            raise LoweringError(f"'sdc.conv' of {dtype} x {w['dtype']} (the template convolves "
                                f"{'/'.join(sorted(MATMUL_DTYPES))})")
        out_shape = list(self.values[out_id]["shape"])
        n, cout, oh, ow = out_shape
        if not (isinstance(oh, int) and isinstance(ow, int)):
            raise LoweringError("'sdc.conv' with a dynamic image size (the template's result size is compiled)")
        for vid in self.outputs:
            if list(self.values[vid]["shape"]) != out_shape:
                raise LoweringError(f"result '{vid}' has shape {list(self.values[vid]['shape'])}, the convolution "
                                    f"{out_shape}")
        _, cin, h, wd = x["shape"]
        _, _, kh, kw = w["shape"]
        self.template = CONV
        self.rank = 9
        self.domain = tuple(d if isinstance(d, int) else None for d in (n, oh, ow, cout, cin, kh, kw, h, wd))
        for vid in self.outputs:
            self._set_map(vid, RESULT_MAP)
        for e in reversed(epilogue):
            if e["outputs"][0] in self.maps:
                self._map_operands(e, self.maps[e["outputs"][0]])
        if out_id not in self.maps:
            raise LoweringError("nothing in the group reads the convolution")
        if self.maps[out_id] != tuple(None if d == 1 else m for m, d in zip(RESULT_MAP, out_shape)):
            raise LoweringError(f"the convolution is read with the index map {list(self.maps[out_id])}")
        if x_id in self.maps or w_id in self.maps:
            raise LoweringError("the epilogue reads the convolution's own input or weight")

        def operand(vid: str, m: tuple) -> int:
            shape = self.values[vid]["shape"]
            self.args.append(TensorArg(vid, dtype, tuple(None if shape[j] == 1 else d for j, d in enumerate(m))))
            return len(self.args) - 1

        n_dims = len(a.get("strides") or []) or 2
        attrs: dict[str, Any] = {
            "input": operand(x_id, INPUT_MAP), "weight": operand(w_id, WEIGHT_MAP),
            "strides": list(a.get("strides") or [1] * n_dims), "dilations": list(a.get("dilations") or [1] * n_dims),
            "pads": list(a.get("pads") or [0] * (2 * n_dims)),
            **({"input_precision": self.input_precision} if dtype == "f32" else {})}
        out_dtype = self.values[out_id]["dtype"]
        product = self._node("conv", (), out_dtype, row=True, attrs=attrs)
        if bias_id is not None:
            self._set_map(bias_id, (OUT_C,))
            product = self._node("add", (product, self._operand(bias_id)), out_dtype, row=True)
        self.env[out_id] = product
        live = [e for e in epilogue if e["outputs"][0] in self.maps]
        for e in live:
            self._lower(e)
        tile: dict[int, bool] = {}
        for node in self.nodes:
            tile[node.id] = node.op == "conv" or any(tile[i] for i in node.args)
        results = self._results()
        for r, node_id in results:
            if not tile[node_id]:
                raise LoweringError(f"result '{r.value}' does not depend on the convolution")
        names = [*(e["op"] for e in self.ops[:at]), "conv", *(e["op"] for e in live)]
        return KernelProgram(CONV, self.domain, self.args, results, self.nodes, names)

    def _is_row(self, vid: str) -> bool:
        return any(d is not None for d in self.maps[vid])


def conv_weight(program: KernelProgram) -> str:
    """The value id of a conv program's weight operand."""
    (node,) = [n for n in program.nodes if n.op == "conv"]
    return program.args[node.attrs["weight"]].value
