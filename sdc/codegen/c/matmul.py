"""The `matmul` template of a `KernelProgram` rendered as one C function (the ABI of sdc/runtime/launch/c.py).

What a program means (sdc/codegen/kernel/matmul.py): the domain is
`(*batch, M, N, K)`; one `dot` node multiplies kernel arguments `attrs["lhs"]` (mapped onto
(M, K), or (K, M) when the op transposes it) and `attrs["rhs"]` ((K, N), or (N, K)), both mapping
their batch dims right-aligned onto the domain's (None where they broadcast); the other nodes are
the elementwise epilogue on the product, its loads indexed by the batch dims, M and N.

The function, per batch: the output in tiles of `ROWS` rows x `VECTORS` vectors of columns. A tile
is one call of `sdc_mm_tile_<dtype>`, whose accumulators are GCC/Clang vector-extension values
(registers: 12 of the 16 AVX2 ones), updated with one fused multiply-add per vector and k from a
contiguous row of B and a broadcast element of A, in blocks of `K_BLOCK` k whose partial sums are
added to the tile's. The last tile of rows (M mod ROWS) calls a tile function of its own row count:
an M of 1 (a classifier at batch 1, a decoder's step) computes one row, not ROWS. Where B's rows are
dense (n at stride 1) the whole tiles read it in place, and only the columns of a last, partial tile
are copied into a zero-padded [K][nc] scratch; a transposed B is copied whole into a zero-padded
[K][N'] scratch. Either copy is made once per distinct B block (once per call when B broadcasts over
the batch). A 2-d weight read transposed (a Gemm's transB, a linear layer's [out, in]) is lowered as
its [K][N] copy, which the launcher makes once at load (plan.py `_stored_transposed`, the kernel's
`transposed`), so no weight is copied per call. The epilogue then runs per
element of the tile, in the compute type of each node (`CRenderer.expr`), and stores the results.

f32 accumulates in float, f64 in double; anything else is `why_not_matmul`.
"""

from __future__ import annotations

from sdc.codegen.kernel.program import MATMUL, KernelProgram, TensorArg

MATMUL_TYPES = {"f32": "float", "f64": "double"}  # operand dtype -> C type of operands and accumulators
ROWS = 6  # rows of A per tile
VECTORS = 2  # vectors of columns per tile: ROWS * VECTORS accumulators
VECTOR_BYTES = 32  # one AVX2 register (on narrower hosts the compiler splits it)
# k per block of partial sums: each accumulator sums K_BLOCK products, then adds them to the tile's
# sum, so a sum of K terms carries the rounding of about K_BLOCK + K / K_BLOCK additions, not K (a
# K of 2048 positive terms, ResNet-50's classifier, was 1.3e-5 off onnxruntime's blocked sums)
K_BLOCK = 128


def _lanes(dtype: str) -> int:
    return VECTOR_BYTES // (4 if dtype == "f32" else 8)


def tile_columns(dtype: str) -> int:
    """Columns of the output per tile."""
    return VECTORS * _lanes(dtype)


def why_not_matmul(renderer, program: KernelProgram) -> str | None:
    """Why the C renderer (`renderer`, a CRenderer: its dtypes and node checks) cannot take this matmul
    program, or None."""
    dots = [n for n in program.nodes if n.op == "dot"]
    if program.template != MATMUL or len(dots) != 1:
        return f"not one product of the matmul template ({program.template}, {len(dots)} dot nodes)"
    dot = dots[0]
    lhs, rhs = program.args[dot.attrs["lhs"]], program.args[dot.attrs["rhs"]]
    if lhs.dtype not in MATMUL_TYPES or rhs.dtype != lhs.dtype or dot.dtype != lhs.dtype:
        return (f"a C matmul of {lhs.dtype} x {rhs.dtype} -> {dot.dtype} (the template multiplies "
                f"{'/'.join(MATMUL_TYPES)} operands into their own type)")
    for r, _ in program.results:
        if r.layout is not None:
            return f"result '{r.value}' stored in the layout {list(r.layout)}"
    for t in [*program.args, *(r for r, _ in program.results)]:
        mapped = [d for d in t.map if d is not None]
        if len(mapped) != len(set(mapped)):
            return f"'{t.value}' maps two of its dims onto one domain dim: {list(t.map)}"
        if t.dtype not in renderer.dtypes:
            return f"'{t.value}' of {t.dtype} (C kernels read and write {', '.join(sorted(renderer.dtypes))})"
    nodes = {n.id: n for n in program.nodes}
    for n in program.nodes:  # the epilogue: what the elementwise template would refuse of it
        if n.op == "gather":
            return "a gather in a matmul epilogue"
        reason = None if n is dot else renderer._why_not_node(n, nodes)
        if reason is not None:
            return f"{reason} in a matmul epilogue"
    return None


def render_matmul(renderer, program: KernelProgram, entry: str) -> str:
    """The C function `int entry(void **p, const int64_t *d)` of a matmul program that
    `why_not_matmul` accepts."""
    return _MatmulFunction(renderer, program, entry).text()


class _MatmulFunction:
    def __init__(self, renderer, program: KernelProgram, entry: str):
        self.r = renderer
        self.p = program
        self.entry = entry
        self.nb = len(program.domain) - 3
        self.rows, self.cols, self.inner = self.nb, self.nb + 1, self.nb + 2
        (self.dot,) = [n for n in program.nodes if n.op == "dot"]
        self.dtype = program.args[self.dot.attrs["lhs"]].dtype
        self.t = MATMUL_TYPES[self.dtype]
        self.nc = tile_columns(self.dtype)

    # ------------------------------------------------------------ sizes and strides

    def stride(self, t: TensorArg, dim: int) -> str | None:
        """The C expression of `t`'s element stride along domain dim `dim` (None: `t` does not vary
        along it): dense row-major in its own shape, dim j of size d[map[j]] (1 where None)."""
        if dim not in t.map:
            return None
        j = t.map.index(dim)
        later = [f"d{m}" for m in t.map[j + 1:] if m is not None]
        return " * ".join(later) if later else "1"

    def offset(self, t: TensorArg, name: str, dims: list[tuple[int, str]]) -> str:
        """`name`'s element offset at the given (domain dim, index expression) pairs."""
        terms = [f"{index} * {name}_s{dim}" for dim, index in dims if self.stride(t, dim) is not None]
        return " + ".join(terms) if terms else "0"

    # ------------------------------------------------------------ the function

    def text(self) -> str:
        p = self.p
        self.r.helpers.add(f"mm_{self.dtype}")
        loop = self.batch()
        for dim in reversed(range(self.nb)):
            loop = [f"for (int64_t i{dim} = 0; i{dim} < d{dim}; ++i{dim}) {{", *("    " + line for line in loop), "}"]
        body = [*self.head(), *loop, "free(packed);", "return 0;"]
        header = [f"// kernel '{self.entry}' (matmul): " + ", ".join(p.ops),
                  *("//   " + line for line in p.dump().splitlines())]
        return "\n".join([*header, f"int {self.entry}(void **p, const int64_t *d)", "{",
                          *("    " + line for line in body), "}", ""])

    def head(self) -> list[str]:
        """Sizes, pointers, strides and the scratch, before the batch loops."""
        p, t, nc = self.p, self.t, self.nc
        N, K = f"d{self.cols}", f"d{self.inner}"
        lines = [f"const int64_t d{i} = {size if size is not None else f'd[{i}]'};" for i, size in enumerate(p.domain)]
        lines.append(f"if ({' || '.join(f'd{i} == 0' for i in range(self.nb + 2))}) return 0;")
        for i, a in enumerate(p.args):
            lines.append(f"const {self.r.ctype(a.dtype)} *a{i} = (const {self.r.ctype(a.dtype)} *)p[{i}];")
        for i, (r, _) in enumerate(p.results):
            lines.append(f"{self.r.ctype(r.dtype)} *o{i} = ({self.r.ctype(r.dtype)} *)p[{len(p.args) + i}];")
        operands = {f"a{self.dot.attrs['lhs']}", f"a{self.dot.attrs['rhs']}"}
        for name, a in self.tensors():  # the strides `offset` names: batch dims; M and N of the epilogue's tensors
            for dim in a.map:
                if dim is not None and (dim < self.nb or (name not in operands and dim != self.inner)):
                    lines.append(f"const int64_t {name}_s{dim} = {self.stride(a, dim)};")
        sbk, sbn = self.rhs_strides()
        # B read where it lies when its rows are dense (whole tiles; the last, partial one from a
        # zero-padded [K][nc] copy of its columns), else (transposed) copied into a padded [K][ldb] block
        return lines + [f"const int64_t whole = {N} / {nc} * {nc};  /* the columns of whole tiles */",
                        f"const int in_place = {sbn} == 1;",
                        f"const int64_t ldb = in_place ? {sbk} : ({N} + {nc - 1}) / {nc} * {nc};",
                        f"const int64_t scratch = in_place ? (whole < {N} ? {K} * {nc} : 0) : {K} * ldb;",
                        f"{t} *packed = scratch ? ({t} *)malloc((size_t)scratch * sizeof({t})) : NULL;",
                        "if (scratch && packed == NULL) return 1;  /* the launcher runs the torch ops */",
                        f"const {t} *packed_from = NULL;",
                        f"{t} c[{ROWS} * {nc}];"]

    def tensors(self) -> list[tuple[str, TensorArg]]:
        return ([(f"a{i}", a) for i, a in enumerate(self.p.args)]
                + [(f"o{i}", r) for i, (r, _) in enumerate(self.p.results)])

    def rhs_strides(self) -> tuple[str, str]:
        rhs = self.p.args[self.dot.attrs["rhs"]]
        return self.stride(rhs, self.inner) or "0", self.stride(rhs, self.cols) or "0"

    def batch(self) -> list[str]:
        """One batch: its offsets, its B block, its tiles (i0.. are the batch indices)."""
        t, nc, dtype = self.t, self.nc, self.dtype
        M, N, K = f"d{self.rows}", f"d{self.cols}", f"d{self.inner}"
        lhs_i, rhs_i = self.dot.attrs["lhs"], self.dot.attrs["rhs"]
        batch = [(dim, f"i{dim}") for dim in range(self.nb)]
        lines = [f"const int64_t {name}_b = {self.offset(a, name, batch)};" for name, a in self.tensors()]
        sbk, sbn = self.rhs_strides()
        lines += [f"const {t} *bsrc = a{rhs_i} + a{rhs_i}_b;",
                  f"const {t} *bk = in_place ? bsrc : packed;",
                  "if (packed != NULL && bsrc != packed_from) {  /* once per distinct B block */",
                  "    if (in_place)",
                  f"        sdc_mm_pack_{dtype}(bsrc + whole * {sbn}, {sbk}, {sbn}, {K}, {N} - whole, {nc}, packed);",
                  "    else",
                  f"        sdc_mm_pack_{dtype}(bsrc, {sbk}, {sbn}, {K}, {N}, ldb, packed);",
                  "    packed_from = bsrc;",
                  "}"]
        lhs = self.p.args[lhs_i]
        sam, sak = self.stride(lhs, self.rows) or "0", self.stride(lhs, self.inner) or "0"
        a = f"a{lhs_i} + a{lhs_i}_b + m0 * {sam}, {sam}, {sak}, rows"
        # the whole tiles' epilogue loops over a constant width (gcc -O2 vectorizes it); the last, partial
        # tile's over `cols` is a separate block, which gcc does not merge with it
        tiles = [f"const int64_t rows = {M} - m0 < {ROWS} ? {M} - m0 : {ROWS};",
                 f"for (int64_t n0 = 0; n0 < whole; n0 += {nc}) {{",
                 f"    sdc_mm_tile_{dtype}({a}, bk + n0, ldb, {K}, c);",
                 *("    " + line for line in self.tile_loops(nc)),
                 "}",
                 f"if (whole < {N}) {{",
                 "    const int64_t n0 = whole;",
                 f"    const int64_t cols = {N} - whole;",
                 f"    if (in_place) sdc_mm_tile_{dtype}({a}, packed, {nc}, {K}, c);",
                 f"    else sdc_mm_tile_{dtype}({a}, bk + n0, ldb, {K}, c);",
                 *("    " + line for line in self.tile_loops("cols")),
                 "}"]
        return lines + [f"for (int64_t m0 = 0; m0 < {M}; m0 += {ROWS}) {{", *("    " + line for line in tiles), "}"]

    def tile_loops(self, cols: int | str) -> list[str]:
        """The epilogue over the rows of the tile and its first `cols` columns."""
        return ["for (int64_t i = 0; i < rows; ++i) {",
                "    const int64_t m = m0 + i;",
                "    _Pragma(\"GCC ivdep\")",
                f"    for (int64_t j = 0; j < {cols}; ++j) {{",
                "        const int64_t n = n0 + j;",
                *("        " + line for line in self.epilogue()),
                "    }",
                "}"]

    def epilogue(self) -> list[str]:
        """The statements that compute and store output element (m, n) of the tile from `c[i][j]`."""
        p = self.p
        tile = [(self.rows, "m"), (self.cols, "n")]
        lines, names = [], {}
        for n in p.nodes:
            names[n.id] = f"x{n.id}"
            if n.op == "dot":
                value = f"c[i * {self.nc} + j]"
            elif n.op == "load":
                a = p.args[n.arg]
                where = " + ".join(x for x in [f"a{n.arg}_b", self.offset(a, f"a{n.arg}", tile)] if x != "0")
                value = f"({self.r.compute_type(n.dtype)})a{n.arg}[{where}]"
            else:
                value = self.r.expr(n, [names[x] for x in n.args])
            lines.append(f"const {self.r.compute_type(n.dtype)} x{n.id} = {value};")
        for i, (r, node) in enumerate(p.results):
            where = " + ".join(x for x in [f"o{i}_b", self.offset(r, f"o{i}", tile)] if x != "0")
            lines.append(f"o{i}[{where}] = ({self.r.ctype(r.dtype)})x{node};")
        return lines


# ---------------------------------------------------------------- helpers (once per source file)

# One fused multiply-add per accumulator and k: GCC contracts `acc += x * b` only under -ffp-contract=fast,
# which ISO C modes (-std=c11) turn off, and an `optimize` attribute on the tile function stops gcc from
# vectorizing its callers. So hosts with AVX and FMA call the builtin (GCC and Clang both have it; the
# <immintrin.h> that wraps it would add half a second to every compile), others the expression.
_FMA = """#ifndef SDC_MM_FMA
#define SDC_MM_FMA
#if defined(__AVX__) && defined(__FMA__)
#define SDC_MM_FMA_f32(acc, x, b) ((acc) = __builtin_ia32_vfmaddps256((x), (b), (acc)))
#define SDC_MM_FMA_f64(acc, x, b) ((acc) = __builtin_ia32_vfmaddpd256((x), (b), (acc)))
#else
#define SDC_MM_FMA_f32(acc, x, b) ((acc) += (x) * (b))
#define SDC_MM_FMA_f64(acc, x, b) ((acc) += (x) * (b))
#endif
#endif"""


def matmul_helpers(dtype: str) -> str:
    """The static helpers of the matmul template for one operand dtype (CRenderer's helper `mm_<dtype>`):
    its vector type, the tile functions and the packing of B."""
    t, lanes, nc = MATMUL_TYPES[dtype], _lanes(dtype), tile_columns(dtype)
    vec = f"sdc_v{lanes}{dtype}"

    def tile_rows(rows: int) -> str:
        """The tile function of exactly `rows` rows of A: `rows` x VECTORS accumulators."""
        accs = [[f"c{i}{v}" for v in range(VECTORS)] for i in range(rows)]
        zero = ", ".join(f"{a} = {{0}}" for row in accs for a in row)
        pointers = "\n".join(f"    const {t} *r{i} = a + {i} * sam;" for i in range(rows))
        loads = "\n".join(f"            {vec} b{v};\n            memcpy(&b{v}, bk + {v * lanes}, sizeof b{v});"
                          for v in range(VECTORS))
        broadcast = ", ".join(["x"] * lanes)
        fmas = "\n".join(f"            x = r{i}[k * sak]; xv = ({vec}){{{broadcast}}}; "
                         + " ".join(f"SDC_MM_FMA_{dtype}(c{i}{v}, xv, b{v});" for v in range(VECTORS))
                         for i in range(rows))
        adds = "\n".join(f"        memcpy(&s, c + {i * nc + v * lanes}, sizeof s); s += c{i}{v}; "
                         f"memcpy(c + {i * nc + v * lanes}, &s, sizeof s);"
                         for i in range(rows) for v in range(VECTORS))
        return f"""static void sdc_mm_tile_{dtype}_{rows}(const {t} *a, int64_t sam, int64_t sak, const {t} *b, int64_t ldb,
                                int64_t K, {t} *c)
{{
{pointers}
    for (int64_t i = 0; i < {rows * nc}; ++i) c[i] = 0;
    for (int64_t k0 = 0; k0 < K; k0 += {K_BLOCK}) {{
        const int64_t k1 = K - k0 < {K_BLOCK} ? K : k0 + {K_BLOCK};
        {vec} {zero};
        for (int64_t k = k0; k < k1; ++k) {{
            const {t} *bk = b + k * ldb;
{loads}
            {t} x;
            {vec} xv;
{fmas}
        }}
        {vec} s;  /* the block's sums into the tile's */
{adds}
    }}
}}"""

    cases = "\n".join(f"    case {rows}: sdc_mm_tile_{dtype}_{rows}(a, sam, sak, b, ldb, K, c); return;"
                       for rows in range(1, ROWS))
    tile_fn = "\n".join(tile_rows(rows) for rows in range(1, ROWS + 1)) + f"""
/* c[rows][{nc}] (of c[{ROWS}][{nc}]) = `rows` rows of A (r0.. at stride sam, k at stride sak) times a
   [K][ldb] block of B, 1 <= rows <= {ROWS} */
static void sdc_mm_tile_{dtype}(const {t} *a, int64_t sam, int64_t sak, int64_t rows,
                                const {t} *b, int64_t ldb, int64_t K, {t} *c)
{{
    switch (rows) {{
{cases}
    default: sdc_mm_tile_{dtype}_{ROWS}(a, sam, sak, b, ldb, K, c);
    }}
}}"""
    pack_fn = f"""/* B (k at stride sbk, n at stride sbn) as a dense [K][ldb] block, zero past column N (columns computed and
   never stored: zeros, not whatever malloc left, which may be denormals that slow the multiply-adds) */
static void sdc_mm_pack_{dtype}(const {t} *b, int64_t sbk, int64_t sbn, int64_t K, int64_t N, int64_t ldb, {t} *out)
{{
    if (sbk == 1) {{  /* transposed: read along k */
        for (int64_t n = 0; n < N; ++n)
            for (int64_t k = 0; k < K; ++k) out[k * ldb + n] = b[k + n * sbn];
    }} else {{
        for (int64_t k = 0; k < K; ++k)
            for (int64_t n = 0; n < N; ++n) out[k * ldb + n] = b[k * sbk + n * sbn];
    }}
    for (int64_t k = 0; k < K; ++k)
        for (int64_t n = N; n < ldb; ++n) out[k * ldb + n] = 0;
}}"""
    typedef = f"typedef {t} {vec} __attribute__((vector_size({VECTOR_BYTES})));"
    return "\n".join([_FMA, typedef, tile_fn, pack_fn])
