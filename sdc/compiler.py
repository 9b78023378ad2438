"""The compile driver: model -> sdc IR -> passes -> plan -> artifact -> loaded executable.

    exe = sdc.compile("model.onnx", input_shapes={"x": ["B", 3, 224, 224]}, output="model.sdc")
    (y,) = exe(x)

`compile_module` is the part after the frontend (IR plus parameter values in, executable
out); the ONNX path and the tests both go through it.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from sdc.diagnostics import Diagnostic, DiagnosticSink, SdcError, from_mlir_error
from sdc.runtime.format import TARGETS

PIPELINE: tuple[str, ...] = ("sdc-verify", "sdc-canonicalize", "cse", "sdc-shape-constraints", "sdc-verify")
SHAPES = "sdc-shape-constraints"

InputShapes = Mapping[str, Any]  # input -> dims (a list of ints and symbol names); symbol -> int or "LO..HI"


SHARDING_PASSES: tuple[str, ...] = ("sdc-sharding-propagation", "sdc-spmd-partition")


def pipeline_for(target: str, sharded: bool = False) -> tuple[str, ...]:
    """The compile pipeline for `target`: PIPELINE, then (for a module with a device mesh) sharding
    and partitioning, then layouts and fusion for that target."""
    return (*PIPELINE[:-1], *(SHARDING_PASSES if sharded else ()), f"sdc-layout-constraints{{target={target}}}",
            f"sdc-fuse{{target={target}}}", PIPELINE[-1])

Progress = Callable[[str], None]


def check_target(target: str) -> None:
    if target == "cpu":
        return
    if target == "cuda":
        raise SdcError("target 'cuda' is not supported yet: only 'cpu' is (the CUDA backend arrives with "
                       "Triton codegen)")
    raise SdcError(f"unknown target '{target}' (targets: {', '.join(TARGETS)})")


# ---------------------------------------------------------------- passes


def run_pipeline(module, pipeline: Sequence[str] = PIPELINE, dump_ir: str | os.PathLike | None = None,
                 progress: Progress | None = None) -> None:
    """Run the passes on `module` in place, one at a time (so the IR can be dumped after each).

    Diagnostics become one SdcError carrying all of them. With `dump_ir`, the IR before the
    first pass is `00-input.mlir` and after pass i `NN-<pass>.mlir` (the pass name without options).
    """
    from sdc.transforms.pipeline import build_pipeline
    from sdc.mlir import MLIRError, ir

    op = module.operation if hasattr(module, "operation") else module
    dump_dir = Path(dump_ir) if dump_ir is not None else None
    if dump_dir is not None:
        try:
            dump_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise SdcError(f"cannot create the IR dump directory '{dump_dir}': {e.strerror}") from None
        _dump(dump_dir / "00-input.mlir", op)
    with op.context, ir.Location.unknown():
        for i, element in enumerate(pipeline, 1):
            if progress:
                progress(f"running {element}")
            sink = DiagnosticSink()
            pm = build_pipeline(element, sink)
            try:
                pm.run(op)
            except MLIRError as e:
                raise _pipeline_error(element, sink.diagnostics + from_mlir_error(e)) from None
            if sink.has_errors:
                raise _pipeline_error(element, sink.diagnostics)
            if dump_dir is not None:
                _dump(dump_dir / f"{i:02d}-{element.split('{')[0]}.mlir", op)


def _pipeline_error(element: str, diags: list[Diagnostic]) -> SdcError:
    diags = [d for d in diags if not d.message.startswith("Failure while executing pass pipeline")]
    if not diags:
        diags = [Diagnostic("error", f"pass '{element}' failed")]
    return SdcError(diags[0].message, diags)


def _dump(path: Path, op) -> None:
    try:
        path.write_text(op.get_asm(), encoding="utf-8")
    except OSError as e:
        raise SdcError(f"cannot write '{path}': {e.strerror}") from None


# ---------------------------------------------------------------- module -> artifact -> executable


def input_shapes_option(input_shapes: InputShapes | None) -> str:
    """`input_shapes` as the shape pass's `input-shape` option (`x=B,3,224,224 B=1..64`); SdcError if malformed."""
    from sdc.transforms.shape_constraints import parse_binding

    items = []
    for name, value in (input_shapes or {}).items():
        if isinstance(value, (str, int)):
            text = f"{name}={value}"
        else:
            text = f"{name}={','.join(str(d) for d in value)}"
        try:
            parse_binding(text)
        except ValueError as e:
            raise SdcError(f"--input-shape {e}") from None
        items.append(text)
    return " ".join(items)


def with_input_shapes(pipeline: Sequence[str], input_shapes: InputShapes | None) -> tuple[str, ...]:
    """The pipeline with the shape pass given `input_shapes`."""
    option = input_shapes_option(input_shapes)
    if not option:
        return tuple(pipeline)
    return tuple(f'{SHAPES}{{input-shape="{option}"}}' if e == SHAPES else e for e in pipeline)


def build_artifact(module, params: Mapping[str, Any] | None, output: str | os.PathLike, *, target: str = "cpu",
                   dump_ir: str | os.PathLike | None = None, options: Mapping[str, Any] | None = None,
                   progress: Progress | None = None, input_shapes: InputShapes | None = None,
                   mesh: Any = None, shardings: Mapping[str, Any] | None = None) -> Path:
    """Run the pipeline on `module` (in place), plan it and write the artifact `output`.

    `input_shapes` binds or bounds the symbolic dims (see `compile`); `mesh` and `shardings` make a
    partitioned program (see `compile`)."""
    from sdc.codegen.artifact import write_artifact
    from sdc.codegen.plan import build_plan
    from sdc.transforms.sharding_ir import prepare_mesh

    check_target(target)
    sharded = prepare_mesh(module, mesh, shardings)
    pipeline = with_input_shapes(pipeline_for(target, sharded), input_shapes)
    run_pipeline(module, pipeline, dump_ir, progress)
    if progress:
        progress("planning")
    plan = build_plan(module, params or {}, target)
    if progress:
        progress(f"writing {output}")
    all_options = {"target": target, "pipeline": ",".join(pipeline), **dict(options or {})}
    if sharded:
        all_options["mesh"] = ",".join(f"{a}={n}" for a, n in plan.mesh.items())
    return write_artifact(plan, module, output, options=all_options)


def compile_module(module, params: Mapping[str, Any] | None = None, *, target: str = "cpu",
                   output: str | os.PathLike | None = None, dump_ir: str | os.PathLike | None = None,
                   options: Mapping[str, Any] | None = None, progress: Progress | None = None,
                   input_shapes: InputShapes | None = None, mesh: Any = None,
                   shardings: Mapping[str, Any] | None = None):
    """Compile an sdc module (changed in place by the passes) with its parameter values; load the result.

    With `output=None` the artifact goes to a temporary directory that lives as long as the
    returned executable. Under torchrun only rank 0 writes `output` (the others compile the same
    program into a temporary directory).
    """
    from sdc.runtime import load
    from sdc.runtime.distributed import launch_env

    env = launch_env()
    if output is not None and env is not None and env.world_size > 1 and env.rank != 0:
        output = None
    extra = {"mesh": mesh, "shardings": shardings}
    if output is not None:
        return _load_compiled(load, build_artifact(module, params, output, target=target, dump_ir=dump_ir,
                                                   options=options, progress=progress, input_shapes=input_shapes,
                                                   **extra), env)
    tmp = tempfile.TemporaryDirectory(prefix="sdc-")
    try:
        path = build_artifact(module, params, Path(tmp.name) / "model.sdc", target=target, dump_ir=dump_ir,
                              options=options, progress=progress, input_shapes=input_shapes, **extra)
        exe = _load_compiled(load, path, env)
    except BaseException:
        tmp.cleanup()
        raise
    exe._keepalive = tmp
    return exe


def _load_compiled(load, path: Path, env):
    """Load a fresh artifact; one for several devices only under a launcher (torchrun)."""
    if env is None:
        from sdc.runtime.artifact import read_artifact

        artifact = read_artifact(path)
        if artifact.world_size > 1:
            mesh = ",".join(f"{a}={n}" for a, n in artifact.manifest["mesh"].items())
            raise SdcError(f"the program is compiled for {artifact.world_size} devices (mesh {mesh}): run it under "
                           f"torchrun --nproc-per-node={artifact.world_size}, or write it with output= and run "
                           "sdc.runtime.distributed.simulate on it")
    return load(path)


# ---------------------------------------------------------------- models


def import_model(model: Any, *, input_shapes: InputShapes | None = None,
                 params_file: str | os.PathLike | None = None,
                 mesh: Any = None) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """(module, params, options) for an ONNX model (path or ModelProto) or an `.mlir` file.

    An `.mlir` file takes its parameter values from `params_file` (.safetensors or .npz). The ONNX
    importer takes the `input_shapes` that give an input's dims (lists); bounds and values of
    symbols are for the shape pass (`build_artifact(..., input_shapes=...)`), which applies all
    of them, to `.mlir` files too.
    """
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.is_file():
            raise SdcError(f"cannot open '{path}': {'is a directory' if path.is_dir() else 'no such file'}")
        if path.suffix == ".mlir":
            module, params, options = _import_mlir(path, params_file)
            if input_shapes:
                options["input_shapes"] = dict(input_shapes)
            return module, params, options
        source = path.name
    else:
        source = f"<{type(model).__name__}>"
        _check_model_type(model)
    if params_file is not None:
        raise SdcError("parameter files apply to .mlir models; an ONNX model carries its own weights")
    try:
        from sdc.frontend.onnx import import_onnx
    except ModuleNotFoundError as e:
        if e.name and e.name.startswith("sdc.frontend"):
            raise SdcError("the ONNX frontend (sdc.frontend.onnx) is not available in this sdc") from None
        raise
    dims = {k: list(v) for k, v in (input_shapes or {}).items() if not isinstance(v, (str, int))}
    imported = import_onnx(model if not isinstance(model, os.PathLike) else str(model), dims or None,
                           mesh=_mesh_dict(mesh))
    shapes = {k: v if isinstance(v, (str, int)) else list(v) for k, v in input_shapes.items()} if input_shapes else None
    return imported.module, dict(imported.params), {"source": source, "frontend": "onnx", "input_shapes": shapes}


def _check_model_type(model: Any) -> None:
    kind = type(model)
    if kind.__name__ == "ModelProto" and kind.__module__.startswith("onnx"):
        return
    if any(c.__module__.startswith("torch") for c in kind.__mro__):
        raise SdcError(f"cannot compile a {kind.__name__} yet: the PyTorch frontend is not there; "
                       "export the model to ONNX (torch.onnx.export) and compile that")
    if callable(model):
        raise SdcError(f"cannot compile a Python callable ({kind.__name__}) yet: the PyTorch and JAX frontends "
                       "are not there; give an ONNX model")
    raise SdcError(f"cannot compile a {kind.__module__}.{kind.__name__}: give an ONNX model "
                   "(a path or an onnx.ModelProto)")


def _import_mlir(path: Path, params_file: str | os.PathLike | None):
    from sdc.interpreter import parse_module

    text = path.read_text(encoding="utf-8")
    module = parse_module(text, source_name=str(path))
    params = read_params(params_file) if params_file is not None else {}
    return module, params, {"source": path.name, "frontend": "mlir",
                            "params": Path(params_file).name if params_file else None}


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
    except Exception as e:
        raise SdcError(f"cannot read parameter file '{p}': {e}") from None
    raise SdcError(f"parameter file '{p}' must be .safetensors or .npz")


def _mesh_dict(mesh: Any) -> dict[str, int] | None:
    from sdc.dialect.mesh import Mesh, MeshError

    if mesh is None:
        return None
    try:
        return (Mesh.parse(mesh) if isinstance(mesh, str) else Mesh.of(mesh)).as_dict()
    except (MeshError, TypeError, ValueError) as e:
        raise SdcError(f"bad mesh {mesh!r}: {e}") from None


def compile(model: Any, example_args: Sequence[Any] | None = None, *, target: str = "cpu",
            input_shapes: InputShapes | None = None, output: str | os.PathLike | None = None,
            dump_ir: str | os.PathLike | None = None, progress: Progress | None = None,
            mesh: Any = None, shardings: Mapping[str, Any] | None = None):
    """Compile a model into an artifact and load it; returns the `sdc.runtime.Executable`.

    `model`: an ONNX model (path or `onnx.ModelProto`), or an `.mlir` file without parameters.
    `input_shapes`: input name -> dims (ints or symbol names), overriding the model's; symbol name ->
    its value (`{"B": 8}`) or range (`{"B": "1..64"}`, `"8.."`, `"..64"`). See docs/shapes.md.
    `output`: the artifact directory (default: a temporary one, alive as long as the executable).
    `dump_ir`: a directory for the IR after import and after each pass.
    `example_args` are for the PyTorch and JAX frontends, which are not there yet.
    `mesh`: a device mesh (`"dp=2,tp=2"` or `{"dp": 2, "tp": 2}`) makes a partitioned program, one
    process per device (docs/distributed.md); `shardings`: input, output or parameter name -> its
    sharding, one entry per dim (None, "dp", ("dp", "tp")), user annotations like `sdc.shard`.
    """
    check_target(target)
    if example_args is not None:
        raise SdcError("example_args are for PyTorch and JAX models; for an ONNX model give input_shapes")
    started = time.perf_counter()
    if progress:
        progress("importing the model")
    module, params, options = import_model(model, input_shapes=input_shapes, mesh=mesh)
    exe = compile_module(module, params, target=target, output=output, dump_ir=dump_ir, options=options,
                         progress=progress, input_shapes=input_shapes, mesh=mesh, shardings=shardings)
    if progress:
        progress(f"compiled in {time.perf_counter() - started:.1f} s")
    return exe
