"""Rewrites that let tensor parallelism reach further, run by sdc-sharding-propagation before it reads
the function (only when it seeds tensor-parallel defaults).

A fused projection: one matmul with a weight of p*N output features (plus a bias), split right after
into p tensors of N features, as exporters write attention's q, k and v:

    %qkv = "sdc.matmul"(%h, %w)   : (tensor<?x?x64xf32>, tensor<64x192xf32>) -> tensor<?x?x192xf32>
    %b   = "sdc.add"(%bias, %qkv) : (tensor<192xf32>, tensor<?x?x192xf32>) -> tensor<?x?x192xf32>
    %q, %k, %v = "sdc.split"(%b) {axis = 2, parts = 3}

Splitting its output features over `tp` would give a device the last third of q and the first third of k
instead of a third of each, so the split would gather everything back. Written as p projections, each
with its block of the weight's columns (an `sdc.slice` of the weight, done when the plan is built), each
becomes column-parallel on its own and attention is split by heads. The values are the same: every
output column is the same dot product.
"""

from __future__ import annotations

from sdc.dialect.ir import read_attrs, tensor_spec
from sdc.dialect.builder import create
from sdc.dialect.opdef import OPS, weight_ops
from sdc.mlir import ir



def _owner(value):
    owner = value.owner
    return owner.operation if hasattr(owner, "operation") else owner


def _is_weight(value) -> bool:
    owner = _owner(value)
    return hasattr(owner, "name") and owner.name in weight_ops()


def _single_use(value) -> bool:
    return len(list(value.uses)) == 1


def unfuse_split_projections(fn) -> int:
    """Rewrite every fused projection of `fn` (see the module docstring); returns how many."""
    count = 0
    block = fn.regions[0].blocks[0]
    for op in [o.operation for o in block.operations]:
        if op.name == "sdc.split" and _unfuse(op):
            count += 1
    return count


def _unfuse(split) -> bool:
    attrs = read_attrs(OPS["split"], split)
    x = split.operands[0]
    rank = tensor_spec(x.type).rank
    axis = attrs["axis"] % rank if rank else 0
    parts = attrs["parts"]
    if axis != rank - 1 or parts < 2 or not _single_use(x):
        return False
    add, bias, bias_first = None, None, False
    producer = _owner(x)
    if getattr(producer, "name", "") == "sdc.add":
        lhs, rhs = producer.operands
        if _is_weight(lhs) and _owner(rhs).name == "sdc.matmul":
            add, bias, bias_first, mm_value = producer, lhs, True, rhs
        elif _is_weight(rhs) and _owner(lhs).name == "sdc.matmul":
            add, bias, mm_value = producer, rhs, lhs
        else:
            return False
        if not _single_use(mm_value):
            return False
        matmul = _owner(mm_value)
    elif getattr(producer, "name", "") == "sdc.matmul":
        matmul = producer
    else:
        return False
    mm_attrs = read_attrs(OPS["matmul"], matmul)
    act, weight = matmul.operands
    wspec = tensor_spec(weight.type)
    if not _is_weight(weight) or wspec.rank != 2 or tensor_spec(act.type).rank < 2:
        return False
    wdim = 0 if mm_attrs["transpose_rhs"] else 1
    total = wspec.shape[wdim]
    if not isinstance(total, int) or total % parts:
        return False
    n = total // parts
    if bias is not None:
        bspec = tensor_spec(bias.type)
        if bspec.rank < 1 or bspec.shape[-1] != total or any(d != 1 for d in bspec.shape[:-1]):
            return False
    outs = []
    with ir.InsertionPoint(split):
        for i in range(parts):
            window = {"starts": [i * n], "ends": [(i + 1) * n]}
            with matmul.location:
                w_i = create("slice", [weight], {**window, "axes": [wdim]}).results[0]
                y = create("matmul", [act, w_i], mm_attrs).results[0]
            if bias is not None:
                with add.location:
                    b_i = create("slice", [bias], {**window, "axes": [tensor_spec(bias.type).rank - 1]}).results[0]
                    y = create("add", [b_i, y] if bias_first else [y, b_i]).results[0]
            outs.append(y)
    for old, new in zip(split.results, outs):
        old.replace_all_uses_with(new)
    split.erase()
    if add is not None:
        add.erase()
    matmul.erase()
    return True

