"""Unit tests of GridDistribution: the rounding sandwich and lattice operations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa
from prism_analytic.distributions.grid import (
    GridDistribution,
    convolve_grids,
    discretize,
    mix_grids,
    to_grid,
)

CLOSED_FORMS = {
    "normal": pa.normal(3.0, 0.5),
    "lognormal": pa.lognormal(1.0, 0.3),
    "gamma": pa.gamma(2.0, 1.0),
    "exponential": pa.exponential(1.5),
    "uniform": pa.uniform(-1.0, 2.0),
    "pareto": pa.pareto(3.0),
}
# Pareto's tail reaches beyond any sensible grid: its far quantiles are honest infinite bounds.
PARAMS = pytest.mark.parametrize("name", sorted(CLOSED_FORMS))


def _grid(name: str, cells: int = 2000) -> tuple[pa.Distribution, GridDistribution]:
    d = CLOSED_FORMS[name]
    h = float(d.quantile(0.999) - d.quantile(0.001)) / cells
    return d, discretize(d, h)


def _probe(d: pa.Distribution, g: GridDistribution) -> np.ndarray:
    """Points on and between lattice points, across the bulk and into both tails."""
    q = np.concatenate([np.geomspace(1e-14, 0.5, 60), 1 - np.geomspace(1e-14, 0.5, 60)])
    x = np.concatenate([d.quantile(q), g.points[:: max(1, g.points.size // 50)]])
    return np.concatenate([x, x + 0.37 * g.h, [g.points[0] - g.h, g.points[-1] + g.h]])


def assert_contains_cdf(g: GridDistribution, d: pa.Distribution, x: np.ndarray) -> None:
    low, high = g.cdf_bounds(x)
    f = d.cdf(x)
    assert np.all(low <= f + 1e-13) and np.all(f <= high + 1e-13)
    s_low, s_high = g.sf_bounds(x)
    s = d.sf(x)
    # Tail probabilities keep relative precision: compare with a relative slack only.
    assert np.all(s_low <= s * (1 + 1e-9) + 1e-300) and np.all(s * (1 - 1e-9) <= s_high)


def assert_mass_conserved(g: GridDistribution, tol: float = 1e-12) -> None:
    assert g.lo.sum() + g.below == pytest.approx(1.0, abs=tol)
    assert g.hi.sum() + g.above == pytest.approx(1.0, abs=tol)
    assert np.all(g.lo >= 0) and np.all(g.hi >= 0)


# ----- discretisation ---------------------------------------------------------------------------
@PARAMS
def test_discretised_bounds_contain_the_exact_cdf_and_sf(name):
    d, g = _grid(name)
    assert_mass_conserved(g)
    assert_contains_cdf(g, d, _probe(d, g))


@PARAMS
def test_quantile_bracket_ordering_and_containment(name):
    d, g = _grid(name)
    q = np.array([1e-12, 1e-6, 0.01, 0.25, 0.5, 0.75, 0.99, 1 - 1e-6, 1 - 1e-12])
    low, high = g.quantile_bracket(q)
    est = g.quantile(q)
    # a level inside a tail atom is unresolved: its point estimate is nan, its bracket infinite
    resolved = np.isfinite(low) & np.isfinite(high)
    assert np.all(np.isnan(est[~resolved]))
    assert np.all(low[resolved] <= est[resolved]) and np.all(est[resolved] <= high[resolved])
    exact = d.quantile(q)
    assert np.all(low <= exact) and np.all(exact <= high)
    assert np.all(np.diff(low) >= 0) and np.all(np.diff(high) >= 0)
    inner = (q >= 1e-6) & (q <= 1 - 1e-6)
    assert np.all(high[inner] - low[inner] <= 2 * g.h + 1e-12)  # one cell per side at most


@PARAMS
def test_isf_bracket_contains_tiny_upper_tails(name):
    d, g = _grid(name)
    p = np.array([1e-3, 1e-8, 1e-12])
    low, high = g.isf_bracket(p)
    exact = d.isf(p)
    assert np.all(low <= exact) and np.all(exact <= high)


@PARAMS
def test_point_estimate_lies_in_its_bounds(name):
    d, g = _grid(name)
    x = _probe(d, g)
    low, high = g.cdf_bounds(x)
    f = g.cdf(x)
    assert np.all(low <= f + 1e-12) and np.all(f <= high + 1e-12)  # cumsum round-off
    assert np.all(np.diff(g.cdf(np.sort(x))) >= 0)


def test_quantile_inside_unresolved_tail_mass_is_an_infinite_bound():
    d = pa.normal(0.0, 1.0)
    g = discretize(d, 0.01)
    assert g.above > 0 and g.below > 0
    low, high = g.quantile_bracket(1 - 1e-16)
    assert high == np.inf and np.isfinite(low)
    low, high = g.quantile_bracket(1e-17)
    assert low == -np.inf and np.isfinite(high)


def test_heavy_tail_beyond_the_cap_becomes_an_explicit_atom():
    d = pa.pareto(1.5)  # Q(1 - 1e-15) = 1e10: far more than max_cells cells of the bulk
    policy = pa.GridPolicy(max_cells=4096)
    g = discretize(d, 0.001, policy)
    assert g.lo.size <= policy.max_cells
    assert g.above == pytest.approx(float(d.sf(g.points[-1])), rel=1e-12)
    assert g.quantile_bracket(1 - 0.5 * g.above)[1] == np.inf
    assert_mass_conserved(g)


def test_mean_bracket_contains_the_exact_mean_for_bounded_support():
    d = pa.uniform(-1.0, 2.0)
    g = discretize(d, 0.001)
    low, high = g.mean_bracket()
    assert low <= d.mean() <= high
    assert high - low <= 0.001 + 1e-12
    assert g.mean() == pytest.approx(d.mean(), abs=1e-9)
    assert g.var() == pytest.approx(d.var(), rel=1e-6)


# ----- lattice operations -----------------------------------------------------------------------
@PARAMS
@pytest.mark.parametrize("factor", [2, 3.5, 17])
def test_rebin_keeps_the_sandwich(name, factor):
    d, g = _grid(name)
    r = g.rebin(g.h * factor)
    assert r.h == pytest.approx(g.h * factor)
    assert_mass_conserved(r)
    x = _probe(d, g)
    assert_contains_cdf(r, d, x)
    # Coarser bounds are looser: they contain the finer ones. Probe off both lattices: at a
    # lattice point, x / h may round to either neighbouring cell (both answers are valid bounds).
    x = x[np.abs(x / r.h - np.round(x / r.h)) > 1e-6]
    x = x[np.abs(x / g.h - np.round(x / g.h)) > 1e-6]
    (lo_f, hi_f), (lo_c, hi_c) = g.cdf_bounds(x), r.cdf_bounds(x)
    assert np.all(lo_c <= lo_f + 1e-13) and np.all(hi_f <= hi_c + 1e-13)


def test_rebin_refuses_to_refine():
    _, g = _grid("normal")
    assert g.rebin(g.h) is g
    with pytest.raises(ValueError, match="cannot refine"):
        g.rebin(g.h / 2)


@pytest.mark.parametrize("a", [0.25, 1.0, 3.0])
def test_scaled_is_exact(a):
    d, g = _grid("gamma")
    s = g.scaled(a)
    assert s.h == pytest.approx(g.h * a)
    np.testing.assert_array_equal(s.lo, g.lo)
    ref = d.scale(a)
    assert_contains_cdf(s, ref, a * _probe(d, g))


@pytest.mark.parametrize("steps", [0, 7, -3, 2.5, 0.01, -4.99])
def test_shifted_keeps_the_sandwich(steps):
    d, g = _grid("lognormal")
    c = steps * g.h
    s = g.shifted(c)
    assert_mass_conserved(s)
    ref = d.shift(c)
    assert_contains_cdf(s, ref, _probe(d, g) + c)
    grows = 0 if float(steps).is_integer() else 1  # off-lattice: one cell of rounding
    assert s.lo.size == g.lo.size + grows


def test_grid_arithmetic_stays_on_the_lattice():
    _, g = _grid("normal")
    out = 2.0 * g + 1.0
    assert isinstance(out, GridDistribution)
    assert out.h == pytest.approx(2 * g.h)


def test_trimmed_conserves_mass_and_moves_tails_into_atoms():
    d = pa.normal(0.0, 1.0)
    g = discretize(d, 0.001)
    loose = GridDistribution(
        g.h,
        g.k0 - 500,
        np.pad(g.lo, 500),
        np.pad(g.hi, 500),
        g.below,
        g.above,
        pa.GridPolicy(tail_mass=1e-6),
    )
    t = loose.trimmed()
    assert_mass_conserved(t)
    assert t.lo.size < g.lo.size
    assert t.below == pytest.approx(d.cdf(t.points[0]), rel=0.01)
    assert 0 < t.above <= 1e-6 + g.above
    assert_contains_cdf(t, d, d.quantile(np.linspace(0.01, 0.99, 50)))


def test_trimmed_caps_the_length_and_keeps_the_sandwich():
    d = pa.normal(0.0, 1.0)
    policy = pa.GridPolicy(max_cells=1024)
    g = discretize(d, 1e-3)  # about 16k cells under the default policy
    capped = GridDistribution(g.h, g.k0, g.lo, g.hi, g.below, g.above, policy).trimmed()
    assert capped.lo.size <= policy.max_cells + 2  # see the strict xfail below for the +2
    assert_mass_conserved(capped)
    assert_contains_cdf(capped, d, _probe(d, g))


def test_trimmed_respects_max_cells_exactly():
    policy = pa.GridPolicy(max_cells=100)
    g = GridDistribution(0.01, 5, np.full(1000, 1e-3), np.full(1000, 1e-3), policy=policy)
    assert g.trimmed().lo.size <= policy.max_cells


def test_grid_cdf_point_estimate_never_exceeds_one():
    d = pa.convolve(pa.normal(0.5, 0.05), pa.uniform(1.35, 1.65))
    x = np.linspace(d.points[0] - d.h, d.points[-1] + d.h, 5000)
    assert float(np.max(d.cdf(x))) <= 1.0


def test_to_grid_point_mass_brackets_the_value():
    g = to_grid(pa.point_mass(1.2345), 0.01)
    low, high = g.quantile_bracket(0.5)
    assert low <= 1.2345 <= high and high - low <= 0.01 + 1e-12
    assert_mass_conserved(g)


def test_convolve_grids_conserves_mass_and_brackets_the_sum():
    a = discretize(pa.normal(1.0, 0.1), 1e-3)
    b = discretize(pa.normal(2.0, 0.2), 1e-3)
    s = convolve_grids(a, b)
    assert_mass_conserved(s, tol=1e-10)
    ref = pa.normal(3.0, float(np.hypot(0.1, 0.2)))
    assert_contains_cdf(s, ref, ref.quantile(np.linspace(1e-6, 1 - 1e-6, 101)))


def test_mix_grids_brackets_the_mixture():
    a = discretize(pa.normal(1.0, 0.1), 1e-3)
    b = discretize(pa.gamma(2.0, 0.3), 1e-3)
    m = mix_grids([a, b], np.array([0.25, 0.75]))
    ref = pa.mixture([pa.normal(1.0, 0.1), pa.gamma(2.0, 0.3)], [0.25, 0.75])
    assert_mass_conserved(m)
    assert_contains_cdf(m, ref, ref.quantile(np.linspace(1e-6, 1 - 1e-6, 101)))


def test_constructor_rejects_inconsistent_arrays():
    with pytest.raises(ValueError, match="lo and hi"):
        GridDistribution(0.1, 0, np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="lo and hi"):
        GridDistribution(0.1, 0, np.array([]), np.array([]))
    with pytest.raises(ValueError, match="h must be finite and > 0"):
        GridDistribution(0.0, 0, np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="h must be finite and > 0"):
        GridDistribution(np.nan, 0, np.ones(3), np.ones(3))


def test_summary_and_to_dict_report_the_bracket_and_policy():
    _, g = _grid("normal")
    d = g.to_dict()
    assert d["policy"] == pa.DEFAULT_POLICY.to_dict()
    assert d["bracket"]["0.99"][0] <= d["quantiles"]["0.99"] <= d["bracket"]["0.99"][1]
    assert "bracket" in g.summary()


def test_discretize_from_cdf_not_pdf_keeps_atoms_of_a_scipy_discrete_like_step():
    # A uniform's CDF has kinks at the lattice edges: cell masses are exact CDF differences.
    d = pa.uniform(0.0, 1.0)
    g = discretize(d, 0.125)
    inside = g.lo[(g.points >= 0) & (g.points < 1)]
    np.testing.assert_allclose(inside, 0.125, rtol=1e-12)
    assert stats.uniform.cdf(0.5) == pytest.approx(float(np.sum(g.hi[g.points <= 0.5])))
