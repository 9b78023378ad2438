"""The torch backend: the vendor calls (oneDNN and sdc's C kernel library on the CPU, cuDNN and
cuBLAS on cuda) through torch ops, sdc/runtime/reference_kernels.py.

It takes every kernel group as it is: its launch stays a `reference` launch of the group's ops, which
the runtime runs op by op (or as one fused vendor call: a convolution with its bias and activation).
It is the last backend of every target (sdc/codegen/backends.py); nothing is rendered at compile time.
"""

from __future__ import annotations

from sdc.codegen.kernel.program import GeneratedKernel

__all__ = ["TorchBackend"]


class TorchBackend:
    name = "torch"

    def why_not(self, program) -> str | None:
        return None  # torch runs every op

    def generate(self, group) -> GeneratedKernel | None:
        return None  # the group keeps its reference launch
