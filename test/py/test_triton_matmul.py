"""The matmul template of the Triton codegen: sdc.matmul with its fused epilogue (sdc/codegen/triton).

Under the Triton interpreter (TRITON_INTERPRET=1) on small odd shapes (every tile edge masked), 2-D,
batched with broadcast batch dims and transposes, a dynamic M; f32/f16/bf16 operands; epilogues
bias + gelu, residual add + relu, silu + cast. Checked against torch in float64 on the same
(rounded) inputs, fresh random ones each run, with a tolerance per output dtype. The interpreter is
slow: shapes stay small, a few programs per launch.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import sdc.runtime
from sdc.diagnostics import SdcError
from sdc.codegen.triton import LoweringError, TritonRenderer, generate_kernel
from sdc.codegen.kernel.program import MATMUL
from sdc.interpreter import interpret
from sdc.runtime.launch import triton as triton_launcher
from triton_support import (TORCH_DTYPE, compile_cuda, interpreter, launches, record_constexprs,  # noqa: F401
                            rng, triton_launches)

# (rtol, atol) by the dtype of the stored result: f32 accumulates exactly enough for 1e-5; a 16-bit
# result is rounded once, at the store (half an ulp: 4.9e-4 for f16, 3.9e-3 for bf16)
TOLERANCE = {"f32": (1e-5, 1e-5), "f16": (2e-3, 2e-3), "bf16": (1.6e-2, 1.6e-2)}


def randn(shape, dtype: str, rng: torch.Generator, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(shape, generator=rng) * scale).to(TORCH_DTYPE[dtype])


def kernels(artifact: Path) -> list[dict]:
    return [s["kernel"] for s in launches(artifact)]


def assert_close(got: torch.Tensor, want: torch.Tensor, dtype: str) -> None:
    rtol, atol = TOLERANCE[dtype]
    assert got.dtype == TORCH_DTYPE[dtype] and got.shape == want.shape
    torch.testing.assert_close(got.double(), want, rtol=rtol, atol=atol)


def gelu64(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1 + torch.erf(x / 2 ** 0.5))


# ---------------------------------------------------------------- 2-D with bias + gelu

BIAS_GELU = """
func.func @main(%x: tensor<37x29xDT> {sdc.name = "x"}, %w: tensor<29x45xDT> {sdc.name = "w"},
                %b: tensor<45xDT> {sdc.name = "b"}) -> (tensor<37x45xDT> {sdc.name = "y"}) {
  %0 = "sdc.matmul"(%x, %w) : (tensor<37x29xDT>, tensor<29x45xDT>) -> tensor<37x45xDT>
  %1 = "sdc.add"(%0, %b) : (tensor<37x45xDT>, tensor<45xDT>) -> tensor<37x45xDT>
  %2 = "sdc.gelu"(%1) : (tensor<37x45xDT>) -> tensor<37x45xDT>
  return %2 : tensor<37x45xDT>
}
"""


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_matmul_with_bias_and_gelu(dtype, tmp_path, rng):
    exe = compile_cuda(BIAS_GELU.replace("DT", dtype), tmp_path / "mm.sdc")
    (kernel,) = kernels(tmp_path / "mm.sdc")
    assert kernel["backend"] == "triton" and kernel["template"] == MATMUL
    assert [e["op"] for e in kernel["ops"]] == ["matmul", "add", "gelu"]
    x, w, b = randn((37, 29), dtype, rng, 0.4), randn((29, 45), dtype, rng, 0.4), randn((45,), dtype, rng)
    (y,) = exe(x, w, b)
    assert_close(y, gelu64(x.double() @ w.double() + b.double()), dtype)


# ---------------------------------------------------------------- batched, broadcast, transposed

RESIDUAL = """
func.func @main(%x: tensor<3x17x33xf32> {sdc.name = "x"}, %w: tensor<33x19xf32> {sdc.name = "w"},
                %r: tensor<3x17x19xf32> {sdc.name = "r"}) -> (tensor<3x17x19xf32> {sdc.name = "y"}) {
  %0 = "sdc.matmul"(%x, %w) : (tensor<3x17x33xf32>, tensor<33x19xf32>) -> tensor<3x17x19xf32>
  %1 = "sdc.add"(%0, %r) : (tensor<3x17x19xf32>, tensor<3x17x19xf32>) -> tensor<3x17x19xf32>
  %2 = "sdc.relu"(%1) : (tensor<3x17x19xf32>) -> tensor<3x17x19xf32>
  return %2 : tensor<3x17x19xf32>
}
"""


def test_batched_matmul_with_a_residual_add(tmp_path, rng):
    exe = compile_cuda(RESIDUAL, tmp_path / "bmm.sdc")
    (kernel,) = kernels(tmp_path / "bmm.sdc")
    assert kernel["template"] == MATMUL and kernel["domain"] == [3, 17, 19, 33]
    assert kernel["args"][1]["map"] == [3, 2]  # w: (K, N), broadcast over the batch (stride 0)
    x, w, r = randn((3, 17, 33), "f32", rng, 0.4), randn((33, 19), "f32", rng, 0.4), randn((3, 17, 19), "f32", rng)
    (y,) = exe(x, w, r)
    assert_close(y, torch.relu(x.double() @ w.double() + r.double()), "f32")


TRANSPOSED = """
func.func @main(%a: tensor<2x1x21x13xDT> {sdc.name = "a"}, %b: tensor<3x11x21xDT> {sdc.name = "b"})
    -> (tensor<2x3x13x11xOUT> {sdc.name = "y"}) {
  %0 = "sdc.matmul"(%a, %b) {transpose_lhs = true, transpose_rhs = true} : (tensor<2x1x21x13xDT>, tensor<3x11x21xDT>) -> tensor<2x3x13x11xDT>
  %1 = "sdc.silu"(%0) : (tensor<2x3x13x11xDT>) -> tensor<2x3x13x11xDT>
  %2 = "sdc.cast"(%1) {dtype = OUT} : (tensor<2x3x13x11xDT>) -> tensor<2x3x13x11xOUT>
  return %2 : tensor<2x3x13x11xOUT>
}
"""


@pytest.mark.parametrize("dtype,out", [("f32", "bf16"), ("f16", "f32")])
def test_broadcast_batches_transposes_and_a_cast(dtype, out, tmp_path, rng):
    exe = compile_cuda(TRANSPOSED.replace("OUT", out).replace("DT", dtype), tmp_path / "t.sdc")
    (kernel,) = kernels(tmp_path / "t.sdc")
    assert kernel["template"] == MATMUL and [e["op"] for e in kernel["ops"]] == ["matmul", "silu", "cast"]
    assert kernel["args"][0]["map"] == [0, None, 4, 2]  # a: batch 1 broadcasts, (K, M) transposed
    a, b = randn((2, 1, 21, 13), dtype, rng, 0.5), randn((3, 11, 21), dtype, rng, 0.5)
    (y,) = exe(a, b)
    z = a.double().transpose(-1, -2) @ b.double().transpose(-1, -2)
    want = z * torch.sigmoid(z)
    # a 16-bit product is what the f32 output is compared with: compare at the operands' precision
    assert_close(y, want, out) if out != "f32" else torch.testing.assert_close(
        y.double(), want, rtol=TOLERANCE[dtype][0], atol=TOLERANCE[dtype][1])


# ---------------------------------------------------------------- dynamic M

DYNAMIC = """
func.func @main(%x: tensor<?x?x29xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["B", "S", 29]>},
                %w: tensor<29x45xf32> {sdc.name = "w"}) -> (tensor<?x45xf32> {sdc.name = "y"}) {
  %0 = "sdc.reshape"(%x) {shape = ["B*S", 29]} : (tensor<?x?x29xf32>) -> tensor<?x29xf32>
  %1 = "sdc.matmul"(%0, %w) : (tensor<?x29xf32>, tensor<29x45xf32>) -> tensor<?x45xf32>
  %2 = "sdc.tanh"(%1) : (tensor<?x45xf32>) -> tensor<?x45xf32>
  return %2 : tensor<?x45xf32>
}
"""


def test_dynamic_rows_batch_times_sequence(tmp_path, rng):
    text = DYNAMIC
    exe = compile_cuda(text, tmp_path / "dyn.sdc")
    mm = [k for k in kernels(tmp_path / "dyn.sdc") if k.get("template") == MATMUL]
    assert len(mm) == 1 and mm[0]["domain"] == [None, 45, 29]
    assert mm[0]["constexprs"]["BLOCK_M"] == 128  # M unknown at compile time: the large tile
    for b, s in ((1, 1), (2, 67)):  # M = 1 and 134: one and two row tiles, masked
        x, w = randn((b, s, 29), "f32", rng, 0.4), randn((29, 45), "f32", rng, 0.4)
        (y,) = exe(x, w)
        assert_close(y, torch.tanh(x.double().reshape(-1, 29) @ w.double()), "f32")


# ---------------------------------------------------------------- what stays on the reference backend


def values(**shapes) -> dict:
    return {vid: {"shape": list(shape), "dtype": dtype} for vid, (shape, dtype) in shapes.items()}


def entry(op: str, inputs: list[str], output: str, **attrs) -> dict:
    return {"op": op, "inputs": inputs, "outputs": [output], "attrs": attrs}


@pytest.mark.parametrize("ops,vals,why", [
    ([entry("relu", ["x"], "r"), entry("matmul", ["r", "w"], "y")],
     values(x=((4, 8), "f32"), r=((4, 8), "f32"), w=((8, 16), "f32"), y=((4, 16), "f32")),
     "'sdc.relu' before 'sdc.matmul'"),
    ([entry("matmul", ["x", "v"], "y")], values(x=((4, 8), "f32"), v=((8,), "f32"), y=((4,), "f32")),
     "'sdc.matmul' with a 1-D operand"),
    ([entry("matmul", ["x", "w"], "y")], values(x=((4, 8), "i32"), w=((8, 16), "i32"), y=((4, 16), "i32")),
     "'sdc.matmul' of i32 x i32"),
    ([entry("matmul", ["x", "w"], "y"), entry("add", ["y", "z"], "s")],
     values(x=((4, 8), "f32"), w=((8, 16), "f32"), y=((4, 16), "f32"), z=((2, 4, 16), "f32"), s=((2, 4, 16), "f32")),
     "result 's' has shape [2, 4, 16], the product [4, 16]"),
])
def test_groups_outside_the_template_say_why(ops, vals, why):
    inputs = [v for v in vals if not any(v in e["outputs"] for e in ops)]
    with pytest.raises(LoweringError, match="^" + re.escape(why)):
        generate_kernel(ops, inputs, [ops[-1]["outputs"][0]], vals, "k0")


def test_a_matrix_vector_product_keeps_the_reference_backend(tmp_path, rng):
    text = """
func.func @main(%x: tensor<5x7xf32> {sdc.name = "x"}, %v: tensor<7xf32> {sdc.name = "v"}) -> (tensor<5xf32>) {
  %0 = "sdc.matmul"(%x, %v) : (tensor<5x7xf32>, tensor<7xf32>) -> tensor<5xf32>
  %1 = "sdc.relu"(%0) : (tensor<5xf32>) -> tensor<5xf32>
  return %1 : tensor<5xf32>
}
"""
    exe = compile_cuda(text, tmp_path / "mv.sdc")
    (kernel,) = kernels(tmp_path / "mv.sdc")
    assert kernel["backend"] == "reference" and "a 1-D operand" in kernel["why_reference"]
    x, v = randn((5, 7), "f32", rng), randn((7,), "f32", rng)
    assert_close(exe(x, v)[0], torch.relu(x.double() @ v.double()), "f32")


# ---------------------------------------------------------------- configurations and precision


def test_configs_by_size_and_the_tf32_option():
    vals = values(x=(("M", 4096), "bf16"), w=((4096, 4096), "bf16"), y=(("M", 4096), "bf16"))
    big = generate_kernel([entry("matmul", ["x", "w"], "y")], ["x", "w"], ["y"], vals, "k0")
    assert big.kernel["constexprs"] == {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "PROGRAMS": 0,
                                        "num_stages": 4}
    assert big.kernel["num_warps"] == 8 and "input_precision=" not in big.source  # 16-bit: its own tensor cores
    vals = values(x=((20, 300), "f32"), w=((300, 9), "f32"), y=((20, 9), "f32"))
    ops = [entry("matmul", ["x", "w"], "y")]
    small = generate_kernel(ops, ["x", "w"], ["y"], vals, "k0")
    assert small.kernel["constexprs"]["BLOCK_M"] == 32 and small.kernel["constexprs"]["BLOCK_N"] == 16
    assert 'input_precision="ieee"' in small.source  # f32 stays f32 unless the options say tf32
    assert 'input_precision="tf32"' in generate_kernel(ops, ["x", "w"], ["y"], vals, "k0", precision="tf32").source
    assert len(TritonRenderer().matmul_candidates(small.program)) >= 1  # the autotuning hook
    assert "tune" not in small.kernel  # 20 x 9: one tile fits, nothing to tune
    tune = big.kernel["tune"]
    assert len(tune) >= 4 and all(set(t["constexprs"]) == set(big.kernel["constexprs"]) for t in tune)
    assert {"constexprs": {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "PROGRAMS": 0, "num_stages": 3},
            "num_warps": 8, "grid": ["((d0 + 127) // 128) * ((d1 + 255) // 256)"]} in tune
    persistent = [t for t in tune if t["constexprs"]["PROGRAMS"]]  # a fixed grid of programs looping over tiles
    assert persistent and all(t["grid"] == [str(TritonRenderer.persistent_programs)] for t in persistent)


def test_tf32_precision_compiles_f32_matmuls_for_tf32_tensor_cores(tmp_path, rng):
    exe = compile_cuda(BIAS_GELU.replace("DT", "f32"), tmp_path / "tf32.sdc", precision="tf32")
    (kernel,) = kernels(tmp_path / "tf32.sdc")
    assert 'input_precision="tf32"' in (tmp_path / "tf32.sdc" / kernel["source"]).read_text()
    x, w, b = randn((37, 29), "f32", rng, 0.4), randn((29, 45), "f32", rng, 0.4), randn((45,), "f32", rng)
    (y,) = exe(x, w, b)
    torch.testing.assert_close(y.double(), gelu64(x.double() @ w.double() + b.double()), rtol=2e-3, atol=2e-3)


# ---------------------------------------------------------------- autotuning at first load


def test_autotuning_times_the_candidates_once_and_caches_the_winner(tmp_path, rng, monkeypatch):
    monkeypatch.setenv("SDC_AUTOTUNE", "1")  # the interpreter too (by default only CUDA tunes)
    monkeypatch.setenv("SDC_AUTOTUNE_DIR", str(tmp_path / "cache"))
    timed: list[int] = []

    def fake_measure(run, device):  # each candidate runs (so it must work), the last one "is fastest"
        run()
        timed.append(len(timed))
        return 1.0 / len(timed)

    monkeypatch.setattr(triton_launcher, "measure", fake_measure)
    out = tmp_path / "mm.sdc"
    exe = compile_cuda(BIAS_GELU.replace("DT", "f32"), out)
    (kernel,) = kernels(out)
    candidates = 1 + len(kernel["tune"])
    assert candidates >= 2
    last = kernel["tune"][-1]
    (calls,) = record_constexprs(exe)
    x, w, b = randn((37, 29), "f32", rng, 0.4), randn((29, 45), "f32", rng, 0.4), randn((45,), "f32", rng)
    want = gelu64(x.double() @ w.double() + b.double())
    assert_close(exe(x, w, b)[0], want, "f32")
    assert len(timed) == candidates and calls[-1]["BLOCK_M"] == last["constexprs"]["BLOCK_M"]
    assert calls[-1]["num_warps"] == last["num_warps"] and len(calls) == candidates + 1  # the winner on the result
    (cache,) = (tmp_path / "cache").iterdir()
    assert cache.name.endswith("-interpreter.json") and "37x45x29" in cache.read_text()

    exe(x, w, b)  # the same executable remembers its choice
    again = sdc.runtime.load(out, device="cpu")  # a second load reads the choice from disk
    (calls,) = record_constexprs(again)
    assert_close(again(x, w, b)[0], want, "f32")
    assert len(timed) == candidates and calls == [{**last["constexprs"], "num_warps": last["num_warps"],
                                                   "grid": calls[0]["grid"]}]

    monkeypatch.setenv("SDC_AUTOTUNE", "0")  # off: the plan's own configuration, nothing timed
    (tmp_path / "cache" / cache.name).unlink()
    off = sdc.runtime.load(out, device="cpu")
    (calls,) = record_constexprs(off)
    off(x, w, b)
    assert len(timed) == candidates and calls[0]["BLOCK_M"] == kernel["constexprs"]["BLOCK_M"]


# ---------------------------------------------------------------- every candidate configuration


def force_config(monkeypatch, config: triton_launcher.LaunchConfig) -> None:
    """Every generated launch runs `config`, whatever the plan or the autotuner would choose."""
    monkeypatch.setattr(triton_launcher.TritonLaunch, "config", lambda self, *args: config)


def test_every_tune_candidate_of_a_large_bf16_product_is_right(tmp_path, rng, monkeypatch):
    """A dynamic M makes the product *large*: the 16-bit candidates (128/256-wide tiles, group 16,
    persistent ones) each run on M = 37 and 300 (one and several row tiles, masked edges)."""
    text = DYNAMIC.replace("f32", "bf16")
    exe = compile_cuda(text, tmp_path / "dyn.sdc")
    (kernel,) = [k for k in kernels(tmp_path / "dyn.sdc") if k.get("template") == MATMUL]
    configs = [{"constexprs": kernel["constexprs"], "num_warps": kernel["num_warps"], "grid": kernel["grid"]},
               *kernel["tune"]]
    assert len(configs) >= 8 and any(c["constexprs"]["PROGRAMS"] for c in configs)
    assert len({json.dumps(c, sort_keys=True) for c in configs}) == len(configs)  # no duplicates
    w = randn((29, 45), "bf16", rng, 0.4)
    (calls,) = record_constexprs(exe)
    for c in configs:
        force_config(monkeypatch, triton_launcher.LaunchConfig(c["constexprs"], c["num_warps"], tuple(c["grid"])))
        for b, s in ((1, 37), (3, 100)):
            x = randn((b, s, 29), "bf16", rng, 0.4)
            (y,) = exe(x, w)
            assert_close(y, torch.tanh(x.double().reshape(-1, 29) @ w.double()), "bf16")
            assert calls[-1] == {**c["constexprs"], "num_warps": c["num_warps"], "grid": calls[-1]["grid"]}


def test_a_persistent_program_loops_over_tiles_of_every_batch(tmp_path, rng, monkeypatch):
    """Five programs over 3 batches x 2 x 2 tiles of 16: each program computes two or three tiles."""
    exe = compile_cuda(RESIDUAL, tmp_path / "bmm.sdc")
    (kernel,) = kernels(tmp_path / "bmm.sdc")
    persistent = {**kernel["constexprs"], "BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "PROGRAMS": 5}
    force_config(monkeypatch, triton_launcher.LaunchConfig(persistent, 4, ("5",)))
    x, w, r = randn((3, 17, 33), "f32", rng, 0.4), randn((33, 19), "f32", rng, 0.4), randn((3, 17, 19), "f32", rng)
    (y,) = exe(x, w, r)
    assert_close(y, torch.relu(x.double() @ w.double() + r.double()), "f32")


# ---------------------------------------------------------------- a model end to end

MLP = """
func.func @main(%x: tensor<?x7x24xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["B", 7, 24]>})
    -> (tensor<?x7x24xf32> {sdc.name = "y"}) {
  %w1 = "sdc.parameter"() {name = "w1"} : () -> tensor<24x40xf32>
  %b1 = "sdc.parameter"() {name = "b1"} : () -> tensor<40xf32>
  %w2 = "sdc.parameter"() {name = "w2"} : () -> tensor<24x40xf32>
  %0 = "sdc.matmul"(%x, %w1) : (tensor<?x7x24xf32>, tensor<24x40xf32>) -> tensor<?x7x40xf32>
  %1 = "sdc.add"(%0, %b1) : (tensor<?x7x40xf32>, tensor<40xf32>) -> tensor<?x7x40xf32>
  %2 = "sdc.gelu"(%1) {approximate = "tanh"} : (tensor<?x7x40xf32>) -> tensor<?x7x40xf32>
  %3 = "sdc.matmul"(%2, %w2) {transpose_rhs = true} : (tensor<?x7x40xf32>, tensor<24x40xf32>) -> tensor<?x7x24xf32>
  %4 = "sdc.add"(%3, %x) : (tensor<?x7x24xf32>, tensor<?x7x24xf32>) -> tensor<?x7x24xf32>
  return %4 : tensor<?x7x24xf32>
}
"""


def mlp_params(seed: int) -> dict[str, np.ndarray]:
    r = np.random.default_rng(seed)
    return {"w1": (r.standard_normal((24, 40)) * 0.2).astype(np.float32),
            "b1": r.standard_normal(40).astype(np.float32),
            "w2": (r.standard_normal((24, 40)) * 0.2).astype(np.float32)}


def mlp_numpy(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    """An independent reference in float64."""
    h = x.astype(np.float64) @ p["w1"] + p["b1"]
    h = 0.5 * h * (1 + np.tanh(0.7978845608028654 * (h + 0.044715 * h ** 3)))
    return h @ p["w2"].astype(np.float64).T + x


def test_mlp_for_cuda_runs_its_matmul_kernels_under_the_interpreter(tmp_path):
    params = mlp_params(int(np.random.default_rng().integers(1 << 31)))
    out = tmp_path / "mlp.sdc"
    exe = compile_cuda(MLP, out, params)
    plan = kernels(out)
    assert [k["backend"] for k in plan] == ["triton", "triton"] and {k["template"] for k in plan} == {MATMUL}
    assert [[e["op"] for e in k["ops"]] for k in plan] == [["matmul", "add", "gelu"], ["matmul", "add"]]
    for batch in (1, 3):
        x = np.random.default_rng().standard_normal((batch, 7, 24)).astype(np.float32)
        (got,) = exe(x)
        np.testing.assert_allclose(got, mlp_numpy(x, params), rtol=1e-4, atol=1e-5)
        (want,) = interpret(MLP, [x], params)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_mlp_runs_on_cuda(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET")  # compiled for the device, not interpreted
    params = mlp_params(int(np.random.default_rng().integers(1 << 31)))
    out = tmp_path / "mlp.sdc"
    exe = compile_cuda(MLP, out, params, device="cuda")  # loading on the CPU would need the interpreter
    for batch in (1, 64, 300):
        x = np.random.default_rng().standard_normal((batch, 7, 24)).astype(np.float32)
        (got,) = exe(torch.from_numpy(x).cuda())
        assert got.is_cuda
        np.testing.assert_allclose(got.cpu().numpy(), mlp_numpy(x, params), rtol=1e-4, atol=1e-4)  # ieee f32


@pytest.mark.parametrize("edit,why", [
    (lambda k: k.update(contiguous_flag="NOPE"), "'contiguous_flag' must name one of the kernel's constexprs"),
    (lambda k: k.update(tune={"BLOCK_M": 16}), "'tune' must be a list of launch configurations"),
    (lambda k: k["tune"][0]["constexprs"].pop("GROUP_M"), r"tune\[0\]: its constexprs .* are not the kernel's"),
    (lambda k: k["tune"][0].update(grid=["x + 1"]), r"tune\[0\]: grid entry 'x \+ 1' must be a dim expression"),
])
def test_a_bad_tune_list_or_flag_in_plan_json_is_one_error(edit, why, tmp_path):
    import hashlib
    import json

    out = tmp_path / "mm.sdc"
    compile_cuda(BIAS_GELU.replace("DT", "f32"), out)
    plan = json.loads((out / "plan.json").read_text())
    (step,) = [s for s in plan["ranks"][0]["steps"] if s["kind"] == "launch"]
    edit(step["kernel"])
    (out / "plan.json").write_text(json.dumps(plan))
    manifest = json.loads((out / "manifest.json").read_text())
    data = (out / "plan.json").read_bytes()
    manifest["files"]["plan.json"] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SdcError, match=why) as e:
        sdc.runtime.load(out, device="cpu")
    assert "\n" not in str(e.value)
