"""CUDA C++ kernels beside the Triton ones (sdc/codegen/cuda, sdc/runtime/launch/cuda.py).

On the CPU: what the renderer writes for a few groups, which groups it leaves to Triton, the plan
schema of a `cuda` launch and its load-time errors, the refusal to load without a CUDA device, the
launcher's per-call work (with a stand-in for the NVRTC kernel) and `sdc inspect`'s lines. When
nvcc is on the PATH a rendered source is also compiled to PTX, to check that it is valid CUDA C++
and that its accesses are 16-byte vectors. On a GPU (`gpu` mark): models with CUDA C++ kernels
against torch on random inputs, f32 / f16 / bf16, sizes that are no multiple of the vector width."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

import sdc.runtime
from sdc.cli.backend_report import backend_lines
from sdc.compiler import build_artifact, compile_module
from sdc.diagnostics import SdcError
from sdc.ir_text import parse_module
from sdc.options import CompileOptions
from sdc.runtime import plan_schema as S
from sdc.runtime.launch.cuda import CudaLaunch

TORCH_DTYPE = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

CHAIN = """
func.func @main(%x: tensor<?x37xDT> {sdc.name = "x", sdc.dims = #sdc.dims<["B", 37]>},
                %w: tensor<?x37xDT> {sdc.name = "w", sdc.dims = #sdc.dims<["B", 37]>},
                %s: tensor<DT> {sdc.name = "s"}) -> (tensor<?x37xDT> {sdc.name = "out"}) {
  %0 = "sdc.mul"(%x, %w) : (tensor<?x37xDT>, tensor<?x37xDT>) -> tensor<?x37xDT>
  %1 = "sdc.add"(%0, %s) : (tensor<?x37xDT>, tensor<DT>) -> tensor<?x37xDT>
  %2 = "sdc.silu"(%1) : (tensor<?x37xDT>) -> tensor<?x37xDT>
  %3 = "sdc.gt"(%x, %w) : (tensor<?x37xDT>, tensor<?x37xDT>) -> tensor<?x37xi1>
  %4 = "sdc.tanh"(%x) : (tensor<?x37xDT>) -> tensor<?x37xDT>
  %5 = "sdc.where"(%3, %2, %4) : (tensor<?x37xi1>, tensor<?x37xDT>, tensor<?x37xDT>) -> tensor<?x37xDT>
  %6 = "sdc.clip"(%5) {min = -0.5 : f64, max = 2.0 : f64} : (tensor<?x37xDT>) -> tensor<?x37xDT>
  %7 = "sdc.gelu"(%6) {approximate = "none"} : (tensor<?x37xDT>) -> tensor<?x37xDT>
  return %7 : tensor<?x37xDT>
}
"""


def chain_torch(x: torch.Tensor, w: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """The CHAIN in float64 (an independent reference), rounded to the inputs' dtype."""
    x64, w64, s64 = x.double(), w.double(), s.double()
    y = torch.where(x64 > w64, torch.nn.functional.silu(x64 * w64 + s64), torch.tanh(x64))
    return torch.nn.functional.gelu(y.clamp(-0.5, 2.0)).to(x.dtype)


MIXED = """
func.func @main(%x: tensor<4x6xf32> {sdc.name = "x"}, %y: tensor<4x6xf16> {sdc.name = "y"})
    -> (tensor<4x6xbf16> {sdc.name = "out"}) {
  %0 = "sdc.cast"(%y) {dtype = f32} : (tensor<4x6xf16>) -> tensor<4x6xf32>
  %1 = "sdc.max"(%x, %0) : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %2 = "sdc.softplus"(%1) : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %3 = "sdc.cast"(%2) {dtype = bf16} : (tensor<4x6xf32>) -> tensor<4x6xbf16>
  return %3 : tensor<4x6xbf16>
}
"""

BIAS = """
func.func @main(%x: tensor<8x5xf32> {sdc.name = "x"}, %b: tensor<5xf32> {sdc.name = "b"})
    -> (tensor<8x5xf32> {sdc.name = "out"}) {
  %0 = "sdc.add"(%x, %b) : (tensor<8x5xf32>, tensor<5xf32>) -> tensor<8x5xf32>
  %1 = "sdc.relu"(%0) : (tensor<8x5xf32>) -> tensor<8x5xf32>
  return %1 : tensor<8x5xf32>
}
"""


@pytest.fixture
def cuda_cpp(monkeypatch):
    monkeypatch.setenv("SDC_CUDA_CPP", "elementwise")


def build(text: str, out: Path) -> Path:
    """IR text compiled for target cuda into the artifact `out`, not loaded."""
    return Path(build_artifact(parse_module(text), {}, out, CompileOptions(target="cuda")))


def launch_steps(artifact: Path) -> list[dict]:
    plan = json.loads((artifact / "plan.json").read_text())
    return [s for s in plan["ranks"][0]["steps"] if s["kind"] == "launch"]


def cuda_sources(artifact: Path) -> list[tuple[dict, str]]:
    """Each launch's kernel object and source, checking that every one is CUDA C++."""
    out = []
    for step in launch_steps(artifact):
        kernel = step["kernel"]
        assert kernel["backend"] == "cuda" and kernel["source"] == f"kernels/{step['id']}.cu"
        out.append((kernel, (artifact / kernel["source"]).read_text()))
    return out


# ---------------------------------------------------------------- what the renderer writes


def test_a_bf16_chain_renders_as_one_vectorized_grid_stride_kernel(cuda_cpp, tmp_path):
    # sdc-fuse makes two groups of it: mul+add+silu, then gt+tanh+where+clip+gelu
    (kernel, source), (_, second) = cuda_sources(build(CHAIN.replace("DT", "bf16"), tmp_path / "chain.sdc"))
    assert kernel["domain"] == [None, 37] and kernel["block"] == [256] and kernel["shared_mem"] == 0
    assert kernel["scalars"] == ["d0 * d1"] and kernel["grid"] == ["(d0 * d1 + 8191) // 8192"]  # 8 x 256 x 4
    assert [a["map"] for a in kernel["args"]] == [[0, 1], [0, 1], []]  # x, w flat; s one element
    assert f'extern "C" __global__ void __launch_bounds__(256) {kernel["entry"]}(' in source
    assert "const float s2 = sdc_bf16_to_f32(a2[0]);" in source  # the one-element operand, read once
    assert source.count("sdc_vec<unsigned short, 8>") >= 3 and "for (int j = 0; j < 8; ++j)" in source
    assert "v += stride" in source and "e += stride" in source and "% 16 == 0) ? n / 8 : 0" in source
    assert "cvt.rn.bf16.f32" in source and "expf(" in source and "#include" not in source
    assert "sdc_f16_to_f32" not in source and "erff(" not in source  # only the helpers and math it uses
    assert "erff(" in second and "? 2.0f :" in second  # gelu; clip by comparisons (NaN stays NaN)


def test_mixed_dtypes_vectorize_by_the_widest_and_round_where_stored(cuda_cpp, tmp_path):
    ((kernel, source),) = cuda_sources(build(MIXED, tmp_path / "mixed.sdc"))
    assert kernel["grid"] == ["(d0 * d1 + 4095) // 4096"]  # f32 is the widest: 4 elements a vector
    assert "sdc_vec<float, 4>" in source and "sdc_vec<unsigned short, 4>" in source
    assert "sdc_f16_to_f32(" in source and "sdc_f32_to_bf16(" in source and "sdc_max(" in source
    assert "sdc_softplus(" in source
    if shutil.which("nvcc") is None:
        return
    (tmp_path / "k.cu").write_text(source)
    subprocess.run(["nvcc", "-arch=sm_90", "--ptx", "-O3", str(tmp_path / "k.cu"), "-o", str(tmp_path / "k.ptx")],
                   check=True, capture_output=True, timeout=120)
    ptx = (tmp_path / "k.ptx").read_text()
    assert "ld.global.nc.v4.f32" in ptx or "ld.global.nc.v4.u32" in ptx
    assert "st.global.v2" in ptx or "st.global.v4" in ptx  # 4 bf16 results: one 8-byte store


def test_groups_it_does_not_take_stay_triton(cuda_cpp, tmp_path, monkeypatch):
    (step,) = launch_steps(build(BIAS, tmp_path / "bias.sdc"))  # a per-column bias broadcasts along rows
    assert step["kernel"]["backend"] == "triton" and step["kernel"]["source"].endswith(".py")
    monkeypatch.delenv("SDC_CUDA_CPP")  # unset: no family is CUDA C++
    (step,) = launch_steps(build(MIXED, tmp_path / "mixed.sdc"))
    assert step["kernel"]["backend"] == "triton"


def test_an_unknown_family_is_one_error(monkeypatch, tmp_path):
    monkeypatch.setenv("SDC_CUDA_CPP", "elementwise,matmul")
    with pytest.raises(SdcError, match=r"SDC_CUDA_CPP='elementwise,matmul': unknown kernel family 'matmul' "
                                       r"\(families: elementwise\)"):
        build(MIXED, tmp_path / "mixed.sdc")


def test_the_cuda_cpp_option_selects_the_family_without_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv("SDC_CUDA_CPP", raising=False)
    artifact = Path(build_artifact(parse_module(MIXED), {}, tmp_path / "mixed.sdc",
                                   CompileOptions(target="cuda", cuda_cpp=("elementwise",))))
    (step,) = launch_steps(artifact)
    assert step["kernel"]["backend"] == "cuda"
    recorded = json.loads((artifact / "manifest.json").read_text())["compile_options"]
    assert recorded["cuda_cpp"] == ["elementwise"]


def test_inspect_names_the_cuda_cpp_groups(cuda_cpp, tmp_path):
    plan = json.loads((build(CHAIN.replace("DT", "f32"), tmp_path / "chain.sdc") / "plan.json").read_text())
    lines = backend_lines(plan["ranks"][0], "cuda")
    assert lines[0] == "kernels: 0 generated (Triton), 2 generated (CUDA C++), 0 through torch"
    assert [line.split(" x1 ")[0] for line in lines[1:]] == ["  CUDA C++: gt+tanh+where+clip+gelu",
                                                            "  CUDA C++: mul+add+silu"]


# ---------------------------------------------------------------- the plan schema and loading


def test_the_plan_round_trips_into_a_cuda_kernel_spec(cuda_cpp, tmp_path):
    out = build(CHAIN.replace("DT", "f16"), tmp_path / "chain.sdc")
    program = S.parse_rank_plan(json.loads((out / "plan.json").read_text())["ranks"][0])
    launch = next(s for s in program.steps if isinstance(s, S.Launch))
    spec = launch.cuda
    assert launch.backend == "cuda" and launch.triton is None and isinstance(spec, S.CudaKernel)
    assert (spec.source, spec.entry, spec.template) == (f"kernels/{launch.id}.cu", launch.id, "elementwise")
    assert spec.domain == (None, 37) and spec.block == (256,) and spec.scalars == ("d0 * d1",)
    assert [a.map for a in spec.args] == [(0, 1), (0, 1), ()]
    assert [r.value for r in spec.results] == list(launch.outputs)


@pytest.mark.parametrize("key, value, message", [
    ("source", "kernels/k.py", r"a cuda kernel's 'source' must be a file kernels/NAME.cu, found 'kernels/k.py'"),
    ("source", "kernels/../x.cu", r"'source' must be a file kernels/NAME.cu"),
    ("entry", "k-0", r"a cuda kernel's 'entry' must be a C identifier, found 'k-0'"),
    ("grid", ["d0", "d1", "d0", "d1"], r"'grid' must be a list of 1 to 3 dim expressions"),
    ("grid", ["d7 + 1"], r"grid entry 'd7 \+ 1' must be a dim expression over \['d0', 'd1'\]"),
    ("block", [64, 64], r"'block' must be 1 to 3 positive thread counts, at most 1024 in all, found \[64, 64\]"),
    ("block", [0], r"'block' must be 1 to 3 positive thread counts"),
    ("shared_mem", 1 << 20, r"'shared_mem' must be 0..49152 bytes, found 1048576"),
    ("scalars", ["n"], r"scalars entry 'n' must be a dim expression over"),
    ("scalars", "d0", r"'scalars' must be a list of any number of dim expressions, found 'd0'"),
])
def test_a_bad_cuda_kernel_spec_is_one_error_naming_the_step(cuda_cpp, tmp_path, key, value, message):
    out = build(CHAIN.replace("DT", "f32"), tmp_path / "chain.sdc")
    rank = json.loads((out / "plan.json").read_text())["ranks"][0]
    step = next(s for s in rank["steps"] if s["kind"] == "launch")
    step["kernel"][key] = value
    with pytest.raises(S.PlanError) as caught:
        S.parse_rank_plan(rank)
    text = str(caught.value)
    assert "\n" not in text and text.startswith("rank 0 step ") and f"(launch {step['id']})" in text
    assert re.search(message, text), text


def test_a_tampered_or_missing_kernel_source_is_refused_at_load(cuda_cpp, tmp_path):
    out = build(CHAIN.replace("DT", "f32"), tmp_path / "chain.sdc")
    kernel, source = cuda_sources(out)[0]
    (out / kernel["source"]).write_text(source + "// changed\n")
    with pytest.raises(SdcError, match=rf"{kernel['source']}: does not match its SHA-256 in manifest.json"):
        sdc.runtime.load(out, device="cpu")
    (out / kernel["source"]).unlink()
    with pytest.raises(SdcError, match=rf"{kernel['source']}: is missing \(listed in manifest.json\)"):
        sdc.runtime.load(out, device="cpu")


def test_without_a_cuda_device_loading_is_refused_naming_the_step(cuda_cpp, tmp_path):
    out = build(CHAIN.replace("DT", "f32"), tmp_path / "chain.sdc")
    step = launch_steps(out)[0]
    with pytest.raises(SdcError) as caught:
        sdc.runtime.load(out, device="cpu")
    text = str(caught.value)
    assert "\n" not in text
    assert f"(launch {step['id']}): a CUDA C++ kernel needs a CUDA device (this load is on cpu)" in text


# ---------------------------------------------------------------- the launcher's per-call work


class FakeKernel:
    """Stands in for torch's NVRTC kernel: records each launch and computes x * 2 + s on the CPU."""

    def __init__(self):
        self.calls: list[dict] = []

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        self.calls.append({"grid": grid, "block": block, "scalars": args[3:], "contiguous": args[0].is_contiguous()})
        x, s, out, n = args[0], args[1], args[2], args[3]
        out.view(-1)[:n] = (x.reshape(-1) * 2 + s.reshape(-1)[0])[:n]


def fake_launch(kernel: FakeKernel) -> CudaLaunch:
    spec = S.CudaKernel(source="kernels/k0.cu", entry="k0", template="elementwise", domain=(None, 37),
                        args=(S.KernelTensor("x", (0, 1)), S.KernelTensor("s", ())),
                        results=(S.KernelTensor("y", (0, 1)),), grid=("(d0 * d1 + 8191) // 8192",), block=(256,),
                        shared_mem=0, scalars=("d0 * d1",))
    return CudaLaunch("rank 0 step 0 (launch k0)", spec, kernel, arg_slots=(0, 1), result_slots=(2,),
                      result_dtypes=(torch.float32,), device=torch.device("cpu"))


def test_a_launch_sizes_its_grid_and_scalars_from_the_operands():
    kernel = FakeKernel()
    launch = fake_launch(kernel)
    x, s = torch.randn(300, 37), torch.randn(())
    vals = [x, s, None]
    launch(vals, None)
    assert kernel.calls[-1] == {"grid": (2, 1, 1), "block": (256, 1, 1), "scalars": [11100], "contiguous": True}
    torch.testing.assert_close(vals[2], x * 2 + s)
    strided = torch.randn(37, 5).t()  # not contiguous: made so before the kernel indexes it flat
    buffer = torch.empty(37, 5).t()  # an alloc step's strided buffer: written through a copy
    vals = [strided, s, buffer]
    launch(vals, None)
    assert kernel.calls[-1]["contiguous"] and vals[2] is buffer
    torch.testing.assert_close(buffer, strided * 2 + s)
    with pytest.raises(SdcError, match=r"launch k0\): value 'x' has size 36 in dim 1, the CUDA C\+\+ kernel "
                                       r"indexes it flat over a domain of size 37 there"):
        launch([torch.randn(2, 36), s, None], None)
    with pytest.raises(SdcError, match=r"value 's' has rank 1, the kernel expects 0"):
        launch([x, torch.randn(2), None], None)


# ---------------------------------------------------------------- on a GPU


needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
TOLERANCE = {"f32": (1e-5, 1e-5), "f16": (2e-3, 2e-3), "bf16": (1.6e-2, 1.6e-2)}


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("batch", [3, 4099])  # 111 elements (the tail alone); 151663 (vectors, then a tail)
def test_cuda_cpp_kernels_match_torch_on_the_gpu(cuda_cpp, tmp_path, dtype, batch):
    text = CHAIN.replace("DT", dtype)
    exe = compile_module(parse_module(text), {}, CompileOptions(target="cuda"), output=tmp_path / "c.sdc",
                         device="cuda")
    assert [type(i).__name__ for i in exe._executor.program].count("CudaLaunch") == 2
    g = torch.Generator(device="cuda").manual_seed(int(torch.randint(1 << 30, ())))
    make = lambda *shape: torch.randn(*shape, generator=g, device="cuda").mul(1.5).to(TORCH_DTYPE[dtype])  # noqa: E731
    x, w, s = make(batch, 37), make(batch, 37), make(())
    rtol, atol = TOLERANCE[dtype]
    for args in ((x, w, s), (make(batch * 37 + 1)[1:].view(batch, 37), w, s)):  # then a misaligned view of x
        (got,) = exe(*args)
        torch.testing.assert_close(got, chain_torch(*args), rtol=rtol, atol=atol)


@pytest.mark.gpu
@needs_gpu
def test_the_bench_chain_in_cuda_cpp_matches_torch_on_the_gpu(cuda_cpp, tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from gpu import elementwise_ir

    n = (1 << 20) + 5
    exe = compile_module(parse_module(elementwise_ir(n)), {}, CompileOptions(target="cuda"),
                         output=tmp_path / "ew.sdc", device="cuda")
    x, w, b = (torch.randn(n, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    (got,) = exe(x, w, b)
    want = (torch.nn.functional.gelu(x.double() * w.double() + b.double()) * 0.5).to(torch.bfloat16)
    torch.testing.assert_close(got, want, rtol=1.6e-2, atol=1.6e-2)
