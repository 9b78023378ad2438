"""On/off settings read from the environment (SDC_C_KERNELS, SDC_C_SEGMENTS, SDC_KEEP_PAGES, SDC_ARENA): one reader,
one error for a value that is neither."""

from __future__ import annotations

import os

from sdc.diagnostics import SdcError


def env_switch(name: str) -> bool | None:
    """True for 1/on/true/yes, False for 0/off/false/no (any case, spaces around), None when `name` is
    unset or empty; anything else is one error naming the setting and its value."""
    text = os.environ.get(name, "").strip().lower()
    if text in ("1", "on", "true", "yes"):
        return True
    if text in ("0", "off", "false", "no"):
        return False
    if text:
        raise SdcError(f"{name}={os.environ[name]!r} is not one of 1, on, 0, off")
    return None
