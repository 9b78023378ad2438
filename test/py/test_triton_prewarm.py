"""Compiling an artifact's Triton kernels at load (sdc.runtime.launch.triton.prewarm).

The prewarm is worth something only if it predicts the first call exactly: the same kernel
functions with the same arguments (dtypes, strides, sizes) and constexprs, or triton compiles
again inside the call. These tests run the real first call under the interpreter and compare.
"""

from __future__ import annotations

import pytest
import torch
from triton_support import compile_cuda, interpreter, triton_launches  # noqa: F401 (the fixture: kernels interpret)

import sdc.runtime
from sdc.runtime.artifact import read_artifact
from sdc.runtime.launch.base import dense_strides as _dense_strides
from sdc.runtime.launch.triton import WarmCall, compile_in_parallel, prewarm

TWO_GROUPS = """
func.func @main(%x: tensor<4x6x8xf32> {sdc.name = "x"}, %y: tensor<4x6x8xf32> {sdc.name = "y"},
                %b: tensor<8xf32> {sdc.name = "b"})
    -> (tensor<4x6x8xf32> {sdc.name = "out"}, tensor<4x6x8xf32> {sdc.name = "out2"}) {
  %0 = "sdc.add"(%x, %b) : (tensor<4x6x8xf32>, tensor<8xf32>) -> tensor<4x6x8xf32>
  %1 = "sdc.silu"(%0) : (tensor<4x6x8xf32>) -> tensor<4x6x8xf32>
  %2 = "sdc.add"(%y, %b) : (tensor<4x6x8xf32>, tensor<8xf32>) -> tensor<4x6x8xf32>
  %3 = "sdc.silu"(%2) : (tensor<4x6x8xf32>) -> tensor<4x6x8xf32>
  return %1, %3 : tensor<4x6x8xf32>, tensor<4x6x8xf32>
}
"""


def _record_calls(exe) -> list[tuple]:
    """Each real launch as (fn, args with tensors as dtypes, constexprs, warps)."""
    calls: list[tuple] = []
    for step in triton_launches(exe):
        fn = step.fn

        class Recording:
            def __getitem__(self, grid, fn=fn):
                def launch(*args, num_warps, **constexprs):
                    calls.append((id(fn), tuple(str(a.dtype) if isinstance(a, torch.Tensor) else str(a) for a in args),
                                  tuple(sorted(constexprs.items())), num_warps))
                    return fn[grid](*args, num_warps=num_warps, **constexprs)
                return launch

        object.__setattr__(step, "fn", Recording())
    return calls


def test_identical_kernels_share_one_function_and_the_prewarm_predicts_the_first_call(tmp_path):
    exe = compile_cuda(TWO_GROUPS, tmp_path / "two.sdc")
    steps = triton_launches(exe)
    assert len(steps) == 2 and steps[0].spec.source != steps[1].spec.source
    assert steps[0].fn is steps[1].fn  # the same code under two names: one function, one compile
    warm: list[WarmCall] = []
    program = read_artifact(tmp_path / "two.sdc").program(0)
    assert prewarm(exe._executor.program, program, None, compile_all=warm.extend) == 1 == len(warm)
    real = _record_calls(exe)
    g = torch.Generator().manual_seed(7)
    x, y, b = (torch.randn(s, generator=g) for s in ((4, 6, 8), (4, 6, 8), (8,)))
    out, out2 = exe(x, y, b)
    torch.testing.assert_close(out, torch.nn.functional.silu(x.double() + b.double()).float(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out2, torch.nn.functional.silu(y.double() + b.double()).float(), rtol=1e-5, atol=1e-6)
    assert len(real) == 2 and set(real) == {c.key for c in warm}


MATMUL = """
func.func @main(%x: tensor<37x29xf32> {sdc.name = "x"}, %w: tensor<29x45xf32> {sdc.name = "w"},
                %b: tensor<45xf32> {sdc.name = "b"}) -> (tensor<37x45xf32> {sdc.name = "y"}) {
  %0 = "sdc.matmul"(%x, %w) : (tensor<37x29xf32>, tensor<29x45xf32>) -> tensor<37x45xf32>
  %1 = "sdc.add"(%0, %b) : (tensor<37x45xf32>, tensor<45xf32>) -> tensor<37x45xf32>
  return %1 : tensor<37x45xf32>
}
"""


def test_a_tuned_kernel_warms_every_candidate_until_a_choice_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("SDC_AUTOTUNE", "1")  # the interpreter tunes too
    monkeypatch.setenv("SDC_AUTOTUNE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "mm.sdc"
    exe = compile_cuda(MATMUL, out)
    (step,) = triton_launches(exe)
    program = read_artifact(out).program(0)
    warm: list[WarmCall] = []
    assert prewarm(exe._executor.program, program, None, compile_all=warm.extend) == 1 + len(step.spec.tune)
    real = _record_calls(exe)
    g = torch.Generator().manual_seed(3)
    x, w, b = torch.randn(37, 29, generator=g), torch.randn(29, 45, generator=g), torch.randn(45, generator=g)
    (y,) = exe(x, w, b)
    torch.testing.assert_close(y.double(), x.double() @ w.double() + b.double(), rtol=1e-4, atol=1e-4)
    assert set(real) == {c.key for c in warm}  # the tuning ran exactly the warmed configurations
    again = sdc.runtime.load(out, device="cpu")
    warm.clear()
    assert prewarm(again._executor.program, program, None, compile_all=warm.extend) == 1  # the cached choice
    real = _record_calls(again)
    again(x, w, b)
    assert set(real) == {c.key for c in warm}


def test_no_prewarm_on_the_cpu_or_when_turned_off(tmp_path, monkeypatch):
    exe = compile_cuda(TWO_GROUPS, tmp_path / "two.sdc")
    assert exe.kernels_prewarmed == 0  # the interpreter compiles nothing
    monkeypatch.setenv("SDC_PREWARM", "0")
    program = read_artifact(tmp_path / "two.sdc").program(0)
    assert prewarm(exe._executor.program, program, torch.device("cuda")) == 0


@pytest.mark.parametrize("layout", [None, (0, 2, 3, 1), (1, 0, 2, 3)])
def test_dense_strides_are_those_of_the_permuted_view(layout):
    shape = (2, 3, 4, 5)
    if layout is None:
        want = torch.empty(shape).stride()
    else:
        inverse = [layout.index(d) for d in range(4)]
        want = torch.empty([shape[p] for p in layout]).permute(inverse).stride()
    assert _dense_strides(shape, layout) == want


def test_compiles_run_under_triton_async_mode_and_a_failure_is_left_to_the_launch():
    from triton.runtime import _async_compile

    seen: list[bool] = []

    class Call:
        def __init__(self, fails: bool):
            self.fails = fails

        def compile(self):
            seen.append(_async_compile.active_mode.get() is not None)
            if self.fails:
                raise RuntimeError("out of shared memory")

    compile_in_parallel([Call(False), Call(True), Call(False)])
    assert seen == [True, True, True]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_cuda_the_first_call_finds_its_kernels_compiled(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    exe = compile_cuda(TWO_GROUPS, tmp_path / "two.sdc", device="cuda")
    assert exe.kernels_prewarmed == 1
    fn = triton_launches(exe)[0].fn
    caches = lambda: sum(len(c[0]) for c in fn.device_caches.values())  # noqa: E731 (triton's kernel caches)
    before = caches()
    assert before == 1
    x, y, b = (torch.randn(s, device="cuda") for s in ((4, 6, 8), (4, 6, 8), (8,)))
    out, _ = exe(x, y, b)
    torch.testing.assert_close(out, torch.nn.functional.silu(x + b), rtol=1e-5, atol=1e-6)
    assert caches() == before  # no compile inside the call
