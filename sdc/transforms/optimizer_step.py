"""sdc-optimizer-step: the optimizer update appended to a differentiated entry function, with state.

Runs after sdc-autodiff, on `(batch) -> (loss, ..., grad.<p>...)`. Each parameter `p` that has a
`grad.p` result stops being a read-only `sdc.parameter` and becomes *state*: an entry input named
`p`, and so does each of the optimizer's slots for it (`exp_avg.p`, `exp_avg_sq.p`,
`momentum_buffer.p`: torch's names) and the step counter `step` (rank-0 f32). The learning rate is
an ordinary input `lr` (rank-0 f32), so a new rate never recompiles. The update (sdc.optim, torch's
formulas) is emitted as plain sdc ops before the `func.return`; the `grad.*` results are replaced by
the new state values, named `next.<state>`, in the order of the state inputs:

    func.func @main(%x, %y, %p {sdc.name = "p", sdc.state = "next.p"}, ..., %step {sdc.state = "next.step"},
                    %lr {sdc.name = "lr"}) -> (loss, next.p, ..., next.step)

An input whose `sdc.state` attribute names an output is state: the runtime keeps it resident on the
device, feeds it each call and rebinds it to that output (sdc.runtime.state, docs/artifact.md).
Initial values: a state input named after a parameter starts from the parameter's value; every
other state starts at zero (the driver, sdc.train, writes them into the weights file).

Options: `optimizer` (sgd, adam, adamw), `momentum`, `nesterov`, `beta1`, `beta2`, `eps`,
`weight-decay`, `clip-grad-norm` (0: no clipping). The default learning rate is not an option: it
is the caller's default for the `lr` input.
"""

from __future__ import annotations

from dataclasses import dataclass

from sdc.diagnostics import DiagnosticSink, SdcError
from sdc.dialect.ir import (ARG_ATTRS, RES_ATTRS, arg_names, attr_dicts, entry_function, read_attrs, result_names,
                            set_attr_dicts, tensor_spec, tensor_type)
from sdc.dialect.opdef import OPS
from sdc.dialect.shapes import TensorSpec
from sdc.mlir import ir
from sdc.optim import Optimizer, from_options, global_norm_scale
from sdc.transforms.autodiff import GRAD_PREFIX, IRBuilder
from sdc.transforms.base import ModulePass

STATE_ATTR = "sdc.state"  # on an entry input: the name of the output that updates it
NEXT_PREFIX = "next."
STEP = "step"
LR = "lr"
COUNTER_DTYPE = "f32"


@dataclass(frozen=True)
class OptimizerStepPass(ModulePass):
    """Options: `optimizer`, `momentum`, `nesterov`, `beta1`, `beta2`, `eps`, `weight-decay`,
    `clip-grad-norm`; see the module doc."""

    optimizer: str = "sgd"
    momentum: float = 0.0
    nesterov: bool = False
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0
    clip_grad_norm: float = 0.0

    name = "sdc-optimizer-step"
    summary = "turn trained parameters into state and append the optimizer update (after sdc-autodiff)"

    def describe(self) -> Optimizer:
        options: dict = {"optimizer": self.optimizer, "weight_decay": self.weight_decay,
                         "clip_grad_norm": self.clip_grad_norm or None}
        if self.optimizer == "sgd":
            options.update(momentum=self.momentum, nesterov=self.nesterov)
        else:
            options.update(betas=(self.beta1, self.beta2), eps=self.eps)
        return from_options(options)

    def run(self, module: ir.Operation, diag: DiagnosticSink) -> None:
        try:
            optimizer = self.describe()
            fn = entry_function(module)
        except SdcError as e:
            diag.error(module, f"sdc-optimizer-step: {e}")
            return
        _OptimizerStep(fn, diag, optimizer).run()


def pass_options(optimizer: Optimizer) -> str:
    """The pipeline element that applies `optimizer` (what sdc.train runs)."""
    o = optimizer.options()
    items = [f"optimizer={o['optimizer']}", f"weight-decay={o['weight_decay']!r}",
             f"clip-grad-norm={o['clip_grad_norm'] or 0.0!r}"]
    if "momentum" in o:
        items += [f"momentum={o['momentum']!r}", f"nesterov={str(o['nesterov']).lower()}"]
    if "betas" in o:
        items += [f"beta1={o['betas'][0]!r}", f"beta2={o['betas'][1]!r}", f"eps={o['eps']!r}"]
    return f"sdc-optimizer-step{{{' '.join(items)}}}"


class _OptimizerStep:
    def __init__(self, fn: ir.Operation, diag: DiagnosticSink, optimizer: Optimizer):
        self.fn = fn
        self.diag = diag
        self.optimizer = optimizer
        self.block = fn.regions[0].blocks[0]

    def run(self) -> None:
        ops = [op.operation for op in self.block.operations]
        ret = ops[-1] if ops else None
        if ret is None or ret.name != "func.return":
            self.diag.error(self.fn, "sdc-optimizer-step: the entry function has no func.return")
            return
        names = result_names(self.fn)
        params: dict[str, list[ir.Operation]] = {}
        for op in ops:
            if op.name == "sdc.parameter":
                params.setdefault(read_attrs(OPS["parameter"], op)["name"], []).append(op)
        grads = [(i, n[len(GRAD_PREFIX):]) for i, n in enumerate(names) if n.startswith(GRAD_PREFIX)]
        if not grads:
            self.diag.error(self.fn, "sdc-optimizer-step runs after sdc-autodiff: the entry function has no "
                                     "'grad.*' results")
            return
        missing = [p for _, p in grads if p not in params]
        if missing:
            self.diag.error(self.fn, f"sdc-optimizer-step: result 'grad.{missing[0]}' has no sdc.parameter named "
                                     f"'{missing[0]}' (only parameters are trained)")
            return
        taken = set(arg_names(self.fn))
        clash = next((n for n in [LR, STEP, *self._state_names([p for _, p in grads])] if n in taken), None)
        if clash is not None:
            self.diag.error(self.fn, f"sdc-optimizer-step: the entry function already has an input named '{clash}'")
            return
        returned = list(ret.operands)
        kept = [i for i in range(len(returned)) if i not in {g for g, _ in grads}]
        grad_values = {p: returned[i] for i, p in grads}
        self._rewrite(ret, params, [p for _, p in grads], grad_values, kept, names)

    def _state_names(self, trained: list[str]) -> list[str]:
        return [name for p in trained for name in (p, *(f"{s}.{p}" for s in self.optimizer.slots))]

    def _add_input(self, spec: TensorSpec, attrs: dict[str, ir.Attribute], arg_dicts: list) -> ir.Value:
        value = self.block.add_argument(tensor_type(spec), self.fn.location)
        arg_dicts.append(attrs)
        return value

    def _rewrite(self, ret: ir.Operation, params: dict, trained: list[str], grad_values: dict, kept: list[int],
                 names: list[str]) -> None:
        arg_dicts = attr_dicts(self.fn, ARG_ATTRS)
        state: list[tuple[str, ir.Value]] = []  # (state name, its input), in input order

        def state_input(name: str, spec: TensorSpec) -> ir.Value:
            value = self._add_input(spec, {"sdc.name": ir.StringAttr.get(name),
                                           STATE_ATTR: ir.StringAttr.get(NEXT_PREFIX + name)}, arg_dicts)
            state.append((name, value))
            return value

        with self.fn.context:
            inputs: dict[str, ir.Value] = {}
            slot_inputs: dict[str, dict[str, ir.Value]] = {}
            for p in trained:
                spec = tensor_spec(params[p][0].results[0].type)
                inputs[p] = state_input(p, spec)
                slot_inputs[p] = {s: state_input(f"{s}.{p}", spec) for s in self.optimizer.slots}
            step_in = state_input(STEP, TensorSpec((), COUNTER_DTYPE))
            lr_in = self._add_input(TensorSpec((), COUNTER_DTYPE), {"sdc.name": ir.StringAttr.get(LR)}, arg_dicts)
            for p in trained:
                for op in params.pop(p):
                    op.results[0].replace_all_uses_with(inputs[p])
                    op.erase()
            b = IRBuilder(ret, self.fn.location, {})
            step = b.op("add", step_in, b.scalar(1.0, COUNTER_DTYPE))
            grads = [grad_values[p] for p in trained]
            if self.optimizer.clip_grad_norm is not None:
                scale = global_norm_scale(b, [_as(b, g, COUNTER_DTYPE) for g in grads],
                                          self.optimizer.clip_grad_norm, COUNTER_DTYPE)
                grads = [b.op("mul", g, _as(b, scale, b.spec(g).dtype)) for g in grads]
            updated: dict[str, ir.Value] = {STEP: step}
            for p, g in zip(trained, grads):
                dtype = b.spec(g).dtype
                new_p, new_slots = self.optimizer.update(b, inputs[p], g, slot_inputs[p], _as(b, lr_in, dtype),
                                                         _as(b, step, dtype))
                updated[p] = new_p
                updated.update({f"{s}.{p}": v for s, v in new_slots.items()})
            res_dicts = attr_dicts(self.fn, RES_ATTRS)
            returned = [list(ret.operands)[i] for i in kept] + [updated[n] for n, _ in state]
            new_res = [res_dicts[i] for i in kept] + [{"sdc.name": ir.StringAttr.get(NEXT_PREFIX + n)} for n, _ in state]
            with ir.InsertionPoint(ret), ret.location:
                ir.Operation.create("func.return", operands=returned)
            ret.erase()
            self.fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
                [a.type for a in self.block.arguments], [v.type for v in returned]))
            set_attr_dicts(self.fn, ARG_ATTRS, arg_dicts)
            set_attr_dicts(self.fn, RES_ATTRS, new_res)


def _as(b: IRBuilder, value: ir.Value, dtype: str) -> ir.Value:
    """`value` in `dtype` (the counter and the rate are f32; a bf16 parameter's update is bf16)."""
    return value if b.spec(value).dtype == dtype else b.op("cast", value, dtype=dtype)
