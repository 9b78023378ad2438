"""How the C library's allocator treats a CPU executable's intermediates (`keep_freed_pages`).

A CPU call allocates its intermediates through torch, which takes them from malloc and gives them back
at the end of their lives. glibc serves an allocation above its mmap threshold (128 KB at first) with
fresh pages from the kernel and gives them back when it is freed; it raises that threshold as it sees
such blocks freed, and trims the top of its heap past twice that of free memory. Where a call's sizes
keep tripping those, it asks the kernel for the same megabytes every call and faults them in page by
page: ShuffleNet (1 thread) made 650 page faults a call, its first convolution took 815 us (403 with
the pages kept) and its first channel shuffle 619 (146); the call 7.0 -> 5.8 ms. onnxruntime keeps its
own arena and pays none of it.

So loading a CPU executable sets glibc's mmap threshold to its maximum (32 MB: larger blocks still come
from mmap) and its trim threshold to `TRIM_THRESHOLD`: freed intermediates stay mapped and the next
call reuses them. The process's peak memory is what it was; what the process holds between calls is
that peak rather than less. Set for the whole process, once. Left alone where the C library is not
glibc, where the caller set glibc's own `MALLOC_MMAP_THRESHOLD_` / `MALLOC_TRIM_THRESHOLD_`, or with
`SDC_KEEP_PAGES=0`.
"""

from __future__ import annotations

import ctypes
import os

from sdc.runtime.switches import env_switch

KEEP_PAGES_ENV = "SDC_KEEP_PAGES"
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 << 20  # glibc's largest (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit hosts)
TRIM_THRESHOLD = 1 << 30

_done: list[bool] = []  # [whether the settings took], once per process


def keep_pages_enabled() -> bool:
    """SDC_KEEP_PAGES (read when a CPU executable is loaded): unset or 1/on, or 0/off."""
    return env_switch(KEEP_PAGES_ENV) is not False


def keep_freed_pages() -> bool:
    """Set glibc's thresholds (module docstring) unless told not to; whether they are set."""
    if not keep_pages_enabled():
        return False
    if _done:
        return _done[0]
    ok = False
    if not any(name in os.environ for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        try:
            mallopt = ctypes.CDLL(None).mallopt  # glibc's; other C libraries have none of that name
        except (AttributeError, OSError):
            mallopt = None
        if mallopt is not None and os.uname().sysname == "Linux":
            mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
            ok = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    _done.append(ok)
    return ok
