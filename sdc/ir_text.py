"""Reading IR text the way mlir-opt does (one helper for sdc-opt, the interpreter and the compiler).

`parse_module` is what everything but sdc-opt calls: text in, a verified `builtin.module` out, or
one SdcError carrying MLIR's located diagnostics.
"""

from __future__ import annotations

import re

from sdc.diagnostics import SdcError, from_mlir_error
from sdc.dialect.op_classes import new_context
from sdc.mlir import MLIRError, ir

_NOT_ONE_TOP_LEVEL_OP = "source must contain a single top-level operation"

# MLIR's parser sizes its tables by the numbers in `%0#N` (a result of a group) and `%0:N = ...` (a
# group of N results) before it checks them: a mutated number such as #2147483648 makes it allocate
# gigabytes and abort the process ("LLVM ERROR: out of memory"). Read the numbers first.
MAX_RESULTS = 1 << 16
_RESULT_NUMBER = re.compile(r"%[A-Za-z0-9_$.\-]+(?:#|:\s*)(\d+)")
# A dense array attribute's element type. The MLIR Python bindings give a dense array of any other
# element type no Python class, and reading one (the verifier reads every attribute) throws inside
# MLIR's C++, which aborts the process: `array<i640: 0>` must be refused before it is parsed.
_DENSE_ARRAY = re.compile(r"\barray<\s*([A-Za-z_][A-Za-z0-9_]*)")
READABLE_ARRAY_TYPES = ("i1", "i8", "i16", "i32", "i64", "f32", "f64")


def parse_top_level(text: str, source_name: str) -> ir.Operation:
    """Parse IR text; several top-level ops (or none) get an implicit module, as in mlir-opt.

    The implicit `module {` takes the place of the first line when that line holds no IR (blank,
    split-input padding or a comment), so diagnostics keep the text's lines and columns; with IR
    on the first line, MLIR's own error stands.
    """
    if "\x00" in text:  # MLIR's parser stops at a NUL and would read a prefix of the text as all of it
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise SdcError(f"{source_name}:{line}: the text holds a NUL byte (binary input, not IR text)")
    for line, code in enumerate(text.splitlines(), 1):
        code = code.split("//", 1)[0]  # comments are not IR
        for m in _RESULT_NUMBER.finditer(code):
            if int(m.group(1)) >= MAX_RESULTS:
                raise SdcError(f"{source_name}:{line}: '{m.group(0)}' names result {m.group(1)}; an op has at "
                               f"most {MAX_RESULTS} results")
        for m in _DENSE_ARRAY.finditer(code):
            if m.group(1) not in READABLE_ARRAY_TYPES:
                raise SdcError(f"{source_name}:{line}: a dense array of element type {m.group(1)} "
                               f"('{m.group(0)}'); sdc reads dense arrays of {', '.join(READABLE_ARRAY_TYPES)}")
    try:
        return ir.Operation.parse(text, source_name=source_name)
    except MLIRError as e:
        first, newline, rest = text.partition("\n")
        first_is_free = not first.strip() or first.lstrip().startswith("//")
        if not first_is_free or not any(_NOT_ONE_TOP_LEVEL_OP in d.message for d in e.error_diagnostics):
            raise
    return ir.Operation.parse(f"module {{{newline}{rest}\n}}", source_name=source_name)


def as_module(op: ir.Operation) -> ir.Operation:
    """A single top-level op other than a module gets an implicit module around it."""
    op = op.operation
    if op.name == "builtin.module":
        return op
    module = ir.Module.create(op.location)
    module.body.append(op)
    return module.operation


def parse_module(text: str, source_name: str = "<string>", ctx: ir.Context | None = None) -> ir.Operation:
    """Parse textual IR into a verified module (in `ctx`, else a fresh context with the sdc dialect),
    or raise SdcError with located diagnostics."""
    ctx = ctx or new_context()
    with ctx, ir.Location.unknown():
        try:
            op = parse_top_level(text, source_name)
        except MLIRError as e:
            diags = from_mlir_error(e)
            raise SdcError(diags[0].message, diags) from None
        # The builtin.module operation serves as "the module" everywhere in sdc.
        return as_module(op)
