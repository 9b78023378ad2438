"""Lit tests that silently check nothing fail here instead.

FileCheck ignores a directive without its colon (`// CHECK foo`), sdc-opt ignores a
malformed `expected-error`, and lit skips a file without a RUN line: each reads like a test
and proves nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

LIT = Path(__file__).resolve().parents[1] / "lit"

_SUFFIXES = r"(?:-NEXT|-NOT|-SAME|-DAG|-LABEL|-EMPTY|-COUNT-\d+)?"
_PREFIX_OPTION = re.compile(r"--check-prefix(?:es)?[= ]([A-Za-z0-9_,-]+)")
# A directive is the keyword followed by `@` or `{`; prose that mentions expected-error is not.
_EXPECTED = re.compile(r"expected-(?:error|warning|note|remark)(\s*[@{].*)$")
_EXPECTED_WELL_FORMED = re.compile(r"^\s*(?:@(?:above|below|[+-]\d+))?\s*\{\{.*\}\}")


def lit_files() -> list[Path]:
    """The files lit runs: *.mlir under test/lit, except the Inputs folders lit.cfg.py excludes."""
    return sorted(p for p in LIT.rglob("*.mlir") if "Inputs" not in p.relative_to(LIT).parts
                  and "Output" not in p.relative_to(LIT).parts)


def run_lines(text: str) -> list[str]:
    return [line.split("RUN:", 1)[1] for line in text.splitlines() if re.match(r"^\s*//\s*RUN:", line)]


def check_prefixes(text: str) -> set[str]:
    """FileCheck prefixes the RUN lines use (CHECK when FileCheck runs without --check-prefix)."""
    prefixes = set()
    for run in run_lines(text):
        for command in run.split("|"):
            if "FileCheck" not in command and "filecheck" not in command:
                continue
            named = _PREFIX_OPTION.findall(command)
            for group in named:
                prefixes.update(p for p in group.split(",") if p)
            if not named:
                prefixes.add("CHECK")
    return prefixes


def directives_without_colon(text: str, prefixes: set[str]) -> list[tuple[int, str]]:
    """(line number, line) of each `// PREFIX[-SUFFIX]` directive not followed by its colon."""
    names = "|".join(re.escape(p) for p in sorted(prefixes | {"CHECK"}, key=len, reverse=True))
    pattern = re.compile(rf"^\s*//\s*(?:{names}){_SUFFIXES}(?![:\w-])")
    return [(i, line) for i, line in enumerate(text.splitlines(), 1) if pattern.match(line)]


def directives_of_unused_prefixes(text: str, prefixes: set[str]) -> list[tuple[int, str]]:
    """`// CHECK...:` directives whose prefix no RUN line hands to FileCheck."""
    pattern = re.compile(rf"^\s*//\s*(CHECK[A-Z0-9_]*){_SUFFIXES}:")
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        m = pattern.match(line)
        if m and m.group(1) not in prefixes:
            out.append((i, line))
    return out


def malformed_expectations(text: str) -> list[tuple[int, str]]:
    """`expected-error` & co. that --verify-diagnostics would not read (no `{{...}}`)."""
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        m = _EXPECTED.search(_comment(line))
        if m and not _EXPECTED_WELL_FORMED.match(m.group(1)):
            out.append((i, line))
    return out


def has_expectations(text: str) -> bool:
    return any(_EXPECTED.search(_comment(line)) for line in text.splitlines())


def _comment(line: str) -> str:
    """The `//` comment of a line (expectations may follow IR on the same line)."""
    return line.split("//", 1)[1] if "//" in line else ""


def _where(path: Path, found: list[tuple[int, str]]) -> str:
    return "\n".join(f"{path.relative_to(LIT)}:{i}: {line.strip()}" for i, line in found)


def test_there_are_lit_tests():
    assert len(lit_files()) >= 40


@pytest.mark.parametrize("path", lit_files(), ids=lambda p: str(p.relative_to(LIT)))
def test_lit_file(path: Path):
    text = path.read_text()
    assert run_lines(text), f"{path.relative_to(LIT)} has no RUN line: lit would not run it"
    prefixes = check_prefixes(text)
    bad = directives_without_colon(text, prefixes)
    assert not bad, "FileCheck directives without their colon check nothing:\n" + _where(path, bad)
    unused = directives_of_unused_prefixes(text, prefixes)
    assert not unused, "directives no FileCheck RUN line reads:\n" + _where(path, unused)
    malformed = malformed_expectations(text)
    assert not malformed, "expected-* directives without {{...}}:\n" + _where(path, malformed)
    if has_expectations(text):
        runs = " ".join(run_lines(text))
        assert "--verify-diagnostics" in runs, f"{path.relative_to(LIT)}: expected-* lines but no --verify-diagnostics"


# ---------------------------------------------------------------- the checks themselves


def test_detects_missing_colons():
    text = "// RUN: sdc-opt %s | FileCheck %s\n// CHECK foo\n// CHECK-NEXT bar\n// CHECK-NOT baz\n// CHECK: fine\n"
    assert [i for i, _ in directives_without_colon(text, check_prefixes(text))] == [2, 3, 4]


def test_detects_missing_colon_of_a_custom_prefix():
    text = "// RUN: sdc-opt %s | FileCheck %s --check-prefix=NOFOLD\n// NOFOLD-SAME x\n// NOFOLD: y\n"
    assert check_prefixes(text) == {"NOFOLD"}
    assert [i for i, _ in directives_without_colon(text, check_prefixes(text))] == [2]


def test_prose_is_not_a_directive():
    text = "// RUN: true\n// CHECKS below pin the operands\n// CHECK-LABEL-like words: fine\n"
    assert directives_without_colon(text, check_prefixes(text)) == []


def test_detects_checks_no_filecheck_reads():
    text = "// RUN: sdc-opt %s\n// CHECK: never looked at\n"
    assert [i for i, _ in directives_of_unused_prefixes(text, check_prefixes(text))] == [2]
    text = "// RUN: sdc-opt %s | FileCheck %s --check-prefix=A\n// CHECK: not A\n// A: fine\n"
    assert [i for i, _ in directives_of_unused_prefixes(text, check_prefixes(text))] == [2]


def test_detects_malformed_expectations():
    text = ("// expected-error @+1 {{fine}}\n// expected-error {operand}\n"
            "// expected-note@above {{fine}}\n// expected-warning @+x {{bad offset}}\n"
            "// each expected-error names a line (prose, not a directive)\n")
    assert [i for i, _ in malformed_expectations(text)] == [2, 4]


def test_expectations_after_ir_count():
    text = '  %0 = "sdc.exp"(%i) : (tensor<4xi32>) -> tensor<4xi32> // expected-error {oops}\n'
    assert has_expectations(text)
    assert [i for i, _ in malformed_expectations(text)] == [1]
    assert not has_expectations("// prose about expected-error lines\n")


def test_detects_a_missing_run_line():
    assert run_lines("// CHECK: x\nfunc.func @f() {\n  return\n}\n") == []
    assert run_lines("// RUN: sdc-opt %s\n") == [" sdc-opt %s"]
