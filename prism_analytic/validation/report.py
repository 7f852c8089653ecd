"""The agreement suite's report: tables, timing summary and :func:`run` (``prism agreement``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..json_safe import jsonable
from .agreement import (
    BASELINES,
    BOUND_LEVELS,
    DEFAULT_SAMPLES,
    DEFAULT_SEED,
    SCENARIOS,
    TARGETS,
    comparisons,
    run_suite,
    timing,
)
from .issue8 import ISSUE8_REPLICAS, ISSUE8_TARGETS

__all__ = [
    "format_confirmations",
    "format_paired",
    "format_table",
    "format_timing",
    "run",
    "summary_line",
    "targets_line",
]

# ----- reporting --------------------------------------------------------------------------------
_COLUMNS = [
    ("scenario", "name", "{}"),
    ("rc", "reconvergent", "{}"),
    ("KS", "ks", "{:.4f}"),
    ("p50 err", "p50_rel_err", "{:+.3%}"),
    ("p99 err", "p99_rel_err", "{:+.3%}"),
    ("p99.9 err", "p999_rel_err", "{:+.3%}"),
    ("spread err", "spread_rel_err", "{:+.2%}"),
    ("bounds", "bounds_cell", "{}"),
    ("analytic s", "analytic_s", "{:.3f}"),
    ("MC s", "montecarlo_s", "{:.2f}"),
    ("MC n", "samples", "{:,}"),
    ("MC DKW", "mc_dkw_95", "{:.4f}"),
    ("MC p99 CI", "p99_mc_ci", "{:.3%}"),
    ("verdict", "verdict", "{}"),
    ("issue #8", "issue8_verdict", "{}"),
]


def _bounds_cell(row: dict[str, Any]) -> str:
    """Yes / NO, with ``(inf)`` when some bracket is unbounded (a vacuous but valid bound)."""
    if row.get("in_bounds") is None:
        return "-"
    return ("yes" if row["in_bounds"] else "NO") + ("" if row["bounds_finite"] else " (inf)")


def _cell(fmt: str, value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    return fmt.format(value)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """A readable table of rows, followed by the baselines of reconvergent scenarios."""
    header = [c[0] for c in _COLUMNS]
    body = []
    for r in rows:
        cells = [
            _cell(fmt, _bounds_cell(r) if key == "bounds_cell" else r.get(key))
            for _, key, fmt in _COLUMNS
        ]
        if r["misses"]:
            cells[-2] += " (" + ", ".join(r["misses"]) + ")"
        if r.get("confirmation") is not None:  # the row the confirmation rule re-measured
            cells[-2] += f" [{r['confirmation']['status']}]"
        if r.get("issue8_misses"):
            cells[-1] += " (" + ", ".join(r["issue8_misses"]) + ")"
        body.append(cells)
    lines = [_render(header, body)]
    rec = [r for r in rows if r["reconvergent"] and f"ks_{BASELINES[0]}" in r]
    if rec:
        head = [
            "scenario",
            "method",
            "KS",
            "p50 err",
            "p99 err",
            "p99.9 err",
            "spread err",
            "std err",
            "analytic s",
        ]
        table = []
        for r in rec:
            used = "+".join(r.get("shapes_used", []))
            ours = f"clark-mehler ({used})" if used else "clark-mehler"
            for method, sfx in ((ours, ""), *((m, f"_{m}") for m in BASELINES)):
                table.append(
                    [
                        r["name"],
                        method,
                        f"{r['ks' + sfx]:.4f}",
                        f"{r['p50_rel_err' + sfx]:+.3%}",
                        f"{r['p99_rel_err' + sfx]:+.3%}",
                        f"{r['p999_rel_err' + sfx]:+.3%}",
                        f"{r['spread_rel_err' + sfx]:+.2%}",
                        f"{r['std_rel_err' + sfx]:+.2%}",
                        f"{r[('analytic_s' + sfx)]:.3f}",
                    ]
                )
        lines += [
            "",
            "Reconvergent scenarios: correlation-aware core against the baselines",
            "",
            _render(head, table),
        ]
    paired = format_paired(rows)
    if paired:
        lines += ["", paired]
    lines += ["", summary_line(rows), targets_line()]
    return "\n".join(lines)


def summary_line(rows: Sequence[dict[str, Any]]) -> str:
    """How many rows pass the suite's verdict and how many pass issue #8's wording."""
    suite = sum(r["verdict"] == "PASS" for r in rows)
    judged = [r for r in rows if "issue8_verdict" in r]
    issue = sum(r["issue8_verdict"] == "PASS" for r in judged)
    unjudged = "" if len(judged) == len(rows) else f" ({len(rows) - len(judged)} rows not judged)"
    return f"PASS: suite {suite} of {len(rows)}; issue #8 wording {issue} of {len(rows)}{unjudged}"


def _dkw_outcome(row: dict[str, Any], baseline: str) -> str:
    """The suite's unpaired KS comparison with ``baseline``: beats / tie / loses."""
    for c in comparisons(row):
        if c.name == f"ks<{baseline}":
            return "tie" if c.within_noise else "beats" if c.met else "loses"
    return "-"


def format_paired(rows: Sequence[dict[str, Any]]) -> str:
    """The paired bootstrap KS test beside the suite's DKW comparison, per baseline.

    Empty when no row has the paired test (non-reconvergent rows, or no baselines).
    """
    body = []
    for r in rows:
        for m, p in (r.get("ks_paired") or {}).items():
            body.append(
                [
                    r["name"],
                    m,
                    f"{r['ks']:.4f}",
                    f"{r[f'ks_{m}']:.4f}",
                    f"{p['diff']:+.4f}",
                    f"[{p['low']:+.4f}, {p['high']:+.4f}]",
                    p["outcome"],
                    _dkw_outcome(r, m),
                    f"{r['samples']:,}",
                ]
            )
    if not body:
        return ""
    head = [
        "scenario",
        "baseline",
        "KS",
        "KS baseline",
        "KS diff",
        "paired 95% interval",
        "paired",
        "DKW rule",
        "MC n",
    ]
    title = (
        "KS against the baselines: paired bootstrap of KS - KS_baseline on the same sample "
        "(prism_analytic.validation.paired_ks; decides issue #8's verdict) beside the suite's "
        "unpaired rule (a difference within the DKW half-width is a tie)"
    )
    return title + "\n\n" + _render(head, body)


def format_confirmations(rows: Sequence[dict[str, Any]]) -> str:
    """The rows the confirmation rule re-measured: first verdict, confirmation, final verdict.

    The main table already shows the confirmed metrics of these rows (the confirmed row
    replaces the first); this lists what the first sample said and how it was confirmed.
    """
    body = []
    for r in rows:
        conf = r.get("confirmation")
        if conf is None:
            continue
        first = r["first"]
        confirmed = conf["status"] == "confirmed"
        body.append(
            [
                r["name"],
                _verdict_cell(first),
                f"{first['samples']:,} / {first['seed']}",
                ", ".join(first["noise_decided"]),
                f"{conf['samples']:,}{' copies' if conf.get('method') else ''} / {conf['seed']}"
                if confirmed
                else "- (MC work guard)",
                f"{conf['time_s']:.1f}" if confirmed else "-",
                f"{r['ks']:.4f}",
                _verdict_cell(r),
            ]
        )
    head = [
        "scenario",
        "first verdict",
        "first n / seed",
        "inside MC noise",
        "confirm n / seed",
        "confirm s",
        "KS",
        "confirmed verdict",
    ]
    title = (
        "Confirmation rule (prism_analytic.validation.confirmation): rows whose verdict "
        "Monte Carlo's noise decided, re-measured once; the confirmed verdict stands"
    )
    if not body:
        return title + "\n\n(no row was decided inside Monte Carlo's noise)"
    return title + "\n\n" + _render(head, body)


def _verdict_cell(row: dict[str, Any]) -> str:
    return row["verdict"] + (" (" + ", ".join(row["misses"]) + ")" if row["misses"] else "")


def targets_line() -> str:
    """The footer stating the targets.

    Read from :data:`~.agreement.TARGETS` (what ``verdict`` applies), so that the printed targets
    cannot drift from the ones judged.
    """
    ex, rc = TARGETS["exact"], TARGETS["reconvergent"]
    return (
        f"Targets: non-reconvergent KS <= {ex['ks']:g}, |p99 err| <= {ex['p99']:.1%}, in bounds; "
        f"reconvergent KS <= {rc['ks']:g}, |p50 err| <= {rc['p50']:.1%}, "
        f"|p99 err| <= {rc['p99']:.1%}, |spread err| <= {rc['spread']:.0%}, "
        "and KS and |spread| better than both baselines. '~noise': within MC's own "
        "noise of the target. Bounds: MC 99.9% quantile intervals at "
        f"{len(BOUND_LEVELS)} levels (0.01..0.999) overlap the guaranteed bracket; "
        "'(inf)': some bracket end is infinite. " + _issue8_targets()
    )


def _issue8_targets() -> str:
    ex, rc = ISSUE8_TARGETS["exact"], ISSUE8_TARGETS["reconvergent"]
    return (
        f"Issue #8 wording (column 'issue #8'): non-reconvergent KS <= {ex['ks']:g}; "
        f"reconvergent KS <= {rc['ks']:g}, |spread err| <= {rc['spread']:.0%}, "
        f"|p99 err| <= {rc['p99']:.1%} where the step is a max over >= {ISSUE8_REPLICAS} "
        "replicas, and KS better than both baselines by the paired bootstrap; every target "
        "met outside MC's noise ('unresolved (within MC noise)' otherwise)."
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
    confirm: bool = False,
    confirm_samples: int | None = None,
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
    confirm : bool
        Re-measure the rows Monte Carlo's noise decides (:mod:`.confirmation`).
    confirm_samples : int, optional
        Size of those confirmation samples (None: 10x ``samples``, at least 1e6).
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
        confirm=confirm,
        confirm_samples=confirm_samples,
        progress=lambda line: print(line, file=err, flush=True),
    )
    if as_json:
        # an interval end the sample cannot resolve is infinite: null, as strict JSON wants
        print(json.dumps(jsonable(rows), indent=2, default=_json_default), file=out)
    else:
        shape = "" if core_shape is None else f", core_shape {core_shape}"
        print(f"Analytic vs Monte Carlo ({samples:,} samples, seed {seed}{shape})\n", file=out)
        print(format_table(rows), file=out)
        if confirm:
            print("\n" + format_confirmations(rows), file=out)
    return 1 if strict and any(r["verdict"] != "PASS" for r in rows) else 0


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
