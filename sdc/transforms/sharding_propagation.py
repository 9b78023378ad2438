"""sdc-sharding-propagation: give every value a sharding over the module's device mesh.

Reads the module's `sdc.mesh`, the user annotations (`sdc.shard` ops, `sdc.sharding` on ops and on
entry arguments and results), seeds the defaults (data parallel on `dp-axis`, tensor parallel on
`tp-axis`), and propagates them forward and backward through every function (the pure solver is
sdc/transforms/sharding.py). Writes `sdc.sharding` on every op (its result's sharding, an array for
several results), on every entry argument and result, and `sdc.sharding_notes` on the function:
what the defaults decided, one line each.

With tensor-parallel defaults, a fused projection split right after (one q/k/v matmul) is first written
as one projection per part (sharding_rewrites.py), so that each can be split on its own. Without a
mesh, or on a program already partitioned, it does nothing. Errors, at the op: an
annotation naming an axis the mesh lacks, repeating an axis, of the wrong rank, or splitting a
static dim that the axis size does not divide; two user annotations that disagree at one op.
"""

from __future__ import annotations

from dataclasses import dataclass

from sdc.diagnostics import DiagnosticSink
from sdc.mlir import ir
from sdc.transforms import sharding as S
from sdc.transforms.base import ModulePass
from sdc.dialect.ir import defined_functions
from sdc.transforms.sharding_ir import get_mesh, read_function, write_shardings
from sdc.transforms.sharding_rewrites import unfuse_split_projections

PARTITIONED = "sdc.partitioned"
NOTES = "sdc.sharding_notes"


@dataclass(frozen=True)
class ShardingPropagationPass(ModulePass):
    """Options:
    - `defaults` (bool, true): seed the data- and tensor-parallel defaults (false: annotations only)
    - `dp-axis` (str, "dp"): the mesh axis that splits the batch dim of the inputs
    - `tp-axis` (str, "tp"): the mesh axis for Megatron-style tensor parallelism
    """

    name = "sdc-sharding-propagation"
    summary = "shard every value over the module's mesh: user annotations, dp/tp defaults, propagation"

    defaults: bool = True
    dp_axis: str = "dp"
    tp_axis: str = "tp"

    def run(self, module: ir.Operation, diag: DiagnosticSink) -> None:
        mesh = get_mesh(module)
        if mesh is None or PARTITIONED in module.attributes:
            return
        tensor_parallel = self.defaults and self.tp_axis in mesh.axes and mesh.size([self.tp_axis]) > 1
        for fn in defined_functions(module):
            if tensor_parallel:
                unfuse_split_projections(fn)
            fg = read_function(fn, mesh, diag)
            if fg is None:
                continue
            solution = S.solve(fg.graph, mesh, fg.annotations, self.defaults, self.dp_axis, self.tp_axis)
            for c in solution.conflicts:
                op = fg.ir_ops[c.op]
                diag.error(op, f"'{op.name}' op {c.message}",
                           notes=[(fg.origins.get(o), f"{o} is here") for o in c.origins])
            if solution.conflicts:
                continue
            write_shardings(fg, solution.shardings)
            if solution.decisions:
                fn.attributes[NOTES] = ir.ArrayAttr.get([ir.StringAttr.get(t) for t in solution.decisions])
