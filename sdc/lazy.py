"""Modules imported on first use, so that each command pays at start-up only for what it runs.

`import torch` takes about 1.2 s, four times what `sdc-opt` needs to start (numpy and the MLIR
bindings, about 0.25 s). Yet torch is named at the top of many modules that `sdc-opt` and
`sdc inspect` load without running any torch code: the op tables (their reference functions run
only when the interpreter or the CPU executor executes an op), `sdc.dtypes`, and the runtime
package face. Those modules bind torch with

    if TYPE_CHECKING:             # type checkers see the real module
        import torch
    else:
        torch = lazy_import("torch")

instead of `import torch`. The code that uses them reads exactly as before (`torch.add(x, y)`,
`F.conv2d(...)`, `isinstance(v, torch.Tensor)`): the first attribute read imports the real module,
and every read after that is forwarded to it. One line per file, in place of moving an import
into each of a few hundred small reference functions.

Once imported, the stand-in steps aside: the first attribute read rebinds the name in every module
that called `lazy_import` (the stand-in remembers their globals) to the real module, so later reads
are plain module attribute reads. Forwarding each read through `__getattr__` had cost about 0.1 us
per read, several reads per op reference function: on the small transformers of the CPU bench
(a few hundred ops per call) a few percent of a call. A stand-in kept elsewhere (a closure, another
module's `from ... import torch`) still forwards, just more slowly.

The rule that comes with it: module-level code must not read an attribute of a lazy module
(that would import it at once). Tables of torch functions hold lambdas or names instead, and
type annotations stay strings (`from __future__ import annotations`).
`test/py/test_startup.py` checks that `sdc-opt` and `sdc inspect` run without importing torch.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


class LazyModule:
    """Stands for the module `name` and imports it when one of its attributes is first read."""

    __slots__ = ("_name", "_module", "_homes")

    def __init__(self, name: str, homes: tuple[dict[str, Any], ...] = ()) -> None:
        self._name = name
        self._module: types.ModuleType | None = None
        self._homes = homes  # the globals of the modules that bound this stand-in; rebound on import

    # No methods of its own besides dunders: any other name (even `load`: `torch.load`) is the module's.
    def __getattr__(self, attr: str) -> Any:
        # Only called for names that are not slots, i.e. the module's own attributes.
        module = self._module
        if module is None:
            module = _import(self)
        return getattr(module, attr)

    def __dir__(self) -> list[str]:
        return dir(resolve(self))

    def __repr__(self) -> str:
        state = "loaded" if self._module is not None else "not yet imported"
        return f"<lazy module '{self._name}' ({state})>"


def lazy_import(name: str) -> Any:
    """A stand-in for `import name` that defers the import to the first attribute read.

    Typed `Any` so that attribute reads on it type-check like reads on the module itself. The
    caller's globals are remembered, so that the import can rebind the caller's name to the module.
    """
    return LazyModule(name, (sys._getframe(1).f_globals,))


def _import(stand_in: LazyModule) -> types.ModuleType:
    """Import the module behind `stand_in`, and put it in place of the stand-in wherever a module that
    called `lazy_import` bound it at top level."""
    module = stand_in._module = importlib.import_module(stand_in._name)
    for home in stand_in._homes:
        for key, value in list(home.items()):
            if value is stand_in:
                home[key] = module
    stand_in._homes = ()
    return module


def resolve(module: Any) -> types.ModuleType:
    """The real module behind a lazy one (imported now if it was not yet); a real module as is."""
    if isinstance(module, LazyModule):
        return module._module if module._module is not None else _import(module)
    return module
