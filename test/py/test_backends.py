"""The codegen backends as plugins (sdc/codegen/backends.py): the registry, each target's list, and
how the planner's choice goes down a target's list."""

from __future__ import annotations

import pytest

from sdc.codegen.backends import BACKENDS, TORCH, Group, backend, choose
from sdc.codegen.kernel.program import LoweringError
from sdc.target import TARGETS


def test_every_registered_backend_is_named_by_its_key():
    assert set(BACKENDS) == {"c", "cuda", "triton", TORCH}
    for name in BACKENDS:
        assert backend(name).name == name


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_a_target_lists_known_backends_ending_with_torch(target):
    backends = TARGETS[target].backends
    assert backends[-1] == TORCH and set(backends) <= set(BACKENDS) and len(set(backends)) == len(backends)


def test_the_targets_backends_follow_their_capabilities():
    assert TARGETS["cpu"].backends == ("c", "torch") and TARGETS["cpu"].has_c_backend
    assert TARGETS["cuda"].backends == ("cuda", "triton", "torch") and TARGETS["cuda"].has_triton_backend


class _Fake:
    def __init__(self, name, result):
        self.name, self.result, self.offered = name, result, 0

    def generate(self, group):
        self.offered += 1
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


GROUP = Group([{"op": "exp", "inputs": ["x"], "outputs": ["y"], "attrs": {}}], ["x"], ["y"],
              {"x": {"shape": [4], "dtype": "f32"}, "y": {"shape": [4], "dtype": "f32"}}, "k0")


def test_choose_takes_the_first_that_renders_and_keeps_the_reasons_before_it():
    silent, refusing, taking, after = (_Fake("a", None), _Fake("b", LoweringError("no template")),
                                       _Fake("c", "kernel"), _Fake("d", "other"))
    assert choose([silent, refusing, taking, after], GROUP) == ("kernel", "no template")
    assert (silent.offered, refusing.offered, taking.offered, after.offered) == (1, 1, 1, 0)


def test_choose_stops_at_torch_with_every_reason():
    first, second = _Fake("a", LoweringError("one")), _Fake("b", LoweringError("two"))
    never = _Fake("c", "kernel")
    assert choose([first, second, backend(TORCH), never], GROUP) == (None, "one; two")
    assert never.offered == 0


def test_the_real_backends_render_a_group_or_say_why():
    generated, why = choose([backend("c"), backend(TORCH)], GROUP)
    assert generated.kernel["backend"] == "c" and why == ""
    generated, why = choose([backend("cuda"), backend("triton"), backend(TORCH)], GROUP)
    assert generated.kernel["backend"] == "triton" and "@triton.jit" in generated.source  # SDC_CUDA_CPP unset
    bad = Group(GROUP.ops, ["x"], ["y"], {"x": {"shape": [4], "dtype": "ui16"}, "y": {"shape": [4], "dtype": "ui16"}},
                "k1")
    generated, why = choose([backend("triton"), backend(TORCH)], bad)
    assert generated is None and "'sdc.exp' on ui16" in why


def test_a_renderer_says_why_not_when_a_formula_needs_a_primitive_it_lacks():
    from sdc.codegen.cuda.renderer import CudaRenderer
    from sdc.codegen.kernel.program import ELEMENTWISE, KernelProgram, Node, TensorArg
    from sdc.codegen.triton.renderer import TritonRenderer

    # mod with fmod: the primitive fmod, which neither GPU renderer has (C has it)
    nodes = [Node(0, "load", (), "f32", arg=0), Node(1, "load", (), "f32", arg=1),
             Node(2, "mod", (0, 1), "f32", attrs={"fmod": True})]
    args = [TensorArg("x", "f32", (0,)), TensorArg("y", "f32", (0,))]
    program = KernelProgram(ELEMENTWISE, (8,), args, [(TensorArg("z", "f32", (0,)), 2)], nodes, ["mod"])
    assert TritonRenderer().why_not(program) == "no Triton form for 'fmod' (in 'sdc.mod')"
    assert CudaRenderer().why_not(program) == "no CUDA C++ method for 'mod'"  # not in its op set at all
    assert TritonRenderer().why_not(KernelProgram(ELEMENTWISE, (8,), args[:1], [(args[0], 0)], nodes[:1], [])) is None


def test_the_template_registry_picks_by_the_groups_ops_in_order():
    from sdc.codegen.kernel.templates import TEMPLATES, template_of

    def ops(*names):
        return [{"op": n, "inputs": [], "outputs": [], "attrs": {}} for n in names]

    assert [t.name for t in TEMPLATES] == ["conv", "attention", "matmul", "elementwise/row"]
    assert template_of(ops("layout_cast", "conv", "add", "relu")).name == "conv"
    assert template_of(ops("matmul", "mul", "softmax", "matmul")).name == "attention"
    assert template_of(ops("matmul", "add", "gelu")).name == "matmul"
    assert template_of(ops("exp", "softmax")).name == "elementwise/row"


def test_the_c_backend_leaves_convolutions_and_custom_ops_without_a_reason():
    values = {v: {"shape": [1, 4, 8, 8], "dtype": "f32"} for v in ("x", "w", "c", "y")}
    c = backend("c")
    conv = {"op": "conv", "inputs": ["x", "w"], "outputs": ["c"], "attrs": {}}
    relu = {"op": "relu", "inputs": ["c"], "outputs": ["y"], "attrs": {}}
    assert c.generate(Group([conv, relu], ["x", "w"], ["y"], values, "k0")) is None  # oneDNN or sdc's conv kernels
    custom = {"op": "custom", "inputs": ["x"], "outputs": ["y"], "attrs": {"name": "mine"}}
    assert c.generate(Group([custom], ["x"], ["y"], values, "k1")) is None  # the user's own reference
    transposed = {"op": "conv_transpose", "inputs": ["x", "w"], "outputs": ["y"], "attrs": {}}
    with pytest.raises(LoweringError, match="no kernel template or renderer form for 'sdc.conv_transpose'"):
        c.generate(Group([transposed], ["x", "w"], ["y"], values, "k2"))
    assert c.functions == []
