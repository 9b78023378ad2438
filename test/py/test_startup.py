"""Start-up: what a command imports, and the version flags.

`import torch` costs about 1.2 s, so the commands that need no torch must not import it:
`sdc-opt` verifying and canonicalizing IR, `sdc inspect` reading an artifact's JSON, and
`import sdc.runtime` (torch loads when an artifact is loaded). These tests are structural,
not timed: each runs the command's entry function in a fresh interpreter and reports which
modules were imported by the time it returned (see sdc/lazy.py for how torch is deferred).
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

import sdc
from sdc.dialect.shapes import broadcast_shapes
from sdc.version import __version__

ROOT = Path(__file__).resolve().parents[2]

SMALL_IR = """
func.func @main(%x: tensor<?x8xf32> {sdc.dims = #sdc.dims<["B", 8]>}) -> tensor<?x8xf32> {
  %c = "sdc.constant"() {value = dense<[0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0]> : tensor<8xf32>} : () -> tensor<8xf32>
  %0 = "sdc.tanh"(%x) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %1 = "sdc.mul"(%0, %c) : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  %2 = "sdc.softmax"(%1) {axis = -1 : i64} : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %2 : tensor<?x8xf32>
}
"""

# A model whose run broadcasts (add of [?, 8] and [8], an explicit sdc.broadcast).
BROADCASTING_MODEL = """
func.func @main(%x: tensor<?x8xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["B", 8]>}) -> tensor<?x8xf32> {
  %b = "sdc.parameter"() {name = "b"} : () -> tensor<8xf32>
  %0 = "sdc.add"(%x, %b) : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  %1 = "sdc.broadcast"(%b) {shape = ["B", 8]} : (tensor<8xf32>) -> tensor<?x8xf32>
  %2 = "sdc.mul"(%0, %1) : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  return %2 : tensor<?x8xf32>
}
"""

# Runs `statement` in a fresh interpreter, then prints which of the watched modules it imported.
_PROBE = """
import json, sys
rc = None
try:
{body}
except SystemExit as e:
    rc = e.code
watched = {watched!r}
print(json.dumps({{"rc": rc, "imported": [m for m in watched if m in sys.modules]}}), file=sys.stderr)
"""

TORCH = ("torch", "torch.fx.experimental.symbolic_shapes")
MLIR = ("torch_mlir", "torch_mlir.ir")


def probe(body: str, watched: tuple[str, ...] = TORCH) -> dict:
    """Run `body` (Python statements; may set `rc`) in a subprocess; its exit code and which of `watched` it imported."""
    code = _PROBE.format(body="\n".join("    " + line for line in body.strip().splitlines()), watched=watched)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stderr.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def small_ir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("startup") / "small.mlir"
    path.write_text(SMALL_IR)
    return path


@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> Path:
    from sdc.cli.main import main

    root = tmp_path_factory.mktemp("startup-artifact")
    (root / "model.mlir").write_text(BROADCASTING_MODEL)
    np.savez(root / "params.npz", b=np.arange(8, dtype=np.float32))
    assert main(["compile", str(root / "model.mlir"), "--params", str(root / "params.npz"),
                 "-o", str(root / "model.sdc")]) == 0
    return root / "model.sdc"


@pytest.mark.parametrize("flags", [[], ["-p", "sdc-verify,sdc-canonicalize,canonicalize,cse"],
                                   ["-p", "sdc-shape-constraints"], ["--list-passes"]])
def test_sdc_opt_does_not_import_torch(small_ir, flags):
    # --list-passes builds every pass: none may import torch at module level.
    argv = [str(small_ir), *flags]
    result = probe(f"from sdc.cli.opt import main\nrc = main({argv!r})")
    assert result == {"rc": 0, "imported": []}


def test_sdc_inspect_does_not_import_torch(artifact):
    result = probe(f"from sdc.cli.main import main\nrc = main(['inspect', {str(artifact)!r}])")
    assert result == {"rc": 0, "imported": []}


@pytest.mark.parametrize("module", ["sdc.runtime", "sdc.dtypes", "sdc.dialect.ops", "sdc.dialect.op_classes"])
def test_module_imports_without_torch(module):
    assert probe(f"import {module}")["imported"] == []


def test_runtime_imports_without_mlir():
    assert probe("import sdc.runtime", watched=MLIR)["imported"] == []


def test_torch_loads_on_first_use():
    # The lazy torch is the real one once touched: the runtime still loads and runs artifacts.
    result = probe("from sdc import dtypes\nassert str(dtypes.to_torch('bf16')) == 'torch.bfloat16'")
    assert result["imported"] == ["torch"]


def test_first_call_imports_no_symbolic_shapes(artifact):
    # torch.broadcast_shapes imports torch.fx's symbolic-shapes machinery on its first call
    # (0.5-1 s inside the first run); the reference kernels use sdc's own broadcasting instead.
    body = f"""
import numpy as np
import sdc.runtime
exe = sdc.runtime.load({str(artifact)!r})
x = np.random.default_rng(0).standard_normal((3, 8), dtype=np.float32)
b = np.arange(8, dtype=np.float32)
(y,) = exe(x)
np.testing.assert_allclose(y, (x + b) * b, rtol=1e-6)
rc = 0
"""
    assert probe(body) == {"rc": 0, "imported": ["torch"]}


@pytest.mark.parametrize("shapes", [[(2, 1, 3), (4, 3)], [(), (5,)], [(0,), (1,)], [(3, 1), (1, 0)], [(2, 3)], []])
def test_broadcast_shapes_matches_numpy(shapes):
    assert broadcast_shapes(*shapes) == np.broadcast_shapes(*shapes)


@pytest.mark.parametrize("shapes", [[(2,), (3,)], [(0,), (5,)], [(4, 2), (3, 1, 3)]])
def test_broadcast_shapes_refuses_incompatible(shapes):
    with pytest.raises(ValueError, match="do not broadcast"):
        broadcast_shapes(*shapes)


# ---------------------------------------------------------------- versions


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_one_version():
    assert sdc.__version__ == __version__
    assert metadata.version("sdc") == __version__  # pyproject reads sdc/version.py
    assert 'attr = "sdc.version.__version__"' in (ROOT / "pyproject.toml").read_text()


def test_sdc_version_flag():
    for argv in (["-m", "sdc.cli.main", "--version"], ["-m", "sdc", "--version"]):
        done = run(*argv)
        assert (done.returncode, done.stdout, done.stderr) == (0, f"sdc {__version__}\n", "")


def test_sdc_opt_version_flag():
    done = run("-m", "sdc.cli.opt", "--version")
    assert done.returncode == 0, done.stderr
    try:  # an unpacked copy of the bindings (the GPU host's) has no package metadata
        bindings = metadata.version("torch-mlir")
    except metadata.PackageNotFoundError:
        bindings = "(version unknown: no package metadata)"
    assert done.stdout.splitlines() == [f"sdc {__version__}", f"MLIR Python bindings: torch-mlir {bindings}"]


def test_python_m_sdc_runs_the_cli(artifact):
    done = run("-m", "sdc", "inspect", str(artifact))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"artifact  {artifact}")
    done = run("-m", "sdc", "inspect", str(artifact.parent / "missing.sdc"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith("error: no artifact at")
    done = run("-m", "sdc")
    assert done.returncode == 2 and done.stderr.splitlines()[-1].startswith("error: no command")
