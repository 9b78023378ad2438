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
- a *score chain*: elementwise ops (SCORE_OPS: their `OpDef.flash_score`) from `s` to the softmax's operand, each result of the
  scores' shape; their other operands are group inputs or *mask ops* (elementwise ops that do not
  depend on `s`: a causal mask built from iotas, a padding mask's compare) whose results broadcast
  into the scores (numpy rules, right-aligned): a scale, an additive mask `[B, 1, 1, Sk]`, a boolean
  mask under `where`, a causal `[Sq, Sk]` mask;
- `p = softmax(s', axis=-1)`, then only casts of `p`, and optionally the *empty-row fix-up* that
  torch's decomposition of F.scaled_dot_product_attention adds: `where(all(s' == -inf, axis=-1), 0, p)`
  (`eq`, `not`, casts, `reduce_max` over the keys, `not`, `where` with a zero constant), so that a
  query row whose keys are all masked gives 0, not NaN; the kernel then writes 0 where a row's
  softmax sum is 0, which happens exactly when every score of the row is -inf (`zero_empty_rows`);
- `o = matmul(p, v)` (p not transposed), v `[*batch, Sk, Dv]` of p's dtype, Dv static <= MAX_HEAD_DIM,
  then only casts of `o` (the output cast of a model compiled at a lower precision: the kernel rounds
  to the matmul's dtype, then to the cast's); the last of these is the only value the ops write for
  others, and every op is needed for it.

`match_attention` returns an `AttentionMatch` or raises `NotAttention` with the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from sdc.dialect.opdef import OPS, all_ops
from sdc.transforms.fusion_graph import ANCHORS, FusionGraph, Group, Grouping

MAX_HEAD_DIM = 128  # one program holds a [BLOCK_M, D] query tile and a [BLOCK_M, Dv] accumulator in registers
OPERAND_DTYPES = frozenset({"f32", "f16", "bf16"})  # tl.dot operands (f32 accumulation)
# elementwise ops a score chain or a mask may use, `OpDef.flash_score` (the Triton renderer has a
# method for each: a test checks)
SCORE_OPS = frozenset(name for name, op in all_ops().items() if op.flash_score)


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
    zero_empty_rows: bool = False  # the empty-row fix-up was matched: a row of -inf scores gives 0
    fixup: tuple[int, ...] = ()  # its op indices (not lowered: the kernel's l == 0 test is the fix-up)
    product: str = ""  # the second matmul's result (`output` is it, or the last of its casts)


def _static(d: Any) -> bool:
    return isinstance(d, int) and not isinstance(d, bool)


def _dims_agree(a: Any, b: Any) -> bool:
    """Two dims that may be the same size: equal when both are static, else decided at run time."""
    return not (_static(a) and _static(b)) or a == b


def _broadcasts_into(shape: Sequence, target: Sequence) -> bool:
    if len(shape) > len(target):
        return False
    return all(d == 1 or _dims_agree(d, t) for d, t in zip(shape, target[len(target) - len(shape):]))


Scalar = Callable[[str], "float | None"]  # value id -> its value when it is a constant of one value everywhere


def _no_scalars(vid: str) -> float | None:
    return None


def _empty_row_fixup(ops: Sequence[Mapping], sm: int, pv: int, values: Mapping[str, Mapping],
                     scalar: Scalar) -> tuple[int, ...]:
    """The op indices of torch's empty-row fix-up between the softmax `sm` and the second matmul `pv`
    (see the module docstring), or () when there is none. Only the exact form is taken: each step
    is what makes `where(all(scores == -inf), 0, p)` true, so the kernel's "sum 0 -> output 0" is it."""
    producer = {e["outputs"][0]: i for i, e in enumerate(ops[:pv]) if e["outputs"]}
    scores = ops[sm]["inputs"][0]
    rank = len(values[scores]["shape"])
    where = [i for i in range(sm + 1, pv) if ops[i]["op"] == "where"]
    if len(where) != 1:
        return ()
    (w,) = where
    cond, fill, _ = ops[w]["inputs"]
    if scalar(fill) != 0.0:
        return ()
    taken = [w]

    def step(vid: str, name: str, optional: bool = False) -> str | None:
        i = producer.get(vid)
        if i is None or ops[i]["op"] != name:
            return vid if optional else None
        taken.append(i)
        return ops[i]["inputs"][0]

    x = step(cond, "not")
    x = x and step(x, "cast", optional=True)
    if x is None or producer.get(x) is None or ops[producer[x]]["op"] != "reduce_max":
        return ()
    red = ops[producer[x]]
    axes = [a % rank for a in red["attrs"].get("axes", ())]
    if axes != [rank - 1] or not red["attrs"].get("keepdims"):
        return ()
    taken.append(producer[x])
    x = step(red["inputs"][0], "cast", optional=True)
    x = x and step(x, "not")
    i = producer.get(x) if x else None
    if i is None or ops[i]["op"] != "eq" or scalar(ops[i]["inputs"][1]) != -math.inf:
        return ()
    tested = ops[i]["inputs"][0]
    widened = producer.get(scores)
    if widened is not None and ops[widened]["op"] == "cast" and ops[widened]["inputs"][0] == tested and \
            values[tested]["dtype"] in ("f16", "bf16") and values[scores]["dtype"] == "f32":
        tested = scores  # f16/bf16 -> f32 is exact: -inf there is -inf after it, and nothing else becomes -inf
    if tested != scores:
        return ()
    taken.append(i)
    return tuple(sorted(taken))


def match_attention(ops: Sequence[Mapping], values: Mapping[str, Mapping], outputs: Sequence[str],
                    scalar: Scalar = _no_scalars) -> AttentionMatch:
    """The attention in `ops` (see the module docstring); NotAttention when they are anything else.
    `outputs`: the values the ops write for others; `scalar(vid)`: a value's number when it is a
    constant of one value everywhere (the fix-up's -inf and 0), else None."""
    names = [e["op"] for e in ops]
    matmuls = [i for i, n in enumerate(names) if n == "matmul"]
    softmaxes = [i for i, n in enumerate(names) if n == "softmax"]
    if len(matmuls) != 2 or len(softmaxes) != 1:
        raise NotAttention(f"{len(matmuls)} matmuls and {len(softmaxes)} softmaxes (attention has 2 and 1)")
    qk, pv = matmuls
    (sm,) = softmaxes
    if not qk < sm < pv:
        raise NotAttention("not matmul, softmax, matmul in that order")
    for e in ops:
        if len(e["outputs"]) != 1:
            raise NotAttention(f"'sdc.{e['op']}' has {len(e['outputs'])} results")
    out = ops[pv]["outputs"][0]
    for e in ops[pv + 1:]:
        if e["op"] != "cast" or e["inputs"] != [out]:
            raise NotAttention(f"'sdc.{e['op']}' after the second matmul (only casts may be)")
        out = e["outputs"][0]
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
    fixup = _empty_row_fixup(ops, sm, pv, values, scalar)
    chain = tuple(i for i in range(sm) if i != qk and i not in fixup)  # mask ops may come before the first matmul
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
    for i in range(sm + 1, pv):
        e = ops[i]
        if fixup and i == fixup[-1]:  # the where: the probabilities where the row has a key, else 0
            if e["inputs"][2] != probs or shape(e["outputs"][0]) != shape(probs):
                raise NotAttention("the empty-row fix-up does not select from the probabilities")
            probs = e["outputs"][0]
            continue
        if i in fixup:
            continue
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
    if len(shape(ops[pv]["outputs"][0])) != len(scores_shape) or any(len(shape(x)) > len(scores_shape) for x in (q, k, v)):
        raise NotAttention("q, k, v or the output have more batch dims than the scores")

    # every op is needed for the output (a dead op would be computed for nothing), and no score value is
    # read after the softmax (the kernel never holds all the scores of a row at once)
    needed = {out}
    for e in reversed(ops):
        if e["outputs"][0] not in needed:
            raise NotAttention(f"'sdc.{e['op']}' is not needed for the attention's output")
        needed.update(e["inputs"])
    if any(vid in depends for i, e in enumerate(ops[sm + 1:], sm + 1) if i not in fixup[:-1] for vid in e["inputs"]):
        raise NotAttention("a score value is read after the softmax")
    return AttentionMatch(qk, sm, pv, q, k, v, transpose_q, transpose_k, transpose_v, scores, probs, out, chain,
                          bool(fixup), fixup, ops[pv]["outputs"][0])


# ---------------------------------------------------------------- causal masks, known at compile time

# a score this low (or -inf) has probability 0 in f32 next to any kept score: exp underflows below -104,
# and -1e4 fills (HF's masked_bias, ONNX GPT-2) are -9984 in bf16
MASKED_AT_MOST = -5e3
PROBE_SCORES = (-2.5, 0.0, 1.75)  # scores the chain is evaluated at, to tell masked keys from kept ones
MAX_MASK_ELEMENTS = 1 << 24  # larger constant masks are not evaluated at compile time

Constant = Callable[[str], "Any | None"]  # value id -> its numpy array when it is a weight, else None


@dataclass(frozen=True)
class CausalMask:
    """The score chain masks key j of query i exactly when j > i + offset (queries are the last Sq of
    Sk positions when offset = Sk - Sq), the same for every batch entry. `kept`: each operand of a
    score op that the mask makes vary, with its one value wherever a key is kept: the kernel computes
    the chain with those values and masks by comparing indices, reading no mask tensor."""

    offset: int
    kept: dict[str, Any]


def _evaluate(op: str, attrs: Mapping, dtype: str, args: list) -> Any:
    """One elementwise op of a score chain or a mask, by its reference semantics (floats in float64:
    only which scores are masked, and the mask's values where they are not, are read from it)."""
    import numpy as np
    import torch

    if op == "cast":
        (x,) = args
        return x != 0 if dtype == "i1" else x.astype(np.float64 if dtype.startswith(("f", "bf")) else np.int64)
    opdef = OPS[op]
    tensors = [torch.from_numpy(np.ascontiguousarray(_widened(np.asarray(a)))) for a in args]
    return opdef.ref(None, opdef.with_defaults(dict(attrs)), *tensors).numpy()


def _widened(x):
    """float64 for floats, int64 for integers, bools as they are."""
    import numpy as np

    if x.dtype == np.bool_:
        return x
    return x.astype(np.float64 if np.issubdtype(x.dtype, np.floating) else np.int64)


def causal_mask(ops: Sequence[Mapping], match: AttentionMatch, values: Mapping[str, Mapping],
                constant: Constant) -> CausalMask | None:
    """Whether the matched attention's mask is causal, decided from its constants (a lower-triangular
    buffer or a slice of one, torch's is_causal mask of 0 and -inf, compares of constant index
    tensors): the score chain is evaluated in numpy at a few scores over the static [Sq, Sk] grid.
    None when the mask is anything else, the sizes are dynamic or a mask operand is no constant."""
    import numpy as np

    scores_shape = values[ops[match.qk]["outputs"][0]]["shape"]
    sq, sk = scores_shape[-2:]
    if not (_static(sq) and _static(sk)):
        return None
    s = ops[match.qk]["outputs"][0]
    produced = {ops[i]["outputs"][0]: i for i in match.chain}
    depends, score_ops = {s}, []
    for i in match.chain:
        if any(v in depends for v in ops[i]["inputs"]):
            depends.add(ops[i]["outputs"][0])
            score_ops.append(i)
    known: dict[str, Any] = {}

    def value(vid: str) -> Any:
        if vid not in known:
            if vid in produced:
                e = ops[produced[vid]]
                known[vid] = _evaluate(e["op"], e["attrs"], values[vid]["dtype"], [value(v) for v in e["inputs"]])
            else:
                t = constant(vid)
                if t is None or t.size > MAX_MASK_ELEMENTS:
                    raise LookupError(vid)
                known[vid] = t
        return known[vid]

    operands = list(dict.fromkeys(v for i in score_ops for v in ops[i]["inputs"] if v not in depends))
    try:
        with np.errstate(all="ignore"):
            mask_values = {v: np.asarray(value(v)) for v in operands}
            results = []
            for x in PROBE_SCORES:
                env = {**mask_values, s: np.float64(x)}
                for i in score_ops:
                    e = ops[i]
                    out = e["outputs"][0]
                    env[out] = np.asarray(_evaluate(e["op"], e["attrs"], values[out]["dtype"],
                                                    [env[v] for v in e["inputs"]]))
                results.append(env[match.scores])
    except (LookupError, TypeError, ValueError):
        return None
    grid = np.broadcast_shapes(*(r.shape for r in results))
    if len(grid) < 2 or grid[-2:] != (sq, sk):
        return None  # the mask does not vary over both the queries and the keys
    low = [np.broadcast_to(r <= MASKED_AT_MOST, grid).reshape(-1, sq, sk) for r in results]
    masked = low[0][0]
    if any((m != masked).any() for m in low):
        return None  # a key masked for some scores, some batch entries, and not for others
    offset = int((~masked[0]).sum()) - 1
    future = np.arange(sk)[None, :] > np.arange(sq)[:, None] + offset
    if offset < 0 or not masked.any() or (masked != future).any():
        return None
    kept: dict[str, Any] = {}
    for vid, m in mask_values.items():
        if m.size <= 1:
            continue  # one value everywhere: the lowering folds it as before
        full = np.broadcast_to(m, np.broadcast_shapes(m.shape, grid)).reshape(-1, sq, sk)
        there = full[:, ~masked]
        if there.size == 0 or (there != there.flat[0]).any():
            return None  # a mask operand with several values where keys are kept (another mask too)
        kept[vid] = there.flat[0].item()
    return CausalMask(offset, kept)


# ---------------------------------------------------------------- sdc-fuse: three groups become one


def merge_attention_groups(graph: FusionGraph, grouping: Grouping, entry: Callable[[int], dict],
                           values: Mapping[str, Mapping], scalar: Scalar = _no_scalars) -> Grouping:
    """`grouping` (fuse.Grouping of `graph`) with each matched attention's three groups merged into one
    group of kind "attention".

    `entry(n)`: node n as a plan-style op entry whose value ids are `f"v{index}"` of the graph's values;
    `values`: those ids' shapes and dtypes. The groups are the first matmul's (with its epilogue and
    any mask ops sdc-fuse put there), the softmax's (with its casts) and the second matmul's, which
    must hold that matmul alone; with torch's empty-row fix-up (a `where` between the softmax and the
    second matmul) the fix-up's group joins them too. The merged group is convex: only its output leaves it, and every op
    in it is needed for that output. Recomputed ops (held by several groups) are left alone."""

    groups = [list(g.members) for g in grouping.groups]
    kinds = [g.kind for g in grouping.groups]
    holders: dict[int, set[int]] = {}
    for g, members in enumerate(groups):
        for n in members:
            holders.setdefault(n, set()).add(g)
    group_of = {n: g for g, members in enumerate(groups) for n in members if len(holders[n]) == 1}
    consumers = graph.consumers()
    returned = set(graph.outputs)
    merged: list[tuple[int, ...]] = []

    def producers_of(g: int) -> set[int]:
        return {group_of.get(graph.values[v].producer) for m in groups[g] for v in graph.nodes[m].operands
                if graph.values[v].producer is not None} - {None, g}

    def ga_of(g: int) -> int | None:
        """The matmul group an elementwise group of score ops reads, when it reads exactly one."""
        if not all(graph.nodes[m].label[4:] in SCORE_OPS for m in groups[g]):
            return None
        found = [h for h in producers_of(g) if kinds[h] in ANCHORS and
                 any(graph.nodes[m].label == "sdc.matmul" for m in groups[h])]
        return found[0] if len(found) == 1 else None

    def depends_on(g: int, target: int, seen: set[int] | None = None) -> bool:
        seen = set() if seen is None else seen
        if g == target:
            return True
        seen.add(g)
        return any(depends_on(p, target, seen) for p in producers_of(g) - seen)
    taken: set[int] = set()
    for n, node in enumerate(graph.nodes):
        if node.label != "sdc.softmax" or n not in group_of:
            continue
        at = n  # the second matmul: the one reader of the probabilities, after their casts (and fix-up)
        fixups: set[int] = set()
        while True:
            readers = consumers[graph.nodes[at].results[0]]
            label = graph.nodes[readers[0]].label if len(readers) == 1 else ""
            if label == "sdc.where":  # torch's empty-row fix-up
                if readers[0] not in group_of:
                    break
                fixups.add(group_of[readers[0]])
            elif label != "sdc.cast" and label != "sdc.matmul":
                break
            at = readers[0]
            if label == "sdc.matmul":
                break
        if graph.nodes[at].label != "sdc.matmul" or at not in group_of:
            continue
        gs, gv = group_of[n], group_of[at]
        producers = producers_of(gs)
        anchored = [g for g in producers if kinds[g] in ANCHORS and
                    any(graph.nodes[m].label == "sdc.matmul" for m in groups[g])]
        # the score chain may be a group of its own between the matmul and the softmax (a mask's add
        # whose result the softmax and the fix-up both read): elementwise score ops reading the matmul
        between = [g for g in producers - set(anchored) if ga_of(g) is not None]
        anchored += [ga_of(g) for g in between]
        if len(set(anchored)) != 1 or not _matmul_and_casts(graph, groups[gv], at):
            continue
        ga = anchored[0]
        if any(depends_on(p, ga) for g in between for p in producers_of(g) - {ga}):
            continue  # a mask made from the matmul's result elsewhere: merging would not be convex
        fixups -= {gs}
        three = {ga, gs, gv} | fixups | set(between)
        if len(three) != 3 + len(fixups) + len(between) or three & taken:
            continue
        members = sorted({m for g in three for m in groups[g]})  # an op recomputed in two of them: once
        if len({graph.nodes[m].place for m in members}) != 1:
            continue
        inside = set(members)
        # what the merged group writes for others (fuse.group_outputs' rule): a result read outside it,
        # unless the op is recomputed and a group holding its own copy writes it for them
        leaving = [f"v{r}" for m in members for r in graph.nodes[m].results
                   if not holders[m] - three and (r in returned or any(c not in inside for c in consumers[r]))]
        try:
            match_attention([entry(m) for m in members], values, leaving, scalar)
        except NotAttention:
            continue
        merged.append(tuple(sorted(three)))
        taken |= three
    if not merged:
        return grouping
    kept = [i for i in range(len(groups)) if i not in taken]
    out = [grouping.groups[i] for i in kept]
    out += [Group(sorted({m for g in three for m in groups[g]}), ATTENTION) for three in merged]
    renumber = {old: new for new, old in enumerate(kept)}
    for j, three in enumerate(merged):
        renumber.update({old: len(kept) + j for old in three})
    home = [-1] * len(graph.nodes)
    for g, group in enumerate(out):
        for m in group.members:
            if home[m] < 0:
                home[m] = g
    # a copy of an op into a group that now also holds the op itself (a mask's add recomputed in the
    # fix-up's group, all merged) is no copy any more: the merged group computes it once
    copies = [(n, renumber[g]) for n, g in grouping.recomputed
              if not any(renumber[h] == renumber[g] for h in holders[n] if h != g)]
    return Grouping(out, home, copies)


ATTENTION = "attention"  # the sdc.fusion kind of a merged group


def _matmul_and_casts(graph: FusionGraph, members: Sequence[int], at: int) -> bool:
    """Whether a group is the matmul `at` alone or with a chain of casts of its result."""
    if members[0] != at:
        return False
    last = graph.nodes[at].results[0]
    for m in members[1:]:
        node = graph.nodes[m]
        if node.label != "sdc.cast" or list(node.operands) != [last]:
            return False
        last = node.results[0]
    return True


def fuse_entries(ops: Sequence[Any], value_index: Mapping[Any, int]
                 ) -> tuple[Callable[[int], dict], dict[str, dict], Scalar]:
    """sdc-fuse's IR ops (node -> op) as plan-style op entries for `match_attention`: the `entry(n)`
    function, the values table (value ids `f"v{index}"`) and the `scalar` lookup of splat constants."""
    from sdc.dialect.attrs import AttrError
    import torch

    from sdc import dtypes
    from sdc.dialect.ir import defining_op, read_attrs, tensor_spec
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

    by_id = {f"v{i}": v for v, i in value_index.items()}

    def scalar(vid: str) -> float | None:
        return _splat_value(by_id[vid]) if vid in by_id else None

    def _splat_value(value: Any) -> float | None:
        """A splat constant's number, through the casts the mixed-precision pass puts on constants."""
        op = defining_op(value)
        if op is not None and op.name == "sdc.cast":
            inner = _splat_value(op.operands[0])
            spec = tensor_spec(op.results[0].type)
            return None if inner is None else float(torch.tensor(inner).to(dtypes.to_torch(spec.dtype)))
        if op is None or op.name != "sdc.constant":
            return None
        dense = read_attrs(OPS["constant"], op)["value"]
        return float(dense.data.reshape(-1)[0]) if dense.is_splat() else None

    return entry, values, scalar


# ---------------------------------------------------------------- sdc-canonicalize: batched matmuls back to their rank


def unflatten_batch_matmul(op: Any, rewriter: Any) -> bool:
    """`reshape(matmul(reshape(a), reshape(b)))` -> `matmul(a, b)` when the reshapes only merge and split
    the same leading batch dims (a sdc-canonicalize pattern on `sdc.reshape`).

    torch.export decomposes a 4-D `q @ k.transpose(-1, -2)` (and F.scaled_dot_product_attention) into
    3-D bmms between reshapes; the flash-attention matcher, like the matmul template, wants the batch
    dims the model meant, so a reshape sitting between the two matmuls and the softmax does not hide
    the attention. Static shapes only: with a dynamic dim the types cannot show the dims are the same."""
    from sdc.dialect.ir import defining_op, read_attrs, tensor_spec
    from sdc.dialect.builder import create
    from sdc.dialect.opdef import OPS
    from sdc.dialect.shapes import is_static

    matmul = defining_op(op.operands[0])
    if matmul is None or matmul.name != "sdc.matmul" or len(list(matmul.results[0].uses)) != 1:
        return False
    flat_lhs, flat_rhs = (defining_op(v) for v in matmul.operands)
    if flat_lhs is None or flat_rhs is None or flat_lhs.name != "sdc.reshape" or flat_rhs.name != "sdc.reshape":
        return False
    lhs, rhs = flat_lhs.operands[0], flat_rhs.operands[0]
    shapes = [tensor_spec(v.type).shape for v in (lhs, rhs, op.results[0], flat_lhs.results[0],
                                                   flat_rhs.results[0], matmul.results[0])]
    if not all(is_static(d) for s in shapes for d in s):
        return False
    a, b, out, a3, b3, m3 = shapes
    if len(m3) != 3 or len(a) != len(out) or len(b) != len(out) or len(out) < 3:
        return False
    if a[:-2] != out[:-2] or b[:-2] != out[:-2] or a[-2:] != a3[1:] or b[-2:] != b3[1:] or out[-2:] != m3[1:]:
        return False
    attrs = read_attrs(OPS["matmul"], matmul)
    with rewriter.ip:
        new = create("matmul", [lhs, rhs], attrs, result_types=[op.results[0].type], loc=matmul.location)
    rewriter.replace_op(op, new.results)
    return True
