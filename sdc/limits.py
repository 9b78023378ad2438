"""The size limits that keep a hostile or broken input from taking the machine.

A model, an artifact or a run-time input can declare sizes that sdc would otherwise try to
allocate: a `ConstantOfShape` of [3e9, 4], a folded `Range` of 2**40 steps, external data with a
`length` of 2**40, a JSON file nested 100000 deep. Every place that materializes what an input
declares asks this module first, so there is one limit to configure:

- `SDC_MAX_ALLOC` (environment, bytes; suffixes K, M, G, T accepted): the most one compile-time
  constant, one external-data tensor or one copied run-time input may take. Default 4 GiB.

The other limits are structural and fixed: they bound files and values no real model comes near.
Pure Python, no MLIR and no torch: the runtime imports it.
"""

from __future__ import annotations

import math
import os
from typing import Iterable

from sdc.diagnostics import SdcError

DEFAULT_MAX_ALLOC = 4 << 30
MAX_JSON_BYTES = 256 << 20  # manifest.json, plan.json, a safetensors header
MAX_JSON_DEPTH = 64  # nesting of arrays and objects in any JSON sdc reads
MAX_WORLD_SIZE = 1 << 16  # ranks of one artifact
MAX_GUARD_CHARS = 4096  # one guard condition's text
MAX_GUARDS = 10_000  # guards of one entry
MAX_RANK = 64  # dims of one tensor
MAX_DIM = 1 << 48  # one declared dim size (far above any real tensor, far below int64 overflow)
READ_CHUNK = 64 << 20  # external data is read in chunks of this size

_SUFFIXES = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def max_alloc() -> int:
    """The allocation limit in bytes: `SDC_MAX_ALLOC` when set, else the default (read on each
    call, so a test or the fuzzer's worker can lower it)."""
    text = os.environ.get("SDC_MAX_ALLOC", "").strip().upper().removesuffix("B").removesuffix("I")
    if not text:
        return DEFAULT_MAX_ALLOC
    scale = 1
    if text[-1] in _SUFFIXES:
        scale, text = _SUFFIXES[text[-1]], text[:-1]
    try:
        value = int(float(text) * scale)
    except ValueError:
        raise SdcError(f"SDC_MAX_ALLOC={os.environ['SDC_MAX_ALLOC']!r} is not a size in bytes "
                       "(e.g. 4294967296 or 4G)") from None
    if value <= 0:
        raise SdcError(f"SDC_MAX_ALLOC must be positive, found {os.environ['SDC_MAX_ALLOC']!r}")
    return value


def format_size(n: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def check_alloc(nbytes: int, what: str) -> None:
    """Refuse to allocate `nbytes` for `what` when that is over the limit (SdcError)."""
    limit = max_alloc()
    if nbytes > limit:
        raise SdcError(f"{what} would take {format_size(nbytes)}, over the allocation limit of "
                       f"{format_size(limit)} (set SDC_MAX_ALLOC to raise it)")


def element_count(shape: Iterable) -> int:
    """The element count of a static shape; negative dims are a caller's error (ValueError)."""
    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        raise ValueError(f"shape {dims} has a negative dim")
    return math.prod(dims)


def check_elements(shape: Iterable, itemsize: int, what: str) -> None:
    """`check_alloc` for a tensor of `shape` with `itemsize`-byte elements (SdcError when over;
    a negative dim is an SdcError too, since it is the input's fault)."""
    try:
        n = element_count(shape)
    except ValueError as e:
        raise SdcError(f"{what}: {e}") from None
    check_alloc(n * max(int(itemsize), 1), what)


def range_length(start: float, limit: float, delta: float, itemsize: int = 8) -> int:
    """The length of a Range folded at compile time, checked before anything is allocated
    (SdcError for a zero or non-finite step and for a length over the limit)."""
    if delta == 0 or not all(math.isfinite(x) for x in (start, limit, delta)):
        raise SdcError(f"Range({start}, {limit}, {delta}) has no finite length")
    n = max(0, math.ceil((limit - start) / delta))
    check_alloc(n * itemsize, f"Range({start}, {limit}, {delta}) folded at compile time")
    return n
