"""The one JSON reader for everything sdc reads from disk: manifest.json, plan.json and the
safetensors header.

Python's `json` recurses once per nesting level (a file nested 100000 deep raises RecursionError),
accepts NaN and Infinity, and reads a file of any size. This reader refuses, with a JsonError
naming the problem: files over `MAX_JSON_BYTES`, nesting deeper than `MAX_JSON_DEPTH` (checked
on the text before parsing), non-UTF-8 bytes, NaN/Infinity, and integers too long to parse.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from sdc.limits import MAX_JSON_BYTES, MAX_JSON_DEPTH, format_size

__all__ = ["JsonError", "loads", "read_json"]


class JsonError(ValueError):
    """Text that is not JSON sdc accepts; the message says why (callers add the file's name)."""


_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(rb"[\[\]{}]")


def _depth(data: bytes) -> int:
    """The deepest nesting of arrays and objects, string contents skipped."""
    depth = deepest = 0
    for m in _BRACKETS.finditer(_STRINGS.sub(b"", data)):
        if m.group() in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_JSON_DEPTH:
                break
        else:
            depth -= 1
    return deepest


class _Constant(ValueError):
    pass


def _no_constants(name: str):
    raise _Constant(name)


def loads(data: bytes | str, *, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse JSON text within the limits; raises JsonError."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > max_bytes:
        raise JsonError(f"is {format_size(len(raw))}, over the limit of {format_size(max_bytes)}")
    if _depth(raw) > max_depth:
        raise JsonError(f"nests arrays/objects more than {max_depth} deep")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise JsonError("is not UTF-8 text") from None
    try:
        return json.loads(text, parse_constant=_no_constants)
    except _Constant as e:
        raise JsonError(f"is not valid JSON: {e} is not JSON") from None
    except RecursionError:  # the depth check above should make this unreachable
        raise JsonError(f"nests arrays/objects too deeply") from None
    except ValueError as e:  # JSONDecodeError, and int() refusing thousands of digits
        raise JsonError(f"is not valid JSON: {e}") from None


def read_json(path: Path, *, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Read and parse a JSON file within the limits (the size is checked before reading);
    raises JsonError, or OSError when the file cannot be read."""
    size = Path(path).stat().st_size
    if size > max_bytes:
        raise JsonError(f"is {format_size(size)}, over the limit of {format_size(max_bytes)}")
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    return loads(data, max_bytes=max_bytes, max_depth=max_depth)
