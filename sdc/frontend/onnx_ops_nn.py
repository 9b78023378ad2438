"""ONNX neural-network composites: attention, losses, normalizations, recurrences (a NodeImporter mixin).

Most ops here decompose into existing sdc ops (matmul, softmax, where, reductions, ...), so that
fusion sees ordinary elementwise and contraction kernels. The ONNX semantics each method follows
are the op's function body where the spec has one, and `onnx.reference` otherwise.
"""

from __future__ import annotations

import math

import numpy as np

from sdc.dialect import symbolic
from sdc.dialect.shapes import ShapeError
from sdc.frontend.builder import CompileTimeValueError
from sdc.frontend.onnx_common import DEFAULT_DOMAINS, ONNX_DTYPES, ONNX_FLOAT_TYPES, normalize_axis, tensor_value
from sdc.frontend.values import V, const_value, is_int, sym_int


def _prod(dims) -> object:
    return sym_int(symbolic.product(dims))


class NNOps:
    """Methods `op_<OpType>(self, node, inputs, attrs)`; emitting through `self.b` (sdc/frontend/builder.py)."""

    # ---------------------------------------------------------------- small helpers

    def _nn_inputs(self, inputs, n: int) -> list:
        return (list(inputs) + [None] * n)[:n]

    def _nn_wanted(self, node, i: int) -> bool:
        return len(node.output) > i and bool(node.output[i])

    def _nn_full(self, value, like: V, shape: list) -> V:
        """A tensor of `shape` filled with `value`, in `like`'s element type (a run-time broadcast,
        so that a big fill does not become a weight)."""
        return self.b.broadcast(self.b.scalar_like(value, like), shape, fold=False)

    def _nn_ints(self, array, shape=None) -> V:
        a = np.asarray(array, dtype=np.int64)
        return self.b.const(a if shape is None else a.reshape(shape))

    def _nn_arange(self, n, shape: list, dimension: int) -> V:
        """0..n-1 along `dimension` of a tensor of `shape` whose other dims are 1 (i64)."""
        if is_int(n):
            view = [1] * len(shape)
            view[dimension] = n
            return self._nn_ints(np.arange(n), view)
        return self.b.iota(list(shape), dimension, "i64")

    def _nn_dim_value(self, d) -> V:
        """A dim (int or symbolic) as an i64 value of shape [1] (a symbolic one becomes sdc.dim_values)."""
        if is_int(d):
            return self._nn_ints([d])
        return const_value(np.array([d], dtype=object))

    def _nn_heads(self, x: V, heads: int, what: str) -> V:
        """[B, S, H*D] -> [B, H, S, D]."""
        b, s, hidden = x.sym
        if is_int(hidden) and hidden % heads:
            raise ShapeError(f"{what} hidden size {hidden} is not divisible by {heads} heads")
        y = self.b.reshape(x, [b, s, heads, hidden // heads if is_int(hidden) else sym_int(hidden / heads)])
        return self.b.emit("transpose", [y], perm=[0, 2, 1, 3])

    def _nn_merge_heads(self, x: V) -> V:
        """[B, H, S, D] -> [B, S, H*D]."""
        b, h, s, d = x.sym
        y = self.b.emit("transpose", [x], perm=[0, 2, 1, 3])
        return self.b.reshape(y, [b, s, sym_int(h * d)])

    # ---------------------------------------------------------------- attention

    def op_Attention(self, node, inputs, attrs):
        q, k, v, mask, past_k, past_v, nonpad = self._nn_inputs(inputs, 7)
        if (past_k is None) != (past_v is None):
            raise ShapeError("past_key and past_value must be given together")
        if nonpad is not None and past_k is not None:
            raise ShapeError("nonpad_kv_seqlen cannot be combined with past_key/past_value")
        if not q.rank == k.rank == v.rank or q.rank not in (3, 4):
            raise ShapeError(f"Q, K and V must all be 3-D or all 4-D, found ranks {q.rank}, {k.rank}, {v.rank}")
        three_d = q.rank == 3
        if three_d:
            if "q_num_heads" not in attrs or "kv_num_heads" not in attrs:
                raise ShapeError("3-D Q, K, V need the q_num_heads and kv_num_heads attributes")
            q = self._nn_heads(q, attrs["q_num_heads"], "Q")
            k = self._nn_heads(k, attrs["kv_num_heads"], "K")
            v = self._nn_heads(v, attrs["kv_num_heads"], "V")
        if past_k is not None:
            k = self.b.emit("concat", [past_k, k], axis=2)
            v = self.b.emit("concat", [past_v, v], axis=2)
        present_k, present_v = k, v
        _, hq, sq, dq = q.sym
        hkv, sk = k.sym[1], k.sym[2]
        if not (is_int(hq) and is_int(hkv)):
            raise ShapeError(f"head counts must be static, found {hq} query and {hkv} key/value heads")
        if hq % hkv:
            raise ShapeError(f"query heads ({hq}) must be a multiple of key/value heads ({hkv})")
        if "scale" in attrs:
            scale = attrs["scale"]
        elif is_int(dq):
            scale = 1.0 / math.sqrt(dq)
        else:
            raise ShapeError("the default scale needs a static head size")
        # Q and K are each scaled by sqrt(scale) before the product, as the spec prescribes.
        root = self.b.scalar_like(math.sqrt(scale), q)
        q = self.b.emit("mul", [q, root])
        k = self.b.emit("mul", [k, root])

        scores = self._nn_grouped_matmul(q, k, hq, hkv, transpose_rhs=True)
        raw = scores
        softcap = attrs.get("softcap", 0.0)
        if softcap > 0:
            cap = self.b.scalar_like(softcap, scores)
            scores = self.b.emit("mul", [self.b.emit("tanh", [self.b.emit("div", [scores, cap])]), cap])
        capped = scores
        bias, maybe_empty_rows = self._nn_attention_bias(q.dtype, mask, past_k, nonpad, sq, sk, attrs)
        if bias is not None:
            scores = self.b.emit("add", [scores, bias])
        with_bias = scores
        precision = attrs.get("softmax_precision")
        if precision is not None:
            if precision not in ONNX_FLOAT_TYPES:
                raise ShapeError(f"softmax_precision {precision} is not a float type (1, 10, 11 or 16)")
            scores = self.b.cast(scores, ONNX_FLOAT_TYPES[precision])
        probs = self.b.emit("softmax", [scores], axis=-1)
        if maybe_empty_rows:
            # A row with every key masked softmaxes to NaN; the spec makes it a zero row.
            peak = self.b.emit("reduce_max", [bias], axes=[-1], keepdims=True)
            empty = self.b.emit("eq", [peak, self.b.scalar_like(-math.inf, bias)])
            probs = self.b.emit("where", [empty, self.b.scalar_like(0, probs), probs])
        probs = self.b.cast(probs, q.dtype)
        y = self._nn_grouped_matmul(probs, v, hq, hkv, transpose_rhs=False)
        if three_d:
            y = self._nn_merge_heads(y)
        outs = [y, present_k, present_v]
        if self._nn_wanted(node, 3):
            mode = attrs.get("qk_matmul_output_mode", 0)
            outs.append({0: raw, 1: capped, 2: with_bias, 3: probs}.get(mode, raw))
        return outs

    def _nn_grouped_matmul(self, a: V, b: V, hq: int, hkv: int, transpose_rhs: bool) -> V:
        """a [B, Hq, M, K] times b [B, Hkv, K, N] (or its transpose), each K/V head serving Hq/Hkv
        consecutive query heads (grouped-query attention), without materializing repeated K/V."""
        if hq == hkv:
            return self.b.emit("matmul", [a, b], transpose_rhs=transpose_rhs)
        group = hq // hkv
        batch, _, m, _ = a.sym
        a5 = self.b.reshape(a, [batch, hkv, group, m, a.sym[3]])
        b5 = self.b.emit("unsqueeze", [b], axes=[2])
        out = self.b.emit("matmul", [a5, b5], transpose_rhs=transpose_rhs)
        return self.b.reshape(out, [batch, hq, m, out.sym[-1]])

    def _nn_attention_bias(self, dtype: str, mask, past_k, nonpad, sq, sk, attrs) -> tuple[V | None, bool]:
        """The additive attention bias (0 where a key is attended, -inf where not, plus a float mask),
        and whether some query row might have every key masked."""
        like = V(dtype, ())
        allowed = None  # i1, broadcastable to [B, H, Sq, Sk]
        float_mask = None

        def both(a, b):
            return b if a is None else self.b.emit("and", [a, b])

        if mask is not None:
            width = mask.sym[-1]
            if not (is_int(width) and is_int(sk)) and not symbolic.equal(sk, width):
                raise ShapeError("attn_mask's key length must be static when it differs from the keys'")
            short = sym_int(sk - width)
            if is_int(short) and short < 0:
                raise ShapeError(f"attn_mask covers {width} keys, more than the {sk} keys")
            if mask.dtype == "i1":
                if short:
                    mask = self.b.emit("pad", [mask], pads=[0] * (2 * mask.rank - 1) + [short], value=0.0)
                allowed = mask
            else:
                if short:
                    mask = self.b.emit("pad", [mask], pads=[0] * (2 * mask.rank - 1) + [short], value=-math.inf)
                float_mask = self.b.cast(mask, dtype)

        causal = bool(attrs.get("is_causal", 0))
        left, right = attrs.get("left_window_size", -1), attrs.get("right_window_size", -1)
        if causal or left >= 0 or right >= 0:
            # distance = (i + offset) - j for query i and key j; offset counts the keys before the queries.
            rows = self._nn_arange(sq, [sq, 1], 0)
            cols = self._nn_arange(sk, [1, sk], 1)
            if past_k is not None:
                rows = self.b.emit("add", [rows, self._nn_dim_value(past_k.sym[2])])
            elif nonpad is not None:
                offset = self.b.emit("sub", [self.b.cast(nonpad, "i64"), self._nn_dim_value(sq)])
                rows = self.b.emit("add", [rows, self.b.reshape(offset, [nonpad.sym[0], 1, 1, 1])])
            distance = self.b.emit("sub", [rows, cols])
            if causal:
                allowed = both(allowed, self.b.emit("ge", [distance, self._nn_ints(0)]))
            if left >= 0:
                allowed = both(allowed, self.b.emit("le", [distance, self._nn_ints(left)]))
            if right >= 0:
                allowed = both(allowed, self.b.emit("ge", [distance, self._nn_ints(-right)]))
        if nonpad is not None:
            keys = self._nn_arange(sk, [1, 1, 1, sk], 3)
            lengths = self.b.reshape(self.b.cast(nonpad, "i64"), [nonpad.sym[0], 1, 1, 1])
            allowed = both(allowed, self.b.emit("lt", [keys, lengths]))

        bias = None
        if allowed is not None:
            bias = self.b.emit("where", [allowed, self.b.scalar_like(0, like), self.b.scalar_like(-math.inf, like)])
        if float_mask is not None:
            bias = float_mask if bias is None else self.b.emit("add", [float_mask, bias])
        if bias is None:
            return None, False
        if bias.is_const:
            peak = bias.as_torch().float().amax(dim=-1) if bias.rank else bias.as_torch().float()
            return bias, bool((peak == -math.inf).any())
        return bias, True

    # ---------------------------------------------------------------- losses

    def op_NegativeLogLikelihoodLoss(self, node, inputs, attrs):
        x, target, weight = self._nn_inputs(inputs, 3)
        return self._nn_nll(x, target, weight, attrs)

    def op_SoftmaxCrossEntropyLoss(self, node, inputs, attrs):
        scores, labels, weights = self._nn_inputs(inputs, 3)
        if scores.rank < 2:
            raise ShapeError(f"scores must have rank >= 2 (N, C, ...), found rank {scores.rank}")
        log_prob = self.b.emit("log_softmax", [scores], axis=1)
        loss = self._nn_nll(log_prob, labels, weights, attrs)
        return [loss, log_prob] if self._nn_wanted(node, 1) else [loss]

    def _nn_nll(self, x: V, target: V, weight: V | None, attrs) -> V:
        """-x[n, target[n, d...], d...] (times weight[target]), zero where target == ignore_index,
        then reduced: none, sum, or mean weighted by the weights that applied."""
        if x.rank < 2:
            raise ShapeError(f"input must have rank >= 2 (N, C, ...), found rank {x.rank}")
        if target.rank != x.rank - 1:
            raise ShapeError(f"target must have rank {x.rank - 1} (N, d1, ...), found rank {target.rank}")
        reduction = attrs.get("reduction", "mean")
        if reduction not in ("none", "sum", "mean"):
            raise ShapeError(f"reduction must be none, sum or mean, found '{reduction}'")
        ignore = attrs.get("ignore_index")
        target = self.b.cast(target, "i64")
        classes = x.sym[1]
        # The class picked per sample, as a one-hot comparison: a target out of range (the usual
        # ignore_index) picks nothing, and the sum over classes stays exact.
        picked_mask = self.b.emit("eq", [self.b.emit("unsqueeze", [target], axes=[1]),
                                         self._nn_arange(classes, [1, classes] + [1] * (x.rank - 2), 1)])
        picked = self.b.emit("reduce_sum", [self.b.emit("where", [picked_mask, x, self.b.scalar_like(0, x)])], axes=[1])
        loss = self.b.emit("neg", [picked])
        keep = None if ignore is None else self.b.emit("ne", [target, self._nn_ints(ignore)])
        zero = self.b.scalar_like(0, x)
        applied = None  # the per-sample weights that apply, for the weighted mean
        if weight is not None:
            safe = target if keep is None else self.b.emit("where", [keep, target, self._nn_ints(0)])
            applied = self.b.emit("gather", [weight, safe], axis=0)
            if keep is not None:
                applied = self.b.emit("where", [keep, applied, zero])
            loss = self.b.emit("mul", [loss, applied])
        elif keep is not None:
            loss = self.b.emit("where", [keep, loss, zero])
            applied = self.b.emit("where", [keep, self.b.scalar_like(1, x), zero])
        if reduction == "none":
            return loss
        total = self.b.emit("reduce_sum", [loss], axes=[])
        if reduction == "sum":
            return total
        if applied is None:
            return self.b.emit("reduce_mean", [loss], axes=[])
        return self.b.emit("div", [total, self.b.emit("reduce_sum", [applied], axes=[])])

    # ---------------------------------------------------------------- activations

    def _nn_swish(self, x: V, alpha: float) -> V:
        if alpha == 1.0:
            return self.b.emit("silu", [x])
        gate = self.b.emit("sigmoid", [self.b.emit("mul", [x, self.b.scalar_like(alpha, x)])])
        return self.b.emit("mul", [x, gate])

    def op_Swish(self, node, inputs, attrs):
        return self._nn_swish(inputs[0], attrs.get("alpha", 1.0))

    def op_SwiGLU(self, node, inputs, attrs):
        a, b = inputs[0], inputs[1]
        if a.dtype != b.dtype:
            raise ShapeError(f"SwiGLU inputs differ in element type: A is {a.dtype}, B is {b.dtype}")
        if a.rank != b.rank:
            raise ShapeError(f"SwiGLU inputs differ in rank: A has {a.rank}, B has {b.rank} (no broadcasting)")
        return self.b.emit("mul", [self._nn_swish(a, attrs.get("alpha", 1.0)), b])

    def op_Celu(self, node, inputs, attrs):
        x = inputs[0]
        alpha = attrs.get("alpha", 1.0)
        # max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) is elu(x / alpha) * alpha.
        scaled = x if alpha == 1.0 else self.b.emit("div", [x, self.b.scalar_like(alpha, x)])
        y = self.b.emit("elu", [scaled], alpha=1.0)
        return y if alpha == 1.0 else self.b.emit("mul", [y, self.b.scalar_like(alpha, x)])

    def op_Shrink(self, node, inputs, attrs):
        x = inputs[0]
        lambd, bias = attrs.get("lambd", 0.5), attrs.get("bias", 0.0)
        lam = self.b.scalar_like(lambd, x)
        low = self.b.emit("lt", [x, self.b.scalar_like(-lambd, x)])
        high = self.b.emit("gt", [x, lam])
        b = self.b.scalar_like(bias, x)
        upper = self.b.emit("where", [high, self.b.emit("sub", [x, b]), self.b.scalar_like(0, x)])
        return self.b.emit("where", [low, self.b.emit("add", [x, b]), upper])

    # ---------------------------------------------------------------- normalizations

    def op_LpNormalization(self, node, inputs, attrs):
        x = inputs[0]
        p, axis = attrs.get("p", 2), attrs.get("axis", -1)
        if p not in (1, 2):
            raise ShapeError(f"LpNormalization supports p = 1 or 2, found {p}")
        if p == 1:
            norm = self.b.emit("reduce_sum", [self.b.emit("abs", [x])], axes=[axis], keepdims=True)
        else:
            squares = self.b.emit("reduce_sum", [self.b.emit("mul", [x, x])], axes=[axis], keepdims=True)
            norm = self.b.emit("sqrt", [squares])
        zero = self.b.scalar_like(0, x)
        # A zero norm gives a zero output, not 0/0.
        is_zero = self.b.emit("eq", [norm, zero])
        safe = self.b.emit("where", [is_zero, self.b.scalar_like(1, x), norm])
        return self.b.emit("where", [is_zero, zero, self.b.emit("div", [x, safe])])

    def op_MeanVarianceNormalization(self, node, inputs, attrs):
        x = inputs[0]
        axes = list(attrs.get("axes", [0, 2, 3]))
        mean = self.b.emit("reduce_mean", [x], axes=axes, keepdims=True)
        mean_sq = self.b.emit("reduce_mean", [self.b.emit("mul", [x, x])], axes=axes, keepdims=True)
        var = self.b.emit("sub", [mean_sq, self.b.emit("mul", [mean, mean])])
        std = self.b.emit("add", [self.b.emit("sqrt", [var]), self.b.scalar_like(1e-9, x)])
        return self.b.emit("div", [self.b.emit("sub", [x, mean]), std])

    def op_GroupNormalization(self, node, inputs, attrs):
        x, scale, bias = inputs[0], inputs[1], inputs[2]
        groups = attrs["num_groups"]
        if x.rank < 2:
            raise ShapeError(f"input must have rank >= 2 (N, C, ...), found rank {x.rank}")
        n, c = x.sym[0], x.sym[1]
        if is_int(c) and c % groups:
            raise ShapeError(f"{c} channels do not divide into {groups} groups")
        stash = ONNX_FLOAT_TYPES.get(attrs.get("stash_type", 1), "f32")
        work = self.b.cast(x, stash) if x.dtype in ("f16", "bf16") else x  # stage one in stash_type
        grouped = self.b.reshape(work, [n, groups, -1])
        mean = self.b.emit("reduce_mean", [grouped], axes=[2], keepdims=True)
        centered = self.b.emit("sub", [grouped, mean])
        var = self.b.emit("reduce_mean", [self.b.emit("mul", [centered, centered])], axes=[2], keepdims=True)
        eps = self.b.scalar_like(attrs.get("epsilon", 1e-5), work)
        normed = self.b.emit("mul", [centered, self.b.emit("rsqrt", [self.b.emit("add", [var, eps])])])
        normed = self.b.cast(self.b.reshape(normed, list(x.sym)), x.dtype)
        per_channel = [1, c] + [1] * (x.rank - 2)
        if scale.sym and is_int(scale.sym[0]) and scale.sym[0] == groups and groups != c:
            # Opset 18: one scale and bias per group; each applies to the group's channels.
            per_group = c // groups if is_int(c) else sym_int(c / groups)
            scale = self.b.reshape(self.b.broadcast(self.b.reshape(scale, [groups, 1]), [groups, per_group]), [c])
            bias = self.b.reshape(self.b.broadcast(self.b.reshape(bias, [groups, 1]), [groups, per_group]), [c])
        y = self.b.emit("mul", [normed, self.b.reshape(scale, per_channel)])
        return self.b.emit("add", [y, self.b.reshape(bias, per_channel)])

    # ---------------------------------------------------------------- pooling

    def op_LpPool(self, node, inputs, attrs):
        x = inputs[0]
        n = x.rank - 2
        kernel = list(attrs["kernel_shape"])
        strides = list(attrs.get("strides", [1] * n))
        dilations = list(attrs.get("dilations", [1] * n))
        pads = self._spatial_pads(x, kernel, strides, dilations, attrs)
        p = attrs.get("p", 2)
        channels = x.sym[1]
        if not is_int(channels):
            raise ShapeError("LpPool needs a static channel count")
        if attrs.get("ceil_mode", 0):
            pads = self._nn_ceil_pads(x, kernel, strides, dilations, pads)
        # The window sum of |x|^p is a depthwise convolution with a kernel of ones.
        powered = self.b.emit("pow", [self.b.emit("abs", [x]), self.b.scalar_like(p, x)])
        ones = self.b.const(np.ones([channels, 1] + kernel), x.dtype) if x.dtype != "bf16" else self.b.cast(
            self.b.const(np.ones([channels, 1] + kernel), "f32"), "bf16")
        summed = self.b.emit("conv", [powered, ones], strides=strides, pads=pads, dilations=dilations, groups=channels)
        return self.b.emit("pow", [summed, self.b.scalar_like(1.0 / p, x)])

    def _nn_ceil_pads(self, x: V, kernel, strides, dilations, pads) -> list[int]:
        """End pads that make floor-mode window arithmetic give the ceil-mode output size
        (a last window must start inside the input or its begin padding)."""
        n = len(kernel)
        pads = list(pads)
        for i in range(n):
            size = x.sym[2 + i]
            if not is_int(size):
                raise ShapeError("ceil_mode on a dynamic spatial dim is unsupported")
            span = dilations[i] * (kernel[i] - 1) + 1
            total = size + pads[i] + pads[n + i]
            out = -(-(total - span) // strides[i]) + 1
            if (out - 1) * strides[i] >= size + pads[i]:
                out -= 1
            needed = (out - 1) * strides[i] + span
            pads[n + i] += max(0, needed - total)
        return pads

    # ---------------------------------------------------------------- positional and sequence ops

    def op_RotaryEmbedding(self, node, inputs, attrs):
        x, cos, sin, positions = self._nn_inputs(inputs, 4)
        if x.rank == 4:
            heads_axis = 1  # [B, H, S, D]: rotate in place, the caches broadcast over heads
            work = x
        elif x.rank == 3:
            heads = attrs.get("num_heads", 0)
            if not heads:
                raise ShapeError("a 3-D input needs the num_heads attribute")
            b, s, hidden = x.sym
            work = self.b.reshape(x, [b, s, heads, hidden // heads if is_int(hidden) else sym_int(hidden / heads)])
            heads_axis = 2  # [B, S, H, D]
        else:
            raise ShapeError(f"input must be 3-D or 4-D, found rank {x.rank}")
        head = work.sym[3]
        rot = attrs.get("rotary_embedding_dim", 0) or head
        if not is_int(rot) or rot % 2:
            raise ShapeError(f"rotary_embedding_dim must be a static even number, found {rot}")
        if positions is not None:
            cos = self.b.emit("gather", [cos, positions], axis=0)
            sin = self.b.emit("gather", [sin, positions], axis=0)
        if cos.rank != 3 or sin.rank != 3:
            raise ShapeError(f"cos/sin caches must be [batch, seq, rot/2] after position lookup, found rank {cos.rank}")
        if is_int(cos.sym[-1]) and cos.sym[-1] != rot // 2:
            raise ShapeError(f"cos cache has {cos.sym[-1]} entries per position, rotary_embedding_dim/2 is {rot // 2}")
        cos = self.b.emit("unsqueeze", [cos], axes=[heads_axis])
        sin = self.b.emit("unsqueeze", [sin], axes=[heads_axis])
        interleaved = bool(attrs.get("interleaved", 0))
        if interleaved:
            x1 = self.b.emit("slice", [work], starts=[0], ends=[rot], axes=[3], steps=[2])
            x2 = self.b.emit("slice", [work], starts=[1], ends=[rot], axes=[3], steps=[2])
        else:
            x1 = self.b.emit("slice", [work], starts=[0], ends=[rot // 2], axes=[3], steps=[1])
            x2 = self.b.emit("slice", [work], starts=[rot // 2], ends=[rot], axes=[3], steps=[1])
        real = self.b.emit("sub", [self.b.emit("mul", [cos, x1]), self.b.emit("mul", [sin, x2])])
        imag = self.b.emit("add", [self.b.emit("mul", [sin, x1]), self.b.emit("mul", [cos, x2])])
        if interleaved:
            pairs = self.b.emit("concat", [self.b.emit("unsqueeze", [real], axes=[4]),
                                           self.b.emit("unsqueeze", [imag], axes=[4])], axis=4)
            rotated = self.b.reshape(pairs, list(work.sym[:3]) + [rot])
        else:
            rotated = self.b.emit("concat", [real, imag], axis=3)
        if not (is_int(head) and head == rot):
            rest = self.b.emit("slice", [work], starts=[rot], ends=[head if is_int(head) else 2**63 - 1],
                               axes=[3], steps=[1])
            rotated = self.b.emit("concat", [rotated, rest], axis=3)
        return rotated if x.rank == 4 else self.b.reshape(rotated, list(x.sym))

    def op_CausalConvWithState(self, node, inputs, attrs):
        x, weight, bias, past = self._nn_inputs(inputs, 4)
        activation = attrs.get("activation", "none")
        if activation not in ("none", "silu", "swish"):
            raise ShapeError(f"activation must be none, silu or swish, found '{activation}'")
        if x.rank != 3 or weight.rank != 3:
            raise ShapeError(f"input and weight must be rank 3, found ranks {x.rank} and {weight.rank}")
        batch, channels, _ = x.sym
        k = weight.sym[2]
        if not (is_int(k) and is_int(channels)):
            raise ShapeError("CausalConvWithState needs a static kernel size and channel count")
        if past is None:
            past = self._nn_full(0, x, [batch, channels, k - 1])
        padded = self.b.emit("concat", [past, x], axis=2) if k > 1 else x
        y = self.b.emit("conv", [padded, weight], strides=[1], pads=[0, 0], dilations=[1], groups=channels)
        if bias is not None:
            y = self.b.emit("add", [y, self.b.reshape(bias, [1, channels, 1])])
        if activation != "none":
            y = self.b.emit("silu", [y])
        # The new state is the last k - 1 positions of past + input (empty for k = 1).
        start, end = (-(k - 1), 2**63 - 1) if k > 1 else (0, 0)
        state = self.b.emit("slice", [padded], starts=[start], ends=[end], axes=[2], steps=[1])
        return [y, state]

    def op_LinearAttention(self, node, inputs, attrs):
        q, k, v, past, decay, beta = self._nn_inputs(inputs, 6)
        rule = attrs.get("update_rule", "gated_delta")
        if rule not in ("linear", "gated", "delta", "gated_delta"):
            raise ShapeError(f"update_rule must be linear, gated, delta or gated_delta, found '{rule}'")
        gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
        if gated != (decay is not None):
            raise ShapeError(f"update_rule '{rule}' {'needs' if gated else 'forbids'} the decay input")
        if delta != (beta is not None):
            raise ShapeError(f"update_rule '{rule}' {'needs' if delta else 'forbids'} the beta input")
        if "q_num_heads" not in attrs or "kv_num_heads" not in attrs:
            raise ShapeError("LinearAttention needs the q_num_heads and kv_num_heads attributes")
        hq, hkv = attrs["q_num_heads"], attrs["kv_num_heads"]
        if hq <= 0 or hkv <= 0 or hq % hkv:
            raise ShapeError(f"q_num_heads ({hq}) must be a positive multiple of kv_num_heads ({hkv})")
        for name, x in (("query", q), ("key", k), ("value", v)):
            if x.rank != 3:
                raise ShapeError(f"{name} must be rank 3 (B, T, H*D), found rank {x.rank}")
        q4, k4, v4 = self._nn_heads(q, hq, "query"), self._nn_heads(k, hkv, "key"), self._nn_heads(v, hkv, "value")
        batch, _, steps, dk = q4.sym
        dv = v4.sym[3]
        if decay is None:  # no gating: exp(0) = 1
            decay4 = self.b.reshape(self.b.scalar_like(0, q), [1, 1, 1, 1])
        elif decay.rank == 3 and is_int(decay.sym[2]) and decay.sym[2] == hkv:
            decay4 = self.b.emit("transpose", [self.b.emit("unsqueeze", [decay], axes=[3])], perm=[0, 2, 1, 3])
        else:
            decay4 = self._nn_heads(decay, hkv, "decay")
        if beta is None:  # read only by the delta rules, which require it
            beta4 = self.b.reshape(self.b.scalar_like(1, q), [1, 1, 1, 1])
        else:
            if beta.rank != 3:
                raise ShapeError(f"beta must be rank 3 (B, T, H or 1), found rank {beta.rank}")
            beta4 = self.b.emit("transpose", [self.b.emit("unsqueeze", [beta], axes=[3])], perm=[0, 2, 1, 3])
        state = past if past is not None else self._nn_full(0, q, [batch, hkv, dk, dv])
        scale = attrs.get("scale", 0.0)
        if not scale:
            if not is_int(dk):
                raise ShapeError("the default scale needs a static head size")
            scale = 1.0 / math.sqrt(dk)
        out, present = self.b.emit_all("linear_attention", [q4, k4, v4, state, self.b.cast(decay4, q.dtype),
                                                            self.b.cast(beta4, q.dtype)],
                                       {"scale": float(scale), "delta": delta})
        return [self._nn_merge_heads(out), present]

    # ---------------------------------------------------------------- recurrences (unrolled)

    def op_RNN(self, node, inputs, attrs):
        return self._nn_recurrence("RNN", node, inputs, attrs)

    def op_GRU(self, node, inputs, attrs):
        return self._nn_recurrence("GRU", node, inputs, attrs)

    def op_LSTM(self, node, inputs, attrs):
        return self._nn_recurrence("LSTM", node, inputs, attrs)

    _NN_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
    _NN_DEFAULT_ACTIVATIONS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
    _NN_TAKES_ALPHA = {"leakyrelu", "thresholdedrelu", "scaledtanh", "hardsigmoid", "elu", "affine"}
    _NN_TAKES_BETA = {"scaledtanh", "hardsigmoid", "affine"}

    def _nn_activation(self, name: str, x: V, alpha, beta) -> V:
        key = name.lower()
        simple = {"relu": "relu", "tanh": "tanh", "sigmoid": "sigmoid", "softsign": "softsign", "softplus": "softplus"}
        if key in simple:
            return self.b.emit(simple[key], [x])
        if key == "leakyrelu":
            return self.b.emit("leaky_relu", [x], alpha=0.01 if alpha is None else alpha)
        if key == "elu":
            return self.b.emit("elu", [x], alpha=1.0 if alpha is None else alpha)
        if key == "hardsigmoid":
            return self.b.emit("hard_sigmoid", [x], alpha=0.2 if alpha is None else alpha,
                               beta=0.5 if beta is None else beta)
        if key == "affine":
            y = self.b.emit("mul", [x, self.b.scalar_like(1.0 if alpha is None else alpha, x)])
            return self.b.emit("add", [y, self.b.scalar_like(0.0 if beta is None else beta, x)])
        if key == "scaledtanh":
            y = self.b.emit("tanh", [self.b.emit("mul", [x, self.b.scalar_like(1.0 if beta is None else beta, x)])])
            return self.b.emit("mul", [y, self.b.scalar_like(1.0 if alpha is None else alpha, x)])
        if key == "thresholdedrelu":
            keep = self.b.emit("gt", [x, self.b.scalar_like(1.0 if alpha is None else alpha, x)])
            return self.b.emit("where", [keep, x, self.b.scalar_like(0, x)])
        raise ShapeError(f"recurrent activation '{name}' is unsupported")

    def _nn_activations(self, kind: str, attrs, directions: int) -> list[list]:
        """Per direction, the activation functions as callables on V."""
        per_dir = len(self._NN_DEFAULT_ACTIVATIONS[kind])
        names = list(attrs.get("activations", [])) or self._NN_DEFAULT_ACTIVATIONS[kind] * directions
        if len(names) != per_dir * directions:
            raise ShapeError(f"{kind} needs {per_dir * directions} activations, found {len(names)}")
        # activation_alpha/beta are consumed in order by the activations that take them.
        alphas, betas = iter(attrs.get("activation_alpha", [])), iter(attrs.get("activation_beta", []))
        fns = []
        for name in names:
            key = name.lower()
            alpha = next(alphas, None) if key in self._NN_TAKES_ALPHA else None
            beta = next(betas, None) if key in self._NN_TAKES_BETA else None
            fns.append(lambda x, name=name, alpha=alpha, beta=beta: self._nn_activation(name, x, alpha, beta))
        return [fns[d * per_dir:(d + 1) * per_dir] for d in range(directions)]

    def _nn_recurrence(self, kind: str, node, inputs, attrs):
        """RNN, GRU and LSTM, unrolled over a static sequence length: the input projections of all
        steps are one matmul per direction, each step a small matmul plus elementwise gates."""
        x, w, r, bias, lengths, h0, c0, peep = self._nn_inputs(inputs, 8)
        direction = attrs.get("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise ShapeError(f"direction must be forward, reverse or bidirectional, found '{direction}'")
        directions = 2 if direction == "bidirectional" else 1
        hidden = attrs["hidden_size"]
        gates = self._NN_GATES[kind]
        if x.rank != 3:
            raise ShapeError(f"X must be rank 3, found rank {x.rank}")
        layout = attrs.get("layout", 0)
        if layout:  # batch-major: work sequence-major, transpose back at the end
            x, h0, c0 = (None if v is None else self.b.emit("transpose", [v], perm=[1, 0, 2]) for v in (x, h0, c0))
        steps, batch = x.sym[0], x.sym[1]
        if not is_int(steps):
            raise ShapeError(f"{kind} is unrolled over the sequence, whose length must be static (found {steps})")
        if is_int(w.sym[0]) and w.sym[0] != directions:
            raise ShapeError(f"W has {w.sym[0]} directions, direction '{direction}' needs {directions}")
        activations = self._nn_activations(kind, attrs, directions)
        clip = attrs.get("clip")
        valid = self._nn_step_masks(lengths, steps, batch)
        step_fn = {"RNN": self._nn_rnn_step, "GRU": self._nn_gru_step, "LSTM": self._nn_lstm_step}[kind]
        ys, last_h, last_c = [], [], []
        for d in range(directions):
            def pick(v):
                if v is None:
                    return None
                row = self.b.emit("slice", [v], starts=[d], ends=[d + 1], axes=[0], steps=[1])
                return self.b.emit("squeeze", [row], axes=[0])

            h = pick(h0) if h0 is not None else self._nn_full(0, x, [batch, hidden])
            c = None
            if kind == "LSTM":
                c = pick(c0) if c0 is not None else self._nn_full(0, x, [batch, hidden])
            xw, params = self._nn_recurrent_params(kind, x, pick(w), pick(r), pick(bias), pick(peep), gates, hidden)
            outs = [None] * steps
            reverse = direction == "reverse" or d == 1
            for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
                xt = self.b.emit("squeeze", [self.b.emit("slice", [xw], starts=[t], ends=[t + 1], axes=[0], steps=[1])],
                                 axes=[0])
                new_h, new_c = step_fn(xt, h, c, params, activations[d], clip, attrs)
                if valid is not None:  # past its length, a sequence keeps its state and outputs zeros
                    new_h = self.b.emit("where", [valid[t], new_h, h])
                    if new_c is not None:
                        new_c = self.b.emit("where", [valid[t], new_c, c])
                    outs[t] = self.b.emit("where", [valid[t], new_h, self.b.scalar_like(0, new_h)])
                else:
                    outs[t] = new_h
                h, c = new_h, new_c
            ys.append(outs)
            last_h.append(h)
            last_c.append(c)
        # Y is [S, D, B, H] (layout 0) or [B, S, D, H]; Y_h and Y_c are [D, B, H] or [B, D, H].
        y = None
        if self._nn_wanted(node, 0):
            y = self._nn_stack([self._nn_stack([ys[d][t] for d in range(directions)], 0) for t in range(steps)], 0)
            y = self.b.emit("transpose", [y], perm=[2, 0, 1, 3]) if layout else y
        finals = [self._nn_stack(last_h, 0)] + ([self._nn_stack(last_c, 0)] if kind == "LSTM" else [])
        if layout:
            finals = [self.b.emit("transpose", [f], perm=[1, 0, 2]) for f in finals]
        return [y] + finals

    def _nn_recurrent_params(self, kind: str, x: V, w: V, r: V, bias: V | None, peep: V | None, gates: int,
                             hidden: int) -> tuple[V, dict]:
        """One direction's input projections of every step ([S, B, gates*H], input biases added) and
        the weights its steps use."""
        xw = self.b.emit("matmul", [x, w], transpose_rhs=True)

        def rows(v: V, lo: int, hi: int) -> V:
            return self.b.emit("slice", [v], starts=[lo * hidden], ends=[hi * hidden], axes=[0], steps=[1])

        w_bias = r_bias = None
        if bias is not None:
            w_bias, r_bias = rows(bias, 0, gates), rows(bias, gates, 2 * gates)
        params = {"r": r}
        if kind == "GRU":
            # The hidden gate's recurrent product needs its own weights and bias (reset gate applies to it).
            if w_bias is not None:
                xw = self.b.emit("add", [xw, w_bias])
            params.update(r_zr=rows(r, 0, 2), r_h=rows(r, 2, 3),
                          rb_zr=None if r_bias is None else rows(r_bias, 0, 2),
                          rb_h=None if r_bias is None else rows(r_bias, 2, 3))
        elif w_bias is not None:
            xw = self.b.emit("add", [xw, self.b.emit("add", [w_bias, r_bias])])
        if kind == "LSTM" and peep is not None:
            params["p_i"], params["p_o"], params["p_f"] = self._nn_split(peep, 3)
        return xw, params

    def _nn_step_masks(self, lengths: V | None, steps: int, batch) -> list | None:
        """Per step, an i1 [B, 1] mask of the batch entries still inside their sequence (None: all are)."""
        if lengths is None:
            return None
        if lengths.is_const and bool((lengths.const >= steps).all()):
            return None
        lens = self.b.reshape(self.b.cast(lengths, "i64"), [batch, 1])
        return [self.b.emit("lt", [self._nn_ints(t), lens]) for t in range(steps)]

    def _nn_gate_input(self, pre: V, clip) -> V:
        if clip is None:
            return pre
        return self.b.emit("clip", [pre], min=-float(clip), max=float(clip))

    def _nn_split(self, x: V, parts: int) -> list[V]:
        if parts == 1:
            return [x]
        return self.b.emit_all("split", [x], {"axis": -1, "parts": parts})

    def _nn_rnn_step(self, xt, h, c, params, act, clip, attrs):
        pre = self.b.emit("add", [xt, self.b.emit("matmul", [h, params["r"]], transpose_rhs=True)])
        return act[0](self._nn_gate_input(pre, clip)), None

    def _nn_gru_step(self, xt, h, c, params, act, clip, attrs):
        f, g = act
        x_z, x_r, x_h = self._nn_split(xt, 3)
        hr = self.b.emit("matmul", [h, params["r_zr"]], transpose_rhs=True)
        if params["rb_zr"] is not None:
            hr = self.b.emit("add", [hr, params["rb_zr"]])
        h_z, h_r = self._nn_split(hr, 2)
        z = f(self._nn_gate_input(self.b.emit("add", [x_z, h_z]), clip))
        reset = f(self._nn_gate_input(self.b.emit("add", [x_r, h_r]), clip))
        if attrs.get("linear_before_reset", 0):
            hh = self.b.emit("matmul", [h, params["r_h"]], transpose_rhs=True)
            if params["rb_h"] is not None:
                hh = self.b.emit("add", [hh, params["rb_h"]])
            hh = self.b.emit("mul", [reset, hh])
        else:
            hh = self.b.emit("matmul", [self.b.emit("mul", [reset, h]), params["r_h"]], transpose_rhs=True)
            if params["rb_h"] is not None:
                hh = self.b.emit("add", [hh, params["rb_h"]])
        cand = g(self._nn_gate_input(self.b.emit("add", [x_h, hh]), clip))
        # H = (1 - z) * cand + z * h = cand + z * (h - cand)
        return self.b.emit("add", [cand, self.b.emit("mul", [z, self.b.emit("sub", [h, cand])])]), None

    def _nn_lstm_step(self, xt, h, c, params, act, clip, attrs):
        f, g, hact = act
        pre = self.b.emit("add", [xt, self.b.emit("matmul", [h, params["r"]], transpose_rhs=True)])
        x_i, x_o, x_f, x_c = self._nn_split(pre, 4)
        if "p_i" in params:
            x_i = self.b.emit("add", [x_i, self.b.emit("mul", [params["p_i"], c])])
            x_f = self.b.emit("add", [x_f, self.b.emit("mul", [params["p_f"], c])])
        gate_i = f(self._nn_gate_input(x_i, clip))
        if attrs.get("input_forget", 0):
            gate_f = self.b.emit("sub", [self.b.scalar_like(1, gate_i), gate_i])
        else:
            gate_f = f(self._nn_gate_input(x_f, clip))
        cand = g(self._nn_gate_input(x_c, clip))
        new_c = self.b.emit("add", [self.b.emit("mul", [gate_f, c]), self.b.emit("mul", [gate_i, cand])])
        if "p_o" in params:
            x_o = self.b.emit("add", [x_o, self.b.emit("mul", [params["p_o"], new_c])])
        gate_o = f(self._nn_gate_input(x_o, clip))
        return self.b.emit("mul", [gate_o, hact(new_c)]), new_c

    # ---------------------------------------------------------------- quantization

    _NN_QUANT_RANGES = {"ui8": (0, 255), "i8": (-128, 127), "ui16": (0, 65535), "i16": (-32768, 32767)}

    def _nn_quant_param(self, p: V, x: V, axis: int, block: int, what: str) -> V:
        """A scale or zero point made broadcastable to x: per tensor, per axis, or per block along axis."""
        if p.rank == 0:
            return p
        if all(is_int(d) and d == 1 for d in p.sym):
            return self.b.reshape(p, [])
        axis = normalize_axis(axis, x.rank)
        if not block:
            if p.rank != 1:
                raise ShapeError(f"{what} must be a scalar or 1-D for per-axis quantization, found rank {p.rank}")
            return self.b.reshape(p, [1] * axis + [p.sym[0]] + [1] * (x.rank - axis - 1))
        if p.rank != x.rank:
            raise ShapeError(f"{what} must have the input's rank {x.rank} for blocked quantization, found {p.rank}")
        # Repeat each entry `block` times along axis, then trim to the input's length.
        blocks = p.sym[axis]
        expanded = self.b.emit("unsqueeze", [p], axes=[axis + 1])
        target = list(p.sym[:axis + 1]) + [block] + list(p.sym[axis + 1:])
        expanded = self.b.broadcast(expanded, target)
        expanded = self.b.reshape(expanded, list(p.sym[:axis]) + [sym_int(blocks * block)] + list(p.sym[axis + 1:]))
        length = x.sym[axis]
        if not (is_int(length) and is_int(blocks) and length == blocks * block):
            expanded = self.b.emit("slice", [expanded], starts=[0], ends=[length if is_int(length) else 2**63 - 1],
                                   axes=[axis], steps=[1])
        return expanded

    def _nn_saturate(self, values: V, out_dtype: str) -> V:
        """Round half to even, clamp to out_dtype's range, convert (values of a float type)."""
        lo, hi = self._NN_QUANT_RANGES[out_dtype]
        rounded = self.b.emit("clip", [self.b.emit("round", [values])], min=float(lo), max=float(hi))
        return self.b.cast(self.b.cast(rounded, "i32"), out_dtype)

    def op_QuantizeLinear(self, node, inputs, attrs):
        x, scale, zero = self._nn_inputs(inputs, 3)
        axis, block = attrs.get("axis", 1), attrs.get("block_size", 0)
        out_dtype = zero.dtype if zero is not None else ONNX_DTYPES.get(attrs.get("output_dtype", 0) or 2)
        if out_dtype not in self._NN_QUANT_RANGES:
            raise ShapeError(f"QuantizeLinear to {out_dtype} is unsupported (int8/uint8/int16/uint16 are)")
        # The division runs in the scale's type, or `precision` when given.
        work = ONNX_FLOAT_TYPES.get(attrs.get("precision", 0), scale.dtype)
        s = self.b.cast(self._nn_quant_param(scale, x, axis, block, "y_scale"), work)
        q = self.b.emit("div", [self.b.cast(x, work), s])
        if zero is None:
            return self._nn_saturate(q, out_dtype)
        # Integer arithmetic after rounding, as the spec: saturate(round(x / scale) + zero_point).
        lo, hi = self._NN_QUANT_RANGES[out_dtype]
        rounded = self.b.emit("clip", [self.b.emit("round", [q])], min=float(lo - hi - 1), max=float(hi - lo + 1))
        total = self.b.emit("add", [self.b.cast(rounded, "i32"),
                                    self.b.cast(self._nn_quant_param(zero, x, axis, block, "y_zero_point"), "i32")])
        return self.b.cast(self.b.emit("clip", [total], min=float(lo), max=float(hi)), out_dtype)

    def op_DequantizeLinear(self, node, inputs, attrs):
        x, scale, zero = self._nn_inputs(inputs, 3)
        axis, block = attrs.get("axis", 1), attrs.get("block_size", 0)
        out_dtype = ONNX_DTYPES.get(attrs.get("output_dtype", 0)) or scale.dtype
        work = "f64" if "f64" in (scale.dtype, out_dtype) else "f32"
        dx = self.b.cast(x, work)
        if zero is not None:
            dx = self.b.emit("sub", [dx, self.b.cast(self._nn_quant_param(zero, x, axis, block, "x_zero_point"), work)])
        y = self.b.emit("mul", [dx, self.b.cast(self._nn_quant_param(scale, x, axis, block, "x_scale"), work)])
        return self.b.cast(y, out_dtype)

    def op_DynamicQuantizeLinear(self, node, inputs, attrs):
        x = inputs[0]
        zero = self.b.scalar_like(0, x)
        # The range always includes 0, so that 0 quantizes exactly.
        low = self.b.emit("min", [self.b.emit("reduce_min", [x], axes=[]), zero])
        high = self.b.emit("max", [self.b.emit("reduce_max", [x], axes=[]), zero])
        scale = self.b.emit("div", [self.b.emit("sub", [high, low]), self.b.scalar_like(255, x)])
        zp = self.b.emit("sub", [zero, self.b.emit("div", [low, scale])])
        zp = self.b.cast(self.b.emit("round", [self.b.emit("clip", [zp], min=0.0, max=255.0)]), "ui8")
        y = self.b.emit("div", [x, scale])
        rounded = self.b.emit("clip", [self.b.emit("round", [y])], min=-512.0, max=512.0)
        total = self.b.emit("add", [self.b.cast(rounded, "i32"), self.b.cast(zp, "i32")])
        return [self.b.cast(self.b.emit("clip", [total], min=0.0, max=255.0), "ui8"), scale, zp]

    def _nn_centered(self, x: V, zero: V | None, per_row_axis: int | None = None) -> V:
        """x - zero_point in i32 (a 1-D zero point of x's row count is per row when per_row_axis is set)."""
        xi = self.b.cast(x, "i32")
        if zero is None:
            return xi
        z = self.b.cast(zero, "i32")
        if per_row_axis is not None and z.rank == 1 and x.rank >= 2 and not (is_int(z.sym[0]) and z.sym[0] == 1):
            axis = normalize_axis(per_row_axis, x.rank)
            z = self.b.reshape(z, [1] * axis + [z.sym[0]] + [1] * (x.rank - axis - 1))
        return self.b.emit("sub", [xi, z])

    def op_MatMulInteger(self, node, inputs, attrs):
        a, b, a_zero, b_zero = self._nn_inputs(inputs, 4)
        return self.b.emit("matmul", [self._nn_centered(a, a_zero, per_row_axis=-2), self._nn_centered(b, b_zero)])

    def _nn_requantize(self, acc: V, scale: V, y_zero: V | None, out_dtype: str) -> V:
        """saturate(round(acc * scale + y_zero)), computed in f64 as the reference promotes i32 * float."""
        y = self.b.emit("mul", [self.b.cast(acc, "f64"), self.b.cast(scale, "f64")])
        if y_zero is not None:
            y = self.b.emit("add", [y, self.b.cast(y_zero, "f64")])
        return self._nn_saturate(y, out_dtype)

    def op_QLinearMatMul(self, node, inputs, attrs):
        a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero = self._nn_inputs(inputs, 8)
        acc = self.b.emit("matmul", [self._nn_centered(a, a_zero), self._nn_centered(b, b_zero)])
        scale = self.b.emit("div", [self.b.emit("mul", [a_scale, b_scale]), y_scale])
        return self._nn_requantize(acc, scale, y_zero, y_zero.dtype if y_zero is not None else a.dtype)

    def _nn_integer_conv(self, x: V, w: V, attrs) -> V:
        """An exact integer convolution of i32 operands: computed in f64 (exact below 2^53), returned as i32."""
        n = x.rank - 2
        kernel = list(attrs.get("kernel_shape", w.sym[2:]))
        strides = list(attrs.get("strides", [1] * n))
        dilations = list(attrs.get("dilations", [1] * n))
        pads = self._spatial_pads(x, kernel, strides, dilations, attrs)
        y = self.b.emit("conv", [self.b.cast(x, "f64"), self.b.cast(w, "f64")], strides=strides, pads=pads,
                        dilations=dilations, groups=attrs.get("group", 1))
        return self.b.cast(y, "i32")

    def _nn_weight_centered(self, w: V, zero: V | None) -> V:
        wi = self.b.cast(w, "i32")
        if zero is None:
            return wi
        z = self.b.cast(zero, "i32")
        if z.rank == 1 and not (is_int(z.sym[0]) and z.sym[0] == 1):
            z = self.b.reshape(z, [z.sym[0]] + [1] * (w.rank - 1))  # one zero point per output channel
        return self.b.emit("sub", [wi, z])

    def op_ConvInteger(self, node, inputs, attrs):
        x, w, x_zero, w_zero = self._nn_inputs(inputs, 4)
        return self._nn_integer_conv(self._nn_centered(x, x_zero), self._nn_weight_centered(w, w_zero), attrs)

    def op_QLinearConv(self, node, inputs, attrs):
        x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero, bias = self._nn_inputs(inputs, 9)
        acc = self._nn_integer_conv(self._nn_centered(x, x_zero), self._nn_weight_centered(w, w_zero), attrs)
        n = x.rank - 2
        if bias is not None:
            acc = self.b.emit("add", [acc, self.b.reshape(self.b.cast(bias, "i32"), [1, bias.sym[0]] + [1] * n)])
        if w_scale.rank == 1 and not (is_int(w_scale.sym[0]) and w_scale.sym[0] == 1):
            w_scale = self.b.reshape(w_scale, [1, w_scale.sym[0]] + [1] * n)  # per output channel
        scale = self.b.emit("div", [self.b.emit("mul", [x_scale, w_scale]), y_scale])
        return self._nn_requantize(acc, scale, y_zero, y_zero.dtype if y_zero is not None else x.dtype)

    # ---------------------------------------------------------------- convolutions

    def op_ConvTranspose(self, node, inputs, attrs):
        x, w, bias = self._nn_inputs(inputs, 3)
        n = x.rank - 2
        kernel = list(attrs.get("kernel_shape", w.sym[2:]))
        strides = list(attrs.get("strides", [1] * n))
        dilations = list(attrs.get("dilations", [1] * n))
        extra = list(attrs.get("output_padding", [0] * n))
        auto_pad = attrs.get("auto_pad", "NOTSET") or "NOTSET"
        output_shape = list(attrs.get("output_shape", []))
        if output_shape and len(output_shape) != n:
            output_shape = output_shape[-n:]
        if output_shape or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            if not output_shape:
                output_shape = [sym_int(x.sym[2 + i] * strides[i]) for i in range(n)]
            pads = [0] * (2 * n)
            for i in range(n):
                total = strides[i] * (x.sym[2 + i] - 1) + extra[i] + (kernel[i] - 1) * dilations[i] + 1 - output_shape[i]
                if not is_int(total):
                    raise ShapeError("ConvTranspose output_shape/auto_pad on a dynamic spatial dim is unsupported")
                if auto_pad == "SAME_UPPER":
                    pads[i], pads[n + i] = total // 2, total - total // 2
                else:
                    pads[i], pads[n + i] = total - total // 2, total // 2
        elif auto_pad == "VALID":
            pads = [0] * (2 * n)
        else:
            pads = list(attrs.get("pads", [0] * (2 * n)))
        y = self.b.emit("conv_transpose", [x, w], strides=strides, pads=pads, dilations=dilations,
                        output_padding=extra, groups=attrs.get("group", 1))
        if bias is not None:
            y = self.b.emit("add", [y, self.b.reshape(bias, [1, bias.sym[0]] + [1] * n)])
        return y

    def op_DeformConv(self, node, inputs, attrs):
        x, w, offset, bias, mask = self._nn_inputs(inputs, 5)
        if x.rank != 4:
            raise ShapeError(f"DeformConv supports 2-D images (rank-4 input), found rank {x.rank}")
        strides = list(attrs.get("strides", [1, 1]))
        dilations = list(attrs.get("dilations", [1, 1]))
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
        if mask is None:
            mask = self.b.reshape(self.b.scalar_like(1, x), [1, 1, 1, 1])
        y = self.b.emit("deform_conv", [x, w, offset, mask], strides=strides, pads=pads, dilations=dilations,
                        groups=attrs.get("group", 1), offset_groups=attrs.get("offset_group", 1))
        if bias is not None:
            y = self.b.emit("add", [y, self.b.reshape(bias, [1, bias.sym[0], 1, 1])])
        return y

    # ---------------------------------------------------------------- einsum

    def op_Einsum(self, node, inputs, attrs):
        equation = attrs["equation"].replace(" ", "")
        lhs, arrow, rhs = equation.partition("->")
        terms = lhs.split(",")
        if len(terms) != len(inputs):
            raise ShapeError(f"equation '{equation}' has {len(terms)} operands, the node has {len(inputs)} inputs")
        # Ellipsis dims get labels of their own, right-aligned across operands as in broadcasting.
        ellipsis_rank = 0
        for term, x in zip(terms, inputs):
            if "..." in term:
                ellipsis_rank = max(ellipsis_rank, x.rank - (len(term) - 3))
        broadcast_labels = [chr(0x391 + i) for i in range(ellipsis_rank)]  # Greek capitals: never input letters
        operands = []
        for term, x in zip(terms, inputs):
            labels = list(term.replace("...", ""))
            if "..." in term:
                count = x.rank - len(labels)
                at = term.index("...")
                labels = labels[:at] + broadcast_labels[ellipsis_rank - count:] + labels[at:]
            if len(labels) != x.rank:
                raise ShapeError(f"einsum term '{term}' has {len(labels)} labels, its operand has rank {x.rank}")
            operands.append((x, labels))
        if arrow:
            output = list(rhs.replace("...", "\0"))
            if "\0" in output:
                at = output.index("\0")
                output = output[:at] + broadcast_labels + output[at + 1:]
        else:
            counts: dict[str, int] = {}
            for _, labels in operands:
                for lab in labels:
                    counts[lab] = counts.get(lab, 0) + 1
            output = broadcast_labels + sorted(l for l, n in counts.items() if n == 1 and l not in broadcast_labels)
        if len(set(output)) != len(output):
            raise ShapeError(f"einsum output '{rhs}' repeats a label")
        every = {lab for _, labels in operands for lab in labels}
        missing = [lab for lab in output if lab not in every]
        if missing:
            raise ShapeError(f"einsum output label '{missing[0]}' appears in no operand")

        operands = [self._nn_einsum_diagonal(x, labels) for x, labels in operands]
        acc, acc_labels = None, []
        for i, (x, labels) in enumerate(operands):
            later = set(output) | {lab for _, ls in operands[i + 1:] for lab in ls}
            needed = later | set(acc_labels)
            x, labels = self._nn_einsum_sum_out(x, labels, needed)
            if acc is None:
                acc, acc_labels = x, labels
            else:
                acc, acc_labels = self._nn_einsum_pair(acc, acc_labels, x, labels, later)
        acc, acc_labels = self._nn_einsum_sum_out(acc, acc_labels, set(output))
        perm = [acc_labels.index(lab) for lab in output]
        if perm != list(range(len(perm))):
            acc = self.b.emit("transpose", [acc], perm=perm)
        return acc

    def _nn_einsum_diagonal(self, x: V, labels: list) -> tuple[V, list]:
        """Take the diagonal over every label repeated within one operand ('ii->i')."""
        labels = list(labels)
        while True:
            repeated = next((lab for lab in labels if labels.count(lab) > 1), None)
            if repeated is None:
                return x, labels
            first = labels.index(repeated)
            second = labels.index(repeated, first + 1)
            size = x.sym[first]
            if not is_int(size):
                raise ShapeError("an einsum diagonal needs a static dim")
            shape = [1] * x.rank
            shape[first] = shape[second] = size
            eye = self.b.const(np.eye(size, dtype=bool).reshape(shape))
            x = self.b.emit("reduce_sum", [self.b.emit("where", [eye, x, self.b.scalar_like(0, x)])], axes=[second])
            del labels[second]

    def _nn_einsum_sum_out(self, x: V, labels: list, needed: set) -> tuple[V, list]:
        axes = [i for i, lab in enumerate(labels) if lab not in needed]
        if not axes:
            return x, labels
        return self.b.emit("reduce_sum", [x], axes=axes), [lab for lab in labels if lab in needed]

    def _nn_einsum_pair(self, a: V, la: list, b: V, lb: list, later: set) -> tuple[V, list]:
        """Contract two operands as one batched matmul: [batch, left, summed] x [batch, summed, right]."""
        batch = [lab for lab in la if lab in lb and lab in later]
        summed = [lab for lab in la if lab in lb and lab not in later]
        left = [lab for lab in la if lab not in lb]
        right = [lab for lab in lb if lab not in la]
        size_a = dict(zip(la, a.sym))
        size_b = dict(zip(lb, b.sym))
        a = self._nn_permute(a, la, batch + left + summed)
        b = self._nn_permute(b, lb, batch + summed + right)
        batch_a = [size_a[lab] for lab in batch]
        batch_b = [size_b[lab] for lab in batch]
        a = self.b.reshape(a, batch_a + [_prod(size_a[lab] for lab in left), _prod(size_a[lab] for lab in summed)])
        b = self.b.reshape(b, batch_b + [_prod(size_b[lab] for lab in summed), _prod(size_b[lab] for lab in right)])
        out = self.b.emit("matmul", [a, b])
        batch_out = list(out.sym[:len(batch)])
        out = self.b.reshape(out, batch_out + [size_a[lab] for lab in left] + [size_b[lab] for lab in right])
        return out, batch + left + right

    def _nn_permute(self, x: V, labels: list, order: list) -> V:
        perm = [labels.index(lab) for lab in order]
        return x if perm == list(range(len(perm))) else self.b.emit("transpose", [x], perm=perm)

    # ---------------------------------------------------------------- control flow (resolved at compile time)
    # Loop and Scan are unrolled, If takes its branch; subgraph nodes import through the same methods,
    # with the subgraph's names in a scope stacked over the enclosing graphs'.

    def _nn_lookup(self, name: str) -> V:
        for scope in reversed(getattr(self, "_nn_scopes", [])):
            if name in scope:
                return scope[name]
        return self.values[name]

    def _nn_check_graph(self, graph, what: str) -> None:
        """Report every op of a subgraph (and its nested subgraphs) that no method imports."""
        missing = []
        stack = [graph]
        while stack:
            g = stack.pop()
            for n in g.node:
                if n.domain not in DEFAULT_DOMAINS or not self.supports(n.op_type):
                    missing.append(n.op_type)
                for a in n.attribute:
                    if a.type == a.GRAPH:
                        stack.append(a.g)
        if missing:
            raise ShapeError(f"{what} uses unsupported ONNX op(s): {', '.join(sorted(set(missing)))}")

    def _nn_run_graph(self, graph, bound: list[V], what: str) -> list[V]:
        """Import the nodes of a subgraph with its inputs bound to `bound`; returns its outputs.
        Names the subgraph does not define resolve in the enclosing graphs."""
        if len(bound) != len(graph.input):
            raise ShapeError(f"{what} takes {len(graph.input)} inputs, {len(bound)} are bound")
        scope: dict[str, V] = {}
        for t in graph.initializer:
            scope[t.name] = tensor_value(t, f"{what} initializer '{t.name}'")
        for inp, v in zip(graph.input, bound):
            scope[inp.name] = v
        if not hasattr(self, "_nn_scopes"):
            self._nn_scopes = []
        self._nn_scopes.append(scope)
        try:
            for node in graph.node:
                args = [self._nn_lookup(n) if n else None for n in node.input]
                outs = self.import_node(node, args)
                for name, v in zip(node.output, outs):
                    if name:
                        scope[name] = v
            return [self._nn_lookup(o.name) for o in graph.output]
        finally:
            self._nn_scopes.pop()

    def _nn_stack(self, parts: list[V], axis: int) -> V:
        """Stack equally shaped values along a new axis (a chain of concats)."""
        pieces = [self.b.emit("unsqueeze", [p], axes=[axis]) for p in parts]
        acc = pieces[0]
        for p in pieces[1:]:
            acc = self.b.emit("concat", [acc, p], axis=axis)
        return acc

    def _nn_bool(self, v: V | None, what: str, default: bool = True) -> bool:
        if v is None:
            return default
        if not v.is_const:
            raise CompileTimeValueError(f"{what} must be known at compile time (it is computed at run time here)")
        return bool(np.asarray(v.const).reshape(-1)[0])

    def op_If(self, node, inputs, attrs):
        cond = inputs[0]
        then_g, else_g = attrs["then_branch"], attrs["else_branch"]
        self._nn_check_graph(then_g, "If then_branch")
        self._nn_check_graph(else_g, "If else_branch")
        if cond.is_const:
            taken = then_g if self._nn_bool(cond, "If condition") else else_g
            return self._nn_run_graph(taken, [], "If branch")
        # A run-time condition: both branches run, a select picks (they must agree in type and shape).
        then_outs = self._nn_run_graph(then_g, [], "If then_branch")
        else_outs = self._nn_run_graph(else_g, [], "If else_branch")
        flag = self.b.reshape(self.b.cast(cond, "i1"), [])
        outs = []
        for t, e in zip(then_outs, else_outs):
            if t.dtype != e.dtype or tuple(t.sym) != tuple(e.sym):
                raise CompileTimeValueError("If branches differ in output type or shape, so the condition must be "
                                    "known at compile time")
            outs.append(self.b.emit("where", [flag, t, e]))
        return outs

    def op_Loop(self, node, inputs, attrs):
        trip, cond, *carried = list(inputs) + [None] * max(0, 2 - len(inputs))
        body = attrs["body"]
        self._nn_check_graph(body, "Loop body")
        if trip is None and cond is None:
            raise ShapeError("a Loop with neither a trip count nor a condition never ends")
        if trip is not None and not trip.is_const:
            raise CompileTimeValueError("the Loop trip count must be known at compile time (the loop is unrolled)")
        count = int(np.asarray(trip.const).reshape(-1)[0]) if trip is not None else None
        keep_going = self._nn_bool(cond, "the Loop condition")
        n_carried = len(carried)
        scans: list[list[V]] = []
        i = 0
        limit = 1 << 14
        while keep_going and (count is None or i < count):
            if i >= limit:
                raise ShapeError(f"Loop runs more than {limit} iterations; sdc unrolls loops")
            step = self.b.const(np.array(i, np.int64))
            flag = self.b.const(np.array(keep_going))
            outs = self._nn_run_graph(body, [step, flag] + carried, "Loop body")
            keep_going = self._nn_bool(outs[0], "the Loop body's condition output")
            carried = outs[1:1 + n_carried]
            scans.append(outs[1 + n_carried:])
            i += 1
        n_scan = len(body.output) - 1 - n_carried
        if n_scan and not scans:
            raise ShapeError("a Loop that runs zero times has empty scan outputs, which sdc cannot type")
        stacked = [self._nn_stack([s[k] for s in scans], 0) for k in range(n_scan)]
        return carried + stacked

    def op_Scan(self, node, inputs, attrs):
        body = attrs["body"]
        self._nn_check_graph(body, "Scan body")
        n_scan_in = attrs["num_scan_inputs"]
        if self.opset < 9:
            return self._nn_scan_batched(node, inputs, attrs)
        states = list(inputs[:len(inputs) - n_scan_in])
        scan_in = list(inputs[len(inputs) - n_scan_in:])
        n_out = len(body.output) - len(states)
        in_axes = list(attrs.get("scan_input_axes", [0] * n_scan_in))
        in_dirs = list(attrs.get("scan_input_directions", [0] * n_scan_in))
        out_axes = list(attrs.get("scan_output_axes", [0] * n_out))
        out_dirs = list(attrs.get("scan_output_directions", [0] * n_out))
        states, outs = self._nn_scan(body, states, scan_in, in_axes, in_dirs)
        results = list(states)
        for k in range(n_out):
            seq = [o[k] for o in outs]
            if out_dirs[k]:
                seq = seq[::-1]
            rank = seq[0].rank + 1
            results.append(self._nn_stack(seq, out_axes[k] % rank))
        return results

    def _nn_scan(self, body, states, scan_in, in_axes, in_dirs):
        lengths = {x.sym[a % x.rank] for x, a in zip(scan_in, in_axes)}
        if len(lengths) != 1:
            raise ShapeError(f"Scan inputs disagree on the sequence length: {sorted(map(str, lengths))}")
        steps = lengths.pop()
        if not is_int(steps):
            raise ShapeError(f"Scan is unrolled over the sequence, whose length must be static (found {steps})")
        outs = []
        for t in range(steps):
            elements = []
            for x, axis, reverse in zip(scan_in, in_axes, in_dirs):
                axis %= x.rank
                at = steps - 1 - t if reverse else t
                piece = self.b.emit("slice", [x], starts=[at], ends=[at + 1], axes=[axis], steps=[1])
                elements.append(self.b.emit("squeeze", [piece], axes=[axis]))
            result = self._nn_run_graph(body, list(states) + elements, "Scan body")
            states = result[:len(states)]
            outs.append(result[len(states):])
        return states, outs

    def _nn_scan_batched(self, node, inputs, attrs):
        """Scan-8: a leading batch axis on every input and output, an optional sequence_lens first."""
        body = attrs["body"]
        lengths, rest = inputs[0], list(inputs[1:])
        n_scan_in = attrs["num_scan_inputs"]
        states, scan_in = rest[:len(rest) - n_scan_in], rest[len(rest) - n_scan_in:]
        if lengths is not None:
            raise ShapeError("Scan-8 with sequence_lens is unsupported")
        dirs = list(attrs.get("directions", [0] * n_scan_in))
        batch = (states + scan_in)[0].sym[0]
        if not is_int(batch):
            raise ShapeError("Scan-8 needs a static batch size")
        per_batch = []
        for b in range(batch):
            take = lambda v: self.b.emit("squeeze", [self.b.emit("slice", [v], starts=[b], ends=[b + 1], axes=[0],
                                                              steps=[1])], axes=[0])
            final, outs = self._nn_scan(body, [take(s) for s in states], [take(x) for x in scan_in],
                                        [0] * n_scan_in, dirs)
            n_out = len(body.output) - len(states)
            per_batch.append(list(final) + [self._nn_stack([o[k] for o in outs], 0) for k in range(n_out)])
        return [self._nn_stack([p[k] for p in per_batch], 0) for k in range(len(per_batch[0]))]
