"""The `attention` template: softmax(Q K^T * scale [+ mask]) V as one flash-style Triton kernel.

sdc-fuse merges an attention's three groups into one `kind = "attention"` group when
`sdc.transforms.attention_pattern.match_attention` accepts its ops (targets with a Triton
backend); this module lowers what that matcher found and renders the kernel. It never sees
anything the matcher refused, so an attention it cannot take keeps the kernels it had.

Lowering (sdc/codegen/kernel/attention.py): the domain is `(*batch, M, N, K, E)`: the scores' shape `[*batch,
Sq, Sk]`, then the head dims of q/k (K = D) and of v (E = Dv). q maps onto `(*batch, M, K)`, k onto
`(*batch, K, N)` and v onto `(*batch, N, E)`, each pair swapped when the op transposes it (a
transpose is only strides); batch dims an operand broadcasts (absent, or of size 1) have stride 0.
The score chain (scale, mask, casts, any SCORE_OPS) becomes nodes over the `[BLOCK_M, BLOCK_N]`
score tile, as in the matmul template's epilogue: a mask `[B, 1, 1, Sk]` loads as a row of key
values, a causal `[Sq, Sk]` mask as a tile, a scalar once; one-element weights are constants. A
node that does not vary along the keys (`Node.row` False here) is computed once, before the key loop.

The kernel: one program per (batch entry, block of BLOCK_M queries). It loads its query tile once,
then walks the keys in BLOCK_N blocks: scores with tl.dot (f32 accumulation), the chain, keys past
the end set to -inf, then the online softmax (running row max m and sum l, the accumulator rescaled
by exp(m_old - m_new)) and acc += P V with P rounded to v's dtype, as the reference rounds the
probabilities it multiplies. The head dims are padded to powers of 2 (at least 16, what tl.dot
needs) and masked. Exponentials are exp2 of log2(e)-scaled values. Only builtins of
`triton.language`, so it compiles with triton 3.6 and runs under the interpreter of 3.9: the row
reductions are tl.reduce with the combine functions tl.max and tl.sum use (tl.standard's
`_elementwise_max`, `_sum_combine`, in triton since 2.x), not tl.max/tl.sum themselves (those run
under the interpreter only when TRITON_INTERPRET=1 was set before triton was imported, see
renderer._reduce); the interpreter recognizes those two and reduces with numpy, where a combine
function of our own runs in Python element by element (100x slower).
"""

from __future__ import annotations

from sdc.codegen.kernel.program import ATTENTION, KernelProgram, Node
from sdc.codegen.triton.config import decompose, next_power_of_2

LOG2E = 1.4426950408889634
STORAGE = {"f16": "tl.float16", "bf16": "tl.bfloat16", "f32": "tl.float32"}  # the kernel's 16-bit and f32 types


# ---------------------------------------------------------------- configurations



# (BLOCK_M, BLOCK_N, num_warps, num_stages): the plan's own first, then what autotuning also times
# (the tiles of Triton's fused-attention tutorial and FlashAttention-2's forward for Hopper-class GPUs:
# 128 queries a program, 3-4 stages; 8 warps for the wide tiles). For head dims past 64 the first tile
# that keeps 4 warps is dropped by `attention_blocks`, so (128, 64, 8, 3) leads there.
CONFIGS_16 = ((128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3), (128, 32, 4, 4), (64, 32, 4, 4),
              (64, 128, 4, 3), (64, 64, 4, 2))
CONFIGS_F32 = ((64, 32, 4, 2), (32, 32, 4, 2), (64, 64, 4, 2))


def attention_blocks(program: KernelProgram) -> list[dict[str, int]]:
    """Every configuration worth timing, the plan's own first: blocks clamped to the next power of 2 of
    a static sequence length (at least 16), head dims padded to powers of 2 (at least 16)."""
    *_, m, n, k, e = program.domain
    wide = program.args[0].dtype == "f32" or k > 64 or e > 64
    configs = CONFIGS_F32 if program.args[0].dtype == "f32" else CONFIGS_16

    def fit(block: int, size: int | None) -> int:
        return block if size is None else max(16, min(block, next_power_of_2(size)))

    out: list[dict[str, int]] = []
    for block_m, block_n, warps, stages in configs:
        if wide and block_m * block_n > 64 * 64 and warps < 8:
            continue  # a [128, 128] f32 tile needs the registers of 8 warps
        blocks = {"BLOCK_M": fit(block_m, m), "BLOCK_N": fit(block_n, n), "BLOCK_D": max(16, next_power_of_2(k)),
                  "BLOCK_E": max(16, next_power_of_2(e)), "num_warps": warps, "num_stages": stages}
        if blocks not in out:
            out.append(blocks)
    return out


def attention_grid(program: KernelProgram, blocks: dict[str, int]) -> list[str]:
    """One program per batch entry and block of queries."""
    dims = [f"d{i}" for i in range(len(program.domain))]
    *batch, m, _, _, _ = dims
    return [" * ".join([*batch, f"(({m} + {blocks['BLOCK_M'] - 1}) // {blocks['BLOCK_M']})"])]


# ---------------------------------------------------------------- rendering


def render_attention(renderer, p: KernelProgram) -> list[str]:
    """The kernel body (renderer: the TritonRenderer, for its op methods, helpers and loops)."""
    nb = len(p.domain) - 4
    rows, cols, inner, outer = nb, nb + 1, nb + 2, nb + 3
    M, N, K, E = (f"d{d}" for d in (rows, cols, inner, outer))
    ((result, _),) = p.results
    att = next(n for n in p.nodes if n.op == ATTENTION)
    dot = next(n for n in p.nodes if n.op == "dot")
    q, k, v = dot.attrs["lhs"], dot.attrs["rhs"], att.attrs["v"]
    wide = renderer.index_type(p, largest_tensor=True)

    def base(prefix: str, i: int, m) -> list[str]:
        return [f"{prefix}{i}"] + [f"i{d} * {prefix}{i}_s{d}" for d in m if d is not None and d < nb]

    # a causal kernel runs the query blocks of the most keys first (the last ones): the GPU's waves end even
    pid_m = "tiles_m - 1 - pid % tiles_m" if "causal" in att.attrs else "pid % tiles_m"
    lines = [f"pid = tl.program_id(0){wide}",
             f"tiles_m = ({M} + BLOCK_M - 1) // BLOCK_M",
             f"pid_m = {pid_m}"]
    if nb:
        lines.append("batch = pid // tiles_m")
        lines += decompose("batch", nb)
    lines += ["rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
              "rd = tl.arange(0, BLOCK_D)",
              "re = tl.arange(0, BLOCK_E)",
              f"mask_m = rm < {M}",
              f"mask_d = rd < {K}",
              f"mask_e = re < {E}",
              f"q = tl.load({' + '.join(base('a', q, p.args[q].map))} + rm[:, None] * a{q}_s{rows} + "
              f"rd[None, :] * a{q}_s{inner}, mask=mask_m[:, None] & mask_d[None, :], other=0.0)"]
    interpreted_bf16 = p.args[q].dtype == "bf16" or att.attrs["p_dtype"] == "bf16"
    if interpreted_bf16:
        renderer._interpreted_flag()  # the interpreter of triton 3.9 multiplies bf16 blocks as raw bits
    if p.args[q].dtype == "bf16":
        lines += ["if _INTERPRETED:", "    q = q.to(tl.float32)"]

    names: dict[int, str] = {}
    causal = att.attrs.get("causal")

    def emit(n: Node, out: list[str], masked: bool) -> None:
        """A chain node's line; `masked`: the key block may pass the end of the keys (else every key is in)."""
        names[n.id] = f"x{n.id}"
        if n.op == "dot":
            kw = f', input_precision="{n.attrs["input_precision"]}"' if "input_precision" in n.attrs else ""
            mask = "mask_d[:, None] & mask_n[None, :]" if masked else "mask_d[:, None]"
            out.append(f"kt = tl.load({' + '.join(base('a', k, p.args[k].map))} + rd[:, None] * a{k}_s{inner} + "
                       f"rn[None, :] * a{k}_s{cols}, mask={mask}, other=0.0)")
            if p.args[k].dtype == "bf16":
                out += ["if _INTERPRETED:", "    kt = kt.to(tl.float32)"]
            out.append(f"x{n.id} = tl.dot(q, kt{kw})")
        elif n.op == "load":
            arg = p.args[n.arg]
            terms = base("a", n.arg, arg.map)
            has_m, has_n = rows in arg.map, cols in arg.map
            if has_m:
                terms.append(f"rm[:, None] * a{n.arg}_s{rows}")
            if has_n:
                terms.append(f"rn[None, :] * a{n.arg}_s{cols}")
            mask = {(True, True): "mask_m[:, None] & mask_n[None, :]", (True, False): "mask_m[:, None]",
                    (False, True): "mask_n[None, :]"}.get((has_m, has_n))
            where = " + ".join(terms)
            expr = f"tl.load({where}, mask={mask}, other=0)" if mask else f"tl.load({where})"
            out.append(f"x{n.id} = {renderer._widen(expr, n.dtype)}")
        else:
            out.append(f"x{n.id} = {renderer.node(n, [names[a] for a in n.args])}")

    chain = [n for n in p.nodes if n.op != ATTENTION]
    for n in chain:
        if not n.row:  # the same for every key: computed once
            emit(n, lines, masked=True)
    lines += ['m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)',
              "l_i = tl.full([BLOCK_M], 0.0, tl.float32)",
              "acc = tl.full([BLOCK_M, BLOCK_E], 0.0, tl.float32)"]
    p_storage = STORAGE[att.attrs["p_dtype"]]
    pv_kw = (f', input_precision="{att.attrs["pv_input_precision"]}"' if "pv_input_precision" in att.attrs else "")

    def key_block(masked: bool, diagonal: bool) -> list[str]:
        """One block of BLOCK_N keys: scores, the online softmax, acc += P V. `masked`: keys past the end
        are set to -inf; `diagonal`: so are the keys a causal mask hides (j > i + offset)."""
        body = ["rn = start + tl.arange(0, BLOCK_N)"] + ([f"mask_n = rn < {N}"] if masked else [])
        for n in chain:
            if n.row:
                emit(n, body, masked)
        scores = names[att.args[0]]
        keep = " & ".join(["mask_n[None, :]"] * masked + [f"(rn[None, :] <= rm[:, None] + {causal})"] * diagonal)
        body.append(f"s = tl.where({keep}, {scores}, -float(\"inf\"))" if keep else f"s = {scores}")
        v_mask = "mask_n[:, None] & mask_e[None, :]" if masked else "mask_e[None, :]"
        body += ["m_new = tl.maximum(m_i, tl.reduce(s, 1, tl.standard._elementwise_max))",
                 # a row whose scores are all -inf so far keeps m = -inf: shift by 0 there, not by -inf - -inf
                 "shift = tl.where(m_new == -float(\"inf\"), 0.0, m_new)",
                 f"alpha = tl.exp2((m_i - shift) * {LOG2E})",
                 f"prob = tl.exp2((s - shift[:, None]) * {LOG2E})",
                 "l_i = l_i * alpha + tl.reduce(prob, 1, tl.standard._sum_combine)",
                 f"vt = tl.load({' + '.join(base('a', v, p.args[v].map))} + rn[:, None] * a{v}_s{cols} + "
                 f"re[None, :] * a{v}_s{outer}, mask={v_mask}, other=0.0)",
                 f"prob = prob.to({p_storage})"]
        if att.attrs["p_dtype"] == "bf16":
            body += ["if _INTERPRETED:", "    prob = prob.to(tl.float32)", "    vt = vt.to(tl.float32)"]
        return body + [f"acc = tl.dot(prob, vt, acc * alpha[:, None]{pv_kw})", "m_i = m_new"]

    if causal is None:
        bound = N if p.domain[cols] is None else str(p.domain[cols])
        lines += renderer._loop("start", bound, "BLOCK_N", key_block(masked=True, diagonal=False))
    else:
        # FlashAttention's block skipping: the keys before `full_end` are seen by every query of the block
        # (no mask at all), those up to `last` by some (an index compare), none after (not visited)
        lines += [f"full_end = tl.minimum((pid_m * BLOCK_M + {causal + 1}) // BLOCK_N, {N} // BLOCK_N) * BLOCK_N",
                  f"last = tl.minimum(pid_m * BLOCK_M + BLOCK_M + {causal}, {N})"]
        lines += _span_loop(renderer, "0", "full_end", key_block(masked=False, diagonal=False))
        lines += _span_loop(renderer, "full_end", "last", key_block(masked=True, diagonal=True))
    names[att.id] = "out"
    if att.attrs.get("zero_empty_rows"):
        # torch's fix-up for rows whose keys are all masked: 0, not 0/0 (l is 0 only when every score is -inf)
        lines.append("out = tl.where(l_i[:, None] == 0.0, 0.0, acc / l_i[:, None])")
    else:
        lines.append("out = acc / l_i[:, None]")
    if "round_to" in att.attrs:  # the second matmul's own dtype, then the output's (its casts after it)
        lines.append(f"out = out.to({STORAGE[att.attrs['round_to']]}).to(tl.float32)")
    # the rows' term even where the output has Sq = 1 (its stride is then 0): the pointers must be a full tile
    terms = base("o", 0, result.map) + [f"rm[:, None] * o0_s{rows}", f"re[None, :] * o0_s{outer}"]
    lines.append(f"tl.store({' + '.join(terms)}, {renderer._narrow('out', result.dtype)}, "
                 "mask=mask_m[:, None] & mask_e[None, :])")
    return lines


def _span_loop(renderer, first: str, end: str, body: list[str]) -> list[str]:
    """`for start in range(first, end, BLOCK_N)` over `body`, bounds computed in the kernel; a `while` loop
    under the interpreter, which cannot take its scalars as `range` bounds (see TritonRenderer._loop)."""
    renderer._interpreted_flag()
    return ["if _INTERPRETED:", f"    start = {first}", f"    while start < {end}:",
            *("        " + b for b in body), "        start += BLOCK_N",
            "else:", f"    for start in range({first}, {end}, BLOCK_N):", *("        " + b for b in body)]
