"""ONNX conformance: every node test case the `onnx` package carries, through `sdc.onnx_backend`.

    python -m sdc.conformance onnx [--output docs/onnx-conformance.md] [--filter SUBSTRING] [-j N]

In scope: cases whose inputs and outputs are all plain tensors of float16/32/64, bfloat16,
int8..int64, uint8..uint64 or bool, with every node in the default domain. Each case runs as
onnx's own runner runs it (shapes, dtypes, then `assert_allclose` with the case's rtol/atol)
and is counted passed, failed (ran, wrong answer or crashed) or unsupported (the importer
refused it with a clean error).
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

IN_SCOPE_TYPES = {
    onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16,
    onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
    onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64,
    onnx.TensorProto.BOOL,
}


@dataclass
class Outcome:
    name: str
    op: str
    status: str  # passed | failed | unsupported
    detail: str = ""


def op_of(case) -> str:
    nodes = case.model.graph.node
    return nodes[0].op_type if len(nodes) == 1 else _op_from_name(case.name, nodes)


def _op_from_name(name: str, nodes) -> str:
    types = [n.op_type for n in nodes]
    return collections.Counter(types).most_common(1)[0][0] if types else name


def in_scope(case) -> bool:
    graph = case.model.graph
    for vi in list(graph.input) + list(graph.output):
        if not vi.type.HasField("tensor_type") or vi.type.tensor_type.elem_type not in IN_SCOPE_TYPES:
            return False
    if any(n.domain not in ("", "ai.onnx") for n in graph.node):
        return False
    if any(o.domain not in ("", "ai.onnx") for o in case.model.opset_import):
        return False
    if any(f for f in case.model.functions):
        return False
    return bool(case.data_sets)


def _normalize(x):
    if isinstance(x, onnx.TensorProto):
        return onnx.numpy_helper.to_array(x)
    return x


def compare(ref_outputs, outputs, rtol: float, atol: float) -> None:
    """onnx's runner comparison: same count, shapes and dtypes, then allclose."""
    if len(outputs) != len(ref_outputs):
        raise AssertionError(f"{len(outputs)} outputs, expected {len(ref_outputs)}")
    for i, (out, ref) in enumerate(zip(outputs, ref_outputs)):
        out, ref = np.asarray(out), np.asarray(ref)
        if out.shape != ref.shape:
            raise AssertionError(f"output {i} has shape {out.shape}, expected {ref.shape}")
        if out.dtype != ref.dtype:
            raise AssertionError(f"output {i} has dtype {out.dtype}, expected {ref.dtype}")
        tol = rtol
        if out.dtype.name == "bfloat16":
            tol = max(rtol, 2**-6)
            out, ref = out.astype(np.float32), ref.astype(np.float32)
        np.testing.assert_allclose(out, ref, rtol=tol, atol=atol)


def run_case(case) -> Outcome:
    from sdc import onnx_backend
    from sdc.diagnostics import SdcError

    op = op_of(case)
    try:
        rep = onnx_backend.prepare(case.model)
    except SdcError as e:
        text = e.format()
        status = "unsupported" if "unsupported" in text or "not supported" in text else "failed"
        return Outcome(case.name, op, status, text.splitlines()[0][:300])
    except Exception as e:
        return Outcome(case.name, op, "failed", f"compile crashed: {type(e).__name__}: {e}"[:300])
    try:
        for inputs, ref_outputs in case.data_sets:
            outs = rep.run([_normalize(x) for x in inputs])
            compare([_normalize(x) for x in ref_outputs], outs, case.rtol, case.atol)
    except AssertionError as e:
        return Outcome(case.name, op, "failed", " ".join(str(e).split())[:300])
    except SdcError as e:
        return Outcome(case.name, op, "failed", e.format().splitlines()[0][:300])
    except Exception as e:
        tb = traceback.extract_tb(e.__traceback__)[-1]
        return Outcome(case.name, op, "failed", f"run crashed: {type(e).__name__}: {e} ({Path(tb.filename).name}:{tb.lineno})"[:300])
    return Outcome(case.name, op, "passed")


def _run_by_name(name: str) -> Outcome:
    case = _cases()[name]
    return run_case(case)


_CASES = None


def _cases() -> dict:
    global _CASES
    if _CASES is None:
        import warnings

        from onnx.backend.test.case.node import collect_testcases

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _CASES = {c.name: c for c in collect_testcases(None)}
    return _CASES


def run_all(filter_text: str = "", jobs: int = 1) -> tuple[list[Outcome], int]:
    cases = _cases()
    total = len(cases)
    names = [n for n, c in cases.items() if in_scope(c) and filter_text in n]
    if jobs > 1:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            outcomes = pool.map(_run_by_name, names, chunksize=4)
    else:
        outcomes = [_run_by_name(n) for n in names]
    return outcomes, total


def report(outcomes: list[Outcome], total: int, seconds: float) -> str:
    passed = sum(o.status == "passed" for o in outcomes)
    failed = len(outcomes) - passed
    unsupported = sum(o.status == "unsupported" for o in outcomes)
    by_op: dict[str, list[Outcome]] = collections.defaultdict(list)
    for o in outcomes:
        by_op[o.op].append(o)
    lines = [
        "# ONNX conformance",
        "",
        "Every node test case of the installed `onnx` package "
        f"({onnx.__version__}) whose inputs and outputs are plain tensors of the supported element types, "
        "run through `sdc.onnx_backend` and compared the way onnx's own runner compares "
        "(shape, dtype, then the case's rtol/atol). Regenerate with `python -m sdc.conformance onnx`.",
        "",
        f"In scope: {len(outcomes)} of {total} cases. Pass rate: {100.0 * passed / max(1, len(outcomes)):.1f}%. "
        f"Run time: {seconds:.0f} s.",
        "",
        f"{passed} passed, {failed} failed",
        "",
        f"(of the failed, {unsupported} are unsupported: the importer refused them with a clean error)",
        "",
        "| op | passed | failed | unsupported | first problem |",
        "|---|---|---|---|---|",
    ]
    for op in sorted(by_op):
        group = by_op[op]
        p = sum(o.status == "passed" for o in group)
        u = sum(o.status == "unsupported" for o in group)
        f = len(group) - p - u
        problem = next((f"`{o.name}`: {o.detail}" for o in group if o.status != "passed"), "")
        problem = problem.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {op} | {p} | {f} | {u} | {problem} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sdc.conformance")
    parser.add_argument("suite", choices=["onnx"])
    parser.add_argument("--output", default="docs/onnx-conformance.md")
    parser.add_argument("--filter", default="", help="only cases whose name contains this")
    parser.add_argument("-j", "--jobs", type=int, default=1)
    parser.add_argument("--list-failures", action="store_true")
    args = parser.parse_args(argv)
    start = time.time()
    outcomes, total = run_all(args.filter, args.jobs)
    text = report(outcomes, total, time.time() - start)
    if args.output != "-":
        Path(args.output).write_text(text)
    passed = sum(o.status == "passed" for o in outcomes)
    if args.list_failures:
        for o in outcomes:
            if o.status != "passed":
                print(f"{o.status:12} {o.name}: {o.detail}")
    print(f"{passed} passed, {len(outcomes) - passed} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
