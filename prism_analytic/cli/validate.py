"""``prism validate``: run every real-data case, print a table, fail when a target is missed."""

from __future__ import annotations

import argparse
import json
import sys

from .argtypes import sample_count, seed
from .output import jsonable

__all__ = ["register"]


def _cmd(args: argparse.Namespace) -> int:
    from ..datasets import data_root
    from ..traces.cases import case_names, run_case

    try:
        root = data_root(args.data)
    except FileNotFoundError as exc:
        print(f"prism validate: skipped: {exc}", file=sys.stderr)
        return 0
    names = case_names()
    if args.only:
        unknown = [n for n in args.only if n not in names]
        if unknown:
            raise ValueError(f"--only: unknown cases {unknown}; cases: {names}")
        names = [n for n in names if n in args.only]
    if args.list:
        print("\n".join(names))
        return 0
    results = [run_case(n, root, samples=args.samples, seed=args.seed) for n in names]
    if args.json:
        print(json.dumps(jsonable(results), indent=2))
    else:
        _table(results)
    return 0 if all(r["passed"] for r in results) else 1


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


def _table(results) -> None:
    for r in results:
        status = "PASS" if r["passed"] else "MISS"
        print(f"{status}  {r['name']}")
        print("      " + ", ".join(f"{k}={_fmt(v)}" for k, v in r["metrics"].items()))
        missed = [k for k, ok in r["checks"].items() if not ok]
        if missed:
            print("      missed: " + "; ".join(missed))
    n_pass = sum(r["passed"] for r in results)
    print(f"{n_pass}/{len(results)} cases met every target")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``validate`` subcommand."""
    p = sub.add_parser(
        "validate",
        help="run the real-data validation cases (straggler traces, GPU variability, Kineto)",
        description=(
            "Run every real-data case against its target; exit 1 when a case misses a target, "
            "0 with a message when the data folder is absent."
        ),
    )
    p.add_argument(
        "--data", metavar="DIR", help="data folder (default $PRISM_DATA or ../shared/data)"
    )
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these cases")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument(
        "--samples", type=sample_count, default=4000, help="Monte Carlo samples (default 4000)"
    )
    p.add_argument("--seed", type=seed, default=0, help="random seed (default 0)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd)
