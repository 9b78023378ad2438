"""Running the generated Triton kernels of an artifact (plan.json launches with backend "triton").

The artifact's `kernels/*.py` are the one code the design lets loading execute. `KernelSources`
reads such a file only from `kernels/` inside the artifact, only when the manifest lists it, and
only after its bytes match the manifest's SHA-256 (read once, checked, and those same bytes
executed: the file cannot change in between). `load_entry` executes the source into a fresh
namespace and returns its `@triton.jit` entry; triton compiles it on first launch.

`TritonLaunch` is the executor's instruction for one launch: per call it reads the domain sizes off
the input tensors (each argument's `map` says which domain dim each of its dims is), checks they
agree with each other and with the sizes fixed at compile time, allocates the results (torch tensors
on the inputs' device, in a result's `layout` when it has one), computes each tensor's strides over
the domain (0 where it broadcasts), evaluates the grid expressions (sdc.dialect.symexpr) and launches.

On the CPU, Triton kernels run only under the interpreter (TRITON_INTERPRET=1), for tests on small
shapes; `check_can_run` says so up front. No MLIR here.
"""

from __future__ import annotations

import hashlib
import linecache
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from sdc import dtypes
from sdc.diagnostics import SdcError
from sdc.dialect import symexpr
from sdc.runtime import plan_schema as S
from sdc.runtime.format import KERNELS_DIR

INTERPRET_ENV = "TRITON_INTERPRET"


def interpreting() -> bool:
    return os.environ.get(INTERPRET_ENV, "0").strip().lower() in ("1", "true", "on", "yes")


def check_can_run(device: torch.device | None, where: str) -> None:
    """SdcError unless this process can run Triton kernels on `device`."""
    on_cpu = device is None or device.type == "cpu"
    if on_cpu and not interpreting():
        raise SdcError(f"{where} is a generated Triton kernel: on the CPU those run only under the Triton "
                       f"interpreter ({INTERPRET_ENV}=1); run on a GPU (--device cuda) or compile for target cpu")
    try:
        import triton  # noqa: F401
    except ImportError as e:
        raise SdcError(f"{where} is a generated Triton kernel, and triton cannot be imported here ({e})") from None


class KernelSources:
    """The kernel files of one artifact, read and hash-checked on demand."""

    def __init__(self, root: Path, files: dict[str, dict], error: Callable[[str, str], SdcError]):
        self.root = Path(root)
        self.files = files
        self.error = error  # error(file, message)
        self._loaded: dict[tuple[str, str], Any] = {}

    def read(self, rel: str) -> tuple[str, str]:
        """(source text, its SHA-256) of kernel file `rel`."""
        from sdc.runtime.artifact import safe_path

        if not rel.startswith(KERNELS_DIR + "/") or rel not in self.files:
            raise self.error(rel, f"is not a kernel file listed in manifest.json (kernels live in {KERNELS_DIR}/)")
        path = safe_path(self.root, rel, rel)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise self.error(rel, f"cannot be read: {e.strerror}") from None
        digest = hashlib.sha256(data).hexdigest()
        if digest != str(self.files[rel].get("sha256", "")).lower():
            raise self.error(rel, "does not match its SHA-256 in manifest.json: the file changed after the "
                                  "artifact was written")
        try:
            return data.decode("utf-8"), digest
        except UnicodeDecodeError:
            raise self.error(rel, "is not UTF-8 text") from None

    def entry(self, rel: str, name: str) -> Any:
        """The `@triton.jit` function `name` of kernel file `rel` (each file executed once)."""
        key = (rel, name)
        if key not in self._loaded:
            text, digest = self.read(rel)
            self._loaded[key] = load_entry(text, rel, name, digest, lambda msg: self.error(rel, msg))
        return self._loaded[key]


def load_entry(text: str, rel: str, name: str, digest: str, error: Callable[[str], SdcError]) -> Any:
    """Execute a kernel source and return its function `name`.

    Triton reads a kernel's source through `inspect`, so the text is registered with linecache under
    a name of its own (its hash) instead of being imported from a path someone could swap."""
    filename = f"<sdc-kernel {digest[:16]} {rel}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace: dict[str, Any] = {"__name__": f"sdc_kernel_{digest[:16]}", "__file__": filename}
    try:
        exec(compile(text, filename, "exec"), namespace)  # the generated kernel: the one code loading runs
    except Exception as e:
        raise error(f"cannot load the kernel source: {type(e).__name__}: {e}") from None
    fn = namespace.get(name)
    if fn is None or not hasattr(fn, "__getitem__"):
        raise error(f"has no Triton kernel named '{name}'")
    return fn


def _inverse(perm) -> list[int]:
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = i
    return out


@dataclass(frozen=True, eq=False)
class TritonLaunch:
    """One launch of a generated kernel, ready to run (an executor instruction)."""

    where: str  # "rank 0 step 3 (launch k2)"
    spec: S.TritonKernel
    fn: Any  # the @triton.jit entry
    arg_slots: tuple[int, ...]
    result_slots: tuple[int, ...]
    result_dtypes: tuple[torch.dtype, ...]
    device: torch.device | None
    stream: Any = None

    def domain(self, tensors: list[torch.Tensor]) -> list[int]:
        dims: list[int | None] = list(self.spec.domain)
        static = [d is not None for d in dims]
        for arg, t in zip(self.spec.args, tensors):
            if t.dim() != len(arg.map):
                raise SdcError(f"{self.where}: value '{arg.value}' has rank {t.dim()}, the kernel expects "
                               f"{len(arg.map)}")
            for j, d in enumerate(arg.map):
                size = t.shape[j]
                if d is None:
                    if size != 1:
                        raise SdcError(f"{self.where}: value '{arg.value}' has size {size} in dim {j}, the kernel "
                                       "expects 1 (it broadcasts there)")
                    continue
                if size == 1:
                    continue
                if dims[d] is None:
                    dims[d] = size
                elif dims[d] != size:
                    what = "the compiled size" if static[d] else "another operand's size"
                    raise SdcError(f"{self.where}: value '{arg.value}' has size {size} in dim {j}, {what} "
                                   f"there is {dims[d]}")
        return [1 if d is None else d for d in dims]

    def __call__(self, vals: list, state: Any) -> None:
        tensors = [vals[s] for s in self.arg_slots]
        dims = self.domain(tensors)
        device = tensors[0].device if tensors else self.device
        results = []
        for r, dtype, slot in zip(self.spec.results, self.result_dtypes, self.result_slots):
            shape = [dims[d] if d is not None else 1 for d in r.map]
            existing = vals[slot]
            if existing is not None and list(existing.shape) == shape:  # an `alloc` step's buffer
                results.append(existing)
            elif r.layout is not None:
                physical = torch.empty([shape[p] for p in r.layout], dtype=dtype, device=device)
                results.append(physical.permute(_inverse(r.layout)))
            else:
                results.append(torch.empty(shape, dtype=dtype, device=device))
        symbols = {f"d{i}": d for i, d in enumerate(dims)}
        grid = tuple(symexpr.evaluate(g, symbols) for g in self.spec.grid)
        if all(g > 0 for g in grid):
            params: list[Any] = []
            for t, m in [*zip(tensors, (a.map for a in self.spec.args)),
                         *zip(results, (r.map for r in self.spec.results))]:
                strides = [0] * len(dims)
                for j, d in enumerate(m):
                    if d is not None and t.shape[j] != 1:
                        strides[d] = t.stride(j)
                params += [t, *strides]
            params += dims
            try:
                if self.stream is None:
                    self.fn[grid](*params, **self.spec.constexprs, num_warps=self.spec.num_warps)
                else:
                    with torch.cuda.stream(self.stream):
                        self.fn[grid](*params, **self.spec.constexprs, num_warps=self.spec.num_warps)
            except SdcError:
                raise
            except Exception as e:
                raise SdcError(f"{self.where}: the Triton kernel '{self.spec.entry}' ({self.spec.source}) failed: "
                               f"{type(e).__name__}: {e}") from e
        for slot, t in zip(self.result_slots, results):
            vals[slot] = t


def prepare_launch(step: S.Launch, slots: dict[str, int], values: dict[str, S.Value], sources: KernelSources | None,
                   device: torch.device | None, stream: Any, error: Callable[[str], SdcError]) -> TritonLaunch:
    """The instruction for a triton launch step (the kernel source loaded, not yet compiled)."""
    spec = step.triton
    assert spec is not None
    if sources is None:
        raise error(f"{step.where}: a generated Triton kernel, but the executor has no artifact to read it from")
    check_can_run(device, step.where)
    fn = sources.entry(spec.source, spec.entry)
    return TritonLaunch(
        where=step.where, spec=spec, fn=fn, arg_slots=tuple(slots[a.value] for a in spec.args),
        result_slots=tuple(slots[r.value] for r in spec.results),
        result_dtypes=tuple(dtypes.to_torch(values[r.value].dtype) for r in spec.results),
        device=device, stream=stream)
