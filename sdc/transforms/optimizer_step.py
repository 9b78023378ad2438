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

Dynamic loss scaling (`loss-scaling=true`, after sdc-loss-scale and `sdc-autodiff{results=loss.scaled}`):
the input `loss_scale` becomes state too, with `loss_scale.good_steps` and `skipped_steps` (rank-0
f32, from zero); the results `loss.scaled` and `loss_scale.value` (the scale used) are dropped. Each
gradient is multiplied by `1/scale` (before clipping, as `scaler.unscale_` comes before
`clip_grad_norm_`); when any unscaled gradient holds an inf or nan, every parameter, slot and the
step counter keep their values (`where(overflow, old, new)`), `skipped_steps` counts one, the scale
is multiplied by `backoff-factor` and the good-step count restarts; otherwise, after
`growth-interval` good steps in a row the scale is multiplied by `growth-factor`
(torch.amp.GradScaler's `_amp_update_scale_`).

Options: `optimizer` (sgd, adam, adamw), `momentum`, `nesterov`, `beta1`, `beta2`, `eps`,
`weight-decay`, `clip-grad-norm` (0: no clipping), `loss-scaling`, `growth-factor`,
`backoff-factor`, `growth-interval`. The default learning rate is not an option: it is the caller's
default for the `lr` input. `train_pipeline` writes the whole training pipeline for sdc.train.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from sdc.diagnostics import DiagnosticSink, SdcError
from sdc.dialect.builder import OpBuilder
from sdc.dialect.ir import (ARG_ATTRS, RES_ATTRS, arg_names, attr_dicts, entry_function, read_attrs, result_names,
                            set_attr_dicts, tensor_spec, tensor_type)
from sdc.dialect.opdef import OPS
from sdc.dialect.shapes import TensorSpec
from sdc.mlir import ir
from sdc.optim import LossScaler, Optimizer, from_options, global_norm_scale
from sdc.transforms.autodiff import GRAD_PREFIX
from sdc.transforms.loss_scale import SCALE_INPUT, SCALE_VALUE, SCALED_LOSS
from sdc.transforms.base import ModulePass

STATE_ATTR = "sdc.state"  # on an entry input: the name of the output that updates it
GOOD_STEPS = f"{SCALE_INPUT}.good_steps"
SKIPPED_STEPS = "skipped_steps"
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
    loss_scaling: bool = False
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000

    name = "sdc-optimizer-step"
    summary = "turn trained parameters into state and append the optimizer update (after sdc-autodiff)"

    def describe(self) -> Optimizer:
        options: dict = {"optimizer": self.optimizer, "weight_decay": self.weight_decay,
                         "clip_grad_norm": self.clip_grad_norm or None}
        if self.loss_scaling:  # init_scale is sdc-loss-scale's business
            options["loss_scaler"] = LossScaler(growth_factor=self.growth_factor, backoff_factor=self.backoff_factor,
                                                growth_interval=self.growth_interval)
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
    scaler = optimizer.loss_scaler
    if scaler is not None:
        items += ["loss-scaling=true", f"growth-factor={scaler.growth_factor!r}",
                  f"backoff-factor={scaler.backoff_factor!r}", f"growth-interval={scaler.growth_interval}"]
    return f"sdc-optimizer-step{{{' '.join(items)}}}"


LOW_PRECISIONS = ("bf16", "f16")


def training_optimizer(optimizer: Optimizer, precision: str) -> Optimizer:
    """The optimizer a step compiled in `precision` runs: f16 gets dynamic loss scaling (a default
    `LossScaler`) unless the optimizer brings its own."""
    if precision == "f16" and optimizer.loss_scaler is None:
        from dataclasses import replace

        return replace(optimizer, loss_scaler=LossScaler())
    return optimizer


def train_pipeline(optimizer: Optimizer, precision: str = "f32", wrt: Sequence[str] = ()) -> list[str]:
    """The passes that turn a forward-and-loss program into a training step (what sdc.train runs
    before the target's pipeline). bf16/f16: the forward is lowered first (sdc-mixed-precision), so
    sdc-autodiff differentiates the low program (the backward computes in the dtypes of the forward
    ops it differentiates, as under torch.autocast) and each f32 parameter's gradient comes back
    through its cast in f32; the update that sdc-optimizer-step appends then runs on f32 master
    weights (the compile pipeline's sdc-mixed-precision leaves a module it lowered before).
    `wrt`: the parameters to train (default: every float parameter). Recomputation under a memory
    budget is the compile pipeline's (sdc-recompute after sdc-fuse)."""
    passes: list[str] = []
    if precision in LOW_PRECISIONS:
        passes.append(f"sdc-mixed-precision{{precision={precision}}}")
    scaler = optimizer.loss_scaler
    autodiff = [f'wrt="{",".join(wrt)}"'] if wrt else []
    if scaler is not None:
        passes.append(f"sdc-loss-scale{{init-scale={scaler.init_scale!r}}}")
        autodiff.insert(0, f"results={SCALED_LOSS}")
    passes.append(f"sdc-autodiff{{{' '.join(autodiff)}}}" if autodiff else "sdc-autodiff")
    passes.append(pass_options(optimizer))
    return passes


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
        taken = arg_names(self.fn)
        scaling = self.optimizer.loss_scaler is not None
        new_inputs = [LR, STEP, *self._state_names([p for _, p in grads])] + (
            [GOOD_STEPS, SKIPPED_STEPS] if scaling else [])
        clash = next((n for n in new_inputs if n in taken), None)
        if clash is not None:
            self.diag.error(self.fn, f"sdc-optimizer-step: the entry function already has an input named '{clash}'")
            return
        returned = list(ret.operands)
        dropped = {g for g, _ in grads}
        scale = None
        if scaling:
            if SCALE_INPUT not in taken or SCALED_LOSS not in names or SCALE_VALUE not in names:
                self.diag.error(self.fn, f"sdc-optimizer-step with loss-scaling runs after sdc-loss-scale and "
                                         f"sdc-autodiff{{results={SCALED_LOSS}}}: the entry function needs the input "
                                         f"'{SCALE_INPUT}' and the results '{SCALED_LOSS}' and '{SCALE_VALUE}'")
                return
            dropped |= {names.index(SCALED_LOSS), names.index(SCALE_VALUE)}
            scale = (self.block.arguments[taken.index(SCALE_INPUT)], returned[names.index(SCALE_VALUE)])
        kept = [i for i in range(len(returned)) if i not in dropped]
        grad_values = {p: returned[i] for i, p in grads}
        self._rewrite(ret, params, [p for _, p in grads], grad_values, kept, names, scale)

    def _state_names(self, trained: list[str]) -> list[str]:
        return [name for p in trained for name in (p, *(f"{s}.{p}" for s in self.optimizer.slots))]

    def _add_input(self, spec: TensorSpec, attrs: dict[str, ir.Attribute], arg_dicts: list) -> ir.Value:
        value = self.block.add_argument(tensor_type(spec), self.fn.location)
        arg_dicts.append(attrs)
        return value

    def _rewrite(self, ret: ir.Operation, params: dict, trained: list[str], grad_values: dict, kept: list[int],
                 names: list[str], scale: tuple[ir.Value, ir.Value] | None = None) -> None:
        """`scale`: under loss scaling, the `loss_scale` input and the scale the step used."""
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
            scaling_state: dict[str, ir.Value] = {}
            if scale is not None:  # the existing loss_scale input becomes state, then its two counters
                index = list(self.block.arguments).index(scale[0])
                arg_dicts[index] = {**arg_dicts[index], STATE_ATTR: ir.StringAttr.get(NEXT_PREFIX + SCALE_INPUT)}
                state.append((SCALE_INPUT, scale[0]))
                for name in (GOOD_STEPS, SKIPPED_STEPS):
                    scaling_state[name] = state_input(name, TensorSpec((), COUNTER_DTYPE))
            lr_in = self._add_input(TensorSpec((), COUNTER_DTYPE), {"sdc.name": ir.StringAttr.get(LR)}, arg_dicts)
            for p in trained:
                for op in params.pop(p):
                    op.results[0].replace_all_uses_with(inputs[p])
                    op.erase()
            b = OpBuilder(ir.InsertionPoint(ret), self.fn.location)
            step = b.op("add", step_in, b.scalar(1.0, COUNTER_DTYPE))
            grads = [grad_values[p] for p in trained]
            overflow = None
            if scale is not None:
                inverse = b.op("div", b.scalar(1.0, COUNTER_DTYPE), scale[1])
                grads = [b.op("mul", g, _as(b, inverse, b.spec(g).dtype)) for g in grads]
                overflow = _any_not_finite(b, grads)
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
            if overflow is not None:  # a skipped step: every state keeps its value, the scale backs off
                olds = dict(state)
                updated = {n: b.op("where", overflow, olds[n], v) for n, v in updated.items()}
                updated.update(_next_scale(b, self.optimizer.loss_scaler, overflow, scale[1],
                                           scaling_state[GOOD_STEPS], scaling_state[SKIPPED_STEPS]))
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


def _any_not_finite(b: OpBuilder, grads: list[ir.Value]) -> ir.Value:
    """A rank-0 i1: does any gradient hold an inf or a nan? `g * 0` is 0 for a finite g and nan for
    an inf or a nan, so the sum of those over every gradient is nan exactly when one is not finite
    (two cheap reductions per gradient instead of isinf, isnan and an or)."""
    total = None
    for g in grads:
        spec = b.spec(g)
        zeroed = b.op("mul", g, b.scalar(0.0, spec.dtype))
        s = b.op("reduce_sum", zeroed, axes=list(range(spec.rank)), keepdims=False) if spec.rank else zeroed
        s = _as(b, s, COUNTER_DTYPE)
        total = s if total is None else b.op("add", total, s)
    return b.op("isnan", total)


def _next_scale(b: OpBuilder, scaler: LossScaler, overflow: ir.Value, scale: ir.Value, good: ir.Value,
                skipped: ir.Value) -> dict[str, ir.Value]:
    """GradScaler's update: back off and restart the count on overflow; else count a good step and
    grow the scale (restarting the count) when the count reaches the interval."""
    f32 = COUNTER_DTYPE
    zero, one = b.scalar(0.0, f32), b.scalar(1.0, f32)
    counted = b.op("add", good, one)
    grow = b.op("ge", counted, b.scalar(float(scaler.growth_interval), f32))
    grown = b.op("where", grow, b.op("mul", scale, b.scalar(scaler.growth_factor, f32)), scale)
    return {
        SCALE_INPUT: b.op("where", overflow, b.op("mul", scale, b.scalar(scaler.backoff_factor, f32)), grown),
        GOOD_STEPS: b.op("where", overflow, zero, b.op("where", grow, zero, counted)),
        SKIPPED_STEPS: b.op("add", skipped, b.op("where", overflow, one, zero)),
    }


def _as(b: OpBuilder, value: ir.Value, dtype: str) -> ir.Value:
    """`value` in `dtype` (the counter and the rate are f32; a bf16 parameter's update is bf16)."""
    return value if b.spec(value).dtype == dtype else b.op("cast", value, dtype=dtype)
