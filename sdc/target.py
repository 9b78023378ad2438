"""What each compile target can do: one registry that every target check reads.

A target is data: its name, the layouts its kernels prefer, the constants of the fusion cost
model, how its kernels are generated, its default precision, and whether sdc can compile and run
it yet. The driver, the passes' `target` options, the plan builder, the artifact reader and the
runtime all ask this registry; none keeps its own list. Adding a target is adding an entry here
(and, for the layout table, a look at `sdc.transforms.layout_model`).

MLIR-free and torch-free: the runtime imports it to check an artifact's target.
"""

from __future__ import annotations

from dataclasses import dataclass

from sdc.diagnostics import SdcError


@dataclass(frozen=True)
class LayoutPreference:
    """An op that runs faster in one layout kind on a target.

    `op` is an op name or family as the layout model's rules name them (`"convolution"`); `layout`
    is the kind it prefers (`"channels_last"` or `"row_major"`); running in the other kind costs
    `other_cost` times the op's memory traffic. `why` is what `sdc compile --explain layout` says
    about a cast this preference causes.
    """

    op: str
    layout: str
    other_cost: float
    why: str


@dataclass(frozen=True)
class Target:
    """One compile target and its capabilities.

    name                the name users give (`--target`, `target=`, pass options `{target=...}`)
    description         one line for help texts and docs
    preferred_layouts   the ops whose layout preference differs from the target-neutral rules
                        (sdc-layout-constraints builds its table from them)
    flops_per_byte      machine balance: the flops that cost as much as moving one byte (sdc-fuse
                        recomputes a cheap op only when it saves more traffic than this many flops)
    has_triton_backend  its kernels are generated as Triton source (False: the plan's kernel groups
                        run through their reference semantics, torch ops)
    has_c_backend       the kernel groups a template fits are generated as C, compiled on the host at
                        load (sdc/codegen/c); the others run through torch ops
    backends            its codegen backends, in the order the planner offers them a kernel group
                        (sdc/codegen/backends.py); the last, torch, takes every group as it is
    default_precision   the dtype floating-point math computes in unless the options say otherwise
    precisions          the precisions it compiles and runs (`--precision`); bf16/f16 run the
                        sdc-mixed-precision pass
    precision_not_yet   what the precisions it refuses wait for (shown in the refusal)
    supported           sdc can compile for it and its runtime can run the artifact, today
    not_yet             when not supported: what it waits for (shown in the refusal)
    device              the torch device type its artifacts run on (`sdc.compile` loads there)
    """

    name: str
    description: str
    preferred_layouts: tuple[LayoutPreference, ...]
    flops_per_byte: float
    has_triton_backend: bool
    default_precision: str
    supported: bool
    not_yet: str = ""
    device: str = "cpu"
    precisions: tuple[str, ...] = ("f32",)
    precision_not_yet: str = ""
    has_c_backend: bool = False
    backends: tuple[str, ...] = ("torch",)

    def check_supported(self) -> None:
        """SdcError unless sdc can compile for this target and run the result."""
        if self.supported:
            return
        able = " and ".join(f"'{name}'" for name in supported_targets())
        raise SdcError(f"target '{self.name}' is not supported yet: only {able} "
                       f"{'is' if len(supported_targets()) == 1 else 'are'} ({self.not_yet})")


_TARGETS: tuple[Target, ...] = (
    Target(
        name="cpu",
        description="the host CPU: generated C kernels where a template fits, torch CPU ops for the rest",
        preferred_layouts=(
            LayoutPreference("convolution", "channels_last", 1.0,
                             "torch's CPU convolutions (oneDNN) run channels-last about twice as fast as NCHW"),
        ),
        flops_per_byte=8.0,
        has_triton_backend=False,
        has_c_backend=True,
        backends=("c", "torch"),
        default_precision="f32",
        supported=True,
        # torch runs every op family sdc lowers (matmul, convolution, elementwise) in bf16 and f16 on the CPU
        precisions=("f32", "bf16", "f16"),
        precision_not_yet="tf32 is a mode of NVIDIA tensor cores; the CPU computes f32 as f32",
    ),
    Target(
        name="cuda",
        device="cuda",
        description="NVIDIA GPUs: generated Triton kernels (the rest as torch CUDA ops) and NCCL collectives",
        preferred_layouts=(
            LayoutPreference("convolution", "channels_last", 1.0,
                             "convolution prefers NHWC on cuda (tensor cores); NCHW costs a transpose inside"),
        ),
        flops_per_byte=20.0,
        has_triton_backend=True,
        backends=("cuda", "triton", "torch"),
        default_precision="f32",
        supported=True,
        # tf32: generated f32 matmuls pass input_precision="tf32" to tl.dot; reference groups (torch ops)
        # keep computing f32 exactly, which tf32 permits
        precisions=("f32", "tf32", "bf16", "f16"),
    ),
)

TARGETS: dict[str, Target] = {t.name: t for t in _TARGETS}
"""Every target by name, in the order help texts list them."""

DEFAULT_TARGET = "cpu"
"""What the driver, `sdc compile` and the passes' `target` options use when none is given."""


def target_names() -> tuple[str, ...]:
    return tuple(TARGETS)


def supported_targets() -> tuple[str, ...]:
    """The targets sdc compiles for and runs today."""
    return tuple(name for name, t in TARGETS.items() if t.supported)


def unknown_target(name: str) -> str:
    """The one message for a target name the registry does not know."""
    return f"unknown target '{name}' (targets: {', '.join(TARGETS)})"


def target_option_error(pass_name: str, found: str) -> str:
    """The message of a pass whose `target` option names no target (sdc-opt prints it, exit 1)."""
    return f"pass '{pass_name}' option 'target': {unknown_target(found)}"


def get_target(name: str) -> Target:
    """The target called `name`; SdcError for a name the registry does not know."""
    target = TARGETS.get(name) if isinstance(name, str) else None
    if target is None:
        raise SdcError(unknown_target(name))
    return target
