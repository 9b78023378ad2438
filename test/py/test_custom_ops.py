"""User-registered ops (sdc.custom_op): the registry, the torch and ONNX frontends, the runtime.

A `torch.library` op and a custom-domain ONNX node each compile to one `sdc.custom` op and are
checked against an independent computation (torch eager; numpy in float64) on fresh random
inputs. An unregistered op is one up-front error naming it; an artifact loaded in a process that
did not register its ops is refused at load, naming them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper
from torch.export import Dim

import sdc
from sdc import custom_ops
from sdc.custom_ops import TensorSpec
from sdc.diagnostics import SdcError
from sdc.frontend.onnx import import_onnx
from sdc.frontend.torch import import_torch

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng()
TORCH_OP = "sdctest::scaled_softsign"
ONNX_OP = "com.example::SplitScale"


# ---------------------------------------------------------------- a torch.library op, registered in sdc


@torch.library.custom_op(TORCH_OP, mutates_args=())
def scaled_softsign(x: torch.Tensor, w: torch.Tensor, scale: float, shift: int = 1) -> torch.Tensor:
    """x / (1 + |x|) * w * scale + shift: stands in for a CUDA extension sdc cannot see into."""
    return x / (1 + x.abs()) * w * scale + shift


@scaled_softsign.register_fake
def _(x, w, scale, shift=1):
    return torch.empty_like(x)


def _softsign_shape(x: TensorSpec, w: TensorSpec, *, scale: float, shift: int) -> TensorSpec:
    return TensorSpec(x.shape, x.dtype)


@sdc.custom_op(TORCH_OP, shape=_softsign_shape, triton="# a kernel's source, stored for codegen")
def softsign_reference(x, w, *, scale, shift):
    """sdc's own implementation of the op (torch)."""
    return x / (1 + x.abs()) * w * scale + shift


class SoftsignModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.w = torch.nn.Parameter(torch.rand(8) + 0.5)

    def forward(self, x):
        y = torch.ops.sdctest.scaled_softsign(self.fc(x), self.w, 0.75)
        return torch.relu(y) * 2


def test_torch_library_op_matches_eager_at_several_batch_sizes(tmp_path):
    model = SoftsignModel().eval()
    batch = Dim("batch", max=64)
    exe = sdc.compile(model, (torch.randn(4, 8),), dynamic_shapes=({0: batch},), output=tmp_path / "m.sdc")
    assert '"sdc.custom"' in (tmp_path / "m.sdc" / "program.mlir").read_text()
    for n in (1, 5, 17):
        x = torch.randn(n, 8)
        (got,) = exe(x)
        with torch.no_grad():
            want = model(x)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_torch_op_attributes_reach_the_ir():
    model = SoftsignModel().eval()
    text = str(import_torch(model, (torch.randn(2, 8),)).module)
    assert f'name = "{TORCH_OP}"' in text
    # the given float and the schema's default for `shift`
    assert '\\22scale\\22:0.75' in text and '\\22shift\\22:1' in text


def test_unregistered_torch_ops_are_listed_together():
    @torch.library.custom_op("sdctest::unknown_a", mutates_args=())
    def unknown_a(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    unknown_a.register_fake(lambda x: torch.empty_like(x))

    @torch.library.custom_op("sdctest::unknown_b", mutates_args=())
    def unknown_b(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    unknown_b.register_fake(lambda x: torch.empty_like(x))

    class Two(torch.nn.Module):
        def forward(self, x):
            return torch.ops.sdctest.unknown_b(torch.ops.sdctest.unknown_a(x) + 1)

    with pytest.raises(SdcError) as e:
        import_torch(Two(), (torch.randn(3),))
    message = str(e.value)
    assert "\n" not in message
    assert "(2)" in message
    assert "custom op 'sdctest::unknown_a' (not registered with sdc.custom_op)" in message
    assert "custom op 'sdctest::unknown_b'" in message


# ---------------------------------------------------------------- a custom-domain ONNX node (numpy reference)


def _split_scale_shape(x: TensorSpec, *, alpha: float, axis: int):
    half = x.shape[axis] // 2
    shape = list(x.shape)
    shape[axis] = half
    return [(tuple(shape), x.dtype), (tuple(shape), x.dtype)]


def _split_scale_numpy(x, *, alpha, axis):
    a, b = np.split(x, 2, axis=axis)
    return [(a * alpha).astype(x.dtype), np.tanh(b).astype(x.dtype)]


custom_ops.custom_op(ONNX_OP, shape=_split_scale_shape, reference=_split_scale_numpy, array_api="numpy")


def _onnx_model(op_type: str = "SplitScale", domain: str = "com.example") -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 3])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node(op_type, ["r"], ["a", "b"], name="split", domain=domain, alpha=1.5, axis=1),
             helper.make_node("Add", ["a", "b"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(domain, 1)],
                             ir_version=10)


def test_onnx_custom_domain_node_matches_numpy():
    exe = sdc.compile(_onnx_model())
    for n in (2, 7):
        x = RNG.standard_normal((n, 6)).astype(np.float32)
        (got,) = exe(x)
        r = np.maximum(x.astype(np.float64), 0)
        want = r[:, :3] * 1.5 + np.tanh(r[:, 3:])
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def test_unregistered_onnx_node_is_named_with_its_registry_name():
    with pytest.raises(SdcError) as e:
        import_onnx(_onnx_model(op_type="Frobnicate", domain="com.other"))
    message = str(e.value)
    assert "com.other.Frobnicate" in message and "node 'split'" in message
    assert "sdc.custom_op('com.other::Frobnicate'" in message


# ---------------------------------------------------------------- the IR and the registry


def _ir(name: str) -> str:
    return textwrap.dedent(f'''
        func.func @main(%x: tensor<?x8xf32> {{sdc.name = "x", sdc.dims = #sdc.dims<["B", 8]>}}) -> tensor<?x8xf32> {{
          %w = "sdc.constant"() {{value = dense<2.0> : tensor<8xf32>}} : () -> tensor<8xf32>
          %0 = "sdc.custom"(%x, %w) {{attributes = "{{\\"scale\\":0.5,\\"shift\\":3}}", name = "{name}", operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>}} : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
          return %0 : tensor<?x8xf32>
        }}
    ''')


def test_custom_op_in_ir_text_runs_and_an_unknown_one_does_not_verify():
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    (got,) = sdc.interpret(_ir(TORCH_OP), [x])
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(np.asarray(got), x64 / (1 + np.abs(x64)) * 2 * 0.5 + 3, rtol=1e-6)
    with pytest.raises(SdcError, match="custom op 'nope::missing' is not registered"):
        sdc.interpret(_ir("nope::missing"), [x])


def test_registry_checks_what_it_is_given():
    with pytest.raises(SdcError, match="is not 'namespace::op'"):
        sdc.custom_op("no_namespace", shape=lambda x: x, reference=lambda x: x)
    with pytest.raises(SdcError, match="already registered"):
        sdc.custom_op(TORCH_OP, shape=lambda x: x, reference=lambda x: x)
    with pytest.raises(SdcError, match="array_api must be one of"):
        sdc.custom_op("t::a", shape=lambda x: x, reference=lambda x: x, array_api="jax")
    op = custom_ops.lookup(TORCH_OP)
    assert op is softsign_reference and op.triton is not None and op.derivative is None
    assert op.doc.startswith("sdc's own implementation")


def test_a_bad_shape_rule_is_reported_naming_the_op():
    name = "sdctest::bad_rule"
    custom_ops.custom_op(name, shape=lambda x, **attrs: [x.shape], reference=lambda x, **attrs: x)
    try:
        with pytest.raises(SdcError, match=f"the shape rule of custom op '{name}' returned tuple for result 0"):
            sdc.interpret(_ir(name).replace("%x, %w", "%x").replace(", tensor<8xf32>) ->", ") ->")
                          .replace("array<i32: 1, 1, 0,", "array<i32: 1, 0, 0,"),
                          [RNG.standard_normal((2, 8)).astype(np.float32)])
    finally:
        custom_ops.unregister(name)


# ---------------------------------------------------------------- artifacts in another process


def _run(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120)


def test_artifact_needs_the_registration_in_the_loading_process(tmp_path):
    path = tmp_path / "split.sdc"
    sdc.compile(_onnx_model(), output=path)
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)

    bare = _run(f"import sys; from sdc.cli.main import main; sys.exit(main(['run', {str(path)!r}]))")
    assert bare.returncode == 1, bare.stderr
    last = bare.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "Traceback" not in bare.stderr
    assert f"custom op '{ONNX_OP}' is not registered in this process" in last
    # refused when loading, not at the first call
    load_only = _run(f"import sdc.runtime; sdc.runtime.load({str(path)!r})")
    assert load_only.returncode == 1 and "the plan uses custom op" in load_only.stderr, load_only.stderr

    registered = _run(textwrap.dedent(f"""
        import numpy as np, sdc, sdc.runtime
        def shape(x, *, alpha, axis):
            s = list(x.shape); s[axis] //= 2
            return [(tuple(s), x.dtype)] * 2
        def ref(x, *, alpha, axis):
            a, b = np.split(x, 2, axis=axis)
            return [a * alpha, np.tanh(b)]
        sdc.custom_op({ONNX_OP!r}, shape=shape, reference=ref, array_api="numpy")
        (y,) = sdc.runtime.load({str(path)!r})(np.load({str(tmp_path / 'x.npy')!r}))
        np.save({str(tmp_path / 'y.npy')!r}, np.asarray(y))
    """))
    assert registered.returncode == 0, registered.stderr
    r = np.maximum(x.astype(np.float64), 0)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), r[:, :3] * 1.5 + np.tanh(r[:, 3:]), rtol=1e-5, atol=1e-6)
