"""Runs of C launches called as one (sdc/runtime/c_segment.py): compiled models whose consecutive C
kernels and views run through one `CSegment`, against torch eager and against the same artifact with
segments off (`SDC_C_SEGMENTS=0`, bit for bit: the same kernels run); fresh results per call; the
instructions one by one where a kernel fails, a launch does not fit or its work is large; the strided
copy against torch's own."""

from __future__ import annotations

import ctypes
import shutil

import pytest
import torch
from torch.export import Dim

import sdc
import sdc.runtime
from sdc.diagnostics import SdcError
from sdc.runtime.launch.base import dense_strides as _dense_strides
from sdc.runtime.c_segment import CSegment, _copy, _sequencer

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler on the PATH")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SDC_C_CACHE_DIR", str(tmp_path / "c-cache"))


class Attention(torch.nn.Module):
    """Heads split (chunk, reshape, transpose) between C kernels (matmuls, softmax, layer_norm), a
    residual, a concat, and two outputs: one a view (reshape) of a value the run makes."""

    def __init__(self, width: int = 16, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x):
        b, t, w = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, w // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = torch.softmax(q @ k.transpose(-1, -2) * 0.25, dim=-1)
        h = (scores @ v).transpose(1, 2).reshape(b, t, w)
        y = self.norm(x + self.out(h))
        return y, torch.tanh(torch.cat([y, x], dim=-1)).reshape(b, t * 2 * w)


def _compile(tmp_path, model, example, dynamic, name="m.sdc"):
    return sdc.compile(model, example, dynamic_shapes=dynamic, output=tmp_path / name)


def _segments(exe) -> list[CSegment]:
    return [i for i in exe._executor.fast_program if isinstance(i, CSegment)]


@pytest.fixture
def attention(tmp_path):
    torch.manual_seed(0)
    model = Attention().eval()
    exe = _compile(tmp_path, model, (torch.randn(2, 5, 16),), ({0: Dim("batch", max=64), 1: Dim("seq", max=128)},))
    return model, exe, tmp_path / "m.sdc"


def test_an_attention_block_runs_in_segments_and_matches_torch(attention, monkeypatch):
    model, exe, path = attention
    segments = _segments(exe)
    assert segments and max(sum(type(m).__name__ == "CLaunch" for m in s.members) for s in segments) >= 3
    monkeypatch.setenv("SDC_C_SEGMENTS", "0")
    plain = sdc.runtime.load(path)
    assert not _segments(plain)
    for batch, seq in ((1, 5), (3, 7), (2, 1), (4, 19)):
        x = torch.randn(batch, seq, 16)
        got = exe(x)
        with torch.no_grad():
            want = model(x)
        for g, w, p in zip(got, want, plain(x)):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=2e-5)
            assert torch.equal(g, p)  # the same kernels, called one by one
    assert all(len(s.plans) <= 4 for s in segments) and any(len(s.plans) == 4 for s in segments)


def test_results_are_fresh_tensors_per_call(attention):
    """A result that leaves the run is the caller's: the next call does not write into it (the run's
    inner values live in buffers its plan keeps; what leaves it does not)."""
    _, exe, _ = attention
    x1, x2 = torch.randn(2, 5, 16), torch.randn(2, 5, 16)
    first = exe(x1)
    kept = [t.clone() for t in first]
    second = exe(x2)
    for a, b, c in zip(first, kept, second):
        assert torch.equal(a, b) and not torch.equal(a, c)
        assert a.data_ptr() != c.data_ptr()


def test_a_large_launch_on_two_threads_runs_the_instructions_one_by_one(attention):
    """Over the C launcher's size limit with two threads the launches run torch's ops: the segment
    then runs its instructions one by one; its results are the same."""
    model, exe, _ = attention
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        x = torch.randn(64, 128, 16)
        (y, z) = exe(x)
        with torch.no_grad():
            want = model(x)
        torch.testing.assert_close(y, want[0], rtol=1e-5, atol=2e-5)
        torch.testing.assert_close(z, want[1], rtol=1e-5, atol=2e-5)
    finally:
        torch.set_num_threads(threads)
    assert any(p.large for s in _segments(exe) for p in s.plans.values())


class Lookup(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(10, 8)
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, ids):
        return torch.softmax(self.proj(torch.tanh(self.table(ids))), dim=-1)


def test_a_kernel_that_fails_in_a_segment_gives_the_ops_error(tmp_path):
    """A gather index out of range: its kernel returns nonzero, the segment runs its instructions one by
    one, and the gather's torch op raises the op's error with its location."""
    torch.manual_seed(0)
    model = Lookup().eval()
    exe = _compile(tmp_path, model, (torch.tensor([[1, 2, 3]]),), ({1: Dim("n", max=64)},))
    assert _segments(exe)
    ids = torch.tensor([[4, 9, 0, 7]])
    with torch.no_grad():
        torch.testing.assert_close(exe(ids)[0], model(ids))
    with pytest.raises(SdcError, match=r"'sdc.gather' failed in kernel k\d+"):
        exe(torch.tensor([[4, 10, 0, 1]]))
    torch.testing.assert_close(exe(ids)[0], model(ids))  # and the next call is fine


def test_sdc_c_segments_takes_on_or_off(attention, monkeypatch):
    _, _, path = attention
    monkeypatch.setenv("SDC_C_SEGMENTS", "sometimes")
    with pytest.raises(SdcError, match=r"SDC_C_SEGMENTS='sometimes' is not one of 1, on, 0, off"):
        sdc.runtime.load(path)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16, torch.bool, torch.float64])
@pytest.mark.parametrize("view", ["transpose", "permute3", "expand", "slice", "scalar", "patches", "rows", "unit",
                                  "empty"])
def test_the_strided_copy_matches_torch(dtype, view):
    """Views of a tensor copied dense, and into the middle of a larger buffer (a concat's operand): dims
    merged or dropped (`_copy`), rows dense on both sides copied whole, none copied of an empty view."""
    lib = _sequencer()
    generator = torch.Generator().manual_seed(7)
    base = (torch.randn(4, 5, 6, generator=generator) * 10).to(dtype)
    x = {"transpose": lambda: base.transpose(0, 2), "permute3": lambda: base.permute(1, 2, 0),
         "expand": lambda: base[:, :1, :].expand(4, 7, 6), "slice": lambda: base[1:, ::2, 2:],
         "scalar": lambda: base[1, 2, 3],
         "patches": lambda: base.reshape(4, 5, 2, 3).permute(0, 2, 1, 3),  # (a patch embedding's)
         "rows": lambda: base[1:3], "unit": lambda: base[:, 2:3, :].permute(2, 1, 0), "empty": lambda: base[:, :0]}[view]()
    out = torch.empty(x.shape, dtype=dtype)
    pointers = (ctypes.c_void_p * 2)(base.data_ptr(), out.data_ptr())
    assert lib.sdc_strided_copy(pointers, _copy(x.shape, x.element_size(), x.storage_offset(), x.stride(), 0,
                                                _dense_strides(tuple(x.shape)))) == 0
    assert torch.equal(out, x.contiguous())
    if x.dim():
        wide = torch.zeros((*x.shape[:-1], x.shape[-1] + 5), dtype=dtype)
        inner = wide[..., 3:3 + x.shape[-1]]
        pointers = (ctypes.c_void_p * 2)(base.data_ptr(), wide.data_ptr())
        assert lib.sdc_strided_copy(pointers, _copy(x.shape, x.element_size(), x.storage_offset(), x.stride(),
                                                    inner.storage_offset(), inner.stride())) == 0
        assert torch.equal(inner, x) and not wide[..., :3].any() and not wide[..., 3 + x.shape[-1]:].any()


def test_a_copy_runs_over_the_fewest_dims():
    """Size-1 dims dropped; neighbours merged where both sides step over them as one (d[0] is the rank)."""
    assert list(_copy((2, 3, 4), 4, 0, (12, 4, 1), 0, (12, 4, 1))) == [1, 4, 0, 0, 24, 1, 1]
    assert list(_copy((2, 1, 3, 4), 4, 5, (1, 9, 8, 2), 0, (12, 12, 4, 1))) == [2, 4, 5, 0, 2, 12, 1, 2, 12, 1]
    assert list(_copy((5, 2, 3), 2, 0, (3, 15, 1), 0, (6, 3, 1)))[:8] == [3, 2, 0, 0, 5, 2, 3, 3]
    assert list(_copy((), 8, 3, (), 0, ())) == [0, 8, 3, 0]


class Rows(torch.nn.Module):
    def forward(self, x):
        a = torch.tanh(x) * 2.0
        return a[:2], torch.sigmoid(a) + 1.0, torch.exp(a[:, 1:3])


def test_a_slice_that_leaves_the_run_is_its_own_tensor(tmp_path):
    """The first rows of a value (dense, at its start, but fewer elements) and a column slice, outputs
    of a run: each its own dense tensor with the slice's values (a JAX program's slice failed as a view of
    the whole)."""
    model = Rows()
    exe = _compile(tmp_path, model, (torch.randn(5, 4),), None)
    assert _segments(exe)
    for _ in range(2):
        x = torch.randn(5, 4)
        for got, want in zip(exe(x), model(x)):
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("segments", ["1", "0"])
def test_an_allocation_the_host_refuses_is_one_error(attention, monkeypatch, segments):
    """torch's allocator raising (the host out of memory, under the allocation limit): one line naming
    the launch, not torch's RuntimeError; with segments and with C launches one by one."""
    _, _, path = attention
    monkeypatch.setenv("SDC_C_SEGMENTS", segments)
    exe = sdc.runtime.load(path)
    x = torch.randn(2, 5, 16)
    exe(x)

    def refuse(*args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory\nmore")

    for name in ("empty", "empty_like", "empty_strided"):
        monkeypatch.setattr(torch, name, refuse)
    with pytest.raises(SdcError) as caught:
        exe(x)
    message = str(caught.value)
    assert "\n" not in message
    assert "out of memory for " + ("a run of C kernels" if segments == "1" else "C kernel 'k") in message, message
    assert "can't allocate memory" in message


def test_a_view_op_that_fails_while_planning_is_the_ops_error(tmp_path, monkeypatch):
    """Found by the fuzzer (onnx-bytes:121:95945): a flipped byte made a broadcast's target overflow;
    planning the run on meta tensors raised torch's RuntimeError. The run now goes one by one, and the
    broadcast's own error is a clean one."""
    from test.fuzz import worker

    monkeypatch.setenv("SDC_MAX_ALLOC", str(2 << 30))
    result = worker.run_case("onnx-bytes", 121, 95945, tmp_path / "case")
    assert result["status"] == "clean", result.get("traceback") or result


class Positions(torch.nn.Module):
    """Position ids from the sequence length (an iota of a symbolic size) between C kernels, as a
    transformer's embeddings make them; one output is a view of the ids themselves, another iota
    (float) only feeds the kernels."""

    def __init__(self):
        super().__init__()
        self.pos = torch.nn.Embedding(64, 8)
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        ids = torch.arange(x.shape[1])
        ramp = torch.arange(x.shape[1], dtype=torch.float32).unsqueeze(-1) * 0.1
        h = torch.tanh(self.lin(x) + self.pos(ids) + ramp)
        return self.lin(h) * 2, ids.unsqueeze(0)


def test_position_ids_of_the_sequence_length_run_inside_one_segment(tmp_path, monkeypatch):
    """The iota is a member of the run (its value made once per plan, from the symbols): one segment,
    the values of torch at each length, a new plan per length, and the ids handed out are the caller's."""
    torch.manual_seed(0)
    model = Positions().eval()
    exe = _compile(tmp_path, model, (torch.randn(2, 5, 8),), ({0: Dim("batch", max=8), 1: Dim("seq", max=64)},))
    (segment,) = _segments(exe)
    assert sum(getattr(m, "name", None) == "iota" for m in segment.members) == 2
    monkeypatch.setenv("SDC_C_SEGMENTS", "0")
    plain = sdc.runtime.load(tmp_path / "m.sdc")
    for batch, seq in ((2, 5), (1, 9), (3, 2), (2, 5)):
        x = torch.randn(batch, seq, 8)
        got = exe(x)
        with torch.no_grad():
            want = model(x)
        torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
        assert torch.equal(got[1], want[1]) and torch.equal(got[0], plain(x)[0])
        ids = exe(x.numpy())[1]
        ids.fill(-1)  # the caller's own: the next call's ids are not these
        assert torch.equal(exe(x)[1], want[1])
    assert len(segment.plans) == 3


class TokenTypes(torch.nn.Module):
    """BERT's token types: a buffer of zeros gathered by the position ids (torch.gather, ONNX's
    GatherElements), looked up in a table between C kernels. Every value before the lookup is fixed by
    the weights and the sequence length."""

    def __init__(self):
        super().__init__()
        self.register_buffer("types", torch.zeros(1, 16, dtype=torch.long))
        self.table = torch.nn.Embedding(2, 8)
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        ids = torch.arange(x.shape[1]).unsqueeze(0)
        types = torch.gather(self.types, 1, ids)
        return self.lin(torch.tanh(self.lin(x) + self.table(types))) * 2


def test_values_the_weights_and_lengths_decide_are_made_once_per_plan(tmp_path, monkeypatch):
    """The gather of the buffer by the position ids is a member of the run (no torch op between its C
    kernels: one instruction per call), computed when a length is first seen; the values are torch's at
    each length, and a length past the buffer is the gather's own error, at every call."""
    torch.manual_seed(0)
    model = TokenTypes().eval()
    exe = _compile(tmp_path, model, (torch.randn(2, 5, 8),), ({0: Dim("batch", max=8), 1: Dim("seq", max=64)},))
    (segment,) = exe._executor.fast_program
    assert isinstance(segment, CSegment)
    assert any(getattr(m, "name", None) == "gather_elements" for m in segment.members)
    for batch, seq in ((2, 5), (1, 16), (3, 2), (2, 5)):
        x = torch.randn(batch, seq, 8)
        with torch.no_grad():
            torch.testing.assert_close(exe(x)[0], model(x), rtol=1e-5, atol=1e-5)
    assert len(segment.plans) == 3
    for _ in range(2):
        with pytest.raises(SdcError, match=r"'sdc.gather_elements' failed in kernel k\d+"):
            exe(torch.randn(1, 17, 8))
