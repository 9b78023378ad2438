"""Real models compiled for `target="cuda"` and run on the GPU, against onnxruntime (GPU issue, tests).

- The nine light ONNX zoo models (onnx's backend test data). Their own weights are degenerate
  constants (every class gets the same logit), so each model gets fresh He-scaled random weights and
  loses its final softmax, in the ONNX file itself: sdc and onnxruntime then run the same model, and
  the logits can tell a wrong program from a right one.
- A BERT-style encoder and a GPT-style (causal) decoder, written here in plain torch (nothing
  beyond torch and onnx to install on the GPU host; test_exported_models.py covers Hugging Face's
  exports on the CPU) and exported by the TorchScript ONNX exporter with dynamic batch and sequence;
  each is compiled once per precision and run at several sizes from that one artifact.

Every model runs at each precision of `TOLERANCE` on fresh random inputs. The check is the relative
L2 error against onnxruntime's f32 result on the CPU. f32 must stay f32 (no TF32 anywhere, cuDNN's
convolutions included), so its bound is tight enough to catch a TF32 leak; tf32 and bf16 get the
bounds their rounding allows (10-bit and 7-bit mantissas, through up to ~100 layers).

Marked `gpu`: skipped without a CUDA device (on the GPU host: `python3 -m pytest -m gpu
test/py/test_gpu_models.py`, about 4 minutes on the H200 of 2026-12-01, most of it compiling).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper

import sdc

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
ZOO = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
       "squeezenet", "vgg19", "zfnet512"]
# relative L2 error bound per precision: f32 is summation order only; a TF32 leak gives about 1e-3
TOLERANCE = {"f32": 1e-4, "tf32": 1e-2, "bf16": 4e-2}
VOCAB = 1000


@pytest.fixture(autouse=True)
def _compiled_for_the_device(monkeypatch):
    """Generated kernels compile for the GPU here, not for Triton's interpreter (tests elsewhere set
    it). Without autotuning: each new shape would tune its matmuls first (seconds per shape, on every
    model and size here); these tests check numerics, test_triton_matmul.py checks the tuned tiles."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("SDC_AUTOTUNE", "0")


def relative_error(got: torch.Tensor, want: np.ndarray) -> float:
    got64 = got.detach().double().cpu().numpy()
    want64 = want.astype(np.float64)
    return float(np.linalg.norm(got64 - want64) / max(np.linalg.norm(want64), 1e-30))


def ort_session(model: onnx.ModelProto | Path):
    import onnxruntime as ort

    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"])


# ---------------------------------------------------------------- the light zoo, with random weights


def zoo_with_random_weights(name: str, rng: np.random.Generator) -> onnx.ModelProto:
    """The zoo model with fresh weights and without its final softmax (the module docstring says why).
    The light models make each weight with a `ConstantOfShape` node (one value everywhere); each
    becomes an initializer of that shape instead: matrices and kernels He-scaled normal values,
    vectors (biases, batch-norm statistics) values in [0.5, 1.5], so variances stay positive."""
    model = onnx.load(str(LIGHT / f"light_{name}.onnx"))
    graph = model.graph
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in [n for n in graph.node if n.op_type == "ConstantOfShape" and n.input[0] in inits]:
        shape = [int(d) for d in inits[node.input[0]]]
        if len(shape) >= 2:
            fresh = rng.standard_normal(shape) * math.sqrt(2 / int(np.prod(shape[1:])))
        else:
            fresh = rng.uniform(0.5, 1.5, shape)
        graph.initializer.append(numpy_helper.from_array(fresh.astype(np.float32), node.output[0]))
        graph.node.remove(node)
    used = {i for n in graph.node for i in n.input}
    for init in [t for t in graph.initializer if t.name not in used]:  # the shapes those nodes read
        graph.initializer.remove(init)
    names = {t.name for t in graph.initializer}
    for x in [i for i in graph.input if i.name not in used and i.name not in names]:
        graph.input.remove(x)
    last = graph.node[-1]
    if last.op_type == "Softmax" and last.output[0] == graph.output[0].name:
        graph.output[0].name = last.input[0]
        graph.node.remove(last)
    return model


@pytest.fixture(scope="module")
def zoo_models() -> dict[str, onnx.ModelProto]:
    rng = np.random.default_rng()
    return {name: zoo_with_random_weights(name, rng) for name in ZOO}


@pytest.mark.parametrize("precision", ["f32", "bf16"])
@pytest.mark.parametrize("name", ZOO)
def test_zoo_model_matches_onnxruntime(name, precision, zoo_models, tmp_path):
    model = zoo_models[name]
    (x,) = [i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    shape = [d.dim_value for d in x.type.tensor_type.shape.dim]
    data = np.random.default_rng().standard_normal(shape).astype(np.float32)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    exe = sdc.compile(str(path), target="cuda", precision=precision, output=tmp_path / f"{name}.sdc")
    assert exe.device.type == "cuda"
    (got,) = exe(torch.from_numpy(data).cuda())
    assert got.is_cuda and got.dtype == torch.float32
    (want,) = ort_session(model).run(None, {x.name: data})
    assert tuple(got.shape) == want.shape
    assert np.ptp(want) > 1e-3  # logits that differ: a wrong program shows
    error = relative_error(got, want)
    assert error <= TOLERANCE[precision], f"{name} at {precision}: relative error {error:.2e}"


# ---------------------------------------------------------------- a BERT-style encoder, a GPT-style decoder


class Block(torch.nn.Module):
    """A transformer block: pre-norm attention (padding mask and/or causal), then a GELU MLP."""

    def __init__(self, width: int, heads: int, causal: bool):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv, self.proj = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.ln1, self.ln2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.up, self.down = torch.nn.Linear(width, 4 * width), torch.nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = (t.reshape(b, s, self.heads, -1).transpose(1, 2) for t in self.qkv(self.ln1(x)).split(d, -1))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
        if mask is not None:
            scores = scores.masked_fill(mask[:, None, None, :] == 0, -1e9)
        if self.causal:  # built from the sequence length, as exporters see GPT-2's
            future = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(future, -1e9)
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(y)
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln2(x))))


class Encoder(torch.nn.Module):
    """BERT-style: token + position embeddings, bidirectional blocks with a padding mask, a final norm."""

    def __init__(self, width: int = 128, heads: int = 4, layers: int = 2, causal: bool = False):
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(VOCAB, width), torch.nn.Embedding(256, width)
        self.blocks = torch.nn.ModuleList(Block(width, heads, causal) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(width)

    def hidden(self, input_ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = self.tok(input_ids) + self.pos(torch.arange(input_ids.shape[1], device=input_ids.device))[None]
        for block in self.blocks:
            x = block(x, mask)
        return self.norm(x)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.hidden(input_ids, attention_mask)


class Decoder(Encoder):
    """GPT-style: causal blocks, no padding mask, logits through the tied token embedding."""

    def __init__(self):
        super().__init__(causal=True)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.hidden(input_ids, None) @ self.tok.weight.T


def _export(module: torch.nn.Module, names: list[str], path: Path) -> None:
    torch.manual_seed(0)
    args = tuple(torch.randint(1, VOCAB, (2, 8)) if n == "input_ids" else torch.ones(2, 8, dtype=torch.int64)
                 for n in names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, str(path), input_names=names, output_names=["out"],
                          dynamic_axes={**{n: {0: "batch", 1: "seq"} for n in names}, "out": {0: "batch", 1: "seq"}},
                          opset_version=17, dynamo=False)


@pytest.fixture(scope="module")
def text_models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("text")
    torch.manual_seed(0)
    paths = {"encoder": root / "encoder.onnx", "decoder": root / "decoder.onnx"}
    _export(Encoder(), ["input_ids", "attention_mask"], paths["encoder"])
    _export(Decoder(), ["input_ids"], paths["decoder"])
    return paths


# (batch, seq): odd sizes exercise the kernels' masks. No size is 1 and no batch*seq a multiple of 16:
# Triton specializes a kernel on integer arguments equal to 1 or divisible by 16, so these three share
# one compiled variant of each kernel (a new variant per size would cost seconds per kernel here).
SIZES = [(2, 7), (3, 41), (5, 129)]


@pytest.mark.parametrize("precision", ["f32", "tf32", "bf16"])
@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_text_model_runs_at_several_sizes_from_one_artifact(kind, precision, text_models, tmp_path):
    path = text_models[kind]
    exe = sdc.compile(str(path), target="cuda", precision=precision, output=tmp_path / f"{kind}.sdc")
    assert [i.name for i in exe.inputs][0] == "input_ids" and not isinstance(exe.inputs[0].shape[1], int)
    session = ort_session(path)
    rng = np.random.default_rng()
    for batch, seq in SIZES:
        feeds = {"input_ids": rng.integers(1, VOCAB, (batch, seq)).astype(np.int64)}
        if kind == "encoder":
            mask = np.ones((batch, seq), np.int64)
            mask[0, seq // 2:] = 0  # padding in the first row, so the mask does something
            feeds["attention_mask"] = mask
        (got,) = exe(**{k: torch.from_numpy(v).cuda() for k, v in feeds.items()})
        (want,) = session.run(None, feeds)
        assert got.is_cuda and tuple(got.shape) == want.shape
        error = relative_error(got, want)
        assert error <= TOLERANCE[precision], f"{kind} at {precision}, batch {batch} seq {seq}: {error:.2e}"


def test_second_call_of_a_shape_replays_a_cuda_graph(text_models, tmp_path):
    """Generated kernels and torch calls of one call are captured once per shape and replayed (which
    kernels are generated: test_backend_report.py reads the same encoder's plan)."""
    exe = sdc.compile(str(text_models["encoder"]), target="cuda", output=tmp_path / "e.sdc")
    assert list((tmp_path / "e.sdc" / "kernels").glob("*.py"))
    ids = torch.randint(1, VOCAB, (2, 16), device="cuda")
    mask = torch.ones(2, 16, dtype=torch.int64, device="cuda")
    first = exe(ids, mask)[0]
    for _ in range(3):
        again = exe(ids, mask)[0]
    torch.testing.assert_close(again, first)
    graphs = exe._executor.graphs
    assert graphs is not None and graphs.replays >= 1, exe._executor.graph_reason
