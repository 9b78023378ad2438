"""The artifact's weights file: sdc's own safetensors writer (hashed as it writes) and the loader that
reads the data section in one piece and views every weight on it (on cuda: one pinned host buffer,
one asynchronous copy). The safetensors library is the independent reference for the format."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from sdc.codegen.artifact import _save_weights
from sdc.diagnostics import SdcError
from sdc.runtime.artifact import WEIGHT_ALIGN, read_weight_data, _view


def _weights() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    return {
        "conv.weight": torch.randn(8, 3, 3, 3, generator=g).half(),
        "fc.bias": torch.randn(5, generator=g),
        "emb": torch.randn(4, 6, generator=g).to(torch.bfloat16),
        "index": torch.randint(-9, 9, (3,), generator=g),
        "mask": torch.rand(7, generator=g) > 0.5,
        "scalar": torch.tensor(2.5, dtype=torch.float64),
        "empty": torch.zeros(0, 4),
        "strided": torch.randn(6, 4, generator=g).t(),  # not contiguous: written in logical order
        "byte": torch.randint(0, 255, (3,), generator=g, dtype=torch.uint8),
        # a one-element splat expanded from a scalar: contiguous to torch, stride 0 (a bf16 constant
        # the planner folded; once a crash of the writer)
        "splat": torch.tensor(0.5, dtype=torch.bfloat16).expand(1),
        "splat2d": torch.tensor(1.5).expand(1, 1),
        "expanded": torch.tensor([1.0, 2.0]).expand(3, 2),
    }


def _error(message: str) -> SdcError:
    return SdcError(message)


def test_written_file_is_safetensors_and_its_hash_is_the_files(tmp_path):
    weights = _weights()
    path = tmp_path / "w.safetensors"
    digest = _save_weights(path, weights)
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    reference = load_file(str(path))  # the library's reader
    assert set(reference) == set(weights)
    for name, want in weights.items():
        assert reference[name].dtype == want.dtype and torch.equal(reference[name], want), name
    (n,) = struct.unpack("<Q", path.read_bytes()[:8])
    assert (8 + n) % 8 == 0  # the data section starts aligned
    assert json.loads(path.read_bytes()[8:8 + n])["__metadata__"]["format"] == "pt"


def test_loaded_weights_are_views_of_one_buffer(tmp_path):
    weights = _weights()
    path = tmp_path / "w.safetensors"
    _save_weights(path, weights)
    infos, data = read_weight_data(path, _error)
    loaded = {name: _view(data, info) for name, info in infos.items()}
    for name, want in weights.items():
        assert loaded[name].dtype == want.dtype and torch.equal(loaded[name], want), name
    # Every weight whose size is a multiple of 16 bytes is a 16-byte aligned view of the one buffer
    # (kernels specialize on that alignment: unaligned ones run several times slower); the others are
    # at the end, copied where their offset is not aligned.
    even = {name for name, t in weights.items() if t.numel() and t.numel() * t.element_size() % WEIGHT_ALIGN == 0}
    assert even and any(weights[name].numel() * weights[name].element_size() % WEIGHT_ALIGN for name in weights)
    base = data.untyped_storage().data_ptr()
    for name in even:
        assert loaded[name].untyped_storage().data_ptr() == base, name
        assert loaded[name].data_ptr() % WEIGHT_ALIGN == 0, name
    assert all(t.data_ptr() % WEIGHT_ALIGN == 0 for t in loaded.values() if t.numel())


def test_a_misaligned_weight_from_another_writer_is_copied(tmp_path):
    # f16 first, then an f32 at byte offset 2: a layout safetensors itself never writes
    half, single = torch.tensor([1.5], dtype=torch.float16), torch.tensor([3.25, -1.0])
    header = {"h": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]},
              "s": {"dtype": "F32", "shape": [2], "data_offsets": [2, 10]}}
    text = json.dumps(header).encode()
    path = tmp_path / "odd.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text + half.numpy().tobytes() + single.numpy().tobytes())
    infos, data = read_weight_data(path, _error)
    assert torch.equal(_view(data, infos["h"]), half) and torch.equal(_view(data, infos["s"]), single)


def test_a_truncated_data_section_is_refused(tmp_path):
    path = tmp_path / "w.safetensors"
    _save_weights(path, {"w": torch.randn(16)})
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(SdcError, match="data_offsets outside the file"):
        read_weight_data(path, _error)


@pytest.mark.gpu
def test_cuda_weights_are_one_device_buffer(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from sdc.runtime.artifact import Artifact

    weights = _weights()
    (tmp_path / "weights").mkdir()
    _save_weights(tmp_path / "weights" / "rank0.safetensors", weights)
    artifact = Artifact(Path(tmp_path), {"world_size": 1}, {"ranks": [{"rank": 0, "weights": "weights/rank0.safetensors"}]})
    loaded = artifact.load_weights(0, torch.device("cuda"))
    torch.cuda.synchronize()
    assert len({t.untyped_storage().data_ptr() for t in loaded.values()
                if t.numel() and t.numel() * t.element_size() % WEIGHT_ALIGN == 0}) == 1
    assert all(t.data_ptr() % WEIGHT_ALIGN == 0 for t in loaded.values() if t.numel())
    for name, want in weights.items():
        assert loaded[name].is_cuda and torch.equal(loaded[name].cpu(), want), name
