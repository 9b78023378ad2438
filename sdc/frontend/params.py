"""Parameter files: the weights of an `.mlir` model, kept out of the IR text and referenced by
`sdc.parameter` name. `.safetensors` or `.npz`; read without unpickling anything."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from sdc.diagnostics import SdcError

PARAM_SUFFIXES = (".safetensors", ".npz")


def read_params(path: str | os.PathLike) -> dict[str, Any]:
    """Parameter values from a .safetensors or .npz file (never unpickled)."""
    import numpy as np

    p = Path(path)
    if not p.is_file():
        raise SdcError(f"cannot open parameter file '{p}': no such file")
    try:
        if p.suffix == ".safetensors":
            from safetensors.torch import load_file

            return dict(load_file(str(p)))
        if p.suffix == ".npz":
            with np.load(p, allow_pickle=False) as data:
                return {k: data[k] for k in data.files}
    except Exception as e:  # safetensors and numpy raise several kinds for a damaged file
        raise SdcError(f"cannot read parameter file '{p}': {e}") from None
    raise SdcError(f"parameter file '{p}' must be .safetensors or .npz")


def write_params(params: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """Write parameter values (torch tensors or numpy arrays) where `read_params` reads them."""
    import numpy as np
    import torch

    p = Path(path)
    if p.suffix not in PARAM_SUFFIXES:
        raise SdcError(f"parameter file '{p}' must be .safetensors or .npz")
    tensors = {name: (v if isinstance(v, torch.Tensor) else torch.from_numpy(np.asarray(v))).contiguous()
               for name, v in params.items()}
    try:
        if p.suffix == ".safetensors":
            from safetensors.torch import save_file

            # Tensors that share storage (one weight folded into two) are saved as separate copies.
            save_file({name: t.clone() for name, t in tensors.items()}, str(p))
        else:
            bf16 = sorted(name for name, t in tensors.items() if t.dtype == torch.bfloat16)
            if bf16:
                raise SdcError(f"parameter '{bf16[0]}' is bf16, which .npz cannot hold: write .safetensors")
            np.savez(p, **{name: t.numpy() for name, t in tensors.items()})
    except OSError as e:
        raise SdcError(f"cannot write parameter file '{p}': {e.strerror}") from None
    return p
