"""sdc ops for ONNX indexing coverage (see docs/dialect.md)."""

from __future__ import annotations
