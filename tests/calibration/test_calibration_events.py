"""Step events by likelihood: recovery of known parameters, exact intervals, scaling rules."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from prism_analytic.calibration import (
    CalibrationError,
    EventFit,
    PredictedLaw,
    StepLog,
    calibrate_to_logs,
    check_against_logs,
    fit_step_events,
    predict_events,
    read_step_log,
    run_dispersion,
    slow_steps,
)
from prism_analytic.workload.presets import preset_job

PAUSES = (40, 80, 120, 160)


def _runs(
    rng,
    *,
    n=200,
    runs=3,
    median=20.0,
    sigma=0.004,
    first=0.05,
    later=0.005,
    q=0.0,
    size=0.3,
    pauses=PAUSES,
):
    """Runs drawn from the module's model (relative effects, exponential stall sizes)."""
    logs = []
    for r in range(runs):
        flags = np.zeros(n, dtype=bool)
        flags[list(pauses)] = True
        first_i = np.zeros(n)
        if pauses:
            first_i[pauses[0]] = 1.0
        y = rng.normal(0.0, sigma, n) + first * first_i + later * (flags - first_i)
        y += (rng.random(n) < q) * rng.exponential(size, n)
        logs.append(StepLog(f"r{r}", median * (1 + y), {}, flags))
    return logs


class _Body:
    """A stand-in within-run law: a narrow normal around ``median`` seconds."""

    def __init__(self, median: float, sd: float = 1e-4) -> None:
        self.p50_s = median
        self.sd = sd

    def sample(self, size, rng):
        return self.p50_s + self.sd * rng.standard_normal(size)


def test_pause_effects_and_stalls_are_recovered_with_their_intervals():
    rng = np.random.default_rng(0)
    logs = _runs(rng, n=400, q=0.01, size=0.3, first=0.05, later=0.005)
    fit = fit_step_events(logs, 512, n_gof=0, n_boot=0, body_model=False)
    p = {x.key: x for x in fit.parameters}
    m0 = fit.median_s
    for key, truth in (("events.first_pause_s", 0.05), ("events.later_pause_s", 0.005)):
        lo, hi = p[key].interval
        se = (hi - lo) / (2 * 1.96)
        # within 4 standard errors (a single draw: the 95% interval misses 1 time in 20)
        assert p[key].identified and abs(p[key].value - truth * m0) < 4 * se, (key, p[key])
    rate = p["events.stall_probability"]
    assert rate.identified and rate.interval[0] < 0.01 < rate.interval[1]
    size = p["events.stall_mean_s"]
    assert size.identified and size.interval[0] < 0.3 * m0 < size.interval[1]
    assert math.isfinite(fit.goodness["pit_ks_statistic"])


def test_one_stall_gives_the_exact_exponential_interval_and_is_not_identified():
    rng = np.random.default_rng(2)
    logs = _runs(rng, q=0.0)
    logs[1].times_s[100] *= 1.4  # one clear stall, excess 0.4 of the median
    fit = fit_step_events(logs, 512, n_gof=0, n_boot=0, body_model=False)
    size = {x.key: x for x in fit.parameters}["events.stall_mean_s"]
    assert fit.stalls == 1 and not size.identified and size.value is None
    x = float(fit.stall_excess[0]) * fit.median_s
    # chi-square with 2 degrees of freedom: quantile p is -2 ln(1 - p)
    lo, hi = x / -math.log(0.025), x / -math.log(0.975)
    assert size.interval == pytest.approx((lo, hi), rel=1e-9)


def test_logs_without_pauses_or_stalls_report_them_as_not_identified():
    rng = np.random.default_rng(3)
    logs = _runs(rng, pauses=())
    fit = fit_step_events(logs, 64, n_gof=0, n_boot=0, body_model=False)
    p = {x.key: x for x in fit.parameters}
    assert not p["events.first_pause_s"].identified
    assert not p["events.later_pause_s"].identified
    rate = p["events.stall_probability"]
    assert not rate.identified and rate.value is None
    assert rate.interval[1] == pytest.approx(-math.log(0.025) / fit.n_steps, rel=1e-9)


def test_predicted_count_follows_the_per_gpu_rule_and_exponential_sizes():
    rng = np.random.default_rng(4)
    logs = _runs(rng, n=600, q=0.02, size=0.4, pauses=())
    fit = fit_step_events(logs, 512, n_gof=0, n_boot=0, body_model=False)
    target = [StepLog(f"t{r}", np.full(500, 8.0), {}, np.zeros(500, bool)) for r in range(2)]
    out = predict_events(fit, _Body(8.0), target, 1024, reps=400, seed=1)
    q1 = 1 - (1 - fit.stall_prob) ** (1 / 512)
    q_g = 1 - (1 - q1) ** 1024
    # a step is above 1.5x the (unchanged) median when its stall exceeds 0.5 * 8 s
    expect = 1000 * q_g * math.exp(-4.0 / fit.stall_mean_s)
    se = math.sqrt(expect / 400)
    assert out["predicted_count_above_1p5x"] == pytest.approx(expect, abs=4 * se + 0.02 * expect)
    lo, hi = out["count_poisson_95"]
    assert (lo, hi) == (
        int(stats.poisson.ppf(0.025, out["predicted_count_above_1p5x"])),
        int(stats.poisson.ppf(0.975, out["predicted_count_above_1p5x"])),
    )


def test_slow_steps_are_classed_and_clustering_is_detected():
    t = [np.full(100, 10.0) for _ in range(3)]
    flags = [np.zeros(100, bool) for _ in range(3)]
    for f in flags:
        f[[30, 60]] = True
    t[0][30] = 11.0  # after the first pause
    t[0][60] = 10.5  # after a later pause
    t[1][5] = 10.6  # warm-up
    t[2][[70, 75, 80, 85, 90]] = 16.0  # five stalls in one run
    logs = [StepLog(f"r{i}", t[i], {}, flags[i]) for i in range(3)]
    s = slow_steps(logs, threshold=1.03, warmup=20)
    assert s["counts"] == {"first_pause": 1, "later_pause": 1, "warmup": 1, "elsewhere": 5}
    d = run_dispersion(logs, 1.5, draws=20000)
    exact = 3 * (1 / 3) ** 5  # all five in one of three equal runs
    assert d["per_run"] == [0, 0, 5]
    assert d["p_value"] == pytest.approx(exact, abs=0.004)


def test_bad_arguments_are_named():
    rng = np.random.default_rng(5)
    logs = _runs(rng)
    with pytest.raises(CalibrationError, match="gpus"):
        fit_step_events(logs, 0)
    with pytest.raises(CalibrationError, match="n_boot"):
        fit_step_events(logs, 8, n_boot=-1)
    fit = fit_step_events(logs, 8, n_gof=0, n_boot=0, body_model=False)
    with pytest.raises(CalibrationError, match="reps"):
        predict_events(fit, _Body(20.0), logs, 16, reps=5)
    with pytest.raises(CalibrationError, match="threshold"):
        slow_steps(logs, threshold=1.0)


def test_mlperf_512_first_pause_step_matches_the_direct_measurement(shared_data):
    root = shared_data / "mlperf_llama405b" / "carina_gb200_ngpu512"
    logs = [read_step_log(f) for f in sorted(root.glob("result_*.txt"))]
    fit = fit_step_events(logs, 512, n_gof=0, n_boot=0, body_model=False)
    first = {x.key: x for x in fit.parameters}["events.first_pause_s"]
    # direct: the three steps after each run's first pause, seconds over their run median
    direct = np.mean(
        [lg.times_s[np.flatnonzero(lg.after_pause)[0]] - np.median(lg.times_s) for lg in logs]
    )
    assert first.identified and first.interval[0] < direct < first.interval[1]
    assert fit.stalls == 1  # the one step at 1.19x; its size is not identified


def test_cli_events_from_needs_its_gpu_count(tmp_path, capsys):
    from prism_analytic.cli import main

    log = tmp_path / "s.csv"
    log.write_text("step_time_s\n" + "\n".join(["10.0", "10.1", "9.9"] * 10))
    args = ["calibrate", "--preset", "llama3-8b", "--gpus", "8", "--steps", str(log)]
    assert main([*args, "--check", "--events-from", str(log)]) == 2
    assert "--events-gpus" in capsys.readouterr().err
    assert main([*args, "--events-from", str(log), "--events-gpus", "8"]) == 2
    assert "--check" in capsys.readouterr().err


def _engine_stub(job) -> PredictedLaw:
    """Median 10 / gemm + 2 s, lognormal 0.4%: a model with a known answer (no engine)."""
    med = 10.0 / job.hardware.efficiency.for_precision(job.training.precision) + 2.0
    d = stats.lognorm(0.004, scale=med)

    class _R:
        quantile = staticmethod(d.ppf)
        sf = staticmethod(d.sf)

    q = d.ppf([0.5, 0.9, 0.99])
    return PredictedLaw(float(d.mean()), q[0], q[1], q[2], float(d.std()), result=_R())


@pytest.mark.slow  # event fit with 20 resamples and 9 goodness-of-fit refits (~30 s)
def test_calibrate_to_logs_with_events_reports_them_outside_the_overlay():
    rng = np.random.default_rng(6)
    logs = _runs(rng, n=300, q=0.01, size=0.3, median=22.0)
    job = preset_job("llama3-8b", 8)
    res = calibrate_to_logs(
        job,
        logs,
        n_resamples=200,
        check_body=False,
        fit_jitter=False,
        events=True,
        event_resamples=20,
        event_gof_refits=9,
        evaluate=_engine_stub,
    )
    assert isinstance(res.events, EventFit) and len(res.events.boot["q"]) == 20
    assert "events" in res.to_dict() and "events" not in res.overlay()
    assert "step events" in res.summary()
    out = check_against_logs(job, logs, events=res.events, evaluate=_engine_stub)
    ev = out["events"]
    # in sample (same size, same logs) the fitted events must cover what they were fitted to
    assert ev["steps"] == 900 and ev["p99_inside"] and ev["count_inside"], ev
