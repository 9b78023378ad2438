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

from sdc.codegen.plan import Plan, RankPlan
from sdc.dtypes import from_torch
from sdc.runtime import synth
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
    for rank in plan.ranks:
        kept, table = _split_synthesized(rank) if weight_seed is not None else (rank.weights, {})
        synthesized.append(table)
        _save_weights(root / weights_file(rank.rank), kept)
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

