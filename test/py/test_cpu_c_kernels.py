"""The CPU target's generated C kernels end to end: compiled models whose kernel groups run as C,
against torch eager; the switch that turns them off; a host without a C compiler; an index error
raised through the torch ops; a plan edited after compiling.

The renderers and the launcher have their own tests (test_cpu_c_renderer.py, test_cpu_c_matmul.py,
test_c_launcher.py)."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import torch
from torch.export import Dim

import sdc
import sdc.runtime
from sdc.diagnostics import SdcError

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler on the PATH")


class Block(torch.nn.Module):
    """A transformer-like block: every C template (matmul with a bias and GELU, softmax and layer_norm
    rows, elementwise residuals) and a batched matmul."""

    def __init__(self, width: int = 24):
        super().__init__()
        self.up = torch.nn.Linear(width, 2 * width)
        self.down = torch.nn.Linear(2 * width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x):
        scores = torch.softmax(x @ x.transpose(-1, -2) * 0.2, dim=-1)
        h = self.norm(x + scores @ x)
        return self.norm(h + self.down(torch.nn.functional.gelu(self.up(h))))


def _backends(artifact) -> list[str]:
    plan = json.loads((artifact / "plan.json").read_text())
    return [s["kernel"]["backend"] for r in plan["ranks"] for s in r["steps"] if s["kind"] == "launch"]


def _block(tmp_path, name: str = "b.sdc"):
    torch.manual_seed(0)
    model = Block().eval()
    exe = sdc.compile(model, (torch.randn(2, 5, 24),), dynamic_shapes=({0: Dim("batch", max=32)},),
                      output=tmp_path / name)
    return model, exe


def _load_edited(root, plan: dict) -> str:
    """The one-line error of loading the artifact at `root` with `plan` as its plan.json (and the
    manifest's hash of it updated, so only the cross-checks can refuse it)."""
    text = json.dumps(plan)
    (root / "plan.json").write_text(text)
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["files"]["plan.json"] = {"sha256": hashlib.sha256(text.encode()).hexdigest(), "bytes": len(text)}
    (root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SdcError) as caught:
        sdc.runtime.load(root)
    return str(caught.value)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SDC_C_CACHE_DIR", str(tmp_path / "c-cache"))


def test_a_block_runs_as_c_kernels_and_matches_torch(tmp_path):
    model, exe = _block(tmp_path)
    backends = _backends(tmp_path / "b.sdc")
    assert backends.count("c") >= 4, backends  # matmuls, rows and elementwise groups
    assert (tmp_path / "b.sdc" / "kernels" / "cpu.c").is_file()
    for batch in (1, 3, 17):
        x = torch.randn(batch, 5, 24)
        (y,) = exe(x)
        with torch.no_grad():
            torch.testing.assert_close(y, model(x), rtol=1e-5, atol=2e-5)


def test_sdc_c_kernels_0_compiles_every_group_for_torch(tmp_path, monkeypatch):
    monkeypatch.setenv("SDC_C_KERNELS", "0")
    model, exe = _block(tmp_path)
    assert "c" not in _backends(tmp_path / "b.sdc")
    x = torch.randn(4, 5, 24)
    with torch.no_grad():
        torch.testing.assert_close(exe(x)[0], model(x), rtol=1e-5, atol=2e-5)


def test_without_a_c_compiler_the_groups_run_through_torch_with_one_warning(tmp_path, monkeypatch, capfd):
    model, _ = _block(tmp_path)
    monkeypatch.setenv("SDC_C_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    exe = sdc.runtime.load(tmp_path / "b.sdc")
    err = capfd.readouterr().err
    assert err.count("warning:") == 1 and "C kernels not compiled (no C compiler" in err, err
    x = torch.randn(3, 5, 24)
    with torch.no_grad():
        torch.testing.assert_close(exe(x)[0], model(x), rtol=1e-5, atol=2e-5)


def test_an_index_out_of_range_is_the_ops_error(tmp_path):
    """A C gather that meets an index out of range returns nonzero; the torch ops then raise the
    op's own error, as they do with C kernels off."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(10, 8), torch.nn.Tanh())
    exe = sdc.compile(model, (torch.tensor([[1, 2, 3]]),), output=tmp_path / "e.sdc")
    assert "c" in _backends(tmp_path / "e.sdc")
    ids = torch.tensor([[4, 9, 0]])
    with torch.no_grad():
        torch.testing.assert_close(exe(ids)[0], model(ids))
    with pytest.raises(SdcError, match=r"'sdc.gather' failed in kernel k\d+"):
        exe(torch.tensor([[4, 10, 0]]))


def test_a_plan_edited_after_compiling_is_refused_at_load(tmp_path):
    """plan.json (and the manifest's hash of it) changed so a C launch claims another operand map than its
    kernel was compiled for: the load refuses it instead of letting the kernel misread a buffer."""
    _block(tmp_path)
    root = tmp_path / "b.sdc"
    plan = json.loads((root / "plan.json").read_text())
    step = next(s for s in plan["ranks"][0]["steps"] if s["kind"] == "launch" and s["kernel"]["backend"] == "c")
    arg = step["kernel"]["args"][0]["map"]
    step["kernel"]["args"][0]["map"] = list(reversed(arg)) if len(arg) > 1 and arg[0] != arg[-1] else [None] * len(arg)
    message = _load_edited(root, plan)
    assert "\n" not in message and "does not match the kernel's compiled signature: args" in message, message


def _gemm_model(shared: bool):
    """x [B, 20] -> Gemm(transB) with a [37, 20] weight (N = 37: a partial tile) -> Relu; `shared`:
    a second Gemm reads the same weight (of tanh(x))."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((37, 20)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(37).astype(np.float32), "b")
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["g"], transB=1), helper.make_node("Relu", ["g"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 37])]
    if shared:
        nodes += [helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Gemm", ["t", "w"], ["z"], transB=1)]
        outputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, ["B", 37]))
    graph = helper.make_graph(nodes, "gemm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 20])],
                              outputs, [w, b])
    # IR 8 (opset 17's): an onnx newer than the onnxruntime beside it writes an IR version it cannot read
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("shared", [False, True])
def test_a_transposed_weight_is_passed_as_the_c_matmul_reads_it(tmp_path, shared):
    """A Gemm with transB: its C kernel reads the weight as a [K, N] copy the launcher makes once at load
    (the C matmul reads rows of B in place instead of copying a transposed B per call); the plan keeps the
    user's weight and op. Two kernels that read one weight share the copy. Both match onnxruntime."""
    import numpy as np
    import onnxruntime as ort
    from sdc.runtime.launch.c import CLaunch

    model = _gemm_model(shared)
    exe = sdc.compile(model, output=tmp_path / "g.sdc")
    plan = json.loads((tmp_path / "g.sdc" / "plan.json").read_text())["ranks"][0]
    steps = [s for s in plan["steps"] if s["kind"] == "launch" and any(e["op"] == "matmul" for e in s["kernel"]["ops"])]
    assert len(steps) == (2 if shared else 1) and all(s["kernel"]["backend"] == "c" for s in steps)
    for s in steps:
        (mm,) = [e for e in s["kernel"]["ops"] if e["op"] == "matmul"]
        assert mm["attrs"].get("transpose_rhs") and plan["values"][mm["inputs"][1]]["shape"] == [37, 20]
        (i,) = s["kernel"]["transposed"]
        assert s["kernel"]["args"][i]["value"] == mm["inputs"][1]
    launches = [m for i in exe._executor.program for m in ([i] if isinstance(i, CLaunch) else []) if m.spec.transposed]
    copies = {exe._executor.initial[m.arg_slots[m.spec.transposed[0]]].data_ptr() for m in launches}
    assert len(launches) == len(steps) and len(copies) == 1
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (1, 5, 8):
        x = np.random.default_rng(batch).standard_normal((batch, 20)).astype(np.float32)
        for got, want in zip(exe(x), session.run(None, {"x": x})):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_transposed_must_name_a_2d_weight_argument(tmp_path):
    """plan.json edited (with the manifest's hash) so a C kernel claims to read an activation transposed: the
    load refuses the plan in one line."""
    exe = sdc.compile(_gemm_model(False), output=tmp_path / "g.sdc")
    del exe
    root = tmp_path / "g.sdc"
    plan = json.loads((root / "plan.json").read_text())
    step = next(s for s in plan["ranks"][0]["steps"] if s["kind"] == "launch" and "transposed" in s["kernel"])
    x = next(i for i, a in enumerate(step["kernel"]["args"]) if a["value"] not in plan["ranks"][0]["values"]
             or "weight" not in plan["ranks"][0]["values"][a["value"]])
    step["kernel"]["transposed"] = [x]
    message = _load_edited(root, plan)
    assert "\n" not in message and "'transposed' must list distinct indices of its args that are 2-d weights" in message


def test_ops_an_epilogue_reads_move_after_the_product():
    """A group the fuse pass ordered residual-first: the op the product does not read moves after the
    matmul (so the C matmul computes it in its epilogue); the one that feeds the product stays before it."""
    from sdc.codegen.plan import _product_first

    def op(name, inputs, output):
        return {"op": name, "inputs": inputs, "outputs": [output], "attrs": {}}

    residual, scaled = op("add", ["a", "b"], "r"), op("mul", ["x", "two"], "x2")
    product, out = op("matmul", ["x2", "w"], "y"), op("add", ["y", "r"], "z")
    assert _product_first([residual, scaled, product, out]) == [scaled, product, residual, out]
    assert _product_first([scaled, product, out]) == [scaled, product, out]
    two = [residual, product, op("matmul", ["z", "w"], "q")]
    assert _product_first(two) == two  # not one product: as it was


def test_a_residual_computed_before_the_product_runs_in_the_c_matmul(tmp_path):
    """ViT's block as the exporter orders it: the residual add is in the product's group, ahead of it;
    the whole group is one C matmul and matches torch."""
    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(16, 16)

        def forward(self, x, pos):
            h = x + pos
            return self.fc(torch.relu(x)) + h

    model = Block().eval()
    exe = sdc.compile(model, (torch.randn(3, 16), torch.randn(1, 16)), dynamic_shapes=({0: Dim("n", max=64)}, None),
                      output=tmp_path / "r.sdc")
    assert "reference" not in _backends(tmp_path / "r.sdc")
    for n in (1, 7):
        x, pos = torch.randn(n, 16), torch.randn(1, 16)
        with torch.no_grad():
            torch.testing.assert_close(exe(x, pos)[0], model(x, pos), rtol=1e-5, atol=2e-5)


class ConvBlock(torch.nn.Module):
    """A DenseNet-like unit: convolutions (channels-last on the CPU) and the per-channel batch norm,
    relu and residual add between them, which run as C kernels over the NHWC data as it lies."""

    def __init__(self, channels: int = 8):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(3, channels, 1)
        self.norm = torch.nn.BatchNorm2d(2 * channels)
        self.conv3 = torch.nn.Conv2d(2 * channels, channels, 3, padding=1)

    def forward(self, x):
        h = torch.cat([self.conv1(x), self.conv2(x)], dim=1)  # a concat: the ops after it are a group of their own
        return self.conv3(torch.relu(self.norm(h) * 1.5 + 0.25))


def test_c_kernels_read_channels_last_values_as_they_lie(tmp_path, monkeypatch):
    """The elementwise groups between convolutions are C kernels over the NHWC order (their plan
    tensors carry the `layout`); a call copies none of their arguments to row-major, and the results
    match torch eager at several batch sizes, on one thread and two."""
    from sdc.runtime.launch.c import CLaunch

    torch.manual_seed(0)
    model = ConvBlock().eval()
    with torch.no_grad():
        model.norm.running_mean.uniform_(-0.5, 0.5)
        model.norm.running_var.uniform_(0.5, 1.5)
    exe = sdc.compile(model, (torch.randn(2, 3, 9, 7),), dynamic_shapes=({0: Dim("batch", max=16)},),
                      output=tmp_path / "conv.sdc")
    plan = json.loads((tmp_path / "conv.sdc" / "plan.json").read_text())
    laid_out = [s for r in plan["ranks"] for s in r["steps"] if s["kind"] == "launch" and s["kernel"]["backend"] == "c"
                and any("layout" in t for t in s["kernel"]["args"] + s["kernel"]["results"])]
    assert laid_out, "no C kernel over a channels-last value"
    launches = [i for i in exe._executor.program if isinstance(i, CLaunch) and i.physical]
    assert launches and all(i.fn is not None for i in launches)
    made_dense = []
    original = CLaunch._bind

    def bind(self, tensors, vals, known):
        made_dense.extend(n for n, t in enumerate(tensors) if not t.is_contiguous())
        return original(self, tensors, vals, known)

    monkeypatch.setattr(CLaunch, "_bind", bind)
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for batch in (1, 3, 2):
                x = torch.randn(batch, 3, 9, 7)
                with torch.no_grad():
                    want = model(x)
                torch.testing.assert_close(torch.as_tensor(exe(x.numpy())[0]), want, rtol=1e-4, atol=1e-5)
    finally:
        torch.set_num_threads(before)
    assert made_dense == []


class _Residual(torch.nn.Module):
    """An elementwise group over more elements than one thread takes (torch's LARGE_ELEMENTS), with an
    embedding's gather: the C kernel splits its outer loops over OpenMP threads at 2 threads."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(1000, 96)

    def forward(self, x, ids):
        return torch.tanh(x * 1.5 + self.table(ids)) - x


def test_a_large_elementwise_group_runs_in_parallel_with_the_same_values(tmp_path):
    """Above 64K elements at 2 threads the C kernel runs over OpenMP's threads (not the torch ops):
    the same values as torch eager, and a gather index out of range found by any thread still
    gives the op's own error."""
    from sdc.runtime.launch.c import CLaunch

    torch.manual_seed(0)
    model = _Residual().eval()
    x, ids = torch.randn(4, 300, 96), torch.randint(0, 1000, (4, 300))
    exe = sdc.compile(model, (x, ids), output=tmp_path / "r.sdc")
    assert "c" in _backends(tmp_path / "r.sdc")
    program = exe._executor.fast_program
    launches = [i for i in program if isinstance(i, CLaunch)] or [
        m for i in program for m in getattr(i, "members", ()) if isinstance(m, CLaunch)]
    assert launches and all(launch.parallel for launch in launches)
    calls = []
    for launch in launches:  # the fallback (the torch ops) must not run
        object.__setattr__(launch, "fallback", tuple(lambda vals, state, f=f: calls.append(1) or f(vals, state)
                                                     for f in launch.fallback))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with torch.no_grad():
            torch.testing.assert_close(exe(x, ids)[0], model(x, ids), rtol=1e-5, atol=1e-5)
            assert not calls
            bad = ids.clone()
            bad[3, 299] = 1000  # the last element: the second thread's half
            with pytest.raises(SdcError, match=r"'sdc.gather' failed in kernel k\d+"):
                exe(x, bad)
    finally:
        torch.set_num_threads(before)
