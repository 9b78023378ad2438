"""Writing an artifact directory: manifest.json, program.mlir, plan.json, kernels/, weights/.

The directory is written next to its destination under a temporary name, manifest last
(it holds the SHA-256 of every other file), then renamed into place, so a reader never sees
half an artifact. See docs/artifact.md for the format, and `sdc.runtime.artifact` for the
reader.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import shutil
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from sdc.codegen.plan import Plan
from sdc.diagnostics import SdcError
from sdc.runtime.format import (FORMAT, FORMAT_VERSION, KERNELS_DIR, MANIFEST, PLAN, PROGRAM, WEIGHTS_DIR,
                                sha256_file, weights_file)
from sdc.version import __version__

_FINGERPRINT_PACKAGES = ("torch", "numpy", "onnx", "safetensors", "torch-mlir", "triton")


def environment_fingerprint() -> dict[str, str | None]:
    """Versions of what compiled the artifact (None for a package that is not installed)."""
    env: dict[str, str | None] = {"python": platform.python_version(), "platform": platform.platform(),
                                  "machine": platform.machine()}
    for name in _FINGERPRINT_PACKAGES:
        try:
            env[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            env[name] = None
    return env


def program_text(module) -> str:
    """The final IR, with locations (they tie plan steps back to the source model)."""
    op = module.operation if hasattr(module, "operation") else module
    with op.context:
        return op.get_asm(enable_debug_info=True)


def write_artifact(plan: Plan, module, output: str | os.PathLike, *, options: dict[str, Any] | None = None) -> Path:
    """Write `plan` (and `module`'s final IR) as the artifact directory `output`; returns its path.

    An existing artifact at `output` is replaced; any other existing file or non-empty
    directory there is refused.
    """
    out = Path(output)
    _check_destination(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    tmp.mkdir()  # not mkdtemp: the artifact gets the usual permissions (umask), not 0700
    try:
        _write_contents(tmp, plan, program_text(module), options or {})
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _check_destination(out: Path) -> None:
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise SdcError(f"cannot write the artifact to '{out}': it exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise SdcError(f"cannot write the artifact to '{out}': it is a non-empty directory that is not an "
                       "sdc artifact (refusing to replace it)")


def _write_contents(root: Path, plan: Plan, program: str, options: dict[str, Any]) -> None:
    (root / KERNELS_DIR).mkdir()
    (root / WEIGHTS_DIR).mkdir()
    (root / PROGRAM).write_text(program, encoding="utf-8")
    (root / PLAN).write_text(_json(plan.to_json()), encoding="utf-8")
    for rel, source in plan.kernel_files().items():  # generated kernels (target cuda): hashed like every file
        (root / rel).write_text(source, encoding="utf-8")
    for rank in plan.ranks:
        _save_weights(root / weights_file(rank.rank), rank.weights)
    files = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        files[rel] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "sdc_version": __version__,
        "target": plan.target,
        "world_size": plan.world_size,
        "mesh": plan.mesh,
        "entry": {"inputs": plan.inputs, "outputs": plan.outputs, "guards": plan.guards,
                  **({"state": plan.state} if plan.state else {})},
        "compile_options": options,
        "environment": environment_fingerprint(),
        "files": files,
    }
    (root / MANIFEST).write_text(_json(manifest), encoding="utf-8")


def _json(value: Any) -> str:
    """Indented JSON where small objects and lists stay on one line (a value, an op, a shape)."""
    return _format(value, "") + "\n"


def _format(value: Any, indent: str) -> str:
    # allow_nan=False: a non-finite float that escaped encoding is a bug, not a file jq cannot read.
    flat = json.dumps(value, allow_nan=False, separators=(", ", ": "))
    if not isinstance(value, (dict, list)) or (len(flat) + len(indent) <= 110 and _depth(value) <= 3):
        return flat
    inner = indent + " "
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[\n" + ",\n".join(inner + _format(v, inner) for v in value) + "\n" + indent + "]"
    if not value:
        return "{}"
    items = (inner + json.dumps(k) + ": " + _format(v, inner) for k, v in value.items())
    return "{\n" + ",\n".join(items) + "\n" + indent + "}"


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _save_weights(path: Path, weights: dict[str, torch.Tensor]) -> None:
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for name, t in weights.items():
        t = t.detach().contiguous()
        key = t.untyped_storage().data_ptr()
        # safetensors refuses tensors that share memory, or views of a larger buffer
        if key in seen or t.untyped_storage().nbytes() != t.numel() * t.element_size():
            t = t.clone()
        seen.add(t.untyped_storage().data_ptr())
        tensors[name] = t
    try:
        save_file(tensors, str(path), metadata={"format": "pt", "writer": f"sdc {__version__}"})
    except Exception as e:
        raise SdcError(f"cannot write the weights to '{path}': {e}") from None
    os.chmod(path, 0o666 & ~_umask())  # safetensors creates the file 0600


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask

