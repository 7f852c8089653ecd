"""Property tests (hypothesis): laws every distribution and operation must obey."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import prism_analytic as pa

# Grid operations cost milliseconds each; a few dozen examples per law keep the file fast.
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOWER = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])

means = st.floats(0.5, 20.0)
cvs = st.floats(0.01, 0.5)


@st.composite
def light_tailed(draw) -> pa.Distribution:
    """A closed-form latency with finite moments of every order that matters here."""
    kind = draw(st.sampled_from(["normal", "lognormal", "gamma", "exponential", "uniform"]))
    m, cv = draw(means), draw(cvs)
    if kind == "normal":
        return pa.normal(m, m * cv)
    if kind == "lognormal":
        return pa.lognormal(m, m * cv)
    if kind == "gamma":
        return pa.gamma(m, m * cv)
    if kind == "exponential":
        return pa.exponential(m, loc=draw(st.floats(0.0, 5.0)))
    return pa.uniform(m * (1 - cv), m * (1 + cv))


@st.composite
def any_exact(draw) -> pa.Distribution:
    """Closed forms, heavy tails, mixtures and exact extremes."""
    kind = draw(st.sampled_from(["light", "pareto", "mixture", "iid_max", "order", "max"]))
    if kind == "light":
        return draw(light_tailed())
    if kind == "pareto":
        return pa.pareto(draw(st.floats(1.2, 5.0)), draw(st.floats(0.1, 3.0)))
    if kind == "mixture":
        w = draw(st.floats(0.001, 0.999))
        return pa.mixture([draw(light_tailed()), draw(light_tailed())], [w, 1 - w])
    if kind == "iid_max":
        return pa.iid_max(draw(light_tailed()), draw(st.integers(2, 10**9)))
    if kind == "order":
        n = draw(st.integers(2, 500))
        return pa.order_statistic(draw(light_tailed()), draw(st.integers(1, n)), n)
    return pa.max_independent(draw(light_tailed()), draw(light_tailed()))


@st.composite
def gridded(draw) -> tuple[pa.GridDistribution, int]:
    """Grid results of each operation, with the factor by which the operation amplifies tail
    round-off (F^n multiplies the SF's absolute FFT noise, ~1e-17 per cell, by n)."""
    kind = draw(st.sampled_from(["sum", "iid_sum", "max", "mixture"]))
    a, b = draw(light_tailed()), draw(light_tailed())
    if kind == "sum":
        return pa.convolve(a, b), 1
    if kind == "iid_sum":
        return pa.iid_sum(a, draw(st.integers(2, 50))), 1
    if kind == "max":
        n = draw(st.integers(2, 10**6))
        return pa.iid_max(pa.convolve(a, b), n), n
    mix = pa.mixture([pa.convolve(a, b), a], [0.3, 0.7])
    return pa.max_independent(mix, b), 2


def _probe(d: pa.Distribution) -> np.ndarray:
    q = np.concatenate([np.geomspace(1e-12, 0.5, 25), 1 - np.geomspace(1e-12, 0.5, 25)])
    x = np.sort(np.asarray(d.quantile(q), dtype=float))
    return x[np.isfinite(x)]


# ----- CDF laws ---------------------------------------------------------------------------------
@FAST
@given(any_exact())
def test_cdf_monotone_and_in_unit_interval(d):
    x = _probe(d)
    x = np.concatenate([x, np.linspace(x[0] - 1, x[-1] + 1, 200)])
    x.sort()
    f = np.asarray(d.cdf(x))
    assert np.all((f >= 0) & (f <= 1))
    assert np.all(np.diff(f) >= -1e-12)
    s = np.asarray(d.sf(x))
    assert np.all((s >= 0) & (s <= 1))
    assert np.all(np.diff(s) <= 1e-12)


@FAST
@given(any_exact())
def test_sf_plus_cdf_is_one(d):
    x = _probe(d)
    f, s = np.asarray(d.cdf(x)), np.asarray(d.sf(x))
    np.testing.assert_allclose(f + s, 1.0, atol=1e-9)


@SLOWER
@given(gridded())
def test_grid_cdf_laws_and_mass_conservation(grid_and_amplification):
    g, amplification = grid_and_amplification
    floor = 1e-12 + 1e-15 * amplification  # FFT round-off, as amplified by the operation
    assert isinstance(g, pa.GridDistribution)
    assert g.lo.sum() + g.below == pytest.approx(1.0, abs=1e-9)
    assert g.hi.sum() + g.above == pytest.approx(1.0, abs=1e-9)
    assert np.all(g.lo >= 0) and np.all(g.hi >= 0)
    x = np.linspace(g.points[0] - g.h, g.points[-1] + g.h, 500)
    f, s = g.cdf(x), g.sf(x)
    # Within FFT round-off of [0, 1]: exactly [0, 1] is a known defect
    # (tests/distributions/test_grid.py).
    assert np.all(np.diff(f) >= -1e-12) and np.all((f >= -1e-12) & (f <= 1 + 1e-12))
    np.testing.assert_allclose(f + s, 1.0, atol=1e-9)
    # The estimate lies in the sandwich: checked through the CDF in the lower half and through
    # the SF in the upper half, where a CDF summed from the left carries ~cells * eps round-off.
    lower = f <= 0.5
    low, high = g.cdf_bounds(x[lower])
    assert np.all(low <= f[lower] + floor) and np.all(f[lower] <= high + floor)
    s_low, s_high = g.sf_bounds(x[~lower])
    s_up = s[~lower]
    assert np.all(s_low <= s_up * (1 + 1e-9) + floor)
    assert np.all(s_up <= s_high * (1 + 1e-9) + floor)


# ----- sums ---------------------------------------------------------------------------------------
@SLOWER
@given(light_tailed(), light_tailed(), light_tailed())
def test_means_and_variances_add_under_convolution(a, b, c):
    s = pa.convolve(a, b, c)
    sd = math.sqrt(a.var() + b.var() + c.var())
    # Each operand's rounding moves its mean by at most h (in fact O(h^2) for the cell-centre
    # estimate) and its variance by O(h * sd + h^2).
    h = s.h
    assert s.mean() == pytest.approx(a.mean() + b.mean() + c.mean(), abs=3 * h + 1e-12)
    assert s.var() == pytest.approx(a.var() + b.var() + c.var(), abs=6 * h * sd + 9 * h * h)


@SLOWER
@given(
    st.floats(-5, 5), st.floats(0.01, 2), st.floats(-5, 5), st.floats(0.01, 2), st.integers(1, 40)
)
def test_bracket_contains_closed_form_sum_of_normals(m1, s1, m2, s2, k):
    s = pa.convolve(pa.normal(m1, s1), pa.iid_sum(pa.normal(m2, s2), k))
    ref = pa.normal(m1 + k * m2, math.sqrt(s1**2 + k * s2**2))
    q = np.array([1e-6, 0.01, 0.5, 0.99, 1 - 1e-6])
    low, high = s.quantile_bracket(q)
    exact = ref.quantile(q)
    assert np.all(low <= exact) and np.all(exact <= high)


@SLOWER
@given(st.floats(0.2, 20), st.floats(0.2, 20), st.floats(0.05, 5), st.integers(1, 30))
def test_bracket_contains_closed_form_sum_of_gammas(k1, k2, theta, m):
    from scipy import stats

    a = pa.from_scipy(stats.gamma(k1, scale=theta))
    b = pa.from_scipy(stats.gamma(k2, scale=theta))
    s = pa.convolve(a, pa.iid_sum(b, m))
    ref = stats.gamma(k1 + m * k2, scale=theta)
    q = np.array([1e-6, 0.01, 0.5, 0.99, 1 - 1e-6])
    low, high = s.quantile_bracket(q)
    exact = ref.ppf(q)
    assert np.all(low <= exact) and np.all(exact <= high)


# ----- maxima -------------------------------------------------------------------------------------
@FAST
@given(light_tailed(), light_tailed())
def test_max_dominates_its_operands(a, b):
    mx = pa.max_independent(a, b)
    x = np.concatenate([_probe(a), _probe(b)])
    f = np.asarray(mx.cdf(x))
    assert np.all(f <= np.asarray(a.cdf(x)) * (1 + 1e-12) + 1e-300)
    assert np.all(f <= np.asarray(b.cdf(x)) * (1 + 1e-12) + 1e-300)


@SLOWER
@given(light_tailed(), light_tailed(), st.integers(2, 1000))
def test_grid_max_dominates_its_operands(a, b, n):
    chain = pa.convolve(a, b)
    mx = pa.max_independent(chain, a)
    top = pa.iid_max(chain, n)
    q = np.array([0.01, 0.5, 0.99])
    for res in (mx, top):
        r_low, r_high = res.quantile_bracket(q)
        c_low, c_high = chain.quantile_bracket(q)
        # The max's upper bound is above the operand's lower bound, at every level.
        assert np.all(r_high >= c_low)
    assert np.all(mx.quantile_bracket(q)[1] >= a.quantile(q))


@FAST
@given(light_tailed(), st.integers(2, 10**4), st.integers(2, 10**4))
def test_iid_max_composes(d, m, n):
    twice = pa.iid_max(pa.iid_max(d, m), n)
    once = pa.iid_max(d, m * n)
    q = np.array([1e-6, 0.01, 0.5, 0.99, 1 - 1e-6])
    np.testing.assert_allclose(twice.quantile(q), once.quantile(q), rtol=1e-9)
    x = np.asarray(once.quantile(q))
    np.testing.assert_allclose(twice.cdf(x), once.cdf(x), rtol=1e-6)


@SLOWER
@given(light_tailed(), st.integers(2, 300), st.integers(2, 300))
def test_iid_max_composes_on_grids(d, m, n):
    g = pa.iid_sum(d, 3)
    twice = pa.iid_max(pa.iid_max(g, m), n)
    once = pa.iid_max(g, m * n)
    q = np.array([0.01, 0.5, 0.99])
    t_low, t_high = twice.quantile_bracket(q)
    o_low, o_high = once.quantile_bracket(q)
    assert np.all(t_low <= o_high) and np.all(o_low <= t_high)  # both contain the exact answer
    np.testing.assert_allclose(twice.quantile(q), once.quantile(q), atol=2 * g.h)


@FAST
@given(light_tailed(), st.integers(2, 10**9))
def test_exact_path_bracket_contains_the_order_statistic_relation(d, n):
    """Q_max(q) = Q(q^(1/n)), computed through the parent's upper tail."""
    mx = pa.iid_max(d, n)
    for q in (1e-3, 0.5, 0.99, 1 - 1e-9):
        low, high = mx.quantile_bracket(q)
        exact = d.isf(-math.expm1(math.log(q) / n))
        assert low <= exact * (1 + 1e-9) and exact * (1 - 1e-9) <= high


# ----- analytic vs Monte Carlo --------------------------------------------------------------------
@settings(max_examples=10, deadline=None, derandomize=True)
@given(light_tailed(), light_tailed(), light_tailed(), st.integers(0, 2**32 - 1))
def test_max_of_mixed_families_within_monte_carlo_dkw_band(a, b, c, seed):
    """Exact claim, so the analytic CDF must lie in the simultaneous DKW band (alpha = 1e-4)."""
    mx = pa.max_independent(a, b, c)
    rng = np.random.default_rng(seed)
    samples = np.max([a.sample(20_000, rng), b.sample(20_000, rng), c.sample(20_000, rng)], axis=0)
    e = pa.empirical(samples)
    x = np.quantile(samples, np.linspace(0.0005, 0.9995, 300))
    low, high = e.cdf_band(x, alpha=1e-4)
    f = np.asarray(mx.cdf(x))
    assert np.all(low <= f) and np.all(f <= high)


@settings(max_examples=6, deadline=None, derandomize=True)
@given(light_tailed(), light_tailed(), st.integers(2, 64), st.integers(0, 2**32 - 1))
def test_grid_max_bounds_meet_monte_carlo_dkw_band(a, b, k, seed):
    """Gridded result: its CDF bounds must intersect the DKW band everywhere."""
    chain = pa.iid_sum(a, k)
    mx = pa.max_independent(chain, b)
    rng = np.random.default_rng(seed)
    chains = np.zeros(20_000)
    for _ in range(k):
        chains += a.sample(20_000, rng)
    samples = np.maximum(chains, b.sample(20_000, rng))
    e = pa.empirical(samples)
    x = np.quantile(samples, np.linspace(0.0005, 0.9995, 300))
    band_low, band_high = e.cdf_band(x, alpha=1e-4)
    low, high = mx.cdf_bounds(x)
    assert np.all(low <= band_high) and np.all(band_low <= high)
