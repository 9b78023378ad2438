"""sdc's attributes, and conversion between MLIR attributes and the plain values op tables use.

Textual forms (settled here, used by later passes):

    #sdc.layout<array<i64: 0, 2, 3, 1>>            physical dim order (logical dim at each position)
    #sdc.dims<["B", 3, "H", "W"]>                  symbolic dims of a tensor (ints static, strings named)
    #sdc.guard<"H % 2 == 0", "H must be even">     a run-time condition on the entry inputs
    #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>      device mesh: axis names and sizes
    #sdc.sharding<[["dp"], [], ["tp"]], ["tp"]>    per-dim mesh axes, then axes holding partial sums
"""

# No `from __future__ import annotations` here: dialects.ext reads the field annotations
# of the attribute classes below as live objects.

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from sdc import dtypes
from sdc.dialect.dense import DenseValue
from sdc.dialect.opdef import AttrSpec
from sdc.lazy import lazy_import
from sdc.mlir import ext, ir

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_import("torch")  # read only for dense constants (see sdc.lazy)


class Sdc(ext.Dialect, name="sdc"):
    pass


class LayoutAttr(Sdc.Attribute, name="layout"):
    perm: Any


class DimsAttr(Sdc.Attribute, name="dims"):
    dims: Any


class GuardAttr(Sdc.Attribute, name="guard"):
    condition: Any
    message: Any


class MeshAttr(Sdc.Attribute, name="mesh"):
    axes: Any
    sizes: Any


class ShardingAttr(Sdc.Attribute, name="sharding"):
    dims: Any
    partial: Any


class AttrError(Exception):
    pass


# ---------------------------------------------------------------- builders for sdc attributes


def layout(perm: list[int]) -> ir.Attribute:
    return LayoutAttr.get(ir.DenseI64ArrayAttr.get(list(perm)))


def dims(shape: list) -> ir.Attribute:
    return DimsAttr.get(_mixed_array(shape))


def guard(condition: str, message: str) -> ir.Attribute:
    return GuardAttr.get(ir.StringAttr.get(condition), ir.StringAttr.get(message))


def mesh(axes: dict[str, int]) -> ir.Attribute:
    return MeshAttr.get(ir.ArrayAttr.get([ir.StringAttr.get(a) for a in axes]),
                        ir.DenseI64ArrayAttr.get(list(axes.values())))


def sharding(dim_axes: list[list[str]], partial: list[str] = ()) -> ir.Attribute:
    per_dim = ir.ArrayAttr.get([ir.ArrayAttr.get([ir.StringAttr.get(a) for a in axes]) for axes in dim_axes])
    return ShardingAttr.get(per_dim, ir.ArrayAttr.get([ir.StringAttr.get(a) for a in partial]))


def read_mesh(attr: ir.Attribute) -> dict[str, int]:
    if not isinstance(attr, MeshAttr):
        raise AttrError(f"expected #sdc.mesh<...>, found {attr}")
    names = [_expect(a, ir.StringAttr, "mesh axis names as strings").value
             for a in _expect(attr.axes, ir.ArrayAttr, 'mesh axis names (["dp", "tp"])')]
    sizes = list(_expect(attr.sizes, ir.DenseI64ArrayAttr, "mesh sizes (array<i64: ...>)"))
    if len(names) != len(sizes):
        raise AttrError(f"mesh has {len(names)} axis names but {len(sizes)} sizes")
    return dict(zip(names, sizes))


def read_sharding(attr: ir.Attribute) -> tuple[list[list[str]], list[str]]:
    """(per-dim axis lists, partial axes) of a `#sdc.sharding<...>`. Raises AttrError."""
    if not isinstance(attr, ShardingAttr):
        raise AttrError(f'expected #sdc.sharding<[["dp"], []], []>, found {attr}')
    what = 'per-dim mesh axes ([["dp"], [], ["tp"]])'
    dims = []
    for d in _expect(attr.dims, ir.ArrayAttr, what):
        dims.append([_expect(a, ir.StringAttr, "mesh axis names as strings").value
                     for a in _expect(d, ir.ArrayAttr, what)])
    partial = [_expect(a, ir.StringAttr, "mesh axis names as strings").value
               for a in _expect(attr.partial, ir.ArrayAttr, 'partial-sum mesh axes (["tp"])')]
    return dims, partial


def read_dims(attr: ir.Attribute) -> list:
    if not isinstance(attr, DimsAttr):
        raise AttrError(f"expected #sdc.dims<...>, found {attr}")
    return _read_mixed_array(attr.dims)


# ---------------------------------------------------------------- op attribute kinds


def _mixed_array(values) -> ir.ArrayAttr:
    i64 = ir.IntegerType.get_signless(64)
    items = []
    for v in values:
        if isinstance(v, str):
            items.append(ir.StringAttr.get(v))
        else:
            items.append(ir.IntegerAttr.get(i64, int(v)))
    return ir.ArrayAttr.get(items)


def _read_mixed_array(attr) -> list:
    attr = _down(attr)
    if not isinstance(attr, ir.ArrayAttr):
        raise AttrError(f"expected an array of ints and symbol names, found {attr}")
    out = []
    for item in attr:
        item = _down(item)
        if isinstance(item, ir.IntegerAttr):
            out.append(item.value)
        elif isinstance(item, ir.StringAttr):
            out.append(item.value)
        else:
            raise AttrError(f"expected an int or a symbol name, found {item}")
    return out


def _down(attr):
    """Attribute parameters of IRDL attributes come back as plain `ir.Attribute`s."""
    return attr.maybe_downcast() if hasattr(attr, "maybe_downcast") else attr


def _expect(attr, cls, what: str):
    attr = _down(attr)
    if not isinstance(attr, cls):
        raise AttrError(f"expected {what}, found {attr}")
    return attr


def _read_dense(attr) -> DenseValue:
    attr = _expect(attr, ir.DenseElementsAttr, "a dense elements attribute")
    ttype = ir.RankedTensorType(attr.type)
    elem = str(ttype.element_type)
    if not dtypes.is_known(elem):
        raise AttrError(f"unsupported constant element type {elem}")
    shape = list(ttype.shape)
    if elem == "bf16":
        if attr.is_splat:
            t = torch.tensor(ir.FloatAttr(attr.get_splat_value()).value, dtype=torch.float32).to(torch.bfloat16)
            return DenseValue(t.expand(shape).contiguous(), elem)
        return DenseValue(_bf16_elements(attr).reshape(shape), elem)
    array = np.array(attr)
    if array.dtype == object or array.shape != tuple(shape):
        array = np.broadcast_to(array, shape) if array.size == 1 else array.reshape(shape)
    np_dtype = dtypes.to_numpy(elem)
    # view: the bindings give ui64 as numpy's ulonglong, an equal dtype torch does not take.
    # np.asarray(order="C"), not np.ascontiguousarray: that one turns a rank-0 value into rank 1.
    array = np.asarray(array.astype(np_dtype, copy=False), order="C").view(np_dtype)
    return DenseValue(array, elem)  # numpy: verifying IR with constants needs no torch


_HEX_BLOB = re.compile(r'dense<"0x([0-9A-Fa-f]*)">')
_ELEMENT = re.compile(r"0x[0-9A-Fa-f]+|[-+]?[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?")


def _bf16_elements(attr) -> "torch.Tensor":
    """The elements of a non-splat bf16 dense attribute, flat.

    The bindings convert no bf16 element to Python (neither indexing nor the buffer protocol),
    so they are read from the attribute's text: `dense<"0x...">` (raw little-endian data), or a
    nested list of decimals and of `0xHHHH` bit patterns (infinities, NaNs).
    """
    body = str(attr).rsplit(" : ", 1)[0]
    blob = _HEX_BLOB.fullmatch(body)
    if blob:
        raw = np.frombuffer(bytes.fromhex(blob.group(1)), dtype="<i2").astype(np.int16)
        return torch.from_numpy(raw).view(torch.bfloat16)
    bits = []
    for token in _ELEMENT.findall(body):
        if token.startswith("0x"):
            pattern = int(token, 16)
            bits.append(pattern - (1 << 16) if pattern >= 1 << 15 else pattern)
        else:
            bits.append(torch.tensor(float(token)).to(torch.bfloat16).view(torch.int16).item())
    return torch.tensor(bits, dtype=torch.int16).view(torch.bfloat16)


def dense_attr(value: DenseValue) -> ir.DenseElementsAttr:
    ttype = ir.RankedTensorType.get(list(value.shape), element_type(value.dtype_name))
    if value.dtype_name == "bf16":
        raw = value.tensor.contiguous().view(torch.int16).numpy()
        return ir.DenseElementsAttr.get(raw, type=ttype)
    data = value.data
    array = np.ascontiguousarray(data if isinstance(data, np.ndarray) else data.numpy())
    if array.size > 1 and value.is_splat():
        array = np.ascontiguousarray(array.reshape(-1)[:1])  # one element for the whole type: a splat attribute
    if array.dtype == np.bool_:
        array = array.astype(np.uint8) if array.size != 1 else array
        return ir.DenseElementsAttr.get(np.ascontiguousarray(array).astype(np.bool_), type=ttype)
    return ir.DenseElementsAttr.get(array, type=ttype, signless=not value.dtype_name.startswith("ui"))


def element_type(name: str) -> ir.Type:
    return ir.Type.parse(name)


def to_python(spec: AttrSpec, attr: ir.Attribute):
    """Read an op attribute of the given kind; raises AttrError naming what was expected."""
    kind = spec.kind
    if kind == "int":
        a = _expect(attr, ir.IntegerAttr, "an integer attribute")
        if str(a.type) == "i1":
            raise AttrError(f"expected an integer attribute, found {attr}")
        return a.value
    if kind == "float":
        if isinstance(attr, ir.IntegerAttr) and str(attr.type) != "i1":
            return float(attr.value)
        return _expect(attr, ir.FloatAttr, "a float attribute").value
    if kind == "bool":
        return _expect(attr, ir.BoolAttr, "true or false").value
    if kind in ("str", "enum"):
        value = _expect(attr, ir.StringAttr, "a string attribute").value
        if kind == "enum" and value not in spec.choices:
            raise AttrError(f"expected one of {', '.join(repr(c) for c in spec.choices)}, found '{value}'")
        return value
    if kind == "ints":
        return list(_expect(attr, ir.DenseI64ArrayAttr, "array<i64: ...>"))
    if kind == "floats":
        return list(_expect(attr, ir.DenseF64ArrayAttr, "array<f64: ...>"))
    if kind == "strs":
        arr = _expect(attr, ir.ArrayAttr, 'an array of strings (["a", "b"])')
        out = []
        for item in arr:
            out.append(_expect(item, ir.StringAttr, 'an array of strings (["a", "b"])').value)
        return out
    if kind == "dtype":
        t = _expect(attr, ir.TypeAttr, "an element type (f32, i64, ...)").value
        if not dtypes.is_known(str(t)):
            raise AttrError(f"expected an element type (one of {', '.join(dtypes.ELEMENT_TYPES)}), found {t}")
        return str(t)
    if kind == "shape":
        return _read_mixed_array(attr)
    if kind == "dense":
        return _read_dense(attr)
    if kind == "sharding":
        dims, partial = read_sharding(attr)
        return [dims, partial]
    if kind == "layout":
        if not isinstance(attr, LayoutAttr):
            raise AttrError(f"expected #sdc.layout<array<i64: ...>>, found {attr}")
        perm = _down(attr.perm)
        if not isinstance(perm, ir.DenseI64ArrayAttr):
            raise AttrError(f"expected #sdc.layout<array<i64: ...>>, found {attr}")
        return list(perm)
    raise AttrError(f"unknown attribute kind {kind}")


def to_mlir(spec: AttrSpec, value) -> ir.Attribute:
    kind = spec.kind
    if kind == "int":
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(value))
    if kind == "float":
        return ir.FloatAttr.get_f64(float(value))
    if kind == "bool":
        return ir.BoolAttr.get(bool(value))
    if kind in ("str", "enum"):
        return ir.StringAttr.get(str(value))
    if kind == "ints":
        return ir.DenseI64ArrayAttr.get([int(v) for v in value])
    if kind == "floats":
        return ir.DenseF64ArrayAttr.get([float(v) for v in value])
    if kind == "strs":
        return ir.ArrayAttr.get([ir.StringAttr.get(str(v)) for v in value])
    if kind == "dtype":
        return ir.TypeAttr.get(element_type(value))
    if kind == "shape":
        return _mixed_array(value)
    if kind == "dense":
        return dense_attr(value if isinstance(value, DenseValue) else DenseValue.from_numpy(np.asarray(value)))
    if kind == "layout":
        return layout(value)
    if kind == "sharding":
        dims, partial = value
        return sharding([list(d) for d in dims], list(partial))
    raise AttrError(f"unknown attribute kind {kind}")
