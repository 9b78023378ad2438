"""A `KernelProgram` (sdc/codegen/kernel/) of the elementwise template rendered as CUDA C++.

The kernel IR (sdc/codegen/kernel/) is shared: the planner lowers a group once, and where `CudaRenderer.fits`
accepts the program, `render` writes it as one `extern "C" __global__` function instead of a
`@triton.jit` one. What it takes: the elementwise template over a domain whose every tensor is
either the domain's own shape (indexed by the flat element index) or one element (read once per
thread), in f32, f16 or bf16; values computed in f32 (bool for comparisons), 16-bit floats rounded
where the program casts to them and when stored.

The kernel is a grid-stride loop: each step of a thread reads `vector` elements of every tensor with
one 16-byte access of the widest element type (`alignas` structs of `vector` elements: ld/st.global.v4),
computes them, and writes them the same way; the elements after the last whole vector, and every
element when some pointer is not 16-byte aligned (a view into another tensor), go one at a time.
Sizes arrive as 32-bit `int`s (what torch's NVRTC launcher passes for a Python int); the launcher
refuses a larger domain.

The source includes no header: 16-bit floats are `unsigned short` bits, converted with PTX `cvt`
instructions (f16 both ways and f32 -> bf16 round to nearest even, sm_80+) and a shift (bf16 -> f32).
So it compiles with NVRTC wherever torch finds it, with no CUDA toolkit headers on the host, and
is untouched by the `__CUDA_NO_HALF_CONVERSIONS__`-style flags torch adds to NVRTC's options.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from sdc.codegen.kernel.decompose import inline, is_composite, missing_primitive, supported_ops
from sdc.codegen.kernel.program import ELEMENTWISE, KernelProgram, Node, TensorArg
from sdc.dialect.opdef import all_ops

FLOAT_TYPES = ("f32", "f16", "bf16")
_STORAGE = {"f32": "float", "f16": "unsigned short", "bf16": "unsigned short"}
_ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2}

_PRELUDE = "template <typename T, int N> struct alignas(sizeof(T) * N) sdc_vec { T v[N]; };\n"

# device functions a kernel includes when it uses them (sdc_max/min: x + y is NaN when either is, as in
# torch's maximum/minimum)
_HELPERS = {
    "sdc_bf16_to_f32": "static __device__ __forceinline__ float sdc_bf16_to_f32(unsigned short b) { "
                       "return __uint_as_float(((unsigned int)b) << 16); }",
    "sdc_f32_to_bf16": "static __device__ __forceinline__ unsigned short sdc_f32_to_bf16(float x) { "
                       'unsigned short r; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x)); return r; }',
    "sdc_f16_to_f32": "static __device__ __forceinline__ float sdc_f16_to_f32(unsigned short h) { "
                      'float r; asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h)); return r; }',
    "sdc_f32_to_f16": "static __device__ __forceinline__ unsigned short sdc_f32_to_f16(float x) { "
                      'unsigned short r; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x)); return r; }',
    "sdc_max": "static __device__ __forceinline__ float sdc_max(float x, float y) { "
               "return (x != x || y != y) ? x + y : fmaxf(x, y); }",
    "sdc_min": "static __device__ __forceinline__ float sdc_min(float x, float y) { "
               "return (x != x || y != y) ? x + y : fminf(x, y); }",
}

# the device function that makes a stored 16-bit element the f32 register value, and back
_WIDEN = {"f16": "sdc_f16_to_f32", "bf16": "sdc_bf16_to_f32"}
_NARROW = {"f16": "sdc_f32_to_f16", "bf16": "sdc_f32_to_bf16"}


def literal(value: Any, dtype: str) -> str:
    """A Python number as a C expression of the register type (float, or bool for i1)."""
    if dtype == "i1":
        return "true" if value else "false"
    value = float(value)
    if math.isnan(value):
        return "__int_as_float(0x7fc00000)"
    if math.isinf(value):
        return "__int_as_float(0x7f800000)" if value > 0 else "__int_as_float(0xff800000)"
    return f"{value!r}f"


class CudaRenderer:
    """CUDA C++ source for elementwise kernel programs. Capabilities are class attributes."""

    name = "cuda"
    threads = 256  # threads per block
    vector_bytes = 16  # one access per tensor and step: ld.global.v4.b32 / st.global.v4.b32
    steps_per_thread = 4  # the grid covers the domain with this many vector steps per thread
    # the primitives of scalar formulas (sdc/dialect/scalar.py) it renders: a _FORMS entry, an _INFIX operator
    # or an op_* method (those of the Triton renderer's set that have a float meaning)
    primitives = frozenset({
        "neg", "abs", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "tanh", "erf", "sin", "cos", "floor", "ceil",
        "not", "isnan", "isinf", "add", "sub", "mul", "div", "max", "min", "eq", "ne", "lt", "le", "gt", "ge",
        "and", "or", "xor", "where"})
    # composite ops of one operand and no attributes become a device function `sdc_<op>` each (the
    # formula written once in the file, its operand evaluated once); the others are inlined
    composite_functions = True

    @classmethod
    def elementwise_ops(cls) -> frozenset[str]:
        """The elementwise ops whose formulas its primitives render."""
        return supported_ops(cls.primitives)

    def __init__(self) -> None:
        self.helpers: set[str] = set()
        self.functions: dict[str, str] = {}  # the composite ops' device functions, by name, in order of use

    # ------------------------------------------------------------ what it takes

    def why_not(self, program: KernelProgram) -> str | None:
        """Why this program is not one the renderer takes (the group then stays Triton), or None."""
        if program.template != ELEMENTWISE or program.iterated is not None:
            return f"the {program.template} template (CUDA C++ renders elementwise groups only)"
        for t in [*program.args, *(r for r, _ in program.results)]:
            if t.dtype not in FLOAT_TYPES:
                return f"tensor '{t.value}' is {t.dtype} (CUDA C++ kernels read and write f32, f16 and bf16)"
            if t.layout is not None:
                return f"result '{t.value}' has a layout"
            if not (_flat(t, program.domain) or _single(t)):
                return f"tensor '{t.value}' broadcasts along part of the domain (map {list(t.map)})"
        if any(_single(r) and any(d != 1 for d in program.domain) for r, _ in program.results):
            return "a result of one element over a larger domain"
        ops = self.elementwise_ops()
        for n in program.nodes:
            if n.op not in ("load", "const", "cast") and n.op not in ops:
                return f"no CUDA C++ method for '{n.op}'"
            missing = missing_primitive(n, self.primitives) if is_composite(n.op) else None
            if missing is not None:
                return f"no CUDA C++ method for '{missing}' (in '{n.op}')"
            if n.dtype not in (*FLOAT_TYPES, "i1"):
                return f"a {n.dtype} value ('{n.op}'): CUDA C++ kernels compute in f32 and bool"
        return None

    def vector(self, program: KernelProgram) -> int:
        """Elements per vector step: 16 bytes of the widest element type among the domain-sized tensors."""
        widest = max((_ITEMSIZE[t.dtype] for t in self._flat_tensors(program)), default=4)
        return self.vector_bytes // widest

    def _flat_tensors(self, program: KernelProgram) -> list[TensorArg]:
        return [t for t in [*program.args, *(r for r, _ in program.results)]
                if _flat(t, program.domain) and not _single(t)]

    def numel(self, program: KernelProgram) -> str:
        """The domain's element count as a dim expression over d0, d1, ..."""
        return " * ".join(f"d{d}" for d in range(len(program.domain))) or "1"

    def grid(self, program: KernelProgram) -> list[str]:
        per_block = self.vector(program) * self.threads * self.steps_per_thread
        return [f"({self.numel(program)} + {per_block - 1}) // {per_block}"]

    # ------------------------------------------------------------ the whole file

    def render(self, program: KernelProgram, entry: str) -> str:
        self.helpers = set()
        self.functions = {}
        vec = self.vector(program)
        flat = {id(t) for t in self._flat_tensors(program)}
        params, pointers = [], []
        for i, a in enumerate(program.args):
            params.append(f"const {_STORAGE[a.dtype]}* __restrict__ a{i}")
            pointers.append(f"a{i}")
        for i, (r, _) in enumerate(program.results):
            params.append(f"{_STORAGE[r.dtype]}* __restrict__ o{i}")
            pointers.append(f"o{i}")
        params.append("int n")

        # per thread, before the loop: the one-element operands
        body = ["const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
                "const long long stride = (long long)gridDim.x * blockDim.x;"]
        for i, a in enumerate(program.args):
            if id(a) not in flat:
                body.append(f"const float s{i} = {self._widen(a.dtype, f'a{i}[0]')};")
        aligned = " | ".join(f"(unsigned long long)({p})" for p in pointers)
        body.append(f"const long long vectors = (({aligned}) % {self.vector_bytes} == 0) ? n / {vec} : 0;")

        def element(index: str, read: Callable[[int], str]) -> list[str]:
            """The group at one element: `read(i)` is arg i's stored element; returns the lines."""
            lines, names = [], {}
            for n in program.nodes:
                if n.op == "load":
                    a = program.args[n.arg]
                    expr = self._widen(a.dtype, read(n.arg)) if id(a) in flat else f"s{n.arg}"
                else:
                    expr = self.node(n, [names[x] for x in n.args])
                names[n.id] = f"x{n.id}"
                lines.append(f"const {'bool' if n.dtype == 'i1' else 'float'} x{n.id} = {expr};")
            for i, (r, node) in enumerate(program.results):
                lines.append(index.format(i=i, value=self._narrow(r.dtype, names[node])))
            return lines

        body.append("for (long long v = first; v < vectors; v += stride) {")
        for i, a in enumerate(program.args):
            if id(a) in flat:
                t = f"sdc_vec<{_STORAGE[a.dtype]}, {vec}>"
                body.append(f"  const {t} in{i} = reinterpret_cast<const {t}*>(a{i})[v];")
        for i, (r, _) in enumerate(program.results):
            body.append(f"  sdc_vec<{_STORAGE[r.dtype]}, {vec}> out{i};")
        body.append("  #pragma unroll")
        body.append(f"  for (int j = 0; j < {vec}; ++j) {{")
        body += ["    " + line for line in element("out{i}.v[j] = {value};", lambda i: f"in{i}.v[j]")]
        body.append("  }")
        for i, (r, _) in enumerate(program.results):
            body.append(f"  reinterpret_cast<sdc_vec<{_STORAGE[r.dtype]}, {vec}>*>(o{i})[v] = out{i};")
        body.append("}")
        body.append(f"for (long long e = vectors * {vec} + first; e < n; e += stride) {{")
        body += ["  " + line for line in element("o{i}[e] = {value};", lambda i: f"a{i}[e]")]
        body.append("}")

        header = [f"// sdc generated CUDA C++ kernel '{entry}' ({program.template}): " + ", ".join(program.ops),
                  f"// {vec} elements per 16-byte vector step of a grid-stride loop; math in f32", "//",
                  *("// " + line for line in program.dump().splitlines()), ""]
        signature = (f'extern "C" __global__ void __launch_bounds__({self.threads}) '
                     f"{entry}({', '.join(params)}) {{")
        helpers = [_HELPERS[h] for h in sorted(self.helpers) if h in _HELPERS] + list(self.functions.values())
        return "\n".join([*header, _PRELUDE, *helpers, *([""] if helpers else []), signature,
                          *("  " + line for line in body), "}", ""])

    def _widen(self, dtype: str, stored: str) -> str:
        if dtype not in _WIDEN:
            return stored
        self.helpers.add(_WIDEN[dtype])
        return f"{_WIDEN[dtype]}({stored})"

    def _narrow(self, dtype: str, value: str) -> str:
        if dtype not in _NARROW:
            return value
        self.helpers.add(_NARROW[dtype])
        return f"{_NARROW[dtype]}({value})"

    # ------------------------------------------------------------ one method per primitive op

    def node(self, n: Node, args: list[str]) -> str:
        if is_composite(n.op):
            return self._composite(n, args)
        if n.op in _INFIX:
            x, y = args
            return f"({x} {_INFIX[n.op]} {y})"
        if n.op in _FORMS:
            return _FORMS[n.op].format(**dict(zip("xy", args)))
        method = getattr(self, f"op_{n.op}", None)
        if method is None:
            raise ValueError(f"the CUDA C++ renderer has no method for '{n.op}'")
        return method(n, *args)

    def _composite(self, n: Node, args: list[str]) -> str:
        """A composite op from its scalar formula: a call of its device function, or inlined."""
        if not (self.composite_functions and len(args) == 1 and not all_ops()[n.op].attrs):
            return inline(n, args, self.node)
        name = f"sdc_{n.op}"
        if name not in self.helpers:
            self.helpers.add(name)
            body = inline(Node(-1, n.op, (0,), "f32", n.row), ["x"], self.node)
            self.functions[name] = (f"static __device__ __forceinline__ float {name}(float x) {{ "
                                    f"return {body}; }}")
        return f"{name}({args[0]})"

    def op_const(self, n: Node) -> str:
        return literal(n.value, n.dtype)

    def op_cast(self, n: Node, x: str) -> str:
        to, src = n.dtype, n.attrs["from"]
        if to == "i1":
            return x if src == "i1" else f"({x} != 0.0f)"
        if src == "i1":
            return f"({x} ? 1.0f : 0.0f)"
        if to in ("f16", "bf16"):  # rounded where the program says, kept in f32
            return self._widen(to, self._narrow(to, x))
        return x

    def op_max(self, n, x, y):
        self.helpers.add("sdc_max")
        return f"sdc_max({x}, {y})"

    def op_min(self, n, x, y):
        self.helpers.add("sdc_min")
        return f"sdc_min({x}, {y})"

    def op_where(self, n, c, x, y):
        return f"({c} ? {x} : {y})"


# The primitives that are one C expression of their operands (`{x}`, `{y}`), f32 math; the others are
# `op_*` methods of `CudaRenderer`.
_FORMS = {
    "neg": "(-{x})",
    "abs": "fabsf({x})",
    "exp": "expf({x})",
    "expm1": "expm1f({x})",
    "log": "logf({x})",
    "log1p": "log1pf({x})",
    "sqrt": "sqrtf({x})",
    "rsqrt": "rsqrtf({x})",
    "tanh": "tanhf({x})",
    "erf": "erff({x})",
    "sin": "sinf({x})",
    "cos": "cosf({x})",
    "floor": "floorf({x})",
    "ceil": "ceilf({x})",
    "not": "(!{x})",
    "isnan": "({x} != {x})",
    "isinf": "(fabsf({x}) == __int_as_float(0x7f800000))",
    "add": "({x} + {y})",
    "sub": "({x} - {y})",
    "mul": "({x} * {y})",
    "div": "({x} / {y})",
}

_INFIX = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "and": "&&", "or": "||",
          "xor": "!="}


def _flat(t: TensorArg, domain: tuple[int | None, ...]) -> bool:
    """Whether `t` maps, in order, exactly the domain dims that may be larger than 1, so that its
    element at the domain's flat index is its own flat element (the launcher checks the sizes)."""
    return [d for d in t.map if d is not None] == [j for j, size in enumerate(domain) if size != 1]


def _single(t: TensorArg) -> bool:
    """Whether `t` is one element (maps no domain dim): read once, by every element."""
    return all(d is None for d in t.map)
