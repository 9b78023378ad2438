"""ONNX -> sdc dialect.

    imported = import_onnx("model.onnx", input_shapes={"x": ["B", 3, 224, 224]})
    imported.module      # builtin.module with func.func @main (in imported.context)
    imported.params      # weights by sdc.parameter name

The importer is a few parts with one job each: `ImportConfig`; `load_model` (bytes, files and
external data, with the directory confinement rules); `GraphIndex`, a read-only view of the
graph that finds dangling references and cycles; and `NodeImporter` (sdc/frontend/onnx_ops.py),
one method per ONNX op, emitting through the frontend-neutral `Builder` (sdc/frontend/builder.py).
The tables they share live in sdc/frontend/onnx_common.py. Unsupported ops are reported
together, before anything is emitted. `OnnxFrontend` is this importer as the `onnx` entry of
`sdc.frontend.FRONTENDS`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from sdc import custom_ops, limits
from sdc.diagnostics import SdcError
from sdc.dialect import attrs as A
from sdc.dialect.ir import MAX_DIM
from sdc.dialect.op_classes import new_context
from sdc.dialect.symbolic import size_symbol
from sdc.dialect.shapes import ShapeError
from sdc.frontend.base import Imported, InputShapes, mesh_dict
from sdc.frontend.builder import Builder, CompileTimeValueError, dims_text, verify_imported
from sdc.frontend.custom import emit_custom
from sdc.frontend.onnx_common import DEFAULT_DOMAINS, ONNX_DTYPES, dtype_name, node_attrs, tensor_value
from sdc.frontend.onnx_ops import NodeImporter
from sdc.frontend.onnx_sharding import annotate, import_shard_node, is_shard_node, node_specs
from sdc.frontend.values import V, is_int, symbol_name
from sdc.mlir import MLIRError, func, ir

__all__ = ["ImportConfig", "ImportedModel", "OnnxFrontend", "ValueNeededError", "import_onnx", "load_model"]


@dataclass(frozen=True)
class ImportConfig:
    """input_shapes: per input, dims to use instead of the model's (ints fix a dim, strings name
    it); bounds such as B=1..64 are the shape solver's business and are ignored here.
    constant_inputs: inputs whose values are fixed at compile time (they become initializers):
    how a caller specializes a model whose shapes depend on input values."""

    input_shapes: dict[str, list] = field(default_factory=dict)
    constant_inputs: dict[str, Any] = field(default_factory=dict)
    entry_name: str = "main"
    mesh: dict[str, int] | None = None  # the device mesh, to read ONNX multi-device sharding annotations


@dataclass
class ImportedModel:
    module: ir.Operation
    context: ir.Context
    params: dict[str, Any]
    input_names: list[str]
    output_names: list[str]
    source: str = "<model>"


class ValueNeededError(SdcError):
    """The model's shapes depend on an input's value; compile with that input in `constant_inputs`."""


# ---------------------------------------------------------------- loading


def load_model(model: onnx.ModelProto | str | os.PathLike) -> tuple[onnx.ModelProto, str]:
    """Parse a model (proto or path), with external data confined to the model's directory."""
    if isinstance(model, onnx.ModelProto):
        check_text(model)
        return model, "<model>"
    if not isinstance(model, (str, os.PathLike)):
        raise SdcError(f"cannot import a {type(model).__name__} as an ONNX model (give a path or an onnx.ModelProto)")
    path = Path(model)
    if not path.exists():
        raise SdcError(f"cannot open '{path}': no such file")
    if path.is_dir():
        raise SdcError(f"cannot open '{path}': is a directory")
    data = path.read_bytes()
    if not data:
        raise SdcError(f"'{path}' is empty, not an ONNX model")
    try:
        proto = onnx.ModelProto()
        proto.ParseFromString(data)
    except Exception as e:  # protobuf's DecodeError and friends
        raise SdcError(f"'{path}' is not a valid ONNX model (cannot parse: {type(e).__name__})") from None
    if not proto.HasField("graph") or (not proto.graph.node and not proto.graph.output):
        raise SdcError(f"'{path}' is not a valid ONNX model (no graph)")
    check_text(proto)
    _load_external_data(proto, path.parent)
    return proto, str(path)


def check_text(message, where: str = "model") -> None:
    """Every string field of the model is UTF-8 text. Protobuf hands back `bytes` for a string
    field that is not, and every name (node, value, dim, attribute) is used as text later; one
    check here, with the field's path, instead of a crash wherever a name is first used."""
    for desc, value in message.ListFields():
        if desc.type == desc.TYPE_MESSAGE:
            if desc.is_repeated:
                for i, item in enumerate(value):
                    check_text(item, f"{where}.{desc.name}[{i}]")
            else:
                check_text(value, f"{where}.{desc.name}")
        elif desc.type == desc.TYPE_STRING:
            items = value if desc.is_repeated else [value]
            for item in items:
                if not isinstance(item, str):
                    shown = bytes(item)[:40].decode("utf-8", "backslashreplace")
                    raise SdcError(f"{where}.{desc.name} is not UTF-8 text: '{shown}'")


def _freeze_inputs(proto: onnx.ModelProto, values: dict[str, Any]) -> onnx.ModelProto:
    frozen = onnx.ModelProto()
    frozen.CopyFrom(proto)
    names = {i.name for i in frozen.graph.input}
    for name, value in values.items():
        if name not in names:
            raise SdcError(f"constant input '{name}' is not a model input")
        frozen.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    return frozen


def _load_external_data(proto: onnx.ModelProto, base: Path) -> None:
    base = base.resolve()
    for tensor in _all_tensors(proto.graph):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in tensor.external_data}
        location = info.get("location", "")
        target = _confined(base, location, tensor.name)
        tensor.raw_data = _read_external(target, info, tensor.name, location)
        tensor.data_location = onnx.TensorProto.DEFAULT
        del tensor.external_data[:]


def _read_external(target: Path, info: dict[str, str], tensor: str, location: str) -> bytes:
    """A tensor's external bytes: offset and length checked against the file's size and the
    allocation limit before reading, then read in bounded chunks."""
    def number(key: str) -> int | None:
        text = info.get(key)
        if text in (None, ""):
            return None
        try:
            value = int(text)
        except ValueError:
            raise SdcError(f"tensor '{tensor}': external data {key} '{text}' is not an integer") from None
        if value < 0:
            raise SdcError(f"tensor '{tensor}': external data {key} {value} is negative")
        return value

    offset, length = number("offset") or 0, number("length")
    try:
        size = target.stat().st_size
        if offset > size:
            raise SdcError(f"tensor '{tensor}': external data offset {offset} is past the end of '{location}' "
                           f"({size} bytes)")
        if length is None:
            length = size - offset
        if offset + length > size:
            raise SdcError(f"tensor '{tensor}': external data declares {length} bytes at offset {offset}, "
                           f"'{location}' has {size} bytes")
        limits.check_alloc(length, f"tensor '{tensor}' (external data)")
        chunks = []
        with open(target, "rb") as f:
            f.seek(offset)
            left = length
            while left:
                chunk = f.read(min(left, limits.READ_CHUNK))
                if not chunk:
                    raise SdcError(f"tensor '{tensor}': external data '{location}' ended early")
                chunks.append(chunk)
                left -= len(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise SdcError(f"tensor '{tensor}': cannot read external data '{location}': {e.strerror}") from None


def _confined(base: Path, location: str, tensor: str) -> Path:
    if not location:
        raise SdcError(f"tensor '{tensor}': external data has no location")
    if os.path.isabs(location) or location.startswith(("/", "\\")):
        raise SdcError(f"tensor '{tensor}': external data path '{location}' is absolute; it must be "
                       "relative to the model's directory")
    if ".." in Path(location).parts:
        raise SdcError(f"tensor '{tensor}': external data path '{location}' leaves the model's directory")
    target = (base / location).resolve()
    if base not in target.parents and target != base:
        raise SdcError(f"tensor '{tensor}': external data path '{location}' leaves the model's directory "
                       "(through a symlink)")
    if not target.is_file():
        raise SdcError(f"tensor '{tensor}': external data file '{location}' does not exist")
    return target


def _all_tensors(graph: onnx.GraphProto):
    yield from graph.initializer
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                yield a.t
            elif a.type == onnx.AttributeProto.GRAPH:
                yield from _all_tensors(a.g)


# ---------------------------------------------------------------- the graph, read-only


class GraphIndex:
    """Names, producers and a topological order of one graph; reports what does not connect."""

    def __init__(self, graph: onnx.GraphProto):
        self.graph = graph
        self.initializers = {t.name: t for t in graph.initializer}
        self.inputs = [i for i in graph.input if i.name not in self.initializers]
        self.outputs = list(graph.output)
        self.value_info = {vi.name: vi for vi in list(graph.value_info) + list(graph.output) + list(graph.input)}
        self.node_names = [_node_label(n, i) for i, n in enumerate(graph.node)]
        self.order = self._topological_order()

    def _topological_order(self) -> list[int]:
        produced_by: dict[str, int] = {}
        for i, node in enumerate(self.graph.node):
            for out in node.output:
                if out:
                    produced_by[out] = i
        available = set(self.initializers) | {i.name for i in self.graph.input} | {""}
        problems = []
        for i, node in enumerate(self.graph.node):
            for name in node.input:
                if name not in available and name not in produced_by:
                    problems.append(f"node '{self.node_names[i]}' ({node.op_type}) reads '{name}', which no node, "
                                    "input or initializer produces")
        for k, out in enumerate(self.outputs):
            if not out.name:  # '' is "omitted" for node inputs, never a name a graph output can have
                problems.append(f"graph output #{k} has an empty name")
            elif out.name not in available and out.name not in produced_by:
                problems.append(f"graph output '{out.name}' is produced by no node, input or initializer")
        if problems:
            raise SdcError(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
        # Kahn's algorithm over node dependencies; nodes are usually already sorted. A node with a
        # subgraph (If, Loop, Scan) also depends on what its body reads from the enclosing graph.
        deps = []
        for node in self.graph.node:
            reads = set(node.input)
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    reads |= _outer_names(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    for g in a.graphs:
                        reads |= _outer_names(g)
            deps.append({produced_by[n] for n in reads if n in produced_by})
        users: dict[int, list[int]] = {}
        for i, d in enumerate(deps):
            for j in d:
                users.setdefault(j, []).append(i)
        pending = [len(d) for d in deps]
        ready = [i for i, p in enumerate(pending) if p == 0]
        order = []
        while ready:
            i = ready.pop(0)
            order.append(i)
            for u in users.get(i, []):
                pending[u] -= 1
                if pending[u] == 0:
                    ready.append(u)
        if len(order) != len(deps):
            stuck = [self.node_names[i] for i, p in enumerate(pending) if p > 0]
            raise SdcError(f"the graph has a cycle through node(s) {', '.join(repr(s) for s in stuck[:5])}"
                           + (" ..." if len(stuck) > 5 else ""))
        return order


def _outer_names(graph: onnx.GraphProto) -> set[str]:
    """Names a subgraph (or one nested in it) reads from its enclosing scopes."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    used: set[str] = set()
    for node in graph.node:
        used |= {x for x in node.input if x and x not in defined}
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                used |= _outer_names(a.g) - defined
        defined |= set(node.output)
    return used


def _node_label(node: onnx.NodeProto, index: int) -> str:
    return node.name or f"{node.op_type}_{index}"


# ---------------------------------------------------------------- import


def model_opset(model: onnx.ModelProto) -> int:
    for o in model.opset_import:
        if o.domain in DEFAULT_DOMAINS:
            return o.version
    return 1


def custom_onnx_name(node: onnx.NodeProto) -> str:
    """A custom-domain node's name in sdc.custom_op's registry: `domain::op_type`."""
    return f"{node.domain}::{node.op_type}"


def check_opset(model: onnx.ModelProto) -> int:
    """The model's default-domain opset, which must be one ONNX defines (every op's schema and
    every opset-dependent convention in the op methods is looked up by it)."""
    opset = model_opset(model)
    newest = onnx.defs.onnx_opset_version()
    if not 1 <= opset <= newest:
        raise SdcError(f"the model imports ONNX opset {opset}; opsets are 1..{newest} (onnx {onnx.__version__})")
    return opset


def check_supported(model: onnx.ModelProto, index: GraphIndex) -> None:
    """One error listing every unsupported (op_type, opset, node) in the model."""
    opset = check_opset(model)
    missing = []
    for i, node in enumerate(index.graph.node):
        if is_shard_node(node):
            continue
        if node.domain not in DEFAULT_DOMAINS:
            if not custom_ops.is_registered(custom_onnx_name(node)):
                missing.append(f"{node.domain}.{node.op_type} (domain '{node.domain}', node '{index.node_names[i]}'; "
                               f"register it with sdc.custom_op('{custom_onnx_name(node)}', ...))")
        elif not NodeImporter.supports(node.op_type):
            missing.append(f"{node.op_type} (opset {opset}, node '{index.node_names[i]}')")
    if missing:
        listing = "; ".join(missing[:50]) + (f"; ... {len(missing) - 50} more" if len(missing) > 50 else "")
        raise SdcError(f"unsupported ONNX op{'s' if len(missing) > 1 else ''} ({len(missing)}): {listing}")


def import_onnx(model, input_shapes: dict[str, list] | None = None, config: ImportConfig | None = None, *,
                constant_inputs: dict[str, Any] | None = None, mesh: dict[str, int] | None = None) -> ImportedModel:
    """Import an ONNX ModelProto or file into the sdc dialect (`mesh`: see sdc/frontend/onnx_sharding.py)."""
    config = config or ImportConfig(input_shapes=dict(input_shapes or {}), constant_inputs=dict(constant_inputs or {}),
                                    mesh=dict(mesh) if mesh else None)
    proto, source = load_model(model)
    if config.constant_inputs:
        proto = _freeze_inputs(proto, config.constant_inputs)
    index = GraphIndex(proto.graph)
    check_supported(proto, index)
    unknown = [n for n in config.input_shapes if n not in {i.name for i in index.inputs}]
    if unknown:
        names = ", ".join(f"'{i.name}'" for i in index.inputs)
        raise SdcError(f"--input-shape names '{unknown[0]}', which is not a model input (inputs: {names})")
    ctx = new_context()
    with ctx, ir.Location.unknown():
        try:
            return _Importer(proto, index, config, ctx, source).run()
        except ShapeError as e:  # outside a node (the signature, the outputs): the model's own declarations
            raise SdcError(str(e)) from None


class _Importer:
    """One import: the entry function's signature from the graph's inputs, then each node in
    topological order through the NodeImporter, then the results."""

    def __init__(self, model, index: GraphIndex, config: ImportConfig, ctx, source: str):
        self.model, self.index, self.config, self.ctx, self.source = model, index, config, ctx, source
        self.params: dict[str, Any] = {}
        self.values: dict[str, V] = {}
        self._current_name = "const"
        self.builder = Builder(self.params, self._param_name)

    def _param_name(self) -> str:
        return symbol_name(self._current_name) if self._current_name else "const"

    def run(self) -> ImportedModel:
        file_name = Path(self.source).name
        file_loc = ir.Location.file(file_name, 0, 0)
        with ir.Location.unknown():
            module = ir.Module.create(file_loc)
        arg_types, arg_attrs = [], []
        for inp in self.index.inputs:
            dtype, sym = self._input_signature(inp)
            arg_types.append(self.builder.tensor_type(sym, dtype))
            dims = [d if is_int(d) else str(d) for d in sym]
            arg_attrs.append(ir.DictAttr.get({"sdc.name": ir.StringAttr.get(inp.name), "sdc.dims": A.dims(dims)}))
            self.values[inp.name] = V(dtype, sym)
        with ir.InsertionPoint(module.body), file_loc:
            fn = func.FuncOp(self.config.entry_name, (arg_types, []))
            fn.attributes["arg_attrs"] = ir.ArrayAttr.get(arg_attrs)
            block = fn.add_entry_block()
        for inp, arg in zip(self.index.inputs, block.arguments):
            self.values[inp.name].value = arg
        for name, tensor in self.index.initializers.items():
            self.values[name] = self._initializer(tensor)
        importer = NodeImporter(self.builder, self.values, model_opset(self.model))
        with ir.InsertionPoint(block):
            for i in self.index.order:
                self._import_node(importer, i, file_name)
            results, result_attrs = [], []
            self.builder.loc = file_loc
            for out in self.index.outputs:
                self._current_name = out.name
                v = self.values[out.name]
                results.append(self.builder.tensor(v))
                named = {"sdc.name": ir.StringAttr.get(out.name)}
                dims = dims_text(v.sym)
                if dims is not None:
                    named["sdc.dims"] = A.dims(dims)
                result_attrs.append(ir.DictAttr.get(named))
            func.ReturnOp(results, loc=file_loc)
        fn.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(arg_types, [r.type for r in results]))
        fn.attributes["res_attrs"] = ir.ArrayAttr.get(result_attrs)
        if self.builder.guards:  # what the import assumed about the dims, for the shape pass and the runtime
            fn.attributes["sdc.guards"] = ir.ArrayAttr.get([A.guard(c, why) for c, why in self.builder.guards])
        op = module.operation
        verify_imported(op)
        return ImportedModel(op, self.ctx, self.params, [i.name for i in self.index.inputs],
                             [o.name for o in self.index.outputs], self.source)

    def _import_node(self, importer: NodeImporter, i: int, file_name: str) -> None:
        """Node i at `loc("<node name>"("<file>":<i + 1>:0))`, its errors naming the node."""
        node = self.index.graph.node[i]
        label = self.index.node_names[i]
        self._current_name = node.output[0] if node.output else label
        with self.builder.at(Builder.location(label, file_name, i + 1)):
            try:
                inputs = [self.values[n] if n else None for n in node.input]
                specs = node_specs(node)
                if specs:
                    inputs = [annotate(self.builder, v, specs.get(n), self.config.mesh, label) if v else v
                              for n, v in zip(node.input, inputs)]
                if is_shard_node(node):
                    outs = import_shard_node(self.builder, node, inputs, label)
                elif node.domain not in DEFAULT_DOMAINS:  # registered: check_supported said so
                    outs = emit_custom(self.builder, custom_onnx_name(node), inputs, node_attrs(node))
                else:
                    outs = importer.import_node(node, inputs)
                if specs:
                    outs = [annotate(self.builder, v, specs.get(n), self.config.mesh, label)
                            for n, v in zip(node.output, outs)]
            except CompileTimeValueError as e:
                raise ValueNeededError(f"node '{label}' ({node.op_type}): {e}") from None
            except (ShapeError, ValueError) as e:
                raise SdcError(f"node '{label}' ({node.op_type}): {e}") from None
            except SdcError as e:  # a limit (sdc/limits.py) or a nested check: say which node
                if type(e) is not SdcError or str(e).startswith("node '"):
                    raise
                raise SdcError(f"node '{label}' ({node.op_type}): {e}") from None
            except MLIRError as e:
                detail = "; ".join(d.message for d in e.error_diagnostics) or str(e)
                raise SdcError(f"node '{label}' ({node.op_type}): {detail}") from None
        named = [k for k, name in enumerate(node.output) if name]
        if named and max(named) >= len(outs):  # e.g. a Split whose split sizes name fewer parts than outputs
            raise SdcError(f"node '{label}' ({node.op_type}) has {len(node.output)} outputs but computes "
                           f"{len(outs)}")
        for name, v in zip(node.output, outs):
            if name:
                self.values[name] = v

    def _input_signature(self, inp: onnx.ValueInfoProto) -> tuple[str, tuple]:
        ttype = inp.type.tensor_type
        if not inp.type.HasField("tensor_type"):
            raise SdcError(f"input '{inp.name}' is not a tensor (sequences, maps and optionals are unsupported)")
        if ttype.elem_type not in ONNX_DTYPES:
            raise SdcError(f"input '{inp.name}' has unsupported element type {dtype_name(ttype.elem_type)}")
        dims = []
        for i, d in enumerate(ttype.shape.dim):
            if d.HasField("dim_value") and d.dim_value >= MAX_DIM:
                raise SdcError(f"input '{inp.name}' dim {i} is {d.dim_value}: too large for a tensor dim (sizes are "
                               "0 to 2^62)")
            if d.HasField("dim_value") and d.dim_value >= 0:
                dims.append(int(d.dim_value))
            elif d.HasField("dim_param") and d.dim_param:
                dims.append(size_symbol(symbol_name(d.dim_param)))
            else:
                dims.append(size_symbol(symbol_name(f"{inp.name}_{i}")))
        if inp.name in self.config.input_shapes:
            given = list(self.config.input_shapes[inp.name])
            if ttype.HasField("shape") and len(given) != len(dims):
                raise SdcError(f"--input-shape for '{inp.name}' has {len(given)} dims, the model's input has "
                               f"rank {len(dims)}")
            dims = []
            for g in given:
                if isinstance(g, int) or (isinstance(g, str) and g.isdigit()):
                    dims.append(int(g))
                else:
                    dims.append(size_symbol(symbol_name(str(g))))
        elif not ttype.HasField("shape"):
            raise SdcError(f"input '{inp.name}' has no shape in the model; give one with --input-shape "
                           f"{inp.name}=DIMS")
        return ONNX_DTYPES[ttype.elem_type], tuple(dims)

    def _initializer(self, tensor: onnx.TensorProto) -> V:
        v = tensor_value(tensor, f"initializer '{tensor.name}'")
        v.name = tensor.name
        return v




class OnnxFrontend:
    """The `onnx` frontend: an ONNX file or `onnx.ModelProto`, weights included."""

    name = "onnx"

    def import_model(self, model: Any, *, input_shapes: InputShapes | None = None,
                     params_file: str | os.PathLike | None = None, mesh: Any = None) -> Imported:
        """Dims lists in `input_shapes` shape the inputs here; symbol values and ranges are kept in
        the options for the shape pass."""
        if params_file is not None:
            raise SdcError("parameter files apply to .mlir models; an ONNX model carries its own weights")
        source = Path(model).name if isinstance(model, (str, os.PathLike)) else f"<{type(model).__name__}>"
        dims = {k: list(v) for k, v in (input_shapes or {}).items() if not isinstance(v, (str, int))}
        imported = import_onnx(str(model) if isinstance(model, os.PathLike) else model, dims or None,
                               mesh=mesh_dict(mesh))
        shapes = ({k: v if isinstance(v, (str, int)) else list(v) for k, v in input_shapes.items()}
                  if input_shapes else None)
        return Imported(imported.module, dict(imported.params),
                        {"source": source, "frontend": self.name, "input_shapes": shapes})
