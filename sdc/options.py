"""`CompileOptions`: everything that says how a model is compiled, in one frozen value.

Built once where a compile starts (`sdc compile` or `sdc.compile(...)`), normalized and checked on
construction (a bad mesh or input shape fails there, before any work), then passed down as it is:
the driver picks the pipeline from it, the artifact writer records it in the manifest, and the
compile cache keys on `cache_key()`. Equal options are equal values with equal hashes, however
they were spelled (`mesh="dp=2,tp=2"` or `{"dp": 2, "tp": 2}`).

What is compiled (the model, a parameter file), where the artifact goes (`output`) and how progress
is shown are arguments of the compile calls, not options: the first two are inputs, the others do
not change the artifact.

A few fields choose between kernels for comparisons and measurements (`c_kernels`, `cuda_cpp`,
`conv_kernel`). Each may also be set through an environment variable (`SDC_C_KERNELS`,
`SDC_CUDA_CPP`, `SDC_CONV_KERNEL`), which gives its default: the variable is read once, when the
options are built, and the field then holds the value, so the cache key and the manifest see it.

MLIR-free: the runtime and the command line can read and build options without the bindings.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import textwrap
from dataclasses import dataclass, field
from typing import Any, Mapping

from sdc.diagnostics import SdcError
from sdc.limits import MAX_DIM, MAX_WORLD_SIZE
from sdc.target import DEFAULT_TARGET, TARGETS, Target, get_target

PRECISIONS = ("f32", "tf32", "bf16", "f16")
PRECISION_ALIASES = {"fp32": "f32", "fp16": "f16", "float32": "f32", "float16": "f16", "bfloat16": "bf16"}
"""Other spellings users give (`--precision fp16`), kept as the canonical name."""
EXPLAIN = ("layout", "sharding")
WEIGHT_MODES = ("included", "none")

# The canonical forms the fields hold after construction (each is hashable).
MeshAxes = tuple[tuple[str, int], ...]
ShapeValue = tuple  # an input's dims (ints and symbol names) | int (a symbol's value) | str (a range "1..64")
InputShapes = tuple[tuple[str, Any], ...]
Shardings = tuple[tuple[str, Any], ...]  # (name, sdc.dialect.mesh.Sharding)

# Compile-time kernel choices and the environment variables that give their defaults.
CUDA_CPP_ENV = "SDC_CUDA_CPP"
CUDA_CPP_FAMILIES = ("elementwise",)
"""The kernel families (KernelProgram templates) the CUDA C++ renderer can take (sdc/codegen/cuda)."""
CONV_KERNEL_ENV = "SDC_CONV_KERNEL"
CONV_KERNELS = ("cudnn", "triton")
# cuDNN: on the H200 (2026-12-02) ResNet-50 b64 fp16 ran faster with cuDNN convolutions than with the
# Triton template for every convolution (docs/codegen.md).
DEFAULT_CONV_KERNEL = "cudnn"
_OFF = ("", "0", "off", "none", "no", "false")

OPTIONS_SCHEMA = 2  # bump when a field's meaning changes, so old cache keys stop matching


def _doc(text: str, *, artifact: bool = True) -> dict[str, Any]:
    """Field metadata: its documentation, and whether it changes the artifact (and so the cache key)."""
    return {"doc": text, "artifact": artifact}


@dataclass(frozen=True)
class CompileOptions:
    """How to compile a model. Every field has a default; see `describe_options()` for the list."""

    target: str = field(default=DEFAULT_TARGET, metadata=_doc(
        f"what to compile for: {', '.join(TARGETS)} (the registry sdc.target.TARGETS says what each "
        "can do). Unknown names are refused on construction, targets that sdc cannot compile for yet "
        "when the compile starts."))
    mesh: MeshAxes | None = field(default=None, metadata=_doc(
        "the device mesh of a partitioned program, one process per device: \"dp=2,tp=2\" or "
        "{\"dp\": 2, \"tp\": 2}, kept as ((axis, size), ...) in axis order. None: one device, or the "
        "mesh the module carries (docs/distributed.md)."))
    input_shapes: InputShapes = field(default=(), metadata=_doc(
        "input name -> dims (ints and symbol names, overriding the model's); symbol name -> its value "
        "(8) or range (\"1..64\", \"8..\", \"..64\"). Given as a dict, kept sorted by name "
        "(docs/shapes.md)."))
    shardings: Shardings = field(default=(), metadata=_doc(
        "input, output or parameter name -> its sharding, one entry per dim (None, \"dp\", "
        "(\"dp\", \"tp\")) or an sdc.dialect.mesh.Sharding: user annotations like sdc.shard. Needs a "
        "mesh. Kept sorted by name."))
    precision: str | None = field(default=None, metadata=_doc(
        f"the dtype floating-point math computes in ({', '.join(PRECISIONS)}); None: the target's "
        "default_precision (the field then holds that name). fp32/fp16 are accepted for f32/f16. bf16 "
        "and f16 run the sdc-mixed-precision pass (softmax, norms and reductions stay f32); tf32 keeps "
        "f32 dtypes and lets matmuls use TF32 tensor cores (docs/sdc-opt.md)."))
    memory_budget: int | None = field(default=None, metadata=_doc(
        "bytes: the most a training step's planned intermediates may take at one time; sdc-recompute "
        "recomputes forward activations in the backward to fit it, and a budget below what it reaches "
        "is an error saying the minimum (docs/training.md). None: keep every activation."))
    weights: str = field(default="included", metadata=_doc(
        f"where the weights' values come from: {' or '.join(repr(w) for w in WEIGHT_MODES)}. 'none' writes "
        "the artifact without the large floating-point weights: the manifest lists each with its shape, "
        "dtype and init rule, and the loader synthesizes them from weight_seed on the host of the run "
        "(docs/artifact.md, 'Synthesized weights'); small and integer tensors stay in the file."))
    weight_seed: int = field(default=0, metadata=_doc(
        "the seed synthesized weights are drawn from (weights='none'); same seed, same weights."))
    c_kernels: bool | None = field(default=None, metadata=_doc(
        "targets with the C backend (cpu): generate C kernels for the kernel groups a C template fits "
        "(True) or plan every group for torch (False, for comparisons). None: $SDC_C_KERNELS (0/off: "
        "False, 1/on: True), True when unset; the field then holds the value (docs/codegen.md)."))
    cuda_cpp: tuple[str, ...] | None = field(default=None, metadata=_doc(
        f"target cuda: the kernel families rendered as CUDA C++ (NVRTC) instead of Triton "
        f"({', '.join(CUDA_CPP_FAMILIES)}), as a tuple or \"a,b\". None: $SDC_CUDA_CPP (comma-separated), "
        "none when unset; the field then holds the families, sorted (docs/codegen.md)."))
    conv_kernel: str | None = field(default=None, metadata=_doc(
        f"target cuda: which path convolution groups take, {' or '.join(CONV_KERNELS)} (the generated "
        f"implicit-GEMM template). None: $SDC_CONV_KERNEL, {DEFAULT_CONV_KERNEL} when unset; the field "
        "then holds the choice (docs/codegen.md)."))
    dump_ir: str | None = field(default=None, metadata=_doc(
        "a directory for the IR after import and after each pass (00-input.mlir, NN-<pass>.mlir); for "
        "targets with generated kernels also NN-kernels/ (their sources) and MM-plan.json / MM-plan.txt.",
        artifact=False))
    explain: str | None = field(default=None, metadata=_doc(
        f"a report printed after compiling ({', '.join(EXPLAIN)}): 'layout' lists the layout casts "
        "left and why, the kernel groups and the memory traffic; 'sharding' the shardings chosen and "
        "every collective inserted. Used by `sdc compile --explain`.", artifact=False))

    def __post_init__(self) -> None:
        target = get_target(self.target)
        set_ = object.__setattr__  # frozen: normalization happens once, here
        set_(self, "mesh", _normalize_mesh(self.mesh))
        set_(self, "input_shapes", _normalize_input_shapes(self.input_shapes))
        set_(self, "shardings", _normalize_shardings(self.shardings))
        precision = target.default_precision if self.precision is None else self.precision
        precision = PRECISION_ALIASES.get(precision, precision) if isinstance(precision, str) else precision
        if precision not in PRECISIONS:
            raise SdcError(f"unknown precision {precision!r} (precisions: {', '.join(PRECISIONS)})")
        set_(self, "precision", precision)
        budget = self.memory_budget
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0):
            raise SdcError(f"memory_budget must be a positive number of bytes, found {budget!r}")
        if self.weights not in WEIGHT_MODES:
            raise SdcError(f"weights must be {' or '.join(WEIGHT_MODES)}, found {self.weights!r}")
        seed = self.weight_seed
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
            raise SdcError(f"weight_seed must be an integer from 0 to 2**63-1, found {seed!r}")
        set_(self, "c_kernels", _c_kernels(self.c_kernels))
        set_(self, "cuda_cpp", _cuda_cpp(self.cuda_cpp))
        set_(self, "conv_kernel", _conv_kernel(self.conv_kernel))
        if self.dump_ir is not None:
            set_(self, "dump_ir", os.fspath(self.dump_ir))
        if self.explain is not None and self.explain not in EXPLAIN:
            raise SdcError(f"explain must be one of {', '.join(EXPLAIN)}, found {self.explain!r}")

    # ------------------------------------------------------------ views for the code that uses them

    @property
    def target_info(self) -> Target:
        """The registry's `Target` called `target` (checked on construction): what the driver and
        the planner ask about the target, so no one resolves the name again."""
        return TARGETS[self.target]

    def mesh_dict(self) -> dict[str, int] | None:
        return dict(self.mesh) if self.mesh is not None else None

    def mesh_text(self) -> str | None:
        """`dp=2,tp=2`, or None without a mesh."""
        return ",".join(f"{a}={n}" for a, n in self.mesh) if self.mesh is not None else None

    def input_shapes_dict(self) -> dict[str, Any] | None:
        """Input name -> dims as a list, symbol -> int or range string; None when there are none."""
        if not self.input_shapes:
            return None
        return {name: list(value) if isinstance(value, tuple) else value for name, value in self.input_shapes}

    def shardings_dict(self) -> dict[str, Any] | None:
        """Name -> `Sharding`; None when there are none."""
        return dict(self.shardings) if self.shardings else None

    # ------------------------------------------------------------ cache and manifest

    def to_json(self) -> dict[str, Any]:
        """Plain JSON, every field; `from_json` reads it back to an equal value."""
        from sdc.dialect.mesh import to_json as sharding_json

        return {
            "target": self.target,
            "mesh": self.mesh_text(),
            "input_shapes": self.input_shapes_dict(),
            "shardings": {name: sharding_json(s) for name, s in self.shardings} or None,
            "precision": self.precision,
            "memory_budget": self.memory_budget,
            "weights": self.weights,
            "weight_seed": self.weight_seed,
            "c_kernels": self.c_kernels,
            "cuda_cpp": list(self.cuda_cpp),
            "conv_kernel": self.conv_kernel,
            "dump_ir": self.dump_ir,
            "explain": self.explain,
        }

    @classmethod
    def from_json(cls, data: Any) -> CompileOptions:
        """Options from `to_json`'s form (a manifest's `compile_options`). Keys that are not fields are
        ignored: the manifest records the pipeline and the model's source next to them, and an
        artifact written by a newer sdc may carry options this one does not know."""
        from sdc.dialect.mesh import MeshError, from_json as sharding_from_json

        if not isinstance(data, Mapping):
            raise SdcError(f"compile options must be a JSON object, found {type(data).__name__}")
        values = {f.name: data[f.name] for f in dataclasses.fields(cls) if data.get(f.name) is not None}
        shardings = values.get("shardings")
        if shardings is not None:
            if not isinstance(shardings, Mapping):
                raise SdcError(f"compile options: 'shardings' must be an object, found {shardings!r}")
            try:
                values["shardings"] = {name: sharding_from_json(s) for name, s in shardings.items()}
            except MeshError as e:
                raise SdcError(f"compile options: {e}") from None
        return cls(**values)

    def cache_key(self) -> str:
        """A SHA-256 hex digest of the fields that change the artifact (not dump_ir, explain), stable
        across processes and sdc runs: the compile cache keys on it (with the model and sdc version)."""
        as_json = self.to_json()
        keyed = {f.name: as_json[f.name] for f in dataclasses.fields(self) if f.metadata.get("artifact", True)}
        text = json.dumps({"schema": OPTIONS_SCHEMA, **keyed}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    # ------------------------------------------------------------ building

    @classmethod
    def of(cls, options: CompileOptions | None = None, **fields: Any) -> CompileOptions:
        """`options` (default: all defaults) with the given fields replaced: what `sdc.compile(...,
        options=..., target=...)` builds. An unknown field name is a TypeError, like any bad keyword."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(fields) - names)
        if unknown:
            raise TypeError(f"unknown compile option '{unknown[0]}' (options: {', '.join(sorted(names))})")
        if options is not None and not isinstance(options, CompileOptions):
            raise TypeError(f"options must be a CompileOptions, found {type(options).__name__}")
        base = options if options is not None else cls()
        return dataclasses.replace(base, **fields) if fields else base


def describe_options(indent: str = "    ", width: int = 100) -> str:
    """Each field of CompileOptions with its default and documentation, for help texts
    (`help(sdc.compile)` shows this)."""
    lines = []
    for f in dataclasses.fields(CompileOptions):
        default = "()" if f.default == () else repr(f.default)
        lines += textwrap.wrap(f"{f.name} (default {default}): {f.metadata['doc']}", width,
                               initial_indent=indent, subsequent_indent=indent + "    ")
    return "\n".join(lines)


# ---------------------------------------------------------------- normalization


def _c_kernels(value: Any) -> bool:
    if value is None:
        from sdc.runtime.switches import c_kernels_enabled  # the one reader of on/off settings

        return c_kernels_enabled()
    if not isinstance(value, bool):
        raise SdcError(f"c_kernels must be True or False, found {value!r}")
    return value


def _cuda_cpp(value: Any) -> tuple[str, ...]:
    """The sorted families; from $SDC_CUDA_CPP when None (its message names the variable)."""
    where = "cuda_cpp"
    if value is None:
        raw = os.environ.get(CUDA_CPP_ENV, "")
        where, value = f"{CUDA_CPP_ENV}={raw!r}", "" if raw.strip().lower() in _OFF else raw
    if isinstance(value, str):
        value = [f.strip().lower() for f in value.split(",") if f.strip()]
    if not isinstance(value, (list, tuple, set, frozenset)) or not all(isinstance(f, str) for f in value):
        raise SdcError(f"cuda_cpp must list kernel families ({', '.join(CUDA_CPP_FAMILIES)}), found {value!r}")
    unknown = sorted(set(value) - set(CUDA_CPP_FAMILIES))
    if unknown:
        raise SdcError(f"{where}: unknown kernel family {', '.join(map(repr, unknown))} "
                       f"(families: {', '.join(CUDA_CPP_FAMILIES)})")
    return tuple(sorted(set(value)))


def _conv_kernel(value: Any) -> str:
    """The choice; from $SDC_CONV_KERNEL when None (its message names the variable)."""
    where = "conv_kernel"
    if value is None:
        raw = os.environ.get(CONV_KERNEL_ENV, "")
        where, value = f"{CONV_KERNEL_ENV}={raw!r}", raw.strip().lower() or DEFAULT_CONV_KERNEL
    if value not in CONV_KERNELS:
        shown = "" if where != "conv_kernel" else f", found {value!r}"
        raise SdcError(f"{where}: expected one of {', '.join(CONV_KERNELS)}{shown}")
    return value


def _normalize_mesh(mesh: Any) -> MeshAxes | None:
    """A canonical ((axis, size), ...) from "dp=2,tp=2", a dict, a Mesh or that tuple; same messages as before."""
    from sdc.dialect.mesh import Mesh, MeshError

    if mesh is None:
        return None
    try:
        if isinstance(mesh, str):
            parsed = Mesh.parse(mesh)
        else:
            axes = mesh.as_dict() if isinstance(mesh, Mesh) else dict(mesh)
            if not axes:
                return None
            # the text form goes through the one parser, so names and sizes get its checks
            parsed = Mesh.parse(",".join(f"{a}={_size(n)}" for a, n in axes.items()))
    except (MeshError, TypeError, ValueError) as e:
        raise SdcError(f"bad mesh {mesh!r}: {e}") from None
    if math.prod(parsed.sizes) > MAX_WORLD_SIZE:
        raise SdcError(f"bad mesh {mesh!r}: {math.prod(parsed.sizes)} devices, more than the limit of {MAX_WORLD_SIZE}")
    return tuple(zip(parsed.axes, parsed.sizes))


def _size(n: Any) -> str:
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValueError(f"mesh sizes are integers, found {n!r}")
    return str(n)


def _normalize_input_shapes(shapes: Any) -> InputShapes:
    """Sorted (name, value) pairs: dims as a tuple, a symbol's value as an int, a range as "LO..HI"."""
    if not shapes:
        return ()
    items = shapes.items() if isinstance(shapes, Mapping) else shapes
    out: dict[str, Any] = {}
    for item in items:
        try:
            name, value = item
        except (TypeError, ValueError):
            raise SdcError(f"input_shapes must map names to dims, found {item!r}") from None
        if not isinstance(name, str):
            raise SdcError(f"input_shapes must map names to dims, found the key {name!r}")
        out[name] = _canonical_shape(name, value)
    return tuple(sorted(out.items()))


def _canonical_shape(name: str, value: Any) -> Any:
    # The shape pass's own parser checks the binding, so the driver, the CLI and sdc-opt's
    # `input-shape` option accept and refuse the same texts with the same messages.
    from sdc.dialect.bindings import parse_binding

    if isinstance(value, (str, int)) and not isinstance(value, bool):
        text = f"{name}={value}"
    elif isinstance(value, (list, tuple)):
        text = f"{name}={','.join(str(d) for d in value)}"
    else:
        raise SdcError(f"--input-shape {name}: expected dims (a list), a size or a range, found {value!r}")
    try:
        binding = parse_binding(text)
    except ValueError as e:
        raise SdcError(f"--input-shape {e}") from None
    sizes = [d for d in (binding.dims or ()) if isinstance(d, int)] + [
        v for v in (binding.value, binding.lo, binding.hi) if isinstance(v, int)]
    if any(d > MAX_DIM for d in sizes):
        raise SdcError(f"--input-shape {name}: size {max(sizes)} is larger than the limit of {MAX_DIM}")
    if isinstance(value, (list, tuple)):  # `[8]` stays the dims of a rank-1 input, not a symbol's value
        return tuple(binding.dims) if binding.dims is not None else (binding.value,)
    if binding.dims is not None:
        return tuple(binding.dims)
    if binding.value is not None:
        return binding.value
    return f"{'' if binding.lo is None else binding.lo}..{'' if binding.hi is None else binding.hi}"


def _normalize_shardings(shardings: Any) -> Shardings:
    from sdc.dialect.mesh import Sharding

    if not shardings:
        return ()
    items = shardings.items() if isinstance(shardings, Mapping) else shardings
    out: dict[str, Sharding] = {}
    for name, spec in items:
        if not isinstance(name, str):
            raise SdcError(f"shardings must map names to per-dim axes, found the key {name!r}")
        if isinstance(spec, Sharding):
            out[name] = spec
            continue
        if isinstance(spec, str) or not isinstance(spec, (list, tuple)):
            raise SdcError(f"sharding of '{name}' must list one entry per dim (None, \"dp\", (\"dp\", \"tp\")), "
                           f"found {spec!r}")
        out[name] = Sharding.of(list(spec))
    return tuple(sorted(out.items()))
