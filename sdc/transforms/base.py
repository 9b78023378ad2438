"""What every sdc pass shares: options as dataclass fields, diagnostics, and the PassManager hook.

A pass's options are its fields, typed. The compile driver builds pass objects with their values
(sdc.transforms.pipeline.compile_passes); sdc-opt's text form (`sdc-fuse{target=cuda}`) is read
once into the same fields (`from_options`) and written back by `pipeline_text()`, which is what the
manifest records."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, ClassVar

from sdc.diagnostics import DiagnosticSink
from sdc.mlir import ir, rewrite


class PassOptionError(ValueError):
    pass


@dataclass(frozen=True)
class ModulePass:
    """Base of sdc passes. A pass is a frozen dataclass: its fields are its options.

    Subclasses set `name` (the pipeline name, e.g. `sdc-verify`) and `summary` (one line for
    `--list-passes`), and implement `run(module, diag)`. Errors go to `diag` at an op's
    location; if any error was reported the pass fails once, after it finished looking.
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    always_written: ClassVar[tuple[str, ...]] = ()
    """Fields `pipeline_text()` writes even at their default (a target: the text then says which)."""

    def run(self, module: ir.Operation, diag: DiagnosticSink) -> None:
        raise NotImplementedError

    @classmethod
    def from_options(cls, options: dict[str, str]) -> "ModulePass":
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values = {}
        for key, text in options.items():
            field_name = key.replace("-", "_")  # option `input-shape` is field `input_shape`
            if field_name not in fields:
                known = ", ".join(f.replace("_", "-") for f in fields) or "none"
                raise PassOptionError(f"pass '{cls.name}' has no option '{key}' (options: {known})")
            values[field_name] = _convert(cls.name, key, fields[field_name].type, text)
        return cls(**values)

    def pipeline_text(self) -> str:
        """The pass in pipeline text: `name{key=value ...}` with the fields that differ from their
        defaults (and `always_written`); `from_options` reads it back to an equal pass."""
        items = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name not in self.always_written and f.default is not dataclasses.MISSING and value == f.default:
                continue
            items.append(f"{f.name.replace('_', '-')}={_option_text(self.option_text(f.name, value))}")
        return f"{self.name}{{{' '.join(items)}}}" if items else self.name

    def option_text(self, field_name: str, value) -> str:
        """The text of one option's value; a pass whose field holds parsed values overrides it."""
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    def add_to(self, pm, sink: DiagnosticSink) -> None:
        def run(op, pass_) -> None:
            before = len([d for d in sink.diagnostics if d.severity == "error"])
            self.run(op, sink)
            after = len([d for d in sink.diagnostics if d.severity == "error"])
            if after > before:
                pass_.signal_pass_failure()

        pm.add(run, name=self.name, argument=self.name, description=self.summary)


def _option_text(text: str) -> str:
    """Quoted when it holds a separator or an `=` (`input-shape="x=B,3 B=1..64"`), so the option
    reader takes it as one value."""
    return f'"{text}"' if any(ch.isspace() or ch in ",{}=" for ch in text) else text


def _convert(pass_name: str, key: str, annotation, text: str):
    kind = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    try:
        if kind == "bool":
            if text.lower() in ("true", "1", "yes", "on"):
                return True
            if text.lower() in ("false", "0", "no", "off"):
                return False
            raise ValueError(text)
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        return text
    except ValueError:
        raise PassOptionError(f"pass '{pass_name}' option '{key}' expects a {kind}, found '{text}'") from None


# ---------------------------------------------------------------- rewrite patterns

Pattern = Callable[[ir.Operation, "rewrite.PatternRewriter"], bool]


def pattern_set(patterns: dict[str, list[Pattern]]) -> "rewrite.FrozenRewritePatternSet":
    """Build a frozen pattern set from {op name: [pattern, ...]}.

    A pattern here returns True when it rewrote the IR. The upstream driver wants the
    opposite (a falsy value means "matched"), so this is the one place that flips it.
    """
    rps = rewrite.RewritePatternSet()
    for op_name, fns in patterns.items():
        for fn in fns:
            rps.add(op_name, _upstream_convention(fn))
    return rps.freeze()


def _upstream_convention(fn: Pattern):
    def adapted(op, rewriter) -> bool:
        op = op.operation if hasattr(op, "operation") else op
        return not fn(op, rewriter)

    adapted.__name__ = fn.__name__
    return adapted


def walk_ops(root: ir.Operation, prefix: str = "sdc."):
    """Every op under `root` (pre-order) whose name starts with `prefix`."""
    found: list[ir.Operation] = []

    def visit(op):
        op = op.operation if hasattr(op, "operation") else op
        if op.name.startswith(prefix):
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found
