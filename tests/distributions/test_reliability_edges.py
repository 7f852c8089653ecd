"""Hostile-input edges of the core: far-tail maxima, undefined and overflowing moments.

Each reference is a closed form (scipy's own quantiles and shape constants).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa


@pytest.mark.parametrize("q", [1e-50, 1e-300, 1e-12])
@pytest.mark.parametrize("n", [2, 1000])
def test_lower_tail_quantile_of_a_maximum(q: float, n: int) -> None:
    """F^n = q puts one copy at level q^(1/n): 1 - (1 - 1e-25) rounded to 0 gave -inf."""
    exact = stats.norm.ppf(math.exp(math.log(q) / n))
    d = pa.iid_max(pa.normal(0.0, 1.0), n)
    low, high = d.quantile_bracket(q)
    assert low <= exact <= high
    assert high - low < 1e-9 * abs(exact) + 1e-12
    assert d.quantile(q) == pytest.approx(exact, rel=1e-12)


def test_upper_tail_quantile_of_a_maximum_keeps_its_digits() -> None:
    d = pa.iid_max(pa.normal(0.0, 1.0), 10**9)
    assert d.isf(1e-12) == pytest.approx(stats.norm.isf(-math.expm1(math.log1p(-1e-12) / 1e9)))


def test_cauchy_mean_is_undefined_not_infinite() -> None:
    c = pa.from_scipy(stats.cauchy(10.0, 1.0))
    assert math.isnan(c.mean())
    assert "mean undefined" in c.summary()
    assert math.isnan(pa.from_scipy(stats.t(1)).mean())


@pytest.mark.parametrize(
    ("frozen", "mean"),
    [
        (stats.pareto(0.9), math.inf),  # bounded below: the mean diverges upwards
        (stats.invweibull(0.8), math.inf),  # scipy answers Gamma(1 - 1/c) < 0 here
        (stats.levy_l(), -math.inf),  # bounded above, heavy lower tail
        (stats.pareto(3.0), 1.5),
    ],
)
def test_divergent_means_have_their_sign(frozen, mean: float) -> None:
    assert pa.from_scipy(frozen).mean() == mean


def test_variance_of_a_heavy_family_is_infinite() -> None:
    assert pa.from_scipy(stats.invweibull(1.5)).var() == math.inf


def test_std_does_not_overflow_with_the_variance() -> None:
    assert pa.normal(1e300, 1e300).std() == 1e300
    assert pa.normal(1e300, 1e300).scale(0.5).std() == 5e299
    assert pa.normal(1.0, 2e-168).std() == 2e-168  # the variance underflows to 0 there
    assert pa.from_scipy(stats.lognorm(1e-10, scale=1e-160)).std() == pytest.approx(1e-170)
    assert pa.lognormal(1.0, 0.5).std() == pytest.approx(0.5, rel=1e-12)


def test_slowdown_at_one_gpu_is_finite() -> None:
    from prism_analytic.analyses.slowdown import slowdown

    row = slowdown("llama3-8b", [1]).rows[0]
    values = [row.mean_s, row.p95_s, row.p_step_slow, row.p_job_slow, row.p_degraded]
    assert np.isfinite(values).all()


def test_undefined_mean_survives_a_far_location() -> None:
    """The tail test reads the standard form: loc 1e300 would swallow the tail's digits."""
    assert math.isnan(pa.from_scipy(stats.cauchy(1e300, 1e-300)).mean())
    assert pa.from_scipy(stats.levy_l(loc=1e300)).mean() == -math.inf
