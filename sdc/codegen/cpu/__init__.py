"""C codegen for the CPU target: kernel groups rendered as C functions, compiled at load.

On the CPU target torch costs 10-35 us per op; a kernel group that a template fits runs instead as one
generated C function. The planner lowers the group to the shared kernel IR
(`sdc.codegen.kernel.lower_group`, with `CRenderer.elementwise_ops()` as its op set), so both
backends compute the same `KernelProgram`; `CRenderer` (renderer.py: the elementwise and row
templates; matmul.py: the matmul template) renders it as `int ENTRY(void **p, const int64_t *d)`,
and all functions of a rank go into one source file of the artifact (`kernels/cpu.c`, generate.py).
The runtime compiles that file once with the host's C compiler and calls each function through
ctypes; the kernel ABI (argument and result pointers, domain sizes, dense row-major tensors,
storage types) is written in sdc/runtime/c_launcher.py. A program the renderer cannot take
(`CRenderer.why_not`) keeps its group on torch.
"""

from __future__ import annotations

from sdc.codegen.cpu.renderer import CRenderer
from sdc.runtime.format import C

__all__ = ["C", "CRenderer"]
