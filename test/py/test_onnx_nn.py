"""ONNX nn composites (sdc/frontend/onnx_ops_nn.py) end to end against onnxruntime (or onnx's own
reference evaluator for ops newer than onnxruntime), and the reference semantics of the nn ops
(sdc/dialect/ops/nn.py) against independent numpy implementations, on random inputs."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from refcheck import assert_matches, call, random, rng  # noqa: F401 (rng: fixture)

ort = pytest.importorskip("onnxruntime")

_ONNX_TYPES = {np.dtype(k): v for k, v in {
    "float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "float64": TensorProto.DOUBLE,
    "int64": TensorProto.INT64, "int32": TensorProto.INT32, "int8": TensorProto.INT8, "uint8": TensorProto.UINT8,
    "bool": TensorProto.BOOL}.items()}

# End-to-end tolerance (rtol, atol) by output element type: composites reassociate arithmetic.
_E2E_TOL = {np.dtype(np.float64): (1e-9, 1e-11), np.dtype(np.float32): (1e-4, 1e-5),
            np.dtype(np.float16): (5e-3, 5e-3)}


def _model(nodes, feeds, opset, outputs):
    inputs = [helper.make_tensor_value_info(name, _ONNX_TYPES[np.asarray(v).dtype], np.asarray(v).shape)
              for name, v in feeds]
    outs = [helper.make_empty_tensor_value_info(o) for o in outputs]
    graph = helper.make_graph(nodes, "g", inputs, outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    # Output element types as ONNX infers them (onnxruntime wants them declared).
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {vi.name: vi.type.tensor_type.elem_type
             for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
    del model.graph.output[:]
    fallback = _ONNX_TYPES[np.asarray(feeds[0][1]).dtype]
    model.graph.output.extend(helper.make_tensor_value_info(o, types.get(o) or fallback, None) for o in outputs)
    return model


def _expected(model, feeds, reference: str):
    named = dict(feeds)
    if reference == "onnxruntime":
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, named)
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(model).run(None, named)


def check(nodes, feeds, opset, outputs=("y",), reference="onnxruntime"):
    """Compile `nodes` with sdc, run on `feeds`, compare every output with `reference`."""
    from sdc import onnx_backend

    model = _model(nodes, feeds, opset, outputs)
    want = _expected(model, feeds, reference)
    got = onnx_backend.prepare(model).run([v for _, v in feeds])
    assert len(got) == len(want)
    for name, g, w in zip(outputs, got, want):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, f"{name}: {g.dtype}{g.shape}, expected {w.dtype}{w.shape}"
        if w.dtype in _E2E_TOL:
            rtol, atol = _E2E_TOL[w.dtype]
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=name)
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)


def node(op, inputs, outputs=("y",), **attrs):
    return helper.make_node(op, list(inputs), list(outputs), **attrs)


# ---------------------------------------------------------------- attention


def test_attention_gqa_causal_float_mask(rng):
    q, k, v = random(rng, (2, 6, 5, 8)), random(rng, (2, 3, 7, 8)), random(rng, (2, 3, 7, 4))
    mask = random(rng, (1, 5, 7))
    check([node("Attention", ["q", "k", "v", "m"], is_causal=1, scale=0.3)],
          [("q", q), ("k", k), ("v", v), ("m", mask)], 23)


def test_attention_3d_with_cache_and_bool_mask(rng):
    q, k, v = random(rng, (2, 3, 24)), random(rng, (2, 3, 12)), random(rng, (2, 3, 12))
    past_k, past_v = random(rng, (2, 2, 4, 6)), random(rng, (2, 2, 4, 6))
    mask = rng.random((3, 7)) < 0.7
    mask[:, 0] = True
    check([node("Attention", ["q", "k", "v", "m", "pk", "pv"], ["y", "present_k", "present_v", "qk"],
                q_num_heads=4, kv_num_heads=2, softcap=4.0, qk_matmul_output_mode=1)],
          [("q", q), ("k", k), ("v", v), ("m", mask), ("pk", past_k), ("pv", past_v)], 23,
          outputs=("y", "present_k", "present_v", "qk"))


def test_attention_softcap_fully_masked_rows_fp16(rng):
    q, k, v = (random(rng, (1, 2, 3, 8), "f16") for _ in range(3))
    mask = np.array([[False, False, False], [True, False, True], [True, True, True]])
    check([node("Attention", ["q", "k", "v", "m"], ["y", "", "", "p"], softcap=2.0, qk_matmul_output_mode=3,
                softmax_precision=1)],
          [("q", q), ("k", k), ("v", v), ("m", mask)], 24, outputs=("y", "p"))


def test_attention_external_cache(rng):
    q, k, v = random(rng, (3, 4, 2, 8)), random(rng, (3, 2, 6, 8)), random(rng, (3, 2, 6, 8))
    lengths = np.array([2, 6, 4], np.int64)
    check([node("Attention", ["q", "k", "v", "", "", "", "n"], is_causal=1)],
          [("q", q), ("k", k), ("v", v), ("n", lengths)], 24)


# ---------------------------------------------------------------- losses


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_negative_log_likelihood_loss(reduction, rng):
    x = random(rng, (3, 5, 2, 4))
    target = random(rng, (3, 2, 4), "i64", 0, 4)
    target[0, 0, 0] = -1
    weight = random(rng, (5,), "f32", 0.1, 2.0)
    check([node("NegativeLogLikelihoodLoss", ["x", "t", "w"], reduction=reduction, ignore_index=-1)],
          [("x", x), ("t", target), ("w", weight)], 22)


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_softmax_cross_entropy_loss(reduction, rng):
    scores = random(rng, (4, 6, 3))
    labels = random(rng, (4, 3), "i64", 0, 5)
    labels[1, 2] = 2
    check([node("SoftmaxCrossEntropyLoss", ["s", "l"], ["y", "log_prob"], reduction=reduction, ignore_index=2)],
          [("s", scores), ("l", labels)], 13, outputs=("y", "log_prob"))


# ---------------------------------------------------------------- positional, normalization, activations


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding(interleaved, rng):
    x = random(rng, (2, 5, 3 * 8))
    cos, sin = random(rng, (16, 3)), random(rng, (16, 3))
    positions = random(rng, (2, 5), "i64", 0, 15)
    check([node("RotaryEmbedding", ["x", "c", "s", "p"], num_heads=3, rotary_embedding_dim=6,
                interleaved=interleaved)],
          [("x", x), ("c", cos), ("s", sin), ("p", positions)], 23)


def test_normalizations(rng):
    x = random(rng, (2, 6, 3, 4))
    check([node("GroupNormalization", ["x", "scale", "bias"], ["g"], num_groups=3, epsilon=1e-3),
           node("LpNormalization", ["x"], ["l"], axis=1, p=1),
           node("MeanVarianceNormalization", ["x"], ["m"], axes=[0, 2])],
          [("x", x), ("scale", random(rng, (6,))), ("bias", random(rng, (6,)))], 21, outputs=("g", "l", "m"))


def test_lp_pool_ceil_mode_and_dilations(rng):
    x = random(rng, (1, 3, 9, 8))
    check([node("LpPool", ["x"], ["a"], kernel_shape=[3, 2], strides=[2, 2], ceil_mode=1, p=3),
           node("LpPool", ["x"], ["b"], kernel_shape=[2, 2], dilations=[2, 3], pads=[1, 0, 1, 1])],
          [("x", x)], 22, outputs=("a", "b"))


def test_activations(rng):
    x = random(rng, (3, 7))
    check([node("Celu", ["x"], ["c"], alpha=0.7), node("Shrink", ["x"], ["s"], lambd=0.8, bias=0.3)],
          [("x", x)], 18, outputs=("c", "s"))
    check([node("Swish", ["x"], ["w"], alpha=1.7), node("SwiGLU", ["x", "g"], ["y"], alpha=0.6)],
          [("x", x), ("g", random(rng, (3, 7)))], 28, outputs=("w", "y"), reference="onnx")


# ---------------------------------------------------------------- recurrences


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_recurrence_bidirectional_with_lengths(kind, rng):
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    hidden, steps, batch, features = 3, 4, 2, 5
    feeds = [("x", random(rng, (steps, batch, features))), ("w", random(rng, (2, gates * hidden, features), "f32", -1, 1)),
             ("r", random(rng, (2, gates * hidden, hidden), "f32", -1, 1)),
             ("b", random(rng, (2, 2 * gates * hidden), "f32", -1, 1)), ("lens", np.array([4, 2], np.int32)),
             ("h0", random(rng, (2, batch, hidden)))]
    outputs = ["y", "y_h"] + (["y_c"] if kind == "LSTM" else [])
    extra = {"linear_before_reset": 1} if kind == "GRU" else {}
    check([node(kind, [n for n, _ in feeds], outputs, hidden_size=hidden, direction="bidirectional", clip=1.5,
                **extra)],
          feeds, 22, outputs=outputs)


def test_lstm_peepholes_batchwise(rng):
    hidden, steps, batch, features = 3, 3, 2, 4
    feeds = [("x", random(rng, (batch, steps, features))), ("w", random(rng, (1, 4 * hidden, features), "f32", -1, 1)),
             ("r", random(rng, (1, 4 * hidden, hidden), "f32", -1, 1)), ("b", random(rng, (1, 8 * hidden), "f32", -1, 1)),
             ("lens", np.array([3, 3], np.int32)), ("h0", random(rng, (batch, 1, hidden))),
             ("c0", random(rng, (batch, 1, hidden))), ("p", random(rng, (1, 3 * hidden), "f32", -1, 1))]
    # onnxruntime has no batch-major (layout=1) recurrences; onnx's reference has them (without clip).
    check([node("LSTM", [n for n, _ in feeds], ["y", "y_h", "y_c"], hidden_size=hidden, layout=1)],
          feeds, 22, outputs=("y", "y_h", "y_c"), reference="onnx")


# ---------------------------------------------------------------- einsum, transposed and deformable convolution


@pytest.mark.parametrize("equation,shapes", [
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 2)]),
    ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)]),
    ("ii->", [(4, 4)]),
    ("iij,jk->ik", [(3, 3, 4), (4, 2)]),
    ("abc,cd->ba", [(2, 3, 4), (4, 5)]),
    ("i,j->ij", [(3,), (4,)]),
])
def test_einsum(equation, shapes, rng):
    xs = [random(rng, s) for s in shapes]
    feeds = [(f"x{i}", x) for i, x in enumerate(xs)]
    from sdc import onnx_backend

    model = _model([node("Einsum", [n for n, _ in feeds], equation=equation)], feeds, 12, ("y",))
    (got,) = onnx_backend.prepare(model).run(xs)
    want = np.einsum(equation, *[x.astype(np.float64) for x in xs])
    assert_matches(got, want.astype(np.float32), "f32")


@pytest.mark.parametrize("attrs", [
    dict(strides=[2, 3], pads=[1, 0, 2, 1], output_padding=[1, 2]),
    dict(group=2, dilations=[2, 1]),
    dict(strides=[2, 2], output_shape=[9, 10]),
    dict(strides=[2, 1], auto_pad="SAME_LOWER"),
])
def test_conv_transpose(attrs, rng):
    x = random(rng, (2, 4, 4, 5))
    w = random(rng, (4, 3, 3, 2))
    check([node("ConvTranspose", ["x", "w", "b"], **attrs)], [("x", x), ("w", w), ("b", random(rng, (3 * attrs.get("group", 1),)))], 22)


def test_deform_conv_matches_onnx_reference(rng):
    x = random(rng, (1, 4, 6, 5))
    w = random(rng, (4, 2, 2, 3))
    offset = random(rng, (1, 2 * 2 * 3 * 2, 7, 2), "f32", -1.5, 1.5)  # offset groups * kH * kW * 2
    mask = random(rng, (1, 2 * 2 * 3, 7, 2), "f32", 0, 1)
    check([node("DeformConv", ["x", "w", "o", "b", "m"], group=2, offset_group=2, pads=[1, 0, 1, 1], strides=[1, 2])],
          [("x", x), ("w", w), ("o", offset), ("b", random(rng, (4,))), ("m", mask)], 22, reference="onnx")


# ---------------------------------------------------------------- quantization


def test_quantize_dequantize(rng):
    x = random(rng, (3, 4, 6), "f32", -4, 4)
    scale = random(rng, (3, 2, 6), "f32", 0.02, 0.1)
    zero = random(rng, (3, 2, 6), "i8", -10, 10)
    axis_scale = random(rng, (4,), "f32", 0.01, 0.1)
    axis_zero = random(rng, (4,), "ui8", 100, 150)
    check([node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1, block_size=2),
           node("DequantizeLinear", ["q", "s", "z"], ["d"], axis=1, block_size=2),
           node("QuantizeLinear", ["x", "as", "az"], ["qa"], axis=1),
           node("DequantizeLinear", ["qa", "as", "az"], ["da"], axis=1),
           node("DynamicQuantizeLinear", ["x"], ["dq", "ds", "dz"])],
          [("x", x), ("s", scale), ("z", zero), ("as", axis_scale), ("az", axis_zero)], 21,
          outputs=("q", "d", "qa", "da", "dq", "ds", "dz"))


def test_quantized_matmul_and_conv(rng):
    a = random(rng, (2, 3, 4), "ui8", 0, 255)
    b = random(rng, (4, 5), "ui8", 0, 255)
    x = random(rng, (1, 2, 5, 5), "ui8", 0, 255)
    w = random(rng, (3, 2, 3, 3), "ui8", 0, 255)
    f = lambda v: np.array(v, np.float32)  # noqa: E731
    u = lambda v: np.array(v, np.uint8)  # noqa: E731
    check([node("MatMulInteger", ["a", "b", "a_zero", "b_zero"], ["mi"]),
           node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["qm"]),
           node("ConvInteger", ["x", "w", "zx", "zw1"], ["ci"], pads=[1, 1, 0, 0]),
           node("QLinearConv", ["x", "sa", "za", "w", "sw", "zw", "sy", "zy", "bias"], ["qc"], strides=[2, 1])],
          [("a", a), ("b", b), ("a_zero", u(7)), ("b_zero", random(rng, (5,), "ui8", 0, 255)),
           ("sa", f(0.05)), ("za", u(120)), ("sb", f(0.02)), ("zb", u(130)), ("sy", f(2.5)), ("zy", u(128)),
           ("x", x), ("w", w), ("zx", u(125)), ("zw1", u(131)), ("zw", random(rng, (3,), "ui8", 100, 150)),
           ("sw", random(rng, (3,), "f32", 0.01, 0.03)), ("bias", random(rng, (3,), "i32", -500, 500))], 21,
          outputs=("mi", "qm", "ci", "qc"))


def test_matmul_integer_per_row_zero_point(rng):
    """A 1-D zero point of A's row count applies per row (onnxruntime only takes a scalar)."""
    from sdc import onnx_backend

    a, b = random(rng, (2, 3, 4), "i8", -128, 127), random(rng, (4, 5), "i8", -128, 127)
    a_zero, b_zero = random(rng, (3,), "i8", -20, 20), random(rng, (5,), "i8", -20, 20)
    feeds = [("a", a), ("b", b), ("az", a_zero), ("bz", b_zero)]
    model = _model([node("MatMulInteger", ["a", "b", "az", "bz"])], feeds, 10, ("y",))
    (got,) = onnx_backend.prepare(model).run([a, b, a_zero, b_zero])
    want = (a.astype(np.int64) - a_zero[:, None]) @ (b.astype(np.int64) - b_zero)
    assert_matches(got, want.astype(np.int32), "i32")


# ---------------------------------------------------------------- state-space and linear-attention ops (opset 27)


@pytest.mark.parametrize("rule,extra", [("linear", []), ("gated", ["decay"]), ("gated_delta", ["decay", "beta"])])
def test_linear_attention_against_onnx_reference(rule, extra, rng):
    feeds = [("q", random(rng, (2, 5, 4 * 6))), ("k", random(rng, (2, 5, 2 * 6))), ("v", random(rng, (2, 5, 2 * 3))),
             ("state", random(rng, (2, 2, 6, 3)))]
    names = ["q", "k", "v", "state"]
    if "decay" in extra:
        feeds.append(("decay", random(rng, (2, 5, 2), "f32", -0.5, 0.0)))
    names.append("decay" if "decay" in extra else "")
    if "beta" in extra:
        feeds.append(("beta", random(rng, (2, 5, 1), "f32", 0.1, 0.9)))
        names.append("beta")
    check([node("LinearAttention", names, ["y", "s"], q_num_heads=4, kv_num_heads=2, update_rule=rule)],
          feeds, 27, outputs=("y", "s"), reference="onnx")


def test_causal_conv_with_state_against_onnx_reference(rng):
    check([node("CausalConvWithState", ["x", "w", "b", "past"], ["y", "state"], activation="silu")],
          [("x", random(rng, (2, 3, 6))), ("w", random(rng, (3, 1, 4))), ("b", random(rng, (3,))),
           ("past", random(rng, (2, 3, 3)))], 27, outputs=("y", "state"), reference="onnx")


# ---------------------------------------------------------------- control flow


def _graph(name, nodes, inputs, outputs):
    vi = lambda n, t, s: helper.make_tensor_value_info(n, t, s)  # noqa: E731
    return helper.make_graph(nodes, name, [vi(*i) for i in inputs], [vi(*o) for o in outputs])


def test_loop_scan_and_if(rng):
    f32 = TensorProto.FLOAT
    loop_body = _graph("loop", [node("Identity", ["c"], ["c_out"]),
                                node("Mul", ["acc", "x"], ["prod"]), node("Add", ["prod", "x"], ["acc_out"]),
                                node("Identity", ["prod"], ["seq"])],
                       [("i", TensorProto.INT64, []), ("c", TensorProto.BOOL, []), ("acc", f32, [3])],
                       [("c_out", TensorProto.BOOL, []), ("acc_out", f32, [3]), ("seq", f32, [3])])
    scan_body = _graph("scan", [node("Add", ["s", "e"], ["s_out"]), node("Mul", ["s_out", "e"], ["o"])],
                       [("s", f32, [2]), ("e", f32, [2])], [("s_out", f32, [2]), ("o", f32, [2])])
    then_g = _graph("then", [node("Neg", ["x"], ["t"])], [], [("t", f32, [3])])
    else_g = _graph("else", [node("Sqrt", ["x"], ["e"])], [], [("e", f32, [3])])
    x = random(rng, (3,), "f32", 0.5, 1.5)
    check([node("Loop", ["trip", "", "x"], ["acc", "seq"], body=loop_body),
           node("Scan", ["init", "xs"], ["s", "ys"], body=scan_body, num_scan_inputs=1,
                scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1]),
           node("If", ["flag"], ["pick"], then_branch=then_g, else_branch=else_g)],
          [("trip", np.array(4, np.int64)), ("x", x), ("init", random(rng, (2,))), ("xs", random(rng, (2, 5))),
           ("flag", np.array(False))], 16, outputs=("acc", "seq", "s", "ys", "pick"))


# ---------------------------------------------------------------- reference semantics of the nn ops


def _linear_attention_numpy(q, k, v, state, decay, beta, scale, delta):
    """The recurrence one head and one step at a time, in float64."""
    batch, hq, steps, _ = q.shape
    hkv = k.shape[1]
    decay = np.broadcast_to(decay, (batch, hkv, steps, k.shape[3]))
    beta = np.broadcast_to(beta, (batch, hkv, steps, 1))
    out = np.zeros((batch, hq, steps, v.shape[3]))
    s = state.astype(np.float64).copy()
    for b in range(batch):
        for h in range(hkv):
            for t in range(steps):
                s[b, h] *= np.exp(decay[b, h, t])[:, None]
                val = v[b, h, t]
                if delta:
                    val = beta[b, h, t] * (val - s[b, h].T @ k[b, h, t])
                s[b, h] += np.outer(k[b, h, t], val)
                for g in range(hq // hkv):
                    head = h * (hq // hkv) + g
                    out[b, head, t] = scale * q[b, head, t] @ s[b, h]
    return out, s


@pytest.mark.parametrize("delta", [False, True])
def test_linear_attention_reference(delta, rng):
    q, k, v = random(rng, (2, 4, 3, 5)), random(rng, (2, 2, 3, 5)), random(rng, (2, 2, 3, 6))
    state = random(rng, (2, 2, 5, 6))
    decay = random(rng, (1, 2, 3, 5), "f32", -1, 0)
    beta = random(rng, (2, 1, 3, 1), "f32", 0, 1)
    out, final = call("linear_attention", q, k, v, state, decay, beta, scale=0.4, delta=delta)
    want_out, want_state = _linear_attention_numpy(*(a.astype(np.float64) for a in (q, k, v, state, decay, beta)),
                                                   0.4, delta)
    assert_matches(out, want_out.astype(np.float32), "f32")
    assert_matches(final, want_state.astype(np.float32), "f32")


def _conv_transpose_numpy(x, w, strides, pads, dilations, output_padding, groups):
    """Scatter-add of every input element times the kernel, then crop the pads."""
    n, c, *size = x.shape
    per_group = w.shape[1]
    dims = len(size)
    full = [(size[i] - 1) * strides[i] + dilations[i] * (w.shape[2 + i] - 1) + 1 + output_padding[i]
            for i in range(dims)]
    out = np.zeros((n, per_group * groups, *full))
    for ci in range(c):
        g = ci // (c // groups)
        for pos in np.ndindex(*size):
            for tap in np.ndindex(*w.shape[2:]):
                at = tuple(pos[i] * strides[i] + tap[i] * dilations[i] for i in range(dims))
                for co in range(per_group):
                    out[(slice(None), g * per_group + co) + at] += x[(slice(None), ci) + pos] * w[(ci, co) + tap]
    crop = tuple(slice(pads[i], full[i] - pads[dims + i] if pads[dims + i] else None) for i in range(dims))
    return out[(slice(None), slice(None)) + crop]


@pytest.mark.parametrize("strides,pads,dilations,output_padding,groups", [
    ([2], [1, 0], [1], [1], 1),
    ([1, 2], [0, 1, 1, 0], [2, 1], [0, 1], 2),
])
def test_conv_transpose_reference(strides, pads, dilations, output_padding, groups, rng):
    dims = len(strides)
    x = random(rng, (2, 4) + (4,) * dims)
    w = random(rng, (4, 3) + (3,) * dims)
    got = call("conv_transpose", x, w, strides=strides, pads=pads, dilations=dilations,
               output_padding=output_padding, groups=groups)
    want = _conv_transpose_numpy(x.astype(np.float64), w.astype(np.float64), strides, pads, dilations,
                                 output_padding, groups)
    assert_matches(got, want.astype(np.float32), "f32")


def _bilinear(image, y, x):
    h, w = image.shape
    y0, x0 = math.floor(y), math.floor(x)
    total = 0.0
    for yy, xx in ((y0, x0), (y0, x0 + 1), (y0 + 1, x0), (y0 + 1, x0 + 1)):
        if 0 <= yy < h and 0 <= xx < w:
            total += image[yy, xx] * (1 - abs(y - yy)) * (1 - abs(x - xx))
    return total


def test_deform_conv_reference(rng):
    x = random(rng, (1, 4, 5, 6))
    w = random(rng, (2, 2, 2, 2))
    groups, offset_groups, (sh, sw), (ph, pw), (dh, dw) = 2, 2, (1, 2), (1, 0), (2, 1)
    out_h, out_w = (5 + 2 * ph - dh - 1) // sh + 1, (6 + 2 * pw - dw - 1) // sw + 1
    offset = random(rng, (1, offset_groups * 4 * 2, out_h, out_w), "f32", -2, 2)
    mask = random(rng, (1, offset_groups * 4, out_h, out_w), "f32", 0, 1)
    got = call("deform_conv", x, w, offset, mask, strides=[sh, sw], pads=[ph, pw, ph, pw], dilations=[dh, dw],
               groups=groups, offset_groups=offset_groups)
    want = np.zeros((1, 2, out_h, out_w))
    for o in range(2):
        g = o // (2 // groups)
        for i in range(out_h):
            for j in range(out_w):
                for cl in range(2):
                    c = g * 2 + cl
                    og = c // (4 // offset_groups)
                    for a in range(2):
                        for b in range(2):
                            tap = og * 4 + a * 2 + b
                            y = i * sh - ph + a * dh + offset[0, 2 * tap, i, j]
                            xx = j * sw - pw + b * dw + offset[0, 2 * tap + 1, i, j]
                            want[0, o, i, j] += w[o, cl, a, b] * mask[0, tap, i, j] * _bilinear(
                                x[0, c].astype(np.float64), float(y), float(xx))
    assert_matches(got, want.astype(np.float32), "f32")


@pytest.mark.parametrize("groups", [2, 4])
def test_channel_shuffle_between_convolutions(groups, rng):
    """ShuffleNet's unit: grouped 1x1 convolution, channel shuffle (Reshape, Transpose, Reshape), depthwise
    3x3 convolution, with weights as initializers (so the layout pass runs the convolutions channels-last
    and the shuffle, now a gather, with them), against onnxruntime at two batch sizes."""
    import sdc
    from sdc import onnx_backend

    c = 6 * groups
    weights = {"w1": rng.standard_normal((c, c // groups, 1, 1)).astype(np.float32),
               "w2": rng.standard_normal((c, 1, 3, 3)).astype(np.float32),
               "b2": rng.standard_normal(c).astype(np.float32),
               "split": np.array([0, groups, c // groups, 9, 9], np.int64),
               "join": np.array([0, c, 9, 9], np.int64)}
    nodes = [node("Conv", ["x", "w1"], ["a"], group=groups), node("Relu", ["a"], ["r"]),
             node("Reshape", ["r", "split"], ["s"]), node("Transpose", ["s"], ["t"], perm=[0, 2, 1, 3, 4]),
             node("Reshape", ["t", "join"], ["u"]),
             node("Conv", ["u", "w2", "b2"], ["y"], group=c, pads=[1, 1, 1, 1])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, 9, 9])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    prepared = onnx_backend.prepare(model)
    import json

    # one gather, no transpose, and layout casts of the input and the result only (not around the shuffle)
    plan = json.dumps(sdc.compile(model).artifact.plan)
    assert plan.count('"gather"') == 1 and '"transpose"' not in plan and plan.count("layout_cast") <= 2
    for batch in (1, 3):
        x = rng.standard_normal((batch, c, 9, 9)).astype(np.float32)
        (got,), (want,) = prepared.run([x]), session.run(None, {"x": x})
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
