"""Monte Carlo quantile intervals cover the true quantile at their nominal rate at every n.

The intervals are the ground truth of every agreement claim, so their coverage is measured,
not assumed: over many seeds, the interval for the q-quantile of one exponential op must
contain the true quantile ``-log(1 - q)`` at least 93% of the time for a 95% interval (the
sampling noise of 400 seeds is about 1.1%). Small samples go through ``predict``; the large
ones (1,000 and 10,000) sample the interval construction directly (sorted draws, the same
function).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa
from prism_analytic.engines.order_stat_interval import (
    order_statistic_indices,
    order_statistic_interval,
)

LEVELS = (0.5, 0.99, 0.999)
SEEDS = 400
MIN_COVERAGE = 0.93


def _true_quantile(q: float) -> float:
    return -math.log1p(-q)  # Exp(1)


@pytest.mark.parametrize("n", [2, 20, 100])
def test_predict_interval_coverage(n: int) -> None:
    g = pa.StepGraph("one-exp")
    g.add_op("a", pa.exponential(1.0))
    truth = np.array([_true_quantile(q) for q in LEVELS])
    hits = np.zeros(len(LEVELS))
    for seed in range(SEEDS):
        res = pa.predict(g, "montecarlo", samples=n, seed=seed)
        low, high = res.quantile_bracket(np.array(LEVELS))
        hits += (low <= truth) & (truth <= high)
    coverage = hits / SEEDS
    assert np.all(coverage >= MIN_COVERAGE), dict(zip(LEVELS, coverage))


@pytest.mark.parametrize("n", [1000, 10_000])
def test_direct_interval_coverage(n: int) -> None:
    rng = np.random.default_rng(20261208 + n)
    draws = np.sort(rng.exponential(size=(SEEDS, n)), axis=1)
    for q in LEVELS:
        truth = _true_quantile(q)
        ends = np.array([order_statistic_interval(row, q) for row in draws])
        coverage = np.mean((ends[:, 0] <= truth) & (truth <= ends[:, 1]))
        assert coverage >= MIN_COVERAGE, (n, q, coverage)


@pytest.mark.parametrize("n", [1, 2, 20, 100, 1000, 10_000, 1_000_000])
@pytest.mark.parametrize("q", [1e-9, 0.01, 0.5, 0.99, 0.999, 1 - 1e-9])
def test_exact_binomial_coverage(n: int, q: float) -> None:
    """Coverage of a continuous law's interval is binomial: at least the nominal 95%."""
    lo, hi = order_statistic_indices(n, q, 0.95)
    law = stats.binom(n, q)
    miss_low = law.cdf(lo) if lo >= 0 else 0.0  # fewer than lo + 1 draws at or below xi
    miss_high = law.sf(hi) if hi < n else 0.0  # hi + 1 or more draws below xi
    assert 1.0 - miss_low - miss_high >= 0.95 - 1e-12


@pytest.mark.parametrize("n", [1, 2, 7, 20, 137])
@pytest.mark.parametrize("q", [0.01, 0.3, 0.5, 0.9, 0.99])
def test_matches_scipy_quantile_test(n: int, q: float) -> None:
    x = np.sort(np.random.default_rng(n).normal(size=n))
    ci = stats.quantile_test(x, p=q).confidence_interval(0.95)
    expected = (
        -math.inf if np.isnan(ci.low) else float(ci.low),
        math.inf if np.isnan(ci.high) else float(ci.high),
    )
    assert order_statistic_interval(x, q, 0.95) == expected


def test_unresolvable_ends_are_infinite() -> None:
    x = np.sort(np.random.default_rng(3).exponential(size=20))
    assert order_statistic_interval(x, 0.99)[1] == math.inf
    assert order_statistic_interval(x[:2], 0.5) == (-math.inf, math.inf)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"q": 1.5}, "q"),
        ({"q": float("nan")}, "q"),
        ({"confidence": 1.0}, "confidence"),
        ({"confidence": 0.0}, "confidence"),
    ],
)
def test_bad_arguments_name_the_field(kwargs: dict, field: str) -> None:
    args = {"q": 0.5, "confidence": 0.95} | kwargs
    with pytest.raises(ValueError, match=field):
        order_statistic_interval(np.arange(5.0), **args)


def test_empty_sample_is_refused() -> None:
    with pytest.raises(ValueError, match="sorted_samples"):
        order_statistic_interval(np.array([]), 0.5)
