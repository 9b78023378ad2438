"""Which kernel groups of a plan are generated kernels and which run through torch (`sdc inspect`).

A launch's backend is `triton`, `cuda` or `c` (a Triton, CUDA C++ or C kernel sdc generated, in the
artifact's kernels/; the CUDA C++ ones are listed by op chain, as `CUDA C++: ...`) or `reference`
(each op of the group a torch call). On cuda a torch call of a convolution runs in cuDNN and one of
a matmul in cuBLAS: vendor libraries, which the GPU issue lets serve a group only where that is
measured to be faster, and asks `sdc inspect` to name. A convolution group whose epilogue the
executor hands to cuDNN with the convolution (one `torch.cudnn_convolution_relu` / `_add_relu` call)
is listed as `cuDNN fused`. Every other reference op is one of torch's own CUDA kernels. On the CPU
the groups the plan gives sdc's C kernel library (c_conv.c) are counted as such, and those it gives
oneDNN are listed as `oneDNN`. Read from plan.json alone (no MLIR).

`kernel_lines` says what will run, from the kernel plan.json names for every launch (`kernel.runs`,
sdc/runtime/kernel_choice.py): generated C, Triton or CUDA C++, sdc's C kernel library (c_conv.c),
oneDNN, cuDNN (fused), cuBLAS or torch, and what may fall back to what at run time. `runs_lines`
puts beside it what did run, from the counters `sdc run --profile --output-dir` wrote (runs.json).
"""

from __future__ import annotations

from collections import Counter

from sdc.runtime.format import C, C_CONV, CUDA, LAUNCH, ONEDNN, REFERENCE, TRITON, launch_ops

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
    call (sdc.runtime.kernel_choice.cudnn_fuses)."""
    from sdc.runtime.kernel_choice import cudnn_fuses

    return cudnn_fuses(launch_ops(step), rank.get("values") or {})


def backend_lines(rank: dict, target: str) -> list[str]:
    """Lines for one rank: a count per backend, then the reference groups per library and op chain."""
    launches = [s for s in rank.get("steps", []) if s.get("kind") == LAUNCH]
    generated = [s for s in launches if (s.get("kernel") or {}).get("backend") == TRITON]
    cuda_cpp = [s for s in launches if (s.get("kernel") or {}).get("backend") == CUDA]
    c_kernels = [s for s in launches if (s.get("kernel") or {}).get("backend") == C]
    # on the CPU, the groups the plan gives sdc's C kernel library (kernel.runs "c_conv") run in c_conv.c
    in_library = [s for s in launches if target != "cuda" and (s.get("kernel") or {}).get("backend") == REFERENCE
                  and (s.get("kernel") or {}).get("runs") == C_CONV]
    through_torch = [s for s in launches if (s.get("kernel") or {}).get("backend") not in (TRITON, CUDA, C)
                     and s not in in_library]
    # a CPU plan with C kernels has no Triton ones: its line counts C kernels (and those through torch)
    head = ("kernels: " + (f"{len(generated)} generated (Triton), " if generated or not c_kernels else "")
            + (f"{len(cuda_cpp)} generated (CUDA C++), " if cuda_cpp else "")
            + (f"{len(c_kernels)} generated (C), " if c_kernels else "")
            + (f"{len(in_library)} in sdc's C kernel library (c_conv.c), " if in_library else "")
            + f"{len(through_torch)} through torch")
    # the CUDA C++ groups (SDC_CUDA_CPP) by op chain, so a reader sees which kernels are not Triton
    cuda_groups: dict[str, list[str]] = {}
    for step in cuda_cpp:
        chain = "+".join(op.get("op", "?") for op in launch_ops(step, unmerged=True))
        cuda_groups.setdefault(chain, []).append(str(step.get("id", "?")))
    cuda_lines = [f"  {CUDA_CPP}: {chain} x{len(ids)} ({_shown(ids)})" for chain, ids in sorted(cuda_groups.items())]
    if not through_torch:
        return [head, *cuda_lines]
    groups: dict[tuple[str, str], list[str]] = {}
    for step in through_torch:
        names = [op.get("op", "?") for op in launch_ops(step, unmerged=True)]
        library = _library(names) if target == "cuda" else (
            "oneDNN" if (step.get("kernel") or {}).get("runs") == ONEDNN else "torch")
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


def kernel_lines(rank: dict) -> list[str]:
    """What will run, from each launch's `kernel.runs` and `kernel.fallback`: steps per kernel, the
    fallbacks the plan allows, then the op chains per kernel."""
    from sdc.runtime.format import KERNELS

    launches = [s for s in rank.get("steps", []) if s.get("kind") == LAUNCH]
    chosen = [(s, (s.get("kernel") or {}).get("runs")) for s in launches]
    if not any(runs for _, runs in chosen):
        return ["will run: the plan does not say (written before kernel choices were recorded)"]
    counts = Counter(runs or "?" for _, runs in chosen)
    order = list(KERNELS)
    ranked = sorted(counts.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0]))
    lines = ["will run: " + ", ".join(f"{n} {KERNELS.get(k, k)}" for k, n in ranked)]
    fallbacks = Counter(((s.get("kernel") or {}).get("runs"), (s.get("kernel") or {}).get("fallback"))
                        for s in launches if (s.get("kernel") or {}).get("fallback"))
    if fallbacks:
        lines.append("  may fall back at run time: " + ", ".join(f"{n} {k} -> {f}" for (k, f), n in sorted(fallbacks.items())))
    chains: dict[tuple[str, str], list[str]] = {}
    for step, runs in chosen:
        chain = "+".join(op.get("op", "?") for op in launch_ops(step, unmerged=True))
        chains.setdefault((runs or "?", chain), []).append(str(step.get("id", "?")))
    for (runs, chain), ids in sorted(chains.items(), key=lambda item: (order.index(item[0][0]) if item[0][0] in order
                                                                        else len(order), -len(item[1]), item[0][1])):
        lines.append(f"  {runs}: {chain} x{len(ids)} ({_shown(ids)})")
    groups = rank.get("calls_as_one") or []
    for kind, name in (("c_segment", "C segments (generated C kernels, one sdc_run_kernels call)"),
                       ("c_run", "C runs (c_conv.c kernels, one sdc_run_calls call)")):
        mine = [g["steps"] for g in groups if g.get("kind") == kind]
        if mine:
            lines.append(f"  called as one: {len(mine)} {name}: "
                         + ", ".join(f"{g[0]}..{g[-1]} ({len(g)})" for g in mine[:SHOWN_IDS])
                         + (", ..." if len(mine) > SHOWN_IDS else ""))
    return lines


def runs_lines(rank: dict, runs: dict) -> list[str]:
    """What did run (a runs.json of `sdc run`) against what the plan says, per step that differs."""
    from sdc.runtime.counters import format_counters

    planned = {str(s.get("id")): (s.get("kernel") or {}).get("runs") for s in rank.get("steps", [])
               if s.get("kind") == LAUNCH}
    lines = format_counters(runs).splitlines()
    unknown = sorted(set(runs["steps"]) - set(planned))
    changed = sorted(sid for sid, s in runs["steps"].items() if sid in planned and s["planned"] != planned[sid])
    if unknown or changed or set(planned) - set(runs["steps"]):
        lines.append("  (these counters are not of this plan: its steps or their kernels differ)")
    return lines
