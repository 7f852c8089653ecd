"""Lattices that fit the law: concentrated sums, round-off bounds, certified exact brackets."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import fft as sp_fft
from scipy import stats

import prism_analytic as pa
from prism_analytic.distributions.centred_sum import _Lattice, _rebin
from prism_analytic.distributions.roundoff import fft_convolve, fft_l1_error, fft_length
from prism_analytic.distributions.serialize import from_spec


# ----- concentrated sums ------------------------------------------------------------------------
def test_centred_sum_of_gammas_brackets_the_exact_law_within_a_fraction_of_its_spread():
    m = 500  # below the closed-form threshold (512 copies): the lattice path
    s = pa.iid_sum(pa.gamma(1.0, 0.5), m)
    exact = stats.gamma(4.0 * m, scale=0.25)
    assert isinstance(s, pa.GridDistribution)
    q = np.array([1e-6, 0.01, 0.5, 0.99, 1 - 1e-9])
    low, high = s.quantile_bracket(q)
    truth = exact.ppf(q[:4]).tolist() + [exact.isf(1.0 - q[4])]
    assert np.all(low <= truth) and np.all(np.array(truth) <= high)
    assert np.all(high - low <= 0.01 * exact.std())  # spread-relative, not location-relative
    assert s.mean() == pytest.approx(exact.mean(), rel=1e-12)
    assert s.std() == pytest.approx(exact.std(), rel=1e-12)


def test_sum_of_many_copies_keeps_its_spread():
    # the reproducer: std 127,949 for an exact 15,811
    s = pa.iid_sum(pa.gamma(1.0, 0.5), 10**9)
    assert s.std() == pytest.approx(math.sqrt(1e9) * 0.5, rel=1e-9)
    low, high = s.quantile_bracket(0.5)
    exact = stats.gamma(4e9, scale=0.25).median()
    assert low <= exact <= high and high - low <= 1e-3 * s.std()
    n = pa.iid_sum(pa.normal(2.0, 0.3), 10**9)
    assert n.std() == pytest.approx(0.3 * math.sqrt(1e9), rel=1e-12)


def test_readme_run_of_steps_has_the_spread_of_a_sum():
    kernel = pa.lognormal(mean=1e-3, std=5e-5)
    step = pa.iid_max(pa.iid_sum(kernel, 64), 65536)
    run = pa.iid_sum(step, 10_000)
    assert run.std() == pytest.approx(100 * step.std(), rel=1e-9)
    assert run.mean() == pytest.approx(10_000 * step.mean(), rel=1e-12)
    # independent check: Monte Carlo runs from the step's own sampler
    rng = np.random.default_rng(5)
    runs = step.sample((400, 10_000), rng).sum(axis=1)
    low, high = run.quantile_bracket(0.5)
    se = 1.26 * run.std() / math.sqrt(runs.size)
    assert low - 4 * se <= np.median(runs) <= high + 4 * se
    # the width is what the step's own sandwich allows: m times the mean gap of its sides,
    # plus a small fraction of the run's spread for the summation itself
    gap = float(np.dot(step.hi - step.lo, step.points))
    assert high - low <= 10_000 * gap + 0.02 * run.std()


def test_centred_and_sandwich_paths_agree():
    d = pa.lognormal(1.0, 0.3)
    centred = pa.iid_sum(d, 3000)
    fine = pa.GridPolicy(rel_width=2e-5)
    sandwich = pa.convolve(*[pa.iid_sum(d, 1000, policy=fine)] * 3, policy=fine)
    for q in (0.01, 0.5, 0.99):
        a, b = centred.quantile_bracket(q), sandwich.quantile_bracket(q)
        assert max(a[0], b[0]) <= min(a[1], b[1]), q  # both contain the truth: they meet


def test_stochastic_rebin_keeps_the_mean_and_mass():
    rng = np.random.default_rng(0)
    pmf = rng.random(1001)
    pmf /= pmf.sum()
    lat = _Lattice(pmf.copy(), -37, 0.1)
    mean = lat.mean()
    _rebin(lat, 4, copies=10)
    assert lat.pmf.sum() == pytest.approx(1.0, abs=1e-13)
    assert lat.mean() == pytest.approx(mean, abs=1e-12)
    assert lat.sources == [(10, pytest.approx(0.4), pytest.approx(0.04))]


# ----- round-off --------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [50, 3000, 20000])
def test_fft_error_bound_holds(n):
    rng = np.random.default_rng(n)
    a = rng.exponential(size=n) ** 4
    b = rng.random(n // 2 + 7)
    a, b = a / a.sum(), b / b.sum()
    exact = np.convolve(a.astype(np.longdouble), b.astype(np.longdouble))
    got = fft_convolve(a, b)
    assert float(np.abs(got - exact).sum()) <= fft_l1_error(a, b)


def test_fft_error_bound_holds_for_squares():
    rng = np.random.default_rng(11)
    a = rng.exponential(size=5000) ** 3
    a /= a.sum()
    exact = np.convolve(a.astype(np.longdouble), a.astype(np.longdouble))
    got = fft_convolve(a, a)  # one forward transform serves both operands
    assert float(np.abs(got - exact).sum()) <= fft_l1_error(a, a)


def test_fft_lengths_are_powers_of_two_where_next_fast_len_is_not():
    # Higham's bound is proven for radix-2 lengths; scipy's fast lengths are 5- or 11-smooth
    n_out = 4506
    assert sp_fft.next_fast_len(n_out, real=True) != fft_length(n_out) == 8192
    lengths = [(n, fft_length(n)) for n in range(1, 999)]
    assert all(f & (f - 1) == 0 and n <= f < 2 * n for n, f in lengths)


def test_roundoff_is_reported_or_folded():
    body = pa.iid_sum(pa.exponential(1.0), 2)
    assert body.roundoff > 0
    x = pa.iid_max(body, 10**11)
    assert x.roundoff >= 10**11 * body.roundoff * 0.99 or x.roundoff == 1.0
    low, high = x.quantile_bracket(0.99)
    assert low <= high  # the reproducer had (33.47075, 33.4705)
    folded = pa.GridPolicy(fold_roundoff=True)
    xf = pa.iid_max(pa.iid_sum(pa.exponential(1.0), 2, policy=folded), 10**11, policy=folded)
    exact = stats.gamma(2).isf(-np.expm1(np.log(0.99) / 1e11))
    low, high = xf.quantile_bracket(0.99)
    assert low <= exact <= high and xf.roundoff == 0.0


# ----- exact laws: certified brackets, ends of the support ---------------------------------------
def test_quantile_levels_zero_and_one_are_the_support_ends():
    m = pa.mixture([pa.normal(1, 0.1), pa.exponential(1)], [0.5, 0.5])
    assert m.quantile([0, 1]).tolist() == [-math.inf, math.inf]
    assert pa.normal(0, 1).quantile_bracket(1.0) == (math.inf, math.inf)
    assert pa.exponential(1.0).quantile_bracket(0.0) == (0.0, 0.0)


def test_minimum_of_a_trillion_uniforms_is_bracketed():
    o = pa.order_statistic(pa.uniform(0, 1), 1, 10**12)
    exact = -math.expm1(math.log(0.01) / 1e12)
    low, high = o.quantile_bracket(0.99)
    assert low <= exact <= high and high - low <= 1e-10 * exact
    low, high = o.quantile_bracket(0.5)
    assert low <= -math.expm1(math.log(0.5) / 1e12) <= high


def test_exact_brackets_are_checked_against_the_cdf():
    for d in (pa.normal(0, 1), pa.gamma(3.0, 0.2), pa.iid_max(pa.exponential(1.0), 10**9)):
        q = np.array([1e-12, 0.3, 0.5, 0.9, 1 - 1e-12])
        low, high = d.quantile_bracket(q)
        assert np.all(d.cdf(low) <= q) and np.all(d.sf(high) <= 1 - q + 1e-300)


def test_mixture_with_an_infinite_variance_component():
    m = pa.mixture([pa.normal(1, 0.1), pa.pareto(0.5)], [0.99, 0.01])
    assert m.std() == math.inf and m.mean() == math.inf


# ----- constructors and specs -------------------------------------------------------------------
@pytest.mark.parametrize(
    "make", [lambda: pa.lognormal(1, 1e200), lambda: pa.gamma(1e200, 1), lambda: pa.gamma(1, 1e200)]
)
def test_extreme_parameters_are_clear_errors(make):
    with pytest.raises(ValueError, match="mean|std"):
        make()


def test_tiny_lognormal_spread_is_accepted():
    d = pa.lognormal(1.0, 1e-200)
    assert d.quantile(0.5) == pytest.approx(1.0)


NORMAL = {"type": "scipy", "family": "norm", "args": [0, 1]}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"type": "iid_max", "n": 0, "parent": NORMAL}, "latency.n"),
        ({"type": "iid_max", "n": 1e20, "parent": NORMAL}, "latency.n"),
        ({"type": "iid_max", "n": 2.7, "parent": NORMAL}, "latency.n"),
        ({"type": "affine", "shift": 0, "scale": 0, "base": NORMAL}, "latency.scale"),
        ({"type": "affine", "shift": 0, "scale": -1, "base": NORMAL}, "latency.scale"),
        ({"type": "order_statistic", "k": 5, "n": 3, "parent": NORMAL}, "latency.k"),
        ({"type": "order_statistic", "k": 1, "n": -5, "parent": NORMAL}, "latency.n"),
        (
            {"type": "grid", "h": 1, "k0": 0, "lo": [0.5], "hi": [0.5], "below": 0, "above": 0},
            "sum to 1",
        ),
        (
            {
                "type": "grid",
                "h": 1,
                "k0": 0,
                "lo": [0.5, 0.5],
                "hi": [1, 0],
                "below": 2,
                "above": 0,
            },
            "sum to 1",
        ),
        (
            {
                "type": "grid",
                "h": 1,
                "k0": 0,
                "lo": [-0.5, 1.5],
                "hi": [0, 1],
                "below": 0,
                "above": 0,
            },
            ">= 0",
        ),
        (
            {"type": "grid", "h": 1, "k0": 0, "lo": [0, 1], "hi": [1, 0], "below": 0, "above": 0},
            "swapped",
        ),
    ],
)
def test_bad_specs_name_the_field(spec, field):
    with pytest.raises((ValueError, TypeError), match=field.replace(".", r"\.")):
        from_spec(spec)


def test_bad_policy_and_sample_size():
    with pytest.raises(TypeError, match="policy"):
        pa.convolve(pa.normal(1, 0.1), pa.normal(1, 0.1), policy=3)
    with pytest.raises(ValueError, match="max_cells"):
        pa.GridPolicy(max_cells=2**40)
    with pytest.raises(ValueError, match="size"):
        pa.normal(0, 1).sample(10**11)


def test_rounding_variance_bound_holds_and_is_below_the_worst_case():
    from prism_analytic.distributions.centred_sum import _rounding_variance_bound

    d, h = pa.lognormal(1.0, 0.5), 0.05
    k0, k1 = 0, 400  # cells (0, 20]: inside mass 1 - P(X > 20)
    inside = float(d.cdf(20.0))
    bound = _rounding_variance_bound(d, k0, k1, h, inside)
    x = d.sample(10**6, np.random.default_rng(3))
    x = x[x <= 20.0]
    err = x - (np.ceil(x / h) - 1) * h  # X - x_i for X in (x_i, x_i + h]
    assert 0 < err.min() and err.max() <= h * (1 + 1e-9)
    assert err.var() <= bound <= 0.11 * h * h < h * h / 4  # smooth law: about 0.1 h^2


def test_lognormal_sum_of_a_million_holds_the_cornish_fisher_quantiles():
    # no closed form: Cornish-Fisher with the exact cumulants is accurate to about 1e-5 std
    # here (its last term), far inside a bracket of about 5e-3 std
    law, m = pa.lognormal(1.0, 0.5), 10**6
    s = pa.iid_sum(law, m)
    mean, var, skew, kurt = (float(v) for v in law.frozen.stats(moments="mvsk"))
    g1, g2 = skew / math.sqrt(m), kurt / m
    q = np.array([1e-6, 0.5, 1 - 1e-9])
    z = np.array([stats.norm.ppf(1e-6), 0.0, stats.norm.isf(1e-9)])
    t = (z**2 - 1) * g1 / 6 + (z**3 - 3 * z) * g2 / 24 - (2 * z**3 - 5 * z) * g1**2 / 36
    cf = m * mean + math.sqrt(m * var) * (z + t)
    low, high = s.quantile_bracket(q)
    assert np.all((low <= cf) & (cf <= high))
    assert np.all(high - low <= 0.01 * math.sqrt(m * var))


@pytest.mark.parametrize("dist", [pa.normal(1.0, 0.3), pa.gamma(1.0, 0.5)])
def test_sums_of_a_thousand_normal_or_gamma_copies_are_exact_closed_forms(dist):
    """m = 1e3 is past the closed-form threshold: brackets far below 0.1% of the std."""
    s = pa.iid_sum(dist, 1000)
    assert not isinstance(s, pa.GridDistribution)
    assert s.mean() == pytest.approx(1000 * dist.mean(), rel=1e-12)
    assert s.std() == pytest.approx(math.sqrt(1000) * dist.std(), rel=1e-12)
    low, high = s.quantile_bracket(np.array([1e-6, 0.5, 1 - 1e-9]))
    assert np.all(high - low <= 1e-3 * s.std())
