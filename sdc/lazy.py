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

The rule that comes with it: module-level code must not read an attribute of a lazy module
(that would import it at once). Tables of torch functions hold lambdas or names instead, and
type annotations stay strings (`from __future__ import annotations`).
`test/py/test_startup.py` checks that `sdc-opt` and `sdc inspect` run without importing torch.
"""

from __future__ import annotations

import importlib
import types
from typing import Any


class LazyModule:
    """Stands for the module `name` and imports it when one of its attributes is first read."""

    __slots__ = ("_name", "_module")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: types.ModuleType | None = None

    # No methods of its own besides dunders: any other name (even `load`: `torch.load`) is the module's.
    def __getattr__(self, attr: str) -> Any:
        # Only called for names that are not slots, i.e. the module's own attributes.
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attr)

    def __dir__(self) -> list[str]:
        return dir(resolve(self))

    def __repr__(self) -> str:
        state = "loaded" if self._module is not None else "not yet imported"
        return f"<lazy module '{self._name}' ({state})>"


def lazy_import(name: str) -> Any:
    """A stand-in for `import name` that defers the import to the first attribute read.

    Typed `Any` so that attribute reads on it type-check like reads on the module itself.
    """
    return LazyModule(name)


def resolve(module: Any) -> types.ModuleType:
    """The real module behind a lazy one (imported now if it was not yet); a real module as is."""
    if isinstance(module, LazyModule):
        if module._module is None:
            module._module = importlib.import_module(module._name)
        return module._module
    return module
