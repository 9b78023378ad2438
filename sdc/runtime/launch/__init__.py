"""The kernel launchers: one executor instruction per generated-kernel launch of the plan.

- `base`: what they share: the artifact's kernel sources (read and hash-checked once), the domain a
  launch reads off its tensors, the autotuner and its cache, the settled call signatures, layouts'
  index arithmetic;
- `triton` (and `triton_direct`, its direct calls of Triton's compiled launcher), `cuda` (CUDA C++
  through NVRTC), `c` (generated C through ctypes): one launcher per codegen backend.

No MLIR here (the runtime's rule).
"""
