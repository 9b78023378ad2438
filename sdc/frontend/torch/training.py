"""What training a torch module needs from the torch frontend: the module with its loss, its import
with buffer updates, and tied parameters made one.

`sdc.train.frontends.compile_train_torch` exports `loss(model(*inputs), target)` (the batch is
`(*inputs, target)`, `with_loss`) through the torch importer as one program, with the buffers the
forward updates (a training-mode batch norm's running statistics) as `next.<buffer>` results, which
the training driver makes state.
"""

from __future__ import annotations

from typing import Any, Callable

MODEL_PREFIX = "model."  # the wrapper's attribute: parameter `model.0.weight` is torch's `0.weight`


def import_step(wrapper: Any, batch: tuple) -> tuple[Any, dict[str, Any], dict[str, str]]:
    """The torch frontend's import of the wrapper, with buffer updates allowed (they become state)."""
    from sdc.frontend.torch.importer import import_torch

    imported = import_torch(wrapper, batch, buffer_updates=True)
    return imported.module, dict(imported.params), {"source": f"<{type(wrapper.model).__name__}>",
                                                    "frontend": "torch"}


def tie_shared_parameters(module: Any, params: dict[str, Any], model: Any) -> None:
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


def with_loss(model: Any, loss: Callable[..., Any]) -> Any:
    return _with_loss_class()(model, loss)
