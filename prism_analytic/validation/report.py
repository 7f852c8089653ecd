"""The agreement suite's report: tables, timing summary and :func:`run` (``prism agreement``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..json_safe import jsonable
from .agreement import (
    BOUND_LEVELS,
    DEFAULT_SAMPLES,
    DEFAULT_SEED,
    DEFAULT_TOLERANCE,
    INTERVAL_CONFIDENCE,
    LEVELS,
    SCENARIOS,
    run_suite,
    timing,
)

__all__ = [
    "format_intervals",
    "format_table",
    "format_timing",
    "run",
    "summary_line",
    "targets_line",
]


# ----- reporting --------------------------------------------------------------------------------
def _error_cell(row: dict[str, Any], q: float) -> str:
    """``+0.0123 s (+0.012%)``, with ``*`` when outside the tolerance."""
    r = row["quantiles"][str(q)]
    mark = "" if r["within_tolerance"] else " *"
    return f"{r['error_s']:+.3g} s ({r['error_rel']:+.3%}){mark}"


def _bounds_cell(row: dict[str, Any]) -> str:
    """Yes / NO, with ``(inf)`` when some bracket is unbounded (a vacuous but valid bound)."""
    if row.get("in_bounds") is None:
        return "-"
    return ("yes" if row["in_bounds"] else "NO") + ("" if row["bounds_finite"] else " (inf)")


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """A readable table: per scenario, the analytic quantiles' errors against Monte Carlo."""
    header = [
        "scenario",
        "rc",
        *(f"p{q * 100:g} err" for q in LEVELS),
        "KS (diag.)",
        "bounds",
        "analytic s",
        "MC s",
        "MC n",
        "verdict",
    ]
    body = []
    for r in rows:
        body.append(
            [
                r["name"],
                "yes" if r["reconvergent"] else "no",
                *(_error_cell(r, q) for q in LEVELS),
                f"{r['ks']:.4f}",
                _bounds_cell(r),
                f"{r['analytic_s']:.3f}",
                f"{r['montecarlo_s']:.2f}",
                f"{r['samples']:,}",
                r["verdict"] + (" (" + ", ".join(r["misses"]) + ")" if r["misses"] else ""),
            ]
        )
    return "\n".join([_render(header, body), "", summary_line(rows), targets_line(rows)])


def format_intervals(rows: Sequence[dict[str, Any]]) -> str:
    """Per scenario and level: analytic value, Monte Carlo's quantile and its interval (s)."""
    body = []
    for r in rows:
        for q in LEVELS:
            x = r["quantiles"][str(q)]
            low, high = ("-" if v is None else f"{v:.6g}" for v in x["interval_s"])
            body.append(
                [
                    r["name"],
                    f"p{q * 100:g}",
                    f"{x['analytic_s']:.6g}",
                    f"{x['montecarlo_s']:.6g}",
                    f"[{low}, {high}]",
                    "yes" if x["within_tolerance"] else "NO",
                ]
            )
    head = ["scenario", "level", "analytic (s)", "MC (s)", "MC interval (s)", "within tol."]
    return _render(head, body)


def summary_line(rows: Sequence[dict[str, Any]]) -> str:
    """How many rows pass."""
    passed = sum(r["verdict"] == "PASS" for r in rows)
    return f"PASS: {passed} of {len(rows)}"


def targets_line(rows: Sequence[dict[str, Any]] = ()) -> str:
    """The footer stating what the verdict applies (the rows' tolerance, else the default)."""
    tol = rows[0]["tolerance"] if rows else DEFAULT_TOLERANCE
    return (
        "Error = analytic - Monte Carlo quantile, in seconds and relative to the quantile. "
        f"PASS: at each of {', '.join(f'p{q * 100:g}' for q in LEVELS)} the analytic quantile "
        f"lies inside Monte Carlo's {INTERVAL_CONFIDENCE:.1%} order-statistic interval widened "
        f"by {tol * 100:g}% of the quantile (where an end of that interval is unresolved, the "
        f"error itself must be within {tol * 100:g}%; '*' marks a level that is not), and Monte "
        f"Carlo's 99.9% intervals at {len(BOUND_LEVELS)} levels (0.01..0.999) overlap the "
        "guaranteed bounds ('(inf)': some bound end is infinite). KS is a diagnostic only."
    )


def _render(header: list[str], body: list[list[str]]) -> str:
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(header)]
    out = [
        "  ".join(h.ljust(w) for h, w in zip(header, widths)),
        "  ".join("-" * w for w in widths),
    ]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in body]
    return "\n".join(out)


def format_timing(t: dict[str, Any]) -> str:
    """A readable version of :func:`timing`'s result."""
    lines = [f"analytic predict, 1F1B {t['pipeline']} pipeline inside n replicas (best time):"]
    for n, s in t["times_s"].items():
        lines.append(
            f"  n = {n:>9,}: {s:8.3f} s wall, {t['cpu_s'][n]:8.3f} s CPU   "
            f"p99 {t['p99_s'][n]:.6g} s"
        )
    lines.append(
        f"  ratio max/min time: {t['ratio_max_min']:.3f} wall, {t['ratio_max_min_cpu']:.3f} CPU"
    )
    return "\n".join(lines)


# ----- command line -----------------------------------------------------------------------------
def run(
    samples: int = DEFAULT_SAMPLES,
    only: Sequence[str] | None = None,
    as_json: bool = False,
    *,
    seed: int = DEFAULT_SEED,
    do_timing: bool = False,
    list_only: bool = False,
    strict: bool = False,
    core_shape: str | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    out: Any = None,
    err: Any = None,
) -> int:
    """Run the suite and print the report; returns an exit status.

    Parameters
    ----------
    samples, seed : int
        Monte Carlo options.
    only : sequence of str, optional
        Scenario names (default: all).
    as_json : bool
        Print a JSON list of row objects instead of a table (timing: one JSON object).
    do_timing : bool
        Run :func:`timing` instead of the scenarios.
    list_only : bool
        Print the scenario names and descriptions.
    strict : bool
        Return 1 when a scenario misses its targets.
    core_shape : str, optional
        Passed to the analytic engine (None: its default).
    tolerance : float
        Relative error of a quantile accepted (default 0.001: 0.1%).
    out, err : file-like, optional
        Report and progress streams (default stdout and stderr).
    """
    out = out or sys.stdout
    err = err or sys.stderr
    if list_only:
        for s in SCENARIOS.values():
            print(f"{s.name:<24} {s.description}", file=out)
        return 0
    if do_timing:
        t = timing()
        print(json.dumps(t, indent=2) if as_json else format_timing(t), file=out)
        return 0
    if only:
        unknown = [n for n in only if n not in SCENARIOS]
        if unknown:
            raise ValueError(f"unknown scenario(s) {unknown}; choose from {', '.join(SCENARIOS)}")
    rows = run_suite(
        only,
        samples,
        seed,
        core_shape=core_shape,
        tolerance=tolerance,
        progress=lambda line: print(line, file=err, flush=True),
    )
    if as_json:
        # an interval end the sample cannot resolve is infinite: null, as strict JSON wants
        print(json.dumps(jsonable(rows), indent=2, default=_json_default), file=out)
    else:
        shape = "" if core_shape is None else f", core_shape {core_shape}"
        print(f"Analytic vs Monte Carlo ({samples:,} samples, seed {seed}{shape})\n", file=out)
        print(format_table(rows), file=out)
        print("\n" + format_intervals(rows), file=out)
    return 1 if strict and any(r["verdict"] != "PASS" for r in rows) else 0


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
