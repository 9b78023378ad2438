"""Training steps of JAX loss functions and ONNX models (sdc/train_frontends.py), against plain
jax training (jax.grad and a hand-written update) and torch eager training of the same weights."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import sdc
from sdc.cli.main import main
from sdc.diagnostics import SdcError

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

STEPS = 10
TOL = {"rtol": 2e-4, "atol": 2e-5}  # f32 over 10 steps: summation order differs


def normal(rng, *shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------- JAX


def mlp_loss(params, x, y):
    """Softmax cross-entropy of a two-layer MLP; y holds class indices."""
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    logits = h @ params["w2"] + params["b2"]
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.sum(logp * jax.nn.one_hot(y, logits.shape[-1]), axis=-1))


def jax_params(rng) -> dict:
    return {"w1": normal(rng, 4, 8) * 0.5, "b1": normal(rng, 8) * 0.1, "w2": normal(rng, 8, 3) * 0.5,
            "b2": normal(rng, 3) * 0.1}


def batches(rng, n: int = STEPS) -> list:
    return [(normal(rng, 6, 4), rng.integers(0, 3, 6).astype(np.int32)) for _ in range(n)]


def sgd_momentum(lr: float, momentum: float, weight_decay: float):
    """torch.optim.SGD's update, in jax: buf = momentum*buf + (g + wd*p); p -= lr*buf."""
    def update(p, g, state, t):
        d = g + weight_decay * p
        buf = d if state is None else momentum * state + d
        return p - lr * buf, buf
    return update


def adamw(lr: float, weight_decay: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8):
    """torch.optim.AdamW's update, in jax (decoupled decay first, then bias-corrected moments)."""
    def update(p, g, state, t):
        m, v = state if state is not None else (jnp.zeros_like(p), jnp.zeros_like(p))
        p = p * (1 - lr * weight_decay)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        denom = jnp.sqrt(v) / jnp.sqrt(1 - b2 ** t) + eps
        return p - (lr / (1 - b1 ** t)) * m / denom, (m, v)
    return update


def jax_training(params, data, update) -> tuple[list[float], dict]:
    grad_fn = jax.value_and_grad(mlp_loss)
    state = {k: None for k in params}
    losses = []
    for t, (x, y) in enumerate(data, 1):
        loss, grads = grad_fn(params, x, y)
        losses.append(float(loss))
        new = {}
        for k in params:
            new[k], state[k] = update(params[k], grads[k], state[k], t)
        params = new
    return losses, params


@pytest.mark.parametrize("optimizer, update", [
    (sdc.optim.SGD(lr=0.2, momentum=0.9, weight_decay=1e-3), sgd_momentum(0.2, 0.9, 1e-3)),
    (sdc.optim.AdamW(lr=1e-2, weight_decay=0.05), adamw(1e-2, 0.05)),
], ids=["sgd-momentum", "adamw"])
def test_jax_loss_function_trains_like_plain_jax(optimizer, update):
    rng = np.random.default_rng()
    params, data = jax_params(rng), batches(rng)
    step = sdc.compile_train(mlp_loss, (params, *data[0]), optimizer=optimizer)
    assert [t.name for t in step.inputs] == ["x", "y"]
    got = [step(x, y) for x, y in data]
    want, final = jax_training(params, data, update)
    np.testing.assert_allclose(got, want, **TOL)
    trained = step.params()
    assert set(trained) == set(params)
    for k in params:
        np.testing.assert_allclose(trained[k], final[k], **TOL, err_msg=k)
    assert step.step_count == STEPS


def test_jax_training_errors():
    rng = np.random.default_rng()
    params, (x, y) = jax_params(rng), batches(rng, 1)[0]
    opt = sdc.optim.SGD(lr=0.1)
    with pytest.raises(SdcError, match=r"must be \(params, \*batch\)"):
        sdc.compile_train(mlp_loss, (params,), optimizer=opt)
    with pytest.raises(SdcError, match="a JAX loss function is its own loss"):
        sdc.compile_train(mlp_loss, (params, x, y), loss=F.cross_entropy, optimizer=opt)
    with pytest.raises(SdcError, match=r"must return one scalar float, the loss; it returns f32\[6, 3\]"):
        sdc.compile_train(lambda p, x: x @ p["w"], ({"w": normal(rng, 4, 3)}, x), optimizer=opt)
    with pytest.raises(SdcError, match="optimizer must be an sdc.optim optimizer"):
        sdc.compile_train(mlp_loss, (params, x, y), optimizer=object())
    with pytest.raises(SdcError, match="trains a torch.nn.Module, a JAX loss function or an ONNX model, found int"):
        sdc.compile_train(3, (x, y), optimizer=opt)


# ---------------------------------------------------------------- ONNX


class TorchMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def onnx_mlp(model: TorchMLP) -> onnx.ModelProto:
    """The torch MLP written as ONNX by hand (Gemm with transB, as exporters write Linear), so the
    initializers are exactly the torch weights."""
    weights = {f"{n}": numpy_helper.from_array(p.detach().numpy().copy(), n) for n, p in model.named_parameters()}
    nodes = [helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], transB=1, name="fc1"),
             helper.make_node("Tanh", ["h"], ["t"], name="tanh"),
             helper.make_node("Gemm", ["t", "fc2.weight", "fc2.bias"], ["logits"], transB=1, name="fc2")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 3])],
                              list(weights.values()))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def torch_training(model, data, loss_fn, make_opt) -> list[float]:
    opt = make_opt(model.parameters())
    losses = []
    for x, y in data:
        opt.zero_grad()
        loss = loss_fn(model(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("loss", ["cross_entropy", "mse"])
def test_onnx_model_trains_like_torch_eager(loss):
    torch.manual_seed(np.random.default_rng().integers(1 << 30))
    rng = np.random.default_rng()
    model = TorchMLP()
    proto = onnx_mlp(model)
    if loss == "cross_entropy":
        data = [(normal(rng, 6, 4), rng.integers(0, 3, 6).astype(np.int64)) for _ in range(STEPS)]
        loss_fn, opt = F.cross_entropy, sdc.optim.AdamW(lr=1e-2, weight_decay=0.01)
        make_opt = lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.01)  # noqa: E731
    else:
        data = [(normal(rng, 6, 4), normal(rng, 6, 3)) for _ in range(STEPS)]
        loss_fn, opt = F.mse_loss, sdc.optim.SGD(lr=0.1, momentum=0.9)
        make_opt = lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)  # noqa: E731
    step = sdc.compile_train(proto, data[0], loss=loss, optimizer=opt)
    assert [t.name for t in step.inputs] == ["x", "target"]
    got = [step(x, y) for x, y in data]
    want = torch_training(model, data, loss_fn, make_opt)
    np.testing.assert_allclose(got, want, **TOL)
    trained = step.state_dict()
    assert set(trained) == {n for n, _ in model.named_parameters()}
    for n, p in model.named_parameters():
        torch.testing.assert_close(trained[n], p.detach(), rtol=TOL["rtol"], atol=TOL["atol"], msg=n)


def test_onnx_training_errors(tmp_path):
    model = onnx_mlp(TorchMLP())
    opt = sdc.optim.SGD(lr=0.1)
    x, y = np.ones((2, 4), np.float32), np.zeros(2, np.int64)
    with pytest.raises(SdcError, match="loss= must be one of cross_entropy, mse, found 'hinge'"):
        sdc.compile_train(model, (x, y), loss="hinge", optimizer=opt)
    with pytest.raises(SdcError, match=r"example_batch must be \(\*inputs, target\): '<mlp>' has 1 input \(x\)"):
        sdc.compile_train(model, (x,), loss="mse", optimizer=opt)
    with pytest.raises(SdcError, match="training needs static shapes"):
        sdc.compile_train(model, None, loss="mse", optimizer=opt)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x01\x02garbage")
    with pytest.raises(SdcError, match="cannot read '.*bad.onnx' as an ONNX model"):
        sdc.compile_train(bad, (x, y), loss="mse", optimizer=opt)


# ---------------------------------------------------------------- the command line


def test_cli_compiles_an_onnx_training_step_and_runs_steps(tmp_path, capsys):
    rng = np.random.default_rng()
    model = TorchMLP()
    path = tmp_path / "mlp.onnx"
    onnx.save(onnx_mlp(model), str(path))
    out = tmp_path / "step.sdc"
    assert main(["compile", str(path), "--train", "--loss", "cross_entropy", "--optimizer", "adamw", "--lr", "1e-2",
                 "--input-shape", "x=6,4", "-o", str(out)]) == 0
    assert "training step" in capsys.readouterr().out
    data = [(normal(rng, 6, 4), rng.integers(0, 3, 6).astype(np.int64)) for _ in range(3)]
    for i, (x, y) in enumerate(data):
        np.save(tmp_path / f"x{i}.npy", x)
        np.save(tmp_path / f"y{i}.npy", y)
        assert main(["train", str(out), "--input", f"x={tmp_path / f'x{i}.npy'}",
                     "--input", f"target={tmp_path / f'y{i}.npy'}"]) == 0
    printed = capsys.readouterr().out
    want = torch_training(model, data, F.cross_entropy, lambda ps: torch.optim.AdamW(ps, lr=1e-2))
    got = [float(line.split("loss ")[1].split()[0]) for line in printed.splitlines() if line.startswith("step ")]
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert sdc.load_train(out).step_count == 3  # each run saved the checkpoint back


def test_cli_training_errors(tmp_path, capsys):
    path = tmp_path / "mlp.onnx"
    onnx.save(onnx_mlp(TorchMLP()), str(path))
    assert main(["compile", str(path), "--loss", "mse"]) == 2  # training flags without --train
    assert "--loss, --optimizer and --lr need --train" in capsys.readouterr().err
    assert main(["compile", str(path), "--train", "--loss", "mse", "--optimizer", "lamb"]) == 2
    assert "--optimizer must be one of sgd, adam, adamw" in capsys.readouterr().err
    assert main(["compile", str(path), "--train", "--optimizer", "sgd"]) == 2
    assert "--train needs --loss" in capsys.readouterr().err
    assert main(["train", str(tmp_path / "nothing")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: checkpoint ") and err.count("\n") == 1


def test_onnx_named_batch_dim_is_bound_to_one_size_or_one_error(tmp_path, capsys):
    """The MLP's batch dim is the named dim N: `N=6` (`--input-shape N=6`) fixes the step's batch, which
    then trains as torch eager does (another batch size is the runtime's shape error); a range or no
    binding is one error saying what to give (autodiff needs static shapes: one artifact per size)."""
    rng = np.random.default_rng()
    model = TorchMLP()
    proto = onnx_mlp(model)
    step = sdc.compile_train(proto, None, loss="mse", optimizer=sdc.optim.SGD(lr=0.1), input_shapes={"N": 6})
    assert [t.shape for t in step.inputs] == [(6, 4), (6, 3)]
    data = [(normal(rng, 6, 4), normal(rng, 6, 3)) for _ in range(3)]
    got = [step(x, y) for x, y in data]
    np.testing.assert_allclose(got, torch_training(model, data, F.mse_loss, lambda ps: torch.optim.SGD(ps, lr=0.1)),
                               **TOL)
    with pytest.raises(SdcError, match=r"input 'x' has shape \[3, 4\], expected \[6, 4\]"):
        step(normal(rng, 3, 4), normal(rng, 3, 3))
    message = ("training needs static shapes: the model's output is f32[N, 3]; a step is compiled for one batch "
               "size: give --input-shape N=SIZE (or example_batch)")
    with pytest.raises(SdcError, match=re.escape(message)):
        sdc.compile_train(proto, None, loss="mse", optimizer=sdc.optim.SGD(lr=0.1), input_shapes={"N": "1..64"})
    path = tmp_path / "mlp.onnx"
    onnx.save(proto, str(path))
    assert main(["compile", str(path), "--train", "--loss", "mse", "--input-shape", "N=1..64",
                 "-o", str(tmp_path / "step.sdc")]) == 1
    assert capsys.readouterr().err == f"error: {message}\n"


def _compiled_options(out) -> dict:
    """The compile options a training checkpoint's program was built with (its manifest's)."""
    import json

    return json.loads((out / "program.sdc" / "manifest.json").read_text())["compile_options"]


def onnx_silu_mlp(layers: int = 4, width: int = 64) -> onnx.ModelProto:
    """Gemm -> x * sigmoid(x), `layers` deep: each layer keeps two activations for the backward (the
    Gemm's input and the sigmoid), so a memory budget has something to recompute."""
    rng = np.random.default_rng()
    weights, nodes, h = [], [], "x"
    for i in range(layers):
        fan_in = 4 if i == 0 else width
        weights += [numpy_helper.from_array(normal(rng, width, fan_in) / np.float32(fan_in ** 0.5), f"w{i}"),
                    numpy_helper.from_array(normal(rng, width) * np.float32(0.1), f"b{i}")]
        nodes += [helper.make_node("Gemm", [h, f"w{i}", f"b{i}"], [f"g{i}"], transB=1, name=f"fc{i}"),
                  helper.make_node("Sigmoid", [f"g{i}"], [f"s{i}"], name=f"sigmoid{i}"),
                  helper.make_node("Mul", [f"g{i}", f"s{i}"], [f"h{i}"], name=f"silu{i}")]
        h = f"h{i}"
    weights += [numpy_helper.from_array(normal(rng, 3, width) / np.float32(width ** 0.5), "w_out")]
    nodes.append(helper.make_node("Gemm", [h, "w_out"], ["y"], transB=1, name="out"))
    graph = helper.make_graph(nodes, "silu_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_cli_memory_budget_and_precision_reach_the_step(tmp_path, capsys):
    """--memory-budget and --precision are compile_train's memory_budget= and precision=: the checkpoint's
    program records them, and the budget bounds the planned peak the command prints."""
    path = tmp_path / "mlp.onnx"
    onnx.save(onnx_silu_mlp(), str(path))
    free, fitted, half = tmp_path / "free.sdc", tmp_path / "fitted.sdc", tmp_path / "half.sdc"
    assert main(["compile", str(path), "--train", "--loss", "mse", "--input-shape", "x=256,4", "-o", str(free)]) == 0
    free_peak = int(capsys.readouterr().out.split("planned peak ")[1].split()[0])
    budget = free_peak * 7 // 8  # the recomputation of this model reaches about 3/4 of the free peak
    assert main(["compile", str(path), "--train", "--loss", "mse", "--input-shape", "x=256,4",
                 "--memory-budget", str(budget), "-o", str(fitted)]) == 0
    peak = int(capsys.readouterr().out.split("planned peak ")[1].split()[0])
    assert peak <= budget < free_peak
    assert _compiled_options(fitted)["memory_budget"] == budget and _compiled_options(free)["memory_budget"] is None
    assert main(["compile", str(path), "--train", "--loss", "mse", "--input-shape", "x=256,4", "--precision", "fp16",
                 "--memory-budget", "1M", "-o", str(half)]) == 0
    assert "precision f16" in capsys.readouterr().out
    assert _compiled_options(half)["precision"] == "f16" and _compiled_options(half)["memory_budget"] == 1 << 20
    x, y = normal(np.random.default_rng(), 256, 4), normal(np.random.default_rng(), 256, 3)
    step = sdc.load_train(half)
    assert np.isfinite(step(x, y)) and step.info()["loss_scale"] is not None  # f16 trains with loss scaling


def test_cli_memory_budget_and_precision_errors(tmp_path, capsys):
    path = tmp_path / "mlp.onnx"
    onnx.save(onnx_mlp(TorchMLP()), str(path))
    train = ["compile", str(path), "--train", "--loss", "mse", "--input-shape", "x=6,4", "-o", str(tmp_path / "s")]
    assert main(["compile", str(path), "--memory-budget", "1M"]) == 2
    assert "error: --memory-budget needs --train" in capsys.readouterr().err
    assert main([*train, "--memory-budget", "lots"]) == 2
    assert "error: --memory-budget expects a number of bytes (an integer, or with K, M or G), found 'lots'" in \
        capsys.readouterr().err
    for argv, message in (
            (["--memory-budget", "0"], "error: memory_budget must be a positive number of bytes, found 0\n"),
            (["--memory-budget", "100"], "error: sdc-recompute: memory budget 100 B (100 bytes) is below what "
                                         "recomputation reaches: the lowest planned peak is "),
            (["--precision", "int4"], "error: unknown precision 'int4' (precisions: ")):
        assert main([*train, *argv]) == 1, argv
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
