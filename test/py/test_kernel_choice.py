"""The plan is what runs: plan.json names the kernel of every launch (sdc/runtime/kernel_choice.py),
the executor runs the plan's steps and nothing else, and what ran is counted, fallbacks included
(sdc/runtime/counters.py), for `sdc run --profile` and `sdc inspect --runs`."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import onnx
import pytest
import torch
import torch.nn as nn

import sdc
from sdc.cli.main import main as sdc_main
from sdc.runtime.format import FALLBACKS, KERNELS, LAUNCH
from sdc.runtime.plan_schema import PlanError, parse_rank_plan

from c_support import needs_c_compiler

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


class ConvNet(nn.Module):
    """Grouped and plain convolutions with residual adds and relus, pooling, a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.grouped = nn.Conv2d(16, 16, 3, padding=1, groups=4)
        self.pointwise = nn.Conv2d(16, 32, 1)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.stem(x))
        y = torch.relu(self.grouped(y) + y)
        y = self.pool(self.pointwise(y))
        return self.head(y.mean((2, 3)))


def _encoder() -> nn.Module:
    layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()


MODELS = {
    "conv": (lambda: ConvNet().eval(), lambda g: (torch.randn(2, 3, 48, 48, generator=g),)),
    "encoder": (_encoder, lambda g: (torch.randn(2, 12, 32, generator=g),)),
}


def _compiled(name: str, tmp_path: Path, **options):
    torch.manual_seed(0)
    make, inputs = MODELS[name]
    model = make()
    example = inputs(torch.Generator().manual_seed(1))
    exe = sdc.compile(model, example, output=tmp_path / f"{name}.sdc", **options)
    return model, exe, json.loads((tmp_path / f"{name}.sdc" / "plan.json").read_text())["ranks"][0]


def _launches(rank: dict) -> list[dict]:
    return [s for s in rank["steps"] if s["kind"] == LAUNCH]


@needs_c_compiler
def test_the_plan_names_the_kernel_of_every_launch(tmp_path):
    _, _, rank = _compiled("conv", tmp_path)
    for step in _launches(rank):
        kernel = step["kernel"]
        assert kernel["runs"] in KERNELS and kernel.get("fallback") in (None, *FALLBACKS.get(kernel["runs"], ()))
        if kernel["backend"] == "c":
            assert (kernel["runs"], kernel["fallback"]) == ("c", "torch")
        for op in kernel["ops"] if kernel["backend"] == "reference" else ():
            assert op["runs"] in KERNELS
            if op["op"] == "conv":  # float32 weights of the plan, static channels: sdc's C kernel library
                assert op["runs"] == "c_conv"
    convs = [s for s in _launches(rank) if any(op["op"] == "conv" for op in s["kernel"]["ops"])]
    assert len(convs) == 3 and all((s["kernel"]["runs"], s["kernel"]["fallback"]) == ("c_conv", "onednn")
                                   for s in convs)


def _rank_plan() -> dict:
    return {"rank": 0, "weights": "weights/rank0.safetensors", "streams": ["compute"],
            "values": {"x": {"shape": [2, 3], "dtype": "f32"}, "y": {"shape": [2, 3], "dtype": "f32"}},
            "inputs": ["x"], "outputs": ["y"],
            "steps": [{"kind": "launch", "id": "k0", "stream": 0, "inputs": ["x"], "outputs": ["y"],
                       "kernel": {"backend": "reference", "runs": "torch",
                                  "ops": [{"op": "neg", "inputs": ["x"], "outputs": ["y"], "runs": "torch"}]}}]}


@pytest.mark.parametrize("edit, message", [
    (lambda k: k.update(runs="fast"), r"'runs' must name a kernel \(c, triton, .*found 'fast'"),
    (lambda k: k["ops"][0].update(runs="cudnn9"), r"op 0 \('neg'\): 'runs' must name a kernel"),
    (lambda k: k.update(runs="c_conv"), r"'runs' is 'c_conv', which none of its ops runs \(torch\)"),
    (lambda k: k.update(fallback="onednn"), r"a 'torch' kernel falls back to nothing, the plan says 'onednn'"),
])
def test_a_bad_kernel_choice_is_refused_at_load(edit, message):
    raw = _rank_plan()
    assert parse_rank_plan(copy.deepcopy(raw)).steps[0].runs == "torch"
    edit(raw["steps"][0]["kernel"])
    with pytest.raises(PlanError, match=message):
        parse_rank_plan(raw)


def test_a_plan_without_choices_gets_its_backends_kernels():
    raw = _rank_plan()
    del raw["steps"][0]["kernel"]["runs"], raw["steps"][0]["kernel"]["ops"][0]["runs"]
    step = parse_rank_plan(raw).steps[0]
    assert (step.runs, step.fallback, step.ops[0].runs) == ("torch", None, None)


def _check_ran_as_planned(exe, rank: dict) -> dict:
    """The steps an unprofiled call runs are the plan's launch and collective steps, in order, and each
    step ran its planned kernel or the fallback the plan allows; returns the counters as runs.json."""
    planned = [s["id"] for s in rank["steps"] if s["kind"] in (LAUNCH, "collective")]
    assert list(exe._executor.executed_steps()) == planned
    runs = exe.counters.to_json()
    assert set(runs["steps"]) == {s["id"] for s in _launches(rank)}
    for step in _launches(rank):
        counted = runs["steps"][step["id"]]
        assert counted["planned"] == step["kernel"]["runs"] and counted["loaded"] == step["kernel"]["runs"]
        assert set(counted["ran"]) <= {step["kernel"]["runs"], step["kernel"].get("fallback")}, (step["id"], counted)
        assert sum(counted["ran"].values()) >= runs["calls"]  # (every op of the step, every call)
    return runs


@needs_c_compiler
@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_executed_steps_are_the_plans(name, tmp_path):
    model, exe, rank = _compiled(name, tmp_path)
    gen = torch.Generator().manual_seed(2)
    for _ in range(3):
        inputs = MODELS[name][1](gen)
        (got,) = exe(*inputs)
        with torch.no_grad():
            torch.testing.assert_close(got, model(*inputs), rtol=1e-4, atol=1e-4)
    runs = _check_ran_as_planned(exe, rank)
    assert runs["calls"] == 3
    if name == "conv":  # channels-last images all the way: every convolution in sdc's C kernels
        conv_steps = [s["id"] for s in _launches(rank) if s["kernel"]["runs"] == "c_conv"
                      and any(op["op"] == "conv" for op in s["kernel"]["ops"])]
        assert conv_steps and all(runs["steps"][sid]["ran"].get("c_conv", 0) >= 3 for sid in conv_steps)


@needs_c_compiler
def test_a_c_kernel_over_its_size_limit_counts_its_planned_fallback(tmp_path):
    """A generated C matmul of more than launch/c.py's LARGE_MACS multiply-adds runs through torch on two
    threads (the plan's fallback) and in C on one: the counters say which, call by call."""
    gen = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(128, 128), nn.GELU()).eval()
    x = torch.randn(128, 128, generator=gen)
    exe = sdc.compile(model, (x,), output=tmp_path / "mlp.sdc")
    rank = json.loads((tmp_path / "mlp.sdc" / "plan.json").read_text())["ranks"][0]
    (product,) = [s for s in _launches(rank) if any(op["op"] == "matmul" for op in s["kernel"]["ops"])]
    assert (product["kernel"]["runs"], product["kernel"]["fallback"]) == ("c", "torch")
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        (y,) = exe(x)
        torch.set_num_threads(1)
        (z,) = exe(x)
    finally:
        torch.set_num_threads(threads)
    with torch.no_grad():
        torch.testing.assert_close(y, model(x), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(z, model(x), rtol=1e-4, atol=1e-4)
    ran = exe.counters.to_json()["steps"][product["id"]]
    assert ran["ran"] == {"c": 1, "torch": 1} and ran["fallbacks"] == 1


@needs_c_compiler
def test_a_kernel_this_host_cannot_run_is_loaded_as_its_fallback(tmp_path, monkeypatch):
    """C kernels off at load (SDC_C_KERNELS=0): the plan's c_conv convolutions load as oneDNN's, its
    generated C kernels as torch's, and every call counts there."""
    _, _, rank = _compiled("conv", tmp_path)
    monkeypatch.setenv("SDC_C_KERNELS", "0")
    exe = sdc.runtime.load(tmp_path / "conv.sdc")
    exe(*MODELS["conv"][1](torch.Generator().manual_seed(3)))
    runs = exe.counters.to_json()["steps"]
    for step in _launches(rank):
        planned, counted = step["kernel"]["runs"], runs[step["id"]]
        if planned == "c":
            assert (counted["loaded"], counted["ran"]) == ("torch", {"torch": 1})
        elif planned == "c_conv" and any(op["op"] == "conv" for op in step["kernel"]["ops"]):
            assert counted["loaded"] == "onednn" and counted["ran"].get("onednn") == 1
        assert planned not in counted["ran"] or planned == "torch"


def test_inspect_says_what_will_run_and_what_ran(tmp_path, capsys):
    art, out = tmp_path / "r50.sdc", tmp_path / "out"
    assert sdc_main(["compile", str(LIGHT / "light_resnet50.onnx"), "-o", str(art)]) == 0
    capsys.readouterr()
    assert sdc_main(["inspect", str(art)]) == 0
    text = capsys.readouterr().out
    # all 53 convolutions (the stem's with its input's layout cast) in sdc's C kernel library
    assert "    kernels: 2 generated (C), 55 in sdc's C kernel library (c_conv.c), 1 through torch (torch 1)\n" in text
    assert "    will run: 2 generated C, 55 sdc's C kernel library (c_conv.c), 1 torch\n" in text
    assert "      may fall back at run time: 2 c -> torch, 53 c_conv -> onednn, 2 c_conv -> torch\n" in text
    assert sdc_main(["run", str(art), "--profile", "--repeat", "2", "--output-dir", str(out)]) == 0
    text = capsys.readouterr().out
    assert "kernels planned: c_conv 55, c 2, torch 1 (steps)\n" in text
    assert "(op calls over 2 calls)\n" in text and (out / "runs.json").is_file()
    assert sdc_main(["inspect", str(art), "--runs", str(out / "runs.json")]) == 0
    text = capsys.readouterr().out
    assert f"    what ran ({out / 'runs.json'})\n" in text and "kernels ran: " in text
    assert "not of this plan" not in text
    (out / "bad.json").write_text("{}")
    assert sdc_main(["inspect", str(art), "--runs", str(out / "bad.json")]) == 1
    assert "is not a run counters file" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_executed_steps_are_the_plans_on_cuda(name, tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    model, exe, rank = _compiled(name, tmp_path, target="cuda")
    model = model.cuda()
    gen = torch.Generator().manual_seed(2)
    for _ in range(3):
        inputs = tuple(t.cuda() for t in MODELS[name][1](gen))
        (got,) = exe(*inputs)
        with torch.no_grad():
            torch.testing.assert_close(got, model(*inputs), rtol=2e-3, atol=2e-3)
    _check_ran_as_planned(exe, rank)
    assert {s["kernel"]["runs"] for s in _launches(rank)} <= {"triton", "cuda_cpp", "cudnn", "cudnn_fused", "cublas",
                                                               "torch"}


# ---------------------------------------------------------------- runs of C calls made as one


@needs_c_compiler
@pytest.mark.parametrize("name", ["resnet50", "inception_v2", "shufflenet"])
def test_the_runs_called_as_one_are_the_plans(name, tmp_path):
    """plan.json's `calls_as_one` (sdc/codegen/calls_as_one.py) are the C segments and C runs the
    executor makes; Inception-v2's concat chains joined at load still run every step of the plan."""
    art = tmp_path / f"{name}.sdc"
    exe = sdc.compile(str(LIGHT / f"light_{name}.onnx"), output=art)
    rank = json.loads((art / "plan.json").read_text())["ranks"][0]
    recorded = [(g["kind"], tuple(g["steps"])) for g in rank["calls_as_one"]]
    assert recorded and {kind for kind, _ in recorded} <= {"c_segment", "c_run"}
    assert exe._executor.runs_as_one() == recorded
    assert list(exe._executor.executed_steps()) == [s["id"] for s in _launches(rank)]


def test_bad_calls_as_one_are_refused_at_load():
    raw = _rank_plan()
    raw["calls_as_one"] = [{"kind": "c_run", "steps": ["k0"]}]
    assert parse_rank_plan(copy.deepcopy(raw)).calls_as_one == (("c_run", ("k0",)),)
    raw["calls_as_one"] = [{"kind": "c_run", "steps": ["k9"]}]
    with pytest.raises(PlanError, match=r"calls_as_one\[0\] names step 'k9', which is not a launch step"):
        parse_rank_plan(copy.deepcopy(raw))
    raw["calls_as_one"] = [{"kind": "fused", "steps": ["k0"]}]
    with pytest.raises(PlanError, match=r"calls_as_one\[0\] must have a 'kind' \(c_segment, c_run\)"):
        parse_rank_plan(raw)


@needs_c_compiler
def test_a_c_library_kernel_that_does_not_take_a_call_counts_its_fallback(tmp_path):
    """An image of symbolic batch is planned to become channels-last in sdc's C library
    (c_conv.channels_last_kernel), which takes images of TO_CHANNELS_LAST_MIN elements or more: a
    batch of one runs torch's copy instead, and the counters say so for that call alone."""
    from torch.export import Dim

    from sdc.runtime.c_conv import TO_CHANNELS_LAST_MIN

    torch.manual_seed(0)
    model = ConvNet().eval()
    exe = sdc.compile(model, (torch.randn(4, 3, 32, 32),), dynamic_shapes=({0: Dim("batch", min=1, max=8)},),
                      output=tmp_path / "conv.sdc")
    rank = json.loads((tmp_path / "conv.sdc" / "plan.json").read_text())["ranks"][0]
    (first,) = [s for s in _launches(rank) if s["kernel"]["ops"][0]["op"] == "layout_cast"]
    assert [op["runs"] for op in first["kernel"]["ops"]][:2] == ["c_conv", "c_conv"]
    assert 3 * 32 * 32 < TO_CHANNELS_LAST_MIN <= 4 * 3 * 32 * 32
    for batch in (4, 1, 4):
        x = torch.randn(batch, 3, 32, 32)
        (got,) = exe(x)
        with torch.no_grad():
            torch.testing.assert_close(got, model(x), rtol=1e-4, atol=1e-4)
    counted = exe.counters.to_json()["steps"][first["id"]]
    assert counted["fallbacks"] == 1
    ops = len(first["kernel"]["ops"])
    assert counted["ran"] == {"c_conv": 3 * ops - 1, "torch": 1}
