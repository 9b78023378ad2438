"""Training from the command line: `sdc compile MODEL --train ...` writes a training checkpoint at
step 0, `sdc train CKPT --input NAME=FILE.npy ...` runs steps on it and saves it back.

    sdc compile model.onnx --train --loss cross_entropy --optimizer adamw --lr 1e-3 \\
        --input-shape x=32,784 [--memory-budget 64M] [--precision bf16|fp16] -o step.sdc
    sdc train step.sdc --input x=x.npy --input target=y.npy [--steps N] [--lr LR] [--no-save]
    python -c "import sdc; step = sdc.load_train('step.sdc')"      # the same checkpoint from Python

The checkpoint is sdc.train's (program.sdc/, state.safetensors, checkpoint.json written last), so
`sdc.load_train` continues it; `sdc train` is that, one batch from .npy files, N steps.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, TextIO

from sdc.cli.common import UsageError
from sdc.diagnostics import SdcError

OPTIMIZERS = ("sgd", "adam", "adamw")
DEFAULT_LR = 1e-3
BYTE_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}  # --memory-budget 512K, 64M, 2G: binary units


def add_compile_flags(c: Any) -> None:
    """The training flags of `sdc compile`."""
    from sdc.train.frontends import LOSSES

    c.add_argument("--train", action="store_true",
                   help="write a training step (forward, loss, backward, optimizer update) as a checkpoint at "
                        "step 0 that `sdc train` and sdc.load_train continue (ONNX models; docs/training.md)")
    c.add_argument("--loss", metavar="LOSS", help=f"with --train: the loss on the first output and a new input "
                                                  f"'target': {', '.join(LOSSES)}")
    c.add_argument("--optimizer", metavar="NAME", help=f"with --train: {', '.join(OPTIMIZERS)} (default adamw)")
    c.add_argument("--lr", metavar="RATE", help=f"with --train: the default learning rate (default {DEFAULT_LR:g})")
    c.add_argument("--weight-decay", metavar="WD", help="with --train: weight decay (default: the optimizer's)")
    c.add_argument("--momentum", metavar="M", help="with --train and --optimizer sgd: momentum (default 0)")
    c.add_argument("--memory-budget", metavar="BYTES",
                   help="with --train: the most bytes the step's planned intermediates may take at once "
                        "(an integer, or with K/M/G for KiB/MiB/GiB); activations are recomputed in the backward "
                        "to fit it, and a budget below the reachable minimum is an error naming it")


def add_train_parser(sub: Any) -> None:
    t = sub.add_parser("train", help="run training steps of a checkpoint written by `sdc compile --train` "
                                     "(or TrainStep.save) and save it back")
    t.add_argument("checkpoint", help="the checkpoint directory")
    t.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="a batch input from a .npy file; every input (the model's, then 'target') is needed")
    t.add_argument("--steps", default="1", metavar="N", help="steps to run on the batch (default 1)")
    t.add_argument("--lr", metavar="RATE", help="the learning rate of these steps (default: the checkpoint's)")
    t.add_argument("--no-save", action="store_true", help="do not write the checkpoint back")
    t.add_argument("--device", default=None, metavar="cpu|cuda", help="where the steps run (default cpu)")
    t.add_argument("--debug", action="store_true", help="show Python tracebacks")


def _number(text: str | None, option: str, default: float | None = None) -> float | None:
    if text is None:
        return default
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"{option} expects a number, found '{text}'") from None


def optimizer_of(args: Any) -> Any:
    """The sdc.optim optimizer the flags describe (UsageError for a malformed command line)."""
    import sdc.optim as optim

    name = (args.optimizer or "adamw").lower()
    if name not in OPTIMIZERS:
        raise UsageError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, found '{args.optimizer}'")
    fields: dict[str, Any] = {"lr": _number(args.lr, "--lr", DEFAULT_LR)}
    decay = _number(args.weight_decay, "--weight-decay")
    if decay is not None:
        fields["weight_decay"] = decay
    momentum = _number(args.momentum, "--momentum")
    if momentum is not None:
        if name != "sgd":
            raise UsageError(f"--momentum applies to --optimizer sgd, not {name}")
        fields["momentum"] = momentum
    return {"sgd": optim.SGD, "adam": optim.Adam, "adamw": optim.AdamW}[name](**fields)


def memory_budget_of(text: str | None) -> int | None:
    """--memory-budget's bytes: digits with an optional K/M/G (binary) suffix. UsageError when it is not
    that shape; the value's sense (positive) is CompileOptions' to check, as for the Python API."""
    if text is None:
        return None
    spelled = text.strip().upper().removesuffix("IB").removesuffix("B")
    digits, suffix = (spelled[:-1], spelled[-1]) if spelled[-1:] in BYTE_SUFFIXES else (spelled, "")
    if not digits.lstrip("-").isdigit():
        raise UsageError(f"--memory-budget expects a number of bytes (an integer, or with K, M or G), "
                         f"found '{text}'")
    return int(digits) * BYTE_SUFFIXES[suffix]


def check_compile_flags(args: Any) -> bool:
    """Whether `sdc compile` writes a training step; UsageError for training flags without --train."""
    given = [f for f in ("loss", "optimizer", "lr", "weight_decay", "momentum") if getattr(args, f) is not None]
    if not args.train:
        if given:
            raise UsageError("--loss, --optimizer and --lr need --train")
        if args.memory_budget is not None:
            raise UsageError("--memory-budget needs --train (it bounds a training step's activations)")
        return False
    if args.loss is None:
        raise UsageError("--train needs --loss (cross_entropy or mse): the loss on the model's first output")
    return True


def compile_train_command(args: Any, options: Any, out: TextIO) -> int:
    """`sdc compile MODEL --train ...`: compile the step, save it at step 0."""
    from sdc.train import compile_train

    optimizer = optimizer_of(args)
    if args.params is not None or args.mesh is not None or args.explain is not None:
        raise UsageError("--params, --mesh and --explain do not apply with --train")
    output = Path(args.output) if args.output else Path(Path(args.model).stem + ".sdc")
    started = time.perf_counter()
    fields = {"target": options.target, "input_shapes": options.input_shapes or None,
              "precision": options.precision, "dump_ir": options.dump_ir,
              "memory_budget": memory_budget_of(args.memory_budget),
              "c_kernels": options.c_kernels, "cuda_cpp": options.cuda_cpp, "conv_kernel": options.conv_kernel}
    step = compile_train(args.model, None, loss=args.loss, optimizer=optimizer, **fields)
    step.save(output)
    names = ", ".join(t.name for t in step.inputs)
    out.write(f"wrote {output} (training step: {len(step.params)} parameters, {optimizer.kind} lr "
              f"{optimizer.lr:g}, {args.loss} loss, precision {options.precision}; inputs {names}; planned peak "
              f"{step.info()['planned_peak_bytes']} bytes) in {time.perf_counter() - started:.2f} s\n")
    return 0


def train_command(args: Any, out: TextIO) -> int:
    """`sdc train CKPT ...`: N steps on one batch from .npy files, the losses printed, saved back."""
    from sdc.train import load_train

    if not args.steps.isdigit() or int(args.steps) < 1:
        raise UsageError(f"--steps expects an integer >= 1, found '{args.steps}'")
    steps = int(args.steps)
    lr = _number(args.lr, "--lr")
    files: dict[str, str] = {}
    for item in args.input:
        name, sep, file = item.partition("=")
        if not sep or not name or not file:
            raise UsageError(f"--input expects NAME=FILE.npy, found '{item}'")
        files[name] = file
    step = load_train(args.checkpoint, device=args.device)
    names = [t.name for t in step.inputs]
    unknown = sorted(set(files) - set(names))
    if unknown:
        raise SdcError(f"--input {unknown[0]}: the step has no input '{unknown[0]}' (inputs: {', '.join(names)})")
    missing = [n for n in names if n not in files]
    if missing:
        raise SdcError(f"the step needs every input: give --input {missing[0]}=FILE.npy (inputs: {', '.join(names)})")
    batch = [_read_input(files[t.name], t.name) for t in step.inputs]
    if step.program.exe.device.type != "cpu":
        batch = [b.to(step.program.exe.device) for b in batch]
    for _ in range(steps):
        started = time.perf_counter()
        loss = step.step(*batch, lr=lr)
        out.write(f"step {step.step_count}  loss {loss:.9g}  ({(time.perf_counter() - started) * 1e3:.1f} ms)\n")
    if not args.no_save:
        step.save(args.checkpoint)
        out.write(f"saved {args.checkpoint} at step {step.step_count}\n")
    return 0


def _read_input(file: str, name: str) -> Any:
    """One batch input from a .npy file (no pickles), as a torch tensor; dtypes are the step's to check."""
    import numpy as np
    import torch

    try:
        array = np.load(file, allow_pickle=False)
    except FileNotFoundError:
        raise SdcError(f"--input {name}: cannot open '{file}': no such file") from None
    except (OSError, ValueError) as e:
        raise SdcError(f"--input {name}: cannot read '{file}' as a .npy array: {e}") from None
    if not isinstance(array, np.ndarray):
        raise SdcError(f"--input {name}: expected one array in a .npy file")
    return torch.from_numpy(np.array(array))
