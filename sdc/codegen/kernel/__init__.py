"""The kernel IR every codegen backend renders (docs/codegen.md).

- `program`: `KernelProgram`, its nodes and tensor maps, `LoweringError`, `GeneratedKernel`;
- `templates`: the template registry and `lower_group`, a kernel group's ops -> its program;
- `lowering`, `matmul`, `conv`, `attention`: one module per template;
- `decompose`: an elementwise op's scalar formula (`OpDef.scalar`) rendered with a backend's
  primitives.

No module here imports a backend (sdc/codegen/{triton,c,cuda}/): each backend imports this.
"""

from __future__ import annotations

from sdc.codegen.kernel.program import GeneratedKernel, KernelProgram, LoweringError, Node, TensorArg
from sdc.codegen.kernel.templates import TEMPLATES, lower_group

__all__ = ["GeneratedKernel", "KernelProgram", "LoweringError", "Node", "TEMPLATES", "TensorArg", "lower_group"]
