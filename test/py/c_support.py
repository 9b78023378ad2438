"""Shared by the tests of sdc's C kernels: whether this host has a C compiler they can be built with."""

from __future__ import annotations

import pytest

from sdc.runtime.launch.c import compiler


def _have_compiler() -> bool:
    try:
        compiler()
    except Exception:  # noqa: BLE001 - no C compiler on this host (or one that does not run)
        return False
    return True


needs_c_compiler = pytest.mark.skipif(not _have_compiler(), reason="no C compiler")
