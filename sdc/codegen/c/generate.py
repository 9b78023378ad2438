"""The planner's side of the C backend: one kernel group -> one C function and its plan.json object.

A group is lowered to the kernel IR (`sdc.codegen.kernel.lower_group`, the C renderer's op set), rendered
by `CRenderer`, and followed in the source by its *signature*: a string constant
`sdc_sig_<entry>` that spells the template, domain and every tensor's dtype and map as the
function was compiled for them. The runtime reads it from the compiled library and refuses a launch
whose plan.json description differs (sdc/runtime/launch/c.py): the kernel derives its strides from
what it was compiled for, so an edited plan must not make it index past a buffer.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Mapping, Sequence

from sdc.codegen.kernel import GeneratedKernel, lower_group
from sdc.codegen.kernel.program import ELEMENTWISE, MATMUL, KernelProgram, LoweringError, TensorArg
from sdc.runtime.launch.c import layout_signature

C_BACKEND = "c"
C_SOURCE = "cpu.c"  # the rank's one source file under kernels/ (cpu_r<rank>.c for a partitioned program)
# A matmul whose static multiply-adds exceed this stays torch's (oneDNN/MKL), whatever the threads: the
# C template is a plain vectorized loop nest, made for the small products where torch's per-call cost
# dominates. Symbolic sizes are checked per call (sdc/runtime/launch/c.py MAX_SERIAL_MACS).
MAX_STATIC_MACS = 1 << 21


def signature(program: KernelProgram, transposed: Sequence[int] = (),
              layouts: Mapping[str, tuple[int, ...]] | None = None) -> str:
    """What the function was compiled for, as compact JSON (the launcher compares it with the plan).
    `layouts`: the tensors passed in a physical dim order (`physical_order`), by value."""
    sig = {
        "template": program.template,
        "domain": list(program.domain),
        "iterated": program.iterated,
        "args": [[a.dtype, list(a.map)] for a in program.args],
        "results": [[r.dtype, list(r.map)] for r, _ in program.results],
        "transposed": list(transposed),
    }
    if layouts:
        sig["layouts"] = layout_signature(program.args, [r for r, _ in program.results], layouts)
    return json.dumps(sig, separators=(",", ":"))


def physical_order(program: KernelProgram, layouts: Mapping[str, tuple[int, ...]]
                   ) -> tuple[KernelProgram, dict[str, tuple[int, ...]]]:
    """An elementwise program whose results are all stored in one non-row-major layout (an NHWC
    activation after a convolution: `layouts` gives the layout pass's order per value) over the
    domain permuted into that physical order, and the values it then reads and writes in that order
    (the kernel takes them dense in it). A full-rank argument stored that way is indexed over its
    physical dims; any other keeps its logical dims, mapped to the renamed domain dims. So the
    innermost loop runs along the dim that is contiguous in memory, and the launcher passes the
    tensors as they lie instead of copying each to row-major first (a DenseNet batch norm + relu read
    a channels-last [1, 256, 56, 56] through a 0.19 ms copy). Any other program is returned as it is."""
    r = len(program.domain)
    perms = {layouts.get(t.value) for t, _ in program.results}
    if (program.template != ELEMENTWISE or program.iterated is not None or len(perms) != 1
            or any(n.op == "gather" for n in program.nodes)):
        return program, {}
    perm = perms.pop()
    if perm is None or len(perm) != r or any(d not in (j, None) for t, _ in program.results for j, d in enumerate(t.map)):
        return program, {}
    rename = {old: new for new, old in enumerate(perm)}  # new domain dim k is old dim perm[k]
    physical: dict[str, tuple[int, ...]] = {}

    def moved(t: TensorArg) -> TensorArg:
        m = tuple(None if d is None else rename[d] for d in t.map)
        if len(m) == r and tuple(layouts.get(t.value) or ()) == perm:
            physical[t.value] = perm
            m = tuple(m[j] for j in perm)
        return dataclasses.replace(t, map=m, layout=None)

    out = dataclasses.replace(program, domain=tuple(program.domain[k] for k in perm),
                              args=[moved(a) for a in program.args],
                              results=[(moved(t), node) for t, node in program.results])
    return out, physical


def signature_symbol(entry: str) -> str:
    return f"sdc_sig_{entry}"


def c_kernel(renderer, ops: Sequence[Mapping], inputs: Sequence[str], outputs: Sequence[str],
             values: Mapping[str, Mapping], entry: str, weight=lambda vid: None, transposed: Sequence[str] = (),
             layouts: Mapping[str, tuple[int, ...]] | None = None):
    """The C function of one kernel group (source text with its signature constant) and its plan.json
    kernel object less `source` and `ops`; LoweringError when no C template fits the group.
    `transposed`: the 2-d weights the launcher passes as a transposed copy made at load (`values`
    gives them the copy's shape; the kernel object lists their argument indices). `layouts`: the
    physical dim order of values stored in another than row-major (`physical_order`)."""
    program = lower_group(ops, inputs, outputs, values, renderer.elementwise_ops(), weight)
    why = renderer.why_not(program)
    if why is not None:
        raise LoweringError(why)
    layouts = layouts or {}
    program, physical = physical_order(program, layouts)
    laid_out = [t.value for t in (*program.args, *(r for r, _ in program.results))
                if layouts.get(t.value) and t.value not in physical]
    if laid_out and any(n.op == "gather" for n in program.nodes):
        # the launcher would copy such a value to row-major and the kernel write its result row-major:
        # torch's copy in the value's own order is the faster one (a channel shuffle in NHWC)
        raise LoweringError(f"a gather over '{laid_out[0]}', which is stored in another than row-major order")
    if program.template == MATMUL and None not in program.domain:
        macs = 1
        for size in program.domain:
            macs *= size
        if macs > MAX_STATIC_MACS:
            raise LoweringError(f"a product of {macs} multiply-adds (the C matmul is for products up to "
                                f"{MAX_STATIC_MACS})")
    text = renderer.function(program, entry)
    indices = [i for i, a in enumerate(program.args) if a.value in transposed]
    sig = signature(program, indices, physical).replace("\\", "\\\\").replace('"', '\\"')
    text += f'\nconst char *const {signature_symbol(entry)} = "{sig}";\n'
    kernel = {
        "backend": C_BACKEND,
        "entry": entry,
        "template": program.template,
        "domain": list(program.domain),
        "args": [_tensor(a, physical) for a in program.args],
        "results": [_tensor(r, physical) for r, _ in program.results],
        **({"transposed": indices} if indices else {}),
    }
    return GeneratedKernel(program, text, kernel)


def _tensor(t, physical: Mapping[str, tuple[int, ...]]) -> dict:
    """A kernel tensor's plan.json object: its map, and its layout where the kernel reads it physically."""
    return {"value": t.value, "map": list(t.map), **({"layout": list(physical[t.value])} if t.value in physical else {})}
