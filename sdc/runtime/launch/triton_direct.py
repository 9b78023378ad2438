"""Launching a compiled Triton kernel without `JITFunction.run`, for calls whose arguments are known.

A launch through `fn[grid](*args)` binds the arguments, computes the specialization key of every
argument (dtype, 16-byte alignment of each pointer, integers equal to 1 or divisible by 16), looks the
compiled kernel up by that key, and then calls the compiled kernel's C launcher. On the H200 that
lookup was about a third of a one-kernel call's 53 us of host time. sdc's launcher already knows, per
call signature (`TritonLaunch.settled`: operand shapes and strides), every integer argument and
constexpr; what can still change between two calls of one signature is the tensors' addresses, so
the key differs only where a pointer's alignment does. `DirectLaunch` keeps, per signature and
alignment, the compiled kernel and its full argument list, and a call only substitutes the tensors
and calls the C launcher.

It depends on how `JITFunction.run` calls the launcher, which differs between Triton releases
(`kernel.run(grid_0, grid_1, grid_2, stream, function, packed_metadata, launch_metadata,
enter_hook, exit_hook, *all_bound_arguments)` in the releases read for this module). `prepare`
checks for that form in the installed Triton's own `run` and returns None (the caller keeps the
ordinary launch) where it is not found, under the interpreter, with launch hooks installed (a
profiler's), or when the binder's argument list does not match the one sdc built. `SDC_TRITON_DIRECT=0`
turns it off.
"""

from __future__ import annotations

import inspect
import os
from typing import Any

import torch

DIRECT_ENV = "SDC_TRITON_DIRECT"
ALIGN = 16  # bytes: the pointer alignment Triton specializes on


def enabled() -> bool:
    return os.environ.get(DIRECT_ENV, "").strip().lower() not in ("0", "false", "off", "no")


_FORM: list[bool] = []  # memo of `_launcher_form_known()`


def _launcher_form_known() -> bool:
    """Whether the installed Triton's `JITFunction.run` launches as this module does (see above)."""
    if not _FORM:
        try:
            from triton.runtime.jit import JITFunction

            source = inspect.getsource(JITFunction.run)
            _FORM.append("kernel.run(grid_0, grid_1, grid_2, stream, kernel.function, kernel.packed_metadata" in source
                         and "*bound_args.values())" in source)
        except (ImportError, OSError, TypeError):
            _FORM.append(False)
    return _FORM[0]


def _hooks_installed() -> bool:
    try:
        from triton import knobs
    except ImportError:
        return True  # no knobs: an older Triton whose hooks live elsewhere; do not bypass them
    return any(_hook_set(h) for h in (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook))


def _hook_set(hook: Any) -> bool:
    """Whether a launch hook does something: triton 3.6 keeps a `HookChain` there always, empty unless
    a profiler added a call to it; a plain callable (other releases) is a hook."""
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)
    return bool(calls) if isinstance(calls, list) else True


def alignment(tensors: list[torch.Tensor]) -> tuple[bool, ...]:
    return tuple(t.data_ptr() % ALIGN == 0 for t in tensors)


class DirectLaunch:
    """One compiled kernel with its argument list, for the calls of one signature and alignment."""

    def __init__(self, kernel: Any, args: list, tensor_at: tuple[int, ...], grid: tuple[int, int, int],
                 device_index: int):
        self.run = kernel.run
        self.function = kernel.function
        self.packed = kernel.packed_metadata
        self.args = args
        self.tensor_at = tensor_at
        self.grid = grid
        self.device_index = device_index

    def __call__(self, tensors: list[torch.Tensor], stream: Any) -> None:
        args = list(self.args)
        for i, t in zip(self.tensor_at, tensors):
            args[i] = t
        handle = stream.cuda_stream if stream is not None else torch._C._cuda_getCurrentRawStream(self.device_index)
        g0, g1, g2 = self.grid
        self.run(g0, g1, g2, handle, self.function, self.packed, None, None, None, *args)


# why `prepare` kept the ordinary launch, with how often (tests and `bench/` print it)
declined: dict[str, int] = {}


def _decline(reason: str, launched: bool) -> tuple[None, bool]:
    declined[reason] = declined.get(reason, 0) + 1
    return None, launched


def prepare(fn: Any, params: list, constexprs: dict, num_warps: int, grid: tuple[int, ...],
            tensors: list[torch.Tensor]) -> tuple[DirectLaunch | None, bool]:
    """Launch `fn[grid](*params, **constexprs, num_warps=...)` the ordinary way, and return the direct
    launch of later calls with the same arguments but other tensors (None where it does not apply,
    see the module docstring), and whether this call launched the kernel (False: nothing ran, the
    caller launches)."""
    if not (enabled() and tensors and all(t.is_cuda for t in tensors)) or os.environ.get("TRITON_INTERPRET") == "1":
        return _decline("off, or not all tensors on cuda, or interpreting", False)
    if not _launcher_form_known():
        return _decline("this Triton's JITFunction.run launches in another form", False)
    if _hooks_installed():
        return _decline("launch hooks installed", False)
    kernel = fn[grid](*params, **constexprs, num_warps=num_warps)
    try:
        device_index = torch.cuda.current_device()
        binder = fn.device_caches[device_index][-1]
        bound, _, _ = binder(*params, **constexprs, num_warps=num_warps)
        args = list(bound.values())
        tensor_at = tuple(i for i, a in enumerate(args) if isinstance(a, torch.Tensor))
        ours = [p for p in params if isinstance(p, torch.Tensor)]
        if len(tensor_at) != len(ours) or any(args[i] is not t for i, t in zip(tensor_at, ours)):
            return _decline("the binder's arguments differ from sdc's", True)
        if not all(hasattr(kernel, a) for a in ("run", "function", "packed_metadata")):
            return _decline(f"the launch returned {type(kernel).__name__}, not a compiled kernel", True)
        full = tuple(grid) + (1,) * (3 - len(grid))
        return DirectLaunch(kernel, args, tensor_at, full[:3], device_index), True
    except Exception as e:  # anything unexpected in Triton's internals: keep the ordinary launch
        return _decline(f"{type(e).__name__}: {e}"[:200], True)
