"""Direct launches of compiled Triton kernels (sdc/runtime/launch/triton_direct.py): the C launcher called
with the argument list of a known call signature, bypassing `JITFunction.run`."""

from __future__ import annotations

import pytest
import torch
from triton_support import compile_cuda, interpreter, triton_launches  # noqa: F401 (the fixture: kernels interpret)

from sdc.runtime.launch import triton_direct

CHAIN = """
func.func @main(%x: tensor<?x24xf32> {sdc.name = "x"}, %b: tensor<24xf32> {sdc.name = "b"})
    -> (tensor<?x24xf32> {sdc.name = "out"}) {
  %0 = "sdc.add"(%x, %b) : (tensor<?x24xf32>, tensor<24xf32>) -> tensor<?x24xf32>
  %1 = "sdc.silu"(%0) : (tensor<?x24xf32>) -> tensor<?x24xf32>
  return %1 : tensor<?x24xf32>
}
"""


def test_the_installed_triton_launches_in_the_form_this_module_knows():
    """If a Triton release changes how `JITFunction.run` calls its launcher, the direct path turns
    itself off (ordinary launches); this test says so instead of a silent slowdown."""
    assert triton_direct._launcher_form_known()


def test_under_the_interpreter_nothing_is_prepared(tmp_path):
    exe = compile_cuda(CHAIN, tmp_path / "chain.sdc")
    x, b = torch.randn(5, 24), torch.randn(24)
    for _ in range(3):
        torch.testing.assert_close(exe(x, b)[0], torch.nn.functional.silu(x + b))
    for step in triton_launches(exe):
        assert all(not known.direct for known in step.settled.values())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("direct", ["1", "0"])
def test_direct_launches_on_cuda_match_torch_at_every_size(tmp_path, monkeypatch, direct):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv(triton_direct.DIRECT_ENV, direct)
    exe = compile_cuda(CHAIN, tmp_path / "chain.sdc", device="cuda")
    g = torch.Generator(device="cuda").manual_seed(3)
    b = torch.randn(24, device="cuda", generator=g)
    for rows in (7, 7, 7, 300, 300, 7):
        x = torch.randn(rows, 24, device="cuda", generator=g)
        torch.testing.assert_close(exe(x, b)[0], torch.nn.functional.silu(x + b), rtol=1e-5, atol=1e-6)
    # An operand at an address that is not 16-byte aligned: another compiled kernel, another entry.
    x = torch.randn(7 * 24 + 1, device="cuda", generator=g)[1:].view(7, 24)
    for _ in range(2):
        torch.testing.assert_close(exe(x, b)[0], torch.nn.functional.silu(x + b), rtol=1e-5, atol=1e-6)
    entries = [d for step in triton_launches(exe) for known in step.settled.values() for d in known.direct.values()]
    if direct == "1":
        assert entries and all(d is not None for d in entries), triton_direct.declined
    else:
        assert all(d is None for d in entries)
