"""A CPU executable keeps the pages of freed intermediates (sdc/runtime/host_memory.py): its calls stop
faulting in fresh pages from the kernel, which glibc's default thresholds made a convolution net do on
every call; SDC_KEEP_PAGES says whether, and a bad value is one error."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from pathlib import Path

import onnx
import pytest

import sdc
from sdc.diagnostics import SdcError
from sdc.runtime import host_memory

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc settings")

CALLS = textwrap.dedent("""
    import resource, sys
    import numpy as np, torch
    import sdc.runtime
    exe = sdc.runtime.load(sys.argv[1])
    x = np.random.rand(1, 3, 224, 224).astype(np.float32)
    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        exe(x)
    per_call = []
    for _ in range(15):
        before = faults()
        exe(x)
        per_call.append(faults() - before)
    print(sorted(per_call)[len(per_call) // 2], exe.keeps_pages)  # the median: one call's stray faults aside
""")


LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _faults_per_call(path, keep: str, runs: str = "0") -> tuple[float, bool]:
    env = {"SDC_KEEP_PAGES": keep, "OMP_NUM_THREADS": "1", "SDC_C_RUNS": runs}
    proc = subprocess.run([sys.executable, "-c", CALLS, str(path)], capture_output=True, text=True,
                          env={**{k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}, **env})
    assert proc.returncode == 0, proc.stderr
    faults, kept = proc.stdout.split()
    return float(faults), kept == "True"


def test_calls_stop_faulting_in_fresh_pages(tmp_path):
    """The light zoo's ShuffleNet, its ops one by one (SDC_C_RUNS=0): with glibc's defaults 470-650 page
    faults a call on this project's machine (its intermediates' sizes keep tripping the trim threshold).
    Its runs of C kernels (sdc/runtime/c_runs.py) keep their inner values' buffers: few faults either way."""
    sdc.compile(str(LIGHT / "light_shufflenet.onnx"), output=tmp_path / "net.sdc")
    kept, on = _faults_per_call(tmp_path / "net.sdc", "1")
    # What the setting removes. With glibc's defaults a process settles in one of two states: faulting
    # on every call, or never, once its dynamic mmap threshold has risen past the intermediates (glibc
    # raises it when a large mapped chunk is freed, and whether one is freed before the calls start
    # depends on timing: on a loaded machine 3 of 10 fresh processes of the code before [3.1] never
    # faulted). The premise holds if one of three fresh processes faults on every call.
    measured = [_faults_per_call(tmp_path / "net.sdc", "0") for _ in range(3)]
    default, off = max(f for f, _ in measured), any(k for _, k in measured)
    assert on and not off
    assert kept <= 10, f"{kept} page faults a call with the pages kept"
    assert default >= 50, f"glibc's defaults gave {[f for f, _ in measured]} page faults a call in three processes"
    in_runs, _ = _faults_per_call(tmp_path / "net.sdc", "0", runs="1")
    assert in_runs <= 10, f"{in_runs} page faults a call in runs with glibc's defaults"


def test_the_setting_is_read_and_a_bad_value_is_one_error(monkeypatch):
    monkeypatch.setenv("SDC_KEEP_PAGES", "0")
    assert host_memory.keep_freed_pages() is False
    monkeypatch.setenv("SDC_KEEP_PAGES", "sometimes")
    with pytest.raises(SdcError, match="SDC_KEEP_PAGES='sometimes' is not one of 1, on, 0, off"):
        host_memory.keep_freed_pages()
    monkeypatch.setenv("SDC_KEEP_PAGES", "1")
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "4096")  # the caller's own glibc settings win
    monkeypatch.setattr(host_memory, "_done", [])
    assert host_memory.keep_freed_pages() is False
