"""Fingerprint the analytic answers of the agreement scenarios, to show a re-run is not needed.

An agreement row compares the analytic engine with Monte Carlo; when code changes after a row
was run, the row still stands if the analytic answers (ours and both baselines) are unchanged
bit for bit. This writes seven quantiles of each as hex, per scenario, and compares two files::

    python validation/agreement_fingerprint.py --out FILE [NAME ...]
    python validation/agreement_fingerprint.py --compare BEFORE AFTER
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

import prism_analytic as pa
from prism_analytic.validation.scenarios import SCENARIOS

LEVELS = np.array([0.001, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999])
#: The core methods an approximate answer is compared with (the canonical-form baselines).
BASELINES = ("independent", "clark")


def fingerprint(names: list[str]) -> dict[str, dict[str, list[str]]]:
    """Hex quantiles of the analytic answer (and, for an approximate one, each baseline's)."""
    out: dict[str, dict[str, list[str]]] = {}
    for name in names:
        graph = SCENARIOS[name].build()
        result = pa.predict(graph, "analytic")
        row = {"ours": [float(x).hex() for x in np.atleast_1d(result.quantile(LEVELS))]}
        if not result.diagnostics["exact"]:
            for method in BASELINES:
                base = pa.predict(graph, "analytic", core_method=method)
                row[method] = [float(x).hex() for x in np.atleast_1d(base.quantile(LEVELS))]
        out[name] = row
        print(name, file=sys.stderr, flush=True)
    return out


def compare(before: dict, after: dict) -> int:
    """Print each scenario as ``same`` or its relative moves; the number that differ."""
    differ = 0
    for name, row in before.items():
        moved = [m for m in row if row[m] != after.get(name, {}).get(m)]
        print(name, "same" if not moved else f"DIFF {moved}")
        for m in moved:
            if m not in after.get(name, {}):
                continue
            old = [float.fromhex(v) for v in row[m]]
            new = [float.fromhex(v) for v in after[name][m]]
            print("   ", m, [f"{(b - a) / a:+.2e}" for a, b in zip(old, new)])
        differ += bool(moved)
    return differ


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--out FILE [NAME ...]`` or ``--compare BEFORE AFTER``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="scenarios (default: all)")
    parser.add_argument("--out", help="write the fingerprint to this JSON file")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args(argv)
    if args.compare:
        with open(args.compare[0]) as a, open(args.compare[1]) as b:
            return 1 if compare(json.load(a), json.load(b)) else 0
    if not args.out:
        parser.error("give --out FILE or --compare BEFORE AFTER")
    unknown = [n for n in args.names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}; choose from {sorted(SCENARIOS)}")
    with open(args.out, "w") as f:
        json.dump(fingerprint(args.names or list(SCENARIOS)), f, indent=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
