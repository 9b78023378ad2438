"""The launcher base (sdc/runtime/launch/base.py) and what the three launchers take from it."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import itertools
from pathlib import Path

import pytest
import torch

from sdc.runtime.launch import base
from sdc.runtime.launch.c import CLaunch
from sdc.runtime.launch.cuda import CudaLaunch
from sdc.runtime.launch.triton import TritonLaunch

LAUNCH = Path(base.__file__).parent


def test_settled_forgets_everything_when_full_and_reads_as_a_dict():
    s = base.Settled(3)
    for k in range(3):
        assert s.remember(k, f"v{k}") == f"v{k}"
    assert s.get(1) == "v1" and len(s) == 3
    s.remember(3, "v3")
    assert dict(s) == {3: "v3"}


@pytest.mark.parametrize("launch", [TritonLaunch, CudaLaunch, CLaunch])
def test_every_launcher_remembers_its_signatures_in_a_settled(launch):
    (settled,) = [f for f in dataclasses.fields(launch) if f.name == "settled"]
    made = settled.default_factory()
    assert isinstance(made, base.Settled) and made.limit >= 16


@pytest.mark.parametrize("order", list(itertools.permutations(range(4))))
def test_inverse_and_dense_strides_are_those_of_torch_permute(order):
    shape = (2, 3, 5, 7)
    physical = torch.empty([shape[d] for d in order])
    view = physical.permute(base.inverse(order))
    assert tuple(view.shape) == shape
    assert base.dense_strides(shape, order) == view.stride()
    assert base.dense_strides(shape) == torch.empty(shape).stride()


def test_no_launcher_keeps_its_own_copy_of_the_shared_helpers():
    shared = {"read_domain", "inverse", "_inverse", "dense_strides", "_dense_strides", "measure", "Autotuner",
              "KernelSources"}
    for path in sorted(LAUNCH.glob("*.py")):
        if path.name == "base.py":
            continue
        defined = {n.name for n in ast.parse(path.read_text()).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        assert not defined & shared, f"{path.name} defines {sorted(defined & shared)} (base.py has them)"


@pytest.mark.parametrize("old", ["triton_launcher", "cuda_launcher", "c_launcher", "triton_direct"])
def test_the_launchers_live_only_under_launch(old):
    """The launchers moved to sdc/runtime/launch/; their old modules are gone, not kept as second names."""
    assert importlib.util.find_spec(f"sdc.runtime.{old}") is None
