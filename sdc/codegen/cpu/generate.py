"""The planner's side of the C backend: one kernel group -> one C function and its plan.json object.

A group is lowered by the Triton path's stage 1 (`lower_group`, the C renderer's op set), rendered
by `CRenderer`, and followed in the source by its *signature*: a string constant
`sdc_sig_<entry>` that spells the template, domain and every tensor's dtype and map as the
function was compiled for them. The runtime reads it from the compiled library and refuses a launch
whose plan.json description differs (sdc/runtime/c_launcher.py): the kernel derives its strides from
what it was compiled for, so an edited plan must not make it index past a buffer.
"""

from __future__ import annotations

import json
from typing import Mapping, Sequence

from sdc.codegen.triton.lower import MATMUL, KernelProgram, LoweringError, lower_group

C_BACKEND = "c"
C_SOURCE = "cpu.c"  # the rank's one source file under kernels/ (cpu_r<rank>.c for a partitioned program)
# A matmul whose static multiply-adds exceed this stays torch's (oneDNN/MKL), whatever the threads: the
# C template is a plain vectorized loop nest, made for the small products where torch's per-call cost
# dominates. Symbolic sizes are checked per call (c_launcher.MAX_SERIAL_MACS).
MAX_STATIC_MACS = 1 << 21


def signature(program: KernelProgram, transposed: Sequence[int] = ()) -> str:
    """What the function was compiled for, as compact JSON (the launcher compares it with the plan)."""
    return json.dumps({
        "template": program.template,
        "domain": list(program.domain),
        "iterated": program.iterated,
        "args": [[a.dtype, list(a.map)] for a in program.args],
        "results": [[r.dtype, list(r.map)] for r, _ in program.results],
        "transposed": list(transposed),
    }, separators=(",", ":"))


def signature_symbol(entry: str) -> str:
    return f"sdc_sig_{entry}"


def c_kernel(renderer, ops: Sequence[Mapping], inputs: Sequence[str], outputs: Sequence[str],
             values: Mapping[str, Mapping], entry: str, weight=lambda vid: None, transposed: Sequence[str] = ()):
    """The C function of one kernel group (source text with its signature constant) and its plan.json
    kernel object less `source` and `ops`; LoweringError when no C template fits the group.
    `transposed`: the 2-d weights the launcher passes as a transposed copy made at load (`values`
    gives them the copy's shape; the kernel object lists their argument indices)."""
    from sdc.codegen.triton import GeneratedKernel

    program = lower_group(ops, inputs, outputs, values, renderer.elementwise_ops(), weight)
    why = renderer.why_not(program)
    if why is not None:
        raise LoweringError(why)
    if program.template == MATMUL and None not in program.domain:
        macs = 1
        for size in program.domain:
            macs *= size
        if macs > MAX_STATIC_MACS:
            raise LoweringError(f"a product of {macs} multiply-adds (the C matmul is for products up to "
                                f"{MAX_STATIC_MACS})")
    text = renderer.function(program, entry)
    indices = [i for i, a in enumerate(program.args) if a.value in transposed]
    sig = signature(program, indices).replace("\\", "\\\\").replace('"', '\\"')
    text += f'\nconst char *const {signature_symbol(entry)} = "{sig}";\n'
    kernel = {
        "backend": C_BACKEND,
        "entry": entry,
        "template": program.template,
        "domain": list(program.domain),
        "args": [{"value": a.value, "map": list(a.map)} for a in program.args],
        "results": [{"value": r.value, "map": list(r.map)} for r, _ in program.results],
        **({"transposed": indices} if indices else {}),
    }
    return GeneratedKernel(program, text, kernel)
