"""Heavy-tailed sums on the log lattice: brackets against closed forms and Monte Carlo."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa
from prism_analytic.distributions.log_lattice import (
    LogLatticeDistribution,
    _row_errors,
    needs_log_lattice,
    to_log_lattice,
)
from prism_analytic.distributions.roundoff import fft_l1_error
from prism_analytic.policy import GridPolicy

LOGNORMAL3 = pa.from_scipy(stats.lognorm(3.0))  # sigma 3, median 1


def _mc_sums(law: str, m: int, samples: int, seed: int) -> np.ndarray:
    """``samples`` independent sums of ``m`` copies, drawn in blocks of at most 1e7 values."""
    rng = np.random.default_rng(seed)
    out = np.empty(samples)
    per_block = max(1, 10**7 // m)
    for start in range(0, samples, per_block):
        k = min(per_block, samples - start)
        if law.startswith("pareto"):
            x = rng.random((k, m)) ** (-1.0 / float(law[6:]))
        else:
            x = rng.lognormal(0.0, 3.0, (k, m))
        out[start : start + k] = x.sum(axis=1)
    return np.sort(out)


def _mc_interval(x: np.ndarray, q: float, z: float = 4.0) -> tuple[float, float]:
    """Distribution-free interval for the q-quantile: order statistics at rank q n +- z sd."""
    sd = math.sqrt(x.size * q * (1 - q))
    lo = max(int(math.floor(q * x.size - z * sd)), 0)
    hi = min(int(math.ceil(q * x.size + z * sd)), x.size - 1)
    return float(x[lo]), float(x[hi])


def _law(name: str) -> pa.Distribution:
    return LOGNORMAL3 if name == "lognormal3" else pa.pareto(float(name[6:]))


@pytest.mark.parametrize("name", ["pareto0.5", "pareto1.5", "lognormal3"])
def test_discretised_law_brackets_its_exact_quantiles(name):
    d = _law(name)
    lat = to_log_lattice(d, 512)
    q = np.array([1e-9, 1e-3, 0.5, 0.99, 1 - 1e-9])
    low, high = lat.quantile_bracket(q)
    exact = d.quantile(q)
    assert np.all(low <= exact) and np.all(exact <= high)
    assert np.all(high - low <= 2.0 / 512 * np.abs(exact))  # one cell: 1/n of the value
    assert lat.lo.sum() + lat.below == pytest.approx(1.0, abs=1e-12)
    assert lat.hi.sum() + lat.above == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize(
    ("name", "m", "samples", "levels"),
    [
        ("pareto1.5", 10, 200_000, (0.5, 0.99)),
        ("pareto1.5", 1000, 10_000, (0.5, 0.99)),
        ("pareto1.5", 10**6, 60, (0.5,)),
        ("lognormal3", 10, 200_000, (0.5, 0.99)),
        ("lognormal3", 1000, 10_000, (0.5, 0.99)),
        ("lognormal3", 10**6, 60, (0.5,)),
        ("pareto0.5", 10, 200_000, (0.5, 0.99)),
        ("pareto0.5", 1000, 10_000, (0.5,)),
    ],
)
def test_sum_brackets_meet_monte_carlo(name, m, samples, levels):
    s = pa.iid_sum(_law(name), m)
    assert isinstance(s, LogLatticeDistribution)
    x = _mc_sums(name, m, samples, seed=m % 97 + 1)
    for q in levels:
        low, high = s.quantile_bracket(q)
        lo_mc, hi_mc = _mc_interval(x, q)
        assert low <= hi_mc and lo_mc <= high, (q, (low, high), (lo_mc, hi_mc))
        assert low <= s.quantile(q) <= high
        # the bracket is narrow: a few tenths of a percent of the value
        assert high - low <= 0.01 * s.quantile(q), q


def test_moments_are_inf_where_infinite():
    s = pa.iid_sum(pa.pareto(0.5), 100)
    assert s.mean() == math.inf and s.std() == math.inf
    s = pa.iid_sum(pa.pareto(1.5), 100)
    assert s.mean() == pytest.approx(300.0, rel=1e-12) and s.std() == math.inf
    s = pa.iid_sum(pa.pareto(2.5), 100)
    assert s.mean() == pytest.approx(100 * 2.5 / 1.5, rel=1e-12)
    assert s.std() == pytest.approx(10 * pa.pareto(2.5).std(), rel=1e-12)
    s = pa.convolve(pa.pareto(1.5), pa.pareto(0.5))
    assert s.mean() == math.inf and s.tail_index == 0.5


def test_maximum_of_a_lattice_law_brackets_the_exact_maximum():
    d = pa.pareto(1.5)
    lat = to_log_lattice(d, 1024)
    for n in (10, 10**6):
        exact = pa.iid_max(d, n)
        low, high = pa.iid_max(lat, n).quantile_bracket([0.5, 0.99])
        assert np.all(low <= exact.quantile([0.5, 0.99]))
        assert np.all(exact.quantile([0.5, 0.99]) <= high)


def test_replica_group_of_a_heavy_sum_stays_on_the_lattice():
    body = pa.iid_sum(pa.pareto(1.5), 100)
    group = pa.iid_max(body, 10**6)
    assert isinstance(group, LogLatticeDistribution)
    low, high = group.quantile_bracket(0.99)
    # the group's p99 sits where one body exceeds it with probability 1e-8; a body's tail
    # there is dominated by one large copy: P(S > x) ~ 100 (x - 300)^-1.5 (lower bound:
    # P(S > x) >= P(one copy > x - 99), since the other 99 copies are >= 1 each)
    floor = 99 + (100 / -math.expm1(math.log(0.99) / 1e6)) ** (1 / 1.5)
    assert low >= 0.99 * floor and math.isfinite(high) and high - low <= 0.01 * high


def test_conversion_to_a_linear_grid_keeps_the_sandwich():
    s = pa.iid_sum(pa.pareto(1.5), 1000)
    g = pa.distributions.to_grid(s, 1.0)
    q = np.array([0.5, 0.99])
    g_low, g_high = g.quantile_bracket(q)
    low, high = s.quantile_bracket(q)
    assert np.all(g_low <= low) and np.all(high <= g_high)
    assert np.all(g_high - g_low <= 0.02 * s.quantile(q))


def test_folded_roundoff_brackets():
    policy = GridPolicy(fold_roundoff=True)
    s = pa.iid_sum(pa.pareto(1.5), 1000, policy=policy)
    assert s.roundoff == 0.0 and s.below > 0
    x = _mc_sums("pareto1.5", 1000, 20_000, seed=11)
    for q in (0.5, 0.99):
        low, high = s.quantile_bracket(q)
        lo_mc, hi_mc = _mc_interval(x, q)
        assert low <= hi_mc and lo_mc <= high


def test_dispatch_follows_the_tail():
    for light in (pa.normal(1, 0.1), pa.gamma(1, 0.5), pa.lognormal(1, 1), pa.pareto(3.5)):
        assert not needs_log_lattice(light)
    for heavy in (pa.pareto(0.5), pa.pareto(2.5), LOGNORMAL3):
        assert needs_log_lattice(heavy)
    assert not needs_log_lattice(pa.from_scipy(stats.t(1.5)))  # long lower tail: linear
    assert isinstance(pa.convolve(pa.pareto(2.5), pa.normal(1, 0.1)), LogLatticeDistribution)


def test_row_errors_match_the_scalar_bound():
    rng = np.random.default_rng(2)
    a, b = rng.random((4, 300)), rng.random((4, 301))
    rows = sum(fft_l1_error(a[i], b[i]) for i in range(4))
    assert _row_errors(a, b) == pytest.approx(rows, rel=1e-12)


def test_json_round_trip_and_checked_fields():
    import json

    from prism_analytic.distributions.serialize import from_spec, to_spec

    s = pa.iid_sum(pa.pareto(1.5), 100)
    spec = json.loads(json.dumps(to_spec(s), allow_nan=False))
    back = from_spec(spec)
    assert isinstance(back, LogLatticeDistribution)
    assert back.quantile_bracket(0.99) == s.quantile_bracket(0.99)
    assert back.mean() == 300.0 and back.std() == math.inf
    spec["fields"]["below"] = 0.5
    with pytest.raises(ValueError, match="must sum to 1"):
        from_spec(spec)


def test_mass_at_zero_and_very_wide_laws_stay_resolved():
    # half the copies take no time: the point mass at 0 is the lower side's zero atom
    d = pa.mixture([pa.point_mass(0.0), pa.pareto(1.5)], [0.5, 0.5])
    s = pa.iid_sum(d, 100)
    rng = np.random.default_rng(4)
    x = np.sort(
        np.where(rng.random((40_000, 100)) < 0.5, 0.0, rng.random((40_000, 100)) ** (-1 / 1.5)).sum(
            1
        )
    )
    for q in (0.01, 0.5, 0.99):
        low, high = s.quantile_bracket(q)
        lo_mc, hi_mc = _mc_interval(x, q)
        assert low <= hi_mc and lo_mc <= high and high - low <= 0.01 * s.quantile(q)
    # sigma 30: more octaves than a lattice holds; the bottom ones round down to 0
    wide = pa.iid_sum(pa.from_scipy(stats.lognorm(30.0)), 100)
    low, high = wide.quantile_bracket(0.5)
    assert 0 < low <= high <= 1.01 * low


def _sum_of_two_sf(d: pa.Distribution, s: float) -> float:
    """P(X1 + X2 > s) by quadrature: 2 int_lo^(s/2) f(x) S(s - x) dx + S(s/2)^2."""
    from scipy import integrate

    lo, pdf, sf = d.support[0], d.frozen.pdf, d.frozen.sf
    edges = np.unique(np.concatenate(([lo], np.geomspace(max(lo, 1e-12), s / 2, 24))))
    total = sum(
        integrate.quad(lambda x: pdf(x) * sf(s - x), a, b, epsrel=1e-10, limit=100)[0]
        for a, b in zip(edges[:-1], edges[1:])
    )
    return 2 * total + sf(s / 2) ** 2


@pytest.mark.parametrize("name", ["pareto0.5", "pareto1.5", "lognormal3"])
def test_two_copies_bracket_the_quadrature_quantiles(name):
    from scipy import optimize

    d = _law(name)
    s2 = pa.iid_sum(d, 2)
    for q in (0.99, 1 - 1e-6):  # the median is checked against Monte Carlo above
        low, high = s2.quantile_bracket(q)
        exact = optimize.brentq(
            lambda s, p=1 - q: _sum_of_two_sf(d, s) - p, 0.9 * low, 1.1 * high, xtol=1e-7 * high
        )
        assert low <= exact <= high and high - low <= 0.01 * exact, q


def test_maximum_of_a_shifted_lattice_has_no_zero_atom():
    d = pa.mixture([pa.normal(1, 0.1), pa.pareto(0.32)], [0.9, 0.1])  # reaches below 0
    g = pa.iid_max(pa.iid_sum(d, 2), 6)
    assert g.zero == 0.0 and not g.nonneg
    low, high = g.quantile_bracket(0.5)
    assert math.isfinite(low) and high - low <= 0.01 * high
