"""The training entry of each frontend: a torch module, a JAX loss function, an ONNX model.

    step = sdc.compile_train(model, (x, y), loss=F.cross_entropy, optimizer=sdc.optim.AdamW(lr=3e-4))
    loss = step(x, y)                   # or step.step(x, y, lr=1e-4): a new rate, no recompile

    step = sdc.compile_train(loss_fn, (params, x, y), optimizer=sdc.optim.AdamW(lr=1e-3))
    loss = step(x, y)                   # loss_fn(params, x, y) with the params as trained state
    params = step.params()              # the params pytree, numpy leaves

    step = sdc.compile_train("model.onnx", (x, y), loss="cross_entropy", optimizer=sdc.optim.SGD(lr=0.1))
    sdc compile model.onnx --train --loss cross_entropy --optimizer adamw --lr 1e-3 -o step.sdc

A torch module is exported as `loss(model(*inputs), target)` (the batch is `(*inputs, target)`)
through the torch frontend (sdc.frontend.torch.training), its parameters `sdc.parameter`s already.
JAX and ONNX import the forward through their frontend with the trained tensors as *entry inputs*, so no
importer folds them into constants, and then turn those inputs into `sdc.parameter`s with their
initial values (`inputs_to_parameters`). From there it is sdc.train's path: `sdc-autodiff` derives
the gradients on the dialect (never jax.grad or an ONNX training graph), `sdc-optimizer-step`
appends the update and makes the parameters state, and the result is a `sdc.train.TrainStep`
(save / `sdc.load_train` / state_dict work the same).

- JAX: `loss_fn(params, *batch)` returns one scalar float. `example_batch = (params, *batch)`: the
  first element is the params pytree (arrays: its leaves are the initial values, and their names
  are the leaves' paths, `params.w1`); every float leaf trains.
- ONNX: every float initializer trains (integer ones, shape vectors, stay constants). The loss is
  built on the model's first output and a new input `target`: `cross_entropy` (logits [N, C],
  target i64 [N], the mean over the batch, as torch's F.cross_entropy) or `mse` (target of the
  output's shape, the mean of the squared error, as F.mse_loss). The step takes the model's inputs
  and then the target.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from sdc.diagnostics import SdcError
from sdc.train.driver import check_optimizer, finish_train_step, training_options

LOSSES = ("cross_entropy", "mse")
TARGET = "target"  # the entry input an ONNX step's named loss reads
LOSS_RESULT = "loss"


# ---------------------------------------------------------------- torch


def compile_train_torch(model: Any, example_batch: Sequence[Any], *, loss: Callable[..., Any] | None,
                        optimizer: Any, output: str | os.PathLike | None = None, device: str | None = None,
                        seed: int = 0, **fields: Any) -> Any:
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

    from sdc.frontend.torch.training import MODEL_PREFIX, import_step, tie_shared_parameters, with_loss

    if not isinstance(model, torch.nn.Module):
        raise SdcError(f"sdc.compile_train trains a torch.nn.Module, found {type(model).__name__}")
    if loss is None:
        raise SdcError("a torch model trains under loss=, a function of (output, target) such as F.cross_entropy")
    check_optimizer(optimizer)
    batch = tuple(example_batch)
    if len(batch) < 2:
        raise SdcError(f"example_batch must be (*inputs, target): at least two tensors, found {len(batch)}")
    options = training_options(fields)
    module, params, provenance = import_step(with_loss(model, loss), batch)
    tie_shared_parameters(module, params, model)
    wrt = [MODEL_PREFIX + n for n, p in model.named_parameters()
           if p.requires_grad and p.is_floating_point() and MODEL_PREFIX + n in params]
    if not wrt:
        raise SdcError("the model has no float parameter that requires a gradient: nothing to train")
    return finish_train_step(module, params, wrt, optimizer, options, output=output, device=device,
                             provenance=provenance, seed=seed)


# ---------------------------------------------------------------- JAX


class JaxTrainStep:
    """A compiled step of a JAX loss function: `step(*batch)` (the batch's pytrees, numpy or jax
    arrays) returns the loss; `params()` the trained params pytree. Everything else (save,
    state_dict, lr=, info) is the `sdc.train.TrainStep` it wraps (`.train_step`)."""

    def __init__(self, train_step: Any, params_tree: Any, param_names: Sequence[str]):
        self.train_step = train_step
        self.params_tree = params_tree
        self.param_names = list(param_names)

    def step(self, *batch: Any, lr: float | None = None) -> float:
        import jax

        leaves = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(batch)]
        return self.train_step.step(*leaves, lr=lr)

    __call__ = step

    def params(self) -> Any:
        """The params pytree as trained so far (numpy leaves)."""
        import jax

        state = self.train_step.program.state
        return jax.tree_util.tree_unflatten(self.params_tree, [state[n].cpu().numpy() for n in self.param_names])

    def __getattr__(self, name: str) -> Any:
        if name in ("train_step", "params_tree", "param_names"):
            raise AttributeError(name)
        return getattr(self.train_step, name)

    def __repr__(self) -> str:
        return f"JaxTrainStep({self.train_step!r})"


def compile_train_jax(loss_fn: Any, example_batch: Sequence[Any] | None, *, optimizer: Any,
                      output: str | os.PathLike | None = None, device: str | None = None,
                      **fields: Any) -> JaxTrainStep:
    """The training step of `loss_fn(params, *batch)`; `example_batch = (params, *batch)`."""
    import jax
    import torch

    from sdc.frontend.stablehlo.jax_entry import import_jax

    check_optimizer(optimizer)
    args = tuple(example_batch) if isinstance(example_batch, (tuple, list)) else ()
    if len(args) < 2:
        raise SdcError("example_batch of a JAX loss function must be (params, *batch): the params pytree and "
                       f"at least one batch array, found {len(args)} element{'s' if len(args) != 1 else ''}")
    options = training_options(fields)
    leaves, params_tree = jax.tree_util.tree_flatten(args[0])
    if not leaves:
        raise SdcError("the params pytree (the first element of example_batch) has no arrays: nothing to train")
    for leaf in leaves:
        if not hasattr(leaf, "__array__"):
            raise SdcError(f"the params must be arrays (their values are the initial state), found a "
                           f"{type(leaf).__name__}")
    imported, signature = import_jax(loss_fn, args)
    param_names = list(signature.input_names[:len(leaves)])
    initial = {n: torch.from_numpy(np.array(leaf)) for n, leaf in zip(param_names, leaves)}
    trained = [n for n in param_names if initial[n].is_floating_point()]
    if not trained:
        raise SdcError("the params pytree has no float array: nothing to train")
    _check_scalar_loss(imported.module, f"{getattr(loss_fn, '__name__', 'the loss function')}")
    inputs_to_parameters(imported.module, initial)
    params = {**imported.params, **initial}
    provenance = {"source": getattr(loss_fn, "__name__", type(loss_fn).__name__), "frontend": "jax"}
    step = finish_train_step(imported.module, params, trained, optimizer, options, output=output, device=device,
                             provenance=provenance)
    return JaxTrainStep(step, params_tree, param_names)


def _check_scalar_loss(module: Any, what: str) -> None:
    from sdc.dialect.ir import entry_function, tensor_spec

    with module.context:
        fn = entry_function(module)
        ret = list(fn.regions[0].blocks[0].operations)[-1]
        specs = [tensor_spec(v.type) for v in ret.operands]
    if len(specs) != 1 or specs[0].shape != () or not specs[0].dtype.startswith(("f", "bf")):
        found = ", ".join(f"{s.dtype}{list(s.shape)}" for s in specs) or "nothing"
        raise SdcError(f"{what} must return one scalar float, the loss; it returns {found}")


# ---------------------------------------------------------------- ONNX


def compile_train_onnx(model: Any, example_batch: Sequence[Any] | None, *, loss: Any, optimizer: Any,
                       output: str | os.PathLike | None = None, device: str | None = None,
                       **fields: Any) -> Any:
    """The training step of an ONNX model (a path or ModelProto) under the named `loss`;
    `example_batch = (*inputs, target)` fixes the inputs' shapes (None: the model's, or
    `input_shapes=`)."""
    import torch

    from sdc.frontend import import_model

    check_optimizer(optimizer)
    if loss not in LOSSES:
        raise SdcError(f"an ONNX model trains under a named loss: loss= must be one of {', '.join(LOSSES)}, "
                       f"found {loss!r}")
    proto, source = _load_onnx(model)
    initial = trainable_initializers(proto)
    if not initial:
        raise SdcError(f"'{source}' has no float initializer: nothing to train")
    data_inputs = [i.name for i in proto.graph.input if i.name not in initial]
    shapes = dict(fields.pop("input_shapes", None) or {})
    if example_batch is not None:
        batch = tuple(example_batch)
        if len(batch) != len(data_inputs) + 1:
            raise SdcError(f"example_batch must be (*inputs, target): '{source}' has {len(data_inputs)} input"
                           f"{'s' if len(data_inputs) != 1 else ''} ({', '.join(data_inputs)}), so "
                           f"{len(data_inputs) + 1} arrays, found {len(batch)}")
        shapes.update({name: [int(d) for d in np.shape(x)] for name, x in zip(data_inputs, batch)})
    shapes.update(_bound_input_shapes(proto, data_inputs, shapes))
    options = training_options({**fields, "input_shapes": shapes or None})
    module, params, provenance = import_model(proto, input_shapes=options.input_shapes_dict())
    provenance = {**provenance, "source": source}
    inputs_to_parameters(module, {n: torch.from_numpy(v) for n, v in initial.items()})
    append_loss(module, loss)
    params = {**params, **{n: torch.from_numpy(v) for n, v in initial.items()}}
    return finish_train_step(module, params, list(initial), optimizer, options, output=output, device=device,
                             provenance=provenance)


def _bound_input_shapes(proto: Any, names: Sequence[str], shapes: Mapping[str, Any]) -> dict[str, list[int]]:
    """The static dims of each input in `names` not in `shapes` whose named dims (`N`) are all bound
    to a size there (`--input-shape N=32`): a step is compiled for one batch size, so the binding
    fixes the inputs' shapes before the import (where a symbol would stay a run-time dim)."""
    out: dict[str, list[int]] = {}
    for value in proto.graph.input:
        if value.name not in names or value.name in shapes or not value.type.tensor_type.HasField("shape"):
            continue
        dims = []
        for d in value.type.tensor_type.shape.dim:
            bound = shapes.get(d.dim_param) if d.HasField("dim_param") else None
            dims.append(d.dim_value if d.HasField("dim_value") else bound if isinstance(bound, int) else None)
        if dims and all(isinstance(d, int) for d in dims):
            out[value.name] = dims
    return out


def _load_onnx(model: Any) -> tuple[Any, str]:
    """A copy of the model (the caller's is not changed) and its name for messages."""
    import onnx

    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        try:
            return onnx.load(str(path)), path.name
        except Exception as e:  # onnx's loader raises protobuf's DecodeError, OSError, ValueError, ...
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise SdcError(f"cannot read '{path}' as an ONNX model: {first}") from None
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy, f"<{model.graph.name or 'ModelProto'}>"


def trainable_initializers(proto: Any) -> dict[str, np.ndarray]:
    """Move every float initializer of `proto` (changed in place) to a graph input and return their
    values: as inputs they reach the IR as run-time values, which the importer cannot fold."""
    from onnx import TensorProto, helper, numpy_helper

    floats = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16)
    graph = proto.graph
    listed = {i.name for i in graph.input}
    kept, values = [], {}
    for tensor in graph.initializer:
        if tensor.data_type not in floats:
            kept.append(tensor)
            continue
        values[tensor.name] = np.array(numpy_helper.to_array(tensor))
        if tensor.name not in listed:
            graph.input.append(helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return values


def append_loss(module: Any, loss: str) -> None:
    """Replace the entry's results by `loss(first result, target)`, `target` a new last input."""
    from sdc.dialect import attrs as A
    from sdc.dialect.builder import OpBuilder
    from sdc.dialect.ir import (ARG_ATTRS, RES_ATTRS, attr_dicts, entry_function, result_dims, set_attr_dicts,
                                tensor_spec, tensor_type)
    from sdc.dialect.shapes import DYN, TensorSpec
    from sdc.mlir import func, ir

    with module.context, ir.Location.unknown():
        fn = entry_function(module)
        block = fn.regions[0].blocks[0]
        ret = list(block.operations)[-1]
        out = list(ret.operands)[0]
        spec = tensor_spec(out.type)
        if any(d is DYN for d in spec.shape):
            named = (result_dims(fn, skip_bad=True) or [None])[0] or [None] * len(spec.shape)
            shown = [n if d is DYN and isinstance(n, str) else "?" if d is DYN else d
                     for d, n in zip(spec.shape, named)]
            symbols = [n for d, n in zip(spec.shape, named) if d is DYN and isinstance(n, str)]
            fix = (f"--input-shape {symbols[0]}=SIZE (or example_batch)" if symbols
                   else "example_batch (or --input-shape NAME=DIMS for every input)")
            raise SdcError(f"training needs static shapes: the model's output is "
                           f"{spec.dtype}[{', '.join(map(str, shown))}]; a step is compiled for one batch size: "
                           f"give {fix}")
        if not spec.dtype.startswith(("f", "bf")):
            raise SdcError(f"the loss needs a float output, the model's first output is {spec.dtype}")
        if loss == "cross_entropy" and len(spec.shape) != 2:
            raise SdcError(f"cross_entropy takes logits [N, C]: the model's first output has shape {list(spec.shape)}")
        target_spec = TensorSpec(spec.shape[:1], "i64") if loss == "cross_entropy" else spec
        args = attr_dicts(fn, ARG_ATTRS)  # before the new argument, which gets its own
        target = block.add_argument(tensor_type(target_spec), fn.location)
        b = OpBuilder(ir.InsertionPoint(ret), ret.location)
        if loss == "cross_entropy":
            picked = b.op("gather_elements", b.op("log_softmax", out, axis=1), b.op("unsqueeze", target, axes=[1]),
                          axis=1)
            value = b.op("neg", b.op("reduce_mean", picked, axes=[0, 1], keepdims=False))
        else:
            diff = b.op("sub", out, target)
            value = b.op("reduce_mean", b.op("mul", diff, diff), axes=list(range(len(spec.shape))), keepdims=False)
        with ir.InsertionPoint(ret), ret.location:  # the new terminator before the old, then the old goes
            func.ReturnOp([value])
        ret.erase()
        args.append({"sdc.name": ir.StringAttr.get(TARGET), "sdc.dims": A.dims(list(target_spec.shape))})
        fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
            [a.type for a in block.arguments], [value.type]))
        set_attr_dicts(fn, ARG_ATTRS, args)
        set_attr_dicts(fn, RES_ATTRS, [{"sdc.name": ir.StringAttr.get(LOSS_RESULT)}])


# ---------------------------------------------------------------- shared


def inputs_to_parameters(module: Any, values: Mapping[str, Any]) -> None:
    """Each entry input named in `values` becomes an `sdc.parameter` of that name (its value is
    the initial state); the input leaves the signature."""
    from sdc.dialect.ir import ARG_ATTRS, arg_names, attr_dicts, entry_function, set_attr_dicts
    from sdc.dialect.builder import create
    from sdc.mlir import ir

    with module.context:
        fn = entry_function(module)
        block = fn.regions[0].blocks[0]
        names = arg_names(fn)
        dicts = attr_dicts(fn, ARG_ATTRS)
        missing = sorted(set(values) - set(names))
        if missing:
            raise SdcError(f"no entry input named {', '.join(repr(m) for m in missing)} to train")
        for i in reversed(range(len(names))):
            if names[i] not in values:
                continue
            arg = block.arguments[i]
            with ir.InsertionPoint.at_block_begin(block), fn.location:
                op = create("parameter", [], {"name": names[i]}, result_types=[arg.type])
            arg.replace_all_uses_with(op.results[0])
            block.erase_argument(i)
            del dicts[i]
        fn_type = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
        fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
            [a.type for a in block.arguments], list(fn_type.results)))
        set_attr_dicts(fn, ARG_ATTRS, dicts)
