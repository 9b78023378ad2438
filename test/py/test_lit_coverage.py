"""Every sdc op has a round-trip lit test (test/lit/dialect/roundtrip/).

An op counts as covered when a round-trip file both writes it in its IR and checks it in a
CHECK line of the re-printed output: an op that is parsed but never checked could vanish from
the printer's output without any test noticing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sdc.dialect.opdef import all_ops

ROUNDTRIP = Path(__file__).resolve().parents[1] / "lit" / "dialect" / "roundtrip"

_OP = re.compile(r'"sdc\.([A-Za-z0-9_]+)"\(')
_CHECK = re.compile(r"^\s*//\s*CHECK(?:-[A-Z]+)?:(.*)$")
# The re-printed output must be what is checked: a RUN line parses sdc-opt's own output again.
_REPARSE = re.compile(r"RUN:.*(?:\|\s*sdc-opt\b|sdc-opt\s+%t)")


def ops_in_ir(text: str) -> set[str]:
    """Op names in the IR of a lit file (comment lines left out)."""
    found = set()
    for line in text.splitlines():
        if line.lstrip().startswith("//"):
            continue
        found.update(_OP.findall(line))
    return found


def ops_in_checks(text: str) -> set[str]:
    """Op names that CHECK lines of a lit file look for."""
    found = set()
    for line in text.splitlines():
        m = _CHECK.match(line)
        if m:
            found.update(_OP.findall(m.group(1)))
    return found


def covered_ops(files: dict[str, str]) -> set[str]:
    """Ops each written and checked in one and the same round-trip file."""
    covered = set()
    for text in files.values():
        if _REPARSE.search(text):
            covered |= ops_in_ir(text) & ops_in_checks(text)
    return covered


def roundtrip_files() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(ROUNDTRIP.glob("*.mlir"))}


def test_roundtrip_directory_exists():
    assert roundtrip_files(), f"no round-trip tests in {ROUNDTRIP}"


@pytest.mark.parametrize("name", sorted(roundtrip_files()))
def test_roundtrip_file_reparses_its_output(name):
    text = roundtrip_files()[name]
    assert _REPARSE.search(text), f"{name}: no RUN line feeds sdc-opt's output back into sdc-opt"


def test_every_op_has_a_roundtrip_test():
    missing = sorted(set(all_ops()) - covered_ops(roundtrip_files()))
    assert not missing, (
        "ops with no round-trip test (write them and CHECK them in a file of "
        f"test/lit/dialect/roundtrip/): {', '.join('sdc.' + m for m in missing)}"
    )


def test_roundtrip_tests_name_only_real_ops():
    unknown = set()
    for text in roundtrip_files().values():
        unknown |= (ops_in_ir(text) | ops_in_checks(text)) - set(all_ops())
    assert not unknown, f"round-trip tests use ops that do not exist: {sorted(unknown)}"


# ---------------------------------------------------------------- the scanner itself


SAMPLE = """// RUN: sdc-opt %s | sdc-opt | FileCheck %s
// CHECK: %[[A:.*]] = "sdc.neg"(%[[X]])
// CHECK-NEXT: "sdc.send"(%[[A]])
// "sdc.exp"(%x) in a plain comment is neither IR nor a check
%0 = "sdc.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
%1 = "sdc.abs"(%0) : (tensor<4xf32>) -> tensor<4xf32>
"sdc.send"(%1) {mesh_axes = ["pp"]} : (tensor<4xf32>) -> ()
"""


def test_scanner_needs_both_ir_and_check():
    assert ops_in_ir(SAMPLE) == {"neg", "abs", "send"}
    assert ops_in_checks(SAMPLE) == {"neg", "send"}
    assert covered_ops({"sample": SAMPLE}) == {"neg", "send"}


def test_scanner_ignores_files_that_do_not_reparse():
    single_print = SAMPLE.replace("| sdc-opt |", "|")
    assert covered_ops({"sample": single_print}) == set()
