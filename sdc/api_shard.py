"""`sdc.shard(tensor, *dims)`: say how a tensor is split over the device mesh, inside a model.

In a PyTorch module exported to ONNX with `torch.onnx.export(..., dynamo=False)`:

    class Block(torch.nn.Module):
        def forward(self, x):
            x = sdc.shard(x, "dp", None, None)          # batch split over dp, the rest whole
            h = sdc.shard(self.fc1(x), "dp", None, "tp")
            ...

Each dim takes None (whole), a mesh axis name ("tp") or several ("dp,tp" or ("dp", "tp"), the first
major); `partial=("tp",)` says the value is a partial sum over those axes. In eager PyTorch it
returns the tensor unchanged; exported, it leaves an `sdc::Shard` node that the ONNX importer turns
into an `sdc.shard` op, a user annotation that sharding propagation keeps before every default.
On anything that is not a torch tensor it returns the value unchanged.
"""

from __future__ import annotations

from typing import Any, Sequence


def shard_spec(dims: Sequence[Any], partial: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """Per-dim axis lists as ONNX attribute strings ("" whole, "dp", "dp,tp") and the partial axes."""
    out = []
    for d in dims:
        if d is None or d == "" or d == "-":
            out.append("")
        elif isinstance(d, str):
            out.append(",".join(a.strip() for a in d.split(",") if a.strip()))
        elif isinstance(d, (list, tuple)) and all(isinstance(a, str) for a in d):
            out.append(",".join(d))
        else:
            raise TypeError(f"sdc.shard: a dim is None, a mesh axis name or a list of them, found {d!r}")
    return out, [str(a) for a in partial]


def shard(tensor, *dims: Any, partial: Sequence[str] = ()):
    """Annotate `tensor` with its sharding: one entry per dim (see the module docstring)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return tensor
    if not isinstance(tensor, torch.Tensor):
        return tensor
    spec, partial_axes = shard_spec(dims, partial)
    if len(spec) != tensor.dim():
        raise ValueError(f"sdc.shard: {len(spec)} dims given for a tensor of rank {tensor.dim()}")
    return _ShardFunction.apply(tensor, tuple(spec), tuple(partial_axes))


def _make_function():
    import torch

    class ShardFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, dims, partial):  # noqa: ARG004 (the annotation only matters in the export)
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            return grad, None, None

        @staticmethod
        def symbolic(g, x, dims, partial):
            extra = {"partial_s": list(partial)} if partial else {}
            return g.op("sdc::Shard", x, dims_s=list(dims), **extra).setType(x.type())

    return ShardFunction


class _Lazy:
    _fn = None

    def apply(self, *args):
        if _Lazy._fn is None:
            _Lazy._fn = _make_function()
        return _Lazy._fn.apply(*args)


_ShardFunction = _Lazy()
