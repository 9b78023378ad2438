"""Optimizers for `sdc.compile_train`: plain descriptions, and their update as graph code.

    opt = sdc.optim.AdamW(lr=3e-4, weight_decay=0.1, clip_grad_norm=1.0)
    step = sdc.compile_train(model, (x, y), loss=F.cross_entropy, optimizer=opt)

An optimizer here holds no tensors: it says which per-parameter state it keeps (`slots`: torch's
names, `exp_avg`, `exp_avg_sq`, `momentum_buffer`) and how one step updates a parameter and its
slots (`update`), written against the small builder the derivative rules use (`b.op(name, *values,
**attrs)`, `b.scalar(number, dtype)`): no MLIR here. `sdc-optimizer-step`
(sdc/transforms/optimizer_step.py) turns the parameters and slots into state of the entry function
and calls `update` once per parameter, so the update is part of the one compiled step.

The formulas are torch.optim's (single-tensor form, no foreach/fused), so a run matches torch eager
training to rounding: the learning rate is a step input (a rank-0 f32 `lr`, changed per call
without recompiling); the step counter `step` is state, incremented before the update, as torch
increments it before computing Adam's bias corrections. `clip_grad_norm` is
torch.nn.utils.clip_grad_norm_ over all trained parameters (the global 2-norm, coefficient
`min(max_norm / (norm + 1e-6), 1)`), applied to the gradients before the update.

`loss_scaler=LossScaler(...)` turns on dynamic loss scaling (what fp16 training needs, and what
`compile_train(..., precision="fp16")` turns on by default): torch.amp.GradScaler's rule, in the graph
(sdc-loss-scale and sdc-optimizer-step; docs/training.md, "Mixed precision").
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

from sdc.diagnostics import SdcError

CLIP_EPS = 1e-6  # what torch.nn.utils.clip_grad_norm_ adds to the norm


@dataclass(frozen=True)
class LossScaler:
    """Dynamic loss scaling, torch.amp.GradScaler's rule: the loss is multiplied by `scale` before
    the backward pass (so small fp16 gradients do not flush to zero) and the gradients divided by it
    after; a step whose gradients hold an inf or nan is skipped (parameters, slots and the step
    counter keep their values) and the scale is multiplied by `backoff_factor`; after
    `growth_interval` good steps in a row it is multiplied by `growth_factor`. The first scale is
    `init_scale`."""

    init_scale: float = 2.0 ** 16
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000

    def __post_init__(self) -> None:
        _check("loss_scaler", "init_scale", self.init_scale, minimum=0.0, strict=True)
        _check("loss_scaler", "growth_factor", self.growth_factor, minimum=1.0, strict=True)
        _check("loss_scaler", "backoff_factor", self.backoff_factor, minimum=0.0, strict=True)
        if self.backoff_factor >= 1.0:
            raise SdcError(f"sdc.optim (loss_scaler): backoff_factor must be < 1, found {self.backoff_factor!r}")
        if not isinstance(self.growth_interval, int) or isinstance(self.growth_interval, bool) or \
                self.growth_interval < 1:
            raise SdcError(f"sdc.optim (loss_scaler): growth_interval must be an integer >= 1, found "
                           f"{self.growth_interval!r}")


@dataclass(frozen=True)
class Optimizer:
    """What every optimizer has: the default learning rate, decay and clipping (None: no clipping)."""

    lr: float = 1e-3
    weight_decay: float = 0.0
    clip_grad_norm: float | None = None
    loss_scaler: LossScaler | None = None

    kind: ClassVar[str] = ""
    slots: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        _check(self.kind, "lr", self.lr, minimum=0.0)
        _check(self.kind, "weight_decay", self.weight_decay, minimum=0.0)
        if self.clip_grad_norm is not None:
            _check(self.kind, "clip_grad_norm", self.clip_grad_norm, minimum=0.0, strict=True)
        if self.loss_scaler is not None and not isinstance(self.loss_scaler, LossScaler):
            raise SdcError(f"sdc.optim ({self.kind}): loss_scaler must be an sdc.optim.LossScaler, found "
                           f"{type(self.loss_scaler).__name__}")

    def update(self, b: Any, param: Any, grad: Any, slots: dict[str, Any], lr: Any, step: Any) -> tuple[Any, dict]:
        """The new parameter and slots after one step; `lr` and `step` (already incremented) are
        rank-0 values of the parameter's dtype."""
        raise NotImplementedError

    def options(self) -> dict[str, Any]:
        """The fields, for the pass options and the manifest."""
        return {"optimizer": self.kind, **asdict(self)}


@dataclass(frozen=True)
class SGD(Optimizer):
    """torch.optim.SGD without dampening: `d = g + wd*p`; with momentum `buf = momentum*buf + d`
    (buf starts at zero, so the first step's buf is d, as torch's), `d = d + momentum*buf` (Nesterov)
    or `d = buf`; then `p = p - lr*d`."""

    momentum: float = 0.0
    nesterov: bool = False

    kind: ClassVar[str] = "sgd"

    def __post_init__(self) -> None:
        super().__post_init__()
        _check(self.kind, "momentum", self.momentum, minimum=0.0)
        if self.nesterov and self.momentum == 0:
            raise SdcError("sdc.optim.SGD: nesterov=True needs a momentum > 0 (as torch.optim.SGD)")

    @property
    def slots(self) -> tuple[str, ...]:  # type: ignore[override]
        return ("momentum_buffer",) if self.momentum else ()

    def update(self, b, param, grad, slots, lr, step):
        dtype = b.spec(param).dtype
        d = _decayed(b, grad, param, self.weight_decay, dtype)
        new = {}
        if self.momentum:
            buf = b.op("add", b.op("mul", slots["momentum_buffer"], b.scalar(self.momentum, dtype)), d)
            new["momentum_buffer"] = buf
            d = b.op("add", d, b.op("mul", buf, b.scalar(self.momentum, dtype))) if self.nesterov else buf
        return b.op("sub", param, b.op("mul", d, lr)), new


@dataclass(frozen=True)
class Adam(Optimizer):
    """torch.optim.Adam (amsgrad off): `g = g + wd*p`; `m = b1*m + (1-b1)*g`; `v = b2*v + (1-b2)*g*g`;
    `p = p - lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)`."""

    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    kind: ClassVar[str] = "adam"
    slots: ClassVar[tuple[str, ...]] = ("exp_avg", "exp_avg_sq")
    decoupled: ClassVar[bool] = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.betas) != 2:
            raise SdcError(f"sdc.optim.{type(self).__name__}: betas must be two numbers, found {self.betas!r}")
        object.__setattr__(self, "betas", (float(self.betas[0]), float(self.betas[1])))
        for i, beta in enumerate(self.betas):
            if not 0.0 <= beta < 1.0:
                raise SdcError(f"sdc.optim.{type(self).__name__}: betas[{i}] must be in [0, 1), found {beta}")
        _check(self.kind, "eps", self.eps, minimum=0.0)

    def update(self, b, param, grad, slots, lr, step):
        dtype = b.spec(param).dtype
        beta1, beta2 = self.betas
        if self.decoupled:  # AdamW: p = p * (1 - lr*wd), before the moment update
            if self.weight_decay:
                shrink = b.op("sub", b.scalar(1.0, dtype), b.op("mul", lr, b.scalar(self.weight_decay, dtype)))
                param = b.op("mul", param, shrink)
        else:
            grad = _decayed(b, grad, param, self.weight_decay, dtype)
        m = b.op("add", b.op("mul", slots["exp_avg"], b.scalar(beta1, dtype)),
                 b.op("mul", grad, b.scalar(1.0 - beta1, dtype)))
        v = b.op("add", b.op("mul", slots["exp_avg_sq"], b.scalar(beta2, dtype)),
                 b.op("mul", b.op("mul", grad, grad), b.scalar(1.0 - beta2, dtype)))
        one = b.scalar(1.0, dtype)
        correction1 = b.op("sub", one, b.op("pow", b.scalar(beta1, dtype), step))
        correction2 = b.op("sub", one, b.op("pow", b.scalar(beta2, dtype), step))
        step_size = b.op("div", lr, correction1)
        denom = b.op("add", b.op("div", b.op("sqrt", v), b.op("sqrt", correction2)), b.scalar(self.eps, dtype))
        new_param = b.op("sub", param, b.op("mul", b.op("div", m, denom), step_size))
        return new_param, {"exp_avg": m, "exp_avg_sq": v}


@dataclass(frozen=True)
class AdamW(Adam):
    """torch.optim.AdamW: Adam with decoupled weight decay (`p = p * (1 - lr*wd)` before the update);
    torch's default decay 0.01."""

    weight_decay: float = 0.01

    kind: ClassVar[str] = "adamw"
    decoupled: ClassVar[bool] = True


OPTIMIZERS: dict[str, type[Optimizer]] = {cls.kind: cls for cls in (SGD, Adam, AdamW)}


def from_options(options: dict[str, Any]) -> Optimizer:
    """The optimizer `Optimizer.options()` describes (what the pass and a checkpoint store)."""
    options = dict(options)
    kind = options.pop("optimizer", None)
    if kind not in OPTIMIZERS:
        raise SdcError(f"unknown optimizer {kind!r} (optimizers: {', '.join(OPTIMIZERS)})")
    cls = OPTIMIZERS[kind]
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise SdcError(f"optimizer '{kind}' has no option {unknown[0]!r} (options: {', '.join(sorted(known))})")
    if "betas" in options:
        options["betas"] = tuple(options["betas"])
    if isinstance(options.get("loss_scaler"), dict):
        options["loss_scaler"] = LossScaler(**options["loss_scaler"])
    return cls(**options)


def global_norm_scale(b: Any, grads: list[Any], max_norm: float, dtype: str) -> Any:
    """The factor clip_grad_norm_ multiplies every gradient by: min(max_norm / (||g|| + 1e-6), 1)."""
    total = None
    for g in grads:
        spec = b.spec(g)
        sq = b.op("mul", g, g)
        s = b.op("reduce_sum", sq, axes=list(range(spec.rank)), keepdims=False) if spec.rank else sq
        total = s if total is None else b.op("add", total, s)
    norm = b.op("sqrt", total)
    coef = b.op("div", b.scalar(max_norm, dtype), b.op("add", norm, b.scalar(CLIP_EPS, dtype)))
    return b.op("min", coef, b.scalar(1.0, dtype))


def _decayed(b: Any, grad: Any, param: Any, weight_decay: float, dtype: str) -> Any:
    """torch's coupled weight decay: g + wd * p."""
    if not weight_decay:
        return grad
    return b.op("add", grad, b.op("mul", param, b.scalar(weight_decay, dtype)))


def _check(kind: str, name: str, value: Any, *, minimum: float, strict: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and (
        value > minimum if strict else value >= minimum)
    if not ok:
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise SdcError(f"sdc.optim ({kind}): {name} must be a finite number {bound}, found {value!r}")
