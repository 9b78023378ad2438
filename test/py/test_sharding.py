"""The sharding model as plain data (sdc/dialect/mesh.py, sdc/transforms/sharding.py): meshes, factor
rules, resharding plans, op plans and propagation with priorities and costs. No MLIR here."""

from __future__ import annotations

import pytest

from sdc.dialect.mesh import Mesh, MeshError, Sharding, from_json, local_slices, to_json
from sdc.transforms import sharding as S
from sdc.transforms.sharding import Graph, Step, reshard, rule_for

MESH = Mesh.parse("dp=2,tp=2")


# ---------------------------------------------------------------- the mesh


def test_mesh_numbers_ranks_row_major():
    assert [MESH.coords(r) for r in range(4)] == [{"dp": 0, "tp": 0}, {"dp": 0, "tp": 1},
                                                  {"dp": 1, "tp": 0}, {"dp": 1, "tp": 1}]
    assert MESH.groups(["tp"]) == [[0, 1], [2, 3]]
    assert MESH.groups(["dp"]) == [[0, 2], [1, 3]]
    assert MESH.group(3, ["dp", "tp"]) == [0, 1, 2, 3]
    assert MESH.group(3, ["tp", "dp"]) == [0, 2, 1, 3]  # the first listed axis is major
    assert MESH.index_in_group(1, ["tp", "dp"]) == 2


@pytest.mark.parametrize("text, message", [
    ("dp", "is not AXIS=SIZE"), ("dp=2,dp=2", "given twice"), ("dp=0", "sizes are at least 1"),
    ("", "is not AXIS=SIZE"), ("2=dp", "is not AXIS=SIZE"),
])
def test_mesh_parse_errors(text, message):
    with pytest.raises(MeshError, match=message):
        Mesh.parse(text)


def test_local_slices_follow_the_block_order():
    s = Sharding((("dp", "tp"), ()))
    assert [local_slices(s, [8, 3], r, MESH)[0] for r in range(4)] == [slice(0, 2), slice(2, 4), slice(4, 6),
                                                                        slice(6, 8)]
    with pytest.raises(MeshError, match="not divisible by 4"):
        local_slices(s, [6, 3], 0, MESH)


def test_sharding_text_json_and_checks():
    s = Sharding((("dp",), (), ("tp",)), ("tp",))
    assert str(s) == "[dp, -, tp] partial(tp)"
    assert from_json(to_json(s)) == s
    assert s.check(MESH) == "mesh axis 'tp' is used more than once"
    assert Sharding((("pp",),)).check(MESH) == "mesh axis 'pp' is not in the mesh (dp=2,tp=2)"
    assert Sharding.of(["dp", None, "dp,tp"]) == Sharding((("dp",), (), ("dp", "tp")))


# ---------------------------------------------------------------- factor rules


@pytest.mark.parametrize("name, attrs, operands, results, einsum", [
    ("matmul", {}, [[8, 16], [16, 4]], [[8, 4]], "ab,bc->ac (b:reduction)"),
    ("matmul", {"transpose_rhs": True}, [[2, 8, 16], [4, 16]], [[2, 8, 4]], "abc,dc->abd (c:reduction)"),
    ("add", {}, [[8, 16], [16]], [[8, 16]], "ab,b->ab"),
    ("add", {}, [[8, 1], [8, 16]], [[8, 16]], "a1,ab->ab"),
    ("reduce_sum", {"axes": [1]}, [[8, 16]], [[8]], "ab->a (b:reduction)"),
    ("softmax", {"axis": -1}, [[8, 16]], [[8, 16]], "ab->ab (b:blocked)"),
    ("layer_norm", {"axis": -1}, [[8, 16], [16], [16]], [[8, 16]], "ab,b,b->ab (b:blocked)"),
    ("transpose", {"perm": [1, 0]}, [[8, 16]], [[16, 8]], "ab->ba"),
    ("gather", {"axis": 0}, [[100, 16], [4, 8]], [[4, 8, 16]], "ab,cd->cdb (a:masked)"),
    ("conv", {"groups": 1}, [[2, 3, 8, 8], [4, 3, 3, 3]], [[2, 4, 8, 8]],
     "abcd,ebfg->aehi (b:reduction c:blocked d:blocked f:blocked g:blocked h:blocked i:blocked)"),
    # The weight gradient sums over the batch: data parallel leaves partial sums for the all-reduce.
    ("conv_weight_grad", {"groups": 1, "kernel": [3, 3]}, [[2, 3, 8, 8], [2, 4, 8, 8]], [[4, 3, 3, 3]],
     "abcd,aefg->ebhi (a:reduction c:blocked d:blocked f:blocked g:blocked h:blocked i:blocked)"),
    ("conv_weight_grad", {"groups": 4, "kernel": [3, 3]}, [[2, 4, 8, 8], [2, 4, 8, 8]], [[4, 1, 3, 3]],
     "abcd,abef->b1gh (a:reduction c:blocked d:blocked e:blocked f:blocked g:blocked h:blocked)"),
])
def test_rules_read_like_einsums(name, attrs, operands, results, einsum):
    from sdc.dialect.opdef import get_op

    assert rule_for(name, get_op(name).family, attrs, operands, results).einsum() == einsum


def test_axis_ops_block_their_axis_and_unknown_ops_block_everything():
    rule = rule_for("topk", "sorting", {"axis": 1, "k": 2}, [[4, 8]], [[4, 2], [4, 2]])
    assert rule.einsum() == "ab->ab,ab (b:blocked)"
    rule = rule_for("grid_sample", "resampling", {}, [[1, 3, 4, 4], [1, 4, 4, 2]], [[1, 3, 4, 4]])
    assert set(rule.kinds) == {S.BLOCKED}


@pytest.mark.parametrize("src, dst, groups", [
    ([8, 64], [8, 4, 16], [([0], [0]), ([1], [1, 2])]),
    (["B", "S", 64], ["B", "S", 4, 16], [([0], [0]), ([1], [1]), ([2], [2, 3])]),
    (["B", "S", 64], ["B*S", 64], [([0, 1], [0]), ([2], [1])]),
    ([2, 3, 4], [6, 4], [([0, 1], [0]), ([2], [1])]),
    ([4, 1, 8], [4, 8], [([0], [0]), ([1], []), ([2], [1])]),
    ([6], [4, 2], None),
])
def test_reshape_groups(src, dst, groups):
    assert S.reshape_groups(src, dst) == groups


def test_reshape_splits_follow_the_major_dim_only():
    rule = rule_for("reshape", "shape", {"shape": [8, 4, 16]}, [[8, 64]], [[8, 4, 16]])
    assert rule.einsum() == "ab->abc (c:blocked)"


# ---------------------------------------------------------------- resharding


def sh(*dims, partial=()):
    return Sharding.of(dims, partial)


@pytest.mark.parametrize("src, dst, steps", [
    (sh(None, None, partial=("tp",)), sh(None, None), [Step("all_reduce", ("tp",))]),
    (sh(None, None, partial=("tp",)), sh("tp", None), [Step("reduce_scatter", ("tp",), 0)]),
    (sh(None, None, partial=("dp", "tp")), sh(None, None), [Step("all_reduce", ("dp", "tp"))]),
    (sh("tp", None), sh(None, None), [Step("all_gather", ("tp",), 0)]),
    (sh(None, None), sh(None, "tp"), [Step("all_slice", ("tp",), 1)]),
    (sh("tp", None), sh(None, "tp"), [Step("all_to_all", ("tp",), 0, 1)]),
    (sh("dp,tp", None), sh("dp", None), [Step("all_gather", ("tp",), 0)]),
    (sh("tp", None), sh(None, "dp"), [Step("all_slice", ("dp",), 1), Step("all_gather", ("tp",), 0)]),
    (sh("dp", "tp"), sh("tp", "dp"), [Step("all_gather", ("dp",), 0), Step("all_gather", ("tp",), 1),
                                       Step("all_slice", ("tp",), 0), Step("all_slice", ("dp",), 1)]),
])
def test_reshard_plans(src, dst, steps):
    assert reshard(src, dst, MESH) == steps
    cur = src
    for step in steps:
        cur = step.apply(cur)
    assert cur == dst


def test_reshard_cannot_make_partial_sums():
    with pytest.raises(S.ShardingError, match="cannot make a partial sum over tp"):
        reshard(sh(None), sh(None, partial=("tp",)), MESH)


def test_bytes_sent_per_step():
    size = 1000.0
    assert Step("all_reduce", ("tp",)).bytes_sent(size, MESH) == 1000.0  # 2 (n-1)/n with n = 2
    assert Step("all_gather", ("dp", "tp"), 0).bytes_sent(size, MESH) == 3000.0
    assert Step("all_slice", ("tp",), 0).bytes_sent(size, MESH) == 0.0
    assert S.reshard_bytes(sh(None, None, partial=("tp",)), sh("tp", None), [8, 16], 4, MESH) == 256.0


# ---------------------------------------------------------------- graphs by hand


def linear_graph(layers=2, d=(16, 32, 16), batch="B"):
    """x -> matmul(w1) -> relu -> matmul(w2) ...: an MLP as a Graph, weights as `weight` values."""
    g = Graph()
    x = g.add_value([batch, d[0]], kind="input", label="input 'x'")
    cur = x
    for i in range(layers):
        w = g.add_value([d[i], d[i + 1]], kind="weight", label=f"parameter 'w{i}'")
        y = g.add_value([batch, d[i + 1]])
        g.add_op("matmul", rule_for("matmul", "contraction", {}, [[batch, d[i]], [d[i], d[i + 1]]],
                                    [[batch, d[i + 1]]]), [cur, w], [y], f"fc{i}")
        r = g.add_value([batch, d[i + 1]])
        g.add_op("relu", rule_for("relu", "elementwise unary", {}, [[batch, d[i + 1]]], [[batch, d[i + 1]]]),
                 [y], [r], f"relu{i}")
        cur = r
    return g


def test_megatron_pairs_two_linears():
    g = linear_graph()
    sol = S.solve(g, Mesh.parse("tp=2"))
    w0, w1 = 1, 4
    assert sol[w0] == sh(None, "tp")  # column-parallel
    assert sol[w1] == sh("tp", None)  # row-parallel
    assert sol[5] == sh(None, None, partial=("tp",))  # its result is a partial sum
    assert sol[6] == sh(None, None)  # relu needs it whole: that is where the all_reduce goes
    assert any("column-parallel" in d and "fc1" in d for d in sol.decisions)


def test_a_lone_linear_stays_whole():
    g = linear_graph(layers=1)
    sol = S.solve(g, Mesh.parse("tp=2"))
    assert all(s.is_replicated for s in sol.shardings)
    assert sol.decisions == []


def test_data_parallel_splits_the_batch_everywhere():
    g = linear_graph()
    sol = S.solve(g, Mesh.parse("dp=2"))
    for v, value in enumerate(g.values):
        expected = sh("dp", None) if value.kind != "weight" else sh(None, None)
        assert sol[v] == expected, value.label


def test_defaults_can_be_turned_off_and_skip_indivisible_dims():
    assert all(s.is_replicated for s in S.solve(linear_graph(), MESH, defaults=False).shardings)
    g = linear_graph(batch=3, d=(16, 33, 16))  # 3 rows do not split 2 ways, 33 columns do not either
    sol = S.solve(g, MESH)
    assert all(s.is_replicated for s in sol.shardings)


def test_user_annotations_beat_the_defaults():
    g = linear_graph()
    # the user wants the batch split over tp instead of dp
    sol = S.solve(g, MESH, {0: (sh("tp", None), "the user")})
    assert sol[0] == sh("tp", None)
    assert sol[2] == sh("tp", None)  # propagated to the first matmul's result
    assert sol[1] == sh(None, None)  # so tp is no longer free for that matmul's columns


def test_equal_priorities_choose_the_cheaper_sharding():
    # add(a, b): a is split on dim 0, b on dim 1, both by the user over dp; the result follows the
    # operand whose resharding costs less (here the big one keeps its sharding).
    g = Graph()
    a = g.add_value([64, 4], label="a", kind="input")
    b = g.add_value([64, 4], label="b", kind="input")
    out = g.add_value([64, 4])
    g.add_op("add", rule_for("add", "elementwise binary", {}, [[64, 4], [64, 4]], [[64, 4]]), [a, b], [out])
    prop = S.Propagation(g, Mesh.parse("dp=2"))
    prop.annotate(a, sh("dp", None), "a", priority=5)
    prop.annotate(b, sh(None, "dp"), "b", priority=5)
    prop.run()
    assert prop.dims_of(out) in ((("dp",), ()), ((), ("dp",)))
    # now make b four times bigger: moving it costs more, so the result follows b
    g2 = Graph()
    a = g2.add_value([64, 4], kind="input")
    b = g2.add_value([64, 4], itemsize=16, kind="input")
    out = g2.add_value([64, 4])
    g2.add_op("add", rule_for("add", "elementwise binary", {}, [[64, 4], [64, 4]], [[64, 4]]), [a, b], [out])
    prop = S.Propagation(g2, Mesh.parse("dp=2"))
    prop.annotate(a, sh("dp", None), "a", priority=5)
    prop.annotate(b, sh(None, "dp"), "b", priority=5)
    prop.run()
    assert prop.dims_of(out) == ((), ("dp",))


def test_conflicting_user_annotations_are_reported():
    g = Graph()
    a = g.add_value([8, 8], kind="input")
    b = g.add_value([8, 8], kind="input")
    out = g.add_value([8, 8])
    g.add_op("add", rule_for("add", "elementwise binary", {}, [[8, 8], [8, 8]], [[8, 8]]), [a, b], [out])
    sol = S.solve(g, MESH, {a: (sh("dp", None), "annotation A"), b: (sh("tp", None), "annotation B")})
    assert len(sol.conflicts) == 1
    assert "conflicting sharding annotations" in sol.conflicts[0].message
    assert set(sol.conflicts[0].origins) == {"annotation A", "annotation B"}


def test_plan_op_for_a_row_parallel_matmul():
    g = linear_graph(layers=1)
    op = g.ops[0]
    plan = S.plan_op(op, [sh(None, "tp"), sh("tp", None)], [None], g, MESH)
    assert plan.operands == [sh(None, "tp"), sh("tp", None)]
    assert plan.results == [sh(None, None, partial=("tp",))]
    # when the result is wanted split over tp by rows, the contraction cannot use tp
    plan = S.plan_op(op, [sh(None, "tp"), sh("tp", None)], [(("tp",), ())], g, MESH)
    assert plan.operands == [sh("tp", None), sh(None, None)]
    assert plan.results == [sh("tp", None)]


def test_plan_op_keeps_partial_sums_through_linear_ops():
    g = Graph()
    a, b, out = (g.add_value([8]) for _ in range(3))
    g.add_op("add", rule_for("add", "elementwise binary", {}, [[8], [8]], [[8]]), [a, b], [out])
    p = sh(None, partial=("tp",))
    assert S.plan_op(g.ops[0], [p, p], [None], g, MESH).results == [p]
    plan = S.plan_op(g.ops[0], [p, sh(None)], [None], g, MESH)  # partial + whole: sum first
    assert plan.operands == [sh(None), sh(None)] and plan.results == [sh(None)]


def test_embedding_by_vocabulary_is_a_masked_partial_sum():
    g = Graph()
    table = g.add_value([100, 16], kind="weight", label="parameter 'emb'")
    ids = g.add_value(["B", 8], kind="input", itemsize=8)
    out = g.add_value(["B", 8, 16])
    g.add_op("gather", rule_for("gather", "shape", {"axis": 0}, [[100, 16], ["B", 8]], [["B", 8, 16]]),
             [table, ids], [out])
    sol = S.solve(g, Mesh.parse("tp=2"))
    assert sol[table] == sh("tp", None)
    assert sol[out] == sh(None, None, None, partial=("tp",))
    plan = S.plan_op(g.ops[0], [sol[table], sol[ids]], [sol[out].dims], g, Mesh.parse("tp=2"))
    assert plan.masked == {0: ("tp",)}


def test_describe_bytes():
    assert S.describe_bytes([4, 16], 4) == "256 B"
    assert S.describe_bytes(["B//2", 16], 4) == "64*(B//2) B"
    assert S.local_dims(["B", 16, 64], sh("dp", None, "tp"), MESH) == ["B//2", 16, 32]
