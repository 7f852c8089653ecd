"""Bad input at the public boundary: a specific error that names the argument."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa

D = pa.normal(0.0, 1.0)


# ----- constructor parameters ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda: pa.normal(0, -1), ValueError, r"std must be > 0, got -1"),
        (lambda: pa.normal(0, 0), ValueError, r"std must be > 0, got 0"),
        (lambda: pa.lognormal(1, -0.1), ValueError, r"std must be > 0"),
        (lambda: pa.lognormal(1, 0), ValueError, r"std must be > 0"),
        (lambda: pa.lognormal(-1, 0.1), ValueError, r"mean must be > 0"),
        (lambda: pa.gamma(1, 0), ValueError, r"std must be > 0"),
        (lambda: pa.gamma(0, 1), ValueError, r"mean must be > 0"),
        (lambda: pa.exponential(-1), ValueError, r"mean must be > 0"),
        (lambda: pa.pareto(0), ValueError, r"alpha must be > 0"),
        (lambda: pa.pareto(2, scale=-1), ValueError, r"scale must be > 0"),
        (lambda: pa.uniform(2, 1), ValueError, r"high must be > low"),
        (lambda: pa.uniform(1, 1), ValueError, r"high must be > low"),
    ],
)
def test_nonpositive_or_inconsistent_parameters(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda v: pa.normal(v, 1), "mean"),
        (lambda v: pa.normal(0, v), "std"),
        (lambda v: pa.lognormal(v, 1), "mean"),
        (lambda v: pa.lognormal(1, v), "std"),
        (lambda v: pa.gamma(v, 1), "mean"),
        (lambda v: pa.gamma(1, v), "std"),
        (lambda v: pa.exponential(v), "mean"),
        (lambda v: pa.exponential(1, loc=v), "loc"),
        (lambda v: pa.uniform(v, 10), "low"),
        (lambda v: pa.uniform(0, v), "high"),
        (lambda v: pa.pareto(v), "alpha"),
        (lambda v: pa.point_mass(v), "value"),
    ],
)
def test_nan_and_inf_parameters(make, name, bad):
    with pytest.raises(ValueError, match=rf"{name} must be (finite|> 0)"):
        make(bad)


@pytest.mark.parametrize("bad", ["1", None, [1.0], True])
def test_non_numeric_parameters(bad):
    with pytest.raises(TypeError, match="mean must be a real number"):
        pa.normal(bad, 1.0)


def test_from_scipy_rejects_non_frozen_and_non_finite():
    with pytest.raises(TypeError, match="frozen must be a frozen scipy.stats continuous"):
        pa.from_scipy(stats.norm)
    with pytest.raises(TypeError, match="frozen must be a frozen scipy.stats continuous"):
        pa.from_scipy(stats.poisson(3))
    with pytest.raises(ValueError, match="parameters must be finite"):
        pa.from_scipy(stats.norm(0, np.inf))


@pytest.mark.parametrize("frozen", [stats.norm(0, -1), stats.gamma(-1.0), stats.lognorm(s=-0.5)])
def test_from_scipy_rejects_invalid_parameters(frozen):
    with pytest.raises(ValueError, match="frozen"):
        pa.from_scipy(frozen)


def test_grid_policy_fields():
    with pytest.raises(ValueError, match="rel_width must be > 0"):
        pa.GridPolicy(rel_width=0)
    with pytest.raises(ValueError, match="rel_width must be < 1"):
        pa.GridPolicy(rel_width=2)
    with pytest.raises(TypeError, match="max_cells must be an integer"):
        pa.GridPolicy(max_cells=2.5)
    with pytest.raises(ValueError, match="max_cells must be an integer >= 16"):
        pa.GridPolicy(max_cells=4)
    with pytest.raises(ValueError, match="tail_mass must be finite"):
        pa.GridPolicy(tail_mass=np.nan)
    with pytest.raises(ValueError, match="tail_mass must be < 1e-3"):
        pa.GridPolicy(tail_mass=0.5)


# ----- counts -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("op", "name"),
    [
        (lambda v: pa.iid_max(D, v), "n"),
        (lambda v: pa.iid_sum(D, v), "m"),
        (lambda v: pa.order_statistic(D, 1, v), "n"),
        (lambda v: pa.order_statistic(D, v, 5), "k"),
        (lambda v: D.sample(v), "size"),
    ],
)
def test_counts(op, name):
    lowest = -1 if name == "size" else 0
    with pytest.raises(ValueError, match=rf"{name} must be an integer >= \d, got {lowest}"):
        op(lowest)
    with pytest.raises(TypeError, match=rf"{name} must be an integer.*2\.5"):
        op(2.5)
    with pytest.raises(TypeError, match=rf"{name} must be an integer, got bool"):
        op(True)
    with pytest.raises(TypeError, match=rf"{name} must be an integer"):
        op("3")
    with pytest.raises(TypeError, match=rf"{name} must be an integer"):
        op(float("nan"))


def test_counts_beyond_the_caps():
    with pytest.raises(ValueError, match=r"n must be <= 1000000000000"):
        pa.iid_max(D, 10**13)
    with pytest.raises(ValueError, match=r"m must be <= 1000000000"):
        pa.iid_sum(D, 10**10)
    with pytest.raises(ValueError, match=r"k must lie in \[1, n\] = \[1, 5\], got 6"):
        pa.order_statistic(D, 6, 5)


def test_integral_floats_and_numpy_integers_are_counts():
    assert pa.iid_max(D, 4.0).quantile(0.5) == pa.iid_max(D, np.int64(4)).quantile(0.5)


# ----- probability levels and points --------------------------------------------------------------
GRID = pa.iid_sum(pa.lognormal(1.0, 0.1), 4)


@pytest.mark.parametrize(
    "dist",
    [D, GRID, pa.iid_max(D, 10), pa.empirical([1.0, 2.0, 3.0])],
    ids=["exact", "grid", "iid_max", "empirical"],
)
@pytest.mark.parametrize(
    ("q", "match"),
    [
        (1.5, r"q must lie in \[0, 1\].*not percent.*1\.5"),
        (-0.1, r"q must lie in \[0, 1\].*-0\.1"),
        (99, r"q must lie in \[0, 1\] \(quantile levels, not percent\), got 99"),
        (np.nan, r"q must not contain NaN"),
        ([0.5, np.nan], r"q must not contain NaN"),
        ([], r"q must not be empty"),
    ],
)
def test_quantile_levels(dist, q, match):
    with pytest.raises(ValueError, match=match):
        dist.quantile(q)
    with pytest.raises(ValueError, match=match):
        dist.quantile_bracket(q)


def test_isf_levels_are_named_p():
    with pytest.raises(ValueError, match=r"p must lie in \[0, 1\]"):
        D.isf(-1)
    with pytest.raises(ValueError, match=r"p must not contain NaN"):
        GRID.isf_bracket(np.nan)


@pytest.mark.parametrize("method", ["cdf", "sf"])
def test_nan_points(method):
    with pytest.raises(ValueError, match="x must not contain NaN"):
        getattr(D, method)([0.0, np.nan])
    with pytest.raises(TypeError, match="x must be numeric"):
        getattr(D, method)("abc")


def test_non_numeric_quantile_level_names_q():
    with pytest.raises((TypeError, ValueError), match="q must"):
        D.quantile("a")


# ----- samples ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("samples", "match"),
    [
        ([], "samples must not be empty"),
        (np.array([]), "samples must not be empty"),
        ([1.0, np.nan, 2.0], r"samples must be finite \(no NaN or inf\)"),
        ([1.0, np.inf], r"samples must be finite"),
    ],
)
def test_bad_samples(samples, match):
    with pytest.raises(ValueError, match=match):
        pa.empirical(samples)


def test_non_numeric_samples_name_the_argument():
    with pytest.raises((TypeError, ValueError), match="samples"):
        pa.empirical(["a", "b"])


def test_dkw_alpha():
    e = pa.empirical([1.0, 2.0, 3.0])
    for alpha in (0.0, 1.0):
        with pytest.raises(ValueError, match=r"alpha must lie in \(0, 1\)"):
            e.dkw_epsilon(alpha)


# ----- mixtures -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ([0.5, 0.6], r"weights must sum to 1 \(within 1e-9\), got sum 1\.1"),
        ([0.2, 0.2], r"weights must sum to 1"),
        ([-0.5, 1.5], r"weights must be finite and >= 0"),
        ([np.nan, 1.0], r"weights must be finite and >= 0"),
        ([1.0], r"weights must have one entry per distribution: got 1 weights for 2"),
        ([0.2, 0.3, 0.5], r"weights must have one entry per distribution: got 3 weights for 2"),
    ],
)
def test_mixture_weights(weights, match):
    with pytest.raises(ValueError, match=match):
        pa.mixture([D, pa.exponential(1.0)], weights)


def test_mixture_components():
    with pytest.raises(TypeError, match=r"dists\[1\] must be a Distribution, got int"):
        pa.mixture([D, 3], [0.5, 0.5])
    with pytest.raises(ValueError, match="dists must contain at least one distribution"):
        pa.mixture([], [])


# ----- operands -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("op", "match"),
    [
        (lambda: pa.convolve(D, 3.0), r"dists\[1\] must be a Distribution, got float"),
        (lambda: pa.convolve(stats.norm(), D), r"dists\[0\] must be a Distribution"),
        (lambda: pa.max_independent(D, "x"), r"dists\[1\] must be a Distribution, got str"),
        (lambda: pa.min_independent(D, None), r"dists\[1\] must be a Distribution, got NoneType"),
        (lambda: pa.iid_max(stats.norm(), 3), r"dist.* must be a Distribution"),
        (lambda: pa.iid_sum(1.0, 3), r"dist.* must be a Distribution, got float"),
        (lambda: pa.order_statistic([1.0], 1, 2), r"dist.* must be a Distribution, got list"),
    ],
)
def test_non_distribution_operands(op, match):
    with pytest.raises(TypeError, match=match):
        op()


def test_no_operands():
    with pytest.raises(ValueError, match="dists must contain at least one distribution"):
        pa.convolve()
    with pytest.raises(ValueError, match="dists must contain at least one distribution"):
        pa.max_independent()


def test_adding_two_distributions_names_the_independent_alternative():
    with pytest.raises(TypeError, match=r"independence assumption.*convolve\(a, b\)"):
        D + pa.exponential(1.0)
    with pytest.raises(TypeError, match=r"convolve"):
        GRID + D
    with pytest.raises(TypeError, match="product of two distributions"):
        D * D


def test_shift_and_scale_constants():
    with pytest.raises(ValueError, match="c must be finite"):
        D + np.nan
    with pytest.raises(TypeError, match="c must be a real number"):
        D + "1"
    with pytest.raises(ValueError, match=r"a must be > 0 \(latencies keep their orientation\)"):
        D.scale(-2.0)
    with pytest.raises(ValueError, match="a must be > 0"):
        0 * D
