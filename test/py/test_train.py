"""sdc.compile_train against torch eager training: same init (a copy of the torch model), same data,
fp32, 20 steps; the loss curve and the final parameters must agree. Also: clipping by global norm,
a learning rate changed mid-run (no recompile), a checkpoint saved at step 10 and resumed in a fresh
process (steps 11-20 equal the uninterrupted run exactly), and the errors.

Models: an MLP with a cross-entropy loss; a CNN with training-mode batch norm (running statistics
are state), a residual block and pooling; an MLP with dropout (masks from sdc's counter-based RNG,
which the torch reference replays with `philox_uniform`); a pre-norm transformer block and a small
GPT-style decoder with causal attention and tied embeddings.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import sdc
import sdc.optim
from sdc.diagnostics import SdcError
from sdc.dialect.ops.random import philox_uniform
from sdc.runtime.state import check_state

STEPS = 20
RTOL, ATOL = 1e-4, 1e-5  # f32, 20 steps of a small MLP (sdc and torch sum in different orders)


def _mlp(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(10, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 5))


def _data(seed: int, steps: int = STEPS) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randn(8, 10, generator=gen), torch.randint(0, 5, (8,), generator=gen)) for _ in range(steps)]


def _torch_run(model: nn.Module, make_opt, data, *, clip: float | None = None, lrs=None) -> list[float]:
    return _torch_steps(model, make_opt(model.parameters()), data, clip=clip, lrs=lrs)


def _check_against_torch(step: sdc.train.TrainStep, model: nn.Module, sdc_losses, torch_losses) -> None:
    torch.testing.assert_close(torch.tensor(sdc_losses), torch.tensor(torch_losses), rtol=RTOL, atol=ATOL)
    mine = step.state_dict()
    assert set(mine) == {n for n, _ in model.named_parameters()}
    for name, p in model.named_parameters():
        torch.testing.assert_close(mine[name], p.detach(), rtol=RTOL, atol=ATOL, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("name, optimizer, make_opt, clip", [
    ("sgd-momentum", sdc.optim.SGD(lr=0.05, momentum=0.9, weight_decay=1e-3),
     lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-3), None),
    ("sgd-nesterov-clip", sdc.optim.SGD(lr=0.1, momentum=0.8, nesterov=True, clip_grad_norm=0.25),
     lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.8, nesterov=True), 0.25),
    ("adamw", sdc.optim.AdamW(lr=3e-3, betas=(0.85, 0.99), eps=1e-7, weight_decay=0.1),
     lambda ps: torch.optim.AdamW(ps, lr=3e-3, betas=(0.85, 0.99), eps=1e-7, weight_decay=0.1), None),
    ("adam-clip", sdc.optim.Adam(lr=1e-2, weight_decay=1e-2, clip_grad_norm=0.5),
     lambda ps: torch.optim.Adam(ps, lr=1e-2, weight_decay=1e-2), 0.5),
])
def test_matches_torch_eager(name, optimizer, make_opt, clip):
    model, data = _mlp(1), _data(2)
    reference = copy.deepcopy(model)
    step = sdc.compile_train(model, data[0], loss=F.cross_entropy, optimizer=optimizer)
    losses = [step(x, y) for x, y in data]
    want = _torch_run(reference, make_opt, data, clip=clip)
    _check_against_torch(step, reference, losses, want)
    assert step.step_count == STEPS
    # the model handed in is untouched: the state lives in the step
    torch.testing.assert_close(dict(model.named_parameters())["0.weight"], dict(_mlp(1).named_parameters())["0.weight"])
    if clip is not None:  # clipping must have been active, or the test proves nothing about it
        probe = copy.deepcopy(_mlp(1))
        F.cross_entropy(probe(data[0][0]), data[0][1]).backward()
        assert torch.nn.utils.clip_grad_norm_(probe.parameters(), float("inf")) > clip


def test_learning_rate_changes_without_recompiling():
    model, data = _mlp(3), _data(4)
    reference = copy.deepcopy(model)
    step = sdc.compile_train(model, data[0], loss=F.cross_entropy, optimizer=sdc.optim.AdamW(lr=1e-2))
    program = step.program.exe
    lrs = [1e-2] * 7 + [1e-3] * 7 + [3e-2] * 6
    losses = [step.step(x, y, lr=lr) if i >= 7 else step(x, y) for i, ((x, y), lr) in enumerate(zip(data, lrs))]
    assert step.program.exe is program
    want = _torch_run(reference, lambda ps: torch.optim.AdamW(ps, lr=1e-2), data, lrs=lrs)
    _check_against_torch(step, reference, losses, want)
    assert step.optimizer_state()["2.bias"]["exp_avg"].shape == (32,)


_RESUME = textwrap.dedent("""
    import sys, json, torch
    import sdc
    step = sdc.load_train(sys.argv[1])
    data = torch.load(sys.argv[2])
    losses = [step(x, y) for x, y in data]
    torch.save({"losses": losses, "state": step.state_dict(), "step": step.step_count}, sys.argv[3])
    print("mlir loaded:", any(m.startswith("torch_mlir") for m in sys.modules))
""")


def test_save_resume_in_a_fresh_process_is_bit_exact(tmp_path: Path):
    model, data = _mlp(5), _data(6)
    optimizer = sdc.optim.AdamW(lr=5e-3, weight_decay=0.05, clip_grad_norm=1.0)
    whole = sdc.compile_train(copy.deepcopy(model), data[0], loss=F.cross_entropy, optimizer=optimizer)
    losses = [whole(x, y) for x, y in data]
    first = sdc.compile_train(model, data[0], loss=F.cross_entropy, optimizer=optimizer)
    assert [first(x, y) for x, y in data[:10]] == losses[:10]
    ckpt = first.save(tmp_path / "ckpt")
    index = json.loads((ckpt / "checkpoint.json").read_text())
    assert index["step"] == 10 and set(index["files"]) == {"state.safetensors", "program.sdc/manifest.json"}
    first.save(tmp_path / "ckpt")  # replacing a checkpoint works
    torch.save(data[10:], tmp_path / "data.pt")
    script = tmp_path / "resume.py"
    script.write_text(_RESUME)
    run = subprocess.run([sys.executable, str(script), str(ckpt), str(tmp_path / "data.pt"), str(tmp_path / "out.pt")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "mlir loaded: False" in run.stdout  # resuming needs only the runtime
    out = torch.load(tmp_path / "out.pt")
    assert out["losses"] == losses[10:]
    assert out["step"] == STEPS
    final = whole.state_dict()
    for name, t in out["state"].items():
        assert torch.equal(t, final[name]), name


def test_checkpoint_errors(tmp_path: Path):
    model, data = _mlp(7), _data(8, steps=2)
    step = sdc.compile_train(model, data[0], loss=F.cross_entropy, optimizer=sdc.optim.SGD(lr=0.1))
    step(*data[0])
    ckpt = step.save(tmp_path / "ckpt")
    with pytest.raises(SdcError, match="has no checkpoint.json"):
        sdc.load_train(tmp_path)
    state = ckpt / "state.safetensors"
    state.write_bytes(state.read_bytes()[:-4] + b"\0\0\0\1")
    with pytest.raises(SdcError, match=r"state.safetensors does not match its SHA-256 in checkpoint.json"):
        sdc.load_train(ckpt)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.txt").write_text("mine")
    with pytest.raises(SdcError, match="exists and is not an sdc checkpoint"):
        step.save(tmp_path / "other")
    with pytest.raises(SdcError, match="missing input 'batch_1'"):
        step(data[0][0])


def test_steps_from_two_threads_each_start_from_the_last_ones_state():
    """Held inside the executor, a first step must keep a second thread's step from reading the state
    it has not replaced yet: both steps count, and the result is the sequential run's."""
    import threading

    model, data = _mlp(7), _data(8, 2)
    reference = copy.deepcopy(model)
    step = sdc.compile_train(model, data[0], loss=F.cross_entropy, optimizer=sdc.optim.SGD(lr=0.1, momentum=0.9))
    executor = step.program.exe._executor
    run, inside, release = executor.run, threading.Event(), threading.Event()

    def held_run(*args, **kwargs):
        if not inside.is_set():
            inside.set()
            assert release.wait(10)
        return run(*args, **kwargs)

    executor.run = held_run
    losses = {}
    first = threading.Thread(target=lambda: losses.setdefault(0, step(*data[0])))
    second = threading.Thread(target=lambda: losses.setdefault(1, step(*data[1])))
    first.start()
    assert inside.wait(10)
    second.start()
    second.join(0.3)  # without the lock, the second step reads the state now
    release.set()
    first.join(10)
    second.join(10)
    assert step.step_count == 2
    want = _torch_run(reference, lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9), data)
    _check_against_torch(step, reference, [losses[0], losses[1]], want)


def test_argument_errors():
    with pytest.raises(SdcError, match=r"lr must be a finite number >= 0, found -1"):
        sdc.optim.AdamW(lr=-1)
    with pytest.raises(SdcError, match="nesterov=True needs a momentum > 0"):
        sdc.optim.SGD(lr=0.1, nesterov=True)
    with pytest.raises(SdcError, match=r"betas\[1\] must be in \[0, 1\)"):
        sdc.optim.Adam(betas=(0.9, 1.0))
    with pytest.raises(SdcError, match="trains a torch.nn.Module"):
        sdc.compile_train(lambda x: x, (torch.ones(1), torch.ones(1)), loss=F.mse_loss, optimizer=sdc.optim.SGD())
    with pytest.raises(SdcError, match="optimizer must be an sdc.optim optimizer"):
        sdc.compile_train(_mlp(0), _data(0, 1)[0], loss=F.cross_entropy, optimizer=torch.optim.SGD)
    with pytest.raises(SdcError, match="unknown optimizer 'lamb'"):
        sdc.optim.from_options({"optimizer": "lamb"})


def test_state_table_is_checked():
    entry = {"inputs": [{"name": "w", "dtype": "f32", "shape": [2]}],
             "outputs": [{"name": "loss", "dtype": "f32", "shape": []}, {"name": "next.w", "dtype": "f32", "shape": [2]}]}

    def bad(message: str) -> SdcError:
        return SdcError(message)

    good = {"name": "w", "input": "w", "output": "next.w", "dtype": "f32", "shape": [2], "weight": "state/w"}
    assert [s.output for s in check_state({**entry, "state": [good]}, bad)] == ["next.w"]
    with pytest.raises(SdcError, match=r"names output 'loss2', which the entry does not have"):
        check_state({**entry, "state": [{**good, "output": "loss2"}]}, bad)
    with pytest.raises(SdcError, match=r"its output 'loss' is f32\[\]"):
        check_state({**entry, "state": [{**good, "output": "loss"}]}, bad)
    with pytest.raises(SdcError, match="must have string fields"):
        check_state({**entry, "state": [{"name": "w"}]}, bad)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_cuda_step_matches_torch_eager_on_cuda(target: str, tmp_path: Path):
    """The same plan on the GPU: state resident on cuda, 20 AdamW steps against torch eager on cuda
    (TF32 off on both sides), then a checkpoint resumed onto the GPU."""
    torch.backends.cuda.matmul.allow_tf32 = False
    model, data = _mlp(9), _data(10)
    reference = copy.deepcopy(model).cuda()
    step = sdc.compile_train(model, data[0], loss=F.cross_entropy, optimizer=sdc.optim.AdamW(lr=3e-3, clip_grad_norm=1.0),
                             target=target, device="cuda")
    assert all(t.device.type == "cuda" for t in step.program.state.values())
    losses = [step(x.cuda(), y.cuda()) for x, y in data]
    want = _torch_run(reference, lambda ps: torch.optim.AdamW(ps, lr=3e-3), [(x.cuda(), y.cuda()) for x, y in data],
                      clip=1.0)
    _check_against_torch(step, reference, losses, want)
    resumed = sdc.load_train(step.save(tmp_path / "ckpt"), device="cuda")
    assert resumed.step_count == STEPS and resumed(data[0][0].cuda(), data[0][1].cuda()) == step(*(t.cuda() for t in data[0]))


# ---------------------------------------------------------------- batch norm in training mode


class _Residual(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c, track_running_stats=False)  # batch statistics only
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c, momentum=0.3)

    def forward(self, x):
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


class _BatchNormCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.block = _Residual(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.stem(x))), 2)
        return self.fc(F.adaptive_avg_pool2d(self.block(x), 1).flatten(1))


def _torch_steps(model: nn.Module, opt, data, loss=F.cross_entropy, clip: float | None = None,
                 lrs=None) -> list[float]:
    """torch eager training: per batch (inputs..., target) one step of `opt` (learning rate lrs[i] if given)."""
    losses = []
    for i, batch in enumerate(data):
        if lrs is not None:
            for group in opt.param_groups:
                group["lr"] = lrs[i]
        opt.zero_grad()
        value = loss(model(*batch[:-1]), batch[-1])
        value.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        losses.append(value.item())
    return losses


def test_cnn_with_training_mode_batch_norm_matches_torch_eager(tmp_path: Path):
    """Conv + batch norm (batch statistics, gradient through them) + a residual block + pooling, 20
    SGD-momentum steps: the losses, the final parameters and the running statistics (torch's
    momentum, unbiased variance, num_batches_tracked) match torch eager; the statistics are state,
    saved and resumed with the rest."""
    torch.manual_seed(20)
    model = _BatchNormCNN().train()
    reference = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(21)
    data = [(torch.randn(4, 3, 8, 8, generator=gen), torch.randint(0, 5, (4,), generator=gen)) for _ in range(STEPS)]
    step = sdc.compile_train(model, data[0], loss=F.cross_entropy,
                             optimizer=sdc.optim.SGD(lr=0.05, momentum=0.9, weight_decay=1e-4))
    first = [step(x, y) for x, y in data[:10]]
    resumed = sdc.load_train(step.save(tmp_path / "ckpt"))
    losses = first + [resumed(x, y) for x, y in data[10:]]
    assert [step(x, y) for x, y in data[10:]] == losses[10:]  # the resumed run is the same run
    want = _torch_steps(reference, torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4),
                        data)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(want), rtol=RTOL, atol=ATOL)
    mine, theirs = resumed.state_dict(), reference.state_dict()
    assert set(mine) == set(theirs)  # parameters and buffers, by torch's names
    for name, t in theirs.items():
        torch.testing.assert_close(mine[name], t, rtol=RTOL, atol=ATOL, msg=lambda m: f"{name}: {m}")
    assert int(mine["bn.num_batches_tracked"]) == STEPS and mine["bn.num_batches_tracked"].dtype == torch.int64
    assert "bn.running_var" not in resumed.params  # statistics are state, never trained
    before = _BatchNormCNN().state_dict()  # the running statistics moved from their initial values
    assert not torch.allclose(mine["block.bn2.running_var"], before["block.bn2.running_var"])


# ---------------------------------------------------------------- dropout (counter-based RNG)

DROP = 0.25


class _DropoutMLP(nn.Module):
    """Dropout between two layers; with `mask` set, the mask is applied by hand (torch's reference)."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(10, 32), nn.Linear(32, 5)
        self.mask: torch.Tensor | None = None

    def forward(self, x):
        h = F.gelu(self.fc1(x))
        h = F.dropout(h, DROP, self.training) if self.mask is None else h * self.mask * (1 / (1 - DROP))
        return self.fc2(h)


def test_dropout_is_deterministic_per_seed_and_matches_torch_with_sdc_masks(tmp_path: Path):
    """Dropout masks come from sdc.random_uniform at (seed, step * counters per step + element):
    the same seed gives the same losses, another seed (no recompile) other losses, and torch eager
    with the masks replayed from `philox_uniform` trains the same 20 AdamW steps."""
    torch.manual_seed(30)
    model = _DropoutMLP().train()
    reference = copy.deepcopy(model)
    data = _data(31)
    step = sdc.compile_train(model, data[0], loss=F.cross_entropy, optimizer=sdc.optim.AdamW(lr=1e-2), seed=7)
    assert step.rng == {"seed": 7, "stride": 8 * 32} and [t.name for t in step.inputs] == ["batch_0", "batch_1"]
    start = step.save(tmp_path / "start")
    losses = [step(x, y) for x, y in data]
    opt = torch.optim.AdamW(reference.parameters(), lr=1e-2)
    want = []
    for i, (x, y) in enumerate(data):
        keep = philox_uniform(7, i * 8 * 32, 8 * 32).reshape(8, 32) >= DROP
        reference.mask = torch.from_numpy(keep.astype(np.float32))
        want += _torch_steps(reference, opt, [(x, y)])
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(want), rtol=RTOL, atol=ATOL)
    for name, p in reference.named_parameters():
        torch.testing.assert_close(step.state_dict()[name], p.detach(), rtol=RTOL, atol=ATOL)
    again = sdc.load_train(start)
    assert [again(x, y) for x, y in data[:5]] == losses[:5]  # same seed, same steps: same losses
    other = sdc.load_train(start)
    program = other.program.exe
    others = [other.step(x, y, seed=8) for x, y in data[:5]]
    assert all(a != b for a, b in zip(others, losses[:5]))
    assert other.program.exe is program  # a new seed is a new input value, not a new program
    with pytest.raises(SdcError, match="nothing to train"):
        frozen = _DropoutMLP()
        frozen.requires_grad_(False)
        sdc.compile_train(frozen, data[0], loss=F.cross_entropy, optimizer=sdc.optim.SGD())


def test_rng_input_names_agree():
    from sdc.frontend.torch.importer import RNG_INPUTS

    assert sdc.train.RNG_INPUTS == RNG_INPUTS


def test_model_prefix_agrees_with_the_torch_wrapper():
    from sdc.frontend.torch.training import MODEL_PREFIX

    assert sdc.train.MODEL_PREFIX == MODEL_PREFIX
    assert sdc.train.step._torch_name(MODEL_PREFIX + "0.weight") == "0.weight"


# ---------------------------------------------------------------- transformers


class _Block(nn.Module):
    """Pre-norm transformer block: causal multi-head self-attention and a GELU MLP, both residual."""

    def __init__(self, d: int, heads: int, qkv_bias: bool = True):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=qkv_bias), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(d, 2))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class _GPT(nn.Module):
    """A GPT-style decoder: token and position embeddings, two blocks, a final norm and a head tied to
    the token embedding."""

    def __init__(self, vocab: int = 32, d: int = 16, heads: int = 2, layers: int = 2, context: int = 8):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(context, d)
        nn.init.normal_(self.tok.weight, std=0.2)
        nn.init.normal_(self.pos.weight, std=0.2)
        # no q/k/v bias: the key bias has no effect on softmax, so its gradient is rounding noise
        # that Adam scales up to full steps, which two correct implementations do not agree on
        self.blocks = nn.ModuleList(_Block(d, heads, qkv_bias=False) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def _lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def _mse(y, target):
    return F.mse_loss(y, target)


@pytest.mark.parametrize("name", ["block-adamw", "gpt-adamw-clip"])
def test_transformers_match_torch_eager(name: str):
    """A transformer block (regression to a target) and a GPT-style decoder (next-token cross-entropy,
    tied embeddings, global-norm clipping), 20 AdamW steps against torch eager."""
    torch.manual_seed(40)
    gen = torch.Generator().manual_seed(41)
    if name == "block-adamw":
        model, loss, clip = _Block(16, 2, qkv_bias=False), _mse, None
        data = [(torch.randn(2, 8, 16, generator=gen), torch.randn(2, 8, 16, generator=gen)) for _ in range(STEPS)]
    else:
        model, loss, clip = _GPT(), _lm_loss, 0.5
        data = [(torch.randint(0, 32, (2, 8), generator=gen), torch.randint(0, 32, (2, 8), generator=gen))
                for _ in range(STEPS)]
    reference = copy.deepcopy(model)
    step = sdc.compile_train(model, data[0], loss=loss,
                             optimizer=sdc.optim.AdamW(lr=3e-3, weight_decay=0.1, clip_grad_norm=clip))
    losses = [step(x, y) for x, y in data]
    want = _torch_steps(reference, torch.optim.AdamW(reference.parameters(), lr=3e-3, weight_decay=0.1), data,
                        loss=loss, clip=clip)
    _check_against_torch(step, reference, losses, want)
    if clip is not None:  # clipping was active
        probe = copy.deepcopy(model)
        _lm_loss(probe(data[0][0]), data[0][1]).backward()
        assert torch.nn.utils.clip_grad_norm_(probe.parameters(), float("inf")) > clip
