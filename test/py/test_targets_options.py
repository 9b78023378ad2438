"""The target registry, CompileOptions and the per-target compile pipelines.

One registry says what each target can do and every target check reads it; one frozen options
value carries how a model is compiled, into the manifest and (later) the compile cache key.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import pydoc
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sdc
from sdc.diagnostics import SdcError
from sdc.options import CompileOptions
from sdc.target import DEFAULT_TARGET, TARGETS, Target, get_target, supported_targets

ROOT = Path(__file__).resolve().parents[2]

MODEL = """
func.func @main(%x: tensor<?x8xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["B", 8]>}) -> tensor<?x8xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<8xf32>
  %0 = "sdc.mul"(%x, %w) : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  %1 = "sdc.tanh"(%0) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %1 : tensor<?x8xf32>
}
"""


def sdc_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sdc.cli.main", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def sdc_opt(*args, stdin: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sdc.cli.opt", *map(str, args)], input=stdin, capture_output=True,
                          text=True, timeout=120)


# ---------------------------------------------------------------- the target registry


def test_registry_keys_are_the_targets_names():
    assert list(TARGETS) == ["cpu", "cuda"]
    for name, target in TARGETS.items():
        assert isinstance(target, Target) and target.name == name
        assert get_target(name) is target
    assert DEFAULT_TARGET in TARGETS and TARGETS[DEFAULT_TARGET].supported


def test_capabilities_are_attributes():
    cpu, cuda = get_target("cpu"), get_target("cuda")
    assert cpu.supported and cuda.supported and supported_targets() == ("cpu", "cuda")
    assert cuda.has_triton_backend and not cpu.has_triton_backend
    assert cpu.flops_per_byte < cuda.flops_per_byte
    assert {p.op for p in cpu.preferred_layouts} == {"convolution"}
    assert cpu.default_precision == "f32"
    with pytest.raises(dataclasses.FrozenInstanceError):
        cpu.supported = False  # type: ignore[misc]


def test_unknown_and_unsupported_targets_are_one_line_errors():
    with pytest.raises(SdcError, match=r"^unknown target 'tpu' \(targets: cpu, cuda\)$"):
        get_target("tpu")
    waiting = dataclasses.replace(get_target("cuda"), name="tpu", supported=False, not_yet="no backend")
    with pytest.raises(SdcError, match=r"^target 'tpu' is not supported yet: only 'cpu' and 'cuda' are \(no backend\)$"):
        waiting.check_supported()
    get_target("cpu").check_supported()


def test_layout_table_and_fusion_balance_come_from_the_registry():
    from sdc.transforms import fuse as F
    from sdc.transforms import layout_model as lm

    for name, target in TARGETS.items():
        for pref in target.preferred_layouts:
            rule = lm.rule_for(name, pref.op, "")
            assert rule.costs[pref.layout] == 0.0 and rule.why == pref.why
            assert len(rule.costs) == 2, f"{name}: {pref.op} must accept both layout kinds to prefer one"
    assert lm.rule_for("cpu", "convolution", "convolution").why != lm.rule_for("cuda", "convolution", "").why
    with pytest.raises(SdcError, match="unknown target 'tpu'"):
        lm.rule_for("tpu", "add", "elementwise binary")
    assert F.FusePass().target == DEFAULT_TARGET
    from sdc.transforms.layout_constraints import LayoutConstraintsPass

    assert LayoutConstraintsPass().target == DEFAULT_TARGET


def _literal_target_lists(tree: ast.AST) -> list[int]:
    names = set(TARGETS)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) >= 2:
            values = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(values) == len(node.elts) and set(values) <= names and len(set(values)) >= 2:
                found.append(node.lineno)
        if isinstance(node, ast.Dict) and len(node.keys) >= 2:
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            # a table keyed by every target is a per-target table; it must live in the registry
            # (the one exception: the compile pipelines, named per target in transforms/pipeline.py)
            if len(keys) == len(node.keys) and set(keys) == names:
                found.append(node.lineno)
    return found


def test_no_module_keeps_its_own_list_of_targets():
    allowed = {ROOT / "sdc" / "target.py", ROOT / "sdc" / "transforms" / "pipeline.py"}
    offenders = []
    for path in sorted((ROOT / "sdc").rglob("*.py")):
        if path in allowed:
            continue
        for line in _literal_target_lists(ast.parse(path.read_text(encoding="utf-8"))):
            offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert offenders == [], "target lists outside sdc/target.py (read sdc.target.TARGETS instead): " + \
        ", ".join(offenders)


def test_the_list_finder_finds_lists():
    # the check above must be able to fail
    assert _literal_target_lists(ast.parse('TARGETS = ("cpu", "cuda")\nif t in ["cuda", "cpu"]: pass')) == [1, 2]
    assert _literal_target_lists(ast.parse('BALANCE = {"cuda": 20.0, "cpu": 8.0}')) == [1]
    assert _literal_target_lists(ast.parse('x = ("cpu", "gpu")\ny = ("cpu",)')) == []


def test_pipelines_cover_every_target():
    from sdc.transforms.pipeline import COMPILE_PIPELINES, compile_pipeline

    assert set(COMPILE_PIPELINES) == set(TARGETS)
    for name in TARGETS:
        pipeline = compile_pipeline(CompileOptions(target=name))
        assert f"sdc-layout-constraints{{target={name}}}" in pipeline and f"sdc-fuse{{target={name}}}" in pipeline
    cpu = compile_pipeline(CompileOptions())
    assert cpu[:5] == ("sdc-verify", "sdc-canonicalize", "cse", "sdc-patch-conv", "sdc-shape-constraints")
    assert cpu[-3:] == ("sdc-layout-constraints{target=cpu}", "sdc-fuse{target=cpu}", "sdc-verify")
    assert not any(p.startswith("sdc-sharding") or p.startswith("sdc-spmd") for p in cpu)
    sharded = compile_pipeline(CompileOptions(mesh="dp=2", input_shapes={"x": ["B", 8], "B": "1..64"}), True)
    assert sharded[4] == 'sdc-shape-constraints{input-shape="B=1..64 x=B,8"}'
    assert sharded[5:7] == ("sdc-sharding-propagation", "sdc-spmd-partition")


def test_the_driver_runs_pass_objects_with_typed_options_and_records_their_text():
    from sdc.dialect.bindings import ShapeBinding
    from sdc.transforms import get_pass
    from sdc.transforms.base import ModulePass
    from sdc.transforms.pipeline import _ELEMENT, compile_passes, compile_pipeline, element_text, parse_options

    options = CompileOptions(target="cuda", input_shapes={"x": ["B", 8], "B": "1..64"}, precision="bf16",
                             memory_budget=4096)
    passes = compile_passes(options)
    by_name = {p.name: p for p in passes if isinstance(p, ModulePass)}
    assert by_name["sdc-shape-constraints"].input_shape == (ShapeBinding("B", lo=1, hi=64),
                                                            ShapeBinding("x", dims=("B", 8)))
    assert by_name["sdc-recompute"].memory_budget == 4096 and by_name["sdc-fuse"].target == "cuda"
    assert by_name["sdc-mixed-precision"].precision == "bf16"
    assert [p for p in passes if not isinstance(p, ModulePass)] == ["cse"]
    texts = compile_pipeline(options)
    assert texts == tuple(element_text(p) for p in passes)
    assert "sdc-recompute{memory-budget=4096}" in texts and "sdc-mixed-precision{precision=bf16}" in texts
    for p in by_name.values():  # the text reads back to an equal pass (what sdc-opt runs)
        name, text = _ELEMENT.match(p.pipeline_text()).groups()
        assert get_pass(name).from_options(parse_options(text)) == p


# ---------------------------------------------------------------- the passes' target option


def test_every_pass_is_registered_under_its_own_name():
    from sdc.transforms import PASSES

    for key, factory in PASSES.items():
        assert factory().name == key


@pytest.mark.parametrize("pass_name", ["sdc-fuse", "sdc-layout-constraints"])
def test_pass_target_option_reads_the_registry(pass_name):
    done = sdc_opt("-p", f"{pass_name}{{target=nope}}", stdin="")
    assert done.returncode == 2 and "Traceback" not in done.stderr  # a bad pipeline is a bad command line
    assert done.stderr.strip() == (f"error: pass '{pass_name}' option 'target': unknown target 'nope' "
                                   "(targets: cpu, cuda)")
    assert sdc_opt("-p", f"{pass_name}{{target=cuda}}", stdin="").returncode == 0


# ---------------------------------------------------------------- sdc compile --target


def test_compile_refuses_an_unknown_target_in_one_line(tmp_path):
    (tmp_path / "m.mlir").write_text(MODEL)
    done = sdc_cli("compile", tmp_path / "m.mlir", "--target", "nope", "-o", tmp_path / "m.sdc")
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == ["error: unknown target 'nope' (targets: cpu, cuda)"]
    assert not (tmp_path / "m.sdc").exists()
    done = sdc_cli("compile", "--help")
    assert "cpu, cuda (default cpu" in " ".join(done.stdout.split())


def test_sdc_compile_refuses_unknown_target():
    with pytest.raises(SdcError, match=r"unknown target 'nope' \(targets: cpu, cuda\)"):
        sdc.compile("whatever.onnx", target="nope")
    with pytest.raises(SdcError, match="cannot open 'whatever.onnx'"):  # cuda is accepted: on to the model
        sdc.compile("whatever.onnx", options=CompileOptions(target="cuda"))
    with pytest.raises(SdcError, match=r"precision 'tf32' is not supported on target 'cpu' \(it runs f32, bf16, f16\)"):
        sdc.compile("whatever.onnx", precision="tf32")
    with pytest.raises(SdcError, match="cannot open 'whatever.onnx'"):  # bf16 is accepted: on to the model
        sdc.compile("whatever.onnx", precision="bf16")


# ---------------------------------------------------------------- CompileOptions


def test_options_are_frozen_normalized_and_hashable():
    a = CompileOptions(mesh="dp=2,tp=2", input_shapes={"x": ["B", 3], "B": "1..64"})
    b = CompileOptions(mesh={"dp": 2, "tp": 2}, input_shapes={"B": "1..64", "x": ("B", 3)})
    assert a == b and hash(a) == hash(b) and a.cache_key() == b.cache_key()
    assert a.mesh == (("dp", 2), ("tp", 2))
    assert a.input_shapes == (("B", "1..64"), ("x", ("B", 3)))
    assert a.precision == "f32"  # the target's default, filled in
    assert len({a, b, CompileOptions()}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.target = "cuda"  # type: ignore[misc]
    # replace goes through the same normalization
    assert dataclasses.replace(a, target="cuda").mesh == a.mesh
    assert CompileOptions.of(a, dump_ir="/tmp/ir") == dataclasses.replace(a, dump_ir="/tmp/ir")
    assert CompileOptions(input_shapes={"x": [8]}).input_shapes == (("x", (8,)),)  # dims, not a symbol's value
    assert CompileOptions(target="cuda").target_info is get_target("cuda")  # the registry's object, not a copy


def test_cache_key_is_stable_and_sensitive_to_what_changes_the_artifact():
    base = CompileOptions()
    key = base.cache_key()
    assert len(key) == 64 and int(key, 16) >= 0
    # the same in a fresh process (no hash randomization in it)
    code = "from sdc.options import CompileOptions; print(CompileOptions().cache_key())"
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert fresh.stdout.strip() == key
    changed = [CompileOptions(target="cuda"), CompileOptions(mesh="dp=2"), CompileOptions(mesh="tp=2"),
               CompileOptions(input_shapes={"x": ["B", 8]}), CompileOptions(input_shapes={"B": "1..64"}),
               CompileOptions(mesh="dp=2", shardings={"x": ("dp", None)})]
    keys = {o.cache_key() for o in changed}
    assert len(keys) == len(changed) and key not in keys
    # what only shapes the report or the dump does not
    assert CompileOptions(dump_ir="/tmp/ir", explain="layout").cache_key() == key


@pytest.mark.parametrize("kwargs, message", [
    ({"target": "nope"}, r"unknown target 'nope' \(targets: cpu, cuda\)"),
    ({"mesh": "dp=two"}, r"bad mesh 'dp=two': 'dp=two' is not AXIS=SIZE"),
    ({"mesh": {"dp": 0}}, r"bad mesh \{'dp': 0\}: mesh axis 'dp' has size 0"),
    ({"mesh": "dp=2,dp=2"}, r"mesh axis 'dp' is given twice"),
    ({"input_shapes": {"x": ["B", "3!"]}}, r"--input-shape 'x=B,3!': '3!' is not a size, a symbol name or '\?'"),
    ({"input_shapes": {"B": "64..1"}}, r"--input-shape 'B=64..1': the range is empty \(64 > 1\)"),
    ({"shardings": {"x": "dp"}}, r"sharding of 'x' must list one entry per dim"),
    ({"precision": "f8"}, r"unknown precision 'f8'"),
    ({"explain": "everything"}, r"explain must be one of layout, sharding, found 'everything'"),
])
def test_bad_options_are_refused_on_construction(kwargs, message):
    with pytest.raises(SdcError, match=message):
        CompileOptions(**kwargs)


def test_unknown_option_keyword_is_a_type_error():
    with pytest.raises(TypeError, match="unknown compile option 'targt'"):
        sdc.compile("m.onnx", targt="cpu")


def test_json_round_trip():
    options = CompileOptions(mesh="dp=2,tp=2", input_shapes={"x": ["B", 8], "B": 4, "S": "..64"},
                             shardings={"x": ("dp", None), "w": [None, ("dp", "tp")]}, dump_ir="ir", explain="sharding")
    data = json.loads(json.dumps(options.to_json()))
    assert data["mesh"] == "dp=2,tp=2" and data["input_shapes"] == {"B": 4, "S": "..64", "x": ["B", 8]}
    back = CompileOptions.from_json(data)
    assert back == options and back.cache_key() == options.cache_key()
    assert CompileOptions.from_json(CompileOptions().to_json()) == CompileOptions()
    assert CompileOptions.from_json({"target": "cpu", "pipeline": "sdc-verify", "source": "m.onnx"}) == CompileOptions()
    with pytest.raises(SdcError, match="compile options must be a JSON object"):
        CompileOptions.from_json(["cpu"])


def test_help_of_sdc_compile_lists_every_option():
    text = pydoc.render_doc(sdc.compile, renderer=pydoc.plaintext)
    for f in dataclasses.fields(CompileOptions):
        assert f"{f.name} (default" in text, f.name
        assert f.metadata["doc"].split()[0] in text
    from sdc.compiler import compile as driver_compile

    assert all(f"{f.name} (default" in driver_compile.__doc__ for f in dataclasses.fields(CompileOptions))


# ---------------------------------------------------------------- kernel choices: fields, env defaults


KERNEL_ENV = ("SDC_C_KERNELS", "SDC_CUDA_CPP", "SDC_CONV_KERNEL")


@pytest.fixture
def no_kernel_env(monkeypatch):
    for name in KERNEL_ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_kernel_choices_default_from_the_environment_read_when_options_are_built(no_kernel_env):
    default = CompileOptions()
    assert (default.c_kernels, default.cuda_cpp, default.conv_kernel) == (True, (), "cudnn")
    no_kernel_env.setenv("SDC_C_KERNELS", "off")
    no_kernel_env.setenv("SDC_CUDA_CPP", " Elementwise ")
    no_kernel_env.setenv("SDC_CONV_KERNEL", "triton")
    from_env = CompileOptions(target="cuda")
    assert (from_env.c_kernels, from_env.cuda_cpp, from_env.conv_kernel) == (False, ("elementwise",), "triton")
    # a field given beats the variable; the variable is not read again by replace
    assert CompileOptions(c_kernels=True, cuda_cpp=(), conv_kernel="cudnn") == default
    no_kernel_env.setenv("SDC_CONV_KERNEL", "cudnn")
    assert dataclasses.replace(from_env, mesh="dp=2").conv_kernel == "triton"
    no_kernel_env.setenv("SDC_CUDA_CPP", "none")
    assert CompileOptions().cuda_cpp == ()


def test_kernel_choices_are_in_the_cache_key_and_the_json(no_kernel_env):
    base = CompileOptions(target="cuda")
    changed = [dataclasses.replace(base, c_kernels=False), dataclasses.replace(base, cuda_cpp="elementwise"),
               dataclasses.replace(base, conv_kernel="triton")]
    keys = {o.cache_key() for o in changed}
    assert len(keys) == 3 and base.cache_key() not in keys
    for options in changed:
        data = json.loads(json.dumps(options.to_json()))
        assert CompileOptions.from_json(data) == options
    no_kernel_env.setenv("SDC_CONV_KERNEL", "cudnn")  # a manifest's recorded choice wins over the variable
    assert CompileOptions.from_json(changed[2].to_json()).conv_kernel == "triton"
    assert changed[1].to_json()["cuda_cpp"] == ["elementwise"]


@pytest.mark.parametrize("kwargs, env, message", [
    ({"c_kernels": "yes"}, {}, r"c_kernels must be True or False, found 'yes'"),
    ({}, {"SDC_C_KERNELS": "maybe"}, r"SDC_C_KERNELS='maybe' is not one of 1, on, 0, off"),
    ({"cuda_cpp": ("elementwise", "matmul")}, {}, r"cuda_cpp: unknown kernel family 'matmul' \(families: elementwise\)"),
    ({}, {"SDC_CUDA_CPP": "conv"}, r"SDC_CUDA_CPP='conv': unknown kernel family 'conv' \(families: elementwise\)"),
    ({"conv_kernel": "cutlass"}, {}, r"conv_kernel: expected one of cudnn, triton, found 'cutlass'"),
    ({}, {"SDC_CONV_KERNEL": "cutlass"}, r"SDC_CONV_KERNEL='cutlass': expected one of cudnn, triton$"),
])
def test_bad_kernel_choices_are_one_error_on_construction(no_kernel_env, kwargs, env, message):
    for name, value in env.items():
        no_kernel_env.setenv(name, value)
    with pytest.raises(SdcError, match=message):
        CompileOptions(**kwargs)


def test_the_cuda_cpp_families_are_kernel_templates():
    from sdc.codegen.cuda import FAMILIES
    from sdc.codegen.kernel.program import ELEMENTWISE
    from sdc.options import CUDA_CPP_FAMILIES

    assert FAMILIES == CUDA_CPP_FAMILIES == (ELEMENTWISE,)


def test_the_c_kernels_option_reaches_the_plan(no_kernel_env):
    from sdc.codegen.plan import build_plan
    from sdc.ir_text import parse_module
    from sdc.transforms.pipeline import compile_pipeline
    from sdc.compiler import run_pipeline

    def backends(options):
        module = parse_module(MODEL)
        run_pipeline(module, compile_pipeline(options))
        plan = build_plan(module, {"w": np.ones(8, np.float32)}, options)
        return [s["kernel"]["backend"] for s in plan.ranks[0].launches()]

    assert backends(CompileOptions()) == ["c"]
    assert backends(CompileOptions(c_kernels=False)) == ["reference"]


MATMUL = """
func.func @main(%x: tensor<16x32xf32> {sdc.name = "x"}, %w: tensor<32x16xf32> {sdc.name = "w"})
    -> (tensor<16x16xf32> {sdc.name = "y"}) {
  %0 = "sdc.matmul"(%x, %w) : (tensor<16x32xf32>, tensor<32x16xf32>) -> tensor<16x16xf32>
  return %0 : tensor<16x16xf32>
}
"""


def test_the_planner_takes_the_precision_from_the_options_not_the_module():
    pytest.importorskip("triton")
    from sdc.codegen.plan import build_plan
    from sdc.ir_text import parse_module
    from sdc.mlir import ir

    def dot_precision(precision: str, recorded: str | None) -> str:
        module = parse_module(MATMUL)
        if recorded is not None:  # what sdc-mixed-precision writes; the planner no longer reads it
            with module.context:
                module.operation.attributes["sdc.precision"] = ir.StringAttr.get(recorded)
        plan = build_plan(module, {}, CompileOptions(target="cuda", precision=precision))
        (source,) = plan.kernel_files().values()
        return "tf32" if 'input_precision="tf32"' in source else "ieee"

    assert dot_precision("tf32", None) == "tf32"
    assert dot_precision("f32", "tf32") == "ieee"
    assert build_plan(parse_module(MATMUL), {}, "cuda").target == "cuda"  # a name: that target's defaults


# ---------------------------------------------------------------- the manifest


def test_manifest_carries_the_options(tmp_path):
    from sdc.compiler import compile_module
    from sdc.ir_text import parse_module

    options = CompileOptions(input_shapes={"B": "1..16"}, dump_ir=tmp_path / "ir")
    w = np.random.default_rng(3).standard_normal(8).astype(np.float32)
    exe = compile_module(parse_module(MODEL), {"w": w}, options, output=tmp_path / "m.sdc",
                         provenance={"source": "m.mlir", "frontend": "mlir"})
    recorded = json.loads((tmp_path / "m.sdc" / "manifest.json").read_text())["compile_options"]
    assert recorded["target"] == "cpu" and recorded["input_shapes"] == {"B": "1..16"}
    assert recorded["source"] == "m.mlir"
    assert recorded["pipeline"].startswith('sdc-verify,sdc-canonicalize,cse,sdc-patch-conv,sdc-shape-constraints{input-shape="B=1..16"}')
    assert CompileOptions.from_json(recorded) == options
    assert (tmp_path / "ir" / "00-input.mlir").is_file()
    x = np.random.default_rng(4).standard_normal((2, 8)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(exe(x)[0]), np.tanh(x * w), rtol=1e-6, atol=1e-6)


def test_old_style_options_mapping_is_refused():
    from sdc.compiler import build_artifact

    with pytest.raises(TypeError, match="options must be a CompileOptions, found dict"):
        build_artifact(None, {}, "x.sdc", {"source": "m.onnx"})  # type: ignore[arg-type]
