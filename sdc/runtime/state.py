"""State: entry inputs that the runtime keeps resident and rebinds after each call (a training step).

The manifest's `entry.state` lists them (written by the planner from the `sdc.state` input
attributes that sdc-optimizer-step sets; docs/artifact.md):

    "state": [{"name": "0.weight", "input": "0.weight", "output": "next.0.weight",
               "dtype": "f32", "shape": [16, 8], "weight": "state/0.weight"}, ...]

`input` and `output` name an entry input and the output that holds its next value; `weight` names
its initial value in the rank's weights file. `check_state` validates the table when the artifact
is read. `StatefulProgram` wraps a loaded `Executable`: it holds each state tensor on the device,
feeds it as its input on every call and then rebinds the name to the output (the new value replaces
the old one, which is dropped: no copy), and returns only the outputs that update no state.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from sdc import dtypes
from sdc.diagnostics import SdcError

if TYPE_CHECKING:
    import torch

    from sdc.runtime import Executable


@dataclass(frozen=True)
class StateSlot:
    name: str
    input: str
    output: str
    dtype: str
    shape: tuple[int, ...]
    weight: str


_FIELDS = ("name", "input", "output", "dtype", "weight")


def check_state(entry: dict, bad: Callable[[str], SdcError]) -> list[StateSlot]:
    """The manifest entry's state table, checked against its inputs and outputs (each state names one
    input and one output of its dtype and static shape; no input or output is used twice)."""
    raw = entry.get("state", [])
    if not isinstance(raw, list):
        raise bad(f"field 'entry.state' must be a list, found {type(raw).__name__}")
    inputs = {t["name"]: t for t in entry["inputs"]}
    outputs = {t["name"]: t for t in entry["outputs"]}
    slots: list[StateSlot] = []
    seen: set[tuple[str, str]] = set()
    for i, s in enumerate(raw):
        where = f"entry.state[{i}]"
        if not isinstance(s, dict) or not all(isinstance(s.get(k), str) for k in _FIELDS):
            raise bad(f"{where} must have string fields {', '.join(_FIELDS)}")
        shape = s.get("shape")
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                  for d in shape):
            raise bad(f"{where} ('{s['name']}') shape must be a list of sizes, found {shape!r}")
        for kind, table in (("input", inputs), ("output", outputs)):
            desc = table.get(s[kind])
            if desc is None:
                raise bad(f"{where} ('{s['name']}') names {kind} '{s[kind]}', which the entry does not have")
            if desc["dtype"] != s["dtype"] or desc["shape"] != shape:
                raise bad(f"{where} ('{s['name']}') is {s['dtype']}{shape}, its {kind} '{s[kind]}' is "
                          f"{desc['dtype']}{desc['shape']}")
            if (kind, s[kind]) in seen:
                raise bad(f"{where} ('{s['name']}'): {kind} '{s[kind]}' belongs to two states")
            seen.add((kind, s[kind]))
        slots.append(StateSlot(s["name"], s["input"], s["output"], s["dtype"], tuple(shape), s["weight"]))
    if len({s.name for s in slots}) != len(slots):
        raise bad("entry.state names one state twice")
    return slots


class StatefulProgram:
    """A loaded executable whose state lives here, on its device, across calls (see the module doc)."""

    def __init__(self, exe: Executable):
        import torch

        self.exe = exe
        # A step reads the state and replaces it: steps from several threads run one at a time (re-entrant:
        # sdc.train.TrainStep holds it around its own counters and the call).
        self.lock = threading.RLock()
        artifact = exe.artifact
        self.slots = check_state(artifact.manifest["entry"], lambda m: artifact.error("manifest.json", m))
        if not self.slots:
            raise SdcError(f"artifact '{artifact.root}' has no state: it is not a training step")
        by_input = {s.input: s for s in self.slots}
        self._order = [by_input.get(t.name) for t in exe.inputs]  # per input: its state, or None
        self.inputs = [t for t, s in zip(exe.inputs, self._order) if s is None]
        updates = {s.output for s in self.slots}
        out_names = [t.name for t in exe.outputs]
        self._out_index = {s.name: out_names.index(s.output) for s in self.slots}
        self._plain_outputs = [i for i, n in enumerate(out_names) if n not in updates]
        self.outputs = [exe.outputs[i] for i in self._plain_outputs]
        weights = artifact.load_weights(exe.rank)
        self.state: dict[str, torch.Tensor] = {}
        for s in self.slots:
            if s.weight not in weights:
                raise artifact.error("plan.json", f"state '{s.name}' starts from weight '{s.weight}', which is not "
                                                  "in the weights file")
            self.state[s.name] = self._checked(s, weights[s.weight], "weight " + repr(s.weight))

    def _checked(self, slot: StateSlot, t: torch.Tensor, what: str) -> torch.Tensor:
        got = dtypes.from_torch(t.dtype)
        if got != slot.dtype or tuple(t.shape) != slot.shape:
            raise SdcError(f"state '{slot.name}': {what} is {got}{list(t.shape)}, the program's state is "
                           f"{slot.dtype}{list(slot.shape)}")
        return t.detach().to(self.exe.device).clone()

    def load_state(self, tensors: dict[str, torch.Tensor], what: str = "the given value") -> None:
        """Replace every state tensor (all must be given, with the program's dtypes and shapes)."""
        missing = [s.name for s in self.slots if s.name not in tensors]
        if missing:
            raise SdcError(f"no value for state '{missing[0]}' in {what}")
        state = {s.name: self._checked(s, tensors[s.name], what) for s in self.slots}
        with self.lock:
            self.state = state

    def __call__(self, *args: Any, **named: Any) -> list:
        """Run on the non-state inputs (by position, then by name; moved to the program's device, where the
        state is); returns the outputs that update no state."""
        with self.lock:
            return self._step(list(args), dict(named))

    def _step(self, args: list, named: dict) -> list:
        import torch

        full = []
        for info, slot in zip(self.exe.inputs, self._order):
            if slot is not None:
                full.append(self.state[slot.name])
            elif info.name in named:
                full.append(_tensor(named.pop(info.name), self.exe.device))
            elif args:
                full.append(_tensor(args.pop(0), self.exe.device))
            else:
                raise SdcError(f"missing input '{info.name}' (inputs: {', '.join(t.name for t in self.inputs)})")
        if args or named:
            extra = ", ".join(list(named)) or f"{len(args)} more by position"
            raise SdcError(f"too many inputs: {extra} (inputs: {', '.join(t.name for t in self.inputs)})")
        with torch.inference_mode():
            outs = self.exe(*full)
        for s in self.slots:  # donation: the new value takes the name; the old tensor is dropped
            self.state[s.name] = outs[self._out_index[s.name]]
        return [outs[i] for i in self._plain_outputs]


def _tensor(x: Any, device: torch.device) -> torch.Tensor:
    import torch

    return (x if isinstance(x, torch.Tensor) else torch.as_tensor(x)).to(device)
