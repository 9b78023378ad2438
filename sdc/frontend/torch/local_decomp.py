"""The exported graph lowered to core ATen in place, node by node, when every node allows it.

`ExportedProgram.run_decompositions` re-traces the whole program (functionalization, fake tensors,
the proxy tracer): for torchvision's ResNet-50 that was more than half of the torch frontend's
time (2.35 of 4.3 CPU seconds on the development machine; 0.16 s this way), though the graph torch.export gives has only eight
distinct ops and each needs a fixed one-node rewrite (`conv2d` -> `convolution`, eval `batch_norm` ->
`_native_batch_norm_legit_no_training`, `relu_` -> `relu`, ...). `lower_locally` does those
rewrites on the FX graph directly: each new node's `meta["val"]` comes from running its op once on
the fake values torch.export recorded (no trace), and it keeps the original's stack trace (locations).

It is all or nothing. `plan_lowering` first checks every node: an op the decomposition table or a
CompositeImplicitAutograd kernel would decompose needs a rule in `RULES` whose guard accepts the
node's arguments; an in-place op must be removable by functionalizing it locally (see
`_functional_variant`); a higher-order op or an unknown kind of node is refused. When one node fails,
nothing has been changed and the caller runs `run_decompositions` as before, so the result is the
core-ATen program either way (test/py/test_torch_local_decomp.py compares the two paths). A rewrite
that fails while applying (its fake value cannot be computed) stops there: every step before it left
an equivalent graph, which the retrace then finishes.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.fx

aten = torch.ops.aten
_CIA = torch._C.DispatchKey.CompositeImplicitAutograd

LINEAR_2D = "linear-2d"  # the one rewrite that is two nodes (see `_apply`)

# A rewrite: (new op, its args, its kwargs, index of the result to read (None: the op's only result)).
Rewrite = tuple[Any, tuple, dict, "int | None"]
# A rule gets the node's arguments bound by name (defaults filled in); None: it does not apply.
Rule = Callable[[dict[str, Any], torch.fx.Node], "Rewrite | None"]


def _bind(op: torch._ops.OpOverload, node: torch.fx.Node) -> dict[str, Any] | None:
    """The node's arguments by schema name, with the schema's defaults; None if they do not bind."""
    schema = op._schema
    bound: dict[str, Any] = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args) and not arg.kwarg_only:
            bound[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            bound[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            bound[arg.name] = arg.default_value
        else:
            return None
    if len(node.args) > sum(1 for a in schema.arguments if not a.kwarg_only):
        return None
    return bound


def _val(x: Any) -> Any:
    return x.meta.get("val") if isinstance(x, torch.fx.Node) else x


def _spatial_list(value: Any, spatial: int) -> list | None:
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if len(values) == 1:
        values = values * spatial
    return values if len(values) == spatial else None


def _convolution(spatial: int) -> Rule:
    def rule(a: dict[str, Any], node: torch.fx.Node) -> Rewrite | None:
        x = _val(a["input"])
        if not isinstance(x, torch.Tensor) or x.dim() != spatial + 2:  # unbatched conv: leave it to the retrace
            return None
        stride, padding, dilation = (_spatial_list(a[k], spatial) for k in ("stride", "padding", "dilation"))
        if stride is None or padding is None or dilation is None:
            return None
        return (aten.convolution.default, (a["input"], a["weight"], a["bias"], stride, padding, dilation, False,
                                           [0] * spatial, a["groups"]), {}, None)
    return rule


def _batch_norm(a: dict[str, Any], node: torch.fx.Node) -> Rewrite | None:
    if a["training"] or a["running_mean"] is None or a["running_var"] is None:
        return None  # training mode updates the running statistics: functionalization's job
    return (aten._native_batch_norm_legit_no_training.default,
            (a["input"], a["weight"], a["bias"], a["running_mean"], a["running_var"], a["momentum"], a["eps"]), {}, 0)


def _linear(a: dict[str, Any], node: torch.fx.Node) -> Rewrite | None:
    x = _val(a["input"])
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        return None
    # two nodes (the weight's transpose, then addmm or mm): `_apply` makes them for this marker
    return (LINEAR_2D, (a["input"], a["weight"], a["bias"]), {}, None)


def _view_op(x: Any) -> Any:
    """`aten.view` where the value torch.export recorded is contiguous, else `aten.reshape` (which the
    importer reads the same way): a view of other strides would fail to compute its fake value."""
    val = _val(x)
    return aten.view.default if isinstance(val, torch.Tensor) and val.is_contiguous() else aten.reshape.default


def _flatten(a: dict[str, Any], node: torch.fx.Node) -> Rewrite | None:
    out = _val(node)
    if not isinstance(out, torch.Tensor) or not all(isinstance(s, int) for s in out.shape):
        return None  # a symbolic size would need its own size node
    return (_view_op(a["self"]), (a["self"], list(out.shape)), {}, None)


def _max_pool2d(a: dict[str, Any], node: torch.fx.Node) -> Rewrite | None:
    return (aten.max_pool2d_with_indices.default,
            (a["self"], a["kernel_size"], a["stride"], a["padding"], a["dilation"], a["ceil_mode"]), {}, 0)


def _adaptive_avg_pool2d(a: dict[str, Any], node: torch.fx.Node) -> Rewrite | None:
    return (aten._adaptive_avg_pool2d.default, (a["self"], a["output_size"]), {}, None)


def _dropout(a: dict[str, Any], node: torch.fx.Node) -> Rewrite | None:
    if a["train"] and a["p"] != 0:
        return None  # a random op: native_dropout through the retrace
    return (aten.clone.default, (a["input"],), {}, None)


def _layer_norm(a: dict[str, Any], node: torch.fx.Node) -> Rewrite | None:
    return (aten.native_layer_norm.default, (a["input"], a["normalized_shape"], a["weight"], a["bias"], a["eps"]),
            {}, 0)


def _softmax(target: Any) -> Rule:
    def rule(a: dict[str, Any], node: torch.fx.Node) -> Rewrite | None:
        if a["dtype"] is not None:
            return None
        return (target, (a["self"], a["dim"], False), {}, None)
    return rule


def _reshape(a: dict[str, Any], node: torch.fx.Node) -> Rewrite | None:
    return (_view_op(a["self"]), (a["self"], a["shape"]), {}, None)


def _to_dtype(a: dict[str, Any], node: torch.fx.Node) -> Rewrite | None:
    return (aten._to_copy.default, (a["self"],), {"dtype": a["dtype"]}, None)


def _transpose(a: dict[str, Any], node: torch.fx.Node) -> Rewrite | None:
    x = _val(a["self"])
    if not isinstance(x, torch.Tensor) or x.dim() == 0:
        return None
    perm = list(range(x.dim()))
    i, j = a["dim0"] % x.dim(), a["dim1"] % x.dim()
    perm[i], perm[j] = perm[j], perm[i]
    return (aten.permute.default, (a["self"], perm), {}, None)


def _contiguous(a: dict[str, Any], node: torch.fx.Node) -> Rewrite | None:
    return (aten.clone.default, (a["self"],), {}, None)


# The ops torch.export leaves that run_decompositions would lower, each with its one-node rewrite.
RULES: dict[Any, Rule] = {
    aten.conv1d.default: _convolution(1), aten.conv2d.default: _convolution(2), aten.conv3d.default: _convolution(3),
    aten.batch_norm.default: _batch_norm, aten.linear.default: _linear, aten.flatten.using_ints: _flatten,
    aten.max_pool2d.default: _max_pool2d, aten.adaptive_avg_pool2d.default: _adaptive_avg_pool2d,
    aten.dropout.default: _dropout, aten.layer_norm.default: _layer_norm,
    aten.softmax.int: _softmax(aten._softmax.default), aten.log_softmax.int: _softmax(aten._log_softmax.default),
    aten.reshape.default: _reshape, aten.contiguous.default: _contiguous, aten.transpose.int: _transpose,
    aten.to.dtype: _to_dtype,
}


def _aliases(op: Any) -> bool:
    """Whether an op's result may share memory with an operand (a view, or an in-place op's result)."""
    return isinstance(op, torch._ops.OpOverload) and any(r.alias_info is not None for r in op._schema.returns)


def _functional_variant(op: torch._ops.OpOverload) -> torch._ops.OpOverload | None:
    """`aten.relu.default` for `aten.relu_.default`: an in-place op whose first argument is the only
    one written, and whose out-of-place twin has the same arguments."""
    schema = op._schema
    written = [a for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    name = op.overloadpacket.__name__
    if len(written) != 1 or written[0] is not schema.arguments[0] or not name.endswith("_") or name.startswith("_"):
        return None
    packet = getattr(aten, name[:-1], None)
    if packet is None or op._overloadname not in packet.overloads():
        return None
    functional = getattr(packet, op._overloadname)
    if [a.name for a in functional._schema.arguments] != [a.name for a in schema.arguments] or \
            functional._schema.is_mutable:
        return None
    return functional


def _viewed_before(value: torch.fx.Node, update: torch.fx.Node, order: dict[torch.fx.Node, int]) -> bool:
    """Whether a view of `value` is taken before `update` writes it: that view would see the update,
    which an out-of-place op cannot give it. (A view taken after reads the updated value anyway.)"""
    return any(_aliases(u.target) and not u.target._schema.is_mutable and order[u] < order[update]
               for u in value.users)


def _fresh(node: Any) -> bool:
    """Whether `node` is a tensor made by an op that returns new memory (not a view, not an input)."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return False  # a placeholder is the caller's tensor, a parameter or a buffer: mutating it is state
    source = node.args[0] if node.target is operator.getitem else node
    if not isinstance(source, torch.fx.Node) or not isinstance(source.target, torch._ops.OpOverload):
        return False
    return not _aliases(source.target)


@dataclass
class LoweringPlan:
    """What `lower_locally` would do, or why it cannot (`refused`: the first node it cannot lower)."""

    steps: list[tuple[torch.fx.Node, Any, Rewrite | None]]  # (node, its functional op, its rewrite)
    refused: str | None = None


def plan_lowering(graph: torch.fx.Graph, table: dict) -> LoweringPlan:
    """Check every node of `graph` (which is not changed) against the rules."""
    steps: list[tuple[torch.fx.Node, Any, Rewrite | None]] = []
    mutated_later: set[torch.fx.Node] = set()  # values an earlier in-place op wrote: their producer is now pure
    order = {n: i for i, n in enumerate(graph.nodes)}
    for node in graph.nodes:
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        if node.op != "call_function":
            return LoweringPlan([], f"{node.op} node '{node.name}'")
        op = node.target
        if not isinstance(op, torch._ops.OpOverload):
            if isinstance(op, torch._ops.HigherOrderOperator):
                return LoweringPlan([], f"higher-order op {op} (node '{node.name}')")
            continue  # operator.getitem and size arithmetic stay as they are
        if op._schema.is_mutable:
            functional = _functional_variant(op)
            target = node.args[0] if node.args else None
            if functional is None or not (_fresh(target) or target in mutated_later):
                return LoweringPlan([], f"in-place {op} (node '{node.name}')")
            if _viewed_before(target, node, order):
                return LoweringPlan([], f"in-place {op} on a viewed value (node '{node.name}')")
            mutated_later.add(node)
            op = functional
        decomposes = op in table or op.has_kernel_for_dispatch_key(_CIA)
        rewrite = None
        if decomposes:
            rule = RULES.get(op)
            bound = _bind(op, node) if rule is not None else None
            try:
                rewrite = rule(bound, node) if bound is not None else None
            except Exception:  # arguments the rule did not expect: the retrace's case
                rewrite = None
            if rewrite is None:
                return LoweringPlan([], f"{op} (node '{node.name}')")
        if op is not node.target or rewrite is not None:
            steps.append((node, op, rewrite))
    return LoweringPlan(steps)


def lower_locally(program: torch.export.ExportedProgram, table: dict) -> str | None:
    """Lower `program`'s graph to core ATen in place; None when done, else why it was left unchanged."""
    graph = program.graph_module.graph
    placeholders = [n.meta.get("val") for n in graph.nodes if n.op == "placeholder"]
    fake_mode = torch._guards.detect_fake_mode([v for v in placeholders if isinstance(v, torch.Tensor)])
    if fake_mode is None:
        return "no fake values recorded"
    plan = plan_lowering(graph, table)
    if plan.refused is not None:
        return plan.refused
    order = {n: i for i, n in enumerate(graph.nodes)}
    try:
        for node, functional, rewrite in plan.steps:
            if functional is not node.target:  # functionalized: later readers of the written value read this node
                written = node.args[0]
                for user in list(written.users):
                    if user is not node and order[user] > order[node]:
                        user.replace_input_with(written, node)
                node.target = functional
            if rewrite is not None:  # bound again: the arguments may be nodes rewritten since the plan was made
                rewrite = RULES[functional](_bind(functional, node), node)
                if rewrite is None:
                    raise ValueError("its rule accepted it when planning, not now")
                with fake_mode, graph.inserting_before(node):
                    _apply(graph, node, rewrite)
    except Exception as e:  # each step left an equivalent graph (a fake value is computed before any
        program.graph_module.recompile()  # node is added): the retrace finishes from where this stopped
        return f"rewriting node '{node.name}' failed: {type(e).__name__}: {e}"
    program.graph_module.recompile()
    return None


def _new_node(graph: torch.fx.Graph, like: torch.fx.Node, target: Any, args: tuple, kwargs: dict) -> torch.fx.Node:
    """A node of `target` with its fake value computed and `like`'s stack trace (its location)."""
    val = target(*torch.fx.node.map_arg(args, _val), **torch.fx.node.map_arg(kwargs, _val))
    new = graph.call_function(target, args, kwargs)
    new.meta["val"] = val
    for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
        if key in like.meta:
            new.meta[key] = like.meta[key]
    return new


def _apply(graph: torch.fx.Graph, node: torch.fx.Node, rewrite: Rewrite) -> None:
    target, args, kwargs, index = rewrite
    if target == LINEAR_2D:
        x, weight, bias = args
        weight_t = _new_node(graph, node, aten.permute.default, (weight, [1, 0]), {})
        result = (_new_node(graph, node, aten.addmm.default, (bias, x, weight_t), {}) if bias is not None
                  else _new_node(graph, node, aten.mm.default, (x, weight_t), {}))
    else:
        result = _new_node(graph, node, target, args, kwargs)
        if index is not None:
            part = graph.call_function(operator.getitem, (result, index))
            part.meta["val"] = result.meta["val"][index]
            result = part
    node.replace_all_uses_with(result)
    graph.erase_node(node)
