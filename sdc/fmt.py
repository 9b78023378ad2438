"""Human-readable numbers for reports (no MLIR import: the runtime's commands use it)."""

from __future__ import annotations


def format_bytes(n: float) -> str:
    """`512 B`, `1.5 KiB`, `3.2 MiB`, `1.1 GiB`."""
    if n < 1024:
        return f"{int(n)} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}"
    return f"{n} B"
