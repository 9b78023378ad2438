"""Training: forward, loss, backward and optimizer update compiled as one static graph (docs/training.md).

    step = sdc.compile_train(model, (x, y), loss=F.cross_entropy, optimizer=sdc.optim.AdamW(lr=3e-4))
    for x, y in batches:
        loss = step(x, y)                  # or step.step(x, y, lr=1e-4): a new rate, no recompile
    step.save("ckpt"); step = sdc.load_train("ckpt")   # resume bit for bit

- `step.py`: `TrainStep`, the loaded step, and its checkpoints (`save`, `load_train`).
- `driver.py`: the compile driver, a forward-and-loss module to a loaded `TrainStep`
  (`finish_train_step`), whichever frontend imported it; the memory-budget search.
- `frontends.py`: each frontend's entry (a torch module, a JAX loss function, an ONNX model);
  `compile_train` below picks one with `sdc.frontend.frontend_for`, the dispatch `sdc.compile` uses.
  The torch-specific IR edits live beside the torch frontend (sdc/frontend/torch/training.py).
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from sdc.diagnostics import SdcError
from sdc.train.driver import finish_train_step, first_fitting_cut
from sdc.train.step import MODEL_PREFIX, RNG_INPUTS, TrainStep, load_train

__all__ = ["MODEL_PREFIX", "RNG_INPUTS", "TrainStep", "compile_train", "finish_train_step", "first_fitting_cut",
           "load_train"]

TRAINABLE = ("torch", "jax", "onnx")
"""The frontends (`sdc.frontend.FRONTENDS` names) whose models `compile_train` trains."""


def compile_train(model: Any, example_batch: Sequence[Any] | None = None, *, loss: Any = None, optimizer: Any,
                  output: str | os.PathLike | None = None, device: str | None = None, **fields: Any) -> Any:
    """`sdc.compile_train`: the training step of a torch module, a JAX loss function or an ONNX model,
    by the frontend that imports it (sdc.train.frontends)."""
    from sdc.train import frontends

    kind = _trainable_kind(model)
    if kind == "torch":
        return frontends.compile_train_torch(model, example_batch, loss=loss, optimizer=optimizer, output=output,
                                             device=device, **fields)
    if kind == "jax":
        if loss is not None:
            raise SdcError(f"sdc.compile_train trains a torch.nn.Module, a JAX loss function or an ONNX model: a "
                           f"JAX loss function is its own loss, so leave loss= out (found "
                           f"{getattr(model, '__name__', type(model).__name__)} with loss=)")
        return frontends.compile_train_jax(model, example_batch, optimizer=optimizer, output=output, device=device,
                                           **fields)
    return frontends.compile_train_onnx(model, example_batch, loss=loss, optimizer=optimizer, output=output,
                                        device=device, **fields)


def _trainable_kind(model: Any) -> str:
    """`frontend_for`'s name for `model`, when it is one that trains; else one error. A path's errors
    (no such file) are `frontend_for`'s own."""
    from sdc.frontend import frontend_for

    if isinstance(model, (str, os.PathLike)):
        kind = frontend_for(model)
    else:
        try:
            kind = frontend_for(model)
        except SdcError:  # an object no frontend imports
            kind = None
    if kind not in TRAINABLE:
        raise SdcError(f"sdc.compile_train trains a torch.nn.Module, a JAX loss function or an ONNX model, "
                       f"found {type(model).__name__}")
    return kind
