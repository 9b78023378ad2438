"""Partitioned artifacts on real processes: torchrun with 2 and 4 CPU processes over gloo.

The MLP, the transformer block and the small CNN (distributed_models.py), compiled for tp=2, dp=2
and dp=2,tp=2, must give the single-device results; `sdc run` under torchrun is the acceptance
path. Then the safety nets: a rank that dies mid-run, a rank that hangs (the timeout), and ranks
that disagree on a collective's operand (SDC_CHECK_COLLECTIVES=1). Each launch is small: the whole
file runs in about a minute on two cores.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import sdc
from sdc.compiler import build_artifact, import_model
from sdc.options import CompileOptions

from distributed_models import MODELS, export, random_inputs

HERE = Path(__file__).resolve().parent
WORKER = HERE / "distributed_worker.py"
BIN = Path(sys.executable).parent
TORCHRUN = shutil.which("torchrun", path=str(BIN)) or shutil.which("torchrun")
SDC = shutil.which("sdc", path=str(BIN)) or shutil.which("sdc")
RTOL, ATOL = 1e-4, 1e-5

pytestmark = pytest.mark.skipif(
    TORCHRUN is None or SDC is None or not torch.distributed.is_available() or
    not torch.distributed.is_gloo_available(), reason="needs torchrun and torch.distributed with gloo")


def _env(**extra) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    env.update(extra)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    return env


def torchrun(n: int, *command: str, timeout: float = 120) -> subprocess.CompletedProcess:
    result = subprocess.run([TORCHRUN, "--standalone", f"--nproc-per-node={n}", *command], env=_env(),
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    """Every model compiled for every mesh, fresh random inputs, and the single-device outputs."""
    d = tmp_path_factory.mktemp("distributed")
    rng = np.random.default_rng()
    out = {}
    for name in MODELS:
        onnx_path = export(name, d)
        inputs = random_inputs(name, 4, rng)
        np.savez(d / f"{name}_in.npz", *inputs)
        np.save(d / f"{name}_x.npy", inputs[0])
        expected = sdc.compile(onnx_path)(*inputs)
        for mesh in ("tp=2", "dp=2", "dp=2,tp=2"):
            module, params, provenance = import_model(onnx_path, mesh=mesh)
            art = build_artifact(module, params, d / f"{name}_{mesh.replace(',', '_')}.sdc",
                                 CompileOptions(mesh=mesh), provenance=provenance)
            out[(name, mesh)] = (art, d / f"{name}_in.npz", d / f"{name}_x.npy", expected)
    return out


def test_two_processes_match_one_device(cases, tmp_path):
    runs = [(key, case) for key, case in cases.items() if key[1] in ("tp=2", "dp=2")]
    result_file = tmp_path / "out.npz"
    torchrun(2, str(WORKER), "run", str(result_file), *[f"{art}:{inputs}" for _, (art, inputs, _, _) in runs])
    with np.load(result_file) as got:
        for (name, mesh), (art, _, _, expected) in runs:
            np.testing.assert_allclose(got[f"{art.name}/y"], expected[0], rtol=RTOL, atol=ATOL,
                                       err_msg=f"{name} on {mesh}")


def _ir_case(d: Path, text: str, params: dict, mesh: str, inputs: list, name: str):
    from sdc.interpreter import interpret
    from sdc.ir_text import parse_module

    art = build_artifact(parse_module(text), params, d / f"{name}.sdc", CompileOptions(mesh=mesh))
    np.savez(d / f"{name}_in.npz", *inputs)
    return art, d / f"{name}_in.npz", interpret(text, inputs, params)


def test_every_collective_over_gloo(tmp_path):
    """all_to_all, reduce_scatter, all_gather over two axes in tp-major order, a masked embedding:
    the partitioner's collectives beyond the models' all_reduce, on real processes."""
    from test_partition import EMBEDDING, RESHARD, ROW_PARALLEL, TWO_AXES_ONE_DIM

    rng = np.random.default_rng()
    w, table = rng.standard_normal((16, 4)).astype(np.float32), rng.standard_normal((12, 8)).astype(np.float32)
    world2 = [_ir_case(tmp_path, RESHARD, {}, "dp=2", [rng.standard_normal((8, 12)).astype(np.float32)], "a2a"),
              _ir_case(tmp_path, ROW_PARALLEL, {"w": w}, "tp=2", [rng.standard_normal((8, 16)).astype(np.float32)],
                       "rs")]
    world4 = [_ir_case(tmp_path, TWO_AXES_ONE_DIM, {}, "dp=2,tp=2", [rng.standard_normal((8, 6)).astype(np.float32)],
                       "ag2"),
              _ir_case(tmp_path, EMBEDDING, {"table": table}, "dp=2,tp=2", [rng.integers(-12, 12, (4, 5))], "emb")]
    for n, group in ((2, world2), (4, world4)):
        out = tmp_path / f"out{n}.npz"
        torchrun(n, str(WORKER), "run", str(out), *[f"{art}:{inputs}" for art, inputs, _ in group])
        with np.load(out) as got:
            for art, _, expected in group:
                np.testing.assert_allclose(got[f"{art.name}/output0"], expected[0], rtol=1e-5, atol=1e-6,
                                           err_msg=art.name)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_sdc_run_on_four_processes(cases, name, tmp_path):
    art, _, x_file, expected = cases[(name, "dp=2,tp=2")]
    result = torchrun(4, "--no-python", SDC, "run", str(art), "--input", f"x={x_file}", "--output-dir",
                      str(tmp_path))
    assert result.stdout.count("output y") == 1  # rank 0 alone reports
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected[0], rtol=RTOL, atol=ATOL)


def test_compile_for_a_mesh_inside_a_torchrun_script(cases, tmp_path):
    art, inputs, _, expected = cases[("transformer", "tp=2")]
    onnx_path = art.parent / "transformer.onnx"
    torchrun(2, str(WORKER), "compile", str(onnx_path), "tp=2", str(tmp_path / "t.sdc"), str(inputs),
             str(tmp_path / "out.npz"))
    assert (tmp_path / "t.sdc" / "manifest.json").is_file()  # written by rank 0
    with np.load(tmp_path / "out.npz") as got:
        np.testing.assert_allclose(got["y"], expected[0], rtol=RTOL, atol=ATOL)


# ---------------------------------------------------------------- failures


def _spawn(n: int, args: list[str], **extra) -> list[subprocess.Popen]:
    """n processes with the environment torchrun would give them (no torchrun: it would kill the
    survivors itself, and what is tested here is that they end on their own)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(n):
        env = _env(RANK=str(rank), WORLD_SIZE=str(n), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), **extra)
        procs.append(subprocess.Popen([sys.executable, str(WORKER), *args], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    return procs


def _finish(procs: list[subprocess.Popen], timeout: float) -> list[tuple[int | None, str]]:
    out = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            out.append((None, err))
            continue
        out.append((p.returncode, err))
    return out


def test_a_rank_dying_mid_run_ends_the_others(cases):
    art, inputs, _, _ = cases[("mlp", "tp=2")]
    procs = _spawn(2, ["die", str(art), str(inputs)], SDC_COLLECTIVE_TIMEOUT="20")
    started = time.monotonic()
    (code0, err0), (code1, _) = _finish(procs, timeout=60)
    assert code1 == 3  # it died after its first run
    assert code0 == 1, err0
    assert time.monotonic() - started < 20 + 15
    assert "rank 0: first run done" in err0
    assert "error: rank 0: 'sdc.all_reduce' (collective c" in err0 and "over mesh axes tp" in err0, err0


def test_a_hung_rank_makes_the_others_exit_within_the_timeout(cases):
    art, inputs, _, _ = cases[("mlp", "tp=2")]
    procs = _spawn(2, ["hang", str(art), str(inputs)], SDC_COLLECTIVE_TIMEOUT="3")
    try:
        code0, err0 = _finish(procs[:1], timeout=60)[0]
    finally:
        procs[1].kill()
        procs[1].communicate()
    assert code0 == 1, err0
    assert "error: rank 0: 'sdc.all_reduce' (collective c" in err0
    assert "did not complete within 3 s" in err0
    elapsed = float(err0.rsplit("(after ", 1)[1].split(" s)")[0]) if "(after " in err0 else None
    assert elapsed is None or elapsed < 10


def test_checked_collectives_name_the_op_when_ranks_disagree(cases):
    art, inputs, _, _ = cases[("mlp", "tp=2")]
    procs = _spawn(2, ["mismatch", str(art), str(inputs)], SDC_CHECK_COLLECTIVES="1", SDC_COLLECTIVE_TIMEOUT="20")
    results = _finish(procs, timeout=60)
    for code, err in results:
        assert code == 1, err
        assert "'sdc.all_reduce' (collective c" in err and "the ranks disagree on the operand" in err, err
        assert "rank 0 has f32[4, 16]; rank 1 has f32[5, 16]" in err


# ---------------------------------------------------------------- CUDA (NCCL)


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@needs_cuda
def test_world_of_one_on_cuda(cases, tmp_path):
    """One process on one GPU: NCCL, collectives on their own stream (groups of one device)."""
    art = build_artifact(*import_model(cases[("mlp", "tp=2")][0].parent / "mlp.onnx", mesh="tp=1")[:2],
                         tmp_path / "one.sdc", CompileOptions(mesh="tp=1"))
    x_file, expected = cases[("mlp", "tp=2")][2], cases[("mlp", "tp=2")][3]
    torchrun(1, "--no-python", SDC, "run", str(art), "--device", "cuda", "--input", f"x={x_file}",
             "--output-dir", str(tmp_path))
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected[0], rtol=1e-3, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")
@pytest.mark.parametrize("name", sorted(MODELS))
def test_two_gpus_match_one_device(cases, name, tmp_path):
    art, _, x_file, expected = cases[(name, "tp=2")]
    torchrun(2, "--no-python", SDC, "run", str(art), "--device", "cuda", "--input", f"x={x_file}",
             "--output-dir", str(tmp_path))
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected[0], rtol=1e-3, atol=1e-4)
