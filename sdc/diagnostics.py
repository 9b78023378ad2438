"""Diagnostics: what sdc tells the user, with a location, and the one error type.

MLIR reports parse and verifier errors through `MLIRError.error_diagnostics`;
Python passes report through `DiagnosticSink`. Both end up as `Diagnostic`
values that print as `FILE:LINE:COL: error: message`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

SEVERITIES = ("error", "warning", "note", "remark")


@dataclass(frozen=True)
class SourceLoc:
    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass
class Diagnostic:
    severity: str
    message: str
    loc: SourceLoc | None = None
    label: str | None = None  # a name location (e.g. an ONNX node name) when there is no file position
    notes: list["Diagnostic"] = field(default_factory=list)

    def format(self) -> str:
        where = str(self.loc) if self.loc else (self.label or "")
        head = f"{where}: {self.severity}: {self.message}" if where else f"{self.severity}: {self.message}"
        return "\n".join([head] + [n.format() for n in self.notes])


class SdcError(Exception):
    """A user-facing error: bad model, bad IR, bad input or bad artifact.

    Command-line tools print it as `error: ...` and exit 1, without a traceback.
    """

    def __init__(self, message: str, diagnostics: Iterable[Diagnostic] = ()):
        super().__init__(message)
        self.diagnostics = list(diagnostics)

    def format(self) -> str:
        if self.diagnostics:
            return "\n".join(d.format() for d in self.diagnostics)
        msg = str(self)
        return msg if msg.startswith("error:") else f"error: {msg}"


class PipelineError(ValueError):
    """A pass pipeline that cannot be built (unknown pass, bad option): a usage error on the command line."""


_FILE_LOC = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')
_NAME_LOC = re.compile(r'^loc\("((?:[^"\\]|\\.)*)"(?:\(|\)$)')


def parse_location(text: str) -> tuple[SourceLoc | None, str | None]:
    """Split an MLIR location's text into a file position and a name label.

    `loc("f.mlir":3:8)` -> (f.mlir:3:8, None); `loc("conv1"("m.onnx":0:0))` ->
    (m.onnx:0:0, "conv1"); fused and callsite locations take their first file
    position. Line 0 file positions (importers' node-only locations) are kept.
    """
    name = None
    m = _NAME_LOC.match(text)
    if m and not re.match(r'^loc\("(?:[^"\\]|\\.)*":\d', text):
        name = m.group(1)
    fm = _FILE_LOC.search(text)
    loc = SourceLoc(fm.group(1), int(fm.group(2)), int(fm.group(3))) if fm else None
    return loc, name


def from_mlir(diag, severity: str | None = None) -> Diagnostic:
    """Convert an `ir.DiagnosticInfo` (from an MLIRError) into a Diagnostic."""
    loc, label = parse_location(str(diag.location))
    sev = severity or _severity_name(diag.severity)
    notes = [from_mlir(n, "note") for n in diag.notes if not str(n.message).startswith("see current operation")]
    return Diagnostic(sev, str(diag.message), loc, label, notes)


def _severity_name(sev) -> str:
    text = str(sev).lower()
    for name in SEVERITIES:
        if name in text:
            return name
    return "error"


def from_mlir_error(err) -> list[Diagnostic]:
    diags = [from_mlir(d) for d in getattr(err, "error_diagnostics", [])]
    if not diags:
        text = str(err).split(":", 1)[-1].strip() or str(err)
        diags = [Diagnostic("error", text)]
    return diags


class DiagnosticSink:
    """Collects diagnostics emitted by Python passes at an op's location."""

    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []

    def emit(self, severity: str, op_or_loc, message: str, notes: list[tuple[object, str]] = ()) -> Diagnostic:
        diag = Diagnostic(severity, message, *_where(op_or_loc))
        for where, text in notes:
            diag.notes.append(Diagnostic("note", text, *_where(where)))
        self.diagnostics.append(diag)
        return diag

    def error(self, op_or_loc, message: str, notes=()) -> Diagnostic:
        return self.emit("error", op_or_loc, message, notes)

    def warning(self, op_or_loc, message: str, notes=()) -> Diagnostic:
        return self.emit("warning", op_or_loc, message, notes)

    @property
    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.diagnostics)


def _where(op_or_loc) -> tuple[SourceLoc | None, str | None]:
    if op_or_loc is None:
        return None, None
    loc = getattr(op_or_loc, "location", op_or_loc)
    return parse_location(str(loc))
