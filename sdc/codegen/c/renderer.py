"""A `KernelProgram` (sdc/codegen/kernel/) rendered as one C function of the CPU kernel ABI.

The ABI (`int ENTRY(void **p, const int64_t *d)`, dense row-major tensors, storage types) is written
in sdc/runtime/launch/c.py. What the renderer takes: the `elementwise` template (gathers included)
and the `row` template, in f64, f32, the integers and bool; the `matmul` template is `matmul.py`'s.

- Each tensor's stride along a domain dim is derived from the sizes `d` at the top of the function
  (`a0_s1`, the literal 1 for the dim a tensor maps last), its offset is the sum over the dims it
  maps of index times stride.
- `elementwise`: nested loops over the iterated domain dims, the innermost dim innermost, so that
  gcc vectorizes the inner loop; every node is one `const` local of its compute type per element.
  A gathered table's own dim (after the iterated ones) is indexed by the loaded index value.
- `row`: a loop over the rows (the domain dims but the last), and per row one loop over the row for
  each run of row nodes between the reductions that they wait for. A reduction accumulates in a
  local inside the loop of its operand; a row value that a later loop reads is kept in a per-call
  scratch buffer (malloc'd once, freed at the end); a load a later loop reads is loaded again there.

Values compute in their own type: f32 in float (`expf`, `erff`, ...), f64 in double, each integer type
in its own C type, i1 as uint8_t 0/1. Integer add/sub/mul/neg wrap as torch's do (computed on unsigned
types: signed overflow is undefined in C); max/min/relu/clip/reductions treat NaN as torch does.
"""

from __future__ import annotations

import math
import re
from typing import Any

from sdc.codegen.c.matmul import matmul_helpers, render_matmul, why_not_matmul
from sdc.codegen.kernel.decompose import inline, is_composite, primitive_uses, supported_ops
from sdc.codegen.kernel.program import ELEMENTWISE, MATMUL, ROW, KernelProgram, Node, TensorArg
from sdc.runtime.launch.c import LARGE_ELEMENTS

FLOAT_TYPES = frozenset({"f32", "f64"})
INT_TYPES = frozenset({"i8", "i16", "i32", "i64", "ui8"})
_CTYPE = {"f64": "double", "f32": "float", "i64": "int64_t", "i32": "int32_t", "i16": "int16_t", "i8": "int8_t",
          "ui8": "uint8_t", "i1": "uint8_t"}
# the unsigned type integer arithmetic wraps in (wide enough that the operands' promotion stays unsigned)
_WRAP = {"i8": "uint32_t", "i16": "uint32_t", "i32": "uint32_t", "ui8": "uint32_t", "i64": "uint64_t"}
_INT_LIMITS = {"i8": (-2**7, 2**7 - 1), "i16": (-2**15, 2**15 - 1), "i32": (-2**31, 2**31 - 1),
               "i64": (-2**63, 2**63 - 1), "ui8": (0, 255)}

# static helpers a kernel uses, by name; `{T}` the float type, `{F}` the math-function suffix
_HELPER_TEMPLATES = {
    # NaN when either operand is (torch.maximum/minimum, amax/amin): x + y is NaN then
    "max": "static inline {T} sdc_max_{D}({T} x, {T} y) {{ return (x != x || y != y) ? x + y : (x > y ? x : y); }}",
    "min": "static inline {T} sdc_min_{D}({T} x, {T} y) {{ return (x != x || y != y) ? x + y : (x < y ? x : y); }}",
    # erf of a float: x P(x^2) / Q(x^2) on x clamped to [-4, 4] (past 4, erf is 1 in float), a rational
    # approximation whose polynomials vectorize where libm's erff is a call per element (in a GELU it was
    # a tenth of a small transformer's kernel time); at most 7.5 ulp and 4.5e-7 from erf over [-6, 6]
    # against float64 (test_cpu_c_renderer.py), clamped to [-1, 1]; NaN stays NaN. The constants are
    # the rational approximation of Eigen's and XLA's float erf.
    "erf": "static inline float sdc_erf_{D}(float x) {{ "
           "const float c = x < -4.0f ? -4.0f : (x > 4.0f ? 4.0f : x), s = c * c; "
           "float p = -2.72614225801306e-10f; p = p * s + 2.77068142495902e-08f; "
           "p = p * s - 2.10102402082508e-06f; p = p * s - 5.69250639462346e-05f; "
           "p = p * s - 7.34990630326855e-04f; p = p * s - 2.95459980854025e-03f; "
           "p = p * s - 1.60960333262415e-02f; "
           "float q = -1.45660718464996e-05f; q = q * s - 2.13374055278905e-04f; "
           "q = q * s - 1.68282697438203e-03f; q = q * s - 7.37332916720468e-03f; "
           "q = q * s - 1.42647390514189e-02f; "
           "const float r = c * p / q; return r > 1.0f ? 1.0f : (r < -1.0f ? -1.0f : r); }}",
    # torch.remainder: the sign of the divisor
    "remainder": "static inline {T} sdc_remainder_{D}({T} x, {T} y) {{ {T} r = fmod{F}(x, y); "
                 "return (r != 0 && ((y < 0) != (r < 0))) ? r + y : r; }}",
}

# Float primitives (sdc/dialect/scalar.py) that are one C expression of their operands `{x}`, `{y}`;
# `{F}` is the math-function suffix ("f" for float), `{one}`/`{zero}` the literals of the type.
_FLOAT_FORMS = {
    "neg": "(-{x})",
    "abs": "fabs{F}({x})",
    "exp": "exp{F}({x})",
    "expm1": "expm1{F}({x})",
    "log": "log{F}({x})",
    "log1p": "log1p{F}({x})",
    "sqrt": "sqrt{F}({x})",
    "rsqrt": "({one} / sqrt{F}({x}))",
    "tanh": "tanh{F}({x})",
    "erf": "erf{F}({x})",
    "sin": "sin{F}({x})",
    "cos": "cos{F}({x})",
    "tan": "tan{F}({x})",
    "asin": "asin{F}({x})",
    "acos": "acos{F}({x})",
    "atan": "atan{F}({x})",
    "sinh": "sinh{F}({x})",
    "cosh": "cosh{F}({x})",
    "asinh": "asinh{F}({x})",
    "acosh": "acosh{F}({x})",
    "atanh": "atanh{F}({x})",
    "floor": "floor{F}({x})",
    "ceil": "ceil{F}({x})",
    "round": "nearbyint{F}({x})",  # the default rounding mode: half to even, as torch.round
    "isnan": "({x} != {x})",
    "isinf": "(isinf({x}) != 0)",
    "add": "({x} + {y})",
    "sub": "({x} - {y})",
    "mul": "({x} * {y})",
    "div": "({x} / {y})",
    "fmod": "fmod{F}({x}, {y})",
}

# At -O2 GCC 12+ vectorizes only loops whose trip count is a known multiple of the vector width (its
# "very cheap" cost model): none of these, whose sizes arrive in `d`. The cheap model vectorizes them
# with a scalar epilogue (Clang vectorizes at -O2 already).
_VECTORIZE = ("#if defined(__GNUC__) && !defined(__clang__)",
              '#pragma GCC optimize ("tree-vectorize", "vect-cost-model=cheap")',
              "#endif")

_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_BITWISE = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}
_LOGICAL = {"and": "({x} && {y})", "or": "({x} || {y})", "xor": "(({x} != 0) != ({y} != 0))", "not": "(!{x})"}
_WRAPPING = {"add": "+", "sub": "-", "mul": "*"}

_ATOM = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\[\]]*\])?$|^[0-9.]+[fF]?$|^\(.*\)$")


def _atom(expr: str) -> str:
    """`expr` as an operand that binds tighter than any operator around it."""
    if _ATOM.match(expr) and (not expr.startswith("(") or _balanced_outer(expr)):
        return expr
    return f"({expr})"


def _balanced_outer(expr: str) -> bool:
    """Whether the parenthesis opening `expr` is the one closing it."""
    depth = 0
    for i, ch in enumerate(expr):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return i == len(expr) - 1
    return False


def is_reduction(n: Node) -> bool:
    """A row reduction `sum`/`max`/`min` of one operand (not the elementwise `max`/`min` of two)."""
    return n.op in ("sum", "max", "min") and len(n.args) == 1 and not n.row


def literal(value: Any, dtype: str) -> str:
    """A Python number as a C expression of `dtype`'s compute type."""
    if dtype == "i1":
        return "1" if value else "0"
    if dtype in INT_TYPES:
        v = int(value)
        if dtype == "i64":
            return "INT64_MIN" if v == -2**63 else f"INT64_C({v})"
        return f"(({_CTYPE[dtype]}){v})" if v < 0 else str(v)
    v = float(value)
    suffix = "f" if dtype == "f32" else ""
    if math.isnan(v):
        return "NAN" if dtype == "f32" else "((double)NAN)"
    if math.isinf(v):
        inf = "INFINITY" if dtype == "f32" else "((double)INFINITY)"
        return inf if v > 0 else f"(-{inf})"
    text = repr(v)
    return f"{text}{suffix}" if v >= 0 else f"({text}{suffix})"


class CRenderer:
    """C source of kernel programs for the CPU kernel ABI. Capabilities are class attributes."""

    name = "c"
    dtypes = frozenset(_CTYPE)
    templates = frozenset({ELEMENTWISE, ROW, MATMUL})
    # the primitives of scalar formulas (sdc/dialect/scalar.py) it renders, by the type of their operands
    # (float-only and integer-only ones refuse other types in `why_not`)
    float_primitives = frozenset(_FLOAT_FORMS) | {"max", "min", "remainder"}
    integer_primitives = frozenset({"neg", "abs", "add", "sub", "mul", "max", "min"})
    bitwise_primitives = frozenset({*_BITWISE, "bitwise_not"})
    compare_primitives = frozenset(_COMPARE)
    logical_primitives = frozenset(_LOGICAL)
    ternary_primitives = frozenset({"where"})

    primitives = (float_primitives | integer_primitives | bitwise_primitives | compare_primitives
                  | logical_primitives | ternary_primitives)

    @classmethod
    def elementwise_ops(cls) -> frozenset[str]:
        """The elementwise ops whose formulas its primitives render (on some type)."""
        return supported_ops(cls.primitives)

    def __init__(self) -> None:
        self.helpers: set[str] = set()  # names of _HELPER_TEMPLATES entries, as "max_f32"

    # ------------------------------------------------------------ types

    @staticmethod
    def ctype(dtype: str) -> str:
        """The C storage type of an element of `dtype`."""
        try:
            return _CTYPE[dtype]
        except KeyError:
            raise ValueError(f"the C renderer has no storage type for {dtype}") from None

    @staticmethod
    def compute_type(dtype: str) -> str:
        """The C type values of `dtype` compute in (each type its own: f32 in float, i1 as uint8_t 0/1)."""
        return CRenderer.ctype(dtype)

    # ------------------------------------------------------------ what it takes

    def why_not(self, program: KernelProgram) -> str | None:
        """Why the renderer cannot take this program (the group then stays torch), or None."""
        if program.template == MATMUL:
            return why_not_matmul(self, program)
        if program.template not in (ELEMENTWISE, ROW):
            return f"the {program.template} template (C kernels render elementwise, row and matmul)"
        for t in [*program.args, *(r for r, _ in program.results)]:
            if t.dtype not in _CTYPE:
                return f"tensor '{t.value}' is {t.dtype} (C kernels read and write {', '.join(sorted(_CTYPE))})"
            if t.layout is not None:
                return f"result '{t.value}' has a layout {list(t.layout)}"
            mapped = [m for m in t.map if m is not None]
            if len(set(mapped)) != len(mapped):
                return f"tensor '{t.value}' maps one domain dim twice (map {list(t.map)})"
        last = len(program.domain) - 1
        nodes = {n.id: n for n in program.nodes}
        for r, node in program.results:
            if program.template == ROW and nodes[node].row and last not in r.map:
                return f"result '{r.value}' varies along the row but does not map the row dim"
        for n in program.nodes:
            reason = self._why_not_node(n, nodes)
            if reason is not None:
                return reason
        return None

    def _why_not_node(self, n: Node, nodes: dict[int, Node]) -> str | None:
        if n.dtype not in _CTYPE:
            return f"a {n.dtype} value ('{n.op}'): C kernels compute f64, f32, integers and bool"
        if n.op in ("load", "const", "gather", "rowlen"):
            return None
        if is_reduction(n):
            return None if n.dtype in FLOAT_TYPES else f"a {n.dtype} row reduction '{n.op}'"
        if n.op == "cast":
            return None if n.attrs.get("from") in _CTYPE else f"a cast from {n.attrs.get('from')}"
        if n.op not in self.elementwise_ops():
            return f"no C form for '{n.op}'"
        if is_composite(n.op):  # each primitive of its formula, in the types the formula gives it
            for primitive, dtype, operand in primitive_uses(n):
                reason = self._why_not_primitive(primitive, dtype, operand)
                if reason is not None:
                    return f"{reason} (in '{n.op}')"
            return None
        return self._why_not_primitive(n.op, n.dtype, nodes[n.args[-1]].dtype if n.args else n.dtype)

    def _why_not_primitive(self, op: str, dtype: str, operand: str) -> str | None:
        """Why a primitive of result type `dtype` on a (last) operand of type `operand` has no C form."""
        if dtype not in _CTYPE:
            return f"a {dtype} value ('{op}'): C kernels compute f64, f32, integers and bool"
        if op in self.compare_primitives or op in self.ternary_primitives:
            return None
        if op in self.logical_primitives:
            return None if operand == "i1" else f"logical '{op}' of {operand}"
        if op in self.bitwise_primitives:
            return None if operand in INT_TYPES or operand == "i1" else f"'{op}' of {operand}"
        if operand in FLOAT_TYPES:
            return None if op in self.float_primitives else f"'{op}' of {operand}"
        if operand in INT_TYPES and op in self.integer_primitives:
            return None
        return f"'{op}' of {operand} (no exact C form)"

    # ------------------------------------------------------------ the whole file

    def file(self, functions: list[str]) -> str:
        """The whole C source: the headers, the helpers the functions use (once each), the functions."""
        head = ["// sdc generated C kernels (the ABI: sdc/runtime/launch/c.py)",
                "#include <stdint.h>", "#include <math.h>", "#include <stdlib.h>", "#include <string.h>", "",
                *_VECTORIZE, ""]
        helpers = [self._helper(h) for h in sorted(self.helpers)]
        return "\n".join([*head, *helpers, *([""] if helpers else []), *functions])

    def _helper(self, key: str) -> str:
        kind, dtype = key.rsplit("_", 1)
        if kind == "mm":  # the matmul template's tile and packing functions (matmul.py)
            return matmul_helpers(dtype)
        return _HELPER_TEMPLATES[kind].format(T=_CTYPE[dtype], F="f" if dtype == "f32" else "", D=dtype)

    def _use(self, kind: str, dtype: str) -> str:
        """The name of helper `kind` for a float dtype, recording that the file needs it."""
        self.helpers.add(f"{kind}_{dtype}")
        return f"sdc_{kind}_{dtype}"

    def function(self, program: KernelProgram, entry: str) -> str:
        """The C text of `int entry(void **p, const int64_t *d)` computing `program`, after a comment
        with its kernel IR."""
        if program.template == MATMUL:
            return render_matmul(self, program, entry)
        reason = self.why_not(program)
        if reason is not None:
            raise ValueError(f"the C renderer cannot render kernel '{entry}': {reason}")
        header = [f"// kernel '{entry}' ({program.template}): " + ", ".join(program.ops),
                  *("//   " + line for line in program.dump().splitlines())]
        body = self._pointers(program) + self._strides(program)
        if program.template == ELEMENTWISE:
            gathers = any(n.op == "gather" for n in program.nodes)
            body += ["int bad = 0;  /* a gather index out of range */"] if gathers else []
            body += self._elementwise(program) + ["return bad;" if gathers else "return 0;"]
        else:
            body += self._row(program) + ["return 0;"]
        return "\n".join([*header, f"int {entry}(void **p, const int64_t *d) {{",
                          *("  " + line for line in body), "}", ""])

    def _pointers(self, p: KernelProgram) -> list[str]:
        lines = [f"const {self.ctype(a.dtype)} *restrict a{i} = (const {self.ctype(a.dtype)} *)p[{i}];"
                 for i, a in enumerate(p.args)]
        lines += [f"{self.ctype(r.dtype)} *restrict o{i} = ({self.ctype(r.dtype)} *)p[{len(p.args) + i}];"
                  for i, (r, _) in enumerate(p.results)]
        return lines

    def _tensors(self, p: KernelProgram) -> list[tuple[str, TensorArg]]:
        return [(f"a{i}", a) for i, a in enumerate(p.args)] + [(f"o{i}", r) for i, (r, _) in enumerate(p.results)]

    def _strides(self, p: KernelProgram) -> list[str]:
        """`t_s{dim}`: tensor t's row-major stride along the domain dim it maps there (dense in its shape)."""
        lines = []
        for name, t in self._tensors(p):
            inner: list[str] = []
            for dim in reversed(t.map):
                if dim is None:
                    continue
                lines.append(f"const int64_t {name}_s{dim} = {' * '.join(inner) or '1'};")
                inner.insert(0, f"d[{dim}]")
        return lines

    @staticmethod
    def _stride(name: str, t: TensorArg, dim: int) -> str:
        """The stride expression: the literal 1 for the dim the tensor maps last (so loops see unit steps)."""
        mapped = [m for m in t.map if m is not None]
        return "1" if mapped and mapped[-1] == dim else f"{name}_s{dim}"

    def _offset(self, name: str, t: TensorArg, dims: range | list[int]) -> str:
        terms = [f"i{m} * {self._stride(name, t, m)}" if self._stride(name, t, m) != "1" else f"i{m}"
                 for m in t.map if m is not None and m in dims]
        return " + ".join(terms) or "0"

    # ------------------------------------------------------------ elementwise

    def _elementwise(self, p: KernelProgram) -> list[str]:
        rank = len(p.domain) if p.iterated is None else p.iterated
        dims = list(range(rank))
        inner: list[str] = []
        names: dict[int, str] = {}
        for n in p.nodes:
            if n.op == "load":
                a = p.args[n.arg]
                expr = f"a{n.arg}[{self._offset(f'a{n.arg}', a, dims)}]"
            elif n.op == "gather":
                expr = self._gather(p, n, names[n.args[0]], dims, inner)
            else:
                expr = self.expr(n, [names[x] for x in n.args])
            names[n.id] = f"x{n.id}"
            inner.append(f"const {self.compute_type(n.dtype)} x{n.id} = {expr};")
        for i, (r, node) in enumerate(p.results):
            inner.append(f"o{i}[{self._offset(f'o{i}', r, dims)}] = ({self.ctype(r.dtype)})x{node};")
        lines = inner
        for dim in reversed(dims):
            lines = [f"for (int64_t i{dim} = 0; i{dim} < d[{dim}]; ++i{dim}) {{", *("  " + ln for ln in lines), "}"]
        if rank >= 2:  # the loops but the innermost (which gcc vectorizes) over the caller's threads
            size = " * ".join(f"d[{dim}]" for dim in dims)
            reduce = " reduction(|: bad)" if any(n.op == "gather" for n in p.nodes) else ""
            # above the launcher's LARGE_ELEMENTS, where torch's own ops would take the threads instead
            lines = [f"#pragma omp parallel for collapse({rank - 1}) schedule(static) if ({size} > {LARGE_ELEMENTS}){reduce}",
                     *lines]
        return lines

    def _gather(self, p: KernelProgram, n: Node, index: str, dims: list[int], out: list[str]) -> str:
        """The table element at `index` along the table's own dim: from the end when negative, 0 outside."""
        a, dim = p.args[n.arg], n.attrs["dim"]
        g = f"g{n.id}"
        out.append(f"int64_t {g} = (int64_t){index};")
        out.append(f"{g} = {g} < 0 ? {g} + d[{dim}] : {g};")
        out.append(f"bad |= !({g} >= 0 && {g} < d[{dim}]);")
        where = f"{self._offset(f'a{n.arg}', a, dims)} + {g} * {self._stride(f'a{n.arg}', a, dim)}"
        zero = literal(0, n.dtype)
        return f"(({g} >= 0 && {g} < d[{dim}]) ? ({self.compute_type(n.dtype)})a{n.arg}[{where}] : {zero})"

    # ------------------------------------------------------------ row

    def _row(self, p: KernelProgram) -> list[str]:
        last = len(p.domain) - 1
        outer = list(range(last))
        nodes = {n.id: n for n in p.nodes}
        # per row: a sequence of blocks, each a list of scalar lines or a loop over the row
        blocks: list[Any] = []
        loop: _RowLoop | None = None
        home: dict[int, _RowLoop] = {}  # row node -> the loop that computes it
        pending: set[int] = set()  # reductions accumulating in the open loop
        scratch: list[int] = []  # row nodes a later loop reads, each one scratch row
        names: dict[int, str] = {}

        def close() -> None:
            nonlocal loop
            if loop is not None:
                blocks.append(loop)
                for r in loop.reductions:
                    loop.after.append(f"const {self.compute_type(r.dtype)} x{r.id} = acc{r.id};")
            loop = None
            pending.clear()

        def row_operand(x: int, current: _RowLoop) -> str:
            if home.get(x) is current:
                return f"x{x}"
            if nodes[x].op == "load":  # loaded again, not kept
                if x not in current.reloaded:
                    current.reloaded.add(x)
                    current.body.append(f"const {self.compute_type(nodes[x].dtype)} x{x} = "
                                        f"{self._row_load(p, nodes[x], outer, last)};")
                return f"x{x}"
            if x not in scratch:
                scratch.append(x)
                home[x].body_end.append(f"s{x}[j] = x{x};")
            return f"s{x}[j]"

        for n in p.nodes:
            if not n.row and not is_reduction(n):
                if any(a in pending for a in n.args):
                    close()
                expr = (f"a{n.arg}[{self._offset(f'a{n.arg}', p.args[n.arg], outer)}]" if n.op == "load"
                        else f"({self.compute_type(n.dtype)})N" if n.op == "rowlen"
                        else self.expr(n, [names[a] for a in n.args]))
                blocks.append([f"const {self.compute_type(n.dtype)} x{n.id} = {expr};"])
                names[n.id] = f"x{n.id}"
                continue
            if any(a in pending for a in n.args):
                close()
            if loop is None:
                loop = _RowLoop()
            if is_reduction(n):
                x = row_operand(n.args[0], loop)
                loop.reductions.append(n)
                loop.body.append(f"acc{n.id} = {self._combine(n, f'acc{n.id}', x)};")
                pending.add(n.id)
                names[n.id] = f"x{n.id}"
                continue
            home[n.id] = loop
            if n.op == "load":
                expr = self._row_load(p, n, outer, last)
            else:
                expr = self.expr(n, [row_operand(a, loop) if nodes[a].row else names[a] for a in n.args])
            loop.body.append(f"const {self.compute_type(n.dtype)} x{n.id} = {expr};")
            names[n.id] = f"x{n.id}"
        close()

        # the stores: row results in the loop of their node, per-row ones after the last block
        tail: list[str] = []
        for i, (r, node) in enumerate(p.results):
            base = self._offset(f"o{i}", r, outer)
            if last not in r.map:
                tail.append(f"o{i}[{base}] = ({self.ctype(r.dtype)})x{node};")
                continue
            at = f"{base} + j" if base != "0" else "j"
            store = f"o{i}[{at}] = ({self.ctype(r.dtype)})x{node};"
            if nodes[node].row:
                home[node].body_end.append(store)
            else:  # a per-row value stored along the row
                tail += ["for (int64_t j = 0; j < N; ++j) {", f"  {store}", "}"]

        row_lines: list[str] = []
        for b in blocks:
            row_lines += b.render(self) if isinstance(b, _RowLoop) else b
        row_lines += tail
        for dim in reversed(outer):
            row_lines = [f"for (int64_t i{dim} = 0; i{dim} < d[{dim}]; ++i{dim}) {{",
                         *("  " + ln for ln in row_lines), "}"]
        lines = [f"const int64_t N = d[{last}];"]
        if not scratch:
            return lines + row_lines
        # one allocation, 8 bytes an element for every scratch row (the widest compute type)
        lines += [f"char *scratch = (char *)malloc((size_t)(N > 0 ? N : 1) * 8 * {len(scratch)});",
                  "if (scratch == NULL) return 1;  /* the launcher runs the torch ops */"]
        for k, x in enumerate(scratch):
            t = self.compute_type(nodes[x].dtype)
            lines.append(f"{t} *restrict s{x} = ({t} *)(scratch + (size_t)N * 8 * {k});")
        return lines + row_lines + ["free(scratch);"]

    def _row_load(self, p: KernelProgram, n: Node, outer: list[int], last: int) -> str:
        a = p.args[n.arg]
        base = self._offset(f"a{n.arg}", a, outer)
        step = "j" if self._stride(f"a{n.arg}", a, last) == "1" else f"j * a{n.arg}_s{last}"
        return f"a{n.arg}[{step if base == '0' else f'{base} + {step}'}]"

    def _combine(self, n: Node, acc: str, x: str) -> str:
        if n.op == "sum":
            return f"{acc} + {x}"
        return f"{self._use(n.op, n.dtype)}({acc}, {x})"

    def identity(self, n: Node) -> str:
        """The start value of a reduction's accumulator."""
        return {"sum": literal(0.0, n.dtype), "max": literal(-math.inf, n.dtype),
                "min": literal(math.inf, n.dtype)}[n.op]

    # ------------------------------------------------------------ one expression per node

    def expr(self, n: Node, args: list[str]) -> str:
        """The C expression of elementwise node `n` from its operands' expressions (names or
        parenthesized expressions of their compute types); its type converts to n's compute type."""
        args = [_atom(a) for a in args]
        if is_composite(n.op):  # its op's scalar formula, each primitive by this method
            return inline(n, args, self.expr)
        if n.op == "const":
            return literal(n.value, n.dtype)
        if n.op == "cast":
            return self.op_cast(n, *args)
        if n.op in _COMPARE:
            x, y = args
            return f"({x} {_COMPARE[n.op]} {y})"
        if n.op in _LOGICAL:
            return _LOGICAL[n.op].format(**dict(zip("xy", args)))
        if n.op == "where":
            c, x, y = args
            return f"({c} ? {x} : {y})"
        if n.op in _BITWISE:
            x, y = args
            return f"(({self.compute_type(n.dtype)})({x} {_BITWISE[n.op]} {y}))"
        if n.op == "bitwise_not":
            return f"(!{args[0]})" if n.dtype == "i1" else f"(({self.compute_type(n.dtype)})~{args[0]})"
        if n.dtype in INT_TYPES:
            return self._integer(n, args)
        method = getattr(self, f"op_{n.op}", None)
        if method is not None:
            return method(n, *args)
        if n.op == "erf" and n.dtype == "f32":
            return f"{self._use('erf', 'f32')}({args[0]})"
        if n.op in _FLOAT_FORMS:
            return _FLOAT_FORMS[n.op].format(**dict(zip("xy", args)), **self._float_words(n.dtype))
        raise ValueError(f"the C renderer has no form for '{n.op}' on {n.dtype}")

    @staticmethod
    def _float_words(dtype: str) -> dict[str, str]:
        return {"F": "f" if dtype == "f32" else "", "one": literal(1.0, dtype), "zero": literal(0.0, dtype)}

    def _integer(self, n: Node, args: list[str]) -> str:
        t, u = self.compute_type(n.dtype), _WRAP[n.dtype]
        if n.op in _WRAPPING:
            x, y = args
            return f"(({t})(({u}){x} {_WRAPPING[n.op]} ({u}){y}))"
        x = args[0]
        if n.op == "neg":
            return f"(({t})(({u})0 - ({u}){x}))"
        if n.op == "abs":  # the most negative value stays itself, as in torch
            return f"(({x} < 0) ? (({t})(({u})0 - ({u}){x})) : {x})"
        if n.op in ("max", "min"):
            y = args[1]
            return f"(({x} {'>' if n.op == 'max' else '<'} {y}) ? {x} : {y})"
        raise ValueError(f"the C renderer has no integer form for '{n.op}'")

    def op_cast(self, n: Node, x: str) -> str:
        to, src = n.dtype, n.attrs["from"]
        if to == "i1":
            return x if src == "i1" else f"({x} != 0)"
        return f"(({self.compute_type(to)}){x})"  # float -> integer truncates toward zero, as torch

    def op_max(self, n: Node, x: str, y: str) -> str:
        return f"{self._use('max', n.dtype)}({x}, {y})"

    def op_min(self, n: Node, x: str, y: str) -> str:
        return f"{self._use('min', n.dtype)}({x}, {y})"

    def op_remainder(self, n: Node, x: str, y: str) -> str:
        return f"{self._use('remainder', n.dtype)}({x}, {y})"


class _RowLoop:
    """One loop over the row (`j`): its reductions' accumulators, the lines of its body."""

    def __init__(self) -> None:
        self.reductions: list[Node] = []
        self.body: list[str] = []
        self.body_end: list[str] = []  # scratch and result stores, after the body
        self.after: list[str] = []  # the reductions' values, after the loop
        self.reloaded: set[int] = set()

    def render(self, renderer: CRenderer) -> list[str]:
        init = [f"{renderer.compute_type(r.dtype)} acc{r.id} = {renderer.identity(r)};" for r in self.reductions]
        return [*init, "for (int64_t j = 0; j < N; ++j) {", *("  " + ln for ln in self.body + self.body_end), "}",
                *self.after]
