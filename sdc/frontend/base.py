"""What every frontend shares: the result of an import, the interface a frontend implements, and
the reading of a device mesh given as text or a mapping.

Kept apart from the registry (sdc/frontend/__init__.py) so that a frontend module imports this
and the registry imports the frontends (lazily), never the other way round.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, NamedTuple, Protocol

from sdc.diagnostics import SdcError

# input -> dims (a list of ints and symbol names); symbol -> int or "LO..HI" (for the shape pass)
InputShapes = Mapping[str, Any]


class Imported(NamedTuple):
    """A model in the sdc dialect: the module, its parameter values by `sdc.parameter` name, and
    the options the artifact's manifest records about where it came from (`source`, `frontend`)."""

    module: Any
    params: dict[str, Any]
    options: dict[str, Any]


class Frontend(Protocol):
    """A model importer. `name` is its key in `sdc.frontend.FRONTENDS`."""

    name: str

    def import_model(self, model: Any, *, input_shapes: InputShapes | None = None,
                     params_file: str | os.PathLike | None = None, mesh: Any = None) -> Imported:
        """Import `model` (what `sdc.frontend.frontend_for` chose this frontend for)."""
        ...


def mesh_dict(mesh: Any) -> dict[str, int] | None:
    """`"dp=2,tp=2"`, a mapping or a Mesh as {axis: size}; SdcError if it is not a mesh."""
    from sdc.dialect.mesh import Mesh, MeshError

    if mesh is None:
        return None
    try:
        return (Mesh.parse(mesh) if isinstance(mesh, str) else Mesh.of(mesh)).as_dict()
    except (MeshError, TypeError, ValueError) as e:
        raise SdcError(f"bad mesh {mesh!r}: {e}") from None


def read_model_text(path: os.PathLike | str) -> str:
    """A text model file (IR, StableHLO) as a string; SdcError when it is not there or not UTF-8."""
    from pathlib import Path

    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SdcError(f"cannot read '{path}': not UTF-8 text") from None
    except OSError as e:
        raise SdcError(f"cannot open '{path}': {e.strerror}") from None
