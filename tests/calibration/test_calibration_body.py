"""The state-space step body and run-level stall clustering: known parameters recovered,
unidentifiable components reported as such, exact count intervals against Monte Carlo."""

from __future__ import annotations

import math

import numpy as np
import pytest

from prism_analytic.calibration import CalibrationError, StepLog, fit_step_events, predict_events
from prism_analytic.calibration.intervals import negbin_total_interval, poisson_interval
from prism_analytic.calibration.stall_dispersion import fit_stall_dispersion
from prism_analytic.calibration.step_body import fit_step_body
from prism_analytic.calibration.step_events import event_design

PAUSES = (40, 80, 120, 160, 200)


def _runs(rng, *, n=240, runs=3, se=0.0015, sl=0.0003, trend=0.0, warm=0.0, tau=5.0, median=10.0):
    """Runs drawn from the body model (relative units), with evaluation pauses."""
    logs = []
    i = np.arange(n)
    for r in range(runs):
        flags = np.zeros(n, dtype=bool)
        flags[list(PAUSES)] = True
        y = np.cumsum(rng.normal(0.0, sl, n)) + rng.normal(0.0, se, n)
        y += trend * i + warm * np.exp(-i / tau)
        y[PAUSES[0]] += 0.05
        y[list(PAUSES[1:])] += 0.005
        logs.append(StepLog(f"r{r}", median * (1 + y), {}, flags))
    return logs


def _fit(logs):
    y, exog, run = event_design(logs)
    # the shared shape and the jitter warm-up have their own tests (test_step_body_shape.py)
    return fit_step_body(y, exog, run, shape=False, jitter_warmup=False)


def _within(p, truth, k=4.0):
    """``truth`` within k standard errors of the estimate (the 95% Wald interval / 3.92)."""
    lo, hi = p.interval
    if p.key in ("body.step_jitter_rel", "body.drift_rel_per_step"):  # log-scale interval
        se = (math.log(hi) - math.log(lo)) / 3.92
        return abs(math.log(p.value) - math.log(truth)) < k * se
    return abs(p.value - truth) < k * (hi - lo) / 3.92


def test_known_body_is_recovered_within_its_intervals():
    rng = np.random.default_rng(11)
    logs = _runs(rng, se=0.0015, sl=0.0004, trend=5e-5, warm=0.02, tau=5.0)
    fit = _fit(logs)
    p = {x.key: x for x in fit.parameters}
    for key, truth in (
        ("body.step_jitter_rel", 0.0015),
        ("body.drift_rel_per_step", 0.0004),
        ("body.trend_rel_per_step", 5e-5),
        ("body.warmup_rel", 0.02),
        ("body.later_pause_rel", 0.005),
    ):
        assert p[key].identified and _within(p[key], truth), (key, p[key])
    assert fit.warmup is not None and fit.warmup[1] == 5.0
    # the first-pause effect is relative to the run median, which the drift moves a little
    assert p["body.first_pause_rel"].value == pytest.approx(0.05, abs=0.01)


def test_absent_components_are_not_identified_and_not_predicted():
    rng = np.random.default_rng(12)
    logs = _runs(rng, se=0.002, sl=0.0, trend=0.0, warm=0.0)
    fit = _fit(logs)
    p = {x.key: x for x in fit.parameters}
    for key in ("body.warmup_rel", "body.trend_rel_per_step", "body.drift_rel_per_step"):
        assert not p[key].identified and p[key].value is None, p[key]
    assert fit.warmup is None and fit.trend == 0.0 and fit.sigma_l == 0.0
    draws = fit.draw(50, np.random.default_rng(0))
    assert np.all(draws["warmup"] == 0) and np.all(draws["trend"] == 0)
    assert np.all(draws["sigma_l"] == 0)
    assert _within(p["body.step_jitter_rel"], 0.002)


def test_dispersion_of_one_stall_is_not_identified():
    d = fit_stall_dispersion([0, 1, 0], [300, 300, 300])
    assert not d.identified and d.value is None and d.interval is None
    assert "not identified" in d.method
    rng = np.random.default_rng(13)
    logs = _runs(rng, sl=0.0)
    logs[1].times_s[100] *= 1.5  # one clear stall
    fit = fit_step_events(logs, 512, n_gof=0, n_boot=0, body_model=False)
    disp = {x.key: x for x in fit.parameters}["events.stall_dispersion"]
    assert not disp.identified and disp.value is None


def test_dispersion_is_recovered_where_many_runs_hold_stalls():
    rng = np.random.default_rng(14)
    alpha, mean = 2.0, 3.0
    counts = rng.poisson(mean * rng.gamma(1 / alpha, alpha, 60))
    d = fit_stall_dispersion(counts, [500] * 60)
    assert d.identified and d.interval[0] < alpha < d.interval[1], d
    poisson = rng.poisson(mean, 60)
    d0 = fit_stall_dispersion(poisson, [500] * 60)
    assert d0.interval[0] == 0.0 and d0.interval[1] < alpha, d0


def test_negbin_total_interval_matches_monte_carlo():
    rng = np.random.default_rng(15)
    means, alpha = np.array([0.3, 0.3, 0.4]), 4.0
    lo, hi = negbin_total_interval(means, alpha)
    g = rng.gamma(1 / alpha, alpha, (400_000, 3))
    total = rng.poisson(means * g).sum(axis=1)
    assert (lo, hi) == (int(np.quantile(total, 0.025)), int(np.quantile(total, 0.975)))
    assert negbin_total_interval(means, 0.0) == poisson_interval(1.0)
    with pytest.raises(ValueError, match="dispersion"):
        negbin_total_interval(means, -1.0)


class _Body:
    """A stand-in within-run law: a narrow normal around ``median`` seconds."""

    def __init__(self, median: float) -> None:
        self.p50_s = median

    def sample(self, size, rng):
        return self.p50_s + 1e-4 * rng.standard_normal(size)


def test_clustered_stalls_widen_the_count_interval_and_bad_options_are_refused():
    rng = np.random.default_rng(16)
    logs = _runs(rng, n=300, sl=0.0)
    for i in (50, 150, 250):
        logs[0].times_s[i] *= 2.0  # three stalls, all in one run
    fit = fit_step_events(logs, 512, n_gof=0, n_boot=0, body_model=False)
    target = [StepLog(f"t{r}", np.full(300, 10.0), {}, np.zeros(300, bool)) for r in range(3)]
    plain = predict_events(fit, _Body(10.0), target, 512, reps=200, stall_dispersion=0.0)
    wide = predict_events(fit, _Body(10.0), target, 512, reps=200, stall_dispersion=5.0)
    assert "count_negbin_95" not in plain and plain["stall_dispersion_from"] == "given"
    assert wide["count_negbin_95"][1] > wide["count_poisson_95"][1]
    with pytest.raises(CalibrationError, match="stall_dispersion"):
        predict_events(fit, _Body(10.0), target, 512, reps=20, stall_dispersion=-1.0)
    with pytest.raises(CalibrationError, match="body_mode"):
        predict_events(fit, _Body(10.0), target, 512, reps=20, body_mode="x")


def test_cli_dispersion_and_body_mode_need_events_from(tmp_path, capsys):
    from prism_analytic.cli import main

    log = tmp_path / "s.csv"
    log.write_text("step_time_s\n" + "\n".join(["10.0", "10.1", "9.9"] * 10))
    args = ["calibrate", "--preset", "llama3-8b", "--gpus", "8", "--steps", str(log), "--check"]
    assert main([*args, "--stall-dispersion", "2"]) == 2
    assert "--events-from" in capsys.readouterr().err
    assert main([*args, "--body-mode", "engine"]) == 2
    assert "--events-from" in capsys.readouterr().err
    with pytest.raises(SystemExit) as err:  # argparse refuses the value itself
        main([*args, "--stall-dispersion=-1"])
    assert err.value.code == 2 and "--stall-dispersion" in capsys.readouterr().err
