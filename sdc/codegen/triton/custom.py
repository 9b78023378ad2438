"""A custom op's own Triton kernel (`sdc.custom_op(..., triton=SOURCE)`) as a launch of the plan.

The contract (docs/custom-ops.md): SOURCE is Python text that defines a top-level `@triton.jit`
function `kernel(in_ptr..., out_ptr..., n, <attributes>..., BLOCK: tl.constexpr)` over contiguous
tensors of one shape: a pointer per input and per result in order, `n` the element count, then one
parameter per attribute of the op (passed by name, as literals), then the block size. The grid is
`cdiv(n, BLOCK)`; program `pid` handles elements `[pid * BLOCK, (pid + 1) * BLOCK)` and masks
those past `n`.

sdc cannot see into the kernel, so it does not index it the way it indexes its own: the kernel
file is the user's source followed by an entry with the launcher's calling convention (each
tensor and its strides, then the domain sizes) that calls `kernel` on the flat element count.
The launcher makes the inputs contiguous for this template (`CUSTOM_TEMPLATE`). An op whose inputs
and results differ in shape, or whose attributes are not all numbers and booleans, stays a
reference group (its reference runs, on the GPU too) and says why.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from sdc import custom_ops
from sdc.codegen.kernel.program import KernelProgram, LoweringError, TensorArg
from sdc.diagnostics import SdcError

CUSTOM_TEMPLATE = "custom"  # plan.json's `template` of such a launch (the launcher reads it)
BLOCK = 1024
NUM_WARPS = 4


def expected_parameters(n_tensors: int, attrs: Mapping) -> str:
    return ", ".join([f"<{n_tensors} pointers>", "n", *sorted(attrs), "BLOCK"])


def generate_custom_kernel(op: Mapping, inputs: Sequence[str], outputs: Sequence[str],
                           values: Mapping[str, Mapping], entry: str) -> tuple[KernelProgram, str, dict]:
    """(program, source, plan.json `kernel`) of a group that is one `sdc.custom` with a kernel;
    LoweringError (the group stays a reference group) when the contract cannot apply to it."""
    name = op["attrs"]["name"]
    registered = custom_ops.lookup(name)
    if registered.triton is None:
        raise LoweringError(f"custom op '{name}' has no Triton kernel (sdc.custom_op(..., triton=...))")
    attrs = custom_ops.decode_attributes(op["attrs"].get("attributes", "{}"))
    tensors = [*op["inputs"], *op["outputs"]]
    if list(op["inputs"]) != list(inputs) or list(op["outputs"]) != list(outputs):
        raise LoweringError(f"custom op '{name}': the group's values are not the op's own")
    shapes = {tuple(values[v]["shape"]) for v in tensors}
    if len(shapes) != 1:
        raise LoweringError(f"custom op '{name}' has a Triton kernel, but its inputs and results differ in shape "
                            f"({', '.join(str(list(s)) for s in sorted(shapes, key=str))}); the kernel contract is "
                            "one shape")
    bad = [k for k, v in attrs.items() if isinstance(v, (str, list)) or v is None]
    if bad:
        raise LoweringError(f"custom op '{name}' has a Triton kernel, but attribute '{bad[0]}' is not a number or a "
                            "boolean")
    params = custom_ops.triton_kernel_parameters(registered.triton, name)
    n_ptr = len(tensors)
    if (len(params) != n_ptr + 2 + len(attrs) or params[n_ptr] != "n"
            or set(params[n_ptr + 1:]) != {*attrs, "BLOCK"}):
        raise SdcError(f"custom op '{name}': its triton kernel takes ({', '.join(params)}); for this op with "
                       f"{len(op['inputs'])} inputs and {len(op['outputs'])} results the contract is "
                       f"({expected_parameters(n_ptr, attrs)})")
    if f"def {entry}(" in registered.triton:
        raise LoweringError(f"custom op '{name}': its triton source defines '{entry}', the launch's own name")

    (shape,) = shapes
    rank = len(shape)
    domain = tuple(d if isinstance(d, int) else None for d in shape)
    identity = tuple(range(rank))
    args = [TensorArg(v, values[v]["dtype"], identity) for v in op["inputs"]]
    results = [(TensorArg(v, values[v]["dtype"], identity), -1) for v in op["outputs"]]
    program = KernelProgram(CUSTOM_TEMPLATE, domain, args, results, [], ["custom"])
    source = _render(registered.triton, name, entry, tensors, rank, attrs)
    count = " * ".join(f"d{i}" for i in range(rank)) or "1"
    kernel = {
        "backend": "triton",
        "entry": entry,
        "template": CUSTOM_TEMPLATE,
        "domain": list(domain),
        "args": [{"value": a.value, "map": list(a.map)} for a in args],
        "results": [{"value": r.value, "map": list(r.map)} for r, _ in results],
        "grid": [f"({count} + {BLOCK - 1}) // {BLOCK}"],
        "constexprs": {"BLOCK": BLOCK},
        "num_warps": NUM_WARPS,
        "ops": [dict(op)],
    }
    return program, source, kernel


def _literal(value: object) -> str:
    return repr(bool(value)) if isinstance(value, bool) else repr(value)


def _render(user_source: str, name: str, entry: str, tensors: list[str], rank: int, attrs: Mapping) -> str:
    params: list[str] = []
    pointers = []
    for i, _ in enumerate(tensors):
        pointers.append(f"t{i}")
        params += [f"t{i}", *(f"t{i}_s{d}" for d in range(rank))]
    sizes = [f"d{d}" for d in range(rank)]
    count = " * ".join(sizes) or "1"
    keywords = "".join(f", {k}={_literal(v)}" for k, v in sorted(attrs.items()))
    lines = [
        f"# the Triton kernel of custom op '{name}' (registered with sdc.custom_op), called on the flat",
        "# element count of its contiguous tensors; the entry below has the launcher's calling convention",
        "import triton",
        "import triton.language as tl",
        "",
        user_source.rstrip(),
        "",
        "",
        "@triton.jit",
        f"def {entry}({', '.join([*params, *sizes, 'BLOCK: tl.constexpr'])}):",
        f"    {custom_ops.TRITON_KERNEL}({', '.join(pointers)}, {count}{keywords}, BLOCK=BLOCK)",
        "",
    ]
    return "\n".join(lines)
