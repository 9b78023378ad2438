"""The case families: each turns (a seeded random.Random, a scratch directory) into one mutated
input written under the scratch directory and a function that feeds it to sdc.

A family's `run` returns normally or raises SdcError when sdc behaved (a clean error is the
point); any other exception, a traceback on the captured output, a hang or a death is a crash,
judged by the worker (test/fuzz/worker.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import random
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx

from test.fuzz import seeds

# Numbers that find off-by-ones, overflows and allocations.
INTERESTING_INTS = (0, 1, -1, 2, 3, 7, 255, 2**31 - 1, 2**31, 2**32, 2**40, 2**62, 2**63 - 1, -(2**63), 3 * 10**9,
                    10**30)
INTERESTING_FLOATS = (0.0, -0.0, 1e-30, 1e30, float("inf"), float("-inf"), float("nan"), -1.5)
INTERESTING_TEXT = ("", "?", "B", "0", "-1", "a b", "x\x00y", "\u00e9\u4e2d", "../../etc/passwd", "/abs", "B+1", "%", "x" * 300)


class CliExit(Exception):
    """A command-line body ended with an exit code the fuzzer judges (0, 1 and 2 are clean)."""

    def __init__(self, code: int, stderr: str):
        super().__init__(f"exit {code}: {stderr[-500:]}")
        self.code, self.stderr = code, stderr


@dataclass
class Case:
    family: str
    description: str
    run: Callable[[], Any]


def run_cli(body: Callable[[list[str]], int], argv: list[str]) -> None:
    """Run a CLI body in process with its output captured: SdcError and usage errors propagate as
    the clean errors they are; a printed traceback or "internal error" is a crash."""
    from sdc.cli.common import UsageError
    from sdc.diagnostics import PipelineError, SdcError

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = body(argv)
    except SystemExit as e:  # argparse
        code = e.code if isinstance(e.code, int) else 2
    except (SdcError, UsageError, PipelineError):
        code = 1
    text = err.getvalue() + out.getvalue()
    if "Traceback (most recent call last)" in text or "internal error" in text:
        raise AssertionError(f"the command printed a crash: {text[-2000:]}")
    if code not in (0, 1, 2):
        raise CliExit(code, err.getvalue())


# ---------------------------------------------------------------- ONNX


def _compile_model(path: Path, rng: random.Random) -> None:
    """Compile the model file, then run it once on random inputs that fit its signature."""
    import sdc

    exe = sdc.compile(str(path))
    if rng.random() < 0.5:
        _run_random(exe, rng)


def _run_random(exe, rng: random.Random) -> None:
    from sdc import dtypes

    sizes: dict[str, int] = {}
    args = []
    for info in exe.inputs:
        shape = [d if isinstance(d, int) else sizes.setdefault(str(d), rng.choice((1, 2, 3))) for d in info.shape]
        if int(np.prod(shape, dtype=object)) > 1 << 20:
            return  # the model declares an input too big to make here: compiling it was the test
        dtype = dtypes.to_numpy(info.dtype) if info.dtype != "bf16" else np.float32
        args.append((np.random.default_rng(rng.randrange(2**32)).standard_normal(shape) * 3).astype(dtype))
    exe(*args)


def onnx_bytes(rng: random.Random, scratch: Path) -> Case:
    data = bytearray(rng.choice(seeds.onnx_models()))
    kind = rng.choice(("flip", "flip", "set", "insert", "delete", "truncate", "splice"))
    for _ in range(rng.choice((1, 1, 2, 4, 16))):
        i = rng.randrange(len(data))
        if kind == "flip":
            data[i] ^= 1 << rng.randrange(8)
        elif kind == "set":
            data[i] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        elif kind == "insert":
            data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 6)))
        elif kind == "delete":
            del data[i:i + rng.randrange(1, 8)]
        elif kind == "truncate":
            del data[i:]
            break
        else:
            j = rng.randrange(len(data))
            data[i:i] = data[j:j + rng.randrange(1, 32)]
        if not data:
            break
    path = scratch / "model.onnx"
    path.write_bytes(bytes(data))
    return Case("onnx-bytes", f"{kind} of a seed model", lambda: _compile_model(path, rng))


def _random_attr_value(rng: random.Random, name: str) -> onnx.AttributeProto:
    from onnx import helper as h

    kind = rng.choice(("int", "ints", "float", "floats", "string", "strings", "tensor", "graph", "empty"))
    if kind == "int":
        return h.make_attribute(name, rng.choice(INTERESTING_INTS[:-1]))
    if kind == "ints":
        return h.make_attribute(name, [rng.choice(INTERESTING_INTS[:-1]) for _ in range(rng.randrange(0, 6))],
                                attr_type=onnx.AttributeProto.INTS)
    if kind == "float":
        return h.make_attribute(name, rng.choice(INTERESTING_FLOATS))
    if kind == "floats":
        return h.make_attribute(name, [rng.choice(INTERESTING_FLOATS) for _ in range(rng.randrange(1, 4))])
    if kind == "string":
        return h.make_attribute(name, rng.choice(INTERESTING_TEXT).encode())
    if kind == "strings":
        return h.make_attribute(name, [t.encode() for t in rng.sample(INTERESTING_TEXT, 2)])
    if kind == "tensor":
        t = h.make_tensor("t", onnx.TensorProto.INT64, [2], [rng.choice(INTERESTING_INTS[:-2]), 1])
        if rng.random() < 0.3:
            t.data_type = rng.choice((0, 8, 16, 23, 99))
        return h.make_attribute(name, t)
    if kind == "graph":
        return h.make_attribute(name, h.make_graph([], "g", [], []))
    a = onnx.AttributeProto()
    a.name = name
    return a


def _edit_attribute(model: onnx.ModelProto, rng: random.Random) -> str:
    node = rng.choice(model.graph.node)
    choice = rng.random()
    if node.attribute and choice < 0.3:
        a = rng.choice(node.attribute)
        node.attribute.remove(a)
        return f"drop attribute {a.name} of {node.op_type}"
    if node.attribute and choice < 0.8:
        i = rng.randrange(len(node.attribute))
        name = node.attribute[i].name
        node.attribute.pop(i)
        node.attribute.append(_random_attr_value(rng, name))
        return f"retype attribute {name} of {node.op_type}"
    name = rng.choice(("axis", "axes", "perm", "to", "kernel_shape", "pads", "strides", "group", "value", "epsilon",
                       "keepdims", "mode", "transB", "alpha", "split", "num_outputs", "start", "end", "bogus"))
    node.attribute.append(_random_attr_value(rng, name))
    return f"add attribute {name} to {node.op_type}"


def _edit_dims(model: onnx.ModelProto, rng: random.Random) -> str:
    values = list(model.graph.input) + list(model.graph.output) + list(model.graph.value_info)
    vi = rng.choice(values)
    dims = vi.type.tensor_type.shape.dim
    action = rng.random()
    if not dims or action < 0.15:
        vi.type.tensor_type.shape.dim.add().dim_value = rng.choice(INTERESTING_INTS[:-1])
        return f"add a dim to {vi.name}"
    d = rng.choice(dims)
    if action < 0.3:
        dims.remove(d)
        return f"drop a dim of {vi.name}"
    if action < 0.7:
        d.dim_value = rng.choice(INTERESTING_INTS[:-1])
        return f"dim of {vi.name} = {d.dim_value}"
    d.dim_param = rng.choice(INTERESTING_TEXT)
    return f"dim of {vi.name} named {d.dim_param!r}"


def _edit_dtype(model: onnx.ModelProto, rng: random.Random) -> str:
    code = rng.choice((0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 16, 17, 23, 99))
    if rng.random() < 0.5 and model.graph.initializer:
        t = rng.choice(model.graph.initializer)
        t.data_type = code
        return f"initializer {t.name} element type {code}"
    vi = rng.choice(list(model.graph.input) + list(model.graph.output))
    vi.type.tensor_type.elem_type = code
    return f"value {vi.name} element type {code}"


def _edit_inputs(model: onnx.ModelProto, rng: random.Random) -> str:
    node = rng.choice(model.graph.node)
    action = rng.random()
    if node.input and action < 0.3:
        del node.input[rng.randrange(len(node.input)):]
        return f"truncate inputs of {node.op_type}"
    if node.input and action < 0.55:
        node.input[rng.randrange(len(node.input))] = ""
        return f"omit an input of {node.op_type}"
    names = [n for other in model.graph.node for n in other.output] + [i.name for i in model.graph.input] + \
        [t.name for t in model.graph.initializer]
    if action < 0.8:
        node.input.append(rng.choice(names))
        return f"extra input to {node.op_type}"
    if node.input:
        node.input[rng.randrange(len(node.input))] = rng.choice(names)
    return f"rewire an input of {node.op_type}"


def _edit_op(model: onnx.ModelProto, rng: random.Random) -> str:
    from sdc.frontend.onnx_common import BINARY, REDUCE, UNARY

    node = rng.choice(model.graph.node)
    ops = sorted(set(UNARY) | set(BINARY) | set(REDUCE) | {op.op_type for op in model.graph.node} |
                 {"Conv", "Concat", "Cast", "Transpose", "Reshape", "Slice", "Gather", "Split", "Pad", "Resize",
                  "ConstantOfShape", "Range", "Expand", "Tile", "Einsum", "TopK", "OneHot", "If", "Loop", "Scan",
                  "Attention", "RotaryEmbedding", "LSTM", "GRU", "MaxPool", "ConvTranspose", "NonZero", "Unique"})
    old = node.op_type
    node.op_type = rng.choice(ops)
    if rng.random() < 0.1:
        node.domain = rng.choice(("com.microsoft", "ai.onnx", "bogus"))
    return f"{old} -> {node.op_type}"


def _edit_opset(model: onnx.ModelProto, rng: random.Random) -> str:
    v = rng.choice((1, 5, 6, 7, 9, 10, 11, 12, 13, 14, 17, 18, 21, 23, 25, 99, 0, -1))
    model.opset_import[0].version = v
    if rng.random() < 0.2:
        model.ir_version = rng.choice((0, 1, 3, 99))
    return f"opset {v}"


def _edit_initializer(model: onnx.ModelProto, rng: random.Random, scratch: Path) -> str:
    if not model.graph.initializer:
        return "nothing"
    t = rng.choice(model.graph.initializer)
    action = rng.random()
    if action < 0.3:
        t.dims[:] = [rng.choice(INTERESTING_INTS[:-1]) for _ in range(rng.randrange(0, 3))]
        return f"initializer {t.name} dims {list(t.dims)}"
    if action < 0.5:
        t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data) + 1)] if t.raw_data else b"\x01" * 3
        return f"initializer {t.name} truncated"
    # external data with declared offsets and lengths
    data = t.raw_data or b"\x00" * 8
    (scratch / "weights.bin").write_bytes(data)
    t.ClearField("raw_data")
    t.data_location = onnx.TensorProto.EXTERNAL
    del t.external_data[:]
    for key, value in (("location", rng.choice(("weights.bin", "weights.bin", "missing.bin", "../x", "/etc/hosts"))),
                       ("offset", str(rng.choice((0, 0, 1, 2**40, -1)))),
                       ("length", str(rng.choice((len(data), len(data), 2**40, 0, -5, 3))))):
        if rng.random() < 0.9:
            e = t.external_data.add()
            e.key, e.value = key, value
    return f"initializer {t.name} external"


def onnx_struct(rng: random.Random, scratch: Path) -> Case:
    model = onnx.ModelProto()
    model.ParseFromString(rng.choice(seeds.onnx_models()))
    edits = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        kind = rng.choice(("attr", "attr", "attr", "dims", "dtype", "inputs", "inputs", "op", "opset", "init"))
        if kind == "attr":
            edits.append(_edit_attribute(model, rng))
        elif kind == "dims":
            edits.append(_edit_dims(model, rng))
        elif kind == "dtype":
            edits.append(_edit_dtype(model, rng))
        elif kind == "inputs":
            edits.append(_edit_inputs(model, rng))
        elif kind == "op":
            edits.append(_edit_op(model, rng))
        elif kind == "opset":
            edits.append(_edit_opset(model, rng))
        else:
            edits.append(_edit_initializer(model, rng, scratch))
    path = scratch / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return Case("onnx-struct", "; ".join(edits), lambda: _compile_model(path, rng))


# ---------------------------------------------------------------- IR text into sdc-opt

_PIPELINES = ((), ("-p", "sdc-verify"), ("-p", "sdc-canonicalize"), ("-p", "sdc-shape-constraints"),
              ("-p", "sdc-layout-constraints{target=cpu}"), ("-p", "sdc-fuse{target=cpu}"),
              ("-p", "sdc-fold-conv-batch-norm"), ("-p", "sdc-patch-conv"), ("-p", "sdc-verify,sdc-canonicalize,cse,sdc-shape-constraints"),
              ("-p", "sdc-sharding-propagation,sdc-spmd-partition"), ("--split-input-file", "--verify-diagnostics"))
_TOKEN = __import__("re").compile(r"-?\d+|[A-Za-z_][\w.]*|\S")


def _mutate_text(text: str, rng: random.Random) -> str:
    for _ in range(rng.choice((1, 1, 2, 3, 6))):
        tokens = list(_TOKEN.finditer(text))
        if not tokens:
            break
        m = rng.choice(tokens)
        a, b = m.span()
        kind = rng.random()
        if kind < 0.25 and m.group().lstrip("-").isdigit():
            text = text[:a] + str(rng.choice(INTERESTING_INTS)) + text[b:]
        elif kind < 0.4:
            text = text[:a] + text[b:]
        elif kind < 0.55:
            other = rng.choice(tokens).group()
            text = text[:a] + other + text[b:]
        elif kind < 0.65:
            text = text[:a] + rng.choice(("f32", "f16", "i1", "i64", "f99", "bf16", "?", "x", "0", "[", "]", "{", "}",
                                          "<", ">", "(", ")", "\"", ",", "%0", "#sdc.dims<[\"B\"]>", "\ufffd",
                                          "\x00")) + text[b:]
        elif kind < 0.75:
            lines = text.split("\n")
            i = rng.randrange(len(lines))
            lines.insert(rng.randrange(len(lines) + 1), lines[i])
            text = "\n".join(lines)
        elif kind < 0.85:
            lines = text.split("\n")
            del lines[rng.randrange(len(lines))]
            text = "\n".join(lines)
        elif kind < 0.92:
            text = text[: rng.randrange(len(text) + 1)]
        else:
            j = rng.randrange(len(text) + 1)
            text = text[:j] + rng.choice(INTERESTING_TEXT) + text[j:]
    return text


def ir_text(rng: random.Random, scratch: Path) -> Case:
    from sdc.cli.opt import opt_main

    text = _mutate_text(rng.choice(seeds.ir_texts()), rng)
    path = scratch / "input.mlir"
    data = text.encode("utf-8", "surrogatepass")
    if rng.random() < 0.05:
        data = data + bytes([rng.choice((0x80, 0xFF, 0xC3))])  # not UTF-8
    path.write_bytes(data)
    argv = [str(path), *rng.choice(_PIPELINES), "-o", str(scratch / "out.mlir")]
    (scratch / "argv.json").write_text(json.dumps(argv))
    return Case("ir-text", " ".join(argv[1:]), lambda: run_cli(opt_main, argv))


# ---------------------------------------------------------------- artifacts


_PRISTINE: dict[str, Path] = {}


def pristine_artifact() -> Path:
    """The seed artifact, compiled once per worker."""
    if "path" not in _PRISTINE:
        import tempfile

        root = Path(tempfile.mkdtemp(prefix="sdc-fuzz-seed-"))
        _PRISTINE["path"] = seeds.build_artifact(root / "model.sdc")
    return _PRISTINE["path"]


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, prefix + (i,))
    return out


def _random_json(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.random()
    if kind < 0.35:
        return rng.choice(INTERESTING_INTS)
    if kind < 0.45:
        return rng.choice((None, True, False, 1.5, -0.0))
    if kind < 0.7:
        return rng.choice(INTERESTING_TEXT + ("f32", "i64", "compute", "v0", "launch", "alloc", "reference"))
    if kind < 0.85 or depth > 2:
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    return {rng.choice(("name", "shape", "dtype", "kind", "x")): _random_json(rng, depth + 1)
            for _ in range(rng.randrange(0, 3))}


def _edit_json(doc: Any, rng: random.Random) -> tuple[Any, str]:
    path = rng.choice(_paths(doc)[1:] or [()])
    if not path:
        return _random_json(rng), "replace the document"
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    action = rng.random()
    if action < 0.2 and isinstance(parent, dict):
        del parent[key]
        return doc, f"delete {path}"
    if action < 0.3 and isinstance(parent, list):
        parent.insert(key, parent[key])
        return doc, f"duplicate {path}"
    if action < 0.4 and isinstance(parent, list) and len(parent) > 1:
        del parent[key]
        return doc, f"delete {path}"
    if action < 0.5 and isinstance(parent[key], int) and not isinstance(parent[key], bool):
        parent[key] = parent[key] + rng.choice((1, -1, 2**40, 10**30, -(10**30)))
        return doc, f"shift {path}"
    parent[key] = _random_json(rng)
    return doc, f"set {path}"


def _rehash(root: Path) -> None:
    manifest = json.loads((root / "manifest.json").read_text())
    for rel in list(manifest.get("files", {})):
        p = root / rel
        try:
            present = p.is_file()
        except OSError:  # a name no file can have here (a mutated manifest's, 300 bytes): the load says so
            present = False
        if present:
            data = p.read_bytes()
            manifest["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (root / "manifest.json").write_text(json.dumps(manifest))


def _tamper_weights(root: Path, rng: random.Random) -> str:
    path = root / "weights" / "rank0.safetensors"
    data = bytearray(path.read_bytes())
    (n,) = struct.unpack("<Q", bytes(data[:8]))
    action = rng.random()
    if action < 0.3:
        del data[rng.randrange(len(data)):]
        what = "truncate weights"
    elif action < 0.5:
        for _ in range(rng.choice((1, 3))):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        what = "flip weight bytes"
    elif action < 0.6:
        data[:8] = struct.pack("<Q", rng.choice((0, 1, n + 1, 2**40, 2**64 - 1)))
        what = "header length"
    else:
        header = json.loads(bytes(data[8:8 + n]))
        header, what = _edit_json(header, rng)
        text = json.dumps(header).encode()
        data = bytearray(struct.pack("<Q", len(text)) + text + bytes(data[8 + n:]))
        what = "weights header: " + what
    path.write_bytes(bytes(data))
    return what


def artifact(rng: random.Random, scratch: Path) -> Case:
    from sdc.cli.main import sdc_main

    root = scratch / "model.sdc"
    shutil.copytree(pristine_artifact(), root)
    action = rng.random()
    if action < 0.7:
        name = rng.choice(("manifest.json", "plan.json", "plan.json"))
        doc = json.loads((root / name).read_text())
        edits = []
        for _ in range(rng.choice((1, 1, 2, 3))):
            doc, what = _edit_json(doc, rng)
            edits.append(what)
        (root / name).write_text(json.dumps(doc))
        what = f"{name}: " + "; ".join(edits)
    elif action < 0.78:
        name = rng.choice(("manifest.json", "plan.json"))
        depth = rng.choice((100, 1000, 100000))
        (root / name).write_text("[" * depth + "]" * depth)
        what = f"{name} nested {depth} deep"
    else:
        what = _tamper_weights(root, rng)
    if rng.random() < 0.9:
        try:
            _rehash(root)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            pass  # the manifest itself is what got broken
    x = np.random.default_rng(rng.randrange(2**32)).standard_normal((2, 16)).astype(np.float32)
    s = np.random.default_rng(rng.randrange(2**32)).standard_normal(16).astype(np.float32)

    def run() -> None:
        import sdc.runtime
        from sdc.diagnostics import SdcError

        try:
            run_cli(sdc_main, ["inspect", str(root)])
        finally:
            try:
                exe = sdc.runtime.load(root)
            except SdcError:
                return
            exe(x, s)

    return Case("artifact", what, run)


# ---------------------------------------------------------------- run-time inputs

_EXE: dict[str, Any] = {}


def _odd_input(rng: random.Random, shape: tuple) -> Any:
    import torch

    kind = rng.randrange(16)
    base = np.random.default_rng(rng.randrange(2**32)).standard_normal(shape).astype(np.float32)
    if kind == 0:
        return base.astype(">f4")
    if kind == 1:
        return np.broadcast_to(np.float32(1), (rng.choice((2**40, 3 * 10**9, 5)),) + shape[1:])
    if kind == 2:
        return np.asfortranarray(np.repeat(base, 2, axis=0))[::2]
    if kind == 3:
        return base[::-1]
    if kind == 4:
        return base.astype(rng.choice((np.float64, np.float16, np.int64, np.int32, np.bool_, np.complex64, object)))
    if kind == 5:
        return base.tolist()
    if kind == 6:
        return rng.choice((None, "x", 3, 2.5, b"ab", {"a": 1}, [[1, 2], [3]], ()))
    if kind == 7:
        return np.zeros((0,) + shape[1:], np.float32)
    if kind == 8:
        return base.reshape(-1)
    if kind == 9:
        return torch.from_numpy(base).to(rng.choice((torch.float64, torch.bfloat16, torch.int8, torch.float32)))
    if kind == 10:
        return torch.from_numpy(base).expand(*shape) if shape else torch.tensor(1.0)
    if kind == 11:
        return np.full(shape, rng.choice((np.nan, np.inf, -np.inf, 1e38)), np.float32)
    if kind == 12:
        big = np.zeros((shape[0] * 2,) + shape[1:], np.float32)
        big.setflags(write=False)
        return big
    if kind == 13:
        return base.view(np.int32)
    if kind == 14:
        return np.ma.masked_array(base, mask=base > 0)
    return base[..., None]


def run_inputs(rng: random.Random, scratch: Path) -> Case:
    import sdc.runtime

    if "exe" not in _EXE:
        _EXE["exe"] = sdc.runtime.load(pristine_artifact())
    exe = _EXE["exe"]
    batch = rng.choice((1, 2, 3))
    x = _odd_input(rng, (batch, 16)) if rng.random() < 0.8 else np.ones((batch, 16), np.float32)
    s = _odd_input(rng, (16,)) if rng.random() < 0.5 else np.ones(16, np.float32)
    style = rng.randrange(4)
    (scratch / "inputs.txt").write_text(f"style {style}\nx: {_describe(x)}\ns: {_describe(s)}\n")

    def run() -> None:
        if style == 0:
            exe(x, s)
        elif style == 1:
            exe(x=x, s=s)
        elif style == 2:
            exe(x, s=s, **({"q": x} if rng.random() < 0.5 else {}))
        else:
            exe(*([x, s, x][: rng.randrange(4)]))

    return Case("run-inputs", f"style {style}: {_describe(x)}, {_describe(s)}", run)


def _describe(v: Any) -> str:
    if hasattr(v, "shape") and hasattr(v, "dtype"):
        strides = getattr(v, "strides", None) or (v.stride() if callable(getattr(v, "stride", None)) else None)
        return f"{type(v).__name__} {v.dtype} shape {tuple(v.shape)} strides {strides}"
    text = repr(v)
    return text[:200]


FAMILIES: dict[str, Callable[[random.Random, Path], Case]] = {
    "onnx-bytes": onnx_bytes,
    "onnx-struct": onnx_struct,
    "ir-text": ir_text,
    "artifact": artifact,
    "run-inputs": run_inputs,
}
