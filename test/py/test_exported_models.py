"""Models as users export them: Hugging Face `transformers` and torchvision models from small configs
with random weights, exported by both ONNX exporters (TorchScript-based `dynamo=False` and
`dynamo=True`) with dynamic batch and sequence, each compiled ONCE and run at several shapes against
onnxruntime on fresh random inputs.

The suite covers what broke sdc on real exports (issue 10): causal masks and position ids built from
the sequence length, T5's relative position buckets, position-id slices `[:, :seq]`, and a decoder
whose KV cache is concatenated with the new keys (past length symbolic).

Exports are cached per module (one export and one compile per model and exporter). The dynamo
exporter takes seconds per model and the segmentation model compiles slowly, so those are marked
`slow`; the default tier is the TorchScript exports plus GPT-2 and BERT from dynamo (about 20 s).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import onnxruntime as ort
import onnxscript  # noqa: F401  (the dynamo exporter needs it: a missing one fails here, not mid-export)
import pytest
import torch
import transformers  # conftest.py defines torchvision's op schemas first (transformers imports torchvision)

import sdc

RNG = np.random.default_rng()
VOCAB = 100
TOLERANCE = dict(rtol=1e-4, atol=1e-4)  # f32 through two layers: summation order differs from onnxruntime


@dataclass
class Case:
    """A model to export: the module, example arguments, input names, dynamic axes (axis -> dim name)
    per input, and the shapes to run at (each a dict of dim name -> size)."""

    module: torch.nn.Module
    args: tuple
    names: list[str]
    dynamic: dict[str, dict[int, str]]
    make: Callable[..., dict[str, np.ndarray]]
    sizes: list[dict[str, int]]


def _tokens(b: int, s: int) -> np.ndarray:
    return RNG.integers(0, VOCAB, (b, s)).astype(np.int64)


def _mask(b: int, s: int) -> np.ndarray:
    mask = np.ones((b, s), np.int64)
    mask[0, s - 1:] = 0 if s > 1 else 1  # one padded position, so the mask does something
    return mask


# ---------------------------------------------------------------- the models


class _Encoder(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def _encoder(kind: str) -> Case:
    small = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                 vocab_size=VOCAB, max_position_embeddings=64)
    if kind == "bert":
        model = transformers.BertModel(transformers.BertConfig(**small))
    elif kind == "distilbert":
        model = transformers.DistilBertModel(transformers.DistilBertConfig(
            n_layers=2, dim=32, n_heads=2, hidden_dim=64, vocab_size=VOCAB, max_position_embeddings=64))
    else:
        model = transformers.CLIPTextModel(transformers.CLIPTextConfig(**small))
    names = ["input_ids", "attention_mask"]
    return Case(_Encoder(model.eval()), (torch.randint(0, VOCAB, (2, 5)), torch.ones(2, 5, dtype=torch.int64)),
                names, {n: {0: "batch", 1: "seq"} for n in names},
                lambda batch, seq: {"input_ids": _tokens(batch, seq), "attention_mask": _mask(batch, seq)},
                [dict(batch=1, seq=3), dict(batch=2, seq=7), dict(batch=3, seq=16)])


class _DecoderWithCache(torch.nn.Module):
    """GPT-2 one step with a KV cache: past keys/values in, logits and the present cache out."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, k0, v0, k1, v1):
        cache = transformers.DynamicCache([(k0, v0), (k1, v1)])
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True)
        present = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
        return (out.logits, *present)


def _gpt2() -> Case:
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=64)
    model = transformers.GPT2LMHeadModel(config).eval()
    past = [f"{kv}{i}" for i in range(2) for kv in "kv"]
    args = (torch.randint(0, VOCAB, (2, 3)), torch.ones(2, 7, dtype=torch.int64),
            *[torch.randn(2, 2, 4, 16) for _ in past])
    dynamic = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
               **{n: {0: "batch", 2: "past"} for n in past}}

    def make(batch, seq, past_len):
        cache = {n: RNG.standard_normal((batch, 2, past_len, 16)).astype(np.float32) for n in past}
        return {"input_ids": _tokens(batch, seq), "attention_mask": np.ones((batch, past_len + seq), np.int64),
                **cache}

    return Case(_DecoderWithCache(model), args, ["input_ids", "attention_mask", *past], dynamic, make,
                [dict(batch=1, seq=1, past_len=5), dict(batch=2, seq=3, past_len=4), dict(batch=3, seq=1, past_len=9)])


class _Seq2Seq(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, decoder_input_ids):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids,
                          use_cache=False).logits


def _t5() -> Case:
    config = transformers.T5Config(num_layers=2, num_decoder_layers=2, d_model=32, d_ff=64, num_heads=2, d_kv=16,
                                   vocab_size=VOCAB, decoder_start_token_id=0)
    model = transformers.T5ForConditionalGeneration(config).eval()
    args = (torch.randint(0, VOCAB, (2, 5)), torch.ones(2, 5, dtype=torch.int64), torch.randint(0, VOCAB, (2, 3)))
    dynamic = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
               "decoder_input_ids": {0: "batch", 1: "target"}}
    return Case(_Seq2Seq(model), args, ["input_ids", "attention_mask", "decoder_input_ids"], dynamic,
                lambda batch, seq, target: {"input_ids": _tokens(batch, seq), "attention_mask": _mask(batch, seq),
                                            "decoder_input_ids": _tokens(batch, target)},
                [dict(batch=1, seq=3, target=2), dict(batch=2, seq=7, target=5), dict(batch=3, seq=16, target=1)])


class _Images(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixels):
        out = self.model(pixels)
        return out.last_hidden_state if hasattr(out, "last_hidden_state") else out["out"]


def _vit() -> Case:
    config = transformers.ViTConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                                    image_size=32, patch_size=8)
    model = transformers.ViTModel(config, add_pooling_layer=False).eval()
    return Case(_Images(model), (torch.randn(2, 3, 32, 32),), ["pixels"], {"pixels": {0: "batch"}},
                lambda batch: {"pixels": RNG.standard_normal((batch, 3, 32, 32)).astype(np.float32)},
                [dict(batch=1), dict(batch=3)])


def _segmentation() -> Case:
    import torchvision

    model = torchvision.models.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                                      num_classes=3).eval()
    return Case(_Images(model), (torch.randn(1, 3, 64, 64),), ["pixels"],
                {"pixels": {0: "batch", 2: "height", 3: "width"}},
                lambda batch, height, width: {"pixels": RNG.standard_normal((batch, 3, height, width)).astype(np.float32)},
                [dict(batch=1, height=64, width=64), dict(batch=2, height=96, width=64)])


MODELS: dict[str, Callable[[], Case]] = {
    "gpt2_with_cache": _gpt2, "bert": lambda: _encoder("bert"), "distilbert": lambda: _encoder("distilbert"),
    "clip_text": lambda: _encoder("clip_text"), "t5": _t5, "vit": _vit, "segmentation": _segmentation,
}

SLOW = pytest.mark.slow
CASES = [
    *(pytest.param((name, "torchscript"), id=f"{name}-torchscript") for name in
      ("gpt2_with_cache", "bert", "distilbert", "clip_text", "t5", "vit")),
    pytest.param(("segmentation", "torchscript"), id="segmentation-torchscript", marks=SLOW),
    *(pytest.param((name, "dynamo"), id=f"{name}-dynamo") for name in ("gpt2_with_cache", "bert")),
    *(pytest.param((name, "dynamo"), id=f"{name}-dynamo", marks=SLOW) for name in ("distilbert", "clip_text", "vit")),
    # T5 with dynamo=True fails inside the exporter (decomposing the FX graph), before sdc sees it.
    # Segmentation from the dynamo exporter takes about 110 s to export and compile on the 2-core CI box
    # (the torchscript export above covers the model): it runs with SDC_LONG_TESTS=1.
    pytest.param(("segmentation", "dynamo"), id="segmentation-dynamo",
                 marks=[SLOW, pytest.mark.skipif(os.environ.get("SDC_LONG_TESTS") != "1",
                                                 reason="long: set SDC_LONG_TESTS=1")]),
]


# ---------------------------------------------------------------- export, compile once, run at several shapes


def _export(case: Case, exporter: str, path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "torchscript":
            torch.onnx.export(case.module, case.args, str(path), input_names=case.names,
                              dynamic_axes=case.dynamic, dynamo=False, opset_version=17)
            return
        from torch.export import Dim

        dims: dict[str, Dim] = {}
        shapes = tuple({axis: dims.setdefault(name, Dim(name)) for axis, name in case.dynamic[n].items()}
                       for n in case.names)
        torch.onnx.export(case.module, case.args, str(path), input_names=case.names, dynamo=True,
                          dynamic_shapes=shapes, optimize=True, verbose=False)


@pytest.fixture(scope="module", params=CASES)
def exported(request, tmp_path_factory):
    """(case, model path, the compiled executable): one export and one compile per model and exporter."""
    name, exporter = request.param
    torch.manual_seed(0)
    case = MODELS[name]()
    path = tmp_path_factory.mktemp(name) / f"{name}-{exporter}.onnx"
    _export(case, exporter, path)
    return case, path, sdc.compile(path)


def test_matches_onnxruntime_at_several_shapes(exported):
    case, path, exe = exported
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for sizes in case.sizes:
        inputs = case.make(**sizes)
        want = session.run(None, inputs)
        got = exe(**inputs)
        got = got if isinstance(got, (list, tuple)) else [got]
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            g = np.asarray(g)
            assert g.shape == w.shape, (sizes, i)
            np.testing.assert_allclose(g, w, **TOLERANCE, err_msg=f"output {i} at {sizes}")
