"""Writing an artifact directory: manifest.json, program.mlir, plan.json, kernels/, weights/.

The directory is written next to its destination under a temporary name, manifest last
(it holds the SHA-256 of every other file), then renamed into place, so a reader never sees
half an artifact. See docs/artifact.md for the format, and `sdc.runtime.artifact` for the
reader.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import secrets
import shutil
import struct
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from sdc.codegen.plan import Plan, RankPlan
from sdc.dtypes import from_torch
from sdc.runtime import synth
from sdc.runtime.artifact import SAFETENSORS_DTYPES
from sdc.diagnostics import SdcError
from sdc.runtime.format import (FORMAT, FORMAT_VERSION, KERNELS_DIR, MANIFEST, PLAN, PROGRAM, WEIGHTS_DIR,
                                sha256_file, weights_file)
from sdc.version import __version__

# sdc element type -> safetensors dtype name (the inverse of the reader's table)
_SAFETENSORS_DTYPE = {sdc_name: st_name for st_name, sdc_name in SAFETENSORS_DTYPES.items()}

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
        # verified after the last pass (sdc.compiler.run_pipeline): printing need not verify it again
        return op.get_asm(enable_debug_info=True, assume_verified=True)


def write_artifact(plan: Plan, module, output: str | os.PathLike, *, options: dict[str, Any] | None = None,
                   weight_seed: int | None = None) -> Path:
    """Write `plan` (and `module`'s final IR) as the artifact directory `output`; returns its path.

    An existing artifact at `output` is replaced; any other existing file or non-empty
    directory there is refused. With `weight_seed` (`--weights none`), the large floating-point
    weights are not written: the manifest's `weights` section describes them and the loader
    synthesizes them from that seed (sdc.runtime.synth).
    """
    out = Path(output)
    _check_destination(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    tmp.mkdir()  # not mkdtemp: the artifact gets the usual permissions (umask), not 0700
    try:
        _write_contents(tmp, plan, program_text(module), options or {}, weight_seed)
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


def _write_contents(root: Path, plan: Plan, program: str, options: dict[str, Any],
                    weight_seed: int | None = None) -> None:
    (root / KERNELS_DIR).mkdir()
    (root / WEIGHTS_DIR).mkdir()
    (root / PROGRAM).write_text(program, encoding="utf-8")
    (root / PLAN).write_text(_json(plan.to_json()), encoding="utf-8")
    for rel, source in plan.kernel_files().items():  # generated kernels (target cuda): hashed like every file
        (root / rel).write_text(source, encoding="utf-8")
    synthesized: list[dict[str, dict]] = []
    digests: dict[str, str] = {}  # the weights files', taken while writing them (not read back)
    for rank in plan.ranks:
        kept, table = _split_synthesized(rank) if weight_seed is not None else (rank.weights, {})
        synthesized.append(table)
        digests[weights_file(rank.rank)] = _save_weights(root / weights_file(rank.rank), kept)
    files = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        files[rel] = {"sha256": digests.get(rel) or sha256_file(path), "bytes": path.stat().st_size}
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
        **({"weights": {"synthesized": True, "seed": weight_seed, "generator": synth.GENERATOR,
                        "ranks": synthesized}} if weight_seed is not None else {}),
        "environment": environment_fingerprint(),
        "files": files,
    }
    (root / MANIFEST).write_text(_json(manifest), encoding="utf-8")


# ---------------------------------------------------------------- --dump-ir: the codegen stages


def dump_codegen(plan: Plan, dump_dir: str | os.PathLike, first_index: int) -> list[Path]:
    """Write the stages after the passes into `dump_dir`, numbered on from the IR dumps
    (`NN-<pass>.mlir`): `NN-kernels/` holds every generated kernel source under its artifact name
    (kernels/k3.py -> NN-kernels/k3.py; only when the target generates kernels), then
    `MM-plan.json` (byte for byte the artifact's plan.json) and `MM-plan.txt` (one line per step).
    Returns the paths written. A directory that cannot be written is one SdcError."""
    root = Path(dump_dir)
    written: list[Path] = []
    index = first_index
    try:
        root.mkdir(parents=True, exist_ok=True)
        kernels = plan.kernel_files()
        if kernels:
            folder = root / f"{index:02d}-{KERNELS_DIR}"
            folder.mkdir(exist_ok=True)
            for rel, source in sorted(kernels.items()):
                path = folder / rel.split("/", 1)[1]
                path.write_text(source, encoding="utf-8")
                written.append(path)
            index += 1
        for name, text in (("plan.json", _json(plan.to_json())), ("plan.txt", plan_summary(plan))):
            path = root / f"{index:02d}-{name}"
            path.write_text(text, encoding="utf-8")
            written.append(path)
    except OSError as e:
        raise SdcError(f"cannot write the IR dump to '{root}': {e.strerror or e}") from None
    return written


def plan_summary(plan: Plan) -> str:
    """The launch plan for reading: per rank, one line per step (id, backend, template, grid,
    launch configuration, operands -> results); allocations, frees and events in a word each."""
    lines = [f"# plan for target {plan.target}, world size {plan.world_size}"]
    for rank in plan.ranks:
        lines.append(f"rank {rank.rank}: inputs {', '.join(rank.inputs)} -> outputs {', '.join(rank.outputs)}")
        for i, step in enumerate(rank.steps):
            lines.append(f"  {i:3d} {_step_line(step)}")
    return "\n".join(lines) + "\n"


def _step_line(step: dict) -> str:
    kind = step.get("kind")
    io = f"({', '.join(step.get('inputs', []))}) -> ({', '.join(step.get('outputs', []))})"
    if kind == "launch":
        kernel = step.get("kernel", {})
        backend = kernel.get("backend", "?")
        ops = "[" + " ".join(str(op.get("op")) for op in kernel.get("ops", [])) + "]"
        if backend == "reference":
            return f"launch {step.get('id')} reference {ops} {io}"
        config = dict(kernel.get("constexprs", {}))
        if "num_warps" in kernel:
            config["num_warps"] = kernel["num_warps"]
        config_text = " ".join(f"{k}={v}" for k, v in config.items())
        return (f"launch {step.get('id')} {backend} {kernel.get('template', '-')} {kernel.get('source', '')} "
                f"grid=[{', '.join(map(str, kernel.get('grid', [])))}] {config_text} {ops} {io}")
    if kind == "collective":
        return f"collective {step.get('op', '')} {io}"
    if kind == "alloc":
        return f"alloc {step.get('value')}" + (f" reuses {step['reuses']}" if step.get("reuses") else "")
    if kind == "view":
        return f"view {step.get('value')} = {step.get('of')}.narrow({step.get('axis')}, {step.get('offset')})"
    if kind == "free":
        return f"free {', '.join(step.get('values', []))}"
    return f"{kind} " + " ".join(f"{k}={v}" for k, v in step.items() if k != "kind")


def _split_synthesized(rank: RankPlan) -> tuple[dict[str, torch.Tensor], dict[str, dict]]:
    """A rank's weights as (kept in the file, synthesized at load: name -> shape, dtype, init rule).
    Only weights a plan value binds with that very shape and dtype are left out, so the loader can
    check each one against the plan (sdc.runtime.artifact)."""
    bound = {v["weight"]: v for v in rank.values.values() if "weight" in v}
    kept: dict[str, torch.Tensor] = {}
    table: dict[str, dict] = {}
    for name, tensor in rank.weights.items():
        value = bound.get(name)
        if (value is not None and value["shape"] == list(tensor.shape) and value["dtype"] == from_torch(tensor.dtype)
                and synth.should_synthesize(value["dtype"], value["shape"])):
            table[name] = {"dtype": value["dtype"], "shape": value["shape"], **synth.init_rule(name, value["shape"])}
        else:
            kept[name] = tensor
    return kept, table


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


def _save_weights(path: Path, weights: dict[str, torch.Tensor]) -> str:
    """Write `weights` as a safetensors file and return its SHA-256, hashed as it is written.

    The layout is safetensors' own (8-byte header length, JSON header padded to 8 bytes, then the
    data: first the weights whose size is a multiple of 16 bytes, each of them 16-byte aligned, then
    the rest in order of decreasing element size, each aligned to its element, so the loader can view
    one buffer), written straight from each tensor's memory: no serialized copy of the whole file,
    and no second read of it to hash it."""
    tensors = {name: t.detach().contiguous() for name, t in weights.items()}
    # Weights whose byte size is a multiple of 16 first, so each of them starts 16-byte aligned (what
    # the loader's views need to be read at full speed: sdc.runtime.artifact.WEIGHT_ALIGN); then the
    # others by decreasing element size, each still aligned to its own element.
    order = sorted(tensors, key=lambda name: (tensors[name].numel() * tensors[name].element_size() % 16 != 0,
                                              -tensors[name].element_size(), name))
    header: dict[str, Any] = {"__metadata__": {"format": "pt", "writer": f"sdc {__version__}"}}
    offset = 0
    for name in order:
        t = tensors[name]
        nbytes = t.numel() * t.element_size()
        header[name] = {"dtype": _SAFETENSORS_DTYPE[from_torch(t.dtype)], "shape": list(t.shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(len(text) + 8) % 8)
    digest = hashlib.sha256()
    try:
        with open(path, "wb") as f:
            for chunk in (struct.pack("<Q", len(text)), text):
                f.write(chunk)
                digest.update(chunk)
            for name in order:
                data = _raw_bytes(tensors[name])
                f.write(data)
                digest.update(data)
    except OSError as e:
        raise SdcError(f"cannot write the weights to '{path}': {e.strerror}") from None
    os.chmod(path, 0o666 & ~_umask())
    return digest.hexdigest()


def _raw_bytes(t: torch.Tensor) -> memoryview:
    """A contiguous tensor's bytes, without a copy. A tensor torch calls contiguous may still have a
    stride other than 1 in a dim of size 1 (a one-element splat expanded from a scalar), which no
    byte view accepts: that one element is copied."""
    flat = t.reshape(-1)
    if flat.numel() == 0:
        return memoryview(b"")
    if flat.stride(0) != 1:
        flat = flat.clone(memory_format=torch.contiguous_format)
    return memoryview(flat.view(torch.uint8).numpy())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask

