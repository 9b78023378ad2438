"""Which kernel groups of a plan are generated kernels and which run through torch (`sdc inspect`).

A launch's backend is `triton`, `cuda` or `c` (a Triton, CUDA C++ or C kernel sdc generated, in the
artifact's kernels/; the CUDA C++ ones are listed by op chain, as `CUDA C++: ...`) or `reference`
(each op of the group a torch call). On cuda a torch call of a convolution runs in cuDNN and one of
a matmul in cuBLAS: vendor libraries, which the GPU issue lets serve a group only where that is
measured to be faster, and asks `sdc inspect` to name. A convolution group whose epilogue the
executor hands to cuDNN with the convolution (one `torch.cudnn_convolution_relu` / `_add_relu` call)
is listed as `cuDNN fused`. Every other reference op is one of torch's own CUDA kernels. Read from
plan.json alone (no MLIR).
"""

from __future__ import annotations

from collections import Counter

from sdc.runtime.format import C, CUDA, LAUNCH, TRITON, launch_ops

# op family (sdc.dialect.opdef) -> the library torch calls for it on cuda
VENDOR_LIBRARY = {"convolution": "cuDNN", "contraction": "cuBLAS"}
SHOWN_IDS = 8  # group ids listed per line before "..."
CUDA_CPP = "CUDA C++"  # generated CUDA C++ kernels (sdc/codegen/cuda), listed by op chain


def _library(op_names: list[str]) -> str:
    """The vendor library a reference group's main op runs in on cuda, or "torch" for torch's kernels."""
    from sdc.dialect.opdef import get_op
    import sdc.dialect.ops  # noqa: F401  (registers the op tables)

    for name in op_names:
        try:
            family = get_op(name).family
        except KeyError:
            continue
        if family in VENDOR_LIBRARY:
            return VENDOR_LIBRARY[family]
    return "torch"


FUSED_CUDNN = "cuDNN fused"  # a group whose convolution and epilogue run as one cuDNN call


def _cudnn_fused(step: dict, rank: dict) -> bool:
    """Whether the executor runs this reference group's convolution with its epilogue as one fused cuDNN
    call (sdc.runtime.reference_kernels.fused_conv), judged from the plan as the executor judges it."""
    from sdc.runtime.plan_schema import OpEntry
    from sdc.runtime.reference_kernels import EPILOGUE, cudnn_fused_call, fuse_epilogues

    values = rank.get("values") or {}
    entries = [OpEntry(op.get("op", "?"), dict(op.get("attrs") or {}), tuple(op.get("inputs") or ()),
                       tuple(op.get("outputs") or ()), in_place=op.get("in_place")) for op in launch_ops(step)]
    for entry in fuse_epilogues(entries):
        if entry.op == "conv" and EPILOGUE in entry.attrs and entry.inputs:
            dtype = (values.get(entry.inputs[0]) or {}).get("dtype", "")
            if cudnn_fused_call(entry.attrs[EPILOGUE], dtype) is not None:
                return True
    return False


def backend_lines(rank: dict, target: str) -> list[str]:
    """Lines for one rank: a count per backend, then the reference groups per library and op chain."""
    launches = [s for s in rank.get("steps", []) if s.get("kind") == LAUNCH]
    generated = [s for s in launches if (s.get("kernel") or {}).get("backend") == TRITON]
    cuda_cpp = [s for s in launches if (s.get("kernel") or {}).get("backend") == CUDA]
    c_kernels = [s for s in launches if (s.get("kernel") or {}).get("backend") == C]
    through_torch = [s for s in launches if (s.get("kernel") or {}).get("backend") not in (TRITON, CUDA, C)]
    # a CPU plan with C kernels has no Triton ones: its line counts C kernels (and those through torch)
    head = ("kernels: " + (f"{len(generated)} generated (Triton), " if generated or not c_kernels else "")
            + (f"{len(cuda_cpp)} generated (CUDA C++), " if cuda_cpp else "")
            + (f"{len(c_kernels)} generated (C), " if c_kernels else "")
            + f"{len(through_torch)} through torch")
    # the CUDA C++ groups (SDC_CUDA_CPP) by op chain, so a reader sees which kernels are not Triton
    cuda_groups: dict[str, list[str]] = {}
    for step in cuda_cpp:
        chain = "+".join(op.get("op", "?") for op in launch_ops(step))
        cuda_groups.setdefault(chain, []).append(str(step.get("id", "?")))
    cuda_lines = [f"  {CUDA_CPP}: {chain} x{len(ids)} ({_shown(ids)})" for chain, ids in sorted(cuda_groups.items())]
    if not through_torch:
        return [head, *cuda_lines]
    groups: dict[tuple[str, str], list[str]] = {}
    for step in through_torch:
        names = [op.get("op", "?") for op in launch_ops(step)]
        library = _library(names) if target == "cuda" else "torch"
        if library == "cuDNN" and _cudnn_fused(step, rank):
            library = FUSED_CUDNN
        groups.setdefault((library, "+".join(names)), []).append(str(step.get("id", "?")))
    libraries = Counter(library for (library, _), ids in groups.items() for _ in ids)
    head += " (" + ", ".join(f"{library} {n}" for library, n in sorted(libraries.items())) + ")"
    lines = [head, *cuda_lines]
    for (library, chain), ids in sorted(groups.items(), key=lambda item: (item[0][0], -len(item[1]))):
        lines.append(f"  {library}: {chain} x{len(ids)} ({_shown(ids)})")
    return lines


def _shown(ids: list[str]) -> str:
    return ", ".join(ids[:SHOWN_IDS]) + (", ..." if len(ids) > SHOWN_IDS else "")
