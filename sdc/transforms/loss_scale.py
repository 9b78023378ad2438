"""sdc-loss-scale: the scaled loss that sdc-autodiff differentiates under dynamic loss scaling.

    sdc-loss-scale{init-scale=65536.0}

Why a pass before sdc-autodiff: fp16 gradients of a small loss flush to zero, so the backward pass
has to start from `loss * scale` (its seed is the scale, not 1) — torch.amp.GradScaler's
`scaler.scale(loss).backward()`. Scaling the gradients afterwards would be too late.

What it does to the entry function `(...) -> (loss, ...)`:
- a new input `loss_scale` (rank-0 f32): the scale, which sdc-optimizer-step (`loss-scaling=true`)
  turns into state and updates after each step. A state starts at zero, so a zero input means "no
  step yet": the scale used is `where(loss_scale > 0, loss_scale, init-scale)`;
- two results appended: `loss.scaled` (result 0 in f32, times that scale: what
  `sdc-autodiff{results=loss.scaled}` differentiates) and `loss_scale.value` (the scale used, which
  sdc-optimizer-step divides the gradients by and drops from the results with `loss.scaled`).

Errors: result 0 is not a float scalar; the function already has an input named `loss_scale`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sdc import dtypes
from sdc.diagnostics import DiagnosticSink, SdcError
from sdc.dialect.builder import OpBuilder
from sdc.dialect.ir import (ARG_ATTRS, RES_ATTRS, arg_names, attr_dicts, entry_function, set_attr_dicts,
                            tensor_spec, tensor_type)
from sdc.dialect.shapes import TensorSpec
from sdc.mlir import ir
from sdc.transforms.base import ModulePass

SCALE_INPUT = "loss_scale"
SCALED_LOSS = "loss.scaled"
SCALE_VALUE = "loss_scale.value"
SCALE_DTYPE = "f32"


@dataclass(frozen=True)
class LossScalePass(ModulePass):
    """Options: `init-scale` (the scale of the first step, default 2^16); see the module doc."""

    init_scale: float = 65536.0

    name = "sdc-loss-scale"
    summary = "add a loss-scale input and the scaled loss that sdc-autodiff differentiates (fp16 training)"

    def run(self, module: ir.Operation, diag: DiagnosticSink) -> None:
        if not self.init_scale > 0:
            diag.error(module, f"sdc-loss-scale: init-scale must be > 0, found {self.init_scale}")
            return
        try:
            fn = entry_function(module)
        except SdcError as e:
            diag.error(module, f"sdc-loss-scale: {e}")
            return
        block = fn.regions[0].blocks[0]
        ret = [op.operation for op in block.operations][-1]
        returned = list(ret.operands)
        if not returned or not dtypes.is_float(tensor_spec(returned[0].type).dtype) or tensor_spec(
                returned[0].type).rank != 0:
            found = returned[0].type if returned else "no result"
            diag.error(fn, f"sdc-loss-scale scales a rank-0 float loss (result 0), found {found}")
            return
        if SCALE_INPUT in arg_names(fn):
            diag.error(fn, f"sdc-loss-scale: the entry function already has an input named '{SCALE_INPUT}'")
            return
        with fn.context:
            arg_dicts = attr_dicts(fn, ARG_ATTRS)
            scale_in = block.add_argument(tensor_type(TensorSpec((), SCALE_DTYPE)), fn.location)
            arg_dicts.append({"sdc.name": ir.StringAttr.get(SCALE_INPUT)})
            b = OpBuilder(ir.InsertionPoint(ret), fn.location)
            started = b.op("gt", scale_in, b.scalar(0.0, SCALE_DTYPE))
            scale = b.op("where", started, scale_in, b.scalar(self.init_scale, SCALE_DTYPE))
            loss = returned[0]
            if tensor_spec(loss.type).dtype != SCALE_DTYPE:
                loss = b.op("cast", loss, dtype=SCALE_DTYPE)
            scaled = b.op("mul", loss, scale)
            res_dicts = attr_dicts(fn, RES_ATTRS)
            new = returned + [scaled, scale]
            with ir.InsertionPoint(ret), ret.location:
                ir.Operation.create("func.return", operands=new)
            ret.erase()
            fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
                [a.type for a in block.arguments], [v.type for v in new]))
            set_attr_dicts(fn, ARG_ATTRS, arg_dicts)
            set_attr_dicts(fn, RES_ATTRS, res_dicts + [{"sdc.name": ir.StringAttr.get(n)}
                                                       for n in (SCALED_LOSS, SCALE_VALUE)])
