"""Attention, softmax(Q K^T * scale [+ mask]) V, recognized in a list of ops (not a pass of its own).

Two users share this one matcher so that they can never disagree: sdc-fuse (fuse.py) merges the
three kernel groups an exported attention falls into (the first matmul with its elementwise
epilogue, the softmax, the second matmul) into one `sdc.fusion {kind = "attention"}` group on targets
with a Triton backend, and the Triton codegen (sdc/codegen/triton/attention.py) lowers exactly what
was matched into one flash-style kernel. A group is merged only when the matcher accepts it, so an
attention the kernel cannot take keeps the three kernels it had.

The ops are plan-style entries (`{"op", "attrs", "inputs", "outputs"}`, in program order) and a
table `values[vid] = {"shape": [...], "dtype": "f32"}` whose dims are ints (static) or anything else
(dynamic). What is accepted:

- `s = matmul(q, k)`, scores `[*batch, Sq, Sk]` (rank >= 2), q and k f32/f16/bf16 of one dtype,
  either operand transposed (its strides say so), the head dim D static and at most MAX_HEAD_DIM;
- a *score chain*: elementwise ops (SCORE_OPS) from `s` to the softmax's operand, each result of the
  scores' shape; their other operands are group inputs or *mask ops* (elementwise ops that do not
  depend on `s`: a causal mask built from iotas, a padding mask's compare) whose results broadcast
  into the scores (numpy rules, right-aligned): a scale, an additive mask `[B, 1, 1, Sk]`, a boolean
  mask under `where`, a causal `[Sq, Sk]` mask;
- `p = softmax(s', axis=-1)`, then only casts of `p`;
- `o = matmul(p, v)` (p not transposed), v `[*batch, Sk, Dv]` of p's dtype, Dv static <= MAX_HEAD_DIM;
  `o` is the last op, the only value the ops write for others, and every op is needed for it.

`match_attention` returns an `AttentionMatch` or raises `NotAttention` with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

if TYPE_CHECKING:
    from sdc.transforms.fuse import FusionGraph, Grouping

MAX_HEAD_DIM = 128  # one program holds a [BLOCK_M, D] query tile and a [BLOCK_M, Dv] accumulator in registers
OPERAND_DTYPES = frozenset({"f32", "f16", "bf16"})  # tl.dot operands (f32 accumulation)
# elementwise ops a score chain or a mask may use (the Triton renderer has a method for each: a test checks)
SCORE_OPS = frozenset({"add", "sub", "mul", "div", "max", "min", "neg", "tanh", "where", "cast", "eq", "ne", "lt",
                       "le", "gt", "ge", "and", "or", "xor", "not"})


class NotAttention(Exception):
    """The ops are not an attention the flash kernel takes; the message says why."""


@dataclass(frozen=True)
class AttentionMatch:
    """Where the parts of a matched attention are (indices into the ops, value ids)."""

    qk: int  # the op index of matmul(q, k)
    softmax: int
    pv: int  # matmul(p, v)
    q: str
    k: str
    v: str
    transpose_q: bool  # q is [*b, D, Sq]
    transpose_k: bool  # k is [*b, Sk, D] (as torch's q @ k.transpose(-1, -2) reads it), else [*b, D, Sk]
    transpose_v: bool  # v is [*b, Dv, Sk]
    scores: str  # the softmax's operand: the end of the score chain
    probs: str  # the second matmul's lhs: the softmax's result after its casts
    output: str
    chain: tuple[int, ...]  # op indices before the softmax but the first matmul (score chain and mask ops)


def _static(d: Any) -> bool:
    return isinstance(d, int) and not isinstance(d, bool)


def _dims_agree(a: Any, b: Any) -> bool:
    """Two dims that may be the same size: equal when both are static, else decided at run time."""
    return not (_static(a) and _static(b)) or a == b


def _broadcasts_into(shape: Sequence, target: Sequence) -> bool:
    if len(shape) > len(target):
        return False
    return all(d == 1 or _dims_agree(d, t) for d, t in zip(shape, target[len(target) - len(shape):]))


def match_attention(ops: Sequence[Mapping], values: Mapping[str, Mapping], outputs: Sequence[str]) -> AttentionMatch:
    """The attention in `ops` (see the module docstring); NotAttention when they are anything else.
    `outputs`: the values the ops write for others."""
    names = [e["op"] for e in ops]
    matmuls = [i for i, n in enumerate(names) if n == "matmul"]
    softmaxes = [i for i, n in enumerate(names) if n == "softmax"]
    if len(matmuls) != 2 or len(softmaxes) != 1:
        raise NotAttention(f"{len(matmuls)} matmuls and {len(softmaxes)} softmaxes (attention has 2 and 1)")
    qk, pv = matmuls
    (sm,) = softmaxes
    if not qk < sm < pv or pv != len(ops) - 1:
        raise NotAttention("not matmul, softmax, matmul in that order, the last matmul last")
    for e in ops:
        if len(e["outputs"]) != 1:
            raise NotAttention(f"'sdc.{e['op']}' has {len(e['outputs'])} results")
    out = ops[pv]["outputs"][0]
    if list(outputs) != [out]:
        raise NotAttention(f"the group writes {sorted(outputs)}, not only the second matmul's result")
    shape = lambda vid: list(values[vid]["shape"])  # noqa: E731
    dtype = lambda vid: values[vid]["dtype"]  # noqa: E731

    first = ops[qk]
    q, k = first["inputs"]
    s = first["outputs"][0]
    scores_shape = shape(s)
    if len(scores_shape) < 2 or len(shape(q)) < 2 or len(shape(k)) < 2:
        raise NotAttention("a matmul with a 1-D operand")
    if dtype(q) not in OPERAND_DTYPES or dtype(k) != dtype(q):
        raise NotAttention(f"q and k of {dtype(q)} and {dtype(k)} (the kernel multiplies f32/f16/bf16)")
    transpose_q = bool(first["attrs"].get("transpose_lhs"))
    transpose_k = bool(first["attrs"].get("transpose_rhs"))
    head = shape(q)[-2 if transpose_q else -1]
    if not _static(head) or head > MAX_HEAD_DIM:
        raise NotAttention(f"head dim {head} (the kernel takes a static one of at most {MAX_HEAD_DIM})")

    # the score chain: ops depending on s; the rest of the ops before the softmax are mask ops
    depends = {s}
    chain = tuple(i for i in range(sm) if i != qk)  # mask ops may come before the first matmul
    for i in chain:
        e = ops[i]
        if e["op"] not in SCORE_OPS:
            raise NotAttention(f"'sdc.{e['op']}' between the first matmul and the softmax")
        result = e["outputs"][0]
        if any(v in depends for v in e["inputs"]):
            depends.add(result)
            if shape(result) != scores_shape:
                raise NotAttention(f"a score op '{e['op']}' of shape {shape(result)}, the scores {scores_shape}")
        elif not _broadcasts_into(shape(result), scores_shape):
            raise NotAttention(f"a mask of shape {shape(result)} does not broadcast into the scores {scores_shape}")
        for v in e["inputs"]:
            if v not in depends and not _broadcasts_into(shape(v), scores_shape):
                raise NotAttention(f"an operand of shape {shape(v)} does not broadcast into the scores {scores_shape}")
    soft = ops[sm]
    scores = soft["inputs"][0]
    if scores not in depends:
        raise NotAttention("the softmax does not read the scores")
    if soft["attrs"].get("axis", -1) % len(scores_shape) != len(scores_shape) - 1:
        raise NotAttention(f"a softmax along axis {soft['attrs'].get('axis')}, not the keys' (last) one")
    probs = soft["outputs"][0]
    for e in ops[sm + 1:pv]:
        if e["op"] != "cast" or e["inputs"] != [probs]:
            raise NotAttention(f"'sdc.{e['op']}' between the softmax and the second matmul (only casts may be)")
        probs = e["outputs"][0]
    second = ops[pv]
    if second["inputs"][0] != probs or second["attrs"].get("transpose_lhs"):
        raise NotAttention("the second matmul does not multiply the probabilities from the left")
    v = second["inputs"][1]
    transpose_v = bool(second["attrs"].get("transpose_rhs"))
    if len(shape(v)) < 2 or dtype(v) not in OPERAND_DTYPES or dtype(v) != dtype(probs):
        raise NotAttention(f"v of {dtype(v)} and probabilities of {dtype(probs)}")
    value_dim = shape(v)[-2 if transpose_v else -1]
    if not _static(value_dim) or value_dim > MAX_HEAD_DIM:
        raise NotAttention(f"value head dim {value_dim} (the kernel takes a static one of at most {MAX_HEAD_DIM})")
    if len(shape(out)) != len(scores_shape) or any(len(shape(x)) > len(scores_shape) for x in (q, k, v)):
        raise NotAttention("q, k, v or the output have more batch dims than the scores")

    # every op is needed for the output (a dead op would be computed for nothing), and no score value is
    # read after the softmax (the kernel never holds all the scores of a row at once)
    needed = {out}
    for e in reversed(ops):
        if e["outputs"][0] not in needed:
            raise NotAttention(f"'sdc.{e['op']}' is not needed for the attention's output")
        needed.update(e["inputs"])
    if any(vid in depends for e in ops[sm + 1:] for vid in e["inputs"]):
        raise NotAttention("a score value is read after the softmax")
    return AttentionMatch(qk, sm, pv, q, k, v, transpose_q, transpose_k, transpose_v, scores, probs, out, chain)


# ---------------------------------------------------------------- sdc-fuse: three groups become one


def merge_attention_groups(graph: FusionGraph, grouping: Grouping, entry: Callable[[int], dict],
                           values: Mapping[str, Mapping]) -> Grouping:
    """`grouping` (fuse.Grouping of `graph`) with each matched attention's three groups merged into one
    group of kind "attention".

    `entry(n)`: node n as a plan-style op entry whose value ids are `f"v{index}"` of the graph's values;
    `values`: those ids' shapes and dtypes. The groups are the first matmul's (with its epilogue and
    any mask ops sdc-fuse put there), the softmax's (with its casts) and the second matmul's, which
    must hold that matmul alone. The merged group is convex: only its output leaves it, and every op
    in it is needed for that output. Recomputed ops (held by several groups) are left alone."""
    from sdc.transforms.fuse import ANCHORS, Group, Grouping

    groups = [list(g.members) for g in grouping.groups]
    kinds = [g.kind for g in grouping.groups]
    holders: dict[int, set[int]] = {}
    for g, members in enumerate(groups):
        for n in members:
            holders.setdefault(n, set()).add(g)
    group_of = {n: g for g, members in enumerate(groups) for n in members if len(holders[n]) == 1}
    consumers = graph.consumers()
    returned = set(graph.outputs)
    merged: list[tuple[int, int, int]] = []
    taken: set[int] = set()
    for n, node in enumerate(graph.nodes):
        if node.label != "sdc.softmax" or n not in group_of:
            continue
        at = n  # the second matmul: the one reader of the probabilities, after their casts
        while True:
            readers = consumers[graph.nodes[at].results[0]]
            if len(readers) != 1 or graph.nodes[readers[0]].label not in ("sdc.cast", "sdc.matmul"):
                break
            at = readers[0]
            if graph.nodes[at].label == "sdc.matmul":
                break
        if graph.nodes[at].label != "sdc.matmul" or at not in group_of:
            continue
        gs, gv = group_of[n], group_of[at]
        producers = {group_of.get(graph.values[v].producer) for m in groups[gs] for v in graph.nodes[m].operands
                     if graph.values[v].producer is not None} - {None, gs}
        anchored = [g for g in producers if kinds[g] in ANCHORS and
                    any(graph.nodes[m].label == "sdc.matmul" for m in groups[g])]
        if len(anchored) != 1 or groups[gv] != [at]:
            continue
        (ga,) = anchored
        three = {ga, gs, gv}
        if len(three) != 3 or three & taken:
            continue
        members = sorted(groups[ga] + groups[gs] + groups[gv])
        if len({graph.nodes[m].place for m in members}) != 1:
            continue
        inside = set(members)
        # what the merged group writes for others (fuse.group_outputs' rule): a result read outside it,
        # unless the op is recomputed and a group holding its own copy writes it for them
        leaving = [f"v{r}" for m in members for r in graph.nodes[m].results
                   if not holders[m] - three and (r in returned or any(c not in inside for c in consumers[r]))]
        try:
            match_attention([entry(m) for m in members], values, leaving)
        except NotAttention:
            continue
        merged.append((ga, gs, gv))
        taken |= three
    if not merged:
        return grouping
    kept = [i for i in range(len(groups)) if i not in taken]
    out = [grouping.groups[i] for i in kept]
    out += [Group(sorted(groups[ga] + groups[gs] + groups[gv]), ATTENTION) for ga, gs, gv in merged]
    renumber = {old: new for new, old in enumerate(kept)}
    for j, three in enumerate(merged):
        renumber.update({old: len(kept) + j for old in three})
    home = [-1] * len(graph.nodes)
    for g, group in enumerate(out):
        for m in group.members:
            if home[m] < 0:
                home[m] = g
    return Grouping(out, home, [(n, renumber[g]) for n, g in grouping.recomputed])


ATTENTION = "attention"  # the sdc.fusion kind of a merged group


def fuse_entries(ops: Sequence[Any], value_index: Mapping[Any, int]) -> tuple[Callable[[int], dict], dict[str, dict]]:
    """sdc-fuse's IR ops (node -> op) as plan-style op entries for `match_attention`: the `entry(n)`
    function and the values table (value ids `f"v{index}"`)."""
    from sdc.dialect.attrs import AttrError
    from sdc.dialect.ir import read_attrs, tensor_spec
    from sdc.dialect.opdef import OPS
    from sdc.dialect.shapes import is_static

    values: dict[str, dict] = {}
    for v, i in value_index.items():
        try:
            spec = tensor_spec(v.type)
        except (TypeError, ValueError):
            continue  # not a ranked tensor: no attention reads it
        values[f"v{i}"] = {"shape": [d if is_static(d) else None for d in spec.shape], "dtype": spec.dtype}

    def entry(n: int) -> dict:
        op = ops[n]
        name = op.name[4:] if op.name.startswith("sdc.") else op.name
        try:
            attrs = read_attrs(OPS[name], op) if name in OPS else {}
        except AttrError:
            attrs = {}
        return {"op": name, "attrs": attrs, "inputs": [f"v{value_index[v]}" for v in op.operands],
                "outputs": [f"v{value_index[r]}" for r in op.results]}

    return entry, values
