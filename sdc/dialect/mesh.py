"""The device mesh and tensor shardings as plain Python values (no MLIR, no torch).

Shared by the passes (sdc/transforms/sharding*.py, spmd_partition.py), the plan builder and the
runtime (sdc/runtime/distributed.py), so all of them agree on one convention:

- A mesh is an ordered list of named axes with sizes, e.g. `dp=2,tp=2`. Ranks are numbered
  row-major over the axes in that order: with `dp=2,tp=2`, rank 1 is (dp 0, tp 1) and rank 2 is
  (dp 1, tp 0), so the ranks of one `tp` group are neighbours.
- A sharding says, per tensor dim, which mesh axes split it (major axis first), and over which
  axes the value is a partial sum still to be added up. A dim split over `(dp, tp)` is cut into
  size(dp) * size(tp) equal blocks; the device at (dp i, tp j) holds block i * size(tp) + j.
- A group over a list of axes is the devices that differ only along those axes; its members are
  ordered by their coordinates along the listed axes, the first listed axis major. That order is
  the order in which collectives concatenate and scatter blocks.

Textual form (the `#sdc.sharding` attribute): `#sdc.sharding<[["dp"], [], ["tp"]], ["tp"]>`;
in messages the short form `[dp, -, tp] partial(tp)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

_AXIS = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class MeshError(ValueError):
    pass


@dataclass(frozen=True)
class Mesh:
    axes: tuple[str, ...]
    sizes: tuple[int, ...]

    @staticmethod
    def of(axes: "dict[str, int] | Mesh | None") -> "Mesh":
        if isinstance(axes, Mesh):
            return axes
        axes = dict(axes or {})
        return Mesh(tuple(axes), tuple(int(v) for v in axes.values()))

    @staticmethod
    def parse(text: str) -> "Mesh":
        """`dp=2,tp=2` (named axes in order, each with its size). Raises MeshError."""
        axes: dict[str, int] = {}
        for item in (t.strip() for t in text.split(",")):
            name, eq, size = item.partition("=")
            name, size = name.strip(), size.strip()
            if not eq or not _AXIS.match(name) or not size.isdigit():
                raise MeshError(f"'{item}' is not AXIS=SIZE (a mesh looks like dp=2,tp=2)")
            if name in axes:
                raise MeshError(f"mesh axis '{name}' is given twice")
            if int(size) < 1:
                raise MeshError(f"mesh axis '{name}' has size {size}; sizes are at least 1")
            axes[name] = int(size)
        if not axes:
            raise MeshError("the mesh has no axes (a mesh looks like dp=2,tp=2)")
        return Mesh.of(axes)

    def as_dict(self) -> dict[str, int]:
        return dict(zip(self.axes, self.sizes))

    def __str__(self) -> str:
        return ",".join(f"{a}={s}" for a, s in zip(self.axes, self.sizes)) or "(none)"

    @property
    def world_size(self) -> int:
        return self.size(self.axes)

    def size(self, axes: Iterable[str]) -> int:
        sizes = self.as_dict()
        n = 1
        for a in axes:
            n *= sizes[a]
        return n

    def coords(self, rank: int) -> dict[str, int]:
        """The rank's position along each axis (row-major numbering)."""
        out = {}
        for axis, size in reversed(list(zip(self.axes, self.sizes))):
            out[axis] = rank % size
            rank //= size
        return {a: out[a] for a in self.axes}

    def rank_of(self, coords: dict[str, int]) -> int:
        rank = 0
        for axis, size in zip(self.axes, self.sizes):
            rank = rank * size + coords[axis]
        return rank

    def index_in_group(self, rank: int, axes: Sequence[str]) -> int:
        """The rank's position within its group over `axes` (the first listed axis major)."""
        coords = self.coords(rank)
        index = 0
        for a in axes:
            index = index * self.as_dict()[a] + coords[a]
        return index

    def group(self, rank: int, axes: Sequence[str]) -> list[int]:
        """The ranks of `rank`'s group over `axes`, in group order."""
        sizes = self.as_dict()
        base = self.coords(rank)
        members = []
        for index in range(self.size(axes)):
            coords = dict(base)
            rest = index
            for a in reversed(list(axes)):
                coords[a] = rest % sizes[a]
                rest //= sizes[a]
            members.append(self.rank_of(coords))
        return members

    def groups(self, axes: Sequence[str]) -> list[list[int]]:
        """Every group over `axes`, each in group order, ordered by their smallest rank."""
        seen: set[int] = set()
        out = []
        for rank in range(self.world_size):
            if rank in seen:
                continue
            members = self.group(rank, axes)
            seen.update(members)
            out.append(members)
        return out


@dataclass(frozen=True)
class Sharding:
    dims: tuple[tuple[str, ...], ...]
    partial: tuple[str, ...] = ()

    @staticmethod
    def replicated(rank: int) -> "Sharding":
        return Sharding(((),) * rank)

    @staticmethod
    def of(dims: Sequence, partial: Sequence[str] = ()) -> "Sharding":
        """From per-dim entries that are None / "" (not split), an axis name, or a list of axis names."""
        out = []
        for d in dims:
            if d is None or d == "" or d == "-":
                out.append(())
            elif isinstance(d, str):
                out.append(tuple(a for a in d.split(",") if a))
            else:
                out.append(tuple(d))
        return Sharding(tuple(out), tuple(partial))

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def is_replicated(self) -> bool:
        return not self.partial and not any(self.dims)

    def axes_used(self) -> list[str]:
        return [a for d in self.dims for a in d] + list(self.partial)

    def with_dims(self, dims) -> "Sharding":
        return Sharding(tuple(tuple(d) for d in dims), self.partial)

    def with_partial(self, partial: Iterable[str]) -> "Sharding":
        return Sharding(self.dims, tuple(partial))

    def shards(self, dim: int, mesh: Mesh) -> int:
        return mesh.size(self.dims[dim])

    def __str__(self) -> str:
        dims = ", ".join(",".join(d) if d else "-" for d in self.dims)
        text = f"[{dims}]"
        if self.partial:
            text += f" partial({','.join(self.partial)})"
        return text

    def check(self, mesh: Mesh) -> str | None:
        """Why this sharding is not well formed on `mesh` (None when it is)."""
        used = self.axes_used()
        for a in used:
            if a not in mesh.axes:
                return f"mesh axis '{a}' is not in the mesh ({mesh})"
        dup = sorted({a for a in used if used.count(a) > 1})
        if dup:
            return f"mesh axis '{dup[0]}' is used more than once"
        return None


# ---------------------------------------------------------------- local blocks


def block_index(rank: int, axes: Sequence[str], mesh: Mesh) -> int:
    """Which block of a dim split over `axes` the device `rank` holds."""
    return mesh.index_in_group(rank, axes)


def local_slices(sharding: Sharding, shape: Sequence[int], rank: int, mesh: Mesh) -> list[slice]:
    """The global index range each dim of the device's local block covers. Raises MeshError when a
    split dim is not divisible by its axes' size."""
    out = []
    for d, (axes, size) in enumerate(zip(sharding.dims, shape)):
        n = mesh.size(axes)
        if size % n:
            raise MeshError(f"dim {d} (= {size}) is not divisible by {n} (split over mesh axes "
                            f"{', '.join(axes)})")
        block = size // n
        start = block_index(rank, axes, mesh) * block if n > 1 else 0
        out.append(slice(start, start + block))
    return out


def local_dim(dim, shards: int):
    """A dim's local size on one device: ints divide, symbolic dims become `expr//n`, None stays."""
    if shards == 1 or dim is None:
        return dim
    if isinstance(dim, int):
        return dim // shards
    text = str(dim)
    return f"{text}//{shards}" if _AXIS.match(text) else f"({text})//{shards}"


def to_json(s: Sharding) -> dict:
    return {"dims": [list(d) for d in s.dims], "partial": list(s.partial)}


def from_json(value) -> Sharding:
    if not isinstance(value, dict) or not isinstance(value.get("dims"), list):
        raise MeshError(f"a sharding must be {{\"dims\": [[axis, ...], ...], \"partial\": [...]}}, found {value!r}")
    dims = []
    for d in value["dims"]:
        if not isinstance(d, list) or not all(isinstance(a, str) for a in d):
            raise MeshError(f"a sharding's dims must be lists of axis names, found {d!r}")
        dims.append(tuple(d))
    partial = value.get("partial", [])
    if not isinstance(partial, list) or not all(isinstance(a, str) for a in partial):
        raise MeshError(f"a sharding's partial axes must be a list of axis names, found {partial!r}")
    return Sharding(tuple(dims), tuple(partial))
