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


def compile_cuda(text: str, out: Path, params=None, precision: str = "f32", device: str = "cpu"):
    """IR text compiled for target cuda into `out`, loaded on `device` (on the CPU its kernels interpret)."""
    return compile_module(parse_module(text), params or {}, CompileOptions(target="cuda", precision=precision),
                          output=out, device=device)


def triton_launches(exe) -> list:
    """The executable's TritonLaunch instructions, in plan order."""
    from sdc.runtime.launch.triton import TritonLaunch

    return [step for step in exe._executor.program if isinstance(step, TritonLaunch)]


def record_constexprs(exe) -> list[list[dict]]:
    """Wraps each generated kernel of `exe` so that every launch appends its keyword arguments
    (constexprs and launch options) to that kernel's list: what the launcher chose per call."""
    calls: list[list[dict]] = []
    for step in triton_launches(exe):
        seen: list[dict] = []
        calls.append(seen)
        fn = step.fn

        class Recording:
            def __getitem__(self, grid, fn=fn, seen=seen):
                def launch(*args, **kwargs):
                    seen.append({**kwargs, "grid": grid})
                    return fn[grid](*args, **kwargs)
                return launch

        object.__setattr__(step, "fn", Recording())
    return calls


def launches(artifact: Path) -> list[dict]:
    """The launch steps of rank 0's plan."""
    plan = json.loads((artifact / "plan.json").read_text())
    return [s for s in plan["ranks"][0]["steps"] if s["kind"] == "launch"]
