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


# A kernel of the contract, which this op's launch cannot use: x and w differ in shape (see the triton tests).
SOFTSIGN_KERNEL = """
@triton.jit
def kernel(x_ptr, w_ptr, out_ptr, n, scale, shift, BLOCK: tl.constexpr):
    pass
"""


@sdc.custom_op(TORCH_OP, shape=_softsign_shape, triton=SOFTSIGN_KERNEL)
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
    assert not custom_ops.is_registered(custom_ops.vjp_name(TORCH_OP))
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


# ---------------------------------------------------------------- derivatives: training through a custom op

GATED_OP = "sdctest::gated_softsign"


def _gated_forward(x, w, scale):
    return x / (1 + x.abs()) * w * scale


def _gated_derivative(x, w, g, *, scale):
    """The user's hand-written backward, shared by the torch autograd.Function and sdc."""
    s = 1 + x.abs()
    return g * w * scale / (s * s), (g * x / s * scale).sum(0)


@torch.library.custom_op(GATED_OP, mutates_args=())
def gated_softsign(x: torch.Tensor, w: torch.Tensor, scale: float) -> torch.Tensor:
    return _gated_forward(x, w, scale)


@gated_softsign.register_fake
def _(x, w, scale):
    return torch.empty_like(x)


sdc.custom_op(GATED_OP, shape=lambda x, w, *, scale: x, reference=lambda x, w, *, scale: _gated_forward(x, w, scale),
              derivative=_gated_derivative)


class _GatedFunction(torch.autograd.Function):
    """torch eager's version of the op: the same forward and backward, through autograd."""

    @staticmethod
    def forward(ctx, x, w, scale):
        ctx.save_for_backward(x, w)
        ctx.scale = scale
        return _gated_forward(x, w, scale)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx, gw = _gated_derivative(x, w, g, scale=ctx.scale)
        return gx, gw, None


class GatedModel(torch.nn.Module):
    def __init__(self, eager: bool = False):
        super().__init__()
        self.eager = eager
        self.fc = torch.nn.Linear(6, 8)
        self.w = torch.nn.Parameter(torch.rand(8) + 0.5)
        self.out = torch.nn.Linear(8, 3)

    def forward(self, x):
        h = self.fc(x)
        g = _GatedFunction.apply(h, self.w, 1.5) if self.eager else torch.ops.sdctest.gated_softsign(h, self.w, 1.5)
        return self.out(g)


def test_training_through_a_custom_op_matches_torch_eager():
    torch.manual_seed(int(RNG.integers(1 << 30)))
    model = GatedModel()
    reference = GatedModel(eager=True)
    reference.load_state_dict(model.state_dict())
    batches = [(torch.randn(5, 6), torch.randint(0, 3, (5,))) for _ in range(4)]
    step = sdc.compile_train(model, batches[0], loss=torch.nn.functional.cross_entropy,
                             optimizer=sdc.optim.SGD(lr=0.1, momentum=0.9))  # Adam would hide a scaled gradient
    opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for x, y in batches:
        got = step(x, y)
        opt.zero_grad()
        want = torch.nn.functional.cross_entropy(reference(x), y)
        want.backward()
        opt.step()
        assert abs(got - want.item()) <= 1e-5 * max(1.0, abs(want.item()))
    trained = step.state_dict()
    for name, value in reference.state_dict().items():
        torch.testing.assert_close(torch.as_tensor(np.asarray(trained[name])), value, rtol=1e-4, atol=1e-6,
                                   msg=lambda m, name=name: f"{name}: {m}")


def _gradients(model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor) -> dict[str, np.ndarray]:
    """Every parameter's gradient of the model's summed squared error, through sdc-autodiff."""
    from sdc.compiler import run_pipeline
    from sdc.dialect.ir import entry_function, result_names
    from sdc.interpreter import interpret

    class Loss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, x, t):
            return ((self.m(x) - t) ** 2).sum()

    imported = import_torch(Loss(), (x, target))
    run_pipeline(imported.module, ["sdc-autodiff", "sdc-verify"])
    text = str(imported.module)
    assert f'name = "{custom_ops.vjp_name(GATED_OP)}"' in text
    got = interpret(imported.module, [x, target], imported.params)
    with imported.module.context:
        names = result_names(entry_function(imported.module))
    return {n[len("grad.m."):]: np.asarray(g) for n, g in zip(names[1:], got[1:])}


def test_custom_op_gradients_match_torch_autograd_in_float64():
    """The derivative against torch.autograd of the plain forward formula (no user backward)."""
    torch.manual_seed(int(RNG.integers(1 << 30)))
    model = GatedModel().double()
    x, target = torch.randn(4, 6, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64)
    got = _gradients(model, x, target)

    class Plain(torch.nn.Module):
        def forward(self, x):
            return model.out(_gated_forward(model.fc(x), model.w, 1.5))

    loss = ((Plain()(x) - target) ** 2).sum()
    names, params = zip(*model.named_parameters())
    want = torch.autograd.grad(loss, params)
    assert sorted(got) == sorted(names)
    for name, w in zip(names, want):
        np.testing.assert_allclose(got[name], w.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


SPLIT_GRAD_OP = "sdctest::split_scale_grad"


def _split_scale_derivative(x, ga, gb, *, alpha, axis):
    """numpy: d(a)/dx = alpha on the first half, d(tanh b)/dx = 1 - tanh^2 on the second."""
    _, b = np.split(x, 2, axis=axis)
    return [np.concatenate([ga * alpha, gb * (1 - np.tanh(b) ** 2)], axis=axis)]


def test_numpy_derivative_of_a_two_result_op_matches_torch_autograd():
    custom_ops.custom_op(SPLIT_GRAD_OP, shape=_split_scale_shape, reference=_split_scale_numpy, array_api="numpy",
                         derivative=_split_scale_derivative)
    try:
        text = textwrap.dedent(f'''
            func.func @main(%c: tensor<3x2xf64>) -> tensor<f64> {{
              %x = "sdc.parameter"() {{name = "x"}} : () -> tensor<3x4xf64>
              %a, %b = "sdc.custom"(%x) {{attributes = "{{\\"alpha\\":1.5,\\"axis\\":1}}", name = "{SPLIT_GRAD_OP}", operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 1, 0, 0>}} : (tensor<3x4xf64>) -> (tensor<3x2xf64>, tensor<3x2xf64>)
              %m = "sdc.mul"(%b, %c) : (tensor<3x2xf64>, tensor<3x2xf64>) -> tensor<3x2xf64>
              %s = "sdc.add"(%m, %a) : (tensor<3x2xf64>, tensor<3x2xf64>) -> tensor<3x2xf64>
              %l = "sdc.reduce_sum"(%s) : (tensor<3x2xf64>) -> tensor<f64>
              return %l : tensor<f64>
            }}
        ''')
        from sdc.compiler import run_pipeline
        from sdc.dialect.op_classes import new_context
        from sdc.interpreter import interpret
        from sdc.ir_text import parse_module

        module = parse_module(text, ctx=new_context())
        run_pipeline(module, ["sdc-autodiff", "sdc-verify"])
        x, c = torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 2, dtype=torch.float64)
        loss, grad = interpret(module, [c], {"x": x})
        leaf = x.clone().requires_grad_()
        a, b = leaf.split(2, dim=1)
        want = (torch.tanh(b) * c + a * 1.5).sum()
        (g,) = torch.autograd.grad(want, [leaf])
        np.testing.assert_allclose(np.asarray(loss), want.item(), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(grad), g.numpy(), rtol=1e-12, atol=1e-14)
    finally:
        custom_ops.unregister(SPLIT_GRAD_OP)
    assert not custom_ops.is_registered(custom_ops.vjp_name(SPLIT_GRAD_OP))


def test_training_through_a_custom_op_without_a_derivative_names_it():
    with pytest.raises(SdcError) as e:
        sdc.compile_train(SoftsignModel(), (torch.randn(3, 8), torch.randn(3, 8)), loss=torch.nn.functional.mse_loss,
                          optimizer=sdc.optim.SGD(lr=0.1))
    message = str(e.value)
    assert "\n" not in message
    assert f"'sdc.custom' is not differentiable: custom op '{TORCH_OP}' has no derivative" in message


def test_a_derivative_giving_a_wrong_shape_is_an_error_naming_the_op():
    name = "sdctest::bad_derivative"
    custom_ops.custom_op(name, shape=lambda x: x, reference=lambda x: x * 2, derivative=lambda x, g: g.sum(0))
    try:
        backward = custom_ops.lookup(custom_ops.vjp_name(name))
        meta = {custom_ops.VJP_META: [1, 1, [0], [0]]}
        with pytest.raises(SdcError, match=f"the derivative of custom op '{name}' returned a gradient of shape "
                                           r"\[3\] for input 0 of shape \[2, 3\]"):
            backward.run([torch.randn(2, 3), torch.randn(2, 3)], meta)
    finally:
        custom_ops.unregister(name)


# ---------------------------------------------------------------- the op's own Triton kernel (target cuda)

TRITON_OP = "sdctest::gated_softsign_kernel"
GATED_KERNEL = """
@triton.jit
def kernel(x_ptr, g_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    g = tl.load(g_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x / (1 + tl.abs(x)) * g * scale, mask=mask)
"""
REFERENCE_CALLS: list[int] = []


@torch.library.custom_op(TRITON_OP, mutates_args=())
def gated_softsign_kernel(x: torch.Tensor, g: torch.Tensor, scale: float) -> torch.Tensor:
    return x / (1 + x.abs()) * g * scale


@gated_softsign_kernel.register_fake
def _(x, g, scale):
    return torch.empty_like(x)


def _counted_reference(x, g, *, scale):
    REFERENCE_CALLS.append(1)
    return x / (1 + x.abs()) * g * scale


sdc.custom_op(TRITON_OP, shape=lambda x, g, *, scale: x, reference=_counted_reference, triton=GATED_KERNEL)


class KernelModel(torch.nn.Module):
    def forward(self, x):
        return torch.ops.sdctest.gated_softsign_kernel(torch.relu(x) - 0.25, x * 2, 0.5) + 1


def _launches(path: Path) -> list[dict]:
    import json

    plan = json.loads((path / "plan.json").read_text())
    return [s["kernel"] for s in plan["ranks"][0]["steps"] if s["kind"] == "launch"]


def test_triton_kernel_runs_on_target_cuda_under_the_interpreter(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    path = tmp_path / "k.sdc"
    exe = sdc.compile(KernelModel(), (torch.randn(4, 8),), dynamic_shapes=({0: Dim("batch", max=4096)},),
                      target="cuda", output=path)
    (custom,) = [k for k in _launches(path) if k["ops"][0]["op"] == "custom"]
    assert custom["backend"] == "triton" and custom["template"] == "custom"
    assert "def kernel(x_ptr, g_ptr, out_ptr" in (path / custom["source"]).read_text()
    REFERENCE_CALLS.clear()
    for n in (1, 37, 300):  # 300 x 8 elements: three programs of BLOCK 1024, the last masked
        x = RNG.standard_normal((n, 8)).astype(np.float32)
        (got,) = exe(torch.from_numpy(x))
        x64 = x.astype(np.float64)
        h = np.maximum(x64, 0) - 0.25
        want = h / (1 + np.abs(h)) * (2 * x64) * 0.5 + 1
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    assert REFERENCE_CALLS == []  # the kernel computed it, not the reference


def test_a_kernel_whose_op_differs_in_shape_stays_a_reference_group(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    path = tmp_path / "s.sdc"
    model = SoftsignModel().eval()
    exe = sdc.compile(model, (torch.randn(3, 8),), target="cuda", output=path)
    (custom,) = [k for k in _launches(path) if k["ops"][0]["op"] == "custom"]
    assert custom["backend"] == "reference"
    assert "inputs and results differ in shape ([3, 8], [8]); the kernel contract is one shape" in \
        custom["why_reference"]
    x = torch.randn(3, 8)
    with torch.no_grad():
        torch.testing.assert_close(exe(x)[0], model(x), rtol=1e-5, atol=1e-6)


def test_triton_sources_outside_the_contract_are_errors(tmp_path, monkeypatch):
    with pytest.raises(SdcError, match="its triton source must define a top-level @triton.jit function 'kernel"):
        sdc.custom_op("sdctest::no_kernel", shape=lambda x: x, reference=lambda x: x, triton="x = 1\n")
    with pytest.raises(SdcError, match="its triton source does not parse: line 1"):
        sdc.custom_op("sdctest::no_kernel", shape=lambda x: x, reference=lambda x: x, triton="def kernel(:\n")
    assert not custom_ops.is_registered("sdctest::no_kernel")

    name = "sdctest::wrong_signature"
    custom_ops.custom_op(name, shape=lambda x, *, scale: x, reference=lambda x, *, scale: x * scale,
                         triton=GATED_KERNEL)

    @torch.library.custom_op(name, mutates_args=())
    def wrong(x: torch.Tensor, scale: float) -> torch.Tensor:
        return x * scale

    wrong.register_fake(lambda x, scale: torch.empty_like(x))

    class Wrong(torch.nn.Module):
        def forward(self, x):
            return torch.ops.sdctest.wrong_signature(x, 2.0)

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    try:
        with pytest.raises(SdcError) as e:
            sdc.compile(Wrong(), (torch.randn(3, 4),), target="cuda", output=tmp_path / "w.sdc")
    finally:
        custom_ops.unregister(name)
    message = str(e.value)
    assert "\n" not in message
    assert (f"custom op '{name}': its triton kernel takes (x_ptr, g_ptr, out_ptr, n, scale, BLOCK); for this op "
            "with 1 inputs and 1 results the contract is (<2 pointers>, n, scale, BLOCK)") in message
