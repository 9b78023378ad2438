"""sdc as an ONNX backend, following `onnx.backend.base` the way `onnxruntime.backend` does.

    from sdc import onnx_backend
    rep = onnx_backend.prepare(model)          # compile once
    outputs = rep.run([x])                     # or run_model(model, [x])

onnx's own test runner can drive it: `onnx.backend.test.BackendTest(sdc.onnx_backend, __name__)`.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from sdc.diagnostics import SdcError


def _to_numpy(t) -> np.ndarray:
    import torch

    if isinstance(t, torch.Tensor):
        if t.dtype == torch.bfloat16:
            import ml_dtypes

            return t.float().numpy().astype(ml_dtypes.bfloat16)
        return t.numpy()
    return np.asarray(t)


def _from_numpy(x: Any):
    import torch

    x = np.asarray(x)
    if x.dtype.name == "bfloat16":
        return torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16)
    x = np.asarray(x, order="C")  # (np.ascontiguousarray would turn rank 0 into rank 1)
    return torch.from_numpy(x if x.flags.writeable else x.copy())


class SdcRep(BackendRep):
    """A compiled model; `run` takes inputs in graph order (or a dict by name).

    A model whose shapes depend on input values (a Reshape whose shape is a graph input, say)
    is compiled at its first run with those inputs fixed, and again whenever they change: the
    small inputs are the guard, as torch.compile guards on Python ints. A model whose output
    shapes depend on its data (NonZero, NonMaxSuppression) is specialized on all its inputs.
    """

    def __init__(self, model: onnx.ModelProto | None, executable, input_names: Sequence[str]):
        self.model = model
        self.executable = executable
        self.input_names = list(input_names)
        self._specialized: dict[bytes, Any] = {}

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        named = dict(inputs) if isinstance(inputs, dict) else dict(zip(self.input_names, inputs))
        exe, named = self._executable_for(named)
        outs = exe(**{k: _from_numpy(v) for k, v in named.items()})
        return tuple(self._as_declared(i, _to_numpy(o)) for i, o in enumerate(outs))

    def _as_declared(self, index: int, array: np.ndarray) -> np.ndarray:
        """bf16 outputs come back widened to f32 when no torch tensor went in: narrow them again."""
        outputs = self.model.graph.output if self.model is not None else []
        if index < len(outputs) and outputs[index].type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16:
            import ml_dtypes

            if array.dtype != ml_dtypes.bfloat16:
                return array.astype(ml_dtypes.bfloat16)
        return array

    def _executable_for(self, named: dict[str, Any]):
        if self.executable is not None:
            return self.executable, named
        from sdc.frontend.onnx import ValueNeededError

        # First fix the small inputs (shapes, axes, counts); a model whose output *shapes* depend on
        # its data (NonZero, NonMaxSuppression, Unique) is then specialized on every input.
        small = {k: np.asarray(v) for k, v in named.items() if _is_shape_like(np.asarray(v))}
        everything = {k: np.asarray(v) for k, v in named.items()}
        for frozen in (small, everything):
            key = _value_key(frozen)
            if key not in self._specialized:
                try:
                    self._specialized[key] = _compile(self.model, frozen)
                except ValueNeededError:
                    if frozen is everything:
                        raise
                    continue
            return self._specialized[key], {k: v for k, v in named.items() if k not in frozen}
        raise AssertionError("unreachable")


def _value_key(frozen: dict[str, np.ndarray]) -> bytes:
    return b"|".join(k.encode() + b"=" + v.dtype.str.encode() + str(v.shape).encode() + v.tobytes()
                     for k, v in sorted(frozen.items()))


def _is_shape_like(value: np.ndarray) -> bool:
    return value.ndim <= 1 and value.size <= 64


def _compile(model: onnx.ModelProto, constant_inputs: dict[str, np.ndarray] | None = None):
    from sdc.compiler import compile_module
    from sdc.frontend.onnx import import_onnx
    from sdc.options import CompileOptions

    imported = import_onnx(model, constant_inputs=constant_inputs or None)
    return compile_module(imported.module, imported.params, CompileOptions(target="cpu"))


class SdcBackend(Backend):
    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> SdcRep:
        if not cls.supports_device(device):
            raise SdcError(f"device '{device}' is not supported by sdc's ONNX backend (use CPU)")
        from sdc.frontend.onnx import ValueNeededError

        inits = {i.name for i in model.graph.initializer}
        input_names = [i.name for i in model.graph.input if i.name not in inits]
        try:
            exe = _compile(model)
        except ValueNeededError:
            exe = None  # compiled per value of its small inputs, at run time
        return SdcRep(model, exe, input_names)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU", outputs_info=None, **kwargs):
        raise NotImplementedError("sdc compiles whole models; wrap the node in a model and use run_model")

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper().startswith("CPU")


prepare = SdcBackend.prepare
run_model = SdcBackend.run_model
run_node = SdcBackend.run_node
supports_device = SdcBackend.supports_device
is_compatible = SdcBackend.is_compatible
