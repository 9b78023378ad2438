"""The PyTorch frontend: a torch.nn.Module or ExportedProgram -> the sdc dialect (docs/torch.md).

    exe = sdc.compile(model.eval(), (x,), dynamic_shapes=({0: Dim("batch", max=64)},))
    (y,) = exe(x)

`torch.export` traces the model to core ATen (export.py), the importer maps each ATen op to sdc
ops (ops.py, importer.py), and torch.export's symbolic dims become sdc dims with their ranges as
run-time guards (symbols.py). `TorchFrontend` is the `torch` entry of `sdc.frontend.FRONTENDS`.
The `torch.compile` backend "sdc" is a driver above the frontends: sdc/torch_compile.py.
"""

from __future__ import annotations

import os
from typing import Any

from sdc.diagnostics import SdcError
from sdc.frontend.base import Imported, InputShapes
from sdc.frontend.torch.importer import ImportedProgram, import_program, import_torch

__all__ = ["ImportedProgram", "TorchFrontend", "import_program", "import_torch"]


class TorchFrontend:
    """The `torch` frontend. It takes example inputs (`example_args`, `dynamic_shapes`), which the
    file-based frontends do not; `--input-shape` ranges still apply, in the shape pass."""

    name = "torch"
    takes_example_args = True

    def import_model(self, model: Any, *, input_shapes: InputShapes | None = None,
                     params_file: str | os.PathLike | None = None, mesh: Any = None,
                     example_args: Any = None, dynamic_shapes: Any = None, example_kwargs: Any = None) -> Imported:
        if params_file is not None:
            raise SdcError("parameter files apply to .mlir models; a torch model carries its own weights")
        imported = import_torch(model, example_args, dynamic_shapes, example_kwargs=example_kwargs)
        source = f"<{type(model).__name__}>"
        return Imported(imported.module, dict(imported.params), {"source": source, "frontend": self.name})

