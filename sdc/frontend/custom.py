"""Emitting a user-registered op (`sdc.custom_op`) from any frontend, as one `sdc.custom`.

The torch importer calls this for a `torch.ops.<ns>.<op>` node, the ONNX importer for a node of a
custom domain; both have already checked, for the whole model up front, that every such op is
registered (sdc/dialect/custom_registry.py).
"""

from __future__ import annotations

from typing import Any

import sympy

from sdc import custom_ops
from sdc.dialect.ops.custom import CUSTOM
from sdc.dialect.shapes import ShapeError
from sdc.frontend.builder import Builder
from sdc.frontend.values import V


def emit_custom(builder: Builder, name: str, inputs: list[V | None], attrs: dict[str, Any]) -> list[V]:
    """`sdc.custom` of op `name` on the tensor `inputs` (in order) with the non-tensor `attrs`."""
    missing = [i for i, v in enumerate(inputs) if v is None]
    if missing:
        raise ShapeError(f"custom op '{name}': input {missing[0]} is omitted; custom ops take every input they list")
    plain = {k: _plain(name, k, v) for k, v in attrs.items()}
    text = custom_ops.encode_attributes(name, plain)
    return builder.emit_all(CUSTOM, list(inputs), {"name": name, "attributes": text})


def _plain(op: str, key: str, value: Any) -> Any:
    """Sizes that torch recorded as integers (sympy) as ints; a run-time size cannot be an attribute."""
    if isinstance(value, (list, tuple)):
        return [_plain(op, key, v) for v in value]
    if isinstance(value, sympy.Basic):
        if value.is_Integer:
            return int(value)
        raise ShapeError(f"custom op '{op}': attribute '{key}' is the run-time size {value}; custom op attributes "
                         "must be known at compile time")
    if isinstance(value, V):
        raise ShapeError(f"custom op '{op}': attribute '{key}' is a tensor; pass tensors as inputs")
    return value
