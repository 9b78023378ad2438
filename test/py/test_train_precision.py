"""Mixed-precision training against torch eager: bf16 against torch.autocast, fp16 with dynamic loss
scaling against torch.autocast + torch.amp.GradScaler (the same init scale and growth interval), 10
steps of an MLP with AdamW; the master weights and optimizer state stay f32. A CNN with a
training-mode batch norm the same way (SGD-momentum): losses, parameters and running statistics,
which stay f32 state. And a forced overflow: the step is skipped (parameters, moments and the step
counter unchanged), the scale halves.
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


def _torch_run(model: nn.Module, data, precision: str, scaler=None, make_opt=None) -> list[float]:
    """torch autocast training (with `scaler`'s loss scaling if given); AdamW(lr=LR) unless `make_opt`."""
    opt = (make_opt or (lambda ps: torch.optim.AdamW(ps, lr=LR)))(model.parameters())
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


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_batch_norm_training_matches_torch_autocast(precision):
    """Conv -> training-mode BatchNorm -> ReLU -> Linear, 5 SGD-momentum steps. torch.autocast runs the
    conv low and the batch norm on its low input with f32 statistics, as sdc-mixed-precision does;
    the running statistics are f32 state, updated every step (bf16 rounding of the batch variance
    gives them a few bf16 ulps of difference)."""
    torch.manual_seed(int(torch.randint(1 << 30, ())))
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(),
                          nn.Linear(8 * 6 * 6, 5))
    gen = torch.Generator().manual_seed(int(torch.randint(1 << 30, ())))
    data = [(torch.randn(16, 3, 6, 6, generator=gen), torch.randint(0, 5, (16,), generator=gen)) for _ in range(5)]
    scaler_options = dict(init_scale=2.0 ** 12, growth_interval=2)
    optimizer = sdc.optim.SGD(lr=0.05, momentum=0.9, loss_scaler=sdc.optim.LossScaler(**scaler_options)
                              if precision == "fp16" else None)
    step = sdc.compile_train(copy.deepcopy(model), data[0], loss=F.cross_entropy, optimizer=optimizer,
                             precision=precision, target="cpu")
    losses = [step(x, y) for x, y in data]
    reference = copy.deepcopy(model)
    scaler = torch.amp.GradScaler("cpu", **scaler_options) if precision == "fp16" else None
    expected = _torch_run(reference, data, precision, scaler,
                          make_opt=lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9))
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(expected), **TOLERANCE[precision])
    mine = step.state_dict()
    for name, want in reference.state_dict().items():
        assert mine[name].dtype == want.dtype, name  # f32 parameters and statistics, the i64 counter
        tol = dict(rtol=2e-2, atol=2e-2) if precision == "bf16" else dict(rtol=5e-3, atol=5e-3)
        torch.testing.assert_close(mine[name], want, **tol, msg=lambda m: f"{name}: {m}")
    assert int(mine["1.num_batches_tracked"]) == 5
    assert not torch.equal(mine["1.running_var"], model.state_dict()["1.running_var"])
    assert all(t.dtype == torch.float32 for n, t in step.program.state.items() if "num_batches" not in n)
    low = {"bf16": "bf16", "fp16": "f16"}[precision]
    assert f"x{low}>" in (step.program.exe.path / "program.mlir").read_text()
    if precision == "fp16":
        assert step.info()["loss_scale"] == scaler.get_scale() and step.skipped_steps == 0


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
    from sdc.frontend.torch.training import with_loss

    def module():
        return import_model(with_loss(nn.Linear(4, 3), F.cross_entropy),
                            example_args=(torch.randn(5, 4), torch.randint(0, 3, (5,))))[0]

    with pytest.raises(SdcError, match=r"sdc-optimizer-step with loss-scaling runs after sdc-loss-scale and "
                                       r"sdc-autodiff\{results=loss.scaled\}"):
        run_pipeline(module(), ["sdc-autodiff", "sdc-optimizer-step{loss-scaling=true}"])
    with pytest.raises(SdcError, match="sdc-loss-scale: the entry function already has an input named 'loss_scale'"):
        run_pipeline(module(), ["sdc-loss-scale", "sdc-loss-scale"])
