"""Long fuzz run: the corpus of ``tests/fuzz_strategies.py`` for N minutes, with counts.

Usage::

    nice python validation/fuzz_long.py --minutes 10 [--limit-s 30] [--only graphs] [--json]

Rounds of fresh hypothesis examples (no example database, a new random seed every round) go
through every target in turn until the time is up. Each input is classified (see
``tests/fuzz_strategies.py``): ok, refused (the package's own error), foreign exception, hang
(over ``--limit-s``), guarantee violation. Prints the counts per target and every
non-ok/refused input with its description, so that each can be reproduced.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fuzz_strategies import TARGETS, run_case  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402

BAD = ("foreign", "hang", "violation")


def _round(
    name: str,
    counts: dict[str, Counter],
    bad: list[dict],
    deadline: float,
    limit_s: float,
    per_round: int,
) -> None:
    """One round of fresh examples of target ``name``."""

    @settings(
        max_examples=per_round,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(TARGETS[name])
    def one(case: tuple) -> None:
        if time.monotonic() >= deadline:
            return
        description, thunk = case
        outcome = run_case(thunk, limit_s)
        counts[name][outcome.kind] += 1
        if outcome.kind in BAD:
            bad.append(
                {
                    "target": name,
                    "kind": outcome.kind,
                    "input": description,
                    "detail": outcome.detail,
                }
            )

    random.seed(time.time_ns())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one()


def fuzz(minutes: float, limit_s: float, only: list[str] | None, per_round: int) -> dict:
    """Run the targets round-robin for ``minutes``; return counts and the bad inputs."""
    names = only or sorted(TARGETS)
    counts: dict[str, Counter] = {n: Counter() for n in names}
    bad: list[dict] = []
    deadline = time.monotonic() + 60.0 * minutes
    rounds = 0
    while time.monotonic() < deadline:
        rounds += 1
        for name in names:
            if time.monotonic() >= deadline:
                break
            _round(name, counts, bad, deadline, limit_s, per_round)

    total = Counter()
    for c in counts.values():
        total.update(c)
    return {
        "minutes": minutes,
        "rounds": rounds,
        "limit_s": limit_s,
        "inputs": sum(total.values()),
        "totals": dict(total),
        "per_target": {n: dict(c) for n, c in counts.items()},
        "bad": bad,
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns 1 when any input was foreign, a hang or a violation."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--limit-s", type=float, default=30.0, help="per-input time limit")
    p.add_argument("--only", action="append", choices=sorted(TARGETS))
    p.add_argument("--per-round", type=int, default=25, help="examples per target per round")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    report = fuzz(args.minutes, args.limit_s, args.only, args.per_round)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(
            f"fuzz: {report['inputs']:,} inputs in {args.minutes:g} min ({report['rounds']} "
            f"rounds, limit {args.limit_s:g} s an input)"
        )
        for name, c in report["per_target"].items():
            print(f"  {name:<14} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
        print("  totals: " + ", ".join(f"{k} {v}" for k, v in sorted(report["totals"].items())))
        for b in report["bad"]:
            print(f"  {b['kind'].upper()} [{b['target']}] {b['input']}\n      {b['detail']}")
    return 1 if report["bad"] else 0


if __name__ == "__main__":
    sys.exit(main())
