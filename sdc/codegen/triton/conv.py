"""The Triton rendering of the `conv` template (sdc/codegen/kernel/conv.py: what the program means):
an implicit GEMM whose `[BLOCK_M, BLOCK_K]` slice of the patch matrix each program loads straight
from the input with the window's offsets, zero where the window reads padding; the epilogue fused.
"""

from __future__ import annotations

from sdc.codegen.kernel.conv import BATCH, IN_C, IN_H, IN_W, KER_H, KER_W, OUT_C, OUT_H, OUT_W
from sdc.codegen.kernel.program import KernelProgram, LoweringError, Node
from sdc.codegen.triton.config import MatmulConfig


# ---------------------------------------------------------------- configurations

def conv_candidates(renderer, program: KernelProgram) -> list:
    """The tiles worth timing for a conv kernel, the plan's own first: by operand width, then as the
    matmul template's large class (an activation's N*OH*OW is thousands of rows), each block
    clamped to the next power of 2 of a static size (BLOCK_K to Cin: the K loop steps along C)."""
    n, oh, ow, cout, cin = program.domain[:5]
    m = None if n is None else n * oh * ow
    width = "f32" if program.args[0].dtype == "f32" else "16"
    out: list[MatmulConfig] = []
    for c in [renderer.conv_configs[width], *renderer.conv_tune.get(width, ())]:
        c = c.clamped(m, cout, cin)
        if c not in out:
            out.append(c)
    return out


def conv_grid(blocks: dict[str, int]) -> list[str]:
    """One program per `BLOCK_M` x `BLOCK_N` tile of the (N*OH*OW) x Cout product."""
    bm, bn = blocks["BLOCK_M"], blocks["BLOCK_N"]
    return [f"((d0 * d1 * d2 + {bm - 1}) // {bm}) * ((d3 + {bn - 1}) // {bn})"]


# ---------------------------------------------------------------- rendering

def render_conv(renderer, p: KernelProgram) -> list[str]:
    """The kernel body: the grouped tile order of the matmul template, the implicit-GEMM loop (over the
    window's KH x KW taps and Cin in BLOCK_K slices), then the epilogue on the f32 tile."""
    wide = renderer.index_type(p, largest_tensor=True)
    lines = [f"pid = tl.program_id(0){wide}",
             "M = d0 * d1 * d2",
             "tiles_m = (M + BLOCK_M - 1) // BLOCK_M",
             "tiles_n = (d3 + BLOCK_N - 1) // BLOCK_N",
             "# grouped ordering: GROUP_M row tiles in turn read the same weight columns while they are in L2",
             "width = GROUP_M * tiles_n",
             "first_m = (pid // width) * GROUP_M",
             "group_m = tl.minimum(tiles_m - first_m, GROUP_M)",
             "pid_m = first_m + (pid % width) % group_m",
             "pid_n = (pid % width) // group_m",
             "rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
             "rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
             f"rk = tl.arange(0, BLOCK_K){wide}",
             "mask_m = rm < M",
             "mask_n = rn < d3",
             "mask = mask_m[:, None] & mask_n[None, :]",
             "# the output pixel of each row of the tile",
             "p_w = rm % d2",
             "p_h = (rm // d2) % d1",
             "p_n = rm // (d1 * d2)"]
    pixel = {BATCH: "p_n", OUT_H: "p_h", OUT_W: "p_w"}
    names: dict[int, str] = {}
    for n in p.nodes:
        names[n.id] = f"x{n.id}"
        if n.op == "conv":
            lines += _implicit_gemm(renderer, p, n)
            continue
        if n.op == "load":
            arg = p.args[n.arg]
            rows = [f"{pixel[d]}[:, None] * a{n.arg}_s{d}" for d in arg.map if d in pixel]
            cols = [f"rn[None, :] * a{n.arg}_s{OUT_C}"] if OUT_C in arg.map else []
            where = " + ".join([f"a{n.arg}", *rows, *cols])
            expr = renderer.tile_load(where, bool(rows), bool(cols), n.dtype)
        else:
            expr = renderer.node(n, [names[a] for a in n.args])
        lines.append(f"x{n.id} = {expr}")
    for i, (r, node) in enumerate(p.results):
        terms = [f"{pixel[d]}[:, None] * o{i}_s{d}" for d in r.map if d in pixel]
        terms += [f"rn[None, :] * o{i}_s{OUT_C}"] if OUT_C in r.map else []
        lines.append(f"tl.store({' + '.join([f'o{i}', *terms])}, {renderer._narrow(names[node], r.dtype)}, mask=mask)")
    return lines


def _implicit_gemm(renderer, p: KernelProgram, n: Node) -> list[str]:
    """acc[BLOCK_M, BLOCK_N] = sum over taps (kh, kw) and channel slices of input patch x weight.

    One flat loop over (tap, channel slice), the tap recomputed per step (a few vector ops on the tile's
    rows), rather than loops nested per tap: one long loop is what triton software-pipelines
    (`num_stages`), where a 3x3 tap loop around a Cin loop of 4 slices would pipeline 4 steps at a time."""
    x, w = n.attrs["input"], n.attrs["weight"]
    (sh, sw), (dh, dw), pads = n.attrs["strides"], n.attrs["dilations"], n.attrs["pads"]
    kh, kw = (p.domain[KER_H], p.domain[KER_W])
    if kh is None or kw is None:
        raise LoweringError("'sdc.conv' with a dynamic kernel size")
    precision = n.attrs.get("input_precision")
    dot_kw = f', input_precision="{precision}"' if precision else ""
    cin = f"d{IN_C}" if p.domain[IN_C] is None else str(p.domain[IN_C])
    slices = f"(({cin} + BLOCK_K - 1) // BLOCK_K)"  # constexpr arithmetic where Cin is static
    body = [f"tap_i = step // {slices}",
            f"cc = (step % {slices}) * BLOCK_K + rk",
            f"ih = p_h * {sh} - {pads[0]} + (tap_i // {kw}) * {dh}",
            f"iw = p_w * {sw} - {pads[1]} + (tap_i % {kw}) * {dw}",
            f"ok = mask_m & (ih >= 0) & (ih < d{IN_H}) & (iw >= 0) & (iw < d{IN_W})",
            f"mask_k = cc < d{IN_C}",
            f"pix = a{x} + p_n * a{x}_s{BATCH} + ih * a{x}_s{IN_H} + iw * a{x}_s{IN_W}",
            f"tap = a{w} + (tap_i // {kw}) * a{w}_s{KER_H} + (tap_i % {kw}) * a{w}_s{KER_W}",
            f"lhs = tl.load(pix[:, None] + cc[None, :] * a{x}_s{IN_C}, mask=ok[:, None] & mask_k[None, :], other=0.0)",
            f"rhs = tl.load(tap + cc[:, None] * a{w}_s{IN_C} + rn[None, :] * a{w}_s{OUT_C}, "
            "mask=mask_k[:, None] & mask_n[None, :], other=0.0)"]
    if p.args[x].dtype == "bf16":  # see TritonRenderer._dot: the 3.9 interpreter multiplies bf16 as raw bits
        renderer._interpreted_flag()
        body += ["if _INTERPRETED:", "    lhs = lhs.to(tl.float32)", "    rhs = rhs.to(tl.float32)"]
    body.append(f"acc = tl.dot(lhs, rhs, acc{dot_kw})")
    steps = f"{kh * kw} * {slices}"
    return ["acc = tl.full([BLOCK_M, BLOCK_N], 0.0, tl.float32)", *renderer._loop("step", steps, "1", body),
            f"x{n.id} = acc"]
