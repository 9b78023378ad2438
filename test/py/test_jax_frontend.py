"""The JAX / StableHLO frontend: JAX functions against jax on the CPU, on fresh random inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import sdc  # noqa: E402
from sdc.cli.main import main  # noqa: E402
from sdc.diagnostics import SdcError  # noqa: E402
from sdc.frontend import FRONTENDS, frontend_for  # noqa: E402
from sdc.frontend.stablehlo import coverage  # noqa: E402
from sdc.frontend.stablehlo.convert import import_stablehlo  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TOL = {"rtol": 1e-4, "atol": 1e-5}  # f32: summation order differs from XLA's


@pytest.fixture
def rng():
    return np.random.default_rng()  # fresh inputs every run


def normal(rng, *shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------- models


def mlp(p, x):
    h = jnp.tanh(x @ p["w1"] + p["b1"])
    return jax.nn.softmax(h @ p["w2"], axis=-1)


def convnet(p, x):  # NHWC activations, HWIO kernels
    nhwc = ("NHWC", "HWIO", "NHWC")
    y = lax.conv_general_dilated(x, p["k1"], (1, 1), "SAME", dimension_numbers=nhwc)
    y = jax.nn.relu(y + p["b1"])
    y = lax.conv_general_dilated(y, p["k2"], (2, 2), ((1, 1), (1, 1)), rhs_dilation=(1, 1), dimension_numbers=nhwc)
    y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    return jnp.mean(y, axis=(1, 2)) @ p["w"]


def layer_norm(x, g, b):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + 1e-5) * g + b


def block(p, x, heads: int = 2):
    """A pre-norm transformer block: attention then a GELU MLP, each with a residual."""
    batch, seq, dim = x.shape

    def split(t):
        return t.reshape(batch, seq, heads, dim // heads).transpose(0, 2, 1, 3)

    h = layer_norm(x, p["g1"], p["b1"])
    q, k, v = split(h @ p["wq"]), split(h @ p["wk"]), split(h @ p["wv"])
    a = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(dim // heads), axis=-1)
    x = x + (a @ v).transpose(0, 2, 1, 3).reshape(batch, seq, dim) @ p["wo"]
    h = layer_norm(x, p["g2"], p["b2"])
    return x + jax.nn.gelu(h @ p["w1"]) @ p["w2"]


def block_params(rng, dim: int = 8) -> dict:
    names = {"g1": (dim,), "b1": (dim,), "g2": (dim,), "b2": (dim,), "wq": (dim, dim), "wk": (dim, dim),
             "wv": (dim, dim), "wo": (dim, dim), "w1": (dim, 2 * dim), "w2": (2 * dim, dim)}
    return {k: normal(rng, *s) for k, s in names.items()}


# ---------------------------------------------------------------- numerics against jax


def test_mlp_with_softmax(rng):
    p = {"w1": normal(rng, 4, 8), "b1": normal(rng, 8), "w2": normal(rng, 8, 3)}
    exe = sdc.compile(mlp, (p, normal(rng, 2, 4)))
    assert [i.name for i in exe.inputs] == ["p.b1", "p.w1", "p.w2", "x"]  # pytree order: sorted keys
    x = normal(rng, 2, 4)
    y = exe(p, x)
    assert isinstance(y, np.ndarray)
    np.testing.assert_allclose(y, mlp(p, x), **TOL)


def test_conv_net_nhwc_hwio(rng):
    p = {"k1": normal(rng, 3, 3, 3, 4), "b1": normal(rng, 4), "k2": normal(rng, 3, 3, 4, 8), "w": normal(rng, 8, 5)}
    exe = sdc.compile(convnet, (p, normal(rng, 2, 8, 8, 3)))
    x = normal(rng, 2, 8, 8, 3)
    np.testing.assert_allclose(exe(p, jnp.asarray(x)), convnet(p, x), **TOL)  # jax arrays in, numpy out


def test_transformer_block_with_layer_norm(rng):
    p = block_params(rng)
    exe = sdc.compile(block, (p, normal(rng, 2, 4, 8)))
    x = normal(rng, 2, 4, 8)
    _block_matches(exe(p, x), block(p, x))


def _block_matches(got, want) -> None:
    """`TOL`, with the absolute part scaled to the outputs: the block's reach about 40, and an
    element near 0 there carries the rounding of sums of that size (f32: a few 1e-6 of it), which an
    absolute 1e-5 does not always cover."""
    want = np.asarray(want)
    atol = max(TOL["atol"], 2e-6 * float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=TOL["rtol"], atol=atol)


def test_symbolic_batch_runs_at_several_sizes(rng):
    p = block_params(rng)
    (b,) = jax.export.symbolic_shape("b")
    exe = sdc.compile(block, (p, jax.ShapeDtypeStruct((b, 4, 8), jnp.float32)))
    assert str(exe.inputs[-1]) == "x: f32[b, 4, 8]"
    for batch in (1, 3, 6):
        x = normal(rng, batch, 4, 8)
        _block_matches(exe(p, x), block(p, x))


def test_pytrees_in_and_out(rng):
    def fn(params, inputs):
        h = inputs["x"] @ params[0]["w"] + params[1]
        return {"sum": h.sum(axis=0), "parts": (jnp.maximum(h, 0.0), -h * inputs["scale"])}

    params = ({"w": normal(rng, 3, 5)}, normal(rng, 5))
    inputs = {"x": normal(rng, 4, 3), "scale": normal(rng, 1)}
    exe = sdc.compile(fn, (params, inputs))
    assert [o.name for o in exe.outputs] == ["out.parts.0", "out.parts.1", "out.sum"]
    inputs = {"x": normal(rng, 4, 3), "scale": normal(rng, 1)}
    got, want = exe(params, inputs), fn(params, inputs)
    assert set(got) == {"sum", "parts"} and isinstance(got["parts"], tuple)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(g, w, **TOL)
    with pytest.raises(SdcError, match="do not have the structure of the example arguments"):
        exe(params, inputs["x"])


def test_closed_over_weights_become_parameters(rng):
    w = normal(rng, 64, 32)  # over the inline limit: a weight, not IR text

    def fn(x):
        return jnp.tanh(x @ w)

    exe = sdc.compile(fn, (normal(rng, 2, 64),))
    x = normal(rng, 2, 64)
    np.testing.assert_allclose(exe(x), fn(x), **TOL)


def chlo_functions(x, unit, above_one):
    """What JAX lowers to chlo ops (composites in jax.export) or decomposes: `unit` in (-1, 1),
    `above_one` > 1, for the functions defined only there."""
    special = jax.scipy.special
    values, indices = lax.top_k(x, 3)
    return (special.erf(x), special.erfc(x), special.erfinv(unit), jnp.tan(unit), jnp.sinh(x), jnp.cosh(x),
            jnp.arcsin(unit), jnp.arccos(unit), jnp.arctan(x), jnp.arcsinh(x), jnp.arccosh(above_one),
            jnp.arctanh(unit), jax.nn.gelu(x, approximate=False), values, indices)


def test_chlo_ops_against_jax(rng):
    def inputs():
        x = normal(rng, 3, 8)
        unit = rng.uniform(-0.9, 0.9, (3, 8)).astype(np.float32)
        return x, unit, (1.1 + rng.uniform(0, 3, (3, 8))).astype(np.float32)

    exe = sdc.compile(chlo_functions, inputs())
    args = inputs()
    got, want = exe(*args), chlo_functions(*args)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, i
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5, err_msg=f"result {i}")


def control_flow(x, w):
    """Loops with constant trip counts, and branches on a constant and on a run-time predicate."""
    y = lax.fori_loop(0, 4, lambda i, c: jnp.tanh(c @ w) + i, x)
    carry, rows = lax.scan(lambda c, row: (c + row, c * row), jnp.zeros(x.shape[1], x.dtype), x)
    fixed = lax.cond(True, lambda a: a + 1.0, lambda a: a - 1.0, x)
    chosen = lax.cond(x.sum() > 0, lambda a: a * 2.0, jnp.sin, x)
    index = (x[0, 0] > 0).astype(jnp.int32) + (x[0, 1] > 0).astype(jnp.int32)  # 0, 1 or 2 at run time
    switched = lax.switch(index, [jnp.cos, jnp.exp, jnp.sinh], x)
    window = lax.dynamic_update_slice(x, lax.dynamic_slice(y, (1, 2), (2, 3)), (0, 4))
    return y, carry, rows, fixed, chosen, switched, window


def test_static_control_flow_against_jax(rng):
    w = normal(rng, 6, 6) * 0.3
    exe = sdc.compile(control_flow, (normal(rng, 4, 6), w))
    for _ in range(3):  # fresh inputs: the run-time branch goes both ways
        x = normal(rng, 4, 6)
        for i, (g, want) in enumerate(zip(exe(x, w), control_flow(x, w))):
            np.testing.assert_allclose(g, want, **TOL, err_msg=f"result {i}")


def test_a_loop_without_a_constant_trip_count_is_one_error_at_its_line(rng):
    def fn(x):
        return lax.while_loop(lambda c: c.sum() < 100.0, lambda c: c * 2.0, x)

    with pytest.raises(SdcError) as e:
        sdc.compile(fn, (normal(rng, 3),))
    message = str(e.value)
    assert "stablehlo.while at " in message and "test_jax_frontend.py:" in message
    assert "not known at compile time" in message and "\n" not in message


def test_an_unsupported_op_inside_a_loop_is_listed_up_front(rng):
    def fn(x):
        return lax.fori_loop(0, 2, lambda i, c: jnp.sort(c) + 1.0, x)

    with pytest.raises(SdcError, match=r"stablehlo.while \(its regions use stablehlo.sort at .*test_jax_frontend"):
        sdc.compile(fn, (normal(rng, 5),))


# ---------------------------------------------------------------- errors


def test_every_unconverted_op_is_listed_once_before_anything_runs(rng):
    def fn(x):
        return jnp.sort(x, axis=-1) + jnp.flip(x, axis=0)  # stablehlo.sort, stablehlo.reverse

    with pytest.raises(SdcError) as e:
        sdc.compile(fn, (normal(rng, 3, 4),))
    message = str(e.value)
    assert message.startswith("unsupported StableHLO ops in 'fn (jax)' (2): ")
    assert "stablehlo.sort at " in message and "stablehlo.reverse at " in message
    assert message.count("test_jax_frontend.py:") == 2  # each with its source line
    assert "\n" not in message


def test_an_unsupported_form_of_a_converted_op_says_why(rng):
    def fn(x):
        return lax.reduce(x, 0.0, lambda a, b: a + b * 2.0, (1,))  # a body that is not one add

    with pytest.raises(SdcError, match=r"stablehlo.reduce \(a reduction body other than"):
        sdc.compile(fn, (normal(rng, 3, 4),))


def test_user_errors_of_the_jax_frontend(rng):
    with pytest.raises(SdcError, match="a JAX function needs example_args"):
        sdc.compile(mlp)
    (b,) = jax.export.symbolic_shape("b")
    with pytest.raises(SdcError, match="input 'x' has the symbolic dim '2\\*b'"):
        sdc.compile(lambda x: x * 2.0, (jax.ShapeDtypeStruct((2 * b, 3), jnp.float32),))
    with pytest.raises(SdcError, match="dynamic_shapes are torch.export's"):
        sdc.compile(mlp, ({}, normal(rng, 2)), dynamic_shapes={})


def test_a_stablehlo_file_that_does_not_parse(tmp_path):
    with pytest.raises(SdcError, match="cannot parse 'bad.mlir' as StableHLO"):
        import_stablehlo("func.func @main() { stablehlo.nope }", source="bad.mlir")


# ---------------------------------------------------------------- files and the command line


def test_sdc_compile_a_stablehlo_text_file(rng, tmp_path, capsys):
    p = {"w1": normal(rng, 4, 8), "b1": normal(rng, 8), "w2": normal(rng, 8, 3)}
    path = tmp_path / "model.mlir"
    path.write_text(jax.jit(mlp).lower(p, normal(rng, 2, 4)).as_text())
    assert main(["compile", str(path), "-o", str(tmp_path / "model.sdc")]) == 0
    exe = sdc.runtime.load(tmp_path / "model.sdc")
    assert [i.name for i in exe.inputs] == ["arg0", "arg1", "arg2", "arg3"]
    x = normal(rng, 2, 4)
    (y,) = exe(p["b1"], p["w1"], p["w2"], x)
    np.testing.assert_allclose(y, mlp(p, x), **TOL)


def exported_mlp(rng):
    p = {"w1": normal(rng, 4, 8), "b1": normal(rng, 8), "w2": normal(rng, 8, 3)}
    (b,) = jax.export.symbolic_shape("b")
    return p, jax.export.export(jax.jit(mlp))(p, jax.ShapeDtypeStruct((b, 4), jnp.float32))


def test_a_serialized_jax_export_with_a_symbolic_batch(rng):
    p, exported = exported_mlp(rng)
    data = exported.serialize()
    exe = sdc.compile(data)  # the bytes; the pytrees and symbolic dims come with them
    assert str(exe.inputs[-1]) == "arg1: f32[b, 4]" and exe.inputs[0].name == "arg0.b1"
    for batch in (1, 5):
        x = normal(rng, batch, 4)
        np.testing.assert_allclose(exe(p, x), mlp(p, x), **TOL)
    again = sdc.compile(jax.export.deserialize(data))  # an Exported object, the same way
    x = normal(rng, 2, 4)
    np.testing.assert_allclose(again(p, x), exported.call(p, x), **TOL)


def test_sdc_compile_a_jaxexport_file(rng, tmp_path, capsys):
    p, exported = exported_mlp(rng)
    path = tmp_path / "mlp.jaxexport"
    path.write_bytes(exported.serialize())
    assert frontend_for(path) == "jax_export"
    assert main(["compile", str(path), "-o", str(tmp_path / "mlp.sdc")]) == 0
    exe = sdc.runtime.load(tmp_path / "mlp.sdc")
    x = normal(rng, 3, 4)
    (y,) = exe(*jax.tree_util.tree_leaves(p), x)
    np.testing.assert_allclose(y, mlp(p, x), **TOL)


def test_errors_of_serialized_exports_and_chlo_text(rng, tmp_path, capsys):
    bad = tmp_path / "bad.jaxexport"
    bad.write_bytes(b"not a flatbuffer at all")
    assert main(["compile", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot read 'bad.jaxexport' as a serialized jax.export") and err.count("\n") == 1
    text = tmp_path / "erf.mlir"  # jit(...).lower writes bare chlo ops, which the bindings cannot parse
    text.write_text(jax.jit(jax.scipy.special.erf).lower(normal(rng, 3)).as_text())
    assert main(["compile", str(text)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: 'erf.mlir' holds chlo ops (chlo.erf at line ") and "jax.export" in err
    assert err.count("\n") == 1


def test_registry_routes_jax_functions_and_stablehlo_files():
    assert frontend_for(mlp) == "jax" and frontend_for(jax.jit(mlp)) == "jax"
    assert FRONTENDS["jax"]().name == "jax" and FRONTENDS["stablehlo"]().name == "stablehlo"
    assert FRONTENDS["jax_export"]().name == "jax_export" and frontend_for(b"\0") == "jax_export"


# ---------------------------------------------------------------- the coverage table


def test_coverage_page_is_current():
    page = ROOT / "docs" / "stablehlo-coverage.md"
    assert page.read_text(encoding="utf-8") == coverage.render(), \
        "regenerate: python -m sdc.frontend.stablehlo.coverage > docs/stablehlo-coverage.md"


def test_coverage_lists_real_ops_and_every_rule():
    from sdc.dialect.op_classes import new_context
    from sdc.frontend.stablehlo.patterns import RULES
    from sdc.mlir import stablehlo

    ctx = new_context()
    stablehlo().register_dialect(ctx)
    with ctx:
        ctx.dialects["stablehlo"]  # loads it, so its ops count as registered
        assert [n for n in coverage.SPEC_OPS if not ctx.is_registered_operation(n)] == []
    assert set(RULES) <= set(coverage.SPEC_OPS)
