"""What a kernel derives from its operands' shapes, kept per shape instead of derived on every call."""

from __future__ import annotations

from typing import Any, Callable

KEPT = 64  # keys a store holds (a symbolic size gives each call a new one: past this, the store starts over)


def kept(store: dict, key: Any, make: Callable[..., Any], *args: Any) -> Any:
    """`make(*args)` for `key`, made on the first call of that key and kept in `store` (None included)."""
    known = store.get(key, store)
    if known is store:
        if len(store) >= KEPT:
            store.clear()
        known = store[key] = make(*args)
    return known
