"""Seconds-valued step events are sized against the predicted median step.

``check_against_logs`` compares the events with a *within-run* law (persistent GPU speed
spread removed), whose median lacks the run's slowest-replica factor (MLPerf GB200 at 1,024
GPUs: 7.18 s against a predicted median of 8.50 s). The pause costs and stall sizes carried
in seconds from the calibration size were divided by that lower median: 18% too large
relative to the step, which lifted the predicted p99/p50 at 1,024 GPUs.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from prism_analytic.calibration import (
    CalibrationError,
    StepLog,
    check_against_logs,
    fit_step_events,
    predict_events,
)
from prism_analytic.calibration.result import PredictedLaw
from prism_analytic.workload.presets import preset_job

PAUSES = (40, 90, 140, 190)


class _Normal:
    """A stand-in engine result: a normal law with ``quantile`` and ``sf``."""

    def __init__(self, loc: float, scale: float) -> None:
        self.law = stats.norm(loc, scale)

    def quantile(self, u):
        return self.law.ppf(u)

    def sf(self, x):
        return self.law.sf(x)


def _law(median: float) -> PredictedLaw:
    res = _Normal(median, 0.002 * median)
    q = res.quantile([0.5, 0.9, 0.99])
    return PredictedLaw(median, q[0], q[1], q[2], 0.002 * median, result=res)


def _logs(rng: np.random.Generator, median: float = 10.0) -> list[StepLog]:
    flags = np.zeros(240, dtype=bool)
    flags[list(PAUSES)] = True
    out = []
    for r in range(3):
        y = rng.normal(0.0, 0.0015, 240)
        y[PAUSES[0]] += 0.05
        y[list(PAUSES[1:])] += 0.01
        out.append(StepLog(f"r{r}", median * (1 + y), {}, flags.copy()))
    return out


def test_events_are_relative_to_the_predicted_median_not_the_within_run_law():
    rng = np.random.default_rng(31)
    logs = _logs(rng)
    fit = fit_step_events(logs, 512, n_gof=0, n_boot=0, body_model=False)
    job = preset_job("llama3-8b", 8)
    assert job.variability.spatial.cv > 0  # so the within-run law is evaluated separately

    def evaluate(j):  # the within-run law (spatial spread removed) is 30% faster
        return _law(7.0 if j.variability.spatial.cv == 0 else 10.0)

    got = check_against_logs(job, logs, events=fit, evaluate=evaluate)["events"]
    # reference: the same events on a law whose median is the predicted one (same draws)
    ref = predict_events(fit, _law(10.0), logs, 8)
    for key in ("p99_over_p50_point_95%", "p99_over_p50_bootstrap_95%", "p90_over_p50_point"):
        assert got[key] == pytest.approx(ref[key], rel=1e-12), key
    # the old scale (the within-run median) makes the later pauses 10/7 times larger
    old = predict_events(fit, _law(7.0), logs, 8, median_s=7.0)
    assert old["p99_over_p50_point"] > ref["p99_over_p50_point"] + 0.002
    with pytest.raises(CalibrationError, match="median_s"):
        predict_events(fit, _law(10.0), logs, 8, median_s=0.0)
