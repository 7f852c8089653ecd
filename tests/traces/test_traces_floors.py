"""Noise floors of the trace targets (traces.gpu_floors, traces.step_floors)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from prism_analytic.traces.gpu_floors import (
    disjoint_groups_floor,
    ks_lower_bound,
    max_ks,
    perfect_max_ks,
    plugin_max_levels,
)
from prism_analytic.traces.step_floors import quantile_ci_coverage_bound, target_pass_rates


def test_without_replacement_levels_match_enumerating_every_subset():
    m, n = 8, 3
    counts = np.zeros(m + 1)
    for subset in itertools.combinations(range(1, m + 1), n):
        counts[max(subset)] += 1
    assert plugin_max_levels(m, n, replace=False) == pytest.approx(np.cumsum(counts) / counts.sum())


def test_with_replacement_levels_match_subsampling():
    rng = np.random.default_rng(3)
    m, n = 10, 4
    draws = rng.integers(1, m + 1, size=(200000, n)).max(axis=1)
    freq = np.array([np.mean(draws <= k) for k in range(m + 1)])
    assert plugin_max_levels(m, n) == pytest.approx(freq, abs=0.005)


@pytest.mark.parametrize("replace", [True, False])
def test_lower_bound_is_tight_and_never_beaten(replace):
    rng = np.random.default_rng(0)
    m, n = 40, 16
    bound = ks_lower_bound(m, n, replace=replace)
    b = np.sort(rng.normal(size=m))
    levels = plugin_max_levels(m, n, replace=replace)
    # a continuous CDF through the midpoint of every jump reaches the bound
    mid = (levels[1:] + levels[:-1]) / 2
    assert max_ks(lambda x: np.interp(x, b, mid), b, n, replace=replace) == pytest.approx(bound)
    for _ in range(50):  # continuous laws fitted or not: none gets below it
        loc, scale = rng.normal(0, 0.5), rng.uniform(0.5, 2)
        law = stats.norm(loc, scale)
        ks = max_ks(lambda x, f=law: f.cdf(x) ** n, b, n, replace=replace)
        assert ks >= bound - 1e-12


def test_lower_bound_closed_forms():
    assert ks_lower_bound(196, 64) == pytest.approx((1 - (1 - 1 / 196) ** 64) / 2)
    assert ks_lower_bound(196, 64, replace=False) == pytest.approx(64 / (2 * 196))


@pytest.mark.parametrize("law", [stats.norm(), stats.expon(), stats.genpareto(0.4)])
def test_perfect_model_ks_does_not_depend_on_the_law(law):
    # direct: draw held-out sets from the law and score the law itself
    rng = np.random.default_rng(7)
    m, n = 60, 8
    direct = [
        max_ks(lambda x: law.cdf(x) ** n, law.rvs(m, random_state=rng), n) for _ in range(1500)
    ]
    fast = perfect_max_ks(m, n, reps=20000, seed=1)
    assert stats.ks_2samp(direct, fast).pvalue > 0.001
    assert np.median(direct) == pytest.approx(np.median(fast), rel=0.08)


def test_disjoint_groups_floor():
    f = disjoint_groups_floor(196, 16)
    assert f["groups"] == 12
    assert f["lower_bound"] == pytest.approx(1 / 24)
    assert stats.kstwo(12).cdf(f["lower_bound"] - 1e-9) == 0.0
    assert disjoint_groups_floor(196, 256)["groups"] == 0


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="n = 300 > m = 196"):
        plugin_max_levels(196, 300, replace=False)
    with pytest.raises(ValueError, match="reps"):
        perfect_max_ks(10, 2, reps=1)
    with pytest.raises(ValueError, match="m must be"):
        quantile_ci_coverage_bound(0)
    with pytest.raises(ValueError, match="fit_size"):
        target_pass_rates(np.arange(10.0), 5, predicted=np.arange(5.0), fit_size=5)


def test_p95_coverage_bound_holds_for_the_true_law():
    m = 14
    bound = quantile_ci_coverage_bound(m)
    assert bound == pytest.approx(1 - 0.95**m)
    truth = stats.norm(2.2, 0.01)
    res = target_pass_rates(truth.ppf((np.arange(4000) + 0.5) / 4000), m, reps=200, seed=2)
    rate = res["rates"]["p95 in measured 90% CI"]
    assert rate <= bound + 3 * res["std_error"]
    # a perfect model meets the std-ratio target about as often as chi-square says
    df = m - 1
    exact = stats.chi2.cdf(df / 0.67**2, df) - stats.chi2.cdf(df / 1.5**2, df)
    assert res["rates"]["std ratio in [0.67, 1.5]"] == pytest.approx(exact, abs=0.06)
    assert res["rates"]["|mean err| <= 2%"] == 1.0


def test_fit_noise_reference_matches_the_f_distribution():
    # prediction = a fresh fit set of k normal steps: s_fit / s_test ~ sqrt(F(k-1, m-1))
    k, m = 13, 14
    truth = stats.norm(2.2, 0.01).ppf((np.arange(4000) + 0.5) / 4000)
    res = target_pass_rates(truth, m, fit_size=k, reps=300, seed=4)
    exact = stats.f.cdf(1.5**2, k - 1, m - 1) - stats.f.cdf(0.67**2, k - 1, m - 1)
    assert res["rates"]["std ratio in [0.67, 1.5]"] == pytest.approx(exact, abs=0.07)
