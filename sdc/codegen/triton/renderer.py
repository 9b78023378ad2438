"""Stage 2 of Triton codegen: a `KernelProgram` (sdc/codegen/kernel/) rendered as Triton source text.

`TritonRenderer` says what it can do as class attributes (the elementwise ops it has a method for,
block sizes, the largest row one program holds in registers) and has one method per primitive op,
returning the expression text of its value. `render(program, entry)` returns a whole kernel file:
a header naming the sdc ops, the helpers it uses, and one `@triton.jit` function.

The generated code uses only long-stable `triton.language` (tl.load/store with masks, tl.arange,
tl.program_id, tl.reduce, tl.where, tl.exp/log/sqrt/rsqrt/erf/...: builtins only, no functions of
triton's standard library, see `_reduce`): it must compile
with triton 3.6 on the GPU host and run under TRITON_INTERPRET=1 with the triton of CI.

Kernel signature: for each tensor argument, then each result, its pointer and one stride per domain
dim (`a0, a0_s0, ..., a0_s2`; 0 along a dim it broadcasts), then the domain sizes `d0 .. d{R-1}`,
then the constexprs (`BLOCK`, `RBLOCK`, or `BLOCK_M`/`BLOCK_N`/`BLOCK_K`/`GROUP_M`/`PROGRAMS`).
The launcher (sdc/runtime/launch/triton.py) computes
the strides and sizes from the tensors at each call, so one kernel serves every dynamic size.

Floats of 16 bits compute in f32 registers (loaded widened, stored rounded); an explicit cast to
f16/bf16 rounds where the program says so.
"""

from __future__ import annotations

import math

from sdc.codegen.kernel.decompose import inline, is_composite, missing_primitive, supported_ops
from sdc.codegen.kernel.program import ATTENTION, CONV, ELEMENTWISE, MATMUL, KernelProgram, Node
from sdc.codegen.triton.attention import attention_blocks, attention_grid, render_attention
from sdc.codegen.triton.config import MatmulConfig, decompose, literal, next_power_of_2
from sdc.codegen.triton.conv import conv_candidates, conv_grid, render_conv

_STORAGE = {"f16": "tl.float16", "bf16": "tl.bfloat16", "f32": "tl.float32", "f64": "tl.float64", "i1": "tl.int1",
            "i8": "tl.int8", "i16": "tl.int16", "i32": "tl.int32", "i64": "tl.int64", "ui8": "tl.uint8"}
_REGISTER = {**_STORAGE, "f16": "tl.float32", "bf16": "tl.float32"}

_HELPERS = {
    "_tanh": '''@triton.jit
def _tanh(x):
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)
''',
    "_sum": '''@triton.jit
def _sum(a, b):
    return a + b
''',
    "_max": '''@triton.jit
def _max(a, b):
    return tl.maximum(a, b)
''',
    "_min": '''@triton.jit
def _min(a, b):
    return tl.minimum(a, b)
''',
    # Philox-4x32-10 step for step as `tl.rand(seed, counter)` computes it (triton/language/random.py), so
    # bit-equal to it and to sdc.random_uniform's reference, but from builtins only: tl.rand is a function of
    # triton's standard library, which the interpreter runs only when TRITON_INTERPRET=1 was set before
    # triton was first imported (see TritonRenderer._reduce).
    "_philox_uniform": '''@triton.jit
def _philox_uniform(seed, counter):
    key = seed.to(tl.uint64)
    k0 = (key & 0xFFFFFFFF).to(tl.uint32)
    k1 = ((key >> 32) & 0xFFFFFFFF).to(tl.uint32)
    c0 = counter.to(tl.uint32)
    c1 = (counter >> 32).to(tl.uint32)
    c2 = c0 * 0
    c3 = c0 * 0
    for _ in tl.static_range(10):
        p0 = c0
        p2 = c2
        c0 = tl.umulhi(0xCD9E8D57, p2) ^ c1 ^ k0
        c2 = tl.umulhi(0xD2511F53, p0) ^ c3 ^ k1
        c1 = 0xCD9E8D57 * p2
        c3 = 0xD2511F53 * p0
        k0 = k0 + 0x9E3779B9
        k1 = k1 + 0xBB67AE85
    x = c0.to(tl.int32, bitcast=True)
    x = tl.where(x < 0, -x - 1, x)
    return x.to(tl.float32) * 4.6566127342e-10
''',
    # a finite f32 rounded to the nearest bf16 (ties to even), kept in f32, by integer arithmetic: exact
    # everywhere, where the interpreter of triton 3.9 truncates in its f32 -> bf16 cast
    "_round_bf16": '''@triton.jit
def _round_bf16(x):
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)
''',
}


class TritonRenderer:
    """Triton source for kernel programs. Capabilities are class attributes."""

    name = "triton"
    block = 1024  # elements per program of an elementwise kernel of dynamic or small size
    num_warps = 4
    # (at least this many elements, BLOCK, num_warps), largest first. On the H200 (bench/kernels_gpu.py,
    # 64M bf16, 2026-12-01) 2048 x 4 warps moved 4.27 TB/s, 1024 x 4 4.17, 4096 x 8 4.08, 8192 x 16 4.02
    elementwise_blocks = ((1 << 16, 2048, 4),)
    max_row_block = 4096  # the longest row (a power of 2) one program keeps in registers: longer rows loop
    loop_row_block = 1024  # the block a looping row kernel steps through its row with
    row_elements = 2048  # a program of short rows takes this many elements' worth of rows
    # registers per thread for one row value: num_warps grows with the row. A 4096 bf16 row ran best with
    # 4 warps on the H200 (softmax 3.97 TB/s, layernorm 3.89; 8 warps 3.94 / 3.72, 16 warps 3.26 / 3.22)
    row_values_per_thread = 32
    # Autotuning of the bandwidth-bound templates: only a domain this large tunes. On the H200 (2026-12-02)
    # tuning gained nothing on 128M-element softmax and layer norm rows (0.137 against 0.136 ms, 0.139
    # against 0.138) and cost ResNet-50 b64's first call 1.2 s (its five 51M-element kernels): the
    # heuristic's blocks are right for those sizes, so only larger domains time their candidates.
    tune_min_elements = 1 << 28
    # what an elementwise launch of a tuned size times beside its heuristic: (BLOCK, num_warps)
    elementwise_tune = ((1024, 4), (2048, 8), (4096, 4), (4096, 8))
    # what a row launch of a tuned size times beside its heuristic, as factors: (rows per program, warps)
    # relative to the heuristic's (a looping row scales its step RBLOCK instead of the rows)
    row_tune = ((1, 2), (2, 1), (2, 2), (0.5, 1))
    max_row_program = 8192  # the most row values one candidate's program holds (rows x RBLOCK)
    int32_index_limit = 2**31 - 1  # static domains at most this large index in int32, the rest in int64
    # The matmul template's plan configuration by size (`matmul_candidates` puts it first, then the
    # `matmul_tune` ones). Keys: operand width (f32, or f16/bf16) and the size class of the product.
    matmul_configs = {
        ("f32", "small"): MatmulConfig(32, 32, 32, num_warps=4, num_stages=2),
        ("f32", "medium"): MatmulConfig(64, 64, 32, num_warps=4, num_stages=3),
        ("f32", "large"): MatmulConfig(128, 128, 32, num_warps=8, num_stages=3),
        ("16", "small"): MatmulConfig(32, 32, 64, num_warps=4, num_stages=2),
        ("16", "medium"): MatmulConfig(64, 64, 64, num_warps=4, num_stages=3),
        ("16", "large"): MatmulConfig(128, 128, 64, num_warps=8, num_stages=4),
    }
    # The programs of a persistent matmul candidate: the SMs of an H100 / H200 (elsewhere it is only
    # a worse candidate, which the autotuner's measurement rejects; idle programs exit at once).
    persistent_programs = 132
    # What autotuning tries beside those (the tiles of Triton's matmul tutorial and Inductor's mm
    # configs that suit Hopper: 128/256-wide tiles, 3-5 stages of shared memory (a 128 x 256 x 64
    # bf16 stage is 48 KB of the 227 a block may have), 4 or 8 warps, wider groups, and persistent
    # variants of the two largest tiles, Triton's persistent-matmul tutorial design).
    matmul_tune = {
        ("16", "large"): (MatmulConfig(128, 256, 64, num_warps=8, num_stages=3),
                          MatmulConfig(256, 128, 64, num_warps=8, num_stages=3),
                          MatmulConfig(128, 128, 64, num_warps=4, num_stages=4),
                          MatmulConfig(128, 256, 64, num_warps=8, num_stages=4),
                          MatmulConfig(256, 128, 64, num_warps=8, num_stages=4),
                          MatmulConfig(128, 256, 64, group_m=16, num_warps=8, num_stages=4),
                          MatmulConfig(128, 128, 64, num_warps=8, num_stages=5),
                          MatmulConfig(64, 256, 64, num_warps=4, num_stages=4),
                          MatmulConfig(128, 64, 64, num_warps=4, num_stages=4),
                          MatmulConfig(128, 256, 64, num_warps=8, num_stages=4, programs=persistent_programs),
                          MatmulConfig(128, 128, 64, num_warps=8, num_stages=4, programs=persistent_programs)),
        ("16", "medium"): (MatmulConfig(128, 64, 64, num_warps=4, num_stages=4),
                           MatmulConfig(64, 128, 64, num_warps=4, num_stages=4),
                           MatmulConfig(32, 64, 64, num_warps=4, num_stages=4)),
        ("f32", "large"): (MatmulConfig(128, 64, 32, num_warps=4, num_stages=4),
                           MatmulConfig(64, 128, 32, num_warps=4, num_stages=4),
                           MatmulConfig(128, 256, 32, num_warps=8, num_stages=3),
                           MatmulConfig(64, 64, 32, num_warps=4, num_stages=4)),
        ("f32", "medium"): (MatmulConfig(32, 64, 32, num_warps=4, num_stages=3),
                            MatmulConfig(128, 64, 32, num_warps=4, num_stages=3)),
    }

    # The conv template (conv.py): its implicit GEMM is (N*OH*OW) x Cout x (KH*KW*Cin), large in M, so
    # it starts from the matmul template's large tiles; BLOCK_K steps through Cin (a ResNet layer's 64-2048).
    conv_configs = {"f32": MatmulConfig(128, 64, 32, num_warps=4, num_stages=3),
                    "16": MatmulConfig(128, 128, 64, num_warps=8, num_stages=3)}
    conv_tune = {"16": (MatmulConfig(128, 64, 64, num_warps=4, num_stages=4),
                        MatmulConfig(64, 128, 64, num_warps=4, num_stages=4),
                        MatmulConfig(128, 256, 64, num_warps=8, num_stages=3),
                        MatmulConfig(256, 128, 64, num_warps=8, num_stages=3),
                        MatmulConfig(64, 64, 64, num_warps=4, num_stages=4),
                        MatmulConfig(128, 128, 32, num_warps=4, num_stages=4)),
                 "f32": (MatmulConfig(64, 64, 32, num_warps=4, num_stages=4),
                         MatmulConfig(128, 128, 32, num_warps=8, num_stages=3))}

    # the primitives of scalar formulas (sdc/dialect/scalar.py) it renders: an op_* method or an INFIX operator
    primitives = frozenset({
        "neg", "abs", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "tanh", "erf", "sin", "cos", "floor", "ceil",
        "not", "bitwise_not", "isnan", "isinf", "add", "sub", "mul", "div", "max", "min", "bitwise_and",
        "bitwise_or", "bitwise_xor", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "where"})
    # ops computed from the element's flat index (elementwise template only: the lowering checks)
    index_ops = frozenset({"random_uniform"})

    @classmethod
    def elementwise_ops(cls) -> frozenset[str]:
        """The elementwise ops whose formulas its primitives render, and the index ops."""
        return supported_ops(cls.primitives) | cls.index_ops

    def __init__(self) -> None:
        self.helpers: set[str] = set()

    def why_not(self, program: KernelProgram) -> str | None:
        """Why it cannot render this program, or None: a composite op whose formula, with the node's
        attributes, needs a primitive it lacks (the lowering has checked the ops themselves)."""
        for n in program.nodes:
            missing = missing_primitive(n, self.primitives) if is_composite(n.op) else None
            if missing is not None:
                return f"no Triton form for '{missing}' (in 'sdc.{n.op}')"
        return None

    # ------------------------------------------------------------ the whole file

    def matmul_candidates(self, program: KernelProgram) -> list[MatmulConfig]:
        """The configurations worth trying for a matmul kernel, best guess first.

        The first is the plan's own; the others go to the launch's `tune` list, and the launcher
        times them all at the first call of a shape on the device and keeps the fastest
        (sdc/runtime/launch/triton.py, cached on disk by source hash, device and shape)."""
        *batch, m, n, k = program.domain
        width = "f32" if program.args[0].dtype == "f32" else "16"
        sides = [s for s in (m, n) if s is not None]
        smallest = min(sides) if sides else None
        size = ("small" if smallest is not None and smallest <= 32
                else "medium" if None not in (m, n) and m * n <= 512 * 512 else "large")
        out: list[MatmulConfig] = []
        for c in [self.matmul_configs[(width, size)], *self.matmul_tune.get((width, size), ())]:
            c = c.clamped(m, n, k)
            if c not in out:
                out.append(c)
        return out

    def tune_blocks(self, program: KernelProgram) -> list[dict[str, int]]:
        """Every launch configuration worth timing, `plan_blocks` first: a matmul's, conv's and
        attention's tiles; an elementwise or row kernel's blocks and warps when its domain has at least
        `tune_min_elements` (static) elements, else only the heuristic's."""
        if program.template == ATTENTION:
            return attention_blocks(program)
        if program.template == CONV:
            candidates = conv_candidates(self, program)
        elif program.template == MATMUL:
            candidates = self.matmul_candidates(program)
        elif program.template == ELEMENTWISE:
            return self._elementwise_candidates(program)
        else:
            return self._row_candidates(program)
        persistent = {} if program.template == CONV else {"PROGRAMS": 0}  # a matmul constexpr only
        return [{"BLOCK_M": c.block_m, "BLOCK_N": c.block_n, "BLOCK_K": c.block_k, "GROUP_M": c.group_m,
                 **({"PROGRAMS": c.programs} if persistent else {}),
                 "num_warps": c.num_warps, "num_stages": c.num_stages} for c in candidates]

    def _elementwise_candidates(self, program: KernelProgram) -> list[dict[str, int]]:
        """The heuristic's blocks, then (large domains only) each `elementwise_tune` (BLOCK, warps)."""
        default = self.plan_blocks(program)
        numel = _static_numel(program.domain[:_iterated(program)])
        if numel is None or numel < self.tune_min_elements:
            return [default]
        out = [default]
        for block, warps in self.elementwise_tune:
            c = {**default, "BLOCK": block, "num_warps": warps}
            if c not in out:
                out.append(c)
        return out

    def _row_candidates(self, program: KernelProgram) -> list[dict[str, int]]:
        """The heuristic's blocks, then (large domains only) each `row_tune` scaling of its rows per
        program (its step RBLOCK for a looping row) and warps, at most `max_row_program` values a
        program and 16 warps."""
        default = self.plan_blocks(program)
        numel = _static_numel(program.domain)
        if numel is None or numel < self.tune_min_elements:
            return [default]
        rows = _static_numel(program.domain[:-1])
        out = [default]
        for scale, warp_scale in self.row_tune:
            c = dict(default)
            if default.get("looped"):
                c["RBLOCK"] = int(default["RBLOCK"] * scale)
                values = c["RBLOCK"]
            else:
                c["ROWS"] = min(int(default["ROWS"] * scale), next_power_of_2(rows))
                values = c["RBLOCK"] * c["ROWS"]
            c["num_warps"] = min(16, default["num_warps"] * warp_scale)
            if c["RBLOCK"] >= 16 and c.get("ROWS", 1) >= 1 and values <= self.max_row_program and c not in out:
                out.append(c)
        return out

    def plan_blocks(self, program: KernelProgram) -> dict[str, int]:
        """The constexprs of the kernel: BLOCK and CONTIG (elementwise), RBLOCK, ROWS and whether the
        row loops (row), BLOCK_M/N/K and GROUP_M (matmul), with the launch options num_warps and
        num_stages."""
        if program.template in (MATMUL, CONV, ATTENTION):
            return self.tune_blocks(program)[0]
        if program.template == ELEMENTWISE:
            numel = _static_numel(program.domain[:_iterated(program)])
            block, warps = self.block, self.num_warps
            for least, b, w in self.elementwise_blocks:
                if numel is not None and numel >= least:
                    block, warps = b, w
                    break
            if numel is not None:
                block = max(16, min(block, next_power_of_2(numel)))
            blocks = {"BLOCK": block, "num_warps": warps}
            maps = [a.map for a in program.args] + [r.map for r, _ in program.results]
            if program.iterated is None and contiguous_offsets(program.domain, maps) is not None:
                blocks["CONTIG"] = 0  # the launcher sets it per call (TritonKernel.contiguous_flag)
            return blocks
        n = program.domain[-1]
        rows = _static_numel(program.domain[:-1]) if len(program.domain) > 1 else 1
        if n is not None and next_power_of_2(n) <= self.max_row_block:
            rblock = max(16, next_power_of_2(n))
            # short rows: several per program, so that one program still moves a few KB
            per_program = max(1, self.row_elements // rblock)
            if rows is not None:
                per_program = min(per_program, next_power_of_2(rows))
            return {"RBLOCK": rblock, "ROWS": per_program, "num_warps": self.row_warps(rblock * per_program)}
        return {"RBLOCK": self.loop_row_block, "ROWS": 1, "looped": 1,
                "num_warps": self.row_warps(self.loop_row_block)}

    def row_warps(self, elements: int) -> int:
        """Warps for a row block of `elements` values: enough that each thread holds at most
        `row_values_per_thread` of every row value in registers (4 when that is fewer)."""
        warps = max(4, elements // (32 * self.row_values_per_thread))
        return min(16, next_power_of_2(warps))

    def grid(self, program: KernelProgram, blocks: dict[str, int]) -> list[str]:
        """The launch grid as dim expressions over the domain sizes d0, d1, ... (sdc.dialect.symexpr)."""
        dims = [f"d{i}" for i in range(len(program.domain))]
        if program.template == ATTENTION:
            return attention_grid(program, blocks)
        if program.template == CONV:
            return conv_grid(blocks)
        if program.template == MATMUL:
            if blocks.get("PROGRAMS"):  # persistent: a fixed number of programs loop over the tiles
                return [str(blocks["PROGRAMS"])]
            *batch, m, n, _ = dims
            tiles = [f"(({m} + {blocks['BLOCK_M'] - 1}) // {blocks['BLOCK_M']})",
                     f"(({n} + {blocks['BLOCK_N'] - 1}) // {blocks['BLOCK_N']})"]
            return [" * ".join([*batch, *tiles])]
        if program.template == ELEMENTWISE:  # the iterated dims only (after them: gathered tables' sizes)
            numel = " * ".join(dims[:_iterated(program)]) or "1"
            return [f"({numel} + {blocks['BLOCK'] - 1}) // {blocks['BLOCK']}"]
        rows = " * ".join(dims[:-1]) or "1"
        return [rows if blocks["ROWS"] == 1 else f"({rows} + {blocks['ROWS'] - 1}) // {blocks['ROWS']}"]

    def render(self, program: KernelProgram, entry: str, blocks: dict[str, int]) -> str:
        self.helpers = set()
        self.globals: list[str] = []
        body = (render_attention(self, program) if program.template == ATTENTION
                else render_conv(self, program) if program.template == CONV
                else self._matmul(program) if program.template == MATMUL
                else self._elementwise(program) if program.template == ELEMENTWISE
                else self._row(program, looped=bool(blocks.get("looped"))))
        rank = len(program.domain)
        params = []
        for prefix, tensors in (("a", program.args), ("o", [r for r, _ in program.results])):
            for i, _ in enumerate(tensors):
                params += [f"{prefix}{i}"] + [f"{prefix}{i}_s{d}" for d in range(rank)]
        params += [f"d{d}" for d in range(rank)]
        params += [f"{name}: tl.constexpr" for name in blocks if name not in LAUNCH_OPTIONS]
        header = [f"# sdc generated kernel '{entry}' ({program.template}): " + ", ".join(program.ops), "#",
                  *("# " + line for line in program.dump().splitlines()), "",
                  *(["import os"] if self.globals else []),
                  "import triton", "import triton.language as tl", "", *self.globals, *([""] if self.globals else [])]
        helpers = [_HELPERS[h] for h in sorted(self.helpers)]
        signature = f"@triton.jit\ndef {entry}({', '.join(params)}):\n"
        return "\n".join(header) + "\n" + "\n".join(helpers) + ("\n" if helpers else "") + signature + \
            "\n".join("    " + line for line in body) + "\n"

    # ------------------------------------------------------------ templates

    def tile_load(self, where: str, rows: bool, cols: bool, dtype: str) -> str:
        """An epilogue operand's load on a BLOCK_M x BLOCK_N output tile (matmul, conv), masked by the
        tile dims it varies over (`rows`, `cols`; neither: one value), widened to f32."""
        mask = {(True, True): "mask", (True, False): "mask_m[:, None]", (False, True): "mask_n[None, :]"}.get((rows, cols))
        return self._widen(f"tl.load({where}, mask={mask}, other=0)" if mask else f"tl.load({where})", dtype)

    def index_type(self, program: KernelProgram, largest_tensor: bool = False) -> str:
        """`.to(tl.int64)` where an index may pass int32 (a dynamic or a huge size), else nothing: over
        the iteration domain, or over the largest tensor for templates whose domain is no tensor's
        (matmul's (M, N, K); `largest_tensor` for the conv and attention templates)."""
        numel = _static_numel(program.domain)
        if largest_tensor or program.template == MATMUL:
            sizes = [_static_numel([program.domain[d] for d in t.map if d is not None])
                     for t in [*program.args, *(r for r, _ in program.results)]]
            numel = None if None in sizes else max(sizes)
        return ".to(tl.int64)" if numel is None or numel > self.int32_index_limit else ""

    def _elementwise(self, p: KernelProgram) -> list[str]:
        rank = _iterated(p)  # a gathered table's own dim (after these) is indexed by a loaded value, not by idx
        lines = [f"pid = tl.program_id(0){self.index_type(p)}",
                 "idx = pid * BLOCK + tl.arange(0, BLOCK)",
                 f"mask = idx < {' * '.join(f'd{d}' for d in range(rank)) or '1'}"]
        tensors = [("a", i, a.map) for i, a in enumerate(p.args)] + \
                  [("o", i, r.map) for i, (r, _) in enumerate(p.results)]
        fast = contiguous_offsets(p.domain, [m for _, _, m in tensors]) if p.iterated is None else None
        general = decompose("idx", rank) + [
            f"off_{prefix}{i} = "
            f"{' + '.join(f'i{d} * {prefix}{i}_s{d}' for d in m if d is not None and d < rank) or 'idx * 0'}"
            for prefix, i, m in tensors]
        if fast is None:
            lines += general
        else:
            # CONTIG (set by the launcher per call): every tensor is dense and unbroadcast in the dims
            # it maps, so its offset is the flat index (or a slice of it): no div/mod per dim, and
            # offsets triton sees as contiguous become 16-byte accesses.
            lines += ["if CONTIG:", *(f"    off_{prefix}{i} = {expr}" for (prefix, i, _), expr in zip(tensors, fast)),
                      "else:", *("    " + line for line in general)]
        names: dict[int, str] = {}
        for n in p.nodes:
            if n.op == "load":
                arg = p.args[n.arg]
                mapped = any(d is not None for d in arg.map)
                expr = f"tl.load(a{n.arg} + off_a{n.arg}, mask=mask)" if mapped else f"tl.load(a{n.arg})"
                expr = self._widen(expr, n.dtype)
            elif n.op == "gather":
                size, stride = f"d{n.attrs['dim']}", f"a{n.arg}_s{n.attrs['dim']}"
                lines.append(f"g{n.id} = {names[n.args[0]]}.to(tl.int64)")
                lines.append(f"g{n.id} = tl.where(g{n.id} < 0, g{n.id} + {size}, g{n.id})")  # from the end
                inside = f"(g{n.id} >= 0) & (g{n.id} < {size})"
                expr = self._widen(f"tl.load(a{n.arg} + off_a{n.arg} + g{n.id} * {stride}, mask=mask & {inside}, "
                                   "other=0)", n.dtype)
            else:
                expr = self.node(n, [names[a] for a in n.args])
            names[n.id] = f"x{n.id}"
            lines.append(f"x{n.id} = {expr}")
        for i, (r, node) in enumerate(p.results):
            lines.append(f"tl.store(o{i} + off_o{i}, {self._narrow(names[node], r.dtype)}, mask=mask)")
        return lines

    def _row(self, p: KernelProgram, looped: bool) -> list[str]:
        """ROWS rows per program as a [ROWS, RBLOCK] block: row values are [ROWS, RBLOCK] (or
        [1, RBLOCK] for a tensor the rows share, a norm's scale), per-row values [ROWS, 1]."""
        rank = len(p.domain)
        last = rank - 1
        lines = [f"pid = tl.program_id(0){self.index_type(p)}",
                 "row = pid * ROWS + tl.arange(0, ROWS)[:, None]",
                 f"rmask = row < {' * '.join(f'd{d}' for d in range(last)) or '1'}"]
        lines += decompose("row", rank - 1)
        lines.append(f"N = d{last}")
        nodes = {n.id: n for n in p.nodes}
        names = {n.id: f"x{n.id}" for n in p.nodes}

        def base(prefix: str, i: int, m) -> str:
            terms = [f"i{d} * {prefix}{i}_s{d}" for d in m if d is not None and d != last]
            return " + ".join(terms) or "0"

        def per_row(m) -> bool:  # indexed by the row (not shared by all rows of the program)
            return any(d is not None and d != last for d in m)

        def emit(n: Node, out: list[str], acc: dict[int, str] | None = None) -> None:
            if n.op == "load":
                arg = p.args[n.arg]
                where = f"a{n.arg} + {base('a', n.arg, arg.map)}"
                own = per_row(arg.map)
                if n.row:
                    expr = f"tl.load({where} + cols * a{n.arg}_s{last}, mask={'mask' if own else 'cmask'}, other=0)"
                else:
                    expr = f"tl.load({where}, mask=rmask, other=0)" if own else f"tl.load({where})"
                out.append(f"x{n.id} = {self._widen(expr, n.dtype)}")
            elif n.reduction:
                x = names[n.args[0]]
                masked = f"tl.where(mask, {x}, {self._identity(n)})"
                if acc is None:
                    out.append(f"x{n.id} = {self._reduce(n, masked)}")
                else:
                    combine = f"acc{n.id} + {masked}" if n.op == "sum" else f"tl.{_ELEMENT_COMBINE[n.op]}(acc{n.id}, {masked})"
                    out.append(f"acc{n.id} = {combine}")
            else:
                out.append(f"x{n.id} = {self.node(n, [names[a] for a in n.args])}")

        def stores(row_values: bool) -> list[str]:
            out = []
            for i, (r, node) in enumerate(p.results):
                is_row = last in r.map
                if is_row != row_values:
                    continue
                offset = base("o", i, r.map)
                where = f"o{i} + {offset if offset != '0' else 'row * 0'}"  # a pointer per row, even for one row
                value = self._narrow(names[node], r.dtype)
                out.append(f"tl.store({where} + cols * o{i}_s{last}, {value}, mask=mask)" if is_row
                           else f"tl.store({where}, {value}, mask=rmask)")
            return out

        columns = ["cols = tl.arange(0, RBLOCK)[None, :]", "cmask = cols < N", "mask = rmask & cmask"]
        if not looped:
            lines += columns
            for n in p.nodes:
                emit(n, lines)
            return lines + stores(True) + stores(False)

        # Looping: each stage of reductions (those that need only earlier stages' results) is one pass
        # over the row, recomputing the row values it needs; a last pass computes and stores the row results.
        stage = _stages(p.nodes)
        done: set[int] = set()
        row_len = "N" if p.domain[last] is None else str(p.domain[last])

        def scalars_ready() -> None:
            for n in p.nodes:
                if n.id not in done and not n.row and not n.reduction and all(a in done for a in n.args):
                    emit(n, lines)
                    done.add(n.id)

        def row_cone(targets: list[int]) -> list[Node]:
            need: set[int] = set()
            todo = list(targets)
            while todo:
                i = todo.pop()
                if i in need or i in done:
                    continue
                need.add(i)
                todo += [a for a in nodes[i].args if nodes[a].row or not (a in done)]
            return [n for n in p.nodes if n.id in need]

        for s in range(1, max(stage.values(), default=0) + 1):
            scalars_ready()
            reductions = [n for n in p.nodes if n.reduction and stage[n.id] == s]
            for r in reductions:
                lines.append(f"acc{r.id} = tl.full([ROWS, RBLOCK], {self._identity(r)}, {_REGISTER[r.dtype]})")
            body: list[str] = [c.replace("= tl.arange", "= start + tl.arange") for c in columns]
            for n in row_cone([r.id for r in reductions]):
                emit(n, body, acc={} if n.reduction else None)
            lines += self._loop("start", row_len, "RBLOCK", body)
            for r in reductions:
                lines.append(f"x{r.id} = {self._reduce(r, f'acc{r.id}')}")
                done.add(r.id)
        scalars_ready()
        lines += stores(False)
        row_results = [node for r, node in p.results if last in r.map]
        if row_results:
            body = [c.replace("= tl.arange", "= start + tl.arange") for c in columns]
            for n in row_cone(row_results):
                emit(n, body)
            lines += self._loop("start", row_len, "RBLOCK", body + stores(True))
        return lines

    def _matmul(self, p: KernelProgram) -> list[str]:
        nb = len(p.domain) - 3
        M, N, K = (f"d{nb}", f"d{nb + 1}", f"d{nb + 2}")
        rows, cols, inner = nb, nb + 1, nb + 2
        wide = self.index_type(p)
        head = [f"pid = tl.program_id(0){wide}",
                f"tiles_m = ({M} + BLOCK_M - 1) // BLOCK_M",
                f"tiles_n = ({N} + BLOCK_N - 1) // BLOCK_N"]
        # `job`: the output tile (of every batch) this program computes
        lines = ["tile = job % (tiles_m * tiles_n)"]
        if nb:
            lines.append("batch = job // (tiles_m * tiles_n)")
            lines += decompose("batch", nb)
        lines += ["# grouped ordering: GROUP_M row tiles in turn read the same columns of B while they are in L2",
                  "width = GROUP_M * tiles_n",
                  "first_m = (tile // width) * GROUP_M",
                  "group_m = tl.minimum(tiles_m - first_m, GROUP_M)",
                  "pid_m = first_m + (tile % width) % group_m",
                  "pid_n = (tile % width) // group_m",
                  "rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
                  "rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
                  f"rk = tl.arange(0, BLOCK_K){wide}",
                  f"mask_m = rm < {M}",
                  f"mask_n = rn < {N}",
                  "mask = mask_m[:, None] & mask_n[None, :]"]

        def batch_terms(prefix: str, i: int, m) -> list[str]:
            return [f"i{d} * {prefix}{i}_s{d}" for d in m if d is not None and d < nb]

        names: dict[int, str] = {}
        for n in p.nodes:
            names[n.id] = f"x{n.id}"
            if n.op == "dot":
                lines += self._dot(p, n, batch_terms, rows, cols, inner)
                continue
            if n.op == "load":
                arg = p.args[n.arg]
                terms = batch_terms("a", n.arg, arg.map)
                has_m, has_n = rows in arg.map, cols in arg.map
                if has_m:
                    terms.append(f"rm[:, None] * a{n.arg}_s{rows}")
                if has_n:
                    terms.append(f"rn[None, :] * a{n.arg}_s{cols}")
                where = f"a{n.arg} + {' + '.join(terms)}" if terms else f"a{n.arg}"
                expr = self.tile_load(where, has_m, has_n, n.dtype)
            else:
                expr = self.node(n, [names[a] for a in n.args])
            lines.append(f"x{n.id} = {expr}")
        for i, (r, node) in enumerate(p.results):
            terms = batch_terms("o", i, r.map) + [f"rm[:, None] * o{i}_s{rows}", f"rn[None, :] * o{i}_s{cols}"]
            lines.append(f"tl.store(o{i} + {' + '.join(terms)}, {self._narrow(names[node], r.dtype)}, mask=mask)")
        return head + self._persistent(lines, " * ".join(["tiles_m * tiles_n", *(f"d{d}" for d in range(nb))]))

    def _persistent(self, body: list[str], jobs: str) -> list[str]:
        """`body` once for the tile `job = pid`, or, when the constexpr PROGRAMS is set, in a loop over
        the tiles pid, pid + PROGRAMS, ... < `jobs` (a persistent kernel: its grid is PROGRAMS). The
        compiled loop is `tl.range(..., flatten=True)`, so that the software pipeline runs across
        tiles (the next tile's loads overlap this one's epilogue); the interpreter loops with `while`."""
        self._interpreted_flag()
        loop = [f"for job in tl.range(pid, {jobs}, PROGRAMS, flatten=True):", *("    " + b for b in body)]
        interpreted = ["job = pid", f"while job < {jobs}:", *("    " + b for b in body), "    job += PROGRAMS"]
        return ["if PROGRAMS:",
                "    if _INTERPRETED:", *("        " + b for b in interpreted),
                "    else:", *("        " + b for b in loop),
                "else:", "    job = pid", *("    " + b for b in body)]

    def _dot(self, p: KernelProgram, n: Node, batch_terms, rows: int, cols: int, inner: int) -> list[str]:
        """The K loop: fp32 accumulation of tl.dot over BLOCK_K slices of both operands, masked at the edges."""
        a, b = n.attrs["lhs"], n.attrs["rhs"]
        K = f"d{inner}"
        a_base = " + ".join([f"a{a}", *batch_terms("a", a, p.args[a].map)])
        b_base = " + ".join([f"a{b}", *batch_terms("a", b, p.args[b].map)])
        precision = n.attrs.get("input_precision")
        # input_precision, not the deprecated allow_tf32: both the triton of the GPU host (3.6) and of CI (3.9) take it
        dot_kw = f', input_precision="{precision}"' if precision else ""
        body = [f"kk = k + rk",
                f"mask_k = kk < {K}",
                f"lhs = tl.load({a_base} + rm[:, None] * a{a}_s{rows} + kk[None, :] * a{a}_s{inner}, "
                f"mask=mask_m[:, None] & mask_k[None, :], other=0.0)",
                f"rhs = tl.load({b_base} + kk[:, None] * a{b}_s{inner} + rn[None, :] * a{b}_s{cols}, "
                f"mask=mask_k[:, None] & mask_n[None, :], other=0.0)"]
        if p.args[a].dtype == "bf16":
            # The interpreter of triton 3.9 multiplies bf16 blocks as their raw 16-bit patterns: it gets
            # them as f32 (exact); compiled kernels keep bf16 tensor cores (the branch folds away).
            self._interpreted_flag()
            body += ["if _INTERPRETED:", "    lhs = lhs.to(tl.float32)", "    rhs = rhs.to(tl.float32)"]
        body.append(f"acc = tl.dot(lhs, rhs, acc{dot_kw})")
        k_size = K if p.domain[inner] is None else str(p.domain[inner])
        return ["acc = tl.full([BLOCK_M, BLOCK_N], 0.0, tl.float32)", *self._loop("k", k_size, "BLOCK_K", body),
                f"x{n.id} = acc"]

    def _interpreted_flag(self) -> None:
        """The module constant `_INTERPRETED` (TRITON_INTERPRET is set): a constexpr, so a branch on it
        folds away in compiled kernels."""
        line = ('_INTERPRETED = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0").strip().lower() '
                'in ("1", "true", "on", "yes"))')
        if line not in self.globals:
            self.globals.append(line)

    def _loop(self, var: str, bound: str, step: str, body: list[str]) -> list[str]:
        """`for var in range(0, bound, step)` over `body`. A static bound is a literal. A run-time one
        loops with `while` under the interpreter: the interpreter of triton 3.6 (the GPU host's)
        turns a size argument into a one-element array, which numpy 2 refuses as a `range` bound."""
        loop = [f"for {var} in range(0, {bound}, {step}):", *("    " + b for b in body)]
        if bound.isdigit():
            return loop
        self._interpreted_flag()
        return ["if _INTERPRETED:", f"    {var} = 0", f"    while {var} < {bound}:", *("        " + b for b in body),
                f"        {var} += {step}", "else:", *("    " + b for b in loop)]

    def _reduce(self, n: Node, block: str) -> str:
        # tl.reduce with combine functions of this file, not tl.sum/tl.max: those are @triton.jit
        # functions of triton's standard library, which the interpreter runs only when
        # TRITON_INTERPRET=1 was set before triton was first imported in the process.
        self.helpers.add(f"_{n.op}")
        return f"tl.reduce({block}, 1, _{n.op})[:, None]"  # along the row, kept as a [ROWS, 1] column

    def _identity(self, n: Node) -> str:
        return {"sum": "0.0", "max": '-float("inf")', "min": 'float("inf")'}[n.op]

    def _widen(self, expr: str, dtype: str) -> str:
        return f"{expr}.to(tl.float32)" if dtype in ("f16", "bf16") else expr

    def _narrow(self, name: str, dtype: str) -> str:
        return f"{name}.to({_STORAGE[dtype]})" if dtype in ("f16", "bf16") else name

    # ------------------------------------------------------------ one method per primitive op

    def node(self, n: Node, args: list[str]) -> str:
        if is_composite(n.op):  # its op's scalar formula, each primitive by the methods below
            return inline(n, args, self.node)
        if n.op in INFIX:  # the ops that are one Python operator
            x, y = args
            return f"({x} {INFIX[n.op]} {y})"
        method = getattr(self, f"op_{n.op}", None)
        if method is None:
            raise ValueError(f"the Triton renderer has no method for '{n.op}'")
        return method(n, *args)

    def op_const(self, n: Node) -> str:
        return literal(n.value)

    def op_rowlen(self, n: Node) -> str:
        return "(N * 1.0)"  # N may arrive as a constexpr (triton specializes sizes of 1)

    def op_cast(self, n: Node, x: str) -> str:
        to, src = n.dtype, n.attrs["from"]
        if to == "i1":
            return f"({x} != 0)"
        if to in ("f16", "bf16") and src == "i1":
            # 0 and 1 are exact in 16 bits: no rounding step. (The interpreter of triton 3.9 also cannot cast a
            # bool block to a 16-bit float: it reads the bools' bytes as 32-bit words.)
            return f"{x}.to(tl.float32)"
        if to in ("f16", "bf16"):
            return f"{x}.to({_STORAGE[to]}).to(tl.float32)"
        if _REGISTER[to] == _REGISTER.get(src):
            return x
        return f"{x}.to({_REGISTER[to]})"

    def op_neg(self, n, x):
        return f"(-{x})"

    def op_abs(self, n, x):
        return f"tl.abs({x})"

    def op_exp(self, n, x):
        return f"tl.exp({x})"

    def op_log(self, n, x):
        return f"tl.log({x})"

    def op_sqrt(self, n, x):
        return f"tl.sqrt({x})"

    def op_rsqrt(self, n, x):
        return f"tl.rsqrt({x})"

    def op_tanh(self, n, x):
        self.helpers.add("_tanh")
        return f"_tanh({x})"

    def op_expm1(self, n, x):
        return f"(tl.exp({x}) - 1.0)"

    def op_log1p(self, n, x):
        return f"tl.log(1.0 + {x})"

    def op_erf(self, n, x):
        return f"tl.erf({x})"

    def op_sin(self, n, x):
        return f"tl.sin({x})"

    def op_cos(self, n, x):
        return f"tl.cos({x})"

    def op_floor(self, n, x):
        return f"tl.floor({x})"

    def op_ceil(self, n, x):
        return f"tl.ceil({x})"

    def op_not(self, n, x):
        return f"({x} == 0)"

    def op_bitwise_not(self, n, x):
        return f"({x} == 0)" if n.dtype == "i1" else f"(~{x})"

    def op_isnan(self, n, x):
        return f"({x} != {x})"

    def op_isinf(self, n, x):
        return f'(tl.abs({x}) == float("inf"))'

    def op_add(self, n, x, y):
        return f"({x} + {y})"

    def op_sub(self, n, x, y):
        return f"({x} - {y})"

    def op_mul(self, n, x, y):
        return f"({x} * {y})"

    def op_div(self, n, x, y):
        return f"({x} / {y})"

    def op_max(self, n, x, y):
        return f"tl.maximum({x}, {y})"

    def op_min(self, n, x, y):
        return f"tl.minimum({x}, {y})"

    def op_where(self, n, c, x, y):
        return f"tl.where({c}, {x}, {y})"

    def op_random_uniform(self, n, seed, offset):
        """Philox of (seed, offset + i) for the flat index `idx` of the elementwise template (the lowering
        admits the op only where the value's flat index is the domain's), rounded to the result type
        as the reference casts its f32 draws."""
        self.helpers.add("_philox_uniform")
        u = f"_philox_uniform({seed}.to(tl.int64), {offset}.to(tl.int64) + idx)"
        if n.dtype == "bf16":  # rounded as the reference's cast rounds (a draw near 1 may become 1.0 there too)
            self.helpers.add("_round_bf16")
            return f"_round_bf16({u})"
        if n.dtype == "f16":
            return f"{u}.to(tl.float16).to(tl.float32)"
        return u if n.dtype == "f32" else f"{u}.to({_REGISTER[n.dtype]})"


INFIX = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "and": "&", "or": "|", "xor": "^",
         "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_ELEMENT_COMBINE = {"max": "maximum", "min": "minimum"}
LAUNCH_OPTIONS = ("looped", "num_warps", "num_stages")  # plan_blocks keys that are not constexprs of the signature


def contiguous_offsets(domain, maps) -> list[str] | None:
    """Each tensor's offset from the flat index `idx` when it is dense in the dims it maps, or None
    when some map does not allow that (the kernel then has no contiguous fast path).

    A tensor that maps a run of consecutive domain dims, in order, lo..hi (dims of static size 1
    inside it do not count), and is dense there, sits at `(idx // inner) % span`: `inner` the size of
    the domain dims after hi (a broadcast along trailing dims), `span` that of lo..hi (a broadcast
    along leading dims: a bias). A tensor that maps no dim is one element (`0`). Returns None for a
    domain of rank 0 or 1 (the general path is one multiply by a stride triton specializes to 1)
    or when a map breaks the pattern."""
    if len(domain) <= 1:
        return None
    out = []
    for m in maps:
        dims = [d for d in m if d is not None]
        if not dims:
            out.append("0")
            continue
        lo, hi = dims[0], dims[-1]
        inside = [d for d in range(lo, hi + 1) if domain[d] != 1]
        if dims != sorted(dims) or [d for d in dims if domain[d] != 1] != inside:
            return None
        inner = " * ".join(f"d{d}" for d in range(hi + 1, len(domain)))
        span = " * ".join(f"d{d}" for d in range(lo, hi + 1))
        expr = f"(idx // ({inner}))" if inner else "idx"
        out.append(f"{expr} % ({span})" if lo > 0 else expr)
    return out


def _stages(nodes: list[Node]) -> dict[int, int]:
    """Each node's reduction stage: a reduction is one more than the latest stage it depends on."""
    stage: dict[int, int] = {}
    for n in nodes:
        before = max((stage[a] for a in n.args), default=0)
        stage[n.id] = before + 1 if n.reduction else before
    return stage


def _iterated(program: KernelProgram) -> int:
    """The domain dims an elementwise kernel's flat index runs over (`KernelProgram.iterated`)."""
    return len(program.domain) if program.iterated is None else program.iterated


def _static_numel(domain) -> int | None:
    if any(d is None for d in domain):
        return None
    return math.prod(domain)
