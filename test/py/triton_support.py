"""Shared by the Triton codegen tests: kernels run under the interpreter on the CPU, wherever the
tests run (a GPU host too), compiled for target cuda."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from sdc.compiler import compile_module
from sdc.ir_text import parse_module
from sdc.options import CompileOptions

TORCH_DTYPE = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


@pytest.fixture(autouse=True)
def interpreter(monkeypatch):
    """TRITON_INTERPRET=1 before any kernel source runs (triton reads it when `@triton.jit` decorates)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")


@pytest.fixture
def rng() -> torch.Generator:
    return torch.Generator().manual_seed(int(np.random.default_rng().integers(1 << 31)))


def compile_cuda(text: str, out: Path, params=None):
    """IR text compiled for target cuda into `out`, loaded on the CPU (so its kernels interpret)."""
    return compile_module(parse_module(text), params or {}, CompileOptions(target="cuda"), output=out, device="cpu")


def launches(artifact: Path) -> list[dict]:
    """The launch steps of rank 0's plan."""
    plan = json.loads((artifact / "plan.json").read_text())
    return [s for s in plan["ranks"][0]["steps"] if s["kind"] == "launch"]
