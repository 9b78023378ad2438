"""The `--input-shape` language: `x=B,3,224,224`, `x=?,3`, `B=1..64`, `B=8..`, `B=..64`, `B=8`.

What users write to give an input's dims or bind and bound a symbol, read by `sdc compile
--input-shape`, `CompileOptions(input_shapes=...)` and `sdc-shape-constraints{input-shape=...}`.
Plain Python (no MLIR): the options are checked where they are built.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class ShapeBinding:
    """One `NAME=VALUE` of --input-shape: input dims (a list), a symbol's value (int) or range (lo, hi)."""

    name: str
    dims: tuple | None = None  # ints, symbol names, "?"
    value: int | None = None  # `B=8`: a symbol's value, or the dims of a rank-1 input
    lo: int | None = None
    hi: int | None = None

    @property
    def is_range(self) -> bool:
        return self.dims is None and self.value is None

    def text(self) -> str:
        if self.dims is not None:
            return f"{self.name}={','.join(str(d) for d in self.dims)}"
        if self.value is not None:
            return f"{self.name}={self.value}"
        return f"{self.name}={'' if self.lo is None else self.lo}..{'' if self.hi is None else self.hi}"


def parse_binding(text: str) -> ShapeBinding:
    """`x=B,3,224,224`, `x=?,3`, `B=1..64`, `B=8..`, `B=..64`, `B=8`. Raises ValueError."""
    if "=" not in text:
        raise ValueError(f"'{text}' is not NAME=DIMS or SYMBOL=LO..HI")
    name, value = (part.strip() for part in text.split("=", 1))
    if not name:
        raise ValueError(f"'{text}' has no name before '='")
    if not value:
        raise ValueError(f"'{text}' has nothing after '='")
    if ".." in value:
        lo_text, hi_text = (p.strip() for p in value.split("..", 1))
        for part in (lo_text, hi_text):
            if part and not part.isdigit():
                raise ValueError(f"'{text}': a range is LO..HI with non-negative integers (1..64, 8.., ..64)")
        lo = int(lo_text) if lo_text else None
        hi = int(hi_text) if hi_text else None
        if lo is None and hi is None:
            raise ValueError(f"'{text}': a range needs at least one end (1..64, 8.., ..64)")
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"'{text}': the range is empty ({lo} > {hi})")
        if not _NAME.match(name):
            raise ValueError(f"'{text}': '{name}' is not a symbol name")
        return ShapeBinding(name, lo=lo, hi=hi)
    tokens = [t.strip() for t in value.split(",")]
    if len(tokens) == 1 and tokens[0].isdigit():
        return ShapeBinding(name, value=int(tokens[0]))
    dims: list = []
    for token in tokens:
        if token.isdigit():
            dims.append(int(token))
        elif token == "?" or _NAME.match(token):
            dims.append(token)
        else:
            raise ValueError(f"'{text}': '{token}' is not a size, a symbol name or '?'")
    return ShapeBinding(name, dims=tuple(dims))


def parse_bindings(text: str) -> list[ShapeBinding]:
    """Bindings separated by spaces or ';' (the pass option's form)."""
    return [parse_binding(item) for item in re.split(r"[\s;]+", text.strip()) if item]
