"""The shape a calibration compares steps with, chosen from the steps (``shape="auto"``).

Degraded GPUs are drawn per replica, so with ``slow_fraction > 0`` the marginal
law of the consistency test's job (llama3-8b, dp 16) is a mixture with a slow mode (14.9%
of allocations at ``slow_fraction`` 0.01). Steps drawn afresh from that law and fitted with
the within-run shape read the slow mode as a 0.023 s jitter, which smooths the mixture,
moves its median and so the GEMM efficiency: 0.4022 [0.4012, 0.4037] against a true 0.400.
The logs are drawn from the model at a known efficiency (``TRUE_EFF``).
"""

from __future__ import annotations

import numpy as np
import pytest
from _gb200_fp4_job import JOB_TOML, QUIET_SPATIAL, TRUE_EFF
from scipy import stats

from prism_analytic.calibration import StepLog, calibrate_to_logs, predicted_law
from prism_analytic.calibration.fit import CalibrationError
from prism_analytic.calibration.shape_choice import choose_shape, normalised_ks
from prism_analytic.workload.jobs import load_config, merge_config

GEMM = "hardware.efficiency.gemm_fp4"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    path = tmp_path_factory.mktemp("shape_choice") / "job.toml"
    path.write_text(JOB_TOML)
    return load_config(path)


def _truth(job, slow_fraction: float, jitter_s: float):
    return merge_config(
        job,
        {
            "hardware": {"efficiency": {"gemm_fp4": TRUE_EFF}},
            "variability": {
                "spatial": {"slow_fraction": slow_fraction},
                "temporal": {"step_jitter_s": jitter_s},
            },
        },
    )


def _fit(job, slow_fraction: float, times: np.ndarray, **kw):
    fitted = merge_config(job, {"variability": {"spatial": {"slow_fraction": slow_fraction}}})
    log = StepLog("synthetic", np.asarray(times, dtype=float))
    return calibrate_to_logs(fitted, [log], check_body=False, n_resamples=500, **kw)


def _param(result, key: str):
    return next(p for p in result.parameters if p.key == key)


def _consistent(p, truth: float) -> bool:
    """Truth inside the interval and the bias within the interval's width."""
    lo, hi = p.interval
    return lo <= truth <= hi and abs(p.value - truth) <= hi - lo


@pytest.mark.parametrize("slow_fraction", [0.001, 0.01, 0.05])
def test_marginal_draws_fit_the_efficiency(job, slow_fraction):
    """A new allocation every step: consistent, and marginal chosen where it matters."""
    times = predicted_law(_truth(job, slow_fraction, 0.0)).sample(200, np.random.default_rng(1))
    res = _fit(job, slow_fraction, times)
    eff = _param(res, GEMM)
    assert _consistent(eff, TRUE_EFF), eff
    choice = res.goodness["shape_choice"]
    if slow_fraction >= 0.01:  # the slow mode is plain in 200 steps: marginal is closer
        assert res.goodness["shape"] == "marginal", choice
        assert choice["ks_difference_interval"][1] < 0 and choice["p_within_run"] < 0.05


def test_within_run_shape_on_marginal_draws_is_the_bias(job):
    """The cause, pinned: forcing the within-run shape fits a spurious jitter and misses."""
    times = predicted_law(_truth(job, 0.01, 0.0)).sample(200, np.random.default_rng(1))
    res = _fit(job, 0.01, times, shape="within-run")
    eff = _param(res, GEMM)
    assert _param(res, "variability.temporal.step_jitter_s").value > 0.015
    assert eff.interval[0] > TRUE_EFF, eff  # 0.4022 [0.4012, 0.4037]


def test_one_allocation_keeps_the_within_run_shape(job):
    """Steps of one run (allocation fixed, jitter 0.01 s) with a 5% slow fraction."""
    truth = _truth(job, 0.05, 0.01)
    law, within = predicted_law(truth), predicted_law(merge_config(truth, QUIET_SPATIAL))
    times = within.sample(200, np.random.default_rng(1)) * law.p50_s / within.p50_s
    res = _fit(job, 0.05, times)
    assert res.goodness["shape"] == "within-run", res.goodness["shape_choice"]
    jit = _param(res, "variability.temporal.step_jitter_s")
    assert jit.interval[0] <= 0.01 <= jit.interval[1], jit
    assert _consistent(_param(res, GEMM), TRUE_EFF)


def test_bad_shape_is_refused_before_any_work(job):
    with pytest.raises(CalibrationError, match="shape must be one of"):
        _fit(job, 0.0, np.linspace(1.0, 1.1, 20), shape="within")


# --------------------------------------------------------------------------------------
# The rule on closed-form laws (no engine)
# --------------------------------------------------------------------------------------
class _Law:
    """A stand-in PredictedLaw around a scipy distribution."""

    def __init__(self, dist) -> None:
        self.result = dist
        self.p50_s = float(dist.median())


class _Mixture:
    """85% N(1, 0.005), 15% N(1.06, 0.005): a slow mode like the slow replicas'."""

    def sf(self, x):
        a, b = stats.norm(1.0, 0.005), stats.norm(1.06, 0.005)
        return 0.85 * a.sf(x) + 0.15 * b.sf(x)

    def median(self) -> float:
        from scipy import optimize

        return optimize.brentq(lambda x: self.sf(x) - 0.5, 0.9, 1.2)


def test_choice_rule_on_known_laws():
    rng = np.random.default_rng(3)
    mix = np.where(rng.uniform(size=400) < 0.15, 1.06, 1.0) + rng.normal(0, 0.005, 400)
    mixture, wide = _Law(_Mixture()), _Law(stats.norm(1.0, 0.02))
    # steps from the mixture: a unimodal law of the same p90 is rejected and farther
    shape, rep = choose_shape({"within-run": wide, "marginal": mixture}, mix / np.median(mix))
    assert shape == "marginal" and rep["p_within_run"] < 1e-6
    # unimodal steps: the within-run law is not rejected, so it stays
    one = rng.normal(1.0, 0.02, 400)
    shape, rep = choose_shape({"within-run": wide, "marginal": mixture}, one / np.median(one))
    assert shape == "within-run" and rep["p_within_run"] > 0.05
    # both rejected, the marginal law closer by a hair (real logs: MLPerf 0.167 vs 0.170): the
    # steps cannot order them, so within-run stays
    far = rng.normal(1.0, 0.04, 400)
    close = {"within-run": wide, "marginal": _Law(stats.logistic(1.0, 0.012))}
    shape, rep = choose_shape(close, far / np.median(far))
    assert rep["p_within_run"] < 1e-3 and rep["ks_marginal"] < rep["ks_within_run"]
    assert shape == "within-run" and rep["ks_difference_interval"][1] > 0
    # the same law twice: a tie stays within-run, and the distance is scipy's
    same = {"within-run": wide, "marginal": wide}
    assert choose_shape(same, mix / np.median(mix))[0] == "within-run"
    ref = stats.kstest(one / np.median(one), stats.norm(1.0, 0.02).cdf)
    assert normalised_ks(wide, one / np.median(one)) == pytest.approx(
        (ref.statistic, ref.pvalue), rel=1e-9
    )
    with pytest.raises(ValueError, match="candidates"):
        choose_shape({"within-run": wide}, one)


@pytest.mark.parametrize("confidence", [0.99, 0.999])
def test_strict_confidence_levels_are_served(confidence):
    # paired_ks needs the interval's ends >= 5 ordered values inside: the choice raises its
    # resamples for a stricter level (400 served only levels up to 0.975)
    rng = np.random.default_rng(4)
    mix = np.where(rng.uniform(size=400) < 0.15, 1.06, 1.0) + rng.normal(0, 0.005, 400)
    laws = {"within-run": _Law(stats.norm(1.0, 0.02)), "marginal": _Law(_Mixture())}
    shape, rep = choose_shape(laws, mix / np.median(mix), confidence=confidence)
    assert shape == "marginal" and rep["ks_difference_interval"][1] < 0
