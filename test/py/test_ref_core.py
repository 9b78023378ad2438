"""Reference semantics of the value ops (constant, parameter, iota, dim_values), layout_cast and
the collectives without a communicator."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from refcheck import assert_matches, call, foundation_ops, random, rng  # noqa: F401 (rng: fixture)
from sdc.dialect.dense import DenseValue
from sdc.dialect.opdef import RefEnv, all_ops, get_op


def test_constant(rng):
    value = random(rng, (2, 3), "f32")
    got = call("constant", value=DenseValue.from_numpy(value))
    assert_matches(got, value, "f32")


def test_constant_gives_a_fresh_tensor_each_time(rng):
    value = DenseValue.from_numpy(random(rng, (3,), "i64", 1, 9))
    op = get_op("constant")
    first = op.ref(RefEnv(), {"value": value})
    first += 100
    assert_matches(call("constant", value=value), value.tensor.numpy(), "i64")


def test_parameter_reads_the_environment(rng):
    weight = random(rng, (4, 2), "f32")
    env = RefEnv()
    env.params = {"w": torch.from_numpy(weight)}  # the interpreter hands parameters over as torch tensors
    assert_matches(call("parameter", name="w", env=env), weight, "f32")


def test_parameter_without_a_value_fails():
    env = RefEnv()
    env.params = {"other": np.ones(2, np.float32)}
    with pytest.raises(KeyError, match="'w' has no value"):
        get_op("parameter").ref(env, {"name": "w"})


# (shape, dimension, dtype)
IOTAS = [([5], 0, "i64"), ([3, 4], 1, "i32"), ([3, 4], 0, "f32"), ([2, 3, 4], -1, "i64"), ([2, 3, 2], -3, "f16")]


@pytest.mark.parametrize("shape,dimension,dtype", IOTAS)
def test_iota(shape, dimension, dtype):
    got = call("iota", shape=shape, dimension=dimension, dtype=dtype)
    axis = dimension % len(shape)
    ramp = np.arange(shape[axis]).reshape([-1 if d == axis else 1 for d in range(len(shape))])
    want = np.broadcast_to(ramp, shape).astype(got.dtype)
    assert_matches(got, want, dtype)


def test_iota_with_symbols():
    got = call("iota", shape=["S", 2], dimension=0, dtype="i64", env=RefEnv(symbols={"S": 4}))
    assert_matches(got, np.repeat(np.arange(4)[:, None], 2, axis=1), "i64")


@pytest.mark.skipif("dim_values" not in all_ops(), reason="no sdc.dim_values")
def test_dim_values():
    got = call("dim_values", dims=["B", 7, "S"], env=RefEnv(symbols={"B": 3, "S": 5}))
    assert_matches(got, np.array([3, 7, 5]), "i64")


@pytest.mark.parametrize("layout", [[0, 2, 3, 1], [0, 1, 2, 3], [3, 2, 1, 0]])
def test_layout_cast_keeps_the_logical_value(layout, rng):
    x = random(rng, (2, 3, 4, 5))
    assert_matches(call("layout_cast", x, layout=layout), x, "f32")


# ---------------------------------------------------------------- collectives

# op -> attributes other than mesh_axes
COLLECTIVES = {
    "all_slice": {"axis": 1},
    "all_reduce": {"reduction": "sum"},
    "all_gather": {"axis": 0},
    "reduce_scatter": {"axis": 1, "reduction": "max"},
    "all_to_all": {"split_axis": 0, "concat_axis": 1},
    "broadcast_from": {"root": 0},
}


@pytest.mark.parametrize("name", list(COLLECTIVES))
def test_collective_over_one_device_is_identity(name, rng):
    x = random(rng, (4, 6))
    env = RefEnv(mesh={"dp": 1, "tp": 2})
    got = call(name, x, mesh_axes=["dp"], env=env, **COLLECTIVES[name])
    assert_matches(got, x, "f32")


@pytest.mark.parametrize("name", list(COLLECTIVES) + ["send"])
def test_collective_over_several_devices_needs_a_communicator(name, rng):
    x = random(rng, (4, 6))
    op = get_op(name)
    attrs = op.with_defaults({"mesh_axes": ["dp", "tp"], **COLLECTIVES.get(name, {})})
    with pytest.raises(RuntimeError, match=r"\['dp', 'tp'\] form a group of 2 devices, which needs a communicator"):
        op.ref(RefEnv(mesh={"dp": 1, "tp": 2}), attrs, x)


def test_send_over_one_device_has_no_result(rng):
    op = get_op("send")
    assert tuple(op.ref(RefEnv(mesh={"pp": 1}), op.with_defaults({"mesh_axes": ["pp"]}), random(rng, (3,)))) == ()


def test_recv_needs_a_communicator():
    op = get_op("recv")
    with pytest.raises(RuntimeError, match="needs a communicator"):
        op.ref(RefEnv(mesh={"pp": 1}), op.with_defaults({"mesh_axes": ["pp"]}))


def test_collective_on_an_unknown_axis_fails(rng):
    op = get_op("all_reduce")
    with pytest.raises(KeyError, match="'tp' is not in the mesh"):
        op.ref(RefEnv(mesh={"dp": 1}), op.with_defaults({"mesh_axes": ["tp"]}), random(rng, (2,)))


class RecordingComm:
    """A communicator that records what it was asked to do and answers with a marker."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, method):
        def run(*args, **kwargs):
            self.calls.append((method, args, kwargs))
            return "marker"

        return run


@pytest.mark.parametrize("name,method,kwargs", [
    ("all_reduce", "all_reduce", {"reduction": "avg"}),
    ("all_gather", "all_gather", {"axis": 1}),
    ("reduce_scatter", "reduce_scatter", {"axis": 0, "reduction": "sum"}),
    ("all_to_all", "all_to_all", {"split_axis": 1, "concat_axis": 0}),
    ("broadcast_from", "broadcast", {"root": 1}),
    ("send", "send", {"peer": 1}),
    ("all_slice", "all_slice", {"axis": 1}),
])
def test_collectives_go_through_the_communicator(name, method, kwargs, rng):
    comm = RecordingComm()
    x = random(rng, (2, 4))
    op = get_op(name)
    op.ref(RefEnv(comm=comm, mesh={"tp": 2}), op.with_defaults({"mesh_axes": ["tp"], **kwargs}), x)
    assert len(comm.calls) == 1
    called, args, got_kwargs = comm.calls[0]
    assert called == method and args[0] is x and args[1] == ["tp"] and got_kwargs == kwargs


def test_every_value_layout_and_collective_op_has_a_reference_case():
    covered = {"constant", "parameter", "cast", "iota", "dim_values", "layout_cast", "send", "recv"} | set(COLLECTIVES)
    missing = sorted(n for n in foundation_ops({"values", "layout", "collective"}) if n not in covered)
    assert not missing, f"ops without a reference test: {missing}"
