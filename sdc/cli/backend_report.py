"""Which kernel groups of a plan are generated kernels and which run through torch (`sdc inspect`).

A launch's backend is `triton` (a kernel sdc generated, in the artifact's kernels/) or `reference`
(each op of the group a torch call). On cuda a torch call of a convolution runs in cuDNN and one of
a matmul in cuBLAS: vendor libraries, which the GPU issue lets serve a group only where that is
measured to be faster, and asks `sdc inspect` to name. Every other reference op is one of torch's
own CUDA kernels. Read from plan.json alone (no MLIR).
"""

from __future__ import annotations

from collections import Counter

from sdc.runtime.format import LAUNCH, launch_ops

# op family (sdc.dialect.opdef) -> the library torch calls for it on cuda
VENDOR_LIBRARY = {"convolution": "cuDNN", "contraction": "cuBLAS"}
SHOWN_IDS = 8  # group ids listed per line before "..."


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


def backend_lines(rank: dict, target: str) -> list[str]:
    """Lines for one rank: a count per backend, then the reference groups per library and op chain."""
    launches = [s for s in rank.get("steps", []) if s.get("kind") == LAUNCH]
    generated = [s for s in launches if (s.get("kernel") or {}).get("backend") == "triton"]
    through_torch = [s for s in launches if (s.get("kernel") or {}).get("backend") != "triton"]
    head = f"kernels: {len(generated)} generated (Triton), {len(through_torch)} through torch"
    if not through_torch:
        return [head]
    groups: dict[tuple[str, str], list[str]] = {}
    for step in through_torch:
        names = [op.get("op", "?") for op in launch_ops(step)]
        library = _library(names) if target == "cuda" else "torch"
        groups.setdefault((library, "+".join(names)), []).append(str(step.get("id", "?")))
    libraries = Counter(library for (library, _), ids in groups.items() for _ in ids)
    head += " (" + ", ".join(f"{library} {n}" for library, n in sorted(libraries.items())) + ")"
    lines = [head]
    for (library, chain), ids in sorted(groups.items(), key=lambda item: (item[0][0], -len(item[1]))):
        shown = ", ".join(ids[:SHOWN_IDS]) + (", ..." if len(ids) > SHOWN_IDS else "")
        lines.append(f"  {library}: {chain} x{len(ids)} ({shown})")
    return lines
