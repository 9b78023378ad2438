"""On/off settings read from the environment (SDC_C_KERNELS, SDC_C_SEGMENTS, SDC_KEEP_PAGES, SDC_ARENA): one reader,
one error for a value that is neither."""

from __future__ import annotations

import os

from sdc.diagnostics import SdcError


C_KERNELS_ENV = "SDC_C_KERNELS"  # 0/off: no C kernels planned (its compile option's default), none loaded


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


def c_kernels_enabled() -> bool:
    """False when SDC_C_KERNELS is 0/off/false/no: the default of the compile option `c_kernels`, and
    at load every C launch then runs through torch; another value than those and 1/on is one error."""
    return env_switch(C_KERNELS_ENV) is not False
