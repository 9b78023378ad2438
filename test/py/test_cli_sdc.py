"""The `sdc` command line, as a user runs it: exit codes, output files, one-line errors, no tracebacks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sdc.cli.common import UsageError
from sdc.cli.main import main, parse_dims, safe_file_name

MODEL = """
func.func @main(%x: tensor<?x8xf32> {sdc.name = "input:0", sdc.dims = #sdc.dims<["batch", 8]>},
                %t: tensor<?xi64> {sdc.name = "tokens", sdc.dims = #sdc.dims<["S"]>})
    -> (tensor<?x4xf32> {sdc.name = "logits/out"}, tensor<?xi64> {sdc.name = "ids"}) {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<4x8xf32>
  %0 = "sdc.matmul"(%x, %w) {transpose_lhs = false, transpose_rhs = true} : (tensor<?x8xf32>, tensor<4x8xf32>) -> tensor<?x4xf32>
  %1 = "sdc.tanh"(%0) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %2 = "sdc.add"(%t, %t) : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  return %1, %2 : tensor<?x4xf32>, tensor<?xi64>
}
"""


def sdc(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sdc.cli.main", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def assert_clean_error(done: subprocess.CompletedProcess, code: int, text: str) -> None:
    assert done.returncode == code, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith("error: ")
    assert text in done.stderr


@pytest.fixture(scope="module")
def weights() -> np.ndarray:
    return np.random.default_rng(11).standard_normal((4, 8), dtype=np.float32)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory, weights) -> Path:
    root = tmp_path_factory.mktemp("cli")
    (root / "model.mlir").write_text(MODEL)
    np.savez(root / "params.npz", w=weights)
    done = sdc("compile", root / "model.mlir", "--params", root / "params.npz", "-o", root / "model.sdc",
               "--dump-ir", root / "ir")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {root / 'model.sdc'} (2 kernels, 128 B of weights) in ")
    assert done.stderr == ""  # progress only on a terminal
    assert (root / "ir" / "09-sdc-verify.mlir").is_file()
    return root / "model.sdc"


def test_run_with_inputs_writes_outputs(compiled, weights, tmp_path):
    x = np.random.default_rng(2).standard_normal((3, 8), dtype=np.float32)
    t = np.arange(5, dtype=np.int64)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "t.npy", t)
    done = sdc("run", compiled, "--input", f"input:0={tmp_path / 'x.npy'}", "--input", f"tokens={tmp_path / 't.npy'}",
               "--output-dir", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"loaded {compiled} in ") and lines[0].endswith(" (2 kernels)")
    assert lines[1] == f"input  input:0  f32[3, 8]  from {tmp_path / 'x.npy'}"
    assert lines[3].startswith("output logits/out  f32[3, 4]  min ")
    assert lines[4] == "output ids  i64[5]  min 0  max 8  mean 4"
    assert lines[-1].startswith("ran in ") and lines[-1].endswith("ms")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["ids.npy", "logits_out.npy"]
    np.testing.assert_allclose(np.load(tmp_path / "out" / "logits_out.npy"),
                               np.tanh(x.astype(np.float64) @ weights.T.astype(np.float64)), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "ids.npy"), 2 * t)


def test_run_with_random_inputs_and_chosen_dims(compiled, tmp_path, capsys):
    assert main(["run", str(compiled), "--dim", "S=7", "--output-dir", str(tmp_path), "--repeat", "3"]) == 0
    out = capsys.readouterr().out
    assert "input  input:0  f32[1, 8]  random" in out  # batch-like: 1
    assert "input  tokens  i64[7]  random" in out
    assert "ran 3 times: mean " in out
    assert np.load(tmp_path / "logits_out.npy").shape == (1, 4)
    assert np.load(tmp_path / "ids.npy").shape == (7,)


def launch_steps(artifact: Path) -> list[dict]:
    plan = json.loads((artifact / "plan.json").read_text())
    return [s for s in plan["ranks"][0]["steps"] if s["kind"] == "launch"]


def test_run_warmup_and_statistics(compiled, capsys, monkeypatch):
    import sdc.runtime

    calls = []
    original = sdc.runtime.Executable.__call__
    monkeypatch.setattr(sdc.runtime.Executable, "__call__", lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
    assert main(["run", str(compiled), "--repeat", "5", "--warmup", "2"]) == 0
    out = capsys.readouterr().out
    assert len(calls) == 7  # the warm-up runs happen, untimed
    line = next(x for x in out.splitlines() if x.startswith("ran "))
    assert line.startswith("ran 5 times after 2 warm-up runs: mean ")
    for stat in ("median", "p90", "stddev", "min", "max"):
        assert f", {stat} " in line
    assert out.splitlines()[0].startswith(f"loaded {compiled} in ")
    assert "profile:" not in out  # only with --profile


def test_format_statistics():
    from sdc.cli.main import format_statistics

    times = [i / 1e3 for i in (10, 1, 9, 2, 8, 3, 7, 4, 6, 5)]
    assert format_statistics(times) == ("mean 5.500 ms, median 5.500 ms, p90 9.000 ms, stddev 3.028 ms, "
                                        "min 1.000 ms, max 10.000 ms")


def test_bad_counts_are_usage_errors(compiled, capsys):
    assert_clean_error(sdc("run", compiled, "--repeat", "0"), 2, "error: --repeat expects an integer >= 1, found '0'")
    for flag, value in (("--repeat", "-3"), ("--repeat", "two"), ("--warmup", "-1"), ("--warmup", "1.5")):
        assert main(["run", str(compiled), flag, value]) == 2
        err = capsys.readouterr().err
        assert err.splitlines() == [f"error: {flag} expects an integer >= {1 if flag == '--repeat' else 0}, "
                                    f"found '{value}'"]


def test_profile_table_and_trace(compiled, tmp_path, capsys):
    assert main(["run", str(compiled), "--profile", "--repeat", "3", "--warmup", "1", "--output-dir",
                 str(tmp_path)]) == 0
    out = capsys.readouterr().out
    launches = launch_steps(compiled)
    lines = out.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("profile: "))
    assert lines[start].startswith(f"profile: {len(launches)} steps, ") and lines[start].endswith("mean of 3 runs")
    assert lines[start + 1].split()[:4] == ["step", "backend", "ms/run", "share"]
    rows = lines[start + 2:start + 2 + len(launches)]
    assert sorted(r.split()[0] for r in rows) == sorted(s["id"] for s in launches)
    assert {r.split()[1] for r in rows} <= {"reference", "c"}  # torch ops or generated C kernels
    ms = [float(r.split()[2]) for r in rows]
    assert ms == sorted(ms, reverse=True)  # slowest first
    assert abs(sum(float(r.split()[3].rstrip("%")) for r in rows) - 100) < 0.5
    assert {r.split()[4] for r in rows} == {"+".join(e["op"] for e in s["kernel"]["ops"]) for s in launches}
    assert lines[start + 2 + len(launches)] == f"wrote trace {tmp_path / 'trace.json'} (Chrome trace format: open " \
                                              "it in https://ui.perfetto.dev)"
    trace = json.loads((tmp_path / "trace.json").read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == 3 * len(launches)  # one per launch step per timed run, none for the warm-up
    assert {e["args"]["run"] for e in spans} == {0, 1, 2}
    for e in spans:
        assert set(e) >= {"name", "ph", "ts", "dur", "pid", "tid", "args"}
        assert e["dur"] > 0 and e["ts"] >= 0 and e["pid"] == 0 and e["tid"] == 0
    ends = sorted((e["ts"], e["ts"] + e["dur"]) for e in spans)
    assert all(a[1] <= b[0] + 1e-3 for a, b in zip(ends, ends[1:]))  # one stream: steps do not overlap


def test_trace_without_profile(compiled, tmp_path, capsys):
    target = tmp_path / "sub" / "t.json"
    assert main(["run", str(compiled), "--trace", str(target), "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert "profile:" not in out and f"wrote trace {target} " in out
    spans = [e for e in json.loads(target.read_text())["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == 2 * len(launch_steps(compiled))
    assert main(["run", str(compiled), "--trace", str(tmp_path)]) == 1  # a directory
    assert capsys.readouterr().err.startswith(f"error: cannot write the trace '{tmp_path}'")


def test_no_profiler_runs_the_plain_loop(compiled, monkeypatch):
    """Profiling costs nothing when off: an ordinary call never enters the profiled loop."""
    import sdc.runtime
    from sdc.runtime.executor import ReferenceExecutor
    from sdc.runtime.profile import Profiler

    def refuse(*args):
        raise AssertionError("the profiled loop ran without a profiler")

    exe = sdc.runtime.load(compiled)
    x = np.ones((2, 8), np.float32)
    t = np.arange(3)
    with monkeypatch.context() as m:
        m.setattr(ReferenceExecutor, "_run_profiled", refuse)
        plain = exe(x, t)
    exe.profiler = Profiler()
    profiled = exe(x, t)
    assert exe.profiler.runs == 1 and len(exe.profiler.records) == len(launch_steps(compiled))
    for a, b in zip(plain, profiled):
        np.testing.assert_array_equal(a, b)


def test_inspect(compiled, capsys):
    assert main(["inspect", str(compiled)]) == 0
    out = capsys.readouterr().out
    assert "target    cpu  world size 1  mesh none" in out
    assert "  input:0: f32[batch, 8]\n  tokens: i64[S]\n" in out
    assert "  logits/out: f32[batch, 4]\n  ids: i64[S]\n" in out  # output dims from sdc-shape-constraints
    assert "guards  none" in out
    assert "rank 0: 3 steps, 2 kernels, 3 ops, 1 weights (128 B)" in out
    assert "  w  f32[4, 8]  128 B" in out
    assert "  weights/rank0.safetensors  " in out and "  plan.json  " in out


def test_user_errors_exit_1_without_traceback(compiled, tmp_path):
    assert_clean_error(sdc("run", tmp_path / "missing.sdc"), 1, "no artifact at")
    np.save(tmp_path / "bad.npy", np.zeros((2, 9), np.float32))
    assert_clean_error(sdc("run", compiled, "--input", f"input:0={tmp_path / 'bad.npy'}"), 1,
                       "error: input 'input:0' has shape [2, 9], expected [batch, 8]")


@pytest.mark.parametrize("name", ["SDC_KEEP_PAGES", "SDC_C_SEGMENTS", "SDC_ARENA", "SDC_C_KERNELS", "SDC_C_RUNS"])
def test_a_bad_on_off_setting_is_one_error(compiled, monkeypatch, name):
    monkeypatch.setenv(name, "maybe")
    assert_clean_error(sdc("run", compiled), 1, f"error: {name}='maybe' is not one of 1, on, 0, off")


def test_damaged_artifact_and_debug_traceback(compiled, tmp_path, capsys, monkeypatch):
    copy = tmp_path / "m.sdc"
    shutil.copytree(compiled, copy)
    with open(copy / "plan.json", "a") as f:
        f.write(" ")
    assert_clean_error(sdc("inspect", copy), 1, "plan.json: does not match its SHA-256")
    monkeypatch.setenv("SDC_DEBUG", "1")
    assert main(["run", str(copy)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.splitlines()[-1].startswith("error: bad artifact")


def test_usage_errors_exit_2(compiled):
    assert_clean_error(sdc(), 2, "error: no command")
    assert_clean_error(sdc("compile", "m.onnx", "--input-shape", "x=1,3,?,224"), 2,
                       "'?' is not a size or a symbol name")
    assert_clean_error(sdc("run", compiled, "--dim", "S"), 2, "--dim expects NAME=VALUE")


# ---------------------------------------------------------------- in-process (fast) checks


def test_in_process_errors(compiled, tmp_path, capsys):
    assert main(["run", str(compiled), "--dim", "Q=3"]) == 1
    assert "no input has a symbolic dim named 'Q' (symbols: S, batch)" in capsys.readouterr().err
    assert main(["run", str(compiled), "--input", f"nope={tmp_path / 'x.npy'}"]) == 1
    assert "cannot open" in capsys.readouterr().err
    np.save(tmp_path / "x.npy", np.zeros((1, 8), np.float32))
    assert main(["run", str(compiled), "--input", f"nope={tmp_path / 'x.npy'}"]) == 1
    assert "unknown input 'nope'" in capsys.readouterr().err
    (tmp_path / "m.mlir").write_text(MODEL)
    assert main(["compile", str(tmp_path / "m.mlir"), "-o", str(tmp_path / "m.sdc")]) == 1
    assert "parameters without a usable value: 'w' is missing" in capsys.readouterr().err
    assert main(["compile", str(tmp_path / "m.mlir"), "--input-shape", "x=1,8"]) == 1
    assert "--input-shape x=1,8: no input is named 'x' (inputs: 'input:0', 'tokens')" in capsys.readouterr().err
    assert main(["compile", str(tmp_path / "nope.onnx"), "-o", str(tmp_path / "x.sdc")]) == 1
    assert "error: cannot open" in capsys.readouterr().err
    assert main(["compile", str(tmp_path / "m.mlir"), "--target", "cuda", "-o", str(tmp_path / "c.sdc")]) == 1
    assert "parameters without a usable value" in capsys.readouterr().err  # cuda is accepted: the same model error
    assert main(["compile", str(tmp_path / "m.mlir"), "--target", "tpu", "-o", str(tmp_path / "c.sdc")]) == 1
    assert "error: unknown target 'tpu' (targets: cpu, cuda)" in capsys.readouterr().err  # the registry's names
    assert not (tmp_path / "c.sdc").exists()


def test_compile_default_output_name(tmp_path, weights, capsys):
    (tmp_path / "tiny.mlir").write_text(MODEL)
    np.savez(tmp_path / "p.npz", w=weights)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert main(["compile", "tiny.mlir", "--params", "p.npz"]) == 0
    finally:
        os.chdir(cwd)
    assert json.loads((tmp_path / "tiny.sdc" / "manifest.json").read_text())["compile_options"]["source"] == "tiny.mlir"


def test_parse_dims_and_file_names():
    assert parse_dims("1,3,224,224", "x") == [1, 3, 224, 224]
    assert parse_dims("B, 3, H, W", "x") == ["B", 3, "H", "W"]
    for bad in ("1,-3", "1,,2", "3.5", "B+1"):
        with pytest.raises(UsageError):
            parse_dims(bad, "x")
    assert safe_file_name("logits/out") == "logits_out"
    assert safe_file_name("../../etc/passwd") == "_.._etc_passwd"
    assert safe_file_name("..") == "output"
    assert safe_file_name("a b:c") == "a_b_c"
