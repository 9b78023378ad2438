"""Mixed-precision training against torch eager: bf16 against torch.autocast, fp16 with dynamic loss
scaling against torch.autocast + torch.amp.GradScaler (the same init scale and growth interval), 10
steps of an MLP with AdamW; the master weights and optimizer state stay f32. And a forced overflow:
the step is skipped (parameters, moments and the step counter unchanged), the scale halves.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import sdc
import sdc.optim
from sdc.diagnostics import SdcError

STEPS = 10
LR = 3e-3
# Low-precision compute, in different op orders and roundings (sdc rounds a matmul and its bias add
# separately, torch's addmm once), over 10 AdamW steps: the loss within a few bf16/f16 ulps of 2.3,
# the parameters within a few learning-rate steps (Adam's update is lr * sign-like per element).
TOLERANCE = {"bf16": dict(rtol=2e-3, atol=2e-3), "fp16": dict(rtol=5e-4, atol=5e-4)}
PARAM_ATOL = {"bf16": 4 * LR, "fp16": 4 * LR}
TORCH_DTYPE = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _mlp() -> nn.Module:
    torch.manual_seed(5)
    return nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 10))


def _data(steps: int = STEPS) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(6)
    return [(torch.randn(64, 16, generator=gen), torch.randint(0, 10, (64,), generator=gen)) for _ in range(steps)]


def _torch_run(model: nn.Module, data, precision: str, scaler=None) -> list[float]:
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    losses = []
    for x, y in data:
        opt.zero_grad()
        with torch.autocast("cpu", dtype=TORCH_DTYPE[precision]):
            loss = F.cross_entropy(model(x), y)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_matches_torch_autocast(precision):
    model, data = _mlp(), _data()
    scaler_options = dict(init_scale=2.0 ** 12, growth_interval=3)  # grows during the run
    optimizer = sdc.optim.AdamW(lr=LR, loss_scaler=sdc.optim.LossScaler(**scaler_options) if precision == "fp16"
                                else None)
    step = sdc.compile_train(copy.deepcopy(model), data[0], loss=F.cross_entropy, optimizer=optimizer,
                             precision=precision, target="cpu")
    losses = [step(x, y) for x, y in data]
    reference = copy.deepcopy(model)
    scaler = torch.amp.GradScaler("cpu", **scaler_options) if precision == "fp16" else None
    expected = _torch_run(reference, data, precision, scaler)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(expected), **TOLERANCE[precision])
    for name, p in reference.named_parameters():
        mine = step.state_dict()[name]
        assert mine.dtype == torch.float32  # fp32 master weights
        torch.testing.assert_close(mine, p.detach(), rtol=0, atol=PARAM_ATOL[precision], msg=lambda m: f"{name}: {m}")
    assert all(t.dtype == torch.float32 for t in step.program.state.values())
    low = {"bf16": "bf16", "fp16": "f16"}[precision]
    program = (step.program.exe.path / "program.mlir").read_text()
    assert f"x{low}>" in program  # the compute is low
    info = step.info()
    if precision == "fp16":
        assert info["skipped_steps"] == 0 and info["loss_scale"] == scaler.get_scale() == 2.0 ** 15
    else:
        assert info["loss_scale"] is None and "loss_scale" not in step.program.state


def test_overflow_skips_the_step_and_halves_the_scale():
    model, data = _mlp(), _data(3)
    # 2^40 times the loss's cotangent overflows f16 (max 65504) in the backward; 2^30 does not
    # overflow the scaled f32 loss, so only the f16 gradients go inf.
    scaler = sdc.optim.LossScaler(init_scale=2.0 ** 40, growth_interval=1000)
    step = sdc.compile_train(copy.deepcopy(model), data[0], loss=F.cross_entropy,
                             optimizer=sdc.optim.Adam(lr=LR, loss_scaler=scaler), precision="fp16", target="cpu")
    before = {k: v.clone() for k, v in step.program.state.items()}
    loss = step(*data[0])
    assert 2.0 < loss < 2.6  # the loss itself is fine: only the gradients overflowed
    info = step.info()
    assert info["skipped_steps"] == step.skipped_steps == 1 and info["loss_scale"] == 2.0 ** 39
    assert info["steps"] == 0  # the optimizer's counter did not move
    for name, t in before.items():
        if not name.startswith(("loss_scale", "skipped_steps")):
            assert torch.equal(step.program.state[name], t), name  # parameters and moments untouched
    for x, y in data[1:]:
        step(x, y)
    assert step.skipped_steps == 3 and step.info()["loss_scale"] == 2.0 ** 37


def test_errors():
    with pytest.raises(SdcError, match="growth_interval must be an integer >= 1, found 0"):
        sdc.optim.LossScaler(growth_interval=0)
    with pytest.raises(SdcError, match="backoff_factor must be < 1"):
        sdc.optim.LossScaler(backoff_factor=2.0)
    with pytest.raises(SdcError, match="loss_scaler must be an sdc.optim.LossScaler, found float"):
        sdc.optim.SGD(loss_scaler=1024.0)
    assert sdc.optim.from_options(sdc.optim.AdamW(loss_scaler=sdc.optim.LossScaler()).options()).loss_scaler == \
        sdc.optim.LossScaler()



def test_pass_errors():
    from sdc.compiler import run_pipeline
    from sdc.frontend import import_model
    from sdc.train import _WithLoss

    def module():
        return import_model(_WithLoss(nn.Linear(4, 3), F.cross_entropy),
                            example_args=(torch.randn(5, 4), torch.randint(0, 3, (5,))))[0]

    with pytest.raises(SdcError, match=r"sdc-optimizer-step with loss-scaling runs after sdc-loss-scale and "
                                       r"sdc-autodiff\{results=loss.scaled\}"):
        run_pipeline(module(), ["sdc-autodiff", "sdc-optimizer-step{loss-scaling=true}"])
    with pytest.raises(SdcError, match="sdc-loss-scale: the entry function already has an input named 'loss_scale'"):
        run_pipeline(module(), ["sdc-loss-scale", "sdc-loss-scale"])
