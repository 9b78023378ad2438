"""Synthesized weights: an artifact compiled with `--weights none` carries no large weight data.

Large models need not travel to the GPU host: the writer (`sdc.codegen.artifact`) leaves every
floating-point weight of at least `MIN_ELEMENTS` elements out of the weights file and lists it in
the manifest's `weights` section instead, with its shape, dtype and an init rule; the loader makes
it from the section's seed. Small tensors (biases of narrow layers, scalars, folded constants) and
every integer or bool tensor stay in the file: they are cheap, and randomizing an index table or an
epsilon would change what the program means rather than just its numbers.

Init rules (chosen at compile time, recorded per tensor, so the manifest says what each weight is):
- rank >= 2 (matrices, convolution kernels, embeddings): `normal`, mean 0, std 0.02;
- rank <= 1 whose name reads like a norm scale (`norm`, `ln`, `gamma`, `scale` without `bias` or
  `beta`): `ones`;
- any other rank <= 1 tensor (biases, shifts): `zeros`.
The reader also accepts `uniform` (bound `b`: U(-b, b)) for manifests that ask for it.

Determinism: each tensor is drawn from its own `torch.Generator` on the CPU, seeded from SHA-256 of
(seed, weight name), in float32, then cast to its dtype and moved to the load device. So a tensor
depends only on the seed, its name, shape, dtype and rule: the same seed gives bit-identical
weights on every device type and in every process, whatever else the artifact holds.

MLIR-free (the runtime imports it). Every problem is one SdcError line.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import TYPE_CHECKING, Any, Callable

from sdc import dtypes
from sdc.diagnostics import SdcError
from sdc.limits import MAX_DIM, MAX_RANK, check_elements

if TYPE_CHECKING:
    import torch
else:
    from sdc.lazy import lazy_import

    torch = lazy_import("torch")

MIN_ELEMENTS = 1024  # smaller tensors stay in the weights file (4 KiB in f32)
NORMAL_STD = 0.02
INITS = ("normal", "uniform", "ones", "zeros")
GENERATOR = "torch-cpu-per-tensor-sha256"  # the manifest names how tensors were drawn
_SCALE_NAME = re.compile(r"(norm|(^|[._/])ln|gamma|scale)", re.IGNORECASE)
_SHIFT_NAME = re.compile(r"(bias|beta)", re.IGNORECASE)
_MAX_PARAM = 1e6  # a std or bound above this is a tampered manifest, not a model


# ---------------------------------------------------------------- the writer's side


def should_synthesize(dtype: str, shape: list[Any]) -> bool:
    """Whether a weight of this plan dtype and shape is left out of the file (static, float, large)."""
    if not dtypes.is_float(dtype) or not all(isinstance(d, int) for d in shape):
        return False
    return math.prod(shape) >= MIN_ELEMENTS


def init_rule(name: str, shape: list[int]) -> dict[str, Any]:
    """The init rule a weight gets (see the module docstring)."""
    if len(shape) >= 2:
        return {"init": "normal", "mean": 0.0, "std": NORMAL_STD}
    if _SCALE_NAME.search(name) and not _SHIFT_NAME.search(name):
        return {"init": "ones"}
    return {"init": "zeros"}


# ---------------------------------------------------------------- the reader's side


def check_section(section: Any, world_size: int, bad: Callable[[str], SdcError]) -> None:
    """The manifest's `weights` section is well-formed: seed, generator, one table per rank, every
    tensor a float dtype with a static shape and a known rule with finite parameters."""
    if not isinstance(section, dict) or section.get("synthesized") is not True:
        raise bad(f"field 'weights' must be {{\"synthesized\": true, \"seed\": N, ...}}, found {_short(section)}")
    seed = section.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise bad(f"weights.seed must be an integer from 0 to 2**63-1, found {_short(seed)}")
    if section.get("generator") != GENERATOR:
        raise bad(f"weights.generator must be \"{GENERATOR}\", found {_short(section.get('generator'))}")
    ranks = section.get("ranks")
    if not isinstance(ranks, list) or len(ranks) != world_size or not all(isinstance(r, dict) for r in ranks):
        raise bad(f"weights.ranks must be a list of {world_size} objects (one per rank), found {_short(ranks)}")
    for rank, table in enumerate(ranks):
        for name, spec in table.items():
            check_spec(spec, f"weights.ranks[{rank}]['{name}']", bad)


def check_spec(spec: Any, where: str, bad: Callable[[str], SdcError]) -> None:
    if not isinstance(spec, dict):
        raise bad(f"{where} must be an object, found {_short(spec)}")
    dtype, shape, init = spec.get("dtype"), spec.get("shape"), spec.get("init")
    if not isinstance(dtype, str) or not dtypes.is_known(dtype) or not dtypes.is_float(dtype):
        raise bad(f"{where} has dtype {_short(dtype)}: only floating-point weights are synthesized")
    if (not isinstance(shape, list) or len(shape) > MAX_RANK
            or not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_DIM for d in shape)):
        raise bad(f"{where} shape must be a list of at most {MAX_RANK} sizes, found {_short(shape)}")
    if init not in INITS:
        raise bad(f"{where} has init {_short(init)} (known: {', '.join(INITS)})")
    params = {"normal": ("mean", "std"), "uniform": ("bound",)}.get(init, ())
    for key in params:
        value = spec.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or abs(value) > _MAX_PARAM or (key != "mean" and value < 0):
            raise bad(f"{where}: '{key}' must be a finite non-negative number (mean: any finite), found "
                      f"{_short(value)}")


def tensor_seed(seed: int, name: str) -> int:
    """The generator seed of one tensor: independent of every other tensor and of the order."""
    digest = hashlib.sha256(f"sdc-synth:{seed}:{name}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def synthesize(name: str, spec: dict[str, Any], seed: int) -> torch.Tensor:
    """One weight on the CPU, from its checked spec (check_spec) and the artifact's seed; the
    allocation limit (SDC_MAX_ALLOC) applies, as to any tensor an artifact declares."""
    shape = [int(d) for d in spec["shape"]]
    check_elements(shape, dtypes.itemsize(spec["dtype"]), f"synthesized weight '{name}'")
    init = spec["init"]
    if init == "ones":
        return torch.ones(shape, dtype=dtypes.to_torch(spec["dtype"]))
    if init == "zeros":
        return torch.zeros(shape, dtype=dtypes.to_torch(spec["dtype"]))
    generator = torch.Generator(device="cpu").manual_seed(tensor_seed(seed, name))
    t = torch.empty(shape, dtype=torch.float32)
    if init == "normal":
        t.normal_(float(spec["mean"]), float(spec["std"]), generator=generator)
    else:
        t.uniform_(-float(spec["bound"]), float(spec["bound"]), generator=generator)
    return t.to(dtypes.to_torch(spec["dtype"]))


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."
