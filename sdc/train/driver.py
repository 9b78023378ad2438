"""The training compile driver: a forward-and-loss module -> a compiled, loaded `TrainStep`.

Whichever frontend imported the forward (sdc.train.frontends), `finish_train_step` runs
sdc-autodiff and sdc-optimizer-step on it (docs/training.md), makes the buffers the forward updates
state, gives each state its initial value (a parameter its own; moments and the step counter zero)
and compiles the result like any program (the target's pipeline, plan, artifact). Under a memory
budget it checks the artifact's arena against the budget and searches the recompute cuts when the
first plan misses it (`_compile_within_budget`).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Sequence

from sdc.diagnostics import SdcError
from sdc.train.step import TrainStep


def finish_train_step(module: Any, params: dict[str, Any], wrt: Sequence[str], optimizer: Any, options: Any, *,
                      output: str | os.PathLike | None, device: str | None, provenance: dict[str, Any],
                      seed: int = 0) -> TrainStep:
    """A forward-and-loss module (result 0 the scalar loss, `wrt` its trained `sdc.parameter`s) made
    into a compiled, loaded step, whichever frontend imported it: the train passes, buffer updates
    (`next.<buffer>` results) made state, the initial state (a parameter its own value; moments and
    the step counter zero, as torch's), then the target's pipeline."""
    import torch

    from sdc import dtypes
    from sdc.compiler import run_pipeline
    from sdc.dialect.ir import ARG_ATTRS, arg_names, attr_dicts, entry_function, tensor_spec
    from sdc.runtime.state import StatefulProgram
    from sdc.transforms.optimizer_step import STATE_ATTR, train_pipeline, training_optimizer

    optimizer = training_optimizer(optimizer, options.precision)  # f16: dynamic loss scaling
    run_pipeline(module, train_pipeline(optimizer, options.precision, list(wrt)), options.dump_ir)
    buffers = _buffer_updates_to_state(module)
    rng = {"seed": int(seed), "stride": _random_counters(module)}
    with module.context:
        fn = entry_function(module)
        args = fn.regions[0].blocks[0].arguments
        state_specs = {name: tensor_spec(a.type) for name, a, d in zip(arg_names(fn), args, attr_dicts(fn, ARG_ATTRS))
                       if STATE_ATTR in d}
    initial = dict(params)
    for name, spec in state_specs.items():
        if name not in initial:  # moments and the step counter start at zero, as torch's
            initial[name] = torch.zeros(spec.shape, dtype=dtypes.to_torch(spec.dtype))
    trained = [n for n in state_specs if n in params and n not in buffers]
    train_info = {"optimizer": optimizer.options(), "lr": optimizer.lr}
    exe = _compile_within_budget(module, initial, options, output=output,
                                 provenance={**provenance, "train": train_info}, device=device)
    return TrainStep(StatefulProgram(exe), lr=optimizer.lr, optimizer=optimizer.options(), params=trained,
                     buffers=buffers, rng=rng if rng["stride"] else None)


def _buffer_updates_to_state(module: Any) -> list[str]:
    """Each result `next.<b>` whose `b` is still an `sdc.parameter` (a buffer the forward updated,
    as the torch importer writes it) makes `b` state: an entry input `b` whose `sdc.state` names
    that result, replacing the parameter. Returns the buffers' names, in order."""
    from sdc.dialect.ir import ARG_ATTRS, attr_dicts, entry_function, read_attrs, result_names, set_attr_dicts
    from sdc.dialect.opdef import OPS
    from sdc.mlir import ir
    from sdc.transforms.optimizer_step import NEXT_PREFIX, STATE_ATTR

    with module.context:
        fn = entry_function(module)
        block = fn.regions[0].blocks[0]
        params: dict[str, list] = {}
        for op in block.operations:
            if op.operation.name == "sdc.parameter":
                params.setdefault(read_attrs(OPS["parameter"], op)["name"], []).append(op.operation)
        arg_dicts = attr_dicts(fn, ARG_ATTRS)
        buffers = []
        for result in result_names(fn):
            name = result[len(NEXT_PREFIX):]
            if not result.startswith(NEXT_PREFIX) or name not in params:
                continue
            ops = params.pop(name)
            value = block.add_argument(ops[0].results[0].type, fn.location)
            arg_dicts.append({"sdc.name": ir.StringAttr.get(name), STATE_ATTR: ir.StringAttr.get(result)})
            for op in ops:
                op.results[0].replace_all_uses_with(value)
                op.erase()
            buffers.append(name)
        if buffers:
            fn_type = ir.FunctionType(fn.attributes["function_type"].value)
            fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
                [a.type for a in block.arguments], list(fn_type.results)))
            set_attr_dicts(fn, ARG_ATTRS, arg_dicts)
    return buffers


def _random_counters(module: Any) -> int:
    """How many random counters one run of the entry draws: the elements of its `sdc.random_uniform`s."""
    import math

    from sdc.dialect.ir import entry_function, tensor_spec

    with module.context:
        block = entry_function(module).regions[0].blocks[0]
        return sum(math.prod(tensor_spec(op.results[0].type).shape) for op in block.operations
                   if op.operation.name == "sdc.random_uniform")


def _arena_bytes(exe: Any) -> int:
    arena = exe.artifact.program(exe.rank).arena
    return arena.size if arena is not None else 0


def _compile_within_budget(module: Any, initial: dict[str, Any], options: Any, *, output: Any,
                           provenance: dict[str, Any], device: str | None) -> Any:
    """Compile the step; under `options.memory_budget`, so that the artifact's arena (what
    `TrainStep.info` reports) really is within it. sdc-recompute chooses against its own estimate
    of the plan, which the planner's later decisions (views, in-place kernels) can move either way;
    when the artifact misses the budget, the recompute cuts (`recompute.SWEEP`, from the least
    recomputation to the most) are compiled and measured, bisecting for the first that fits. A budget
    no cut meets is one error naming the lowest arena reached."""
    from sdc.compiler import compile_module
    from sdc.fmt import format_bytes
    from sdc.transforms.recompute import SWEEP, cut_request, estimate_misses_budget

    budget = options.memory_budget

    def attempt(cut: tuple[float, bool] | None, out: Any = None) -> tuple[Any, int | None]:
        with module.context:
            trial = module.clone().operation
        if cut is not None:
            cut_request(trial, *cut)
        try:
            exe = compile_module(trial, initial, options, output=out, provenance=provenance, device=device)
        except SdcError:
            if cut is None and estimate_misses_budget(trial):
                return None, None  # sdc-recompute's estimate says no; the measured cuts decide
            raise
        return exe, _arena_bytes(exe)

    if budget is None:
        return compile_module(module, initial, options, output=output, provenance=provenance, device=device)
    exe, arena = attempt(None)  # `output` gets only the artifact returned, never one that missed
    if exe is not None and arena <= budget:
        return exe if output is None else attempt(None, output)[0]
    fitting: dict[int, Any] = {}

    def measure(k: int) -> int:
        trial, size = attempt(SWEEP[k])
        if size <= budget:
            fitting.clear()  # bisection moves to lower indices: keep only the latest fit alive
            fitting[k] = trial
        return size

    fit, lowest = first_fitting_cut(measure, len(SWEEP), budget)
    if arena is not None:
        lowest = min(lowest, arena)
    if fit is None:
        raise SdcError(f"sdc-recompute: memory budget {format_bytes(budget)} ({budget} bytes) is below what "
                       f"recomputation reaches: the lowest planned peak is {format_bytes(lowest)} ({lowest} bytes)")
    return fitting[fit] if output is None else attempt(SWEEP[fit], output)[0]


def first_fitting_cut(arena_of: Callable[[int], int], count: int, budget: int) -> tuple[int | None, int]:
    """Bisect cuts 0..count-1 (ordered from the least recomputation to the most, so their arenas
    fall, roughly) for the first whose `arena_of(k)` is within `budget`: (its index, or None when the
    cuts tried all miss it; the lowest arena measured). log2(count) + 1 measurements."""
    lo, hi, fit, lowest = 0, count - 1, None, None
    while lo <= hi:
        mid = (lo + hi) // 2
        size = arena_of(mid)
        lowest = size if lowest is None else min(lowest, size)
        if size <= budget:
            fit, hi = mid, mid - 1
        else:
            lo = mid + 1
    return fit, lowest if lowest is not None else 0


def training_options(fields: Mapping[str, Any]) -> Any:
    """The `CompileOptions` of a step from `compile_train`'s keywords (None: the default), checked."""
    from sdc.compiler import check_compilable
    from sdc.options import CompileOptions

    options = CompileOptions.of(None, **{k: v for k, v in fields.items() if v is not None})
    check_compilable(options)
    return options


def check_optimizer(optimizer: Any) -> None:
    from sdc.optim import Optimizer

    if not isinstance(optimizer, Optimizer):
        raise SdcError(f"optimizer must be an sdc.optim optimizer (SGD, Adam, AdamW), found "
                       f"{type(optimizer).__name__}")
