"""Whether a calibration fitted at one job size predicts the job's other sizes.

A ``prism calibrate`` overlay is fitted at one size (usually the smallest, the cheapest to
log) and used to predict larger ones. :func:`transfer_table` measures how well that works
on logs at several sizes, beside the simplest alternative a user has: **ratio scaling**,
the *uncalibrated* prediction at the other size multiplied by measured / predicted at the
calibration size (one number carried, no model of what changes with the size).

Per size it reports the predicted and measured median step and p90/p50, the calibrated
errors and ratio scaling's. The p90/p50 compared is what ``prism predict`` prints (the
whole law, allocations drawn afresh) against the pooled steps of all runs (steps after an
evaluation pause left out, as in the median); the within-run law against per-run-normalised
steps (what :func:`.fit.check_against_logs` compares) is in each row too
(``*_within_run_p90_over_p50``). Ratio scaling's p90/p50 is the uncalibrated one (a scale
factor leaves quantile ratios alone). The acceptance rule it states
(:data:`TARGETS`): median within 3%, p90/p50 within 0.01, and a median error not more than
0.5 percentage points worse than ratio scaling's.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .fit import _q90, _shape_law, predicted_law
from .log_job import check_logs_match_job
from .logs import StepLog, per_run_normalised, pool_logs, without_pauses
from .result import CalibrationError, PredictedLaw

__all__ = ["TARGETS", "SizeCase", "seconds_notes", "transfer_table", "transfer_text"]

#: The acceptance rule of a transfer: |median error| <= 3%, |p90/p50 error| <= 0.01, and
#: |median error| at most 0.5 percentage points above ratio scaling's.
TARGETS = {"median_rel": 0.03, "p90_over_p50_abs": 0.01, "vs_ratio_points": 0.5}


@dataclass(frozen=True)
class SizeCase:
    """One job size: the calibrated job, the same job uncalibrated, and its logs.

    Attributes
    ----------
    calibrated : JobConfig
        The job with the calibration overlay merged.
    uncalibrated : JobConfig
        The same job without it (ratio scaling's prediction).
    logs : list of StepLog
        Measured steps of this size (runs pooled).
    """

    calibrated: Any
    uncalibrated: Any
    logs: list[StepLog]


def seconds_notes(overlays: Sequence[Any]) -> list[str]:
    """What in the overlays is frozen in seconds and so does not scale with the step.

    An overlay written before the relative forms (or by hand) may give the jitter as
    ``variability.temporal.step_jitter_s`` (which replaces the relative jitter) or the stall
    as ``variability.hiccups.size_s``: still readable, but carried unchanged to a size whose
    step is shorter or longer. Each note names the
    key and says to refit.

    Parameters
    ----------
    overlays : sequence of path or mapping
        The overlay files (or parsed mappings) merged on top of the job.
    """
    notes = []
    for source in overlays:
        if isinstance(source, Mapping):
            data = dict(source)
        else:
            try:
                data = tomllib.loads(Path(source).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # an unreadable file was refused when the job was built
        var = data.get("variability", {}) if isinstance(data, Mapping) else {}
        temporal, hiccups = var.get("temporal", {}), var.get("hiccups", {})
        if isinstance(temporal, Mapping) and (temporal.get("step_jitter_s") or 0) > 0:
            notes.append(
                f"{source}: variability.temporal.step_jitter_s is in seconds and does not"
                " scale with the step; refit with prism calibrate, which writes"
                " step_jitter_rel"
            )
        if isinstance(hiccups, Mapping) and (hiccups.get("size_s") or 0) > 0:
            notes.append(
                f"{source}: variability.hiccups.size_s is in seconds and does not scale with"
                " the step; refit with prism calibrate, which writes size_rel"
            )
    return notes


def _row(case: SizeCase, evaluate: Callable[[Any], PredictedLaw]) -> dict:
    check_logs_match_job(case.calibrated, case.logs)
    steady = without_pauses(case.logs)  # steps after an evaluation pause are not draws
    pooled = pool_logs(steady).times_s
    p50, p90 = np.quantile(pooled, [0.5, 0.9])
    row: dict[str, Any] = {
        "gpus": case.calibrated.gpus,
        "job": case.calibrated.name,
        "steps": int(pooled.size),
        "measured_median_s": float(p50),
        "measured_p90_over_p50": float(p90 / p50),
        "measured_within_run_p90_over_p50": float(_q90(per_run_normalised(steady))),
    }
    for name, job in (("predicted", case.calibrated), ("uncalibrated", case.uncalibrated)):
        law = evaluate(job)
        within = _shape_law(job, law, "within-run", evaluate)
        row[f"{name}_median_s"] = law.p50_s
        row[f"{name}_p90_over_p50"] = law.p90_s / law.p50_s
        row[f"{name}_within_run_p90_over_p50"] = within.p90_s / within.p50_s
    return row


def transfer_table(
    reference: SizeCase,
    others: Sequence[SizeCase],
    *,
    notes: Sequence[str] = (),
    evaluate: Callable[[Any], PredictedLaw] = predicted_law,
) -> dict:
    """The transfer error table of a calibration fitted at ``reference``'s size.

    Parameters
    ----------
    reference : SizeCase
        The calibration size (its row is in-sample; it fixes ratio scaling's factor).
    others : sequence of SizeCase
        The other sizes (out of sample).
    notes : sequence of str
        Printed under the table (e.g. :func:`seconds_notes` of the overlays).
    evaluate : callable
        ``job -> PredictedLaw`` (the analytic engine by default).

    Returns
    -------
    dict
        ``rows``: one dict per size (the reference first, ``in_sample`` True) with the
        predicted and measured medians and p90/p50, ``median_error`` (relative),
        ``ratio_median_error``, ``p90_over_p50_error`` (predicted - measured),
        ``ratio_p90_over_p50_error`` and ``passes`` (the :data:`TARGETS` rule, out of sample
        only); ``ratio_factor``; ``targets``; ``all_pass``.

    Raises
    ------
    CalibrationError
        No other size, or a size given twice.
    """
    if not others:
        raise CalibrationError("a transfer table needs logs at a second size (sizes=...)")
    gpus = [reference.calibrated.gpus, *(c.calibrated.gpus for c in others)]
    if len(set(gpus)) != len(gpus):
        raise CalibrationError(f"each size once: GPU counts {gpus} repeat one")
    ref = _row(reference, evaluate)
    factor = ref["measured_median_s"] / ref["uncalibrated_median_s"]
    rows = []
    for case, row in [(reference, ref), *((c, _row(c, evaluate)) for c in others)]:
        ratio_median = row["uncalibrated_median_s"] * factor
        row["ratio_median_s"] = ratio_median
        row["median_error"] = row["predicted_median_s"] / row["measured_median_s"] - 1.0
        row["ratio_median_error"] = ratio_median / row["measured_median_s"] - 1.0
        meas90 = row["measured_p90_over_p50"]
        row["p90_over_p50_error"] = row["predicted_p90_over_p50"] - meas90
        row["ratio_p90_over_p50_error"] = row["uncalibrated_p90_over_p50"] - meas90
        row["in_sample"] = case is reference
        if case is not reference:
            med, r90 = abs(row["median_error"]), abs(row["p90_over_p50_error"])
            worse = 100.0 * (med - abs(row["ratio_median_error"]))
            row["passes"] = bool(
                med <= TARGETS["median_rel"]
                and r90 <= TARGETS["p90_over_p50_abs"]
                and worse <= TARGETS["vs_ratio_points"]
            )
        rows.append(row)
    return {
        "calibration_gpus": reference.calibrated.gpus,
        "ratio_factor": factor,
        "targets": dict(TARGETS),
        "rows": rows,
        "all_pass": all(r["passes"] for r in rows if not r["in_sample"]),
        "notes": list(notes),
    }


def transfer_text(table: dict) -> str:
    """The table as aligned text (what ``prism calibrate --check`` prints)."""
    head = (
        f"transfer of the calibration at {table['calibration_gpus']} GPUs (ratio scaling:"
        f" uncalibrated x {table['ratio_factor']:.4f}; target |median| <="
        f" {TARGETS['median_rel']:.0%}, |p90/p50| <= {TARGETS['p90_over_p50_abs']}, median"
        f" <= ratio's + {TARGETS['vs_ratio_points']} points)"
    )
    cols = (
        f"{'GPUs':>6} {'measured':>9} {'predicted':>9} {'error':>7} {'ratio err':>9}"
        f" {'p90/p50 meas':>12} {'pred':>7} {'error':>7} {'ratio err':>9}  verdict"
    )
    lines = [head, cols]
    for r in table["rows"]:
        verdict = "in sample" if r["in_sample"] else ("pass" if r["passes"] else "FAIL")
        lines.append(
            f"{r['gpus']:>6} {r['measured_median_s']:>9.4f} {r['predicted_median_s']:>9.4f}"
            f" {r['median_error']:>+7.2%} {r['ratio_median_error']:>+9.2%}"
            f" {r['measured_p90_over_p50']:>12.4f} {r['predicted_p90_over_p50']:>7.4f}"
            f" {r['p90_over_p50_error']:>+7.4f} {r['ratio_p90_over_p50_error']:>+9.4f}  {verdict}"
        )
    lines += [f"note: {n}" for n in table.get("notes", ())]
    return "\n".join(lines)
