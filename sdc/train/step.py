"""The compiled training step and its checkpoints.

    step.state_dict()                      # the model's parameters and updated buffers, by torch's names
    step.save("ckpt"); step = sdc.load_train("ckpt")   # resume bit for bit

`TrainStep` runs a training step's artifact through `sdc.runtime.state.StatefulProgram`, which
keeps the state on the device and rebinds it after each call. Random ops (dropout) read the inputs
`rng.seed` and `rng.offset`; `TrainStep.step` feeds them the seed and `steps taken * counters per
step`, so a run is reproducible and a resumed run draws what the uninterrupted one drew.

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
from typing import Any, Sequence

from sdc.diagnostics import SdcError

CHECKPOINT_FORMAT = "sdc-train-checkpoint"
CHECKPOINT_VERSION = 1
INDEX = "checkpoint.json"
STATE_FILE = "state.safetensors"
PROGRAM_DIR = "program.sdc"
SLOT_NAMES = ("momentum_buffer", "exp_avg", "exp_avg_sq")  # sdc.optim's slots: torch's names
MODEL_PREFIX = "model."  # sdc.frontend.torch.training's wrapper attribute: `model.0.weight` is torch's `0.weight`
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


def _torch_name(state_name: str) -> str:
    return state_name[len(MODEL_PREFIX):] if state_name.startswith(MODEL_PREFIX) else state_name
