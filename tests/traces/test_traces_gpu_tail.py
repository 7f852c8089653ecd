"""Per-GPU law with a GPD tail and the exact slowest-of-n comparison (traces.gpu_variability)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa
from prism_analytic.traces.errors import TraceFormatError
from prism_analytic.traces.gpu_variability import (
    empirical_max_ks,
    fit_per_gpu_law,
    gpu_max_case,
    gpu_max_splits,
    ks_lower_bound,
    max_ks,
    per_gpu_speeds,
)
from prism_analytic.traces.tail_fit import fit_spliced


def _body_plus_outliers(rng, n=400, outliers=0.03):
    """Normal body with a few slow GPUs (Pareto-distributed excess), like the SGEMM data."""
    x = rng.normal(100.0, 2.0, n)
    slow = rng.random(n) < outliers
    x[slow] = 104.0 + stats.genpareto(0.3, scale=3.0).rvs(slow.sum(), random_state=rng)
    return x


def test_spliced_fit_recovers_a_known_spliced_law():
    rng = np.random.default_rng(1)
    truth_u, w = 103.0, 0.1
    n = 20000
    tail = rng.random(n) < w
    body = stats.truncnorm(-40, (truth_u - 100) / 2, loc=100, scale=2).rvs(n, random_state=rng)
    x = np.where(tail, truth_u + stats.genpareto(0.2, scale=1.5).rvs(n, random_state=rng), body)
    fit = fit_spliced(x, tail_fraction=0.1)
    assert fit.threshold == pytest.approx(truth_u, abs=0.1)
    assert fit.mu == pytest.approx(100, abs=0.1)
    assert fit.sigma == pytest.approx(2, rel=0.05)
    assert fit.shape == pytest.approx(0.2, abs=0.06)
    # the fitted CDF against the sample (independent reference: the empirical law)
    assert stats.kstest(x, fit.cdf).statistic < 0.01


def test_spliced_density_integrates_to_one_and_matches_cdf():
    fit = fit_spliced(_body_plus_outliers(np.random.default_rng(2)))
    grid = np.linspace(fit.mu - 12 * fit.sigma, fit.tail.ppf(0.999999), 200001)
    pdf = np.exp(fit.logpdf(grid))
    cdf_from_pdf = np.concatenate([[0], np.cumsum((pdf[1:] + pdf[:-1]) / 2 * np.diff(grid))])
    assert cdf_from_pdf[-1] == pytest.approx(1.0, abs=1e-4)
    idx = [50000, 100000, 150000]
    np.testing.assert_allclose(cdf_from_pdf[idx], fit.cdf(grid[idx]), atol=1e-4)


def test_engine_max_of_the_spliced_law_is_f_to_the_n_and_matches_sampling():
    rng = np.random.default_rng(3)
    fit = fit_spliced(_body_plus_outliers(rng))
    mx = pa.iid_max(fit.distribution(), 64)
    x = np.quantile(fit.rvs(100, rng), [0.2, 0.8]) + [0, 5]
    np.testing.assert_allclose(mx.cdf(x), fit.cdf(x) ** 64, rtol=1e-9, atol=1e-12)
    draws = fit.rvs((4000, 64), rng).max(axis=1)  # Monte Carlo reference
    assert stats.kstest(draws, mx.cdf).statistic < 0.03


def test_aic_prefers_the_tail_model_when_there_are_outliers_and_not_otherwise():
    rng = np.random.default_rng(4)
    assert fit_per_gpu_law(_body_plus_outliers(rng)).family == "normal body + GPD tail"
    plain = rng.normal(100, 2, 400)
    assert fit_per_gpu_law(plain).family != "normal body + GPD tail"


def test_max_ks_is_exact_against_brute_force():
    rng = np.random.default_rng(5)
    held = rng.normal(0, 1, 30)
    law = stats.norm(0.1, 1.1)
    for n in (1, 4, 40):
        grid = np.sort(np.concatenate([held, held - 1e-9, np.linspace(-5, 5, 20001)]))
        step = (np.searchsorted(np.sort(held), grid, side="right") / held.size) ** n
        brute = np.max(np.abs(law.cdf(grid) ** n - step))
        assert max_ks(lambda x, n=n: law.cdf(x) ** n, held, n) == pytest.approx(brute, abs=1e-6)


def test_lower_bound_holds_for_any_continuous_model():
    rng = np.random.default_rng(6)
    held = rng.normal(0, 1, 50)
    for n in (4, 64, 256):
        bound = ks_lower_bound(50, n)
        assert bound == pytest.approx((1 - (49 / 50) ** n) / 2)
        for law in (stats.norm(0, 1), stats.norm(2, 0.5), stats.gumbel_r(1, 0.3)):
            assert max_ks(lambda x, n=n, f=law: f.cdf(x) ** n, held, n) >= bound - 1e-12


def test_two_identical_halves_have_zero_floor():
    x = np.arange(1.0, 21.0)
    assert empirical_max_ks(x, x, 16) == 0.0
    assert empirical_max_ks(x, x + 100, 1) == 1.0


@pytest.mark.parametrize("bad", [[1.0] * 3, [np.nan] * 20])
def test_spliced_rejects_bad_samples(bad):
    with pytest.raises(ValueError, match="samples"):
        fit_spliced(bad)


def test_spliced_rejects_bad_tail_fraction():
    with pytest.raises(ValueError, match="tail_fraction"):
        fit_spliced(np.arange(100.0), tail_fraction=0.9)


def test_reader_rejects_bad_files(tmp_path):
    p = tmp_path / "g.csv"
    p.write_text("uuid,perf\na,1.0\nb,-2\n")
    with pytest.raises(TraceFormatError, match="row 1"):
        per_gpu_speeds(p)
    p.write_text("uuid,speed\na,1.0\n")
    with pytest.raises(TraceFormatError, match="perf"):
        per_gpu_speeds(p)


def test_synthetic_case_and_splits(tmp_path):
    rng = np.random.default_rng(7)
    x = _body_plus_outliers(rng, n=300)
    p = tmp_path / "g.csv"
    p.write_text("uuid,perf\n" + "".join(f"g{i},{v}\n" for i, v in enumerate(x)))
    case = gpu_max_case(p, ns=(4, 16))
    assert case.n_fit == 150 and case.n_test == 150
    assert case.ks[4] >= case.lower_bound_ks[4]
    assert case.ks[4] < 0.25  # data drawn from the model class: a good fit
    res = gpu_max_splits(p, ns=(4,), splits=3)
    assert len(res.model_ks[4]) == 3 and sum(res.families.values()) == 3
    assert set(res.to_dict()["by_n"]["4"]) == {
        "model",
        "halves",
        "perfect_model",
        "refit_on_truth",
        "lower_bound",
    }
    with pytest.raises(ValueError, match="splits"):
        gpu_max_splits(p, splits=1)


def test_real_sgemm_split_beats_the_halves_floor_at_small_n(shared_data):
    case = gpu_max_case(shared_data / "gpu_variability" / "sgemm-longhorn-agg.csv", seed=0)
    assert case.law.family == "normal body + GPD tail"  # AIC on the fit half
    assert case.ks[4] <= case.noise_floor_ks[4]
    assert case.ks[16] <= case.noise_floor_ks[16]
    for n in (4, 16, 64, 256):
        assert case.ks[n] >= case.lower_bound_ks[n]
