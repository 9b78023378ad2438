"""The `mlir` frontend: a file of sdc IR (what `sdc import` and `sdc-opt` write), with its
parameter values from a separate .safetensors or .npz file. A file of StableHLO goes to the
`stablehlo` frontend (sdc/frontend/stablehlo/)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sdc.frontend.base import Imported, InputShapes, read_model_text
from sdc.frontend.params import read_params


class MlirFrontend:
    """Parses the IR as it is; the mesh and the symbols' bounds are the compile pipeline's business."""

    name = "mlir"

    def import_model(self, model: Any, *, input_shapes: InputShapes | None = None,
                     params_file: str | os.PathLike | None = None, mesh: Any = None) -> Imported:
        from sdc.ir_text import parse_module

        path = Path(model)
        text = read_model_text(path)
        from sdc.frontend.stablehlo.convert import is_stablehlo

        if is_stablehlo(text):  # StableHLO (jax's lowering, as text): the stablehlo frontend converts it
            from sdc.frontend.stablehlo import StablehloFrontend

            return StablehloFrontend().import_model(model, input_shapes=input_shapes, params_file=params_file,
                                                    mesh=mesh, text=text)
        module = parse_module(text, source_name=str(path))
        params = read_params(params_file) if params_file is not None else {}
        options: dict[str, Any] = {"source": path.name, "frontend": self.name,
                                   "params": Path(params_file).name if params_file else None}
        if input_shapes:
            options["input_shapes"] = dict(input_shapes)
        return Imported(module, params, options)
