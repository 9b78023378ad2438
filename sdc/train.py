"""A compiled training step: forward, loss, backward and optimizer update as one static graph.

    step = sdc.compile_train(model, (x, y), loss=F.cross_entropy, optimizer=sdc.optim.AdamW(lr=3e-4))
    for x, y in batches:
        loss = step(x, y)                  # or step.step(x, y, lr=1e-4): a new rate, no recompile
    step.state_dict()                      # the model's parameters, by torch's names
    step.save("ckpt"); step = sdc.load_train("ckpt")   # resume bit for bit

`compile_train` exports `loss(model(*inputs), target)` through the torch frontend as one program
(the batch is `(*inputs, target)`), runs sdc-autodiff and sdc-optimizer-step on it (docs/training.md),
gives each state its initial value (a parameter its own; moments and the step counter zero) and
compiles the result like any program (the target's pipeline, plan, artifact). The artifact's
manifest lists the state; `TrainStep` runs it through `sdc.runtime.state.StatefulProgram`, which
keeps the state on the device and rebinds it after each call.

A checkpoint (`save`) is a directory: `program.sdc/` (a copy of the compiled artifact, itself
hash-checked), `state.safetensors` (every state tensor by its state name) and `checkpoint.json`,
the index, written last: the SHA-256 of the state file and of the artifact's manifest, the
optimizer, the default learning rate and the parameter names. It is written under a temporary
name next to `dir` and renamed into place, so a crash while saving leaves the previous checkpoint.
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


class TrainStep:
    """A loaded training step; build it with `sdc.compile_train` or `sdc.load_train`."""

    def __init__(self, program: Any, *, lr: float, optimizer: dict[str, Any], params: list[str]):
        self.program = program  # sdc.runtime.state.StatefulProgram
        self.lr = float(lr)  # the rate a call without lr= uses
        self.optimizer = dict(optimizer)  # sdc.optim.Optimizer.options()
        self.params = list(params)  # the trained parameters' state names, in order
        self.inputs = [t for t in program.inputs if t.name != "lr"]

    def step(self, *batch: Any, lr: float | None = None) -> float:
        """One training step on `batch` (the model's inputs, then the target); returns the loss."""
        import torch

        rate = torch.tensor(self.lr if lr is None else float(lr), dtype=torch.float32)
        (loss, *_) = self.program(*batch, lr=rate)
        return float(loss)

    __call__ = step

    @property
    def step_count(self) -> int:
        """How many steps the state has taken (the optimizer's step counter)."""
        return int(self.program.state["step"])

    def state_dict(self) -> dict[str, Any]:
        """The trained parameters by torch's names (`model.load_state_dict(..., strict=False)` takes them)."""
        return {_torch_name(p): self.program.state[p].clone() for p in self.params}

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
                     "lr": self.lr, "optimizer": self.optimizer, "params": self.params,
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
    except (KeyError, TypeError, ValueError) as e:
        raise bad(f"{INDEX} is malformed ({type(e).__name__}: {e})") from None
    program = StatefulProgram(load(root / PROGRAM_DIR, device=device))
    try:
        state = load_file(str(root / STATE_FILE))
    except (SafetensorError, OSError) as e:
        raise bad(f"{STATE_FILE} is unreadable: {e}") from None
    program.load_state(state, f"checkpoint '{root}' ({STATE_FILE})")
    return TrainStep(program, lr=lr, optimizer=optimizer, params=params)


def compile_train(model: Any, example_batch: Sequence[Any], *, loss: Callable[..., Any], optimizer: Any,
                  output: str | os.PathLike | None = None, device: str | None = None, **fields: Any) -> TrainStep:
    """Compile a training step of a torch `nn.Module`: forward, `loss(model(*inputs), target)`, backward
    and the `optimizer` (an `sdc.optim` optimizer) update, as one program over the batch
    `example_batch = (*inputs, target)` (its shapes are the step's). Every float parameter trains.
    `output`: where the artifact goes (default: a temporary directory); `device`: where it runs;
    other keywords are `CompileOptions` fields (`target="cpu"`)."""
    import torch

    from sdc.compiler import check_compilable, compile_module, run_pipeline
    from sdc.dialect.ir import ARG_ATTRS, arg_names, attr_dicts, entry_function, tensor_spec
    from sdc.frontend import import_model
    from sdc.optim import Optimizer
    from sdc.options import CompileOptions
    from sdc.runtime.state import StatefulProgram
    from sdc.transforms.optimizer_step import STATE_ATTR, pass_options

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
    module, params, provenance = import_model(_WithLoss(model, loss), example_args=batch)
    run_pipeline(module, ["sdc-autodiff", pass_options(optimizer)], options.dump_ir)
    with module.context:
        fn = entry_function(module)
        args = fn.regions[0].blocks[0].arguments
        state_specs = {name: tensor_spec(a.type) for name, a, d in zip(arg_names(fn), args, attr_dicts(fn, ARG_ATTRS))
                       if STATE_ATTR in d}
    from sdc import dtypes

    initial = dict(params)
    for name, spec in state_specs.items():
        if name not in initial:  # moments and the step counter start at zero, as torch's
            initial[name] = torch.zeros(spec.shape, dtype=dtypes.to_torch(spec.dtype))
    trained = [n for n in state_specs if n in params]
    train_info = {"optimizer": optimizer.options(), "lr": optimizer.lr}
    exe = compile_module(module, initial, options, output=output, provenance={**provenance, "train": train_info},
                         device=device)
    return TrainStep(StatefulProgram(exe), lr=optimizer.lr, optimizer=optimizer.options(), params=trained)


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
