"""The compile driver: model -> sdc IR -> passes -> plan -> artifact -> loaded executable.

    exe = sdc.compile("model.onnx", input_shapes={"x": ["B", 3, 224, 224]}, output="model.sdc")
    (y,) = exe(x)

One `CompileOptions` (sdc.options) says how to compile; it is built where the compile starts and
passed down unchanged. `compile_module` is the part after the frontend (IR plus parameter values in,
executable out); the ONNX path and the tests both go through it. The passes it runs are the
target's compile passes (`sdc.transforms.pipeline.compile_passes`), each with its typed options.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from sdc.diagnostics import Diagnostic, DiagnosticSink, SdcError, from_mlir_error
from sdc.frontend import adapt_executable, import_model  # the frontends (sdc/frontend/) choose the importer
from sdc.options import CompileOptions, describe_options

Progress = Callable[[str], None]


def check_compilable(options: CompileOptions) -> None:
    """SdcError unless sdc can compile what `options` ask for today (the target, its precision)."""
    target = options.target_info
    target.check_supported()
    if options.precision not in target.precisions:
        raise SdcError(f"precision '{options.precision}' is not supported on target '{target.name}' (it runs "
                       f"{', '.join(target.precisions)}): {target.precision_not_yet}")


# ---------------------------------------------------------------- passes


def run_pipeline(module, pipeline: Sequence[Any], dump_ir: str | os.PathLike | None = None,
                 progress: Progress | None = None) -> None:
    """Run the passes on `module` in place, one at a time (so the IR can be dumped after each).

    Each element is a pass object with its typed options (`compile_passes`) or pipeline text
    (`sdc-recompute{memory-budget=1000}`, `cse`), read once into one.

    Diagnostics become one SdcError carrying all of them. With `dump_ir`, the IR before the
    first pass is `00-input.mlir` and after pass i `NN-<pass>.mlir` (the pass name without options);
    `build_artifact` then adds the generated kernels and the plan (`sdc.codegen.artifact.dump_codegen`).
    """
    from sdc.transforms.pipeline import element_pass_manager, element_text
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
            text = element_text(element)
            if progress:
                progress(f"running {text}")
            sink = DiagnosticSink()
            pm = element_pass_manager(element, sink)
            # MLIR verifies the module after each pass, every sdc op through its Python verifier (a
            # tenth of a ResNet-50 compile): after the last pass is enough to catch broken IR; with
            # dump_ir each pass is verified, so the dumps say which one broke it.
            if dump_dir is None and i < len(pipeline):
                pm.enable_verifier(False)
            try:
                pm.run(op)
            except MLIRError as e:
                raise _pipeline_error(text, sink.diagnostics + from_mlir_error(e)) from None
            if sink.has_errors:
                raise _pipeline_error(text, sink.diagnostics)
            if dump_dir is not None:
                _dump(dump_dir / f"{i:02d}-{text.split('{')[0]}.mlir", op)


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


def _options(options: CompileOptions | None) -> CompileOptions:
    if options is None:
        return CompileOptions()
    if not isinstance(options, CompileOptions):  # the old `options=` was the import's description
        raise TypeError(f"options must be a CompileOptions, found {type(options).__name__} "
                        "(what the frontend says about the model goes in provenance=)")
    return options


def build_artifact(module, params: Mapping[str, Any] | None, output: str | os.PathLike,
                   options: CompileOptions | None = None, *, provenance: Mapping[str, Any] | None = None,
                   progress: Progress | None = None) -> Path:
    """Run the target's pipeline on `module` (in place), plan it and write the artifact `output`.

    `options` default to `CompileOptions()`; `provenance` is what the frontend says about the model
    (`import_model`'s third value: source file, frontend, ...), recorded in the manifest with the
    options and the pipeline."""
    from sdc.codegen.artifact import write_artifact
    from sdc.codegen.plan import build_plan
    from sdc.transforms.pipeline import compile_passes, element_text
    from sdc.transforms.sharding_ir import prepare_mesh

    options = _options(options)
    check_compilable(options)
    sharded = prepare_mesh(module, options.mesh_dict(), options.shardings_dict())
    pipeline = compile_passes(options, sharded)
    run_pipeline(module, pipeline, options.dump_ir, progress)
    if progress:
        progress("planning")
    plan = build_plan(module, params or {}, options)
    if options.dump_ir is not None and options.target_info.has_triton_backend:
        from sdc.codegen.artifact import dump_codegen

        dump_codegen(plan, options.dump_ir, len(pipeline) + 1)  # kernels and plan, numbered after the passes
    if progress:
        progress(f"writing {output}")
    recorded = {**dict(provenance or {}), **options.to_json(), "pipeline": ",".join(map(element_text, pipeline))}
    return write_artifact(plan, module, output, options=recorded,
                          weight_seed=options.weight_seed if options.weights == "none" else None)


def compile_module(module, params: Mapping[str, Any] | None = None, options: CompileOptions | None = None, *,
                   output: str | os.PathLike | None = None, provenance: Mapping[str, Any] | None = None,
                   progress: Progress | None = None, device: str | None = None):
    """Compile an sdc module (changed in place by the passes) with its parameter values; load the result.

    With `output=None` the artifact goes to a temporary directory that lives as long as the
    returned executable. Under torchrun only rank 0 writes `output` (the others compile the same
    program into a temporary directory). `device`: where the executable runs (default: the
    target's device when this machine has one, see `default_device`).
    """
    from sdc.runtime import load
    from sdc.runtime.distributed import launch_env

    options = _options(options)
    env = launch_env()
    if output is not None and env is not None and env.world_size > 1 and env.rank != 0:
        output = None
    if output is not None:
        path = build_artifact(module, params, output, options, provenance=provenance, progress=progress)
        if progress:
            progress(f"loading {path}")  # a stage of its own: weights to the device, kernels compiled
        return _load_compiled(load, path, env, device or default_device(options))
    tmp = tempfile.TemporaryDirectory(prefix="sdc-")
    try:
        path = build_artifact(module, params, Path(tmp.name) / "model.sdc", options, provenance=provenance,
                              progress=progress)
        if progress:
            progress(f"loading {path}")
        exe = _load_compiled(load, path, env, device or default_device(options))
    except BaseException:
        tmp.cleanup()
        raise
    exe._keepalive = tmp
    return exe


def default_device(options: CompileOptions) -> str:
    """Where a freshly compiled executable runs: the target's device if this machine has it, else the
    CPU (where a cuda artifact's reference kernels run as torch CPU ops, and its Triton kernels under
    TRITON_INTERPRET=1)."""
    device = options.target_info.device
    if device == "cuda":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _load_compiled(load, path: Path, env, device: str):
    """Load a fresh artifact; one for several devices only under a launcher (torchrun)."""
    if env is None:
        from sdc.runtime.artifact import read_artifact

        artifact = read_artifact(path)
        if artifact.world_size > 1:
            mesh = ",".join(f"{a}={n}" for a, n in artifact.manifest["mesh"].items())
            raise SdcError(f"the program is compiled for {artifact.world_size} devices (mesh {mesh}): run it under "
                           f"torchrun --nproc-per-node={artifact.world_size}, or write it with output= and run "
                           "sdc.runtime.distributed.simulate on it")
    return load(path, device=device)


# ---------------------------------------------------------------- models


def compile(model: Any, example_args: Sequence[Any] | None = None, *, dynamic_shapes: Any = None,
            options: CompileOptions | None = None, output: str | os.PathLike | None = None,
            progress: Progress | None = None, device: str | None = None, **fields: Any):
    """Compile a model into an artifact and load it; returns the `sdc.runtime.Executable`.

    `model`: an ONNX model (path or `onnx.ModelProto`), or an `.mlir` file without parameters.
    `options`: a `sdc.options.CompileOptions`; any of its fields may also be given as a keyword
    (`target="cpu"`, `mesh="dp=2,tp=2"`, ...), which overrides that field of `options`.
    `output`: the artifact directory (default: a temporary one, alive as long as the executable).
    `progress`: called with a line of text as each stage starts.
    `device`: where the executable runs ("cpu", "cuda", "cuda:1"); default: the target's device
    (cuda for target cuda) when this machine has one, else the CPU.
    `example_args`: for a torch.nn.Module, the example inputs torch.export traces it with;
    `dynamic_shapes`: torch.export's, naming the dims that vary (`{0: Dim("batch", max=64)}`), which
    become sdc's symbolic dims and guards (docs/torch.md). An ExportedProgram needs neither.

    A device mesh makes a partitioned program, one process per device (docs/distributed.md).

    Options:
{options}
    """
    options = CompileOptions.of(options, **fields)
    check_compilable(options)
    started = time.perf_counter()
    if progress:
        progress("importing the model")
    module, params, provenance = import_model(model, input_shapes=options.input_shapes_dict(),
                                              mesh=options.mesh_dict(), example_args=example_args,
                                              dynamic_shapes=dynamic_shapes)
    exe = compile_module(module, params, options, output=output, provenance=provenance, progress=progress,
                         device=device)
    exe = adapt_executable(model, exe, example_args=example_args)  # a JAX function's takes and returns pytrees
    if progress:
        progress(f"compiled in {time.perf_counter() - started:.1f} s")
    return exe


if compile.__doc__:  # python -OO drops docstrings
    compile.__doc__ = compile.__doc__.replace("{options}", describe_options("        "))
