"""The attention template: softmax(Q K^T * scale [+ mask]) V as one flash-style Triton kernel.

sdc-fuse merges the three groups of an attention (sdc/transforms/attention_pattern.py) on target
cuda, and the Triton codegen renders them as one kernel (sdc/codegen/triton/attention.py). Under
the Triton interpreter on small odd shapes (several key blocks, so the online softmax rescales;
query and key tails masked; head dims padded to a power of 2), f32/f16/bf16, with a scale and an
additive padding mask, a boolean padding mask under `where`, a causal mask, k given either way
round, dynamic batch and sequence: against torch's `F.scaled_dot_product_attention` in float64 on
the same (rounded) fresh random inputs, a tolerance per dtype. Then the BERT-style encoder and the
GPT-style decoder of test_gpu_models.py, exported to ONNX, small: one attention kernel per layer,
against onnxruntime.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sdc.codegen.triton import TritonRenderer
from sdc.dialect.opdef import OPS
from sdc.transforms.attention_pattern import SCORE_OPS, NotAttention, match_attention
from triton_support import TORCH_DTYPE, compile_cuda, interpreter, launches, rng  # noqa: F401

# (rtol, atol) by dtype: f32 is summation order only; 16-bit rounds its inputs' products to f32, then P
# (as the reference rounds the probabilities it multiplies) and the output once
TOLERANCE = {"f32": (2e-5, 2e-5), "f16": (4e-3, 4e-3), "bf16": (3e-2, 3e-2)}


def _type(shape, dtype: str) -> str:
    return "tensor<" + "x".join([*("?" if isinstance(d, str) else str(d) for d in shape), dtype]) + ">"


def _arg(name: str, shape, dtype: str) -> str:
    dims = "" if all(isinstance(d, int) for d in shape) else \
        ", sdc.dims = #sdc.dims<[" + ", ".join(f'"{d}"' if isinstance(d, str) else str(d) for d in shape) + "]>"
    return f'%{name}: {_type(shape, dtype)} {{sdc.name = "{name}"{dims}}}'


def attention_ir(dt: str, b, h: int, sq, sk, d: int, dv: int, mask: str, k_transposed: bool = False) -> str:
    """softmax(q k^T * 1/sqrt(d) [mask]) v as torch / ONNX exporters write it. `mask`: "none",
    "additive" (+ m, m [B, 1, 1, Sk] f32 cast to dt), "padding" (where(pad [B, 1, 1, Sk], -1e9, s)),
    "causal" (where(future [Sq, Sk], -1e9, s)). k is [B, H, Sk, D] read through transpose_rhs, or
    [B, H, D, Sk] (`k_transposed`, what the ONNX export of test_gpu_models' blocks gives)."""
    scores, out = [b, h, sq, sk], [b, h, sq, dv]
    k_shape = [b, h, d, sk] if k_transposed else [b, h, sk, d]
    args = [_arg("q", [b, h, sq, d], dt), _arg("k", k_shape, dt), _arg("v", [b, h, sk, dv], dt)]
    body = [f'%c = "sdc.constant"() {{value = dense<{1 / math.sqrt(d)!r}> : tensor<{dt}>}} : () -> tensor<{dt}>',
            f'%fill = "sdc.constant"() {{value = dense<-1.0e9> : tensor<{dt}>}} : () -> tensor<{dt}>',
            f'%s0 = "sdc.matmul"(%q, %k) {{transpose_lhs = false, transpose_rhs = {str(not k_transposed).lower()}}} : '
            f'({_type([b, h, sq, d], dt)}, {_type(k_shape, dt)}) -> {_type(scores, dt)}',
            f'%s1 = "sdc.mul"(%s0, %c) : ({_type(scores, dt)}, tensor<{dt}>) -> {_type(scores, dt)}']
    last = "%s1"
    if mask == "additive":
        args.append(_arg("m", [b, 1, 1, sk], "f32"))
        row, row_dt = _type([b, 1, 1, sk], "f32"), _type([b, 1, 1, sk], dt)
        body += [f'%mc = "sdc.cast"(%m) {{dtype = {dt}}} : ({row}) -> {row_dt}',
                 f'%s2 = "sdc.add"(%s1, %mc) : ({_type(scores, dt)}, {row_dt}) -> {_type(scores, dt)}']
        last = "%s2"
    elif mask in ("padding", "causal"):
        shape = [b, 1, 1, sk] if mask == "padding" else [sq, sk]
        args.append(_arg("m", shape, "i1"))
        body.append(f'%s2 = "sdc.where"(%m, %fill, %s1) : ({_type(shape, "i1")}, tensor<{dt}>, {_type(scores, dt)}) '
                    f'-> {_type(scores, dt)}')
        last = "%s2"
    body += [f'%p = "sdc.softmax"({last}) {{axis = -1 : i64}} : ({_type(scores, dt)}) -> {_type(scores, dt)}',
             f'%o = "sdc.matmul"(%p, %v) : ({_type(scores, dt)}, {_type([b, h, sk, dv], dt)}) -> {_type(out, dt)}',
             f"return %o : {_type(out, dt)}"]
    return (f"func.func @main({', '.join(args)}) -> ({_type(out, dt)} {{sdc.name = \"o\"}}) {{\n  "
            + "\n  ".join(body) + "\n}\n")


def inputs(dt: str, b: int, h: int, sq: int, sk: int, d: int, dv: int, mask: str, k_transposed: bool,
           rng: torch.Generator) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Fresh random inputs for `attention_ir` and the float64 sdpa reference of the same (rounded) values."""
    def randn(*shape):
        return torch.randn(shape, generator=rng).to(TORCH_DTYPE[dt])

    q, k, v = randn(b, h, sq, d), randn(b, h, sk, d), randn(b, h, sk, dv)
    args = [q, k.transpose(-1, -2).contiguous() if k_transposed else k, v]
    ref_mask = None
    if mask == "additive":
        m = torch.randn(b, 1, 1, sk, generator=rng) * 2
        m[0, ..., sk // 2:] = -1e4  # padding: the keys past the middle of the first sequence
        args.append(m)
        ref_mask = m.to(TORCH_DTYPE[dt]).double()
    elif mask == "padding":
        pad = torch.zeros(b, 1, 1, sk, dtype=torch.bool)
        pad[0, ..., sk // 2:] = True
        if b > 1:
            pad[-1, ..., :3] = True
        args.append(pad)
        ref_mask = ~pad
    elif mask == "causal":
        future = torch.ones(sq, sk, dtype=torch.bool).triu(1)
        args.append(future)
        ref_mask = ~future
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=ref_mask,
                                          scale=float(torch.tensor(1 / math.sqrt(d)).to(TORCH_DTYPE[dt])))
    return args, want


def assert_close(got: torch.Tensor, want: torch.Tensor, dt: str) -> None:
    assert got.dtype == TORCH_DTYPE[dt]
    rtol, atol = TOLERANCE[dt]
    torch.testing.assert_close(got.double(), want, rtol=rtol, atol=atol)


def attention_kernels(artifact: Path) -> list[dict]:
    return [s["kernel"] for s in launches(artifact) if s["kernel"].get("template") == "attention"]


# (dtype, mask, head dim, value head dim, k transposed): each mask, each dtype, head dims 32/64/128 and
# two that are not powers of 2 (padded, masked); Sq 37 and Sk 77 need two key blocks and mask both tails
CASES = [("f32", "none", 32, 32, False), ("f32", "additive", 40, 24, True), ("f32", "padding", 64, 64, False),
         ("f32", "causal", 32, 32, True), ("f16", "padding", 64, 64, True), ("f16", "causal", 128, 128, False),
         ("bf16", "additive", 64, 64, False), ("bf16", "causal", 32, 48, True)]


@pytest.mark.parametrize("dt,mask,d,dv,k_transposed", CASES)
def test_attention_is_one_kernel_matching_sdpa(dt, mask, d, dv, k_transposed, tmp_path, rng):
    b, h, sq, sk = 2, 2, 37, 77
    exe = compile_cuda(attention_ir(dt, b, h, sq, sk, d, dv, mask, k_transposed), tmp_path / "a.sdc")
    steps = launches(tmp_path / "a.sdc")
    assert [s["kernel"].get("template") for s in steps] == ["attention"], [s["kernel"] for s in steps]
    (kernel,) = attention_kernels(tmp_path / "a.sdc")
    assert kernel["backend"] == "triton" and kernel["ops"][-1]["op"] == "matmul"
    assert kernel["constexprs"]["BLOCK_D"] == max(16, 1 << (d - 1).bit_length())
    args, want = inputs(dt, b, h, sq, sk, d, dv, mask, k_transposed, rng)
    (got,) = exe(*args)
    assert_close(got, want, dt)


def test_dynamic_batch_and_sequence_from_one_artifact(tmp_path, rng):
    text = attention_ir("f32", "B", 2, "S", "S", 32, 32, "padding")
    exe = compile_cuda(text, tmp_path / "dyn.sdc")
    (kernel,) = attention_kernels(tmp_path / "dyn.sdc")
    assert kernel["domain"] == [None, 2, None, None, 32, 32]
    for b, s in ((1, 5), (3, 45)):
        args, want = inputs("f32", b, 2, s, s, 32, 32, "padding", False, rng)
        (got,) = exe(*args)
        assert_close(got, want, "f32")


@pytest.mark.parametrize("sq,sk,mask", [(1, 19, "padding"), (5, 1, "none")])
def test_one_query_or_one_key(sq, sk, mask, tmp_path, rng):
    """A decoding step (Sq = 1) and a single key: dims of size 1 broadcast (stride 0) in the kernel."""
    exe = compile_cuda(attention_ir("f16", 2, 3, sq, sk, 64, 64, mask), tmp_path / "one.sdc")
    assert len(attention_kernels(tmp_path / "one.sdc")) == 1
    args, want = inputs("f16", 2, 3, sq, sk, 64, 64, mask, False, rng)
    (got,) = exe(*args)
    assert_close(got, want, "f16")


def test_what_the_kernel_cannot_take_keeps_its_kernels(tmp_path, rng):
    """A head dim past MAX_HEAD_DIM: no attention group, the three kernels of before, the same numbers."""
    exe = compile_cuda(attention_ir("f32", 1, 2, 9, 11, 160, 16, "none"), tmp_path / "wide.sdc")
    templates = [s["kernel"].get("template") for s in launches(tmp_path / "wide.sdc")]
    assert "attention" not in templates and templates.count("matmul") == 2
    args, want = inputs("f32", 1, 2, 9, 11, 160, 16, "none", False, rng)
    (got,) = exe(*args)
    assert_close(got, want, "f32")


def _entry(op, inputs, output, **attrs):
    return {"op": op, "inputs": inputs, "outputs": [output], "attrs": attrs}


def test_the_matcher_says_why_it_refuses():
    values = {v: {"shape": [2, 4, 8, 8], "dtype": "f32"} for v in ("q", "k", "s", "t", "p", "v", "o")}
    values["m"] = {"shape": [2, 4, 8, 1, 8], "dtype": "f32"}
    ops = [_entry("matmul", ["q", "k"], "s", transpose_rhs=True), _entry("softmax", ["s"], "p", axis=-1),
           _entry("matmul", ["p", "v"], "o")]
    assert match_attention(ops, values, ["o"]).transpose_k
    with pytest.raises(NotAttention, match="writes"):
        match_attention(ops, values, ["o", "p"])  # the probabilities leave the group
    with pytest.raises(NotAttention, match="axis 2"):
        match_attention([ops[0], _entry("softmax", ["s"], "p", axis=2), ops[2]], values, ["o"])
    with pytest.raises(NotAttention, match="does not broadcast"):
        match_attention([ops[0], _entry("add", ["s", "m"], "t"), _entry("softmax", ["t"], "p", axis=-1), ops[2]],
                        values, ["o"])
    with pytest.raises(NotAttention, match="'sdc.exp' between"):
        match_attention([ops[0], _entry("exp", ["s"], "t"), _entry("softmax", ["t"], "p", axis=-1), ops[2]],
                        values, ["o"])


def test_score_ops_are_real_ops_the_renderer_has():
    assert SCORE_OPS <= set(OPS)
    assert SCORE_OPS <= TritonRenderer.elementwise_ops() | {"cast"}


# ---------------------------------------------------------------- the encoder and decoder of the GPU tests


@pytest.fixture(scope="module")
def small_text_models(tmp_path_factory) -> dict[str, Path]:
    """test_gpu_models.py's encoder (padding mask) and decoder (causal), 2 layers, width 64, 2 heads of
    32, exported to ONNX by the TorchScript exporter with dynamic batch and sequence."""
    from test_gpu_models import Encoder, _export

    class SmallDecoder(Encoder):
        def __init__(self):
            super().__init__(width=64, heads=2, layers=2, causal=True)

        def forward(self, input_ids):  # type: ignore[override]
            return self.hidden(input_ids, None)

    root = tmp_path_factory.mktemp("attn")
    torch.manual_seed(0)
    paths = {"encoder": root / "encoder.onnx", "decoder": root / "decoder.onnx"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _export(Encoder(width=64, heads=2, layers=2), ["input_ids", "attention_mask"], paths["encoder"])
        _export(SmallDecoder(), ["input_ids"], paths["decoder"])
    return paths


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_text_models_run_one_attention_kernel_per_layer(kind, small_text_models, tmp_path):
    import onnxruntime as ort

    import sdc

    path = small_text_models[kind]
    exe = sdc.compile(str(path), target="cuda", output=tmp_path / f"{kind}.sdc")
    kernels = attention_kernels(tmp_path / f"{kind}.sdc")
    assert len(kernels) == 2 and all(k["backend"] == "triton" for k in kernels)
    assert not [s for s in launches(tmp_path / f"{kind}.sdc") if "softmax" in
                [e["op"] for e in s["kernel"]["ops"]] and s["kernel"].get("template") != "attention"]
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng()
    batch, seq = 2, 11
    feeds = {"input_ids": rng.integers(1, 1000, (batch, seq)).astype(np.int64)}
    if kind == "encoder":
        mask = np.ones((batch, seq), np.int64)
        mask[0, seq // 2:] = 0
        feeds["attention_mask"] = mask
    (got,) = exe(**{k: torch.from_numpy(v) for k, v in feeds.items()})
    (want,) = session.run(None, feeds)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- models imported from torch


def _torch_kernels(model: torch.nn.Module, args: tuple, out: Path, precision: str = "f32"):
    """`model` compiled from torch for target cuda (kernels interpreted on the CPU), and its attention kernels."""
    import sdc

    exe = sdc.compile(model, args, target="cuda", precision=precision, output=out, device="cpu")
    return exe, attention_kernels(out)


class Sdpa(torch.nn.Module):
    """F.scaled_dot_product_attention as a model calls it: torch.export decomposes it into 3-D bmms between
    reshapes, the scale split over q and k, and the fix-up that gives rows with every key masked 0."""

    def __init__(self, causal: bool = False):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v, *mask):
        return F.scaled_dot_product_attention(q, k, v, *mask, is_causal=self.causal)


# (mask, precision): no mask, is_causal, a boolean mask with one row all masked (the fix-up gives 0 there),
# an additive float mask; f16 and bf16 by the mixed-precision pass
SDPA_CASES = [("none", "f32"), ("causal", "f32"), ("bool", "f32"), ("float", "f32"), ("causal", "f16"),
              ("bool", "bf16")]


@pytest.mark.parametrize("mask,precision", SDPA_CASES)
def test_torch_sdpa_is_one_attention_kernel(mask, precision, tmp_path, rng):
    b, h, sq, sk, d = 2, 2, 13, 21, 16
    q, k, v = (torch.randn(b, h, n, d, generator=rng) for n in (sq, sk, sk))
    extra: tuple = ()
    if mask == "bool":
        keep = torch.rand(b, 1, sq, sk, generator=rng) > 0.3
        keep[0, :, 3] = False  # a query that sees no key
        extra = (keep,)
    elif mask == "float":
        extra = (torch.randn(b, 1, 1, sk, generator=rng),)
    model = Sdpa(causal=mask == "causal")
    exe, kernels = _torch_kernels(model, (q, k, v, *extra), tmp_path / "sdpa.sdc", precision)
    assert len(kernels) == 1
    assert [e["op"] for e in kernels[0]["ops"]].count("matmul") == 2
    # is_causal's constant 0/-inf mask: the kernel skips key blocks and reads q, k and v only
    assert ("'causal': 0" in _source(tmp_path / "sdpa.sdc", kernels[0])) == (mask == "causal")
    if mask == "causal":
        assert len(kernels[0]["args"]) == 3
    q2, k2, v2 = (torch.randn_like(t) for t in (q, k, v))  # fresh inputs, not the example ones
    (got,) = exe(q2, k2, v2, *extra)
    want = model(q2.double(), k2.double(), v2.double(), *(m.double() if m.is_floating_point() else m for m in extra))
    if mask == "bool":
        assert torch.all(got[0, :, 3] == 0)
    rtol, atol = TOLERANCE[precision]
    torch.testing.assert_close(got.double(), want, rtol=rtol, atol=atol)


def test_the_empty_row_fixup_needs_a_zero_fill():
    """The fix-up is taken only as `where(all(s == -inf), 0, p)`: another fill is not what the kernel writes."""
    shape = [2, 4, 8, 8]
    values = {v: {"shape": shape, "dtype": "f32"} for v in ("q", "k", "s", "p", "v", "o", "z", "w")}
    values.update({"e": {"shape": shape, "dtype": "i1"}, "n": {"shape": shape, "dtype": "i1"},
                   "c": {"shape": shape, "dtype": "i32"}, "r": {"shape": shape[:-1] + [1], "dtype": "i32"},
                   "b": {"shape": shape[:-1] + [1], "dtype": "i1"}, "a": {"shape": shape[:-1] + [1], "dtype": "i1"},
                   "inf": {"shape": [], "dtype": "f32"}})
    ops = [_entry("matmul", ["q", "k"], "s", transpose_rhs=True), _entry("softmax", ["s"], "p", axis=-1),
           _entry("eq", ["s", "inf"], "e"), _entry("not", ["e"], "n"), _entry("cast", ["n"], "c", dtype="i32"),
           _entry("reduce_max", ["c"], "r", axes=[3], keepdims=True), _entry("cast", ["r"], "b", dtype="i1"),
           _entry("not", ["b"], "a"), _entry("where", ["a", "z", "p"], "w"), _entry("matmul", ["w", "v"], "o")]
    zero = {"inf": -math.inf, "z": 0.0}
    match = match_attention(ops, values, ["o"], zero.get)
    assert match.zero_empty_rows and match.fixup == tuple(range(2, 9))
    with pytest.raises(NotAttention, match="'sdc.eq' between"):
        match_attention(ops, values, ["o"], {"inf": -math.inf, "z": 1.0}.get)
    with pytest.raises(NotAttention):
        match_attention(ops, values, ["o"])  # the constants unknown: the fix-up is not taken


@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_bert_style_encoder_from_torch_has_an_attention_kernel_per_layer(precision, tmp_path):
    """bench/gpu.py's encoder (q @ k^T * scale, masked_fill of the padding, softmax, @ v), small."""
    import sys

    sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
    from gpu import BertStyleEncoder

    torch.manual_seed(0)
    model = BertStyleEncoder(layers=2, width=64, heads=2, vocab=100).eval()
    mask = torch.ones(2, 16, dtype=torch.int64)
    mask[0, 9:] = 0
    ids = torch.randint(0, 100, (2, 16))
    exe, kernels = _torch_kernels(model, (ids, mask), tmp_path / "bert.sdc", precision)
    assert len(kernels) == 2
    ids = torch.randint(0, 100, (2, 16))
    (got,) = exe(ids, mask)
    with torch.no_grad():
        want = model(ids, mask)
    tol = {"f32": 1e-4, "f16": 2e-2}[precision]  # f16: a layer norm's output, 2 layers of rounding
    torch.testing.assert_close(got.float(), want, rtol=tol, atol=tol)


def test_hf_gpt2_eager_attention_has_an_attention_kernel_per_layer(tmp_path):
    """transformers' GPT-2 with its eager attention (matmul, scale, causal mask, softmax, matmul), small."""
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=32,
                                     bos_token_id=0, eos_token_id=0, attn_implementation="eager")
    gpt2 = transformers.GPT2LMHeadModel(config).eval()

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gpt2 = gpt2

        def forward(self, ids):
            return self.gpt2(input_ids=ids, use_cache=False).logits

    model = Logits().eval()
    exe, kernels = _torch_kernels(model, (torch.randint(0, 64, (2, 12)),), tmp_path / "gpt2.sdc")
    assert len(kernels) == 2
    ids = torch.randint(0, 64, (2, 12))
    (got,) = exe(ids)
    with torch.no_grad():
        want = model(ids)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_training_keeps_the_attention_unfused(tmp_path):
    """In a training step the backward reads the forward's probabilities, so no attention group is
    merged (the kernel never holds them), and the step's loss matches torch."""
    import sdc
    import sdc.optim

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(16, 48)

        def forward(self, x):
            q, k, v = (t.reshape(2, 6, 2, 8).transpose(1, 2) for t in self.qkv(x).split(16, -1))
            return F.scaled_dot_product_attention(q, k, v, is_causal=True).sum(1)

    torch.manual_seed(0)
    model = Layer()
    reference = Layer()
    reference.load_state_dict(model.state_dict())
    x, target = torch.randn(2, 6, 16), torch.randn(2, 6, 8)
    step = sdc.compile_train(model, (x, target), loss=F.mse_loss, optimizer=sdc.optim.SGD(lr=0.1),
                             target="cuda", device="cpu", output=tmp_path / "train.sdc")
    assert not attention_kernels(tmp_path / "train.sdc")
    loss = step.step(x, target)
    want = F.mse_loss(reference(x), target)
    want.backward()
    torch.testing.assert_close(torch.tensor(loss), want.detach(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- causal masks known at compile time


def tril_slice_ir(dt: str, b: int, h: int, sq: int, sk: int, d: int, positions: int) -> str:
    """GPT-2's attention as its ONNX export writes it: the constant lower-triangular `bias` buffer
    [1, 1, P, P] (a parameter) sliced to the queries' rows [Sk - Sq, Sk) and the keys [0, Sk), then
    where(bias, scores, -1e4)."""
    t = _type
    q, kv, scores = [b, h, sq, d], [b, h, sk, d], [b, h, sq, sk]
    return f"""func.func @main({_arg("q", q, dt)}, {_arg("k", kv, dt)}, {_arg("v", kv, dt)}) -> ({t(q, dt)} {{sdc.name = "o"}}) {{
  %bias = "sdc.parameter"() {{name = "bias"}} : () -> {t([1, 1, positions, positions], "i1")}
  %m = "sdc.slice"(%bias) {{axes = array<i64: 2, 3>, starts = array<i64: {sk - sq}, 0>, ends = array<i64: {sk}, {sk}>, steps = array<i64: 1, 1>}} : ({t([1, 1, positions, positions], "i1")}) -> {t([1, 1, sq, sk], "i1")}
  %c = "sdc.constant"() {{value = dense<{1 / math.sqrt(d)!r}> : tensor<{dt}>}} : () -> tensor<{dt}>
  %fill = "sdc.constant"() {{value = dense<-1.0e4> : tensor<{dt}>}} : () -> tensor<{dt}>
  %s0 = "sdc.matmul"(%q, %k) {{transpose_lhs = false, transpose_rhs = true}} : ({t(q, dt)}, {t(kv, dt)}) -> {t(scores, dt)}
  %s1 = "sdc.mul"(%s0, %c) : ({t(scores, dt)}, tensor<{dt}>) -> {t(scores, dt)}
  %s2 = "sdc.where"(%m, %s1, %fill) : ({t([1, 1, sq, sk], "i1")}, {t(scores, dt)}, tensor<{dt}>) -> {t(scores, dt)}
  %p = "sdc.softmax"(%s2) {{axis = -1 : i64}} : ({t(scores, dt)}) -> {t(scores, dt)}
  %o = "sdc.matmul"(%p, %v) : ({t(scores, dt)}, {t(kv, dt)}) -> {t(q, dt)}
  return %o : {t(q, dt)}
}}
"""


def _source(artifact: Path, kernel: dict) -> str:
    return (artifact / kernel["source"]).read_text()


# (dtype, Sq, Sk) at the plan's tiles: Sq = Sk at odd sizes (bf16 37: one query block, its diagonal keys
# in two blocks; f32 70: two query blocks of 64, the second with two full key blocks of 32 before its
# diagonal), and queries that are the last 21 of 150 positions (a prompt after a cache: two full key
# blocks of 64, then a partial diagonal one)
@pytest.mark.parametrize("dt,sq,sk", [("bf16", 37, 37), ("f32", 70, 70), ("f16", 21, 150)])
def test_a_sliced_tril_constant_is_a_causal_kernel_that_reads_no_mask(dt, sq, sk, tmp_path, rng):
    b, h, d, positions = 1, 2, 32, 160
    bias = torch.ones(1, 1, positions, positions, dtype=torch.bool).tril()
    out = tmp_path / "tril.sdc"
    exe = compile_cuda(tril_slice_ir(dt, b, h, sq, sk, d, positions), out, {"bias": bias})
    (kernel,) = attention_kernels(out)
    assert [a["value"] for a in kernel["args"]] == [v for v in kernel["ops"][0]["inputs"]] + \
        [kernel["ops"][-1]["inputs"][1]]  # q, k and v: no mask tensor
    source = _source(out, kernel)
    assert f"'causal': {sk - sq}" in source and "full_end" in source
    q, k, v = (torch.randn(b, h, n, d, generator=rng).to(TORCH_DTYPE[dt]) for n in (sq, sk, sk))
    (got,) = exe(q, k, v)
    keep = torch.ones(sq, sk, dtype=torch.bool).tril(sk - sq)
    scale = float(torch.tensor(1 / math.sqrt(d)).to(TORCH_DTYPE[dt]))
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=keep, scale=scale)
    if sq == sk:
        torch.testing.assert_close(want, F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                                        is_causal=True, scale=scale))
    assert_close(got, want, dt)


def test_a_constant_mask_that_is_not_causal_keeps_the_mask_tile(tmp_path, rng):
    """A tril buffer with one more key hidden: the general path loads the mask, and the numbers hold."""
    b, h, s, d = 1, 2, 37, 32
    bias = torch.ones(1, 1, 48, 48, dtype=torch.bool).tril()
    bias[..., 30, 3] = False
    out = tmp_path / "holey.sdc"
    exe = compile_cuda(tril_slice_ir("f32", b, h, s, s, d, 48), out, {"bias": bias})
    (kernel,) = attention_kernels(out)
    assert len(kernel["args"]) == 4 and "causal" not in _source(out, kernel)
    q, k, v = (torch.randn(b, h, s, d, generator=rng) for _ in range(3))
    (got,) = exe(q, k, v)
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=bias[..., :s, :s],
                                          scale=float(torch.tensor(1 / math.sqrt(d))))
    assert_close(got, want, "f32")


def test_causal_mask_recognizes_index_compares_and_refuses_other_masks():
    """`causal_mask` on the ops alone: ONNX's trilu of the sequence (col - row >= 1 hides a key, then
    where(future, -1e9, s)) with constant index tensors, torch's additive 0/-inf mask with an offset, and
    a padding mask (None)."""
    import numpy as np

    from sdc.transforms.attention_pattern import causal_mask

    sq, sk = 5, 8
    shape = [2, 2, sq, sk]
    values = {v: {"shape": shape, "dtype": "f32"} for v in ("q", "k", "s", "t", "p", "v", "o")}
    values.update({"row": {"shape": [sq, sk], "dtype": "i64"}, "col": {"shape": [sq, sk], "dtype": "i64"},
                   "diff": {"shape": [sq, sk], "dtype": "i64"}, "future": {"shape": [sq, sk], "dtype": "i1"},
                   "one": {"shape": [], "dtype": "i64"}, "fill": {"shape": [], "dtype": "f32"},
                   "add": {"shape": [sq, sk], "dtype": "f32"}, "pad": {"shape": [2, 1, 1, sk], "dtype": "f32"}})
    row, col = np.indices((sq, sk))
    constants = {"row": row, "col": col, "one": np.array(1 + sk - sq), "fill": np.array(-1e9),
                 "add": np.where(col > row + 3, -np.inf, 0.0), "pad": np.zeros((2, 1, 1, sk))}
    head = [_entry("matmul", ["q", "k"], "s", transpose_rhs=True)]
    tail = [_entry("softmax", ["t"], "p", axis=-1), _entry("matmul", ["p", "v"], "o")]
    trilu = [_entry("sub", ["col", "row"], "diff"), _entry("ge", ["diff", "one"], "future"), *head,
             _entry("where", ["future", "fill", "s"], "t"), *tail]
    found = causal_mask(trilu, match_attention(trilu, values, ["o"]), values, constants.get)
    assert found is not None and found.offset == sk - sq and found.kept == {"future": False}
    additive = [*head, _entry("add", ["s", "add"], "t"), *tail]
    found = causal_mask(additive, match_attention(additive, values, ["o"]), values, constants.get)
    assert found is not None and found.offset == 3 and found.kept == {"add": 0.0}
    padding = [*head, _entry("add", ["s", "pad"], "t"), *tail]
    assert causal_mask(padding, match_attention(padding, values, ["o"]), values, constants.get) is None
    assert causal_mask(trilu, match_attention(trilu, values, ["o"]), values, lambda vid: None) is None
