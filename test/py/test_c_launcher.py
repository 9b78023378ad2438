"""The runtime side of the C kernels of the CPU target (sdc/runtime/launch/c.py): the plan schema of
a `c` launch, `CLaunch` with a hand-written C source against torch (dense and strided arguments, a
run-time broadcast and large work through the fallback, result buffers reused, zero-size domains),
the library built once per executor and cached across processes, the fallback with one warning when
the host cannot compile, SDC_C_KERNELS=0, the executor's hook and `sdc inspect`'s line. Needs a C
compiler on the PATH (`cc`, or `$CC`)."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
import torch

from sdc.cli.backend_report import backend_lines
from sdc.diagnostics import SdcError
from sdc.dialect.opdef import RefEnv
from sdc.runtime.launch import c as C
from sdc.runtime import plan_schema as S
from sdc.runtime.executor import ReferenceExecutor, RunState
from sdc.runtime.profile import Profiler
from sdc.runtime.launch.base import KernelSources

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler on the PATH")

# k_add: out = x + y over (d0, d1); k_bias: out = x + b, b indexed by d1 alone.
SOURCE = r"""
#include <stdint.h>

int k_add(void **p, const int64_t *d) {
    const float *x = p[0], *y = p[1];
    float *out = p[2];
    int64_t n = d[0] * d[1];
    for (int64_t i = 0; i < n; i++) out[i] = x[i] + y[i];
    return 0;
}
const char *const sdc_sig_k_add = "{\"template\":\"elementwise\",\"domain\":[null,null],"
    "\"args\":[[\"f32\",[0,1]],[\"f32\",[0,1]]],\"results\":[[\"f32\",[0,1]]]}";

int k_bias(void **p, const int64_t *d) {
    const float *x = p[0], *b = p[1];
    float *out = p[2];
    for (int64_t i = 0; i < d[0]; i++)
        for (int64_t j = 0; j < d[1]; j++) out[i * d[1] + j] = x[i * d[1] + j] + b[j];
    return 0;
}
const char *const sdc_sig_k_bias = "{\"template\":\"elementwise\",\"domain\":[null,null],"
    "\"args\":[[\"f32\",[0,1]],[\"f32\",[1]]],\"results\":[[\"f32\",[0,1]]]}";
"""


def _rank_plan() -> dict:
    """Two c launches of kernels/cpu.c: t = x + y (k_add), out = t + b (k_bias); x, y, t: [B, N]."""
    two_d = {"shape": ["B", "N"], "dtype": "f32"}
    return {
        "rank": 0, "weights": "weights/rank0.safetensors", "streams": ["compute"],
        "values": {"x": two_d, "y": two_d, "b": {"shape": ["N"], "dtype": "f32"}, "t": two_d, "out": two_d},
        "inputs": ["x", "y", "b"], "outputs": ["out"],
        "steps": [
            {"kind": "launch", "id": "k0", "stream": 0, "inputs": ["x", "y"], "outputs": ["t"],
             "kernel": {"backend": "c", "source": "kernels/cpu.c", "entry": "k_add", "template": "elementwise",
                        "domain": [None, None], "args": [{"value": "x", "map": [0, 1]}, {"value": "y", "map": [0, 1]}],
                        "results": [{"value": "t", "map": [0, 1]}],
                        "ops": [{"op": "add", "inputs": ["x", "y"], "outputs": ["t"]}]}},
            {"kind": "launch", "id": "k1", "stream": 0, "inputs": ["t", "b"], "outputs": ["out"],
             "kernel": {"backend": "c", "source": "kernels/cpu.c", "entry": "k_bias", "template": "elementwise",
                        "domain": [None, None], "args": [{"value": "t", "map": [0, 1]}, {"value": "b", "map": [1]}],
                        "results": [{"value": "out", "map": [0, 1]}],
                        "ops": [{"op": "add", "inputs": ["t", "b"], "outputs": ["out"]}]}},
            {"kind": "free", "values": ["t"]},
        ],
    }


def _sources(root: Path, text: str) -> KernelSources:
    (root / "kernels").mkdir(parents=True, exist_ok=True)
    (root / "kernels" / "cpu.c").write_text(text)
    files = {"kernels/cpu.c": {"sha256": hashlib.sha256(text.encode()).hexdigest()}}
    return KernelSources(root, files, lambda file, msg: SdcError(f"bad artifact '{root}': {file}: {msg}"))


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    """Each test compiles into its own cache, as a fresh process would (no library loaded yet)."""
    monkeypatch.setenv(C.C_CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(C.C_KERNELS_ENV, raising=False)
    monkeypatch.setattr(C, "_LOADED", {})
    monkeypatch.setattr(C, "_VERSIONS", {})


class Counted:
    """A stand-in for a launch's reference instructions: computes the group with torch and counts calls."""

    def __init__(self, arg_slots: tuple[int, int], out_slot: int):
        self.arg_slots, self.out_slot, self.calls = arg_slots, out_slot, 0

    def __call__(self, vals: list, state: RunState) -> None:
        self.calls += 1
        vals[self.out_slot] = vals[self.arg_slots[0]] + vals[self.arg_slots[1]]


SLOTS = {"x": 0, "y": 1, "b": 2, "t": 3, "out": 4}


def _launches(tmp_path, text: str = SOURCE) -> tuple[list[C.CLaunch], list[Counted]]:
    """The two launches of `_rank_plan`, prepared with one CLibraries, each with a counting fallback."""
    program = S.parse_rank_plan(_rank_plan())
    sources = _sources(tmp_path / "art", text)
    libraries = C.CLibraries()
    launches, fallbacks = [], []
    for step in (s for s in program.steps if isinstance(s, S.Launch)):
        fallback = Counted(tuple(SLOTS[v] for v in step.inputs), SLOTS[step.outputs[0]])
        launches.append(C.prepare_c_launch(step, SLOTS, program.values, sources, SdcError, [fallback], libraries))
        fallbacks.append(fallback)
    return launches, fallbacks


def _state(threads: int = 1) -> RunState:
    return RunState(RefEnv(), threads=threads, current=threads)


def _vals(**tensors: torch.Tensor) -> list:
    vals = [None] * len(SLOTS)
    for name, t in tensors.items():
        vals[SLOTS[name]] = t
    return vals


# ---------------------------------------------------------------- the plan schema


def test_a_c_launch_parses_into_a_c_kernel_spec():
    launch = next(s for s in S.parse_rank_plan(_rank_plan()).steps if isinstance(s, S.Launch))
    spec = launch.c
    assert launch.backend == "c" and launch.triton is None and launch.cuda is None and isinstance(spec, S.CKernel)
    assert (spec.source, spec.entry, spec.template, spec.domain) == ("kernels/cpu.c", "k_add", "elementwise",
                                                                     (None, None))
    assert [a.map for a in spec.args] == [(0, 1), (0, 1)] and [r.value for r in spec.results] == ["t"]


@pytest.mark.parametrize("key, value, message", [
    ("source", "kernels/cpu.cu", r"a c kernel's 'source' must be a file kernels/NAME.c, found 'kernels/cpu.cu'"),
    ("source", "kernels/../cpu.c", r"'source' must be a file kernels/NAME.c"),
    ("entry", "k-0", r"a c kernel's 'entry' must be a C identifier, found 'k-0'"),
    ("template", "attention", r"'template' must be one of elementwise, row, matmul, found 'attention'"),
    ("domain", [None, -1], r"'domain' must list sizes or null"),
    ("args", [{"value": "x", "map": [0, 2]}], r"the map of 'x' must give one domain dim \(0..1\) or null"),
    ("args", [{"value": "x", "map": [0]}], r"the map of 'x' must give one domain dim .* each of its 2 dims"),
    ("args", [{"value": "b", "map": [1]}], r"'args' names value 'b', which is not among the launch's inputs"),
    ("args", [{"value": "x", "map": [0, 1], "layout": [1, 1]}], r"the layout of 'x' must be a permutation"),
    ("results", [], r"a c kernel's 'results' must be the launch's outputs \['t'\]"),
])
def test_a_bad_c_kernel_spec_is_one_error_naming_the_step(key, value, message):
    rank = _rank_plan()
    rank["steps"][0]["kernel"][key] = value
    with pytest.raises(S.PlanError) as caught:
        S.parse_rank_plan(rank)
    text = str(caught.value)
    assert "\n" not in text and text.startswith("rank 0 step 0 (launch k0): "), text
    assert re.search(message, text), text


def test_a_c_kernel_of_a_dtype_without_c_storage_is_refused():
    rank = _rank_plan()
    for vid in ("x", "y", "t"):
        rank["values"][vid] = {"shape": ["B", "N"], "dtype": "f16"}
    with pytest.raises(S.PlanError, match=r"^rank 0 step 0 \(launch k0\): value 'x' is f16, which a c kernel "
                                          r"does not store \(it stores f32, f64, i1, .*\)$"):
        S.parse_rank_plan(rank)


# ---------------------------------------------------------------- CLaunch against torch


def test_dense_arguments_run_the_kernel(tmp_path):
    (add, bias), (add_ref, bias_ref) = _launches(tmp_path)
    assert add.fn is not None and bias.fn is not None
    x, y, b = torch.randn(5, 7), torch.randn(5, 7), torch.randn(7)
    vals = _vals(x=x, y=y, b=b)
    add(vals, _state())
    bias(vals, _state())
    torch.testing.assert_close(vals[SLOTS["out"]], x + y + b, rtol=1e-6, atol=1e-6)
    assert add_ref.calls == 0 and bias_ref.calls == 0
    # another size: settled again, still the kernel
    x, y, b = torch.randn(3, 11), torch.randn(3, 11), torch.randn(11)
    vals = _vals(x=x, y=y, b=b)
    add(vals, _state())
    bias(vals, _state())
    torch.testing.assert_close(vals[SLOTS["out"]], x + y + b, rtol=1e-6, atol=1e-6)
    assert add_ref.calls == 0 and len(add.settled) == 2


def test_a_strided_argument_is_made_contiguous(tmp_path):
    (add, _), (add_ref, _) = _launches(tmp_path)
    x = torch.randn(7, 5).t()  # [5, 7], column-major
    y = torch.randn(5, 14)[:, ::2]  # [5, 7], every other column
    assert not x.is_contiguous() and not y.is_contiguous()
    vals = _vals(x=x, y=y)
    add(vals, _state())
    torch.testing.assert_close(vals[SLOTS["t"]], x + y, rtol=1e-6, atol=1e-6)
    assert add_ref.calls == 0


def test_a_run_time_broadcast_runs_the_fallback(tmp_path):
    (add, _), (add_ref, _) = _launches(tmp_path)
    x, y = torch.randn(5, 7), torch.randn(1, 7)  # y's B is 1 at run time: the kernel indexes it flat
    vals = _vals(x=x, y=y)
    add(vals, _state())
    torch.testing.assert_close(vals[SLOTS["t"]], x + y)
    assert add_ref.calls == 1
    x, y = torch.randn(5, 7), torch.randn(5, 7)  # the same launch with fitting shapes: the kernel again
    vals = _vals(x=x, y=y)
    add(vals, _state())
    torch.testing.assert_close(vals[SLOTS["t"]], x + y, rtol=1e-6, atol=1e-6)
    assert add_ref.calls == 1


def test_large_work_runs_the_fallback_when_torch_has_threads(tmp_path):
    """Large work at 2 threads: an elementwise kernel built with OpenMP runs itself over the threads;
    one built without (a compiler without OpenMP) runs the torch ops, which use them."""
    (add, _), (add_ref, _) = _launches(tmp_path)
    x, y = torch.randn(300, 256), torch.randn(300, 256)  # 76800 elements > LARGE_ELEMENTS
    assert x.numel() > C.LARGE_ELEMENTS
    vals = _vals(x=x, y=y)
    add(vals, _state(threads=1))
    torch.testing.assert_close(vals[SLOTS["t"]], x + y, rtol=1e-6, atol=1e-6)
    assert add_ref.calls == 0
    assert add.parallel  # this host's compiler has OpenMP
    vals = _vals(x=x, y=y)
    add(vals, _state(threads=2))
    torch.testing.assert_close(vals[SLOTS["t"]], x + y, rtol=1e-6, atol=1e-6)
    assert add_ref.calls == 0
    object.__setattr__(add, "parallel", False)
    vals = _vals(x=x, y=y)
    add(vals, _state(threads=2))
    torch.testing.assert_close(vals[SLOTS["t"]], x + y)
    assert add_ref.calls == 1


def test_results_reuse_the_bound_buffer(tmp_path):
    (add, _), _ = _launches(tmp_path)
    x, y = torch.randn(4, 6), torch.randn(4, 6)
    bound = torch.full((4, 6), float("nan"))
    vals = _vals(x=x, y=y, t=bound)
    add(vals, _state())
    assert vals[SLOTS["t"]] is bound
    torch.testing.assert_close(bound, x + y, rtol=1e-6, atol=1e-6)
    # a view step's strided slice of a concat's buffer: written through, the slot keeps the view
    base = torch.full((4, 10), float("nan"))
    view = base.narrow(1, 2, 6)
    vals = _vals(x=x, y=y, t=view)
    add(vals, _state())
    assert vals[SLOTS["t"]] is view
    torch.testing.assert_close(base[:, 2:8], x + y, rtol=1e-6, atol=1e-6)
    assert base[:, :2].isnan().all() and base[:, 8:].isnan().all()
    # a buffer of another shape is not the result's: a fresh one
    vals = _vals(x=x, y=y, t=torch.empty(2, 2))
    add(vals, _state())
    assert vals[SLOTS["t"]].shape == (4, 6)
    torch.testing.assert_close(vals[SLOTS["t"]], x + y, rtol=1e-6, atol=1e-6)


def test_a_zero_size_domain_does_nothing(tmp_path):
    (add, _), (add_ref, _) = _launches(tmp_path)
    vals = _vals(x=torch.randn(0, 7), y=torch.randn(0, 7))
    add(vals, _state())
    assert vals[SLOTS["t"]].shape == (0, 7) and add_ref.calls == 0


# ---------------------------------------------------------------- building, caching, falling back


def _logging_compiler(tmp_path: Path) -> tuple[Path, Path]:
    """A `cc` that logs each invocation's arguments, then runs the real one."""
    log = tmp_path / "cc.log"
    script = tmp_path / "logging-cc"
    script.write_text(f"#!/bin/sh\necho \"$@\" >> '{log}'\nexec '{shutil.which('cc')}' \"$@\"\n")
    script.chmod(0o755)
    return script, log


def test_the_library_is_built_once_per_executor_and_cached_across_processes(tmp_path, monkeypatch):
    script, log = _logging_compiler(tmp_path)
    monkeypatch.setenv("CC", str(script))
    launches, _ = _launches(tmp_path)
    compiles = [line for line in log.read_text().splitlines() if "-shared" in line]
    assert len(compiles) == 1 and all(launch.fn is not None for launch in launches)
    assert len(list((tmp_path / "cache").glob("*.so"))) == 1
    # a second process (nothing loaded, no version known): asks the compiler's version, compiles nothing
    monkeypatch.setattr(C, "_LOADED", {})
    monkeypatch.setattr(C, "_VERSIONS", {})
    log.write_text("")
    (add, _), (add_ref, _) = _launches(tmp_path)
    assert log.read_text().splitlines() == ["--version"]
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    vals = _vals(x=x, y=y)
    add(vals, _state())
    torch.testing.assert_close(vals[SLOTS["t"]], x + y, rtol=1e-6, atol=1e-6)
    assert add_ref.calls == 0


def test_without_a_compiler_the_cache_is_not_used(tmp_path, monkeypatch, capsys):
    """The cache key includes the compiler's version, so a host without the compiler cannot find a
    library compiled before: its C launches run through torch (and say so), even with a warm cache."""
    _launches(tmp_path)
    monkeypatch.setattr(C, "_LOADED", {})
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    capsys.readouterr()
    launches, fallbacks = _launches(tmp_path)
    assert all(launch.fn is None for launch in launches)
    assert "is not on PATH" in capsys.readouterr().err


@pytest.mark.parametrize("cc, text, reason", [
    ("false", SOURCE, r"C compiler 'false' does not run: 'false --version' exited 1"),
    ("/nonexistent/cc", SOURCE, r"no C compiler: '/nonexistent/cc' is not on PATH \(set CC\)"),
    (None, SOURCE + "\nvoid broken(void) { return 1 }\n", r"C compiler 'cc' failed: .*error"),
])
def test_a_library_that_cannot_be_built_sends_every_launch_through_torch_with_one_warning(
        tmp_path, monkeypatch, capsys, cc, text, reason):
    if cc is not None:
        monkeypatch.setenv("CC", cc)
    else:
        monkeypatch.delenv("CC", raising=False)
    (add, bias), (add_ref, bias_ref) = _launches(tmp_path, text)
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert re.fullmatch(rf"warning: {re.escape(str(tmp_path / 'art'))}/kernels/cpu\.c: C kernels not compiled "
                        rf"\({reason}.*\); their groups run through torch", lines[0]), lines[0]
    assert add.fn is None and bias.fn is None
    x, y, b = torch.randn(5, 7), torch.randn(5, 7), torch.randn(7)
    vals = _vals(x=x, y=y, b=b)
    add(vals, _state())
    bias(vals, _state())
    torch.testing.assert_close(vals[SLOTS["out"]], x + y + b)
    assert (add_ref.calls, bias_ref.calls) == (1, 1)


def test_sdc_c_kernels_0_runs_every_group_through_torch(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(C.C_KERNELS_ENV, "0")
    (add, _), (add_ref, _) = _launches(tmp_path)
    assert add.fn is None and capsys.readouterr().err == ""
    assert not (tmp_path / "cache").exists()  # nothing compiled
    x, y = torch.randn(5, 7), torch.randn(5, 7)
    vals = _vals(x=x, y=y)
    add(vals, _state())
    torch.testing.assert_close(vals[SLOTS["t"]], x + y)
    assert add_ref.calls == 1


def test_an_entry_the_library_lacks_is_a_bad_artifact(tmp_path):
    rank = _rank_plan()
    rank["steps"][0]["kernel"]["entry"] = "k_missing"
    program = S.parse_rank_plan(rank)
    step = program.steps[0]
    with pytest.raises(SdcError, match=r"^bad artifact '.*': kernels/cpu\.c: the compiled C kernels have no "
                                       r"function 'k_missing'$"):
        C.prepare_c_launch(step, SLOTS, program.values, _sources(tmp_path / "art", SOURCE), SdcError, [])


# ---------------------------------------------------------------- the executor and sdc inspect


def _executor(tmp_path, text: str = SOURCE) -> ReferenceExecutor:
    program = S.parse_rank_plan(_rank_plan())
    return ReferenceExecutor(program, {}, {}, SdcError, kernels=_sources(tmp_path / "art", text))


def test_the_executor_runs_c_launches(tmp_path):
    exe = _executor(tmp_path)
    launches = [i for i in exe.program if isinstance(i, C.CLaunch)]
    assert exe.kernel_count == 2 and len(launches) == 2 and all(launch.fn is not None for launch in launches)
    assert launches[0].scratch == () and exe.gated
    x, y, b = torch.randn(6, 9), torch.randn(6, 9), torch.randn(9)
    (out,) = exe.run([x, y, b], {"B": 6, "N": 9})
    torch.testing.assert_close(out, x + y + b, rtol=1e-6, atol=1e-6)
    # a profiled call times each C launch as a step of backend "c"
    profiler = Profiler()
    (out,) = exe.run([x, y, b], {"B": 6, "N": 9}, profiler=profiler)
    torch.testing.assert_close(out, x + y + b, rtol=1e-6, atol=1e-6)
    assert [(info.id, info.backend) for info, *_ in profiler.records] == [("k0", "c"), ("k1", "c")]


def test_the_executor_s_fallback_is_the_group_s_torch_ops(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CC", "false")
    exe = _executor(tmp_path)
    assert all(i.fn is None for i in exe.program if isinstance(i, C.CLaunch))
    assert capsys.readouterr().err.count("warning:") == 1
    x, y, b = torch.randn(6, 9), torch.randn(6, 9), torch.randn(9)
    (out,) = exe.run([x, y, b], {"B": 6, "N": 9})
    torch.testing.assert_close(out, x + y + b)
    (out,) = exe.run([x, torch.randn(1, 9), b], {"B": 6, "N": 9})  # broadcasting: torch's add does it
    assert out.shape == (6, 9)


def test_inspect_counts_c_kernels():
    rank = _rank_plan()
    ref = copy.deepcopy(rank["steps"][1])
    ref["id"], ref["kernel"] = "k2", {"backend": "reference", "ops": ref["kernel"]["ops"]}
    rank["steps"].append(ref)
    assert backend_lines(json.loads(json.dumps(rank)), "cpu") == [
        "kernels: 2 generated (C), 1 through torch (torch 1)", "  torch: add x1 (k2)"]


def test_a_plan_that_differs_from_the_compiled_signature_is_refused(tmp_path):
    """plan.json edited after compiling (k_bias's operand mapped over both dims, as k_add's are): the
    kernel would index the bias as a [B, N] tensor, so the load refuses the launch."""
    raw = _rank_plan()
    raw["steps"][1]["kernel"]["args"][1]["map"] = [0, 1]
    raw["values"]["b"] = {"shape": ["B", "N"], "dtype": "f32"}
    program = S.parse_rank_plan(raw)
    step = [s for s in program.steps if isinstance(s, S.Launch)][1]
    with pytest.raises(SdcError, match=r"does not match the kernel's compiled signature: args"):
        C.prepare_c_launch(step, SLOTS, program.values, _sources(tmp_path / "art", SOURCE), SdcError, [])


def test_nothing_over_the_allocation_limit_is_made_dense_or_allocated(tmp_path, monkeypatch):
    """A broadcast view costs nothing; a result of its size, or the kernel's dense copy of it, would
    (the fuzzer's onnx-bytes:91:8050 asked for 800 GB). They are refused before allocating, as one
    error naming the launch."""
    (add, _), (add_ref, _) = _launches(tmp_path)
    monkeypatch.setenv("SDC_MAX_ALLOC", "1M")
    huge = torch.ones(1, 1).expand(1 << 12, 1 << 12)  # 64 MiB as a dense f32 tensor
    with pytest.raises(SdcError, match=r"launch k0\).*C kernel 'k_add'.* over the allocation limit of 1.0 MiB"):
        add(_vals(x=huge, y=huge), _state())
    assert add_ref.calls == 0
