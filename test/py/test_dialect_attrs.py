"""Op attributes between MLIR and plain values: every kind both ways, and dense constants of
every element type and rank (including scalars and bf16)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sdc import dtypes
from sdc.dialect import attrs as A
from sdc.dialect.attrs import AttrError
from sdc.dialect.dense import DenseValue
from sdc.dialect.opdef import AttrSpec
from sdc.mlir import ir
from sdc.dialect.op_classes import new_context


@pytest.fixture
def ctx():
    with new_context() as context, ir.Location.unknown():
        yield context


# kind -> values that must survive to_mlir then to_python
ROUND_TRIPS = {
    "int": [0, -7, 2 ** 40],
    "float": [0.5, -1e-5, math.inf, -math.inf],
    "bool": [True, False],
    "str": ["fc1.weight", ""],
    "ints": [[], [0, -1, 2 ** 62]],
    "floats": [[], [0.25, -3.5]],
    "strs": [[], ["dp", "tp"]],
    "dtype": list(dtypes.ELEMENT_TYPES),
    "shape": [[], ["B", -1, 64], [3, "S*2"]],
    "enum": ["tanh"],
    "layout": [[0, 2, 3, 1], [0]],
}


@pytest.mark.parametrize("kind,value", [(k, v) for k, vs in ROUND_TRIPS.items() for v in vs])
def test_attribute_kinds_round_trip(kind, value, ctx):
    spec = AttrSpec(kind, choices=("none", "tanh"))
    attr = A.to_mlir(spec, value)
    assert A.to_python(spec, ir.Attribute.parse(str(attr))) == value


@pytest.mark.parametrize("kind,text,message", [
    ("int", "true", "expected an integer attribute, found true"),
    ("int", "1.5 : f32", "expected an integer attribute"),
    ("float", '"x"', "expected a float attribute"),
    ("bool", "1 : i64", "expected true or false"),
    ("enum", '"fast"', "expected one of 'none', 'tanh', found 'fast'"),
    ("ints", "[1, 2]", "expected array<i64: ...>"),
    ("strs", "[1]", 'expected an array of strings (["a", "b"])'),
    ("dtype", "complex<f32>", "expected an element type (one of f16, "),
    ("shape", "[1.5]", "expected an int or a symbol name, found 1.5"),
    ("layout", "array<i64: 0, 1>", "expected #sdc.layout<array<i64: ...>>"),
    ("dense", "1 : i64", "expected a dense elements attribute"),
])
def test_attribute_kind_errors(kind, text, message, ctx):
    with pytest.raises(AttrError) as info:
        A.to_python(AttrSpec(kind, choices=("none", "tanh")), ir.Attribute.parse(text))
    assert message in str(info.value)


def test_float_kind_accepts_an_integer_literal(ctx):
    assert A.to_python(AttrSpec("float"), ir.Attribute.parse("2 : i64")) == 2.0


# ---------------------------------------------------------------- dense constants

DENSE_TYPES = ["f16", "f32", "f64", "i1", "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64"]


def _values(dtype: str, shape) -> np.ndarray:
    rng = np.random.default_rng(len(shape) * 31 + DENSE_TYPES.index(dtype))
    if dtype == "i1":
        return rng.random(shape) < 0.5
    if dtypes.is_float(dtype):
        return rng.uniform(-4, 4, shape).astype(dtypes.to_numpy(dtype))
    low = 0 if dtype.startswith("ui") else -100
    return rng.integers(low, 100, shape).astype(dtypes.to_numpy(dtype))


@pytest.mark.parametrize("dtype", DENSE_TYPES)
@pytest.mark.parametrize("shape", [(), (1,), (3,), (2, 3)])
def test_dense_round_trip(dtype, shape, ctx):
    array = _values(dtype, shape)
    spec = AttrSpec("dense")
    attr = A.to_mlir(spec, array)
    assert str(ir.RankedTensorType(attr.type)) == f"tensor<{''.join(f'{d}x' for d in shape)}{dtype}>"
    back = A.to_python(spec, ir.Attribute.parse(str(attr)))
    assert back.dtype_name == dtype and back.shape == shape
    np.testing.assert_array_equal(back.tensor.numpy(), array)


@pytest.mark.parametrize("text,shape,values", [
    ("dense<2.5> : tensor<bf16>", (), [2.5]),
    ("dense<-1.0> : tensor<2x2xbf16>", (2, 2), [-1.0] * 4),
    ("dense<[1.0, 2.5, -3.0]> : tensor<3xbf16>", (3,), [1.0, 2.5, -3.0]),
    ("dense<[[1.0, 0x7F80], [0xFF80, 0.5]]> : tensor<2x2xbf16>", (2, 2), [1.0, math.inf, -math.inf, 0.5]),
])
def test_dense_bf16_from_text(text, shape, values, ctx):
    value = A.to_python(AttrSpec("dense"), ir.Attribute.parse(text))
    assert value.dtype_name == "bf16" and value.shape == shape and value.tensor.dtype == torch.bfloat16
    assert value.tensor.float().reshape(-1).tolist() == values


@pytest.mark.parametrize("n", [1, 5, 3000])  # large attributes print as one hex blob
def test_dense_bf16_round_trip(n, ctx):
    t = torch.from_numpy(np.random.default_rng(n).standard_normal(n).astype(np.float32)).to(torch.bfloat16)
    t[0] = float("nan") if n > 1 else t[0]
    spec = AttrSpec("dense")
    attr = A.to_mlir(spec, DenseValue.from_torch(t))
    back = A.to_python(spec, ir.Attribute.parse(str(attr)))
    assert back.dtype_name == "bf16" and back.shape == (n,)
    assert torch.equal(back.tensor.view(torch.int16), t.view(torch.int16))


def test_dense_value_keeps_rank_zero():
    value = DenseValue.from_numpy(np.array(3, dtype=np.int32))
    assert value.shape == () and value.dtype_name == "i32"


# ---------------------------------------------------------------- sdc attributes


def test_sdc_attributes_round_trip(ctx):
    assert A.read_mesh(ir.Attribute.parse(str(A.mesh({"dp": 2, "tp": 4})))) == {"dp": 2, "tp": 4}
    assert A.read_dims(ir.Attribute.parse(str(A.dims(["B", 3, "H"])))) == ["B", 3, "H"]
    assert str(A.layout([0, 2, 1])) == "#sdc.layout<array<i64: 0, 2, 1>>"
    assert str(A.guard("H % 2 == 0", "H must be even")) == '#sdc.guard<"H % 2 == 0", "H must be even">'
    assert str(A.sharding([["dp"], [], ["tp"]], ["tp"])) == '#sdc.sharding<[["dp"], [], ["tp"]], ["tp"]>'


@pytest.mark.parametrize("reader,text,message", [
    (A.read_mesh, '#sdc.dims<["B"]>', "expected #sdc.mesh<...>"),
    (A.read_mesh, '#sdc.mesh<["dp"], array<i64: 2, 2>>', "mesh has 1 axis names but 2 sizes"),
    (A.read_mesh, "#sdc.mesh<[1], array<i64: 2>>", "expected mesh axis names as strings"),
    (A.read_dims, '#sdc.mesh<["dp"], array<i64: 2>>', "expected #sdc.dims<...>"),
    (A.read_dims, "#sdc.dims<[1.5]>", "expected an int or a symbol name"),
])
def test_sdc_attribute_errors(reader, text, message, ctx):
    with pytest.raises(AttrError, match=message.replace("[", r"\[").replace("(", r"\(")):
        reader(ir.Attribute.parse(text))
