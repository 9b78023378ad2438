"""sdc ops for ONNX nn coverage (see docs/dialect.md)."""

from __future__ import annotations
