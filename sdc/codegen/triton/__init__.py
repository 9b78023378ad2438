"""Triton codegen: kernel groups of the plan as generated Triton kernels (docs/codegen.md).

Two stages, each of which can be looked at on its own:

1. `sdc.codegen.kernel.lower_group`: a launch step's ops -> `KernelProgram`, a small kernel IR over one index
   domain (`KernelProgram.dump()` prints it);
2. `renderer.TritonRenderer.render`: the program -> the source of one `@triton.jit` function.

`generate_kernel` runs both for the planner and returns the `kernel` object of plan.json's launch
step (backend "triton") with the source text; a group outside the templates raises
`LoweringError`, and the planner keeps it on the reference backend.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from sdc.codegen.kernel import GeneratedKernel, KernelProgram, LoweringError, lower_group
from sdc.codegen.kernel.conv import CUDNN_REASON
from sdc.options import DEFAULT_CONV_KERNEL
from sdc.codegen.triton.renderer import TritonRenderer

__all__ = ["GeneratedKernel", "KernelProgram", "LoweringError", "TritonBackend", "TritonRenderer", "generate_kernel",
           "lower_group"]

TRITON = "triton"


# CompileOptions.precision -> tl.dot's input_precision for f32 operands (16-bit operands use their own tensor cores)
DOT_INPUT_PRECISION = {"f32": "ieee", "tf32": "tf32", "bf16": "ieee", "f16": "ieee"}


def generate_kernel(ops: Sequence[Mapping], inputs: Sequence[str], outputs: Sequence[str],
                    values: Mapping[str, Mapping], entry: str, weight=lambda vid: None,
                    renderer: TritonRenderer | None = None, precision: str = "f32") -> GeneratedKernel:
    """The Triton kernel of one kernel group; LoweringError when no template fits it.

    `precision`: the compile options' precision; it decides whether f32 matmuls may use tf32."""
    if len(ops) == 1 and ops[0]["op"] == "custom":  # the user's own kernel, when it has one
        from sdc.codegen.triton.custom import generate_custom_kernel

        return GeneratedKernel(*generate_custom_kernel(ops[0], inputs, outputs, values, entry))
    renderer = renderer or TritonRenderer()
    program = lower_group(ops, inputs, outputs, values, renderer.elementwise_ops(), weight,
                          DOT_INPUT_PRECISION[precision])
    why = renderer.why_not(program)
    if why is not None:
        raise LoweringError(why)
    blocks = renderer.plan_blocks(program)
    source = renderer.render(program, entry, blocks)

    def constexprs_of(blocks: dict[str, int]) -> dict[str, int]:
        # num_stages rides with the constexprs: the launcher passes them all as keywords, and triton takes
        # num_stages as a launch option (the interpreter drops keywords the kernel does not declare)
        return {k: v for k, v in blocks.items() if k not in ("looped", "num_warps")}

    constexprs = constexprs_of(blocks)
    tune = [{"constexprs": constexprs_of(b), "num_warps": b["num_warps"], "grid": renderer.grid(program, b)}
            for b in renderer.tune_blocks(program)[1:]]
    kernel = {
        "backend": TRITON,
        "entry": entry,
        "template": program.template + ("_looped" if blocks.get("looped") else ""),
        "domain": list(program.domain),
        "args": [{"value": a.value, "map": list(a.map)} for a in program.args],
        "results": [{"value": r.value, "map": list(r.map), **({"layout": list(r.layout)} if r.layout else {})}
                    for r, _ in program.results],
        "grid": renderer.grid(program, blocks),
        "constexprs": constexprs,
        "num_warps": blocks.get("num_warps", renderer.num_warps),
        **({"contiguous_flag": "CONTIG"} if "CONTIG" in blocks else {}),
        **({"tune": tune} if tune else {}),
        "ops": [dict(e) for e in ops],
    }
    return GeneratedKernel(program, source, kernel)


class TritonBackend:
    """The Triton backend (sdc/codegen/backends.py): one kernel file per group a template fits.
    A convolution group is its only when the compile option `conv_kernel` is "triton"; otherwise it
    refuses it (`CUDNN_REASON`), and the group runs as one fused cuDNN call."""

    name = TRITON

    def __init__(self, conv_kernel: str = DEFAULT_CONV_KERNEL):
        self.conv_kernel = conv_kernel

    def generate(self, group) -> GeneratedKernel:
        if self.conv_kernel != TRITON and any(e["op"] == "conv" for e in group.ops):
            raise LoweringError(CUDNN_REASON)
        return generate_kernel(group.ops, group.inputs, group.outputs, group.values, group.entry, group.weight,
                               precision=group.precision)
