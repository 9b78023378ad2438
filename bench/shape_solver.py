"""The shape solver at scale, and sympy on the same systems, in one run.

    python bench/shape_solver.py [--ops 10000] [--repeat 3] [--sympy-ops 1000] [--pass-ops 2000]

Two synthetic networks of `--ops` ops each, as constraints the shape rules record
(sdc/transforms/shape_constraints.py), built through the public ShapeConstraintSet API:

- deep: a CNN/transformer trunk over a few input dims (B, S, H, W): stride-2 convolutions and
  pools (floor arithmetic), branch merges that agree only for even sizes, reshapes to B*S,
  splits (divisibility), a user bound on B;
- wide: many inputs, each segment concatenating two of them and multiplying by a third (K ==
  M + N), reshaping (products), splitting, and data-dependent sizes (opaque symbols).

Reports the time to add the constraints and to solve (median of `--repeat`), the constraint
count, and what came out (static symbols, guards). Then the same equality systems at
`--sympy-ops` ops through sympy (`sympy.solve` of the linear equalities, the library a
symbolic solver would otherwise lean on) next to sdc's solver on the same system. With
`--pass-ops`, the whole `sdc-shape-constraints` pass runs on a generated IR module of that
many ops (MLIR reading and writing included).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sdc.transforms.shape_solver import Contradiction, ShapeConstraintSet  # noqa: E402

# ---------------------------------------------------------------- the two networks


def deep(n_ops: int, seed: int = 0) -> ShapeConstraintSet:
    rng = random.Random(seed)
    cs = ShapeConstraintSet()
    b, s, h, w = (cs.symbol(x, origin="input") for x in ("B", "S", "H", "W"))
    cs.add_inequality(b, lo=1, hi=64, origin="--input-shape B=1..64")
    ops = 0
    hh, ww = h, w
    levels = 0
    while ops < n_ops:
        kind = rng.random()
        if kind < 0.25:  # a 3x3 stride-2 conv next to a 2x2 stride-2 pool, then their sum
            a = cs.window(hh, 3, 2, 1, 1, origin=ops)
            p = cs.window(hh, 2, 2, 0, 0, origin=ops + 1)
            cs.add_equal(p, a, origin=ops + 2, reason="add")
            a2 = cs.window(ww, 3, 2, 1, 1, origin=ops)
            p2 = cs.window(ww, 2, 2, 0, 0, origin=ops + 1)
            cs.add_equal(p2, a2, origin=ops + 2, reason="add")
            hh, ww = a, a2
            ops += 3
            levels += 1
            if levels == 5:  # five downsamplings, then a new image stream (the next stage of a detector)
                hh, ww, levels = h, w, 0
        elif kind < 0.45:  # 3x3 stride-1 convolutions keep the size: out >= 1 only
            hh = cs.window(hh, 3, 1, 1, 1, origin=ops)
            ww = cs.window(ww, 3, 1, 1, 1, origin=ops)
            ops += 1
        elif kind < 0.7:  # attention: reshape [B, S, 768] -> [B*S, 768] and back, products equal
            cs.add_equal(b * s * 768, b * s * 12 * 64, origin=ops, reason="reshape")
            cs.add_divisible(b * s * 768, 64, origin=ops + 1, reason="reshape -1")
            ops += 2
        elif kind < 0.85:  # split the heads
            cs.add_divisible(s * 12, 3, origin=ops, reason="split")
            ops += 1
        else:  # broadcast against an earlier value of the same dims: trivially equal
            cs.add_equal(b * s, s * b, origin=ops)
            ops += 1
    return cs


def wide(n_ops: int, seed: int = 0) -> ShapeConstraintSet:
    rng = random.Random(seed)
    cs = ShapeConstraintSet()
    ops = 0
    segment = 0
    while ops < n_ops:
        n = cs.symbol(f"N{segment}", origin="input")
        m = cs.symbol(f"M{segment}", origin="input")
        k = cs.symbol(f"K{segment}", origin="input")
        t = cs.symbol(f"T{segment}", origin="input")
        cs.add_equal(k, n + m, origin=ops, reason="concat, then mul")  # K == M + N
        cs.add_equal(t, (n + m) * 4, origin=ops + 1, reason="reshape")  # T == 4*(M + N)
        cs.add_divisible(n + m, 2, origin=ops + 2, reason="split")
        if rng.random() < 0.3:  # a data-dependent size, used with an input dim
            u = cs.fresh(origin=ops + 3)
            cs.add_equal(u, n, origin=ops + 3, reason="nonzero then add")
        if rng.random() < 0.2:
            cs.add_inequality(n, hi=1024, origin=ops + 4, reason="--input-shape")
        if segment and rng.random() < 0.5:  # tie to the previous segment: a residual add
            cs.add_equal(n, f"N{segment - 1}", origin=ops + 5, reason="add")
        ops += 6
        segment += 1
    return cs


# ---------------------------------------------------------------- sympy on the same equalities


def sympy_time(cs: ShapeConstraintSet) -> tuple[float, int]:
    """sympy.solve on the equalities of `cs` (linear ones; products as they are)."""
    import sympy

    symbols = {name: sympy.Symbol(name, integer=True, positive=True) for name in cs.symbols}
    eqs = [c.expr.to_sympy(symbols) for c in cs.constraints if c.kind == "eq"]
    started = time.perf_counter()
    solution = sympy.solve(eqs, list(symbols.values()), dict=True)
    return time.perf_counter() - started, len(solution[0]) if solution else 0


# ---------------------------------------------------------------- the whole pass


def pass_time(n_ops: int) -> float:
    """The pass on a module of n_ops ops: blocks of matmul, add, relu, reshape to [B*S, 64] and back,
    and a split of the sequence, over x[B, S, 64] and a second input y[B, T, 64] tied to it."""
    from sdc.cli.opt import Opt

    t = "tensor<?x?x64xf32>"
    lines = [f'func.func @main(%x: {t} {{sdc.name = "x", sdc.dims = #sdc.dims<["B", "S", 64]>}}, '
             f'%y: {t} {{sdc.name = "y", sdc.dims = #sdc.dims<["B", "T", 64]>}}) -> {t} {{',
             '  %w = "sdc.parameter"() {name = "w"} : () -> tensor<64x64xf32>']
    cur, i = "%x", 0
    while i < n_ops:
        lines += [
            f'  %m{i} = "sdc.matmul"({cur}, %w) : ({t}, tensor<64x64xf32>) -> {t}',
            f'  %a{i} = "sdc.add"(%m{i}, %y) : ({t}, {t}) -> {t}',
            f'  %r{i} = "sdc.relu"(%a{i}) : ({t}) -> {t}',
            f'  %f{i} = "sdc.reshape"(%r{i}) {{shape = ["B*S", 64]}} : ({t}) -> tensor<?x64xf32>',
            f'  %u{i} = "sdc.reshape"(%f{i}) {{shape = ["B", "S", 64]}} : (tensor<?x64xf32>) -> {t}',
        ]
        cur = f"%u{i}"
        i += 5
    lines.append(f"  return {cur} : {t}\n}}")
    text = "\n".join(lines)
    opt = Opt("sdc-shape-constraints")
    started = time.perf_counter()
    result = opt.run_chunk(text, "bench.mlir", 1)
    elapsed = time.perf_counter() - started
    assert result.output is not None, [d.format() for d in result.diagnostics]
    assert "T == S" in result.output
    return elapsed


# ---------------------------------------------------------------- driver


def measure(build, n_ops: int, repeat: int) -> dict:
    adds, solves = [], []
    sol = None
    for _ in range(repeat):
        started = time.perf_counter()
        cs = build(n_ops)
        built = time.perf_counter()
        try:
            sol = cs.solve()
        except Contradiction as e:
            raise SystemExit(f"the benchmark network is contradictory: {e}")
        done = time.perf_counter()
        adds.append(built - started)
        solves.append(done - built)
    static = sum(1 for v in sol.canonical.values() if isinstance(v, int))
    return {"constraints": len(cs.constraints), "symbols": len(cs.symbols), "add": statistics.median(adds),
            "solve": statistics.median(solves), "static": static, "guards": len(sol.guards),
            "facts": len(sol.facts)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=10000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--sympy-ops", type=int, default=1000, help="ops of the systems sympy gets (0: skip)")
    p.add_argument("--pass-ops", type=int, default=0, help="ops of a generated module for the whole pass (0: skip)")
    args = p.parse_args(argv)
    print(f"{'network':<8} {'ops':>7} {'constraints':>11} {'symbols':>8} {'add (s)':>8} {'solve (s)':>9} "
          f"{'static':>7} {'guards':>7} {'facts':>7}")
    for name, build in (("deep", deep), ("wide", wide)):
        r = measure(build, args.ops, args.repeat)
        print(f"{name:<8} {args.ops:>7} {r['constraints']:>11} {r['symbols']:>8} {r['add']:>8.3f} {r['solve']:>9.3f} "
              f"{r['static']:>7} {r['guards']:>7} {r['facts']:>7}")
    if args.sympy_ops:
        print(f"\nequalities of the wide network at {args.sympy_ops} ops: sdc's solver vs sympy.solve")
        cs = wide(args.sympy_ops)
        started = time.perf_counter()
        cs.solve()
        ours = time.perf_counter() - started
        theirs, solved = sympy_time(cs)
        print(f"  sdc solve   {ours:8.3f} s  (all constraints: equalities, bounds, divisibility)")
        print(f"  sympy.solve {theirs:8.3f} s  (equalities only; {solved} symbols solved)  "
              f"ratio {theirs / max(ours, 1e-9):.0f}x")
    if args.pass_ops:
        print(f"\nsdc-shape-constraints on a module of {args.pass_ops} ops (parse, rules, solve, write back): "
              f"{pass_time(args.pass_ops):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
