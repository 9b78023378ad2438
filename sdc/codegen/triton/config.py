"""What the Triton renderer and its template modules (attention.py, conv.py) share: the matmul
tile configuration, number literals, the flat-index decomposition."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MatmulConfig:
    """One configuration of the matmul template: tile sizes, the grouped ordering, warps, pipeline stages."""

    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8  # row tiles that run one after another over the same columns of B, while those sit in L2
    num_warps: int = 4
    num_stages: int = 3
    # 0: one program per output tile. Otherwise a persistent kernel: this many programs (the device's
    # SMs), each looping over the tiles pid, pid + programs, ... (matmul template only)
    programs: int = 0

    def clamped(self, m: int | None, n: int | None, k: int | None) -> "MatmulConfig":
        """The same, with each block no larger than the next power of 2 of a static size (tl.dot needs >= 16)."""
        def fit(block: int, size: int | None) -> int:
            return block if size is None else max(16, min(block, next_power_of_2(size)))
        return MatmulConfig(fit(self.block_m, m), fit(self.block_n, n), fit(self.block_k, k), self.group_m,
                            self.num_warps, self.num_stages, self.programs)


def literal(value: Any) -> str:
    """A Python number as Triton source (non-finite floats as float("inf") / float("nan"))."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    value = float(value)
    if math.isnan(value):
        return 'float("nan")'
    if math.isinf(value):
        return 'float("inf")' if value > 0 else '-float("inf")'
    return repr(value)


def decompose(flat: str, rank: int) -> list[str]:
    """`i0 .. i{rank-1}`: the row-major index of `flat` over the sizes d0 .. d{rank-1}."""
    if rank == 0:
        return []
    if rank == 1:
        return [f"i0 = {flat}"]
    lines = [f"rem = {flat}"]
    for d in range(rank - 1, 0, -1):
        lines += [f"i{d} = rem % d{d}", f"rem = rem // d{d}"]
    return lines + ["i0 = rem"]


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()
