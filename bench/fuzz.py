"""The long fuzz campaign (issue 10): >= 100k cases over every family of test/fuzz, at low
priority, with a JSON summary written next to the reproducers.

    OMP_NUM_THREADS=1 nice -n 19 python bench/fuzz.py --cases 100000 --seed 7 --jobs 1 --out fuzz-long

Stops early at --deadline seconds; the summary says how many cases ran.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from test.fuzz.run import FAMILY_NAMES, campaign, parse_size  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--time-limit", type=float, default=30.0)
    p.add_argument("--max-alloc", default="2G")
    p.add_argument("--deadline", type=float, default=None)
    p.add_argument("--out", default="fuzz-long")
    args = p.parse_args()
    out = Path(args.out)
    summary = campaign(args.cases, args.seed, args.time_limit, parse_size(args.max_alloc), args.jobs, FAMILY_NAMES,
                       out, deadline=args.deadline, progress=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary.to_json(), indent=1))
    print(summary.text())
    return 1 if summary.crashes else 0


if __name__ == "__main__":
    sys.exit(main())
