"""Order-statistic bootstrap and sampling of quantiles against brute-force resampling."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from scipy import stats

from prism_analytic.calibration.fit import _bootstrap_ci
from prism_analytic.calibration.quantile_bootstrap import (
    MAX_RESAMPLES,
    bootstrap_quantiles,
    check_resamples,
    min_resamples,
    percentile_interval,
    sample_quantiles,
    uniform_order_statistics,
)


def test_uniform_order_statistics_have_beta_marginals():
    n, ranks = 50, [3, 25, 26, 49]
    u = uniform_order_statistics(n, ranks, 4000, np.random.default_rng(0))
    for j, k in enumerate(ranks):
        assert stats.kstest(u[:, j], stats.beta(k, n + 1 - k).cdf).pvalue > 1e-3
    assert np.all(np.diff(u, axis=1) > 0)
    # the joint law: U_(26) - U_(25) is a spacing, Beta(1, n)
    assert stats.kstest(u[:, 2] - u[:, 1], stats.beta(1, n).cdf).pvalue > 1e-3


def test_bootstrap_median_and_ratio_match_brute_force_resampling():
    rng = np.random.default_rng(1)
    data = np.round(rng.lognormal(0, 0.3, 41), 2)  # ties, odd n
    fast = bootstrap_quantiles(data, [0.5, 0.9], 3000, np.random.default_rng(2))
    idx = np.random.default_rng(3).integers(0, data.size, (3000, data.size))
    slow = np.quantile(data[idx], [0.5, 0.9], axis=1).T
    for j in range(2):
        assert stats.ks_2samp(fast[:, j], slow[:, j]).pvalue > 1e-3
    assert stats.ks_2samp(fast[:, 1] / fast[:, 0], slow[:, 1] / slow[:, 0]).pvalue > 1e-3


def test_sampled_quantiles_match_sorted_samples_of_the_law():
    n, law = 60, stats.expon()
    fast = sample_quantiles(law.ppf, n, [0.5, 0.99], 3000, np.random.default_rng(4))
    slow = np.quantile(law.rvs((3000, n), random_state=5), [0.5, 0.99], axis=1).T
    for j in range(2):
        assert stats.ks_2samp(fast[:, j], slow[:, j]).pvalue > 1e-3


def test_percentile_interval_always_contains_its_estimate():
    reps = np.array([1.0] * 300 + [2.0] * 700)  # a lumpy bootstrap law
    lo, hi, moved = percentile_interval(reps, 1.5, 0.95)
    assert lo <= 1.5 <= hi and not moved
    lo, hi, moved = percentile_interval(np.full(500, 2.0), 1.0, 0.95)
    assert (lo, hi, moved) == (1.0, 2.0, True)


def test_interval_that_missed_the_estimate_says_so(monkeypatch):
    from prism_analytic.calibration import fit

    data = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    lo, hi, note = _bootstrap_ci(data, "median", 200, 0.95, 0)
    assert lo <= 3.0 <= hi and note == ""
    # resamples whose medians all miss the estimate: the interval reaches it, and says so
    monkeypatch.setattr(
        fit, "bootstrap_quantiles", lambda d, lv, size, rng: np.full((size, 1), 4.0)
    )
    lo, hi, note = _bootstrap_ci(data, "median", 200, 0.95, 0)
    assert (lo, hi) == (3.0, 4.0) and "widened" in note


@pytest.mark.parametrize("bad", [1, 199, MAX_RESAMPLES + 1, 100_000_000, True, 2000.0, "2000"])
def test_resample_count_outside_the_range_is_refused(bad):
    with pytest.raises(ValueError, match=r"n_resamples must be an integer from 200 to 1,000,000"):
        check_resamples(bad, 0.95)


def test_minimum_resamples_leaves_five_beyond_each_end():
    for c in (0.6827, 0.9, 0.95, 0.99):
        b = min_resamples(c)
        assert b * (1 - c) / 2 >= 5 - 1e-9 and (b - 1) * (1 - c) / 2 < 5


def test_bootstrap_memory_does_not_grow_with_steps_times_resamples():
    data = np.random.default_rng(6).lognormal(0, 0.1, 100_000)
    tracemalloc.start()
    _bootstrap_ci(data, "q90_over_median", 2000, 0.95, 0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # resampling the steps would hold 100,000 x 2,000 floats (1.6 GB); a sorted copy is 0.8 MB
    assert peak < 20e6
