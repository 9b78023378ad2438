"""Reading an artifact directory, trusting nothing in it.

`read_artifact(path)` checks, before anything else is read: the manifest's format and version,
that every path it names stays inside the artifact (no absolute paths, no `..`, no symlink
leading out), and the SHA-256 of every file it lists. Only then are `plan.json` and the
weights (safetensors: no pickle, no code) read. Every problem is one SdcError that names the
artifact and the file. No MLIR, no frontends: see docs/artifact.md.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from sdc import dtypes
from sdc.diagnostics import SdcError
from sdc.limits import MAX_DIM, MAX_GUARD_CHARS, MAX_GUARDS, MAX_JSON_BYTES, MAX_RANK, MAX_WORLD_SIZE
from sdc.runtime import jsonio
from sdc.runtime.format import FORMAT, FORMAT_VERSION, MANIFEST, PLAN, PROGRAM, sha256_file
from sdc.runtime.plan_schema import PlanError, RankProgram, parse_rank_plan
from sdc.runtime.state import check_state
from sdc.runtime.synth import check_section
from sdc.target import TARGETS, unknown_target

# safetensors dtype names -> sdc element type names
SAFETENSORS_DTYPES = {
    "F16": "f16", "BF16": "bf16", "F32": "f32", "F64": "f64", "BOOL": "i1",
    "I8": "i8", "I16": "i16", "I32": "i32", "I64": "i64",
    "U8": "ui8", "U16": "ui16", "U32": "ui32", "U64": "ui64",
}


@dataclass(frozen=True)
class WeightInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    offset: int = 0  # where its bytes begin in the file's data section (after the header)


@dataclass
class Artifact:
    """A checked artifact: its manifest and plan as JSON values; weights are read on demand."""

    root: Path
    manifest: dict
    plan: dict
    programs: dict[int, RankProgram] = field(default_factory=dict)  # each rank's plan, checked and typed

    def error(self, file: str, message: str) -> SdcError:
        return artifact_error(self.root, file, message)

    @property
    def world_size(self) -> int:
        return self.manifest["world_size"]

    @property
    def files(self) -> dict[str, dict]:
        return self.manifest["files"]

    def rank_plan(self, rank: int) -> dict:
        for entry in self.plan["ranks"]:
            if entry["rank"] == rank:
                return entry
        raise self.error(PLAN, f"has no plan for rank {rank} (world size {self.world_size})")

    def program(self, rank: int) -> RankProgram:
        """The rank's plan as typed steps (checked when the artifact was read)."""
        if rank not in self.programs:
            raise self.error(PLAN, f"has no plan for rank {rank} (world size {self.world_size})")
        return self.programs[rank]

    def weights_path(self, rank: int) -> tuple[str, Path]:
        rel = self.rank_plan(rank)["weights"]
        return rel, self.root / rel

    def weights_info(self, rank: int) -> dict[str, WeightInfo]:
        """Names, dtypes and shapes of a rank's weights, from the safetensors header alone."""
        rel, path = self.weights_path(rank)
        return read_safetensors_header(path, lambda msg: self.error(rel, msg))

    @property
    def weight_seed(self) -> int | None:
        """The seed of the synthesized weights (`sdc compile --weights none`), else None."""
        section = self.manifest.get("weights")
        return section["seed"] if section is not None else None

    def synthesized(self, rank: int) -> dict[str, dict]:
        """The rank's weights that are made at load time: name -> {dtype, shape, init, ...}."""
        section = self.manifest.get("weights")
        return section["ranks"][rank] if section is not None else {}

    def synthesized_info(self, rank: int) -> dict[str, WeightInfo]:
        return {name: WeightInfo(name, spec["dtype"], tuple(spec["shape"]),
                                 _product(spec["shape"]) * dtypes.itemsize(spec["dtype"]))
                for name, spec in self.synthesized(rank).items()}

    def load_weights(self, rank: int, device: Any = None) -> dict[str, Any]:
        """The rank's weights: those of its file, plus the synthesized ones (drawn from the
        manifest's seed, sdc.runtime.synth), each checked against the allocation limit.

        The file's data section is read in one piece and every weight is a view of it. With a CUDA
        `device` that piece is read into pinned memory and goes up in one asynchronous copy, so
        the caller's next work (preparing the plan, compiling kernels) overlaps the transfer; work
        on another stream must wait for the current one first. Otherwise the weights are on the CPU."""
        import torch

        rel, path = self.weights_path(rank)
        made = self.synthesized(rank)
        cuda = device is not None and torch.device(device).type == "cuda"
        in_file, data = read_weight_data(path, lambda msg: self.error(rel, msg), pinned=cuda)
        both = sorted(set(in_file) & set(made))
        if both:
            raise self.error(MANIFEST, f"weight '{both[0]}' is both in {rel} and listed as synthesized")
        if cuda:
            data = data.to(device, non_blocking=True)
        weights = {name: _view(data, info) for name, info in in_file.items()}
        if made:
            from sdc.runtime.synth import synthesize

            for name, spec in made.items():
                value = synthesize(name, spec, self.manifest["weights"]["seed"])
                weights[name] = value.to(device) if cuda else value
        return weights


def read_weight_data(path: Path, error, pinned: bool = False) -> tuple[dict[str, WeightInfo], Any]:
    """A safetensors file's checked header and its data section as one uint8 CPU tensor, read with
    one `readinto` (into pinned memory when `pinned`): no per-weight copies, no mmap."""
    import torch

    infos, data_start = _read_header(path, error)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size - data_start
            data = torch.empty(size, dtype=torch.uint8, pin_memory=pinned)
            f.seek(data_start)
            if size and f.readinto(memoryview(data.numpy())) != size:
                raise error("cannot read the weights: the file changed while it was read")
    except OSError as e:
        raise error(f"cannot read the weights: {e.strerror}") from None
    return infos, data


# The address alignment, in bytes, a weight needs to be read at full speed: Triton specializes a kernel
# on whether each pointer is 16-byte aligned (an unaligned one gets scalar loads, several times slower
# in a matmul) and cuBLAS picks its vectorized paths by the same test. A weight whose offset in the
# file is not a multiple of it is copied into memory of its own (torch allocations are aligned).
WEIGHT_ALIGN = 16


def _view(data: Any, info: WeightInfo) -> Any:
    """The weight `info` as a tensor on `data`'s memory; a copy where its offset is not a multiple of
    `WEIGHT_ALIGN` (sdc's writer puts those last: weights whose size is not a multiple of it)."""
    from sdc.dtypes import to_torch

    raw = data[info.offset:info.offset + info.nbytes]
    dtype = to_torch(info.dtype)
    if info.offset % WEIGHT_ALIGN:
        raw = raw.clone()
    return raw.view(dtype).view(info.shape)


def artifact_error(root: Path | str, file: str, message: str) -> SdcError:
    return SdcError(f"bad artifact '{root}': {file}: {message}")


# ---------------------------------------------------------------- reading


def read_artifact(path: str | os.PathLike) -> Artifact:
    root = Path(path)
    if not root.exists():
        raise SdcError(f"no artifact at '{root}': no such directory")
    if not root.is_dir():
        raise SdcError(f"'{root}' is not an sdc artifact: not a directory")
    if not (root / MANIFEST).is_file():
        raise SdcError(f"'{root}' is not an sdc artifact: it has no {MANIFEST}")
    manifest = _read_json(root, MANIFEST)
    _check_manifest(root, manifest)
    for rel, info in manifest["files"].items():
        _check_file(root, rel, info)
    plan = _read_json(root, PLAN)
    artifact = Artifact(root, manifest, plan)
    _check_plan(artifact)
    return artifact


def _read_json(root: Path, rel: str) -> Any:
    """Through the one JSON reader (sdc/runtime/jsonio.py): size and depth limits, no NaN."""
    try:
        return jsonio.read_json(root / rel)
    except jsonio.JsonError as e:
        raise artifact_error(root, rel, str(e)) from None
    except OSError as e:
        raise artifact_error(root, rel, f"cannot be read: {e.strerror}") from None


def safe_path(root: Path, rel: Any, where: str) -> Path:
    """`root / rel`, refusing anything that could leave the artifact directory."""
    if not isinstance(rel, str) or not rel:
        raise artifact_error(root, where, f"a file path must be a non-empty string, found {rel!r}")
    if not rel.isprintable():  # a NUL or other control character names no file (and os.path refuses a NUL)
        raise artifact_error(root, where, f"path {rel!r} holds characters no file name has")
    pure = PurePosixPath(rel)
    if pure.is_absolute() or "\\" in rel or ":" in rel or rel.startswith("~"):
        raise artifact_error(root, where, f"path '{rel}' is not relative to the artifact directory")
    if any(part in ("..", ".") for part in rel.split("/")) or "" in rel.split("/"):
        raise artifact_error(root, where, f"path '{rel}' leaves the artifact directory or is not normalized")
    full = root / rel
    real_root = os.path.realpath(root)
    real = os.path.realpath(full)
    if os.path.commonpath([real_root, real]) != real_root or real == real_root:
        raise artifact_error(root, where, f"path '{rel}' leads outside the artifact directory (symlink)")
    return full


def _check_manifest(root: Path, m: Any) -> None:
    def bad(msg: str) -> SdcError:
        return artifact_error(root, MANIFEST, msg)

    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise bad(f"is not an sdc artifact manifest (its 'format' must be \"{FORMAT}\")")
    version = m.get("format_version")
    if isinstance(version, int) and not isinstance(version, bool) and 1 <= version < FORMAT_VERSION:
        raise SdcError(f"artifact '{root}' has format version {version}; this sdc reads version {FORMAT_VERSION}: "
                       "recompile the model (sdc compile ...)")
    if version != FORMAT_VERSION:
        raise bad(f"format version {version!r} is not supported (this sdc reads version {FORMAT_VERSION})")
    for key, kind in (("sdc_version", str), ("target", str), ("world_size", int), ("mesh", dict),
                      ("entry", dict), ("files", dict)):
        if not isinstance(m.get(key), kind) or isinstance(m.get(key), bool):
            raise bad(f"field '{key}' is missing or not a {kind.__name__}")
    for key in ("environment", "compile_options"):  # optional, read by `sdc inspect`
        if m.get(key) is not None and not isinstance(m[key], dict):
            raise bad(f"field '{key}' must be an object, found {_short(m[key])}")
    if m["target"] not in TARGETS:
        raise bad(unknown_target(m["target"]))
    if not 1 <= m["world_size"] <= MAX_WORLD_SIZE:
        raise bad(f"world_size must be between 1 and {MAX_WORLD_SIZE}, found {_short(m['world_size'])}")
    mesh = m["mesh"]
    if not all(isinstance(k, str) and _is_size(v) and 1 <= v <= MAX_WORLD_SIZE for k, v in mesh.items()):
        raise bad(f"mesh must map axis names to positive sizes, found {_short(mesh)}")
    if mesh and _product(mesh.values()) != m["world_size"]:
        raise bad(f"mesh {mesh} has {_product(mesh.values())} devices, world_size is {m['world_size']}")
    entry = m["entry"]
    for key in ("inputs", "outputs", "guards"):
        if not isinstance(entry.get(key), list):
            raise bad(f"field 'entry.{key}' is missing or not a list")
    if len(entry["guards"]) > MAX_GUARDS:
        raise bad(f"entry has {len(entry['guards'])} guards, more than the limit of {MAX_GUARDS}")
    for key in ("inputs", "outputs"):
        seen = set()
        for i, t in enumerate(entry[key]):
            _check_tensor_desc(t, f"entry.{key}[{i}]", bad)
            if t["name"] in seen:
                raise bad(f"entry.{key} has two tensors named '{t['name']}'")
            seen.add(t["name"])
    for i, g in enumerate(entry["guards"]):
        if not (isinstance(g, dict) and isinstance(g.get("condition"), str) and isinstance(g.get("message", ""), str)):
            raise bad(f"entry.guards[{i}] must be {{\"condition\": str, \"message\": str}}, found {_short(g)}")
        if len(g["condition"]) > MAX_GUARD_CHARS:
            raise bad(f"entry.guards[{i}] is {len(g['condition'])} characters long, more than the limit of "
                      f"{MAX_GUARD_CHARS}")
    check_state(entry, bad)  # a training step's state table (sdc.runtime.state)
    if "weights" in m:  # synthesized weights (sdc compile --weights none)
        check_section(m["weights"], m["world_size"], bad)
    for rel, info in m["files"].items():
        safe_path(root, rel, MANIFEST)
        if not (isinstance(info, dict) and isinstance(info.get("sha256"), str) and _is_size(info.get("bytes"))):
            raise bad(f"files['{rel}'] must be {{\"sha256\": str, \"bytes\": int}}, found {_short(info)}")
    for required in (PLAN, PROGRAM):
        if required not in m["files"]:
            raise bad(f"does not list {required}")


def _check_tensor_desc(t: Any, where: str, bad) -> None:
    if not isinstance(t, dict) or not isinstance(t.get("name"), str):
        raise bad(f"{where} must have a string 'name', found {_short(t)}")
    if not isinstance(t.get("dtype"), str) or not dtypes.is_known(t["dtype"]):
        raise bad(f"{where} ('{t['name']}') has unknown dtype {_short(t.get('dtype'))}")
    shape = t.get("shape")
    if not isinstance(shape, list) or len(shape) > MAX_RANK or not all(_is_dim(d) for d in shape):
        raise bad(f"{where} ('{t['name']}') shape must be a list of at most {MAX_RANK} sizes, symbol names or "
                  f"\"?\", found {_short(shape)}")


def _is_size(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _is_dim(d: Any) -> bool:
    return (_is_size(d) and d <= MAX_DIM) or (isinstance(d, str) and d != "" and len(d) <= 256)


def _product(sizes) -> int:
    total = 1
    for s in sizes:
        total *= s
    return total


def _short(x: Any) -> str:
    """A value for an error message, cut short (a hostile file can hold anything)."""
    try:
        text = repr(x)
    except (RecursionError, ValueError):
        text = f"<{type(x).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."


def _check_file(root: Path, rel: str, info: dict) -> None:
    path = safe_path(root, rel, MANIFEST)
    if not path.exists():
        raise artifact_error(root, rel, "is missing (listed in manifest.json)")
    if not path.is_file():
        raise artifact_error(root, rel, "is not a regular file")
    size = path.stat().st_size
    if size != info["bytes"] or sha256_file(path) != info["sha256"].lower():
        raise artifact_error(root, rel, "does not match its SHA-256 in manifest.json: "
                                        "the file changed after the artifact was written")


def _check_plan(a: Artifact) -> None:
    plan = a.plan

    def bad(msg: str) -> SdcError:
        return a.error(PLAN, msg)

    if not isinstance(plan, dict) or not isinstance(plan.get("ranks"), list):
        raise bad("must be an object with a 'ranks' list")
    ranks = sorted(r.get("rank") for r in plan["ranks"] if isinstance(r, dict) and isinstance(r.get("rank"), int))
    if ranks != list(range(a.world_size)) or len(ranks) != len(plan["ranks"]):
        raise bad(f"must have one plan per rank 0..{a.world_size - 1}")
    shardings = plan.get("shardings")
    if shardings is not None and not (isinstance(shardings, dict) and all(
            isinstance(shardings.get(k, []), list) for k in ("inputs", "outputs"))):
        raise bad(f"'shardings' must be {{\"inputs\": [...], \"outputs\": [...]}}, found {_short(shardings)}")
    for key in ("world_size", "mesh"):  # (the target is the loader's to check, against the device)
        if key in plan and plan[key] != a.manifest[key]:
            raise bad(f"'{key}' is {_short(plan[key])}, manifest.json says {_short(a.manifest[key])}")
    entry = a.manifest["entry"]
    n_in, n_out = len(entry["inputs"]), len(entry["outputs"])
    for r in plan["ranks"]:
        try:
            program = a.programs[r["rank"]] = parse_rank_plan(r)
        except PlanError as e:
            raise bad(str(e)) from None
        safe_path(a.root, r["weights"], PLAN)
        if r["weights"] not in a.files:
            raise bad(f"rank {r['rank']}: weights file '{r['weights']}' is not listed in manifest.json")
        if len(r["inputs"]) != n_in or len(r["outputs"]) != n_out:
            raise bad(f"rank {r['rank']}: {len(r['inputs'])} inputs and {len(r['outputs'])} outputs, "
                      f"the manifest's entry has {n_in} and {n_out}")
        _cross_check(program, entry, a.world_size == 1, bad)
        _check_synthesized(program, a.synthesized(r["rank"]), a.error)


def _check_synthesized(program: RankProgram, table: dict[str, dict], error) -> None:
    """Each synthesized weight is one the rank's plan binds, with the same shape and dtype: the
    manifest cannot make the loader allocate anything the plan does not declare."""
    bound = {v.weight: v for v in program.values.values() if v.weight is not None}
    for name, spec in table.items():
        value = bound.get(name)
        where = f"synthesized weight '{name}' (rank {program.rank})"
        if value is None:
            raise error(MANIFEST, f"{where} is bound by no value of plan.json")
        if list(value.shape) != spec["shape"] or value.dtype != spec["dtype"]:
            raise error(MANIFEST, f"{where} is {spec['dtype']}{spec['shape']}, plan.json declares "
                                  f"{value.dtype}{list(value.shape)}")


def _cross_check(program: RankProgram, entry: dict, whole: bool, bad) -> None:
    """The manifest's entry and a rank's plan describe the same tensors: same dtypes and ranks,
    and (on one device, where nothing is sharded) the same static dims."""
    for key, vids in (("inputs", program.inputs), ("outputs", program.outputs)):
        for desc, vid in zip(entry[key], vids):
            value = program.values[vid]
            where = f"rank {program.rank}: {key[:-1]} '{desc['name']}' (value '{vid}')"
            if value.dtype != desc["dtype"]:
                raise bad(f"{where} is {value.dtype}, manifest.json says {desc['dtype']}")
            if len(value.shape) != len(desc["shape"]):
                raise bad(f"{where} has rank {len(value.shape)}, manifest.json says {len(desc['shape'])}")
            if whole and key == "inputs":
                for d, (mine, theirs) in enumerate(zip(value.shape, desc["shape"])):
                    if (isinstance(mine, int) or isinstance(theirs, int)) and mine != theirs:
                        raise bad(f"{where} dim {d} is {mine!r}, manifest.json says {theirs!r}")


# ---------------------------------------------------------------- safetensors header


def read_safetensors_header(path: Path, error) -> dict[str, WeightInfo]:
    """Parse a safetensors header (8-byte little-endian length, then JSON) without loading data."""
    return _read_header(path, error)[0]


def _read_header(path: Path, error) -> tuple[dict[str, WeightInfo], int]:
    """The header's entries, each checked, and where the data section begins."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise error("is not a safetensors file (too short)")
            (n,) = struct.unpack("<Q", head)
            if n > size - 8 or n > MAX_JSON_BYTES:
                raise error("is not a safetensors file (bad header length)")
            header = jsonio.loads(f.read(n))
    except SdcError:
        raise
    except jsonio.JsonError as e:
        raise error(f"is not a safetensors file (its header {e})") from None
    except OSError as e:
        raise error(f"is not a safetensors file ({e.strerror})") from None
    if not isinstance(header, dict):
        raise error("is not a safetensors file (header is not an object)")
    data_size = size - 8 - n
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        out[name] = _weight_entry(name, entry, data_size, error)
    return out, 8 + n


def _weight_entry(name: str, entry: Any, data_size: int, error) -> WeightInfo:
    """One header entry, every field type-checked; its byte range must lie in the file and match
    its dtype and shape."""
    def malformed(why: str) -> SdcError:
        return error(f"weight '{name}' has a malformed header entry ({why}): {_short(entry)}")

    if not isinstance(entry, dict):
        raise malformed("not an object")
    dtype = SAFETENSORS_DTYPES.get(entry.get("dtype")) if isinstance(entry.get("dtype"), str) else None
    if dtype is None:
        raise malformed("unsupported dtype")
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if not isinstance(shape, list) or len(shape) > MAX_RANK or not all(_is_size(d) and d <= MAX_DIM for d in shape):
        raise malformed("shape must be a list of sizes")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_size(o) for o in offsets)):
        raise malformed("data_offsets must be two sizes")
    begin, end = offsets
    if not begin <= end <= data_size:
        raise malformed(f"data_offsets outside the file's {data_size} data bytes")
    if _product(shape) * dtypes.itemsize(dtype) != end - begin:
        raise malformed("data_offsets do not match the dtype and shape")
    return WeightInfo(name, dtype, tuple(shape), end - begin, begin)
