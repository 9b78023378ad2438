"""The models the distributed tests compile: an MLP, a transformer block and a small CNN.

Each is a torch module exported to ONNX with `torch.onnx.export(..., dynamo=False)` and a dynamic
batch; `export(name, directory)` writes `<name>.onnx` and returns its path and a function making
random inputs for a batch size. Weights are random with a fixed seed; inputs come from the caller's
generator, so each test draws fresh ones.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self, d_in=32, hidden=64, d_out=16):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_in, hidden), nn.Linear(hidden, d_out)

    def forward(self, x):
        return self.fc2(nn.functional.gelu(self.fc1(x)))


class TransformerBlock(nn.Module):
    """Pre-norm attention + MLP with separate q/k/v projections (Megatron splits them by heads)."""

    def __init__(self, d=32, heads=4, ff=64):
        super().__init__()
        self.h = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x):
        b, s, d = x.shape
        h = self.ln1(x)
        q = self.q(h).reshape(b, s, self.h, -1).transpose(1, 2)
        k = self.k(h).reshape(b, s, self.h, -1).transpose(1, 2)
        v = self.v(h).reshape(b, s, self.h, -1).transpose(1, 2)
        att = ((q @ k.transpose(-1, -2)) / math.sqrt(d // self.h)).softmax(-1)
        x = x + self.o((att @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.ff2(nn.functional.relu(self.ff1(self.ln2(x))))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def _randomize(m: nn.Module) -> nn.Module:
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.5, 0.5)
    return m.eval()


MODELS: dict[str, tuple[Callable[[], nn.Module], Callable[[int], tuple], list[str]]] = {
    "mlp": (MLP, lambda b: (torch.zeros(b, 32),), ["x"]),
    "transformer": (TransformerBlock, lambda b: (torch.zeros(b, 8, 32),), ["x"]),
    "cnn": (SmallCNN, lambda b: (torch.zeros(b, 3, 16, 16),), ["x"]),
}


def export(name: str, directory: Path) -> Path:
    make, example, inputs = MODELS[name]
    torch.manual_seed(0)
    model = _randomize(make())
    path = Path(directory) / f"{name}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer warnings
        torch.onnx.export(model, example(2), str(path), input_names=inputs, output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=17, dynamo=False)
    return path


def random_inputs(name: str, batch: int, rng: np.random.Generator) -> list[np.ndarray]:
    _, example, _ = MODELS[name]
    return [rng.standard_normal(tuple(t.shape)).astype(np.float32) for t in example(batch)]
