"""ONNX indexing, scatter/gather, cumulative, sorting and resampling ops (a NodeImporter mixin)."""

from __future__ import annotations


class IndexingOps:
    """Methods `op_<OpType>(self, node, inputs, attrs)`; see onnx_ops.NodeImporter for helpers."""
