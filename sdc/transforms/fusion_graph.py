"""sdc-fuse's graph as plain data: values, nodes (one per op), and the groups a grouping makes.

sdc-fuse (fuse.py) reads a function into a `FusionGraph` and plans a `Grouping` over it; the
attention matcher (attention_pattern.py) merges an attention's three groups into one. Both import this
module, so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable

from sdc.dialect.hooks import ANCHOR_CLASSES, FusionClass

# A node's kind is its op's fusion class (`OpDef.fusion`).
ELEMENTWISE, REDUCTION, LAYOUT = FusionClass.ELEMENTWISE, FusionClass.REDUCTION, FusionClass.LAYOUT
ANCHORS = ANCHOR_CLASSES
OPAQUE, BARRIER = FusionClass.OPAQUE, FusionClass.BARRIER

# ---------------------------------------------------------------- the graph, as plain data


@dataclass
class Value:
    nbytes: int
    type: Hashable  # results of one group that leave it must share this (IRDL)
    rank: int = 0
    shape: tuple = ()
    layout: tuple[int, ...] | None = None  # None: row-major
    producer: int | None = None  # node index; None for arguments and weights


@dataclass
class Node:
    kind: str  # ELEMENTWISE, REDUCTION, LAYOUT, an anchor, OPAQUE or BARRIER
    operands: tuple[int, ...]
    results: tuple[int, ...]
    flops: int = 0
    domain: Hashable = None  # reductions: (input shape, axes)
    place: Hashable = None
    label: str = ""

    @property
    def cheap(self) -> bool:
        return self.kind == ELEMENTWISE and len(self.results) == 1


@dataclass
class FusionGraph:
    values: list[Value]
    nodes: list[Node]
    outputs: list[int]  # values the function returns

    def consumers(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.values]
        for n, node in enumerate(self.nodes):
            for v in node.operands:
                out[v].append(n)
        return out


@dataclass
class Group:
    members: list[int]  # node indices in program order; a recomputed node is a member of several groups
    kind: str

    @property
    def fused(self) -> bool:
        return len(self.members) > 1


@dataclass
class Grouping:
    groups: list[Group]
    home: list[int]  # node -> the group that computes it for everyone outside groups holding copies
    recomputed: list[tuple[int, int]] = field(default_factory=list)  # (node, group it is copied into)
