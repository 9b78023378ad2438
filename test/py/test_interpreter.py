"""The IR interpreter: whole programs against numpy, input binding by position and by name,
symbolic dims, and the errors a user sees for bad inputs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

import sdc
from sdc.diagnostics import SdcError
from sdc.ir_text import parse_module

from refcheck import rng  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[2]


def _gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _randn(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# ---------------------------------------------------------------- whole programs


def test_mlp_example_matches_numpy(rng):
    text = (ROOT / "examples" / "mlp.mlir").read_text()
    params = {"fc1.weight": _randn(rng, 256, 784, scale=0.05), "fc1.bias": _randn(rng, 256),
              "fc2.weight": _randn(rng, 10, 256, scale=0.05), "fc2.bias": _randn(rng, 10)}
    x = _randn(rng, 3, 784)
    (got,) = sdc.interpret(text, [x], params)
    h = _gelu(x.astype(np.float64) @ params["fc1.weight"].T + params["fc1.bias"])
    want = _softmax(h @ params["fc2.weight"].T + params["fc2.bias"])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


ATTENTION = """
func.func @main(%x: tensor<?x?x16xf32> {sdc.dims = #sdc.dims<["B", "S", 16]>, sdc.name = "hidden"},
                %mask: tensor<?x?xi1> {sdc.dims = #sdc.dims<["B", "S"]>, sdc.name = "mask"}) -> tensor<?x?x16xf32> {
  %wq = "sdc.parameter"() {name = "wq"} : () -> tensor<16x16xf32>
  %wk = "sdc.parameter"() {name = "wk"} : () -> tensor<16x16xf32>
  %wv = "sdc.parameter"() {name = "wv"} : () -> tensor<16x16xf32>
  %wo = "sdc.parameter"() {name = "wo"} : () -> tensor<16x16xf32>
  %gamma = "sdc.parameter"() {name = "ln.scale"} : () -> tensor<16xf32>
  %beta = "sdc.parameter"() {name = "ln.bias"} : () -> tensor<16xf32>
  %h = "sdc.layer_norm"(%x, %gamma, %beta) {axis = -1 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  %q = "sdc.matmul"(%h, %wq) : (tensor<?x?x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  %k = "sdc.matmul"(%h, %wk) : (tensor<?x?x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  %v = "sdc.matmul"(%h, %wv) : (tensor<?x?x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  %q4 = "sdc.reshape"(%q) {shape = ["B", "S", 2, 8]} : (tensor<?x?x16xf32>) -> tensor<?x?x2x8xf32>
  %k4 = "sdc.reshape"(%k) {shape = ["B", -1, 2, 8]} : (tensor<?x?x16xf32>) -> tensor<?x?x2x8xf32>
  %v4 = "sdc.reshape"(%v) {shape = ["B", "S", 2, 8]} : (tensor<?x?x16xf32>) -> tensor<?x?x2x8xf32>
  %qh = "sdc.transpose"(%q4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x2x8xf32>) -> tensor<?x2x?x8xf32>
  %kh = "sdc.transpose"(%k4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x2x8xf32>) -> tensor<?x2x?x8xf32>
  %vh = "sdc.transpose"(%v4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x2x8xf32>) -> tensor<?x2x?x8xf32>
  %s = "sdc.matmul"(%qh, %kh) {transpose_rhs = true} : (tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<?x2x?x?xf32>
  %scale = "sdc.constant"() {value = dense<0.353553385> : tensor<f32>} : () -> tensor<f32>
  %ss = "sdc.mul"(%s, %scale) : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %m4 = "sdc.reshape"(%mask) {shape = ["B", 1, 1, "S"]} : (tensor<?x?xi1>) -> tensor<?x1x1x?xi1>
  %ninf = "sdc.constant"() {value = dense<-1.0e+09> : tensor<f32>} : () -> tensor<f32>
  %sm = "sdc.where"(%m4, %ss, %ninf) : (tensor<?x1x1x?xi1>, tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %p = "sdc.softmax"(%sm) {axis = -1 : i64} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  %o = "sdc.matmul"(%p, %vh) : (tensor<?x2x?x?xf32>, tensor<?x2x?x8xf32>) -> tensor<?x2x?x8xf32>
  %ot = "sdc.transpose"(%o) {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x2x?x8xf32>) -> tensor<?x?x2x8xf32>
  %o3 = "sdc.reshape"(%ot) {shape = ["B", "S", 16]} : (tensor<?x?x2x8xf32>) -> tensor<?x?x16xf32>
  %y = "sdc.matmul"(%o3, %wo) : (tensor<?x?x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  %r = "sdc.add"(%x, %y) : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  return %r : tensor<?x?x16xf32>
}
"""


def _attention_params(rng):
    params = {name: _randn(rng, 16, 16, scale=0.3) for name in ("wq", "wk", "wv", "wo")}
    params["ln.scale"] = _randn(rng, 16)
    params["ln.bias"] = _randn(rng, 16)
    return params


def _attention_numpy(x, mask, p):
    x = x.astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    h = (x - mean) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * p["ln.scale"] + p["ln.bias"]
    b, s, _ = x.shape

    def heads(w):
        return (h @ w).reshape(b, s, 2, 8).transpose(0, 2, 1, 3)

    q, k, v = heads(p["wq"]), heads(p["wk"]), heads(p["wv"])
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(8)
    scores = np.where(mask[:, None, None, :], scores, -1e9)
    o = (_softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(b, s, 16)
    return x + o @ p["wo"]


@pytest.mark.parametrize("batch,seq", [(2, 5), (1, 3), (3, 1)])
def test_attention_matches_numpy(batch, seq, rng):
    params = _attention_params(rng)
    x = _randn(rng, batch, seq, 16)
    mask = rng.random((batch, seq)) < 0.7
    mask[:, 0] = True  # every row attends somewhere
    want = _attention_numpy(x, mask, params)
    (by_position,) = sdc.interpret(ATTENTION, [x, mask], params)
    (by_name,) = sdc.interpret(ATTENTION, {"mask": mask, "hidden": x}, params)
    np.testing.assert_allclose(by_position, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(by_name, by_position)


def test_as_torch_returns_tensors(rng):
    params = _attention_params(rng)
    x, mask = _randn(rng, 2, 3, 16), np.ones((2, 3), dtype=bool)
    (got,) = sdc.interpret(ATTENTION, [torch.from_numpy(x), torch.from_numpy(mask)], params, as_torch=True)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32 and got.shape == (2, 3, 16)
    np.testing.assert_allclose(got.numpy(), _attention_numpy(x, mask, params), rtol=1e-4, atol=1e-5)


def test_interprets_a_parsed_module(rng):
    module = parse_module(ATTENTION)
    params = _attention_params(rng)
    x, mask = _randn(rng, 1, 2, 16), np.array([[True, False]])
    (got,) = sdc.interpret(module, [x, mask], params)
    np.testing.assert_allclose(got, _attention_numpy(x, mask, params), rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- names, symbols, results

UNNAMED = """
func.func @main(%a: tensor<2x?xf32>, %b: tensor<?xf32> {sdc.name = "bias"}, %c: tensor<f32>) -> (tensor<2x?xf32>, tensor<i64>) {
  %0 = "sdc.add"(%a, %b) : (tensor<2x?xf32>, tensor<?xf32>) -> tensor<2x?xf32>
  %1 = "sdc.mul"(%0, %c) : (tensor<2x?xf32>, tensor<f32>) -> tensor<2x?xf32>
  %2 = "sdc.constant"() {value = dense<7> : tensor<i64>} : () -> tensor<i64>
  return %1, %2 : tensor<2x?xf32>, tensor<i64>
}
"""


def test_inputs_by_name_fall_back_to_arg_n(rng):
    a, b, c = _randn(rng, 2, 4), _randn(rng, 4), np.array(1.5, dtype=np.float32)
    got, seven = sdc.interpret(UNNAMED, {"arg0": a, "bias": b, "arg2": c})
    np.testing.assert_allclose(got, (a + b) * 1.5, rtol=1e-6)
    assert seven.shape == () and seven.dtype == np.int64 and int(seven) == 7


def test_scalar_inputs_and_constants(rng):
    a, b = _randn(rng, 2, 3), _randn(rng, 3)
    got, _ = sdc.interpret(UNNAMED, [a, b, np.float32(-2.0)])
    np.testing.assert_allclose(got, (a + b) * -2.0, rtol=1e-6)


SYMBOLS = """
func.func @main(%x: tensor<?x?xf32> {sdc.dims = #sdc.dims<["B", "D"]>}, %y: tensor<?xf32> {sdc.dims = #sdc.dims<["D"]>}) -> (tensor<?x2x?xf32>, tensor<?x?xi64>) {
  %0 = "sdc.add"(%x, %y) : (tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xf32>
  %1 = "sdc.reshape"(%0) {shape = ["B", 2, -1]} : (tensor<?x?xf32>) -> tensor<?x2x?xf32>
  %2 = "sdc.iota"() {dimension = 1 : i64, dtype = i64, shape = ["B", "D"]} : () -> tensor<?x?xi64>
  return %1, %2 : tensor<?x2x?xf32>, tensor<?x?xi64>
}
"""


def test_symbolic_dims_feed_reshape_and_iota(rng):
    x, y = _randn(rng, 3, 6), _randn(rng, 6)
    reshaped, ramp = sdc.interpret(SYMBOLS, [x, y])
    np.testing.assert_allclose(reshaped, (x + y).reshape(3, 2, 3), rtol=1e-6)
    np.testing.assert_array_equal(ramp, np.tile(np.arange(6), (3, 1)))


def test_a_symbol_bound_twice_must_agree(rng):
    with pytest.raises(SdcError, match=r"input 'arg1' dim 0 is 5, but symbol 'D' is 6 from an earlier input"):
        sdc.interpret(SYMBOLS, [_randn(rng, 3, 6), _randn(rng, 5)])


SPLIT = """
func.func @main(%x: tensor<4x6xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>) {
  %0:3 = "sdc.split"(%x) {axis = 1 : i64, parts = 3 : i64} : (tensor<4x6xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>)
  return %0#2, %0#0, %0#1 : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>
}
"""


def test_ops_with_several_results(rng):
    x = _randn(rng, 4, 6)
    got = sdc.interpret(SPLIT, [x])
    for g, w in zip(got, [x[:, 4:], x[:, :2], x[:, 2:4]]):
        np.testing.assert_array_equal(g, w)


def test_bf16_outputs_come_back_as_f32(rng):
    text = """
func.func @main(%x: tensor<3xf32>) -> tensor<3xbf16> {
  %0 = "sdc.cast"(%x) {dtype = bf16} : (tensor<3xf32>) -> tensor<3xbf16>
  return %0 : tensor<3xbf16>
}"""
    x = _randn(rng, 3)
    (got,) = sdc.interpret(text, [x])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, x, rtol=8e-3)
    (as_tensor,) = sdc.interpret(text, [x], as_torch=True)
    assert as_tensor.dtype == torch.bfloat16


TWO_FUNCS = """
func.func @double(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "sdc.add"(%x, %x) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
func.func @negate(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "sdc.neg"(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
"""


def test_entry_function_by_name(rng):
    x = _randn(rng, 2)
    np.testing.assert_array_equal(sdc.interpret(TWO_FUNCS, [x], entry="negate")[0], -x)
    np.testing.assert_array_equal(sdc.interpret(TWO_FUNCS, [x], entry="double")[0], x + x)
    with pytest.raises(SdcError, match=r"cannot choose an entry function: no @main among double, negate"):
        sdc.interpret(TWO_FUNCS, [x])
    with pytest.raises(SdcError, match=r"no function named 'triple' \(functions: double, negate\)"):
        sdc.interpret(TWO_FUNCS, [x], entry="triple")


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("inputs,message", [
    (lambda r: [_randn(r, 2, 3, 16, 1), np.ones((2, 3), bool)], r"input 'hidden' has rank 4, expected 3 \(tensor<\?x\?x16xf32>\)"),
    (lambda r: [_randn(r, 2, 3, 8), np.ones((2, 3), bool)], r"input 'hidden' dim 2 is 8, expected 16 \(tensor<\?x\?x16xf32>\)"),
    (lambda r: [_randn(r, 2, 3, 16).astype(np.float64), np.ones((2, 3), bool)],
     r"input 'hidden' has element type f64, expected f32"),
    (lambda r: [_randn(r, 2, 3, 16), np.ones((2, 3), np.int32)], r"input 'mask' has element type i32, expected i1"),
    (lambda r: [_randn(r, 2, 3, 16), np.ones((2, 4), bool)], r"input 'mask' dim 1 is 4, but symbol 'S' is 3"),
    (lambda r: [_randn(r, 2, 3, 16)], r"expected 2 inputs, got 1"),
    (lambda r: {"hidden": _randn(r, 2, 3, 16), "mask": np.ones((2, 3), bool), "extra": 1.0},
     r"unknown input 'extra' \(inputs: hidden, mask\)"),
    (lambda r: {"hidden": _randn(r, 2, 3, 16)}, r"missing input 'mask'"),
    (lambda r: {"arg0": _randn(r, 2, 3, 16), "mask": np.ones((2, 3), bool)}, r"unknown input 'arg0'"),
])
def test_bad_inputs(inputs, message, rng):
    with pytest.raises(SdcError, match=message):
        sdc.interpret(ATTENTION, inputs(rng), _attention_params(rng))


def test_missing_parameter(rng):
    params = _attention_params(rng)
    del params["wv"]
    with pytest.raises(SdcError) as info:
        sdc.interpret(ATTENTION, [_randn(rng, 1, 2, 16), np.ones((1, 2), bool)], params)
    line = next(i for i, text in enumerate(ATTENTION.splitlines(), 1) if '{name = "wv"}' in text)
    assert str(info.value) == f"<string>:{line}:9: 'sdc.parameter' failed: parameter 'wv' has no value"


def test_a_failing_op_is_reported_at_its_location(rng):
    text = """func.func @main(%x: tensor<3x2xf32>, %i: tensor<2xi64>) -> tensor<2x2xf32> {
  %0 = "sdc.gather"(%x, %i) {axis = 0 : i64} : (tensor<3x2xf32>, tensor<2xi64>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}"""
    with pytest.raises(SdcError, match=r"^<string>:2:8: 'sdc.gather' failed: "):
        sdc.interpret(text, [_randn(rng, 3, 2), np.array([0, 7])])


def test_ops_of_other_dialects_are_refused(rng):
    text = """func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = arith.addf %x, %x : tensor<2xf32>
  return %0 : tensor<2xf32>
}"""
    with pytest.raises(SdcError, match=r"the interpreter cannot run 'arith.addf'"):
        sdc.interpret(text, [_randn(rng, 2)])


def test_bad_ir_is_an_sdc_error():
    with pytest.raises(SdcError, match=r"contracting dims differ: lhs has 4, rhs has 5"):
        sdc.interpret("""func.func @main(%x: tensor<3x4xf32>, %y: tensor<5x2xf32>) -> tensor<3x2xf32> {
  %0 = "sdc.matmul"(%x, %y) : (tensor<3x4xf32>, tensor<5x2xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}""", [np.ones((3, 4), np.float32), np.ones((5, 2), np.float32)])


def _module(attributes: str) -> str:
    return f"""module{attributes} {{
  func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {{
    %0 = "sdc.all_reduce"(%x) {{mesh_axes = ["tp"], reduction = "sum"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %1 = "sdc.neg"(%0) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }}
}}"""


def test_explicit_module_and_collectives_over_one_device(rng):
    x = _randn(rng, 2, 4)
    (got,) = sdc.interpret(_module(' attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 1>>}'), [x])
    np.testing.assert_array_equal(got, -x)
    plain = _module("").replace('"sdc.all_reduce"(%x) {mesh_axes = ["tp"], reduction = "sum"}', '"sdc.neg"(%x)')
    np.testing.assert_array_equal(sdc.interpret(plain, [x])[0], x)


def test_collectives_over_several_devices_need_a_communicator(rng):
    text = _module(' attributes {sdc.mesh = #sdc.mesh<["tp"], array<i64: 2>>}')
    with pytest.raises(SdcError, match=r"^<string>:3:10: 'sdc.all_reduce' failed: mesh axes \['tp'\] form a group "
                                       r"of 2 devices, which needs a communicator"):
        sdc.interpret(text, [_randn(rng, 2, 4)])
