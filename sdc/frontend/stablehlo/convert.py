"""StableHLO text -> the sdc dialect, by the MLIR bindings' dialect conversion.

    imported = import_stablehlo(text, source="model.mlir")

The steps, each a small function:
1. `parse`: the text in an sdc context with the StableHLO dialect registered; private functions
   (JAX's `@relu`, `jax.export`'s wrapped main) are inlined, so one entry function is left.
2. `check_supported`: every StableHLO op of the entry function against the rule table
   (sdc/frontend/stablehlo/patterns.py): ONE error listing every op that cannot be converted,
   with its location, before anything is converted.
3. `Converter.run`: the entry's arguments get their names and symbolic dims (`sdc.name`,
   `sdc.dims`); JAX's dimension-variable arguments (`jax.global_constant = "b"`) become the
   symbols themselves; then `apply_partial_conversion` with a ConversionTarget for which the
   StableHLO dialect is illegal and sdc/func are legal, one conversion pattern per op name.
4. The compile-time values the patterns materialized only to satisfy the driver (folded
   constants, shape vectors) are erased when nothing uses them; the function type is rebuilt.

A pattern keeps what it knows about each value it produced (a `V`: run-time, constant or
symbolic) in `Converter.values`, keyed by the IR value the driver hands to the next pattern.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sdc.diagnostics import SdcError
from sdc.dialect import attrs as A
from sdc.dialect.dense import DenseValue
from sdc.dialect.ir import entry_function, tensor_spec
from sdc.dialect.builder import create
from sdc.dialect.op_classes import new_context
from sdc.dialect.opdef import OPS
from sdc.dialect.shapes import DYN, ShapeError
from sdc.dialect.symbolic import size_symbol, to_text
from sdc.dialect.symexpr import SymExprError
from sdc.frontend.builder import Builder, CompileTimeValueError, dims_text
from sdc.frontend.stablehlo.patterns import (COMPOSITES, RULES, Rewrite, Unsupported, composite_name, source_line,
                                             symbolic_eval)
from sdc.frontend.values import V, is_int, symbol_name
from sdc.mlir import MLIRError, PassManager, func, ir, rewrite, stablehlo

__all__ = ["ImportedStablehlo", "StablehloInput", "check_supported", "import_stablehlo", "is_stablehlo", "parse"]

_DIM_VAR = "jax.global_constant"  # how jax.jit(...).lower marks a dimension variable's argument
_RESULT_NAME = "jax.result_info"


@dataclass(frozen=True)
class StablehloInput:
    """What the caller knows about one entry argument: its name and its dims (ints and symbol
    names; None keeps the IR's static dims and names each `?` `<name>_<i>`)."""

    name: str
    dims: tuple | None = None


@dataclass
class ImportedStablehlo:
    module: ir.Operation
    context: ir.Context
    params: dict[str, Any]
    input_names: list[str]
    output_names: list[str]
    symbols: list[str] = field(default_factory=list)  # dimension variables, in argument order


def is_stablehlo(text: str) -> bool:
    """Whether IR text holds StableHLO (or chlo) ops (the `mlir` frontend hands such files over)."""
    return re.search(r"\b(?:stablehlo|chlo)\.[a-z_]+\b", text) is not None


# ---------------------------------------------------------------- parse


_CHLO_OP = re.compile(r"^\s*(?:%[^=]*=\s*)?\"?(chlo\.[a-z_]+)", re.MULTILINE)


def _refuse_chlo(text: str, source: str) -> None:
    """The bindings have no chlo dialect: `jit(f).lower(...).as_text()` writes chlo ops (erf,
    top_k, sinh, ...) that cannot be parsed. jax.export writes them as `stablehlo.composite`s,
    which are read; say so, listing the chlo ops and their lines, instead of a parse error."""
    found: dict[str, int] = {}
    for m in _CHLO_OP.finditer(text):
        found.setdefault(m.group(1), text.count("\n", 0, m.start()) + 1)
    if found:
        listing = ", ".join(f"{name} at line {line}" for name, line in found.items())
        raise SdcError(f"'{source}' holds chlo ops ({listing}): write the module with jax.export "
                       "(jax.export.export(jax.jit(f))(*args).mlir_module(), or exp.serialize() into a "
                       ".jaxexport file), which writes them as stablehlo.composite ops sdc reads")


def expand_composites(module: ir.Module) -> None:
    """Replace every `stablehlo.composite` that no rule converts by a call of its decomposition
    function, so that the inliner turns it into the StableHLO ops it stands for."""
    found = []

    def visit(op):
        if op.name == "stablehlo.composite" and composite_name(op) not in COMPOSITES:
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for op in found:
        callee = ir.FlatSymbolRefAttr(op.attributes["decomposition"]).value
        with ir.InsertionPoint(op), op.location:
            call = func.CallOp([r.type for r in op.results], callee, list(op.operands))
        for old, new in zip(op.results, call.results):
            old.replace_all_uses_with(new)
        op.erase()


def parse(text: str, source: str) -> tuple[ir.Context, ir.Module]:
    """The module in an sdc context that also knows StableHLO, composites without a rule expanded
    and private functions inlined."""
    ctx = new_context()
    with ctx, ir.Location.unknown():
        stablehlo().register_dialect(ctx)
        try:
            module = ir.Module.parse(text)
        except MLIRError as e:
            _refuse_chlo(text, source)
            detail = "; ".join(_where_text(d.location) + d.message for d in e.error_diagnostics) or str(e)
            raise SdcError(f"cannot parse '{source}' as StableHLO: {detail}") from None
        expand_composites(module)
        try:
            PassManager.parse("builtin.module(inline,symbol-dce)").run(module.operation)
        except MLIRError as e:
            raise SdcError(f"cannot inline the functions of '{source}': {e}") from None
    return ctx, module


# ---------------------------------------------------------------- what cannot be converted


_where = source_line  # `file:line` of a location, for messages


def _where_text(loc) -> str:
    try:
        return _where(loc) + ": "
    except Exception:  # a diagnostic without a location
        return ""


def check_supported(fn, source: str) -> None:
    """One SdcError listing every op of the entry function that no rule converts (or whose rule
    says this instance cannot be), each with its location."""
    missing: list[str] = []
    for op in fn.regions[0].blocks[0].operations:
        op = op.operation
        if op.name in ("func.return",):
            continue
        rule = RULES.get(op.name)
        if rule is None:
            missing.append(f"{op.name} at {_where(op.location)}")
            continue
        reason = rule.check(op) if rule.check else None
        if reason:
            missing.append(f"{op.name} ({reason}) at {_where(op.location)}")
    if missing:
        listing = "; ".join(missing[:50]) + (f"; ... {len(missing) - 50} more" if len(missing) > 50 else "")
        raise SdcError(f"unsupported StableHLO op{'s' if len(missing) > 1 else ''} in '{source}' "
                       f"({len(missing)}): {listing}")


# ---------------------------------------------------------------- convert


class Converter:
    """One conversion of an entry function (see the module docstring)."""

    def __init__(self, ctx: ir.Context, module: ir.Module, fn, source: str):
        self.ctx, self.module, self.fn, self.source = ctx, module, fn, source
        self.params: dict[str, Any] = {}
        self.values: dict[ir.Value, V] = {}
        self.builder = Builder(self.params, lambda: "const")
        self.rewrite = Rewrite(self.builder, self._outer_value)
        # What each converted StableHLO op's results are, keyed by the original results: the ops
        # inside a while/case region read values defined outside it by their original IR value.
        self.originals: dict[ir.Value, V] = {}
        self.errors: list[str] = []
        self._keep: list[Any] = []  # the bindings do not own the Python callables they are given

    def run(self, inputs: list[StablehloInput] | None) -> ImportedStablehlo:
        block = self.fn.regions[0].blocks[0]
        data_args, symbols = self._bind_arguments(block, inputs)
        with self.ctx, ir.Location.unknown():
            self._convert()
            self._erase_dead(block)
            for i in reversed(range(len(block.arguments))):
                if i not in data_args:
                    if list(block.arguments[i].uses):
                        raise SdcError(f"dimension variable '{symbols[i]}' is used as a run-time value")
                    block.erase_argument(i)
            names = self._finish_signature(block, data_args)
            try:
                self.module.operation.verify()
            except MLIRError as e:
                detail = "; ".join(d.message for d in e.error_diagnostics) or str(e)
                raise SdcError(f"the IR converted from '{self.source}' does not verify: {detail}") from None
        used = {ir.StringAttr(op.attributes["name"]).value for op in block.operations
                if op.operation.name == "sdc.parameter"}
        params = {k: v for k, v in self.params.items() if k in used}
        return ImportedStablehlo(self.module.operation, self.ctx, params, [data_args[i][0] for i in sorted(data_args)],
                                 names, [s for s in symbols.values()])

    # ------------------------------------------------------------ arguments

    def _bind_arguments(self, block, inputs: list[StablehloInput] | None) -> tuple[dict[int, tuple], dict[int, str]]:
        """{arg index: (name, dims)} of the data arguments; {arg index: symbol} of the dim variables."""
        arg_attrs = self._arg_attrs()
        data: dict[int, tuple] = {}
        symbols: dict[int, str] = {}
        for i, arg in enumerate(block.arguments):
            attrs = arg_attrs[i]
            if _DIM_VAR in attrs:
                name = symbol_name(ir.StringAttr(attrs[_DIM_VAR]).value)
                symbols[i] = name
                v = _symbolic_scalar(size_symbol(name))
                v.dtype = tensor_spec(arg.type).dtype
                self.values[arg] = v
        positions = [i for i in range(len(block.arguments)) if i not in symbols]
        if inputs is not None and len(inputs) != len(positions):
            raise SdcError(f"'{self.source}' has {len(positions)} inputs, the caller describes {len(inputs)}")
        for k, i in enumerate(positions):
            arg = block.arguments[i]
            spec = tensor_spec(arg.type)
            given = inputs[k] if inputs is not None else StablehloInput(f"arg{k}")
            dims = list(given.dims) if given.dims is not None else [
                d if d is not DYN else f"{symbol_name(given.name)}_{j}" for j, d in enumerate(spec.shape)]
            if len(dims) != len(spec.shape):
                raise SdcError(f"input '{given.name}' has rank {len(spec.shape)}, the caller gives {len(dims)} dims")
            sym = tuple(int(d) if is_int(d) else size_symbol(symbol_name(str(d))) for d in dims)
            self.values[arg] = V(spec.dtype, sym, value=arg)
            data[i] = (given.name, [d if is_int(d) else str(d) for d in sym])
        return data, symbols

    def _arg_attrs(self) -> list[dict[str, Any]]:
        n = len(self.fn.regions[0].blocks[0].arguments)
        if "arg_attrs" not in self.fn.attributes:
            return [{} for _ in range(n)]
        out = []
        for d in ir.ArrayAttr(self.fn.attributes["arg_attrs"]):
            d = ir.DictAttr(d)
            out.append({d[j].name: d[j].attr for j in range(len(d))})
        return out

    # ------------------------------------------------------------ the dialect conversion

    def _convert(self) -> None:
        type_converter = rewrite.TypeConverter()

        def same_type(t):
            return t

        type_converter.add_conversion(same_type)
        patterns = rewrite.RewritePatternSet()
        for name in {op.operation.name for op in self.fn.regions[0].blocks[0].operations}:
            if name in RULES:
                pattern = self._pattern(name)
                patterns.add_conversion(name, pattern, type_converter)
                self._keep.append(pattern)
        self._keep += [type_converter, same_type]
        target = rewrite.ConversionTarget()
        target.add_legal_dialect("sdc", "func")
        target.add_legal_op("builtin.module")
        target.add_illegal_dialect("stablehlo")
        config = rewrite.ConversionConfig()
        config.build_materializations = False
        try:
            rewrite.apply_partial_conversion(self.module.operation, target, patterns.freeze(), config)
        except MLIRError as e:
            detail = "; ".join(d.message for d in e.error_diagnostics) or str(e)
            raise SdcError(self.errors[0] if self.errors else f"converting '{self.source}' failed: {detail}") from None
        finally:
            self.originals.clear()  # the original ops are erased now
        if self.errors:
            raise SdcError(self.errors[0])

    def _outer_value(self, value) -> V:
        found = self.values.get(value)
        if found is None:
            found = self.originals.get(value)
        if found is None:
            raise Unsupported("a region reads a value that was not converted before it")
        return found

    def _pattern(self, name: str):
        rule = RULES[name]

        def convert(op, adaptor, type_converter, rewriter) -> bool:
            """Upstream convention: a falsy return means the pattern matched."""
            op = op.operation
            where = _where(op.location)
            try:
                with rewriter.ip, self.builder.at(op.location):
                    ins = [self.values[v] for v in adaptor.operands]
                    folded = symbolic_eval(self.rewrite, op, ins)
                    outs = [folded] if folded is not None else rule.convert(self.rewrite, op, ins)
                    results = [self._materialize(v, r.type) for v, r in zip(outs, op.results)]
                    self.originals.update(zip(op.results, outs))
            except (Unsupported, CompileTimeValueError, ShapeError, ValueError, KeyError, MLIRError) as e:
                message = "; ".join(d.message for d in e.error_diagnostics) if isinstance(e, MLIRError) else str(e)
                self.errors.append(f"{name} at {where}: {message}")
                return True
            if results:
                rewriter.replace_op(op, results)
            else:
                rewriter.erase_op(op)
            return False

        convert.__name__ = f"convert_{name.split('.')[1]}"
        return convert

    def _materialize(self, v: V, result_type: ir.Type) -> ir.Value:
        """An IR value for `v` that the driver can hand to the op's users.

        Run-time values are what they are. A constant becomes `sdc.constant`/`sdc.parameter`.
        A symbolic shape vector becomes `sdc.dim_values` (cast and reshaped to the StableHLO
        type); the users read its dims from `values`, so it is erased later unless one of them
        needs it at run time."""
        spec = tensor_spec(result_type)
        if v.value is not None:
            value = v.value
        elif v.is_symbolic:
            value = self._symbolic_placeholder(v, spec)
        else:
            if v.dtype != spec.dtype and v.const is not None:
                v = Builder.const(v.const, spec.dtype)
            value = self.builder.tensor(v)
        self.values[value] = v
        return value

    def _symbolic_placeholder(self, v: V, spec) -> ir.Value:
        flat = [d for d in np.asarray(v.const).reshape(-1).tolist()]
        loc = self.builder.loc
        try:
            dims = [int(d) if is_int(d) else to_text(d) for d in flat]
            value = create("dim_values", [], {"dims": dims}, loc=loc).results[0]
        except (SymExprError, ValueError, TypeError):
            # Not a dim expression (a max of two dims): usable at compile time only.
            zeros = np.zeros(len(flat), dtype=np.int64)
            value = create("constant", [], {"value": DenseValue(zeros, "i64")}, loc=loc).results[0]
        if spec.dtype != "i64":
            value = create("cast", [value], {"dtype": spec.dtype}, loc=loc).results[0]
        if list(spec.shape) != [len(flat)]:
            value = create("reshape", [value], {"shape": list(spec.shape)}, loc=loc).results[0]
        return value

    # ------------------------------------------------------------ after the conversion

    @staticmethod
    def _erase_dead(block) -> None:
        """Erase pure sdc ops nothing uses (materialized constants and shape vectors)."""
        changed = True
        while changed:
            changed = False
            for op in reversed(list(block.operations)):
                op = op.operation
                if not op.name.startswith("sdc."):
                    continue
                opdef = OPS.get(op.name[4:])
                if opdef is None or not opdef.pure or any(list(r.uses) for r in op.results):
                    continue
                op.erase()
                changed = True

    def _finish_signature(self, block, data_args: dict[int, tuple]) -> list[str]:
        ret = list(block.operations)[-1]
        results = list(ret.operands)
        old_res_attrs = list(ir.ArrayAttr(self.fn.attributes["res_attrs"])) if "res_attrs" in self.fn.attributes else []
        names, res_attrs = [], []
        for i, r in enumerate(results):
            name = f"out{i}" if len(results) > 1 else "out"
            if i < len(old_res_attrs):
                d = ir.DictAttr(old_res_attrs[i])
                if _RESULT_NAME in d:
                    text = ir.StringAttr(d[_RESULT_NAME]).value
                    if text and text != "result":
                        name = text
            names.append(name)
            entry = {"sdc.name": ir.StringAttr.get(name)}
            v = self.values.get(r)
            dims = dims_text(v.sym) if v is not None else None
            if dims is not None:
                entry["sdc.dims"] = A.dims(dims)
            res_attrs.append(ir.DictAttr.get(entry))
        arg_attrs = [ir.DictAttr.get({"sdc.name": ir.StringAttr.get(data_args[i][0]),
                                      "sdc.dims": A.dims(data_args[i][1])}) for i in sorted(data_args)]
        self.fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
            [a.type for a in block.arguments], [r.type for r in results]))
        self.fn.attributes["arg_attrs"] = ir.ArrayAttr.get(arg_attrs)
        self.fn.attributes["res_attrs"] = ir.ArrayAttr.get(res_attrs)
        self.fn.attributes["sym_name"] = ir.StringAttr.get("main")
        if "sym_visibility" in self.fn.attributes:
            del self.fn.attributes["sym_visibility"]
        for key in [str(a) for a in self.module.operation.attributes]:
            if key.startswith("mhlo.") or key == "sym_name":
                del self.module.operation.attributes[key]
        return names


def _symbolic_scalar(d) -> V:
    from sdc.frontend.values import const_value

    return const_value(np.array(d, dtype=object))




def _drop_other_functions(module: ir.Module, entry) -> None:
    """After inlining, the functions left besides the entry are the decompositions of composites
    that are converted directly (chlo.erf, chlo.top_k): nothing runs them."""
    for op in list(module.body.operations):
        op = op.operation
        if op.name == "func.func" and op != entry:
            op.erase()


def import_stablehlo(text: str, *, source: str = "<stablehlo>",
                     inputs: list[StablehloInput] | None = None) -> ImportedStablehlo:
    """Convert a StableHLO module (text) to the sdc dialect; `inputs` name and shape the entry's
    data arguments (JAX's lowering knows them; for a file they default to `arg0`, `arg1`, ...)."""
    ctx, module = parse(text, source)
    with ctx, ir.Location.unknown():
        try:
            fn = entry_function(module)
        except SdcError as e:
            raise SdcError(f"'{source}': {e}") from None
        _drop_other_functions(module, fn)
        check_supported(fn, source)
    return Converter(ctx, module, fn, source).run(inputs)
