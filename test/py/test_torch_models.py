"""Models users bring, through the PyTorch frontend, against torch eager on fresh random inputs.

torchvision classification and segmentation models and `transformers` encoders (T5 with its
decoder, ViT, Whisper's encoder, CLIP's text and vision towers), built from small configs with
random weights (nothing is downloaded), in eval mode, compiled with `sdc.compile(module,
example_args)`; three of them (built once per module: the fixtures) also go through
`torch.compile(backend="sdc")`, one with a graph break. Inputs and configs are small (1x3x64x64
images for classification, 32x32 for the rest, a few tokens, one or two layers): most of the time
goes to torch.export tracing the model, which grows with its number of ops.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim

import sdc
from sdc.torch_compile import STATS


def close(got: torch.Tensor, want: torch.Tensor) -> None:
    """fp32 agreement, relative to the output's scale: deep nets accumulate rounding in both."""
    assert isinstance(got, torch.Tensor) and got.dtype == want.dtype and got.shape == want.shape
    scale = max(1.0, want.abs().max().item())
    torch.testing.assert_close(got, want, rtol=1e-4, atol=2e-5 * scale)


def matches_eager(model: nn.Module, example: tuple, fresh: tuple) -> None:
    """Compile with `example`, run on `fresh` (other values than the ones traced), compare."""
    exe = sdc.compile(model, example)
    outs = exe(*fresh)
    with torch.no_grad():
        want = model(*fresh)
    for got, ref in zip(outs, want if isinstance(want, tuple) else (want,), strict=True):
        close(got, ref)


def randomized_batch_norms(model: nn.Module) -> nn.Module:
    """Random running statistics and affine parameters: with the defaults (mean 0, var 1) a
    batch norm is nearly the identity, and a wrong lowering of it would go unseen."""
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            c = m.num_features
            m.running_mean.copy_(torch.rand(c, generator=g) - 0.5)
            m.running_var.copy_(torch.rand(c, generator=g) * 1.5 + 0.5)
            m.weight.data.copy_(torch.rand(c, generator=g) + 0.5)
            m.bias.data.copy_(torch.rand(c, generator=g) * 0.4 - 0.2)
    return model.eval()


def image(batch: int = 1, size: int = 64) -> torch.Tensor:
    return torch.randn(batch, 3, size, size)


def tokens(vocab: int, batch: int, length: int) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length))


class Field(nn.Module):
    """One field of a model's output (a `ModelOutput` or a dict), as a plain tensor."""

    def __init__(self, model: nn.Module, field: str):
        super().__init__()
        self.model, self.field = model, field

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        out = self.model(*args)
        return out[self.field] if isinstance(out, dict) else getattr(out, self.field)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _transformers():
    import transformers  # conftest.py has made torchvision (which transformers imports) importable

    return transformers


# ---------------------------------------------------------------- torchvision


def test_resnet18_matches_eager():
    import torchvision

    matches_eager(randomized_batch_norms(torchvision.models.resnet18(num_classes=10)), (image(),), (image(),))


def test_mobilenet_v3_small_matches_eager():
    import torchvision

    model = randomized_batch_norms(torchvision.models.mobilenet_v3_small(num_classes=10))
    matches_eager(model, (image(),), (image(),))


def test_lraspp_segmentation_matches_eager():
    """lraspp_mobilenet_v3_large (no pretrained weights): a MobileNetV3 backbone, a squeeze-excite
    style head and bilinear upsamplings of the logits back to the input's size
    (`aten.upsample_bilinear2d`)."""
    import torchvision

    model = torchvision.models.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                                      num_classes=3)
    matches_eager(Field(randomized_batch_norms(model), "out"), (image(size=32),), (image(size=32),))


class Resampling(nn.Module):
    """Each way `F.interpolate` reaches the importer: bilinear and nearest as core ATen upsample ops
    (by size and by scale factor, with and without align_corners), nearest-exact and bicubic as
    torch's decompositions into multi-tensor indexing."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (F.interpolate(x, scale_factor=2, mode="bilinear"),
                F.interpolate(x, size=(9, 13), mode="bilinear", align_corners=True),
                F.interpolate(x, scale_factor=1.5, mode="bilinear"),
                F.interpolate(x, size=(3, 4), mode="bilinear"),
                F.interpolate(x, scale_factor=2, mode="nearest"),
                F.interpolate(x, size=(12, 15), mode="nearest"),
                F.interpolate(x, scale_factor=2, mode="nearest-exact"),
                F.interpolate(x, scale_factor=2, mode="bicubic"))


def test_every_interpolation_mode_matches_eager():
    matches_eager(Resampling(), (torch.randn(2, 3, 6, 5),), (torch.randn(2, 3, 6, 5),))


class Doubling(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, scale_factor=2, mode="bilinear") - F.interpolate(x, scale_factor=2, mode="nearest")


def test_upsampling_run_time_sizes_from_one_artifact():
    """Spatial dims that are torch.export Dims: the output's are `2*h` and `2*w`, one artifact for all."""
    h, w = Dim("h", min=2, max=64), Dim("w", min=2, max=64)
    exe = sdc.compile(Doubling(), (torch.randn(1, 2, 6, 5),), dynamic_shapes=({2: h, 3: w},))
    assert exe.outputs[0].shape == (1, 2, "2*h", "2*w")
    for size in ((3, 7), (10, 4)):
        x = torch.randn(1, 2, *size)
        (got,) = exe(x)
        close(got, Doubling()(x))


# ---------------------------------------------------------------- transformers


@pytest.fixture(scope="module")
def vit() -> nn.Module:
    tf = _transformers()
    torch.manual_seed(0)
    config = tf.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                          image_size=32, patch_size=8)
    return Field(tf.ViTModel(config), "last_hidden_state").eval()


class T5(nn.Module):
    """T5's encoder and decoder: relative position buckets (bidirectional in the encoder, causal in
    the decoder), RMS-style layer norm, cross-attention."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, decoder_input_ids=decoder_input_ids).last_hidden_state


def test_t5_encoder_decoder_matches_eager():
    tf = _transformers()
    config = tf.T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=4,
                         relative_attention_num_buckets=8, relative_attention_max_distance=16,
                         decoder_start_token_id=0)
    model = T5(tf.T5Model(config)).eval()
    # sequences longer than max_distance / 2 put some relative positions in the logarithmic buckets
    matches_eager(model, (tokens(64, 2, 12), tokens(64, 2, 5)), (tokens(64, 2, 12), tokens(64, 2, 5)))


def test_vit_matches_eager(vit):
    matches_eager(vit, (image(2, 32),), (image(2, 32),))


@pytest.fixture(scope="module")
def whisper_encoder() -> nn.Module:
    tf = _transformers()
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    torch.manual_seed(0)
    config = tf.WhisperConfig(d_model=32, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=64,
                              num_mel_bins=16, max_source_positions=20, vocab_size=64, pad_token_id=0,
                              bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    return Field(WhisperEncoder(config), "last_hidden_state").eval()


def mel_frames() -> torch.Tensor:
    """Whisper's encoder takes exactly 2 * max_source_positions frames of num_mel_bins features."""
    return torch.randn(2, 16, 40)


def test_whisper_encoder_matches_eager(whisper_encoder):
    matches_eager(whisper_encoder, (mel_frames(),), (mel_frames(),))


def test_clip_text_tower_matches_eager():
    """The pooled output reads each sequence's end-of-text token: `hidden[arange(b), eos_position]`,
    a two-tensor index. Each row gets its eos at another place."""
    tf = _transformers()
    config = tf.CLIPTextConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                               num_attention_heads=4, max_position_embeddings=16, bos_token_id=0, pad_token_id=1,
                               eos_token_id=63)
    model = Field(tf.CLIPTextModel(config), "pooler_output").eval()

    def ids(eos_at: list[int]) -> torch.Tensor:
        x = tokens(63, len(eos_at), 9)
        x[torch.arange(len(eos_at)), torch.tensor(eos_at)] = 63
        return x

    matches_eager(model, (ids([8, 3]),), (ids([2, 6]),))


@pytest.fixture(scope="module")
def clip_vision() -> nn.Module:
    tf = _transformers()
    torch.manual_seed(0)
    config = tf.CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                 image_size=32, patch_size=8)
    return Field(tf.CLIPVisionModel(config), "pooler_output").eval()


def test_clip_vision_tower_matches_eager(clip_vision):
    matches_eager(clip_vision, (image(2, 32),), (image(2, 32),))


# ---------------------------------------------------------------- torch.compile(backend="sdc")


class ItemBranch(nn.Module):
    """A graph break: the branch depends on a tensor's value (`.item()`), which Dynamo cannot
    trace, so the backbone is one graph and the chosen head another."""

    def __init__(self, backbone: nn.Module):
        super().__init__()
        self.backbone = backbone

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.backbone(x)
        # (a value far from the threshold: a CLIP tower's pooled output is layer-normed, so its mean is
        # within rounding of 0, and which head ran would depend on how sdc's sums round)
        if logits.abs().mean().item() > 0.1:
            return logits.softmax(-1)
        return (-logits).log_softmax(-1)


def compiled_matches_eager(model: nn.Module, inputs: list[tuple], graphs: int) -> None:
    """torch.compile(backend="sdc") runs every call through sdc (no eager fallback) in `graphs` graphs."""
    torch._dynamo.reset()
    STATS.reset()
    compiled = torch.compile(model, backend="sdc", dynamic=False)
    try:
        with torch.no_grad():
            for args in inputs:
                close(compiled(*args), model(*args))
        assert (STATS.graphs, STATS.fallbacks) == (graphs, 0), STATS.errors
    finally:
        torch._dynamo.reset()  # no compiled frames of these models left for later tests


def test_torch_compile_vit(vit):
    compiled_matches_eager(vit, [(image(2, 32),), (image(2, 32),)], graphs=1)


def test_torch_compile_whisper_encoder(whisper_encoder):
    compiled_matches_eager(whisper_encoder, [(mel_frames(),)], graphs=1)


def test_torch_compile_with_a_graph_break(clip_vision):
    """Two graphs, both through sdc: the vision tower with the mean, and the head the branch took."""
    compiled_matches_eager(ItemBranch(clip_vision).eval(), [(image(2, 32),)], graphs=2)
