"""Transposes, slices and reshapes between generated kernels run as torch views, not copies.

Why: on the H200 a GPT-2 training step spent a fifth of its time in copy launches, most of them the
`.contiguous()` of a transpose or a slice that a generated kernel then read again. A Triton kernel
takes per-dim strides (sdc/runtime/launch/triton.py), so it reads a permuted or sliced view as it
is; the reference op only has to return the view. Numerics are checked against torch eager on
fresh random inputs, per dtype, at two batch sizes of one artifact (a dynamic batch); the copies of
one call are counted with a torch dispatch mode.
"""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from sdc.dialect.opdef import get_op
from triton_support import TORCH_DTYPE, compile_cuda, interpreter, launches, rng  # noqa: F401

TOLERANCE = {"f32": (1e-5, 1e-5), "f16": (5e-3, 5e-3)}  # (rtol, atol)


class CountCopies(TorchDispatchMode):
    """Counts the aten ops that copy a tensor's elements (what `.contiguous()` of a view becomes)."""

    def __init__(self) -> None:
        super().__init__()
        self.copies: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        out = func(*args, **(kwargs or {}))
        # `.contiguous()` of a view (`aten.contiguous` under inference mode, `aten.clone` outside it) and a
        # reshape that cannot view (`aten.reshape` under inference mode: a copy when its result is new
        # memory); the interpreter's `copy_` of kernel results into their tensors is not one
        if name in ("clone", "_reshape_copy") or (name in ("contiguous", "reshape") and _new_memory(out, args[0])):
            self.copies[name] += 1
        return out


def _new_memory(out: torch.Tensor, x: torch.Tensor) -> bool:
    return out.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()

def test_transpose_and_slice_return_views() -> None:
    """The reference ops share their operand's memory: the readers take strides."""
    x = torch.randn(2, 6, 4)
    t = get_op("transpose").ref(None, {"perm": [0, 2, 1]}, x)
    assert t.data_ptr() == x.data_ptr() and not t.is_contiguous()
    torch.testing.assert_close(t, x.transpose(1, 2), rtol=0, atol=0)
    s = get_op("slice").ref(None, {"starts": [1], "ends": [5], "axes": [1], "steps": [2]}, x)
    assert s.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    torch.testing.assert_close(s, x[:, 1:5:2], rtol=0, atol=0)


# x [B, 6, 4] -> transpose [B, 4, 6] -> its columns 1..4 [B, 4, 4] -> + y, gelu (a Triton kernel
# reading the strided view); the transpose also feeds a matmul with w [6, 3] (the matmul template
# reads it through strides), and the elementwise result is transposed back for the output.
VIEWS = """
func.func @main(%x: tensor<?x6x4xDT> {sdc.name = "x", sdc.dims = #sdc.dims<["B", 6, 4]>},
                %y: tensor<?x4x4xDT> {sdc.name = "y", sdc.dims = #sdc.dims<["B", 4, 4]>},
                %w: tensor<6x3xDT> {sdc.name = "w"})
    -> (tensor<?x4x4xDT> {sdc.name = "out"}, tensor<?x4x3xDT> {sdc.name = "prod"}) {
  %t = "sdc.transpose"(%x) {perm = array<i64: 0, 2, 1>} : (tensor<?x6x4xDT>) -> tensor<?x4x6xDT>
  %s = "sdc.slice"(%t) {axes = array<i64: 2>, ends = array<i64: 5>, starts = array<i64: 1>} : (tensor<?x4x6xDT>) -> tensor<?x4x4xDT>
  %a = "sdc.add"(%s, %y) : (tensor<?x4x4xDT>, tensor<?x4x4xDT>) -> tensor<?x4x4xDT>
  %g = "sdc.gelu"(%a) {approximate = "none"} : (tensor<?x4x4xDT>) -> tensor<?x4x4xDT>
  %o = "sdc.transpose"(%g) {perm = array<i64: 0, 2, 1>} : (tensor<?x4x4xDT>) -> tensor<?x4x4xDT>
  %p = "sdc.matmul"(%t, %w) {transpose_lhs = false, transpose_rhs = false} : (tensor<?x4x6xDT>, tensor<6x3xDT>) -> tensor<?x4x3xDT>
  return %o, %p : tensor<?x4x4xDT>, tensor<?x4x3xDT>
}
"""


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_views_feed_generated_kernels(tmp_path: Path, rng: torch.Generator, dtype: str) -> None:
    text = VIEWS.replace("DT", dtype)
    torch_dtype = TORCH_DTYPE[dtype]
    w = torch.randn(6, 3, generator=rng).to(torch_dtype)
    exe = compile_cuda(text, tmp_path / "views.sdc")
    kinds = [s["kernel"]["backend"] for s in launches(tmp_path / "views.sdc")]
    assert kinds.count("triton") >= 2, kinds  # the elementwise group and the matmul are generated kernels
    rtol, atol = TOLERANCE[dtype]
    for batch in (2, 3):  # one artifact, two batch sizes
        x = torch.randn(batch, 6, 4, generator=rng).mul(1.5).to(torch_dtype)
        y = torch.randn(batch, 4, 4, generator=rng).to(torch_dtype)
        with CountCopies() as counter:
            out, prod = exe(x, y, w)
        assert not counter.copies, dict(counter.copies)  # no transpose or slice is materialized
        t = x.double().transpose(1, 2)
        want_out = torch.nn.functional.gelu(t[:, :, 1:5] + y.double()).transpose(1, 2)
        torch.testing.assert_close(out.double(), want_out, rtol=rtol, atol=atol)
        torch.testing.assert_close(prod.double(), t @ w.double(), rtol=rtol * 2, atol=atol * 2)


# ---------------------------------------------------------------- gather as a generated kernel

# An embedding lookup (a weight table, ids with a dynamic batch, negative ids counting from the end),
# and a gather along the middle axis of a transposed view (a strided table that no one copied).
GATHER = """
func.func @main(%ids: tensor<?x5xi64> {sdc.name = "ids", sdc.dims = #sdc.dims<["B", 5]>},
                %x: tensor<?x7x3xDT> {sdc.name = "x", sdc.dims = #sdc.dims<["B", 7, 3]>},
                %pick: tensor<2x2xi32> {sdc.name = "pick"})
    -> (tensor<?x5x8xDT> {sdc.name = "emb"}, tensor<?x2x2x7xDT> {sdc.name = "picked"}) {
  %table = "sdc.parameter"() {name = "table"} : () -> tensor<12x8xDT>
  %e = "sdc.gather"(%table, %ids) {axis = 0 : i64} : (tensor<12x8xDT>, tensor<?x5xi64>) -> tensor<?x5x8xDT>
  %t = "sdc.transpose"(%x) {perm = array<i64: 0, 2, 1>} : (tensor<?x7x3xDT>) -> tensor<?x3x7xDT>
  %p = "sdc.gather"(%t, %pick) {axis = 1 : i64} : (tensor<?x3x7xDT>, tensor<2x2xi32>) -> tensor<?x2x2x7xDT>
  return %e, %p : tensor<?x5x8xDT>, tensor<?x2x2x7xDT>
}
"""


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_gather_is_a_generated_kernel(tmp_path: Path, rng: torch.Generator, dtype: str) -> None:
    torch_dtype = TORCH_DTYPE[dtype]
    table = torch.randn(12, 8, generator=rng).to(torch_dtype)
    exe = compile_cuda(GATHER.replace("DT", dtype), tmp_path / "gather.sdc", params={"table": table})
    steps = launches(tmp_path / "gather.sdc")
    gathers = [s for s in steps if [e["op"] for e in s["kernel"]["ops"]] == ["gather"]]
    assert len(gathers) == 2 and all(s["kernel"]["backend"] == "triton" for s in gathers), steps
    pick = torch.randint(-3, 3, (2, 2), generator=rng, dtype=torch.int32)
    for batch in (2, 3):  # one artifact, two batch sizes
        ids = torch.randint(-12, 12, (batch, 5), generator=rng)
        x = torch.randn(batch, 7, 3, generator=rng).to(torch_dtype)
        with CountCopies() as counter:
            emb, picked = exe(ids, x, pick)
        assert not counter.copies, dict(counter.copies)
        want_emb = torch.nn.functional.embedding(ids % 12, table.double())  # negative ids count from the end
        want_picked = x.double().transpose(1, 2)[:, (pick.long() % 3)]
        torch.testing.assert_close(emb.double(), want_emb, rtol=0, atol=0)  # a gather moves values exactly
        torch.testing.assert_close(picked.double(), want_picked, rtol=0, atol=0)


def test_gather_lowering_and_its_limits() -> None:
    """The kernel IR of a gather (the table's own domain dim after the iterated ones), and the groups
    it refuses: a gather in a row kernel, a table the group computes (both keep the reference backend)."""
    from sdc.codegen.triton import TritonRenderer
    from sdc.codegen.kernel import LoweringError, lower_group

    values = {"t": {"shape": [12, 8], "dtype": "f32"}, "i": {"shape": ["B", 5], "dtype": "i64"},
              "g": {"shape": ["B", 5, 8], "dtype": "f32"}, "s": {"shape": [8], "dtype": "f32"},
              "y": {"shape": ["B", 5, 8], "dtype": "f32"}, "u": {"shape": [12, 8], "dtype": "f32"}}
    supported = TritonRenderer.elementwise_ops()
    gather = {"op": "gather", "attrs": {"axis": 0}, "inputs": ["t", "i"], "outputs": ["g"]}
    program = lower_group([gather], ["t", "i"], ["g"], values, supported)
    assert program.domain == (None, 5, 8, 12) and program.iterated == 3
    assert [list(a.map) for a in program.args] == [[0, 1], [3, 2]]
    assert "iterated 3" in program.dump() and "gather(a1, %0)" in program.dump()
    norm = {"op": "layer_norm", "attrs": {"axis": -1, "epsilon": 1e-5}, "inputs": ["g", "s", "s"], "outputs": ["y"]}
    with pytest.raises(LoweringError, match="row kernel"):
        lower_group([gather, norm], ["t", "i", "s"], ["y"], values, supported)
    neg = {"op": "neg", "attrs": {}, "inputs": ["u"], "outputs": ["t"]}
    with pytest.raises(LoweringError, match="table the group computes"):
        lower_group([neg, gather], ["u", "i"], ["g"], values, supported)
