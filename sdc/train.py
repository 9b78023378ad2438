"""A compiled training step: forward, loss, backward and optimizer update as one static graph.

    step = sdc.compile_train(model, (x, y), loss=F.cross_entropy, optimizer=sdc.optim.AdamW(lr=3e-4))
    for x, y in batches:
        loss = step(x, y)                  # or step.step(x, y, lr=1e-4): a new rate, no recompile
    step.state_dict()                      # the model's parameters and updated buffers, by torch's names
    step.save("ckpt"); step = sdc.load_train("ckpt")   # resume bit for bit

`compile_train` exports `loss(model(*inputs), target)` through the torch frontend as one program
(the batch is `(*inputs, target)`), runs sdc-autodiff and sdc-optimizer-step on it (docs/training.md),
gives each state its initial value (a parameter its own; moments and the step counter zero) and
compiles the result like any program (the target's pipeline, plan, artifact). The artifact's
manifest lists the state; `TrainStep` runs it through `sdc.runtime.state.StatefulProgram`, which
keeps the state on the device and rebinds it after each call. Buffers the forward updates (a
training-mode batch norm's running statistics, `next.<buffer>` results of the torch importer) are
state as well, never trained. Random ops (dropout) read the inputs `rng.seed` and `rng.offset`;
`TrainStep.step` feeds them the seed and `steps taken * counters per step`, so a run is
reproducible and a resumed run draws what the uninterrupted one drew.

A checkpoint (`save`) is a directory: `program.sdc/` (a copy of the compiled artifact, itself
hash-checked), `state.safetensors` (every state tensor by its state name) and `checkpoint.json`,
the index, written last: the SHA-256 of the state file and of the artifact's manifest, the
optimizer, the default learning rate, the parameter and buffer names and the RNG's seed and
stride. It is written under a temporary name next to `dir` and renamed into place, so a crash
while saving leaves the previous checkpoint.
Loading (`load_train`) reads no pickle and imports no MLIR: it checks the format, the hashes and
the state's dtypes and shapes.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any, Callable, Sequence

from sdc.diagnostics import SdcError

CHECKPOINT_FORMAT = "sdc-train-checkpoint"
CHECKPOINT_VERSION = 1
INDEX = "checkpoint.json"
STATE_FILE = "state.safetensors"
PROGRAM_DIR = "program.sdc"
SLOT_NAMES = ("momentum_buffer", "exp_avg", "exp_avg_sq")  # sdc.optim's slots: torch's names
MODEL_PREFIX = "model."  # the wrapper's attribute: parameter `model.0.weight` is torch's `0.weight`
RNG_INPUTS = ("rng.seed", "rng.offset")  # the torch importer's inputs for random ops (rank-0 i64)


class TrainStep:
    """A loaded training step; build it with `sdc.compile_train` or `sdc.load_train`."""

    def __init__(self, program: Any, *, lr: float, optimizer: dict[str, Any], params: list[str],
                 buffers: Sequence[str] = (), rng: dict[str, int] | None = None):
        self.program = program  # sdc.runtime.state.StatefulProgram
        self.lr = float(lr)  # the rate a call without lr= uses
        self.optimizer = dict(optimizer)  # sdc.optim.Optimizer.options()
        self.params = list(params)  # the trained parameters' state names, in order
        self.buffers = list(buffers)  # state the forward updates (batch norm's running statistics)
        names = {t.name for t in program.inputs}
        # random ops: {"seed": the default seed, "stride": counters one step draws}; None: no random op
        self.rng = dict(rng) if rng is not None and set(RNG_INPUTS) <= names else None
        self.seed = int(self.rng["seed"]) if self.rng else 0
        self.inputs = [t for t in program.inputs if t.name != "lr" and t.name not in RNG_INPUTS]
        self._steps = self.step_count if self.rng else 0  # host copy of the counter: no device sync per call

    def step(self, *batch: Any, lr: float | None = None, seed: int | None = None) -> float:
        """One training step on `batch` (the model's inputs, then the target); returns the loss.
        A model with random ops (dropout) draws from `seed` (default: the step's `seed`) at counter
        offset `steps taken * counters per step`: a run is reproducible, a resumed run draws what the
        uninterrupted one drew, and a new seed is a new input value (no recompile)."""
        import torch

        rate = torch.tensor(self.lr if lr is None else float(lr), dtype=torch.float32)
        with self.program.lock:  # steps from several threads run one at a time, each on the last one's state
            extra = {}
            if self.rng is not None:
                extra = {RNG_INPUTS[0]: torch.tensor(self.seed if seed is None else int(seed), dtype=torch.int64),
                         RNG_INPUTS[1]: torch.tensor(self._steps * int(self.rng["stride"]), dtype=torch.int64)}
            (loss, *_) = self.program(*batch, lr=rate, **extra)
            self._steps += 1
        return float(loss)

    __call__ = step

    @property
    def step_count(self) -> int:
        """How many steps the state has taken (the optimizer's step counter)."""
        return int(self.program.state["step"])

    @property
    def skipped_steps(self) -> int:
        """Steps dynamic loss scaling skipped (an inf or nan gradient; fp16); 0 without loss scaling."""
        skipped = self.program.state.get("skipped_steps")
        return 0 if skipped is None else int(skipped)

    def info(self) -> dict[str, Any]:
        """What the step reports: `steps`, `skipped_steps`, `loss_scale` (the next step's; None without
        loss scaling) and `planned_peak_bytes` (the memory plan's arena: the step's intermediates)."""
        scale = self.program.state.get("loss_scale")
        scaler = self.optimizer.get("loss_scaler") or {}
        if scale is not None:
            scale = float(scale) if float(scale) > 0 else float(scaler.get("init_scale", 0.0))  # 0: no step yet
        arena = self.program.exe.artifact.program(self.program.exe.rank).arena
        return {"steps": self.step_count, "skipped_steps": self.skipped_steps, "loss_scale": scale,
                "planned_peak_bytes": arena.size if arena is not None else 0}

    def state_dict(self) -> dict[str, Any]:
        """The trained parameters and the updated buffers (batch norm's `running_mean`, `running_var`,
        `num_batches_tracked`) by torch's names (`model.load_state_dict(..., strict=False)` takes them)."""
        return {_torch_name(p): self.program.state[p].clone() for p in self.params + self.buffers}

    def optimizer_state(self) -> dict[str, dict[str, Any]]:
        """torch.optim's per-parameter state (`exp_avg`, `exp_avg_sq`, `momentum_buffer`, `step`), keyed by
        the parameter's torch name rather than its index."""
        state = self.program.state
        out = {}
        for p in self.params:
            slots = {slot: state[f"{slot}.{p}"].clone() for slot in SLOT_NAMES if f"{slot}.{p}" in state}
            out[_torch_name(p)] = {**slots, "step": state["step"].clone()}
        return out

    def save(self, directory: str | os.PathLike) -> Path:
        """Write a checkpoint directory (see the module doc); an existing checkpoint there is replaced."""
        from safetensors.torch import save_file

        from sdc.runtime.format import sha256_file

        out = Path(directory)
        if out.is_symlink() or (out.exists() and not (out / INDEX).is_file() and (not out.is_dir() or any(out.iterdir()))):
            raise SdcError(f"cannot save the checkpoint to '{out}': it exists and is not an sdc checkpoint")
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.parent / f".{out.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            shutil.copytree(self.program.exe.path, tmp / PROGRAM_DIR)
            state = {name: t.detach().cpu().contiguous() for name, t in self.program.state.items()}
            save_file(state, str(tmp / STATE_FILE), metadata={"format": CHECKPOINT_FORMAT})
            index = {"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_VERSION, "step": self.step_count,
                     "lr": self.lr, "optimizer": self.optimizer, "params": self.params, "buffers": self.buffers,
                     "rng": self.rng,
                     "files": {rel: sha256_file(tmp / rel) for rel in (STATE_FILE, f"{PROGRAM_DIR}/manifest.json")}}
            (tmp / INDEX).write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")  # the index last
            old = None
            if out.exists():
                old = out.parent / f".{out.name}.{os.getpid()}.{secrets.token_hex(4)}.old"
                os.replace(out, old)
            os.replace(tmp, out)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        except OSError as e:
            raise SdcError(f"cannot save the checkpoint to '{out}': {e.strerror or e}") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return out

    def __repr__(self) -> str:
        ins = ", ".join(str(t) for t in self.inputs)
        return f"TrainStep({self.optimizer['optimizer']}, lr={self.lr:g}, step {self.step_count}: ({ins}) -> loss)"


def load_train(directory: str | os.PathLike, device: str | None = None) -> TrainStep:
    """Load a checkpoint written by `TrainStep.save` and continue from its state (no MLIR needed)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from sdc.runtime import load
    from sdc.runtime.format import sha256_file
    from sdc.runtime.state import StatefulProgram

    root = Path(directory)

    def bad(message: str) -> SdcError:
        return SdcError(f"checkpoint '{root}': {message}")

    try:
        index = json.loads((root / INDEX).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise bad(f"has no {INDEX} (not a checkpoint, or its save did not finish)") from None
    except (OSError, ValueError) as e:
        raise bad(f"{INDEX} is unreadable: {e}") from None
    if not isinstance(index, dict) or index.get("format") != CHECKPOINT_FORMAT:
        raise bad(f"{INDEX} is not an sdc training checkpoint index")
    if index.get("format_version") != CHECKPOINT_VERSION:
        raise bad(f"format version {index.get('format_version')!r} is not supported (this sdc reads "
                  f"{CHECKPOINT_VERSION})")
    files = index.get("files")
    if not isinstance(files, dict) or set(files) != {STATE_FILE, f"{PROGRAM_DIR}/manifest.json"}:
        raise bad(f"{INDEX} must list the hashes of {STATE_FILE} and {PROGRAM_DIR}/manifest.json")
    for rel, digest in files.items():
        path = root / rel
        if not path.is_file():
            raise bad(f"{rel} is missing")
        if sha256_file(path) != digest:
            raise bad(f"{rel} does not match its SHA-256 in {INDEX}: the file changed after the checkpoint was saved")
    try:
        lr, optimizer, params = float(index["lr"]), dict(index["optimizer"]), [str(p) for p in index["params"]]
        buffers = [str(b) for b in index.get("buffers", [])]
        rng = None if index.get("rng") is None else {"seed": int(index["rng"]["seed"]),
                                                      "stride": int(index["rng"]["stride"])}
    except (KeyError, TypeError, ValueError) as e:
        raise bad(f"{INDEX} is malformed ({type(e).__name__}: {e})") from None
    program = StatefulProgram(load(root / PROGRAM_DIR, device=device))
    try:
        state = load_file(str(root / STATE_FILE))
    except (SafetensorError, OSError) as e:
        raise bad(f"{STATE_FILE} is unreadable: {e}") from None
    program.load_state(state, f"checkpoint '{root}' ({STATE_FILE})")
    return TrainStep(program, lr=lr, optimizer=optimizer, params=params, buffers=buffers, rng=rng)


def compile_train(model: Any, example_batch: Sequence[Any], *, loss: Callable[..., Any], optimizer: Any,
                  output: str | os.PathLike | None = None, device: str | None = None, seed: int = 0,
                  **fields: Any) -> TrainStep:
    """Compile a training step of a torch `nn.Module`: forward, `loss(model(*inputs), target)`, backward
    and the `optimizer` (an `sdc.optim` optimizer) update, as one program over the batch
    `example_batch = (*inputs, target)` (its shapes are the step's). Every float parameter that
    requires a gradient trains; buffers the forward updates (a training-mode batch norm's running
    statistics) are state too. The model's mode is the step's: in `train()` mode batch norm uses
    the batch's statistics and dropout draws its masks (from `seed`, see `TrainStep.step`).
    `output`: where the artifact goes (default: a temporary directory); `device`: where it runs;
    other keywords are `CompileOptions` fields (`target="cpu"`), among them `memory_budget` (bytes:
    recompute activations in the backward to fit it) and `precision="bf16"`/`"fp16"` (low-precision
    compute on f32 master weights, fp16 with dynamic loss scaling; docs/training.md)."""
    import torch

    from sdc.compiler import check_compilable
    from sdc.optim import Optimizer
    from sdc.options import CompileOptions

    if not isinstance(model, torch.nn.Module):
        raise SdcError(f"sdc.compile_train trains a torch.nn.Module, found {type(model).__name__}")
    if not isinstance(optimizer, Optimizer):
        raise SdcError(f"optimizer must be an sdc.optim optimizer (SGD, Adam, AdamW), found "
                       f"{type(optimizer).__name__}")
    batch = tuple(example_batch)
    if len(batch) < 2:
        raise SdcError(f"example_batch must be (*inputs, target): at least two tensors, found {len(batch)}")
    options = CompileOptions.of(None, **fields)
    check_compilable(options)
    module, params, provenance = _import_step(_WithLoss(model, loss), batch)
    _tie_shared_parameters(module, params, model)
    wrt = [MODEL_PREFIX + n for n, p in model.named_parameters()
           if p.requires_grad and p.is_floating_point() and MODEL_PREFIX + n in params]
    if not wrt:
        raise SdcError("the model has no float parameter that requires a gradient: nothing to train")
    return finish_train_step(module, params, wrt, optimizer, options, output=output, device=device,
                             provenance=provenance, seed=seed)


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
    from sdc.transforms.recompute import SWEEP, cut_request

    budget = options.memory_budget

    def attempt(cut: tuple[float, bool] | None, out: Any = None) -> tuple[Any, int | None]:
        with module.context:
            trial = module.clone().operation
        if cut is not None:
            cut_request(trial, *cut)
        try:
            exe = compile_module(trial, initial, options, output=out, provenance=provenance, device=device)
        except SdcError as e:
            if cut is None and "below what recomputation reaches" in str(e):
                return None, None  # its estimate says no; the measured cuts decide
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


def _import_step(wrapper: Any, batch: tuple) -> tuple[Any, dict[str, Any], dict[str, str]]:
    """The torch frontend's import of the wrapper, with buffer updates allowed (they become state)."""
    from sdc.frontend.torch.importer import import_torch

    imported = import_torch(wrapper, batch, buffer_updates=True)
    return imported.module, dict(imported.params), {"source": f"<{type(wrapper.model).__name__}>",
                                                    "frontend": "torch"}


def _tie_shared_parameters(module: Any, params: dict[str, Any], model: Any) -> None:
    """One parameter under several names (tied embeddings: `head.weight is tok.weight`) reaches the
    program under each name; rename every `sdc.parameter` of an alias to the first name
    (`named_parameters()`'s), so autodiff adds up their cotangents and the optimizer updates one
    weight, as torch does."""
    from sdc.dialect.ir import entry_function, read_attrs
    from sdc.dialect.opdef import OPS
    from sdc.mlir import ir

    first: dict[int, str] = {}
    alias: dict[str, str] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        canonical = first.setdefault(id(p), MODEL_PREFIX + name)
        if canonical != MODEL_PREFIX + name:
            alias[MODEL_PREFIX + name] = canonical
    if not alias:
        return
    with module.context:
        for op in entry_function(module).regions[0].blocks[0].operations:
            if op.operation.name == "sdc.parameter":
                name = read_attrs(OPS["parameter"], op)["name"]
                if name in alias:
                    op.operation.attributes["name"] = ir.StringAttr.get(alias[name])
    for name in alias:
        params.pop(name, None)


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


def _torch_name(state_name: str) -> str:
    return state_name[len(MODEL_PREFIX):] if state_name.startswith(MODEL_PREFIX) else state_name


def _with_loss_class():
    import torch

    class WithLoss(torch.nn.Module):
        """`model` and `loss` as one module whose forward returns the scalar loss (what is exported)."""

        def __init__(self, model: torch.nn.Module, loss: Callable[..., Any]):
            super().__init__()
            self.model = model
            self.loss = loss

        def forward(self, *batch: Any) -> Any:
            return self.loss(self.model(*batch[:-1]), batch[-1])

    return WithLoss


def _WithLoss(model: Any, loss: Callable[..., Any]) -> Any:
    return _with_loss_class()(model, loss)
