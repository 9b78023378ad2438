"""ONNX neural-network composites: attention, losses, normalizations, recurrences (a NodeImporter mixin)."""

from __future__ import annotations


class NNOps:
    """Methods `op_<OpType>(self, node, inputs, attrs)`; see onnx_ops.NodeImporter for helpers."""
