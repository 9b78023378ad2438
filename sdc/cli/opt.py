"""sdc-opt: IR in, passes, IR out — like mlir-opt, for the sdc dialect.

    sdc-opt FILE|- [-p PIPELINE] [-o OUT] [--split-input-file] [--verify-diagnostics]
                   [--print-ir-after-all] [--list-passes] [--debug]

With no FILE, IR is read from stdin when something is piped in. Several top-level ops get
an implicit `builtin.module`. The pipeline mixes sdc passes (`sdc-verify`,
`sdc-canonicalize{fold=false}`) and upstream ones (`canonicalize`, `cse`, `func.func(cse)`),
comma-separated.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

from sdc.cli.common import ArgumentParser, UsageError, add_version_flag, read_source, run_main, sdc_version_text
from sdc.diagnostics import Diagnostic, DiagnosticSink, SdcError, SourceLoc, from_mlir_error
from sdc.ir_text import as_module, parse_top_level
from sdc.mlir import MLIRError, PassManager, ir
from sdc.dialect.op_classes import new_context
from sdc.transforms import PASSES, get_pass
from sdc.transforms.pipeline import build_pipeline

SPLIT_MARKER = re.compile(r"^// -----\s*$", re.M)


# ---------------------------------------------------------------- expected diagnostics

_EXPECTED = re.compile(
    r"expected-(error|warning|note|remark)\s*(?:@(above|below|[+-]\d+))?\s*\{\{(.*?)\}\}")


@dataclass
class Expected:
    severity: str
    line: int
    text: str
    seen: bool = False


def parse_expected(text: str, first_line: int) -> list[Expected]:
    out = []
    for i, line in enumerate(text.splitlines()):
        lineno = first_line + i
        for m in _EXPECTED.finditer(line):
            where = m.group(2)
            target = lineno
            if where == "above":
                target = lineno - 1
            elif where == "below":
                target = lineno + 1
            elif where:
                target = lineno + int(where)
            out.append(Expected(m.group(1), target, m.group(3)))
    return out


def check_expected(produced: list[Diagnostic], expected: list[Expected], file: str) -> list[Diagnostic]:
    """Diagnostics about the mismatch between produced and expected ones (empty: all good)."""
    problems = []
    flat = []
    for d in produced:
        flat.append(d)
        flat.extend(d.notes)
    for d in flat:
        match = next((e for e in expected if not e.seen and e.severity == d.severity and d.loc is not None
                      and d.loc.line == e.line and e.text in d.message), None)
        if match:
            match.seen = True
        else:
            problems.append(Diagnostic("error", f"unexpected {d.severity}: {d.message}", d.loc, d.label))
    for e in expected:
        if not e.seen:
            problems.append(Diagnostic("error", f"expected {e.severity} \"{e.text}\" was not produced",
                                       SourceLoc(file, e.line, 1)))
    return problems


# ---------------------------------------------------------------- driver


@dataclass
class ChunkResult:
    output: str | None
    diagnostics: list[Diagnostic] = field(default_factory=list)


class Opt:
    """One sdc-opt invocation, callable from tests."""

    def __init__(self, pipeline: str = "", print_ir_after_all: bool = False, debug_info: bool = False):
        self.pipeline = pipeline
        self.print_ir_after_all = print_ir_after_all
        self.debug_info = debug_info
        with ir.Context():  # a bad pipeline is reported before any input is read (no dialect needed)
            build_pipeline(pipeline, DiagnosticSink())

    def run_chunk(self, text: str, source_name: str, first_line: int) -> ChunkResult:
        ctx = new_context()
        sink = DiagnosticSink()
        padded = "\n" * (first_line - 1) + text  # keeps line numbers those of the whole file
        with ctx, ir.Location.unknown():
            try:
                op = parse_top_level(padded, source_name)
            except MLIRError as e:
                return ChunkResult(None, from_mlir_error(e))
            module = as_module(op)
            pm = build_pipeline(self.pipeline, sink)
            if self.print_ir_after_all:
                pm.enable_ir_printing(print_after_all=True)
            try:
                pm.run(module)
            except MLIRError as e:
                mlir_diags = [d for d in from_mlir_error(e) if not _is_generic_failure(d)]
                return ChunkResult(None, sink.diagnostics + mlir_diags or [Diagnostic("error", "pass pipeline failed")])
            output = module.get_asm(enable_debug_info=self.debug_info)
            return ChunkResult(output, sink.diagnostics)


def _is_generic_failure(d: Diagnostic) -> bool:
    return d.message.startswith("Failure while executing pass pipeline")


def split_chunks(text: str) -> list[tuple[str, int]]:
    """Chunks of a file split on `// -----`, each with the line number it starts on."""
    chunks, start_line, pos = [], 1, 0
    for m in SPLIT_MARKER.finditer(text):
        chunks.append((text[pos:m.start()], start_line))
        start_line += text[pos:m.end()].count("\n")
        pos = m.end()
    chunks.append((text[pos:], start_line))
    return chunks


def make_parser() -> ArgumentParser:
    p = ArgumentParser(prog="sdc-opt", description="Run sdc and MLIR passes on IR files.")
    p.add_argument("input", nargs="?", default=None,
                   help="input file, or - for stdin (the default when stdin is piped)")
    p.add_argument("-p", "--pass-pipeline", default="", help="comma-separated passes, e.g. 'sdc-verify,cse'")
    p.add_argument("-o", dest="output", default="-", help="output file (default stdout)")
    p.add_argument("--split-input-file", action="store_true", help="process each '// -----' chunk separately")
    p.add_argument("--verify-diagnostics", action="store_true",
                   help="check diagnostics against expected-error/warning/note/remark comments")
    p.add_argument("--print-ir-after-all", action="store_true", help="print the IR after every pass (to stderr)")
    p.add_argument("--print-debuginfo", action="store_true", help="print locations in the output IR")
    p.add_argument("--list-passes", action="store_true", help="list sdc passes and exit")
    p.add_argument("--debug", action="store_true", help="show Python tracebacks for internal errors")
    add_version_flag(p, _version_text)
    return p


def list_passes() -> str:
    rows = []
    for name in sorted(PASSES):
        cls = get_pass(name)
        rows.append(f"  {name:<28} {cls.summary}")
    return "sdc passes:\n" + "\n".join(rows) + "\n"


def opt_main(argv: list[str]) -> int:
    args = make_parser().parse_args(argv)
    if args.list_passes:
        sys.stdout.write(list_passes())
        return 0
    if args.input is None:
        if sys.stdin is None or sys.stdin.isatty():  # nothing piped in: do not wait on a terminal
            raise UsageError("no input file (give a path, or - for stdin)")
        args.input = "-"
    opt = Opt(args.pass_pipeline, args.print_ir_after_all, args.print_debuginfo)  # usage errors first
    text, name = read_source(args.input)
    chunks = split_chunks(text) if args.split_input_file else [(text, 1)]
    outputs, failed = [], False
    for chunk, first_line in chunks:
        result = opt.run_chunk(chunk, name, first_line)
        if args.verify_diagnostics:
            problems = check_expected(result.diagnostics, parse_expected(chunk, first_line), name)
            for d in problems:
                sys.stderr.write(d.format() + "\n")
            failed |= bool(problems)
        else:
            for d in result.diagnostics:
                sys.stderr.write(d.format() + "\n")
            failed |= any(d.severity == "error" for d in result.diagnostics)
        if result.output is not None:
            outputs.append(result.output)
    _write_output(args.output, "// -----\n".join(outputs))
    return 1 if failed else 0


def _write_output(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise SdcError(f"cannot write '{path}': {e.strerror}") from None


def _version_text() -> str:
    """`sdc 0.1.0` and the MLIR bindings it runs on (their distribution's version: no import)."""
    from sdc.version import mlir_bindings_version

    return f"{sdc_version_text()}\nMLIR Python bindings: torch-mlir {mlir_bindings_version() or '(version unknown: no package metadata)'}"


def main(argv: list[str] | None = None) -> int:
    return run_main(opt_main, argv)


if __name__ == "__main__":
    sys.exit(main())
