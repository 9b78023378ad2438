"""Shape rules' vocabulary: dims, tensor specs, and the context a rule reports to.

A shape rule is a plain function `rule(ctx, inputs, attrs) -> [TensorSpec]`.
Dims are ints (static) or `DYN` (unknown at compile time; its arithmetic lives with the rest of
the symbolic algebra in sdc/dialect/symbolic.py); arithmetic on DYN gives DYN, so a rule reads
like the formula it implements:

    out = (size + pad - dilation * (k - 1) - 1) // stride + 1

Rules never compare dims themselves: they call `ctx.equal` / `ctx.divisible` /
`ctx.positive`, and compute what needs more than `+ - * //` through the context
(`ctx.broadcast`, `ctx.slice_len`, `ctx.product`, `ctx.exact_div`, `ctx.window`). The
verifier turns them into errors when static dims disagree; the shape-constraint pass
(sdc/transforms/shape_constraints.py) subclasses the context to record relations
between symbolic dims.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from sdc.dialect.symbolic import DYN, Dim, is_static  # noqa: F401 (the rules' vocabulary: public here)


def block_transpose_indices(a: int, b: int) -> list[int]:
    """The source index of each position of a dim of a*b split into [a, b], transposed and joined (a
    channel shuffle): position j = i_b * a + i_a reads i_a * b + i_b. sdc-canonicalize writes a
    shuffle as a gather by these; the CPU executor recognizes them."""
    return [(j % a) * b + j // a for j in range(a * b)]


def ceil_div(a, b):
    return -((-a) // b)


def window_out(size, k, stride, pad_begin, pad_end, dilation, ceil_mode=False):
    """Output length of a sliding window (convolution and pooling, ONNX/torch arithmetic), static dims."""
    span = dilation * (k - 1) + 1
    if not is_static(size) or not is_static(k):
        return DYN
    if ceil_mode:
        out = ceil_div(size + pad_begin + pad_end - span, stride) + 1
        if (out - 1) * stride >= size + pad_begin:
            out -= 1
        return out
    return (size + pad_begin + pad_end - span) // stride + 1


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple
    dtype: str

    @property
    def rank(self) -> int:
        return len(self.shape)

    def with_shape(self, shape: Sequence) -> "TensorSpec":
        return TensorSpec(tuple(shape), self.dtype)

    def with_dtype(self, dtype: str) -> "TensorSpec":
        return TensorSpec(self.shape, dtype)

    def __str__(self) -> str:
        dims = "x".join("?" if not is_static(d) else str(d) for d in self.shape)
        return f"tensor<{dims + 'x' if dims else ''}{self.dtype}>"


class ShapeError(Exception):
    """A shape rule found the operands or attributes inconsistent."""


class ShapeContext:
    """What a rule reports to. This base class checks static dims only."""

    def fail(self, message: str):
        raise ShapeError(message)

    def equal(self, a, b, message: str):
        """Require a == b; returns the better-known of the two."""
        if is_static(a) and is_static(b):
            if a != b:
                self.fail(message.format(a=a, b=b))
            return a
        return a if is_static(a) else b

    def divisible(self, a, b, message: str):
        if is_static(a) and is_static(b) and b != 0 and a % b != 0:
            self.fail(message.format(a=a, b=b))

    def slice_len(self, size, start: int, end: int, step: int):
        """Length of `[start:end:step]` along a dim that is not static (subclasses may know more)."""
        return DYN

    def positive(self, a, message: str):
        if is_static(a) and a < 1:
            self.fail(message.format(a=a))

    def product(self, dims: Sequence):
        """The product of `dims`: DYN unless all are static (subclasses multiply symbolic dims)."""
        total = 1
        for d in dims:
            if not is_static(d):
                return DYN
            total *= d
        return total

    def exact_div(self, a, b, message: str):
        """a / b, requiring b to divide a; DYN unless both are static (subclasses record the requirement)."""
        if not (is_static(a) and is_static(b)):
            return DYN
        if b == 0 or a % b:
            self.fail(message.format(a=a, b=b))
        return a // b

    def window(self, size, k, stride: int, pad_begin: int, pad_end: int, dilation: int, ceil_mode: bool = False):
        """Output length of a sliding window over `size` (see `window_out`); DYN for dims not static."""
        return window_out(size, k, stride, pad_begin, pad_end, dilation, ceil_mode)

    def broadcast(self, *shapes: Sequence, names: Sequence[str] = ()) -> tuple:
        """Numpy broadcasting of several shapes."""
        rank = max((len(s) for s in shapes), default=0)
        out = []
        for i in range(rank):
            dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
            result = 1
            for d in dims:
                if is_static(d) and d == 1:
                    continue
                if is_static(result) and result == 1:
                    result = d
                elif is_static(result) and is_static(d):
                    if result != d:
                        self.fail(f"operand shapes are not broadcast-compatible: {_fmt_shapes(shapes, names)}")
                else:
                    result = d if is_static(d) else result
            out.append(result)
        return tuple(out)

    def axis(self, axis: int, rank: int, what: str = "axis") -> int:
        if not -rank <= axis < rank:  # a scalar has no axis at all
            self.fail(f"{what} {axis} is out of range for rank {rank}")
        return axis % rank

    def axes(self, axes: Sequence[int], rank: int, what: str = "axes") -> list[int]:
        item = "axis" if what == "axes" else what.removesuffix("s")
        norm = [self.axis(a, rank, item) for a in axes]
        if len(set(norm)) != len(norm):
            self.fail(f"{what} {list(axes)} repeat an axis")
        return norm


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """Numpy broadcasting of concrete shapes, for reference functions at run time.

    Not `torch.broadcast_shapes`: its first call imports torch.fx's symbolic-shapes machinery
    (0.5-1 s, inside the first call of an executable). Raises ValueError if they do not broadcast.
    """
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for shape in shapes:
        for i, d in enumerate(shape, rank - len(shape)):
            d = int(d)
            if d == 1 or d == out[i]:
                continue
            if out[i] != 1:
                raise ValueError(f"shapes {' and '.join(str(list(s)) for s in shapes)} do not broadcast")
            out[i] = d
    return tuple(out)


def _fmt_shapes(shapes, names) -> str:
    parts = []
    for i, s in enumerate(shapes):
        dims = "x".join(str(d) for d in s)
        name = names[i] if i < len(names) else f"#{i}"
        parts.append(f"{name} is [{dims}]")
    return ", ".join(parts)


def shape_str(shape: Sequence) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"
