"""sdc's passes. `PASSES` maps each pipeline name to a lazy factory returning the pass class."""

from __future__ import annotations

from typing import Callable


def _verify():
    from sdc.transforms.verify import VerifyPass

    return VerifyPass


def _canonicalize():
    from sdc.transforms.canonicalize import CanonicalizePass

    return CanonicalizePass


PASSES: dict[str, Callable[[], type]] = {
    "sdc-verify": _verify,
    "sdc-canonicalize": _canonicalize,
}


def get_pass(name: str) -> type:
    return PASSES[name]()
