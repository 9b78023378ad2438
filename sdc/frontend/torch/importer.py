"""An ExportedProgram's FX graph -> one `func.func @main` of sdc ops.

The parts: `export_program` (sdc/frontend/torch/export.py) gives the core-ATen program;
`SymbolNames` (symbols.py) names its symbolic sizes after the user's `Dim`s; `check_supported`
reports every op the importer lacks before anything is built; `GraphImporter` here builds the
entry function: the user inputs become arguments (`sdc.name`, `sdc.dims`), parameters, buffers and
lifted constants become `sdc.parameter`s under their state-dict names, each node goes through
`AtenImporter` (ops.py) at the location of its source line, and the Dim ranges become
`sdc.guards` on the function, which the shape pass turns into run-time checks.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Sequence

import torch
import torch.fx
from torch.export.graph_signature import InputKind, OutputKind

from sdc import dtypes
from sdc.diagnostics import SdcError
from sdc.dialect import attrs as A
from sdc.dialect.builder import create
from sdc.dialect.op_classes import new_context
from sdc.dialect.shapes import DYN, ShapeError
from sdc.frontend.builder import Builder, verify_imported
from sdc.frontend.torch.export import ASSERT_TARGETS, check_supported, export_program, op_name, source_location
from sdc.frontend.torch.ops import AtenImporter, is_random, is_size_value
from sdc.frontend.torch.symbols import SymbolNames, name_input_dims, range_guards, size_expr
from sdc.frontend.values import V, is_int, symbol_name
from sdc.mlir import MLIRError, func, ir

__all__ = ["ImportedProgram", "import_program", "import_torch"]

_WEIGHT_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
RNG_INPUTS = ("rng.seed", "rng.offset")  # rank-0 i64 entry inputs, added when the graph draws random numbers
NEXT_PREFIX = "next."  # a buffer update's result: `next.<buffer>` (what sdc.train makes state)


@dataclass
class ImportedProgram:
    module: ir.Operation
    params: dict[str, torch.Tensor]
    input_names: list[str]
    output_names: list[str]


def import_torch(model: Any, example_args: Sequence[Any] | None = None, dynamic_shapes: Any = None, *,
                 example_kwargs: dict | None = None, buffer_updates: bool = False) -> ImportedProgram:
    """Export `model` (a torch.nn.Module, or an ExportedProgram as it is) and import it into sdc."""
    program = export_program(model, example_args, example_kwargs, dynamic_shapes)
    return import_program(program, dynamic_shapes, buffer_updates=buffer_updates)


def import_program(program: torch.export.ExportedProgram, dynamic_shapes: Any = None, *,
                   buffer_updates: bool = False) -> ImportedProgram:
    """Import a core-ATen ExportedProgram; `dynamic_shapes` (as given to torch.export) names its dims.
    `buffer_updates` (a training step): a buffer the forward updates in place (batch norm's running
    statistics) is allowed, and its new value becomes an extra result named `next.<buffer>`."""
    graph = program.graph_module.graph
    signature = program.graph_signature
    if (signature.buffers_to_mutate and not buffer_updates) or signature.user_inputs_to_mutate:
        mutated = list(signature.buffers_to_mutate.values()) + list(signature.user_inputs_to_mutate.values())
        raise SdcError(f"the model updates {', '.join(repr(m) for m in mutated)} in place during forward (a "
                       "training-mode batch norm?): call model.eval() or remove the in-place update")
    check_supported(graph, AtenImporter.supports)
    ctx = new_context()
    with ctx, ir.Location.unknown():
        return GraphImporter(program, dynamic_shapes, buffer_updates).run()


class GraphImporter:
    """One import: the signature, the weights, the nodes in graph order, the results."""

    def __init__(self, program: torch.export.ExportedProgram, dynamic_shapes: Any, buffer_updates: bool = False):
        self.program = program
        self.buffer_updates = buffer_updates
        self.graph = program.graph_module.graph
        self.params: dict[str, torch.Tensor] = {}
        self.values: dict[torch.fx.Node, Any] = {}
        self.current = "const"
        self.builder = Builder(self.params, lambda: symbol_name(self.current))
        self.builder.splat_constants = True  # the weights are parameters of their own (`_weights`)
        self.names = SymbolNames()
        self.aten = AtenImporter(self.builder, self.names.to_sdc)
        placeholders = {n.name: n for n in self.graph.nodes if n.op == "placeholder"}
        self.weights: list[tuple[torch.fx.Node, str, torch.Tensor]] = []
        self.user_inputs: list[torch.fx.Node] = []
        for spec in program.graph_signature.input_specs:
            node = placeholders[spec.arg.name]
            if spec.kind in _WEIGHT_KINDS:
                self.weights.append((node, spec.target, self._weight(spec.kind, spec.target)))
            elif spec.kind == InputKind.USER_INPUT:
                val = node.meta.get("val")
                if not isinstance(val, torch.Tensor):
                    raise SdcError(f"input '{node.name}' is a {type(val).__name__}: only tensor inputs are supported "
                                   "(torch.export makes Python numbers constants; pass them when exporting)")
                self.user_inputs.append(node)
            else:
                raise SdcError(f"input '{node.name}' of kind {spec.kind.name} is unsupported")
        specs = _input_specs(dynamic_shapes, [n.name for n in self.user_inputs])
        name_input_dims(self.names, [(n.name, n.meta["val"], s) for n, s in zip(self.user_inputs, specs)])

    def _weight(self, kind: InputKind, target: str) -> torch.Tensor:
        source = self.program.constants if kind == InputKind.CONSTANT_TENSOR else self.program.state_dict
        if target not in source:  # a non-persistent buffer lives with the constants
            source = self.program.constants
        value = source[target]
        if not isinstance(value, torch.Tensor):
            raise SdcError(f"'{target}' is a {type(value).__name__}, not a tensor: unsupported")
        return value.detach()

    def dims_of(self, shape) -> list:
        return [d if is_int(d) else Builder.dim_text(d) for d in (self.names.to_sdc(s) for s in shape)]

    def run(self) -> ImportedProgram:
        file_loc = ir.Location.name("torch.export")
        module = ir.Module.create(file_loc)
        arg_types, arg_attrs = [], []
        self.guards: list[tuple[str, str]] = []
        for node in self.user_inputs:
            val = node.meta["val"]
            dtype = dtypes.from_torch(val.dtype)
            sym = tuple(self.names.to_sdc(s) for s in val.shape)
            arg_types.append(self.builder.tensor_type(sym, dtype))
            arg_attrs.append(ir.DictAttr.get({"sdc.name": ir.StringAttr.get(node.name),
                                              "sdc.dims": A.dims(self._input_dims(node.name, sym))}))
            self.values[node] = V(dtype, sym)
        random = any(node.op == "call_function" and is_random(node) for node in self.graph.nodes)
        for name in RNG_INPUTS if random else ():  # the seed and counter offset random ops draw from
            arg_types.append(self.builder.tensor_type((), "i64"))
            arg_attrs.append(ir.DictAttr.get({"sdc.name": ir.StringAttr.get(name), "sdc.dims": A.dims([])}))
        with ir.InsertionPoint(module.body), file_loc:
            fn = func.FuncOp("main", (arg_types, []))
            fn.attributes["arg_attrs"] = ir.ArrayAttr.get(arg_attrs)
            block = fn.add_entry_block()
        for node, arg in zip(self.user_inputs, block.arguments):
            self.values[node].value = arg
        if random:
            self.aten.rng = tuple(V("i64", (), value=a) for a in list(block.arguments)[-len(RNG_INPUTS):])
        with ir.InsertionPoint(block):
            self._weights()
            output = None
            for node in self.graph.nodes:
                if node.op == "output":
                    output = node
                elif node.op == "call_function":
                    self._import_node(node)
            results, result_attrs, names = self._results(output, file_loc)
            func.ReturnOp(results, loc=file_loc)
        fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(arg_types, [r.type for r in results]))
        fn.attributes["res_attrs"] = ir.ArrayAttr.get(result_attrs)
        guards = range_guards(self.names, self.program.range_constraints) + self.guards
        if guards:
            fn.attributes["sdc.guards"] = ir.ArrayAttr.get([A.guard(c, m) for c, m in guards])
        op = module.operation
        verify_imported(op)
        return ImportedProgram(op, self.params, [n.name for n in self.user_inputs], names)

    def _input_dims(self, name: str, sym: tuple) -> list:
        """An input's `sdc.dims`. A derived dim (`2*seq`) gets a name of its own and the guard
        `y_1 == 2*seq`: the runtime binds symbols from plain names and checks guards, so a wrong
        size is refused up front, naming the input."""
        dims = []
        for d, size in enumerate(sym):
            if is_int(size) or size.is_Symbol:
                dims.append(size if is_int(size) else str(size))
                continue
            own = symbol_name(f"{name}_{d}")
            text = Builder.dim_text(size)
            self.guards.append((f"{own} == {text}", f"torch.export: dim {d} of input '{name}' is {text}"))
            dims.append(own)
        return dims

    def _weights(self) -> None:
        """Each parameter, buffer and lifted constant as an `sdc.parameter` named by its state-dict key."""
        for node, target, value in self.weights:
            dtype = dtypes.from_torch(value.dtype)
            with self.builder.at(ir.Location.name(target)):
                op = create("parameter", [], {"name": target},
                            result_types=[self.builder.tensor_type(tuple(value.shape), dtype)], loc=self.builder.loc)
            self.params[target] = value.contiguous()
            self.values[node] = V(dtype, tuple(value.shape), value=op.results[0])

    def _location(self, node: torch.fx.Node) -> ir.Location:
        loc = source_location(node)
        if loc is None:
            return ir.Location.name(node.name)
        return Builder.location(node.name, loc.file, loc.line)

    def _import_node(self, node: torch.fx.Node) -> None:
        name = op_name(node.target)
        if name in ASSERT_TARGETS:
            return
        val = node.meta.get("val")
        if node.target is operator.getitem:
            parts, index = self.values[node.args[0]], node.args[1]
            part = parts[index]
            if part is None and node.users:
                producer = op_name(node.args[0].target)
                raise SdcError(f"{_where(node)}result {index} of {producer} (node '{node.args[0].name}') is "
                               "unsupported (only training reads it)")
            self.values[node] = part
            return
        if is_size_value(val):
            self.values[node] = self.names.to_sdc(size_expr(val)) if not isinstance(val, (float, bool)) else val
            return
        self.current = node.name
        args = torch.fx.node.map_arg(node.args, lambda n: self.values[n])
        kwargs = dict(torch.fx.node.map_arg(node.kwargs, lambda n: self.values[n]))
        kwargs = {k: v for k, v in kwargs.items() if k not in ("device", "layout", "pin_memory", "memory_format",
                                                                 "non_blocking")}
        with self.builder.at(self._location(node)):
            try:
                result = self.aten.import_node(node, _plain(args), _plain(kwargs))
                result = self._conform(node, result, val)
            except (ShapeError, ValueError, TypeError) as e:
                raise SdcError(f"{_where(node)}{name} (node '{node.name}'): {e}") from None
            except MLIRError as e:
                detail = "; ".join(d.message for d in e.error_diagnostics) or str(e)
                raise SdcError(f"{_where(node)}{name} (node '{node.name}'): {detail}") from None
        self.values[node] = result

    def _conform(self, node: torch.fx.Node, result: Any, val: Any) -> Any:
        """The result in the dtype torch recorded (ranks must agree: a mismatch is an importer bug),
        and with torch's sizes where an sdc rule could not tell a dim (`x[:, :1]` of a symbolic
        dim is `?` to `sdc.slice`, 1 to torch, which knows the dim is at least 1)."""
        if isinstance(val, (list, tuple)):
            results = list(result) + [None] * (len(val) - len(result))
            return [self._conform(node, r, v) if r is not None else None for r, v in zip(results, val)]
        if not isinstance(result, V) or not isinstance(val, torch.Tensor):
            return result
        if result.rank != val.dim():
            raise ShapeError(f"the importer made a rank-{result.rank} value where torch has rank {val.dim()}")
        if any(d is DYN for d in result.sym) and not result.known:
            result = self._refined(result, val)
        return self.builder.cast(result, dtypes.from_torch(val.dtype))

    def _refined(self, result: V, val: torch.Tensor) -> V:
        """`result` reshaped to torch's sizes, where every one is a dim expression over input dims
        (a size of a data-dependent symbol is not: the `?` stays, for the shape pass)."""
        try:
            sizes = [self.names.to_sdc(d) for d in val.shape]
        except ShapeError:
            return result
        return self.builder.reshape(result, sizes)

    def _results(self, output: torch.fx.Node, loc: ir.Location) -> tuple[list, list, list[str]]:
        specs = self.program.graph_signature.output_specs
        outs = output.args[0] if isinstance(output.args[0], (list, tuple)) else [output.args[0]]
        results, attrs, names = [], [], []
        user = [(spec, node) for spec, node in zip(specs, outs) if spec.kind == OutputKind.USER_OUTPUT]
        updates = [(spec, node) for spec, node in zip(specs, outs) if spec.kind == OutputKind.BUFFER_MUTATION]
        self.builder.loc = loc
        for i, (spec, node) in enumerate(user):
            name = "output" if len(user) == 1 else f"output{i}"
            v = self.values.get(node) if isinstance(node, torch.fx.Node) else None
            if not isinstance(v, V):
                raise SdcError(f"output {i} is a {type(node).__name__ if v is None else type(v).__name__}, not a "
                               "tensor: only tensor outputs are supported")
            self.current = name
            results.append(self.builder.tensor(v))
            named = {"sdc.name": ir.StringAttr.get(name)}
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor):
                try:
                    named["sdc.dims"] = A.dims(self.dims_of(val.shape))
                except ShapeError:
                    pass
            attrs.append(ir.DictAttr.get(named))
            names.append(name)
        for spec, node in updates if self.buffer_updates else ():
            name = f"{NEXT_PREFIX}{spec.target}"
            self.current = name
            results.append(self.builder.tensor(self.values[node]))
            attrs.append(ir.DictAttr.get({"sdc.name": ir.StringAttr.get(name)}))
            names.append(name)
        return results, attrs, names


def _where(node: torch.fx.Node) -> str:
    loc = source_location(node)
    return f"{loc}: " if loc else ""


def _plain(x: Any) -> Any:
    """FX's immutable lists and dicts as plain ones."""
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


def _input_specs(dynamic_shapes: Any, names: list[str]) -> list[Any]:
    """Each user input's dynamic_shapes entry (a tuple aligned with the arguments, or a dict by name)."""
    if dynamic_shapes is None:
        return [None] * len(names)
    if isinstance(dynamic_shapes, dict):
        return [dynamic_shapes.get(n) for n in names]
    specs = list(dynamic_shapes)
    return specs + [None] * (len(names) - len(specs)) if len(specs) <= len(names) else specs[:len(names)]
