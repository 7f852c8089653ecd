"""Monte Carlo on large replica groups of multi-op bodies against independent exact references.

The slowest of n copies lives where one copy's survival function is ~1/n. The references here
never use the package's grids: closed forms (Gamma, normal) or scipy quadrature of one copy's
survival function, inverted for the max as ``1 - (1 - sf)^n = 1 - q``. Monte Carlo's interval
(order statistics widened by the tail pool's estimated KS error) must contain them at p50 and
p99, and stay informative (a few percent wide at p50).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import integrate, optimize, stats

import prism_analytic as pa
from prism_analytic.engines import MonteCarloSettings
from prism_analytic.engines.montecarlo import PoolAccuracyWarning
from prism_analytic.graph import StepGraph

SAMPLES = 20_000
SETTINGS = MonteCarloSettings(pool_size=400_000, seed=11)


def chain(*ops: pa.Distribution) -> StepGraph:
    body = StepGraph("body")
    prev: list[str] = []
    for i, op in enumerate(ops):
        prev = [body.add_op(f"op{i}", op, prev)]
    return body


def max_quantile(sf, n: int, q: float, lo: float, hi: float, slow=None) -> float:
    """Solve P(max of n copies <= x) = q; ``slow = (k, factor)`` scales k of the copies."""

    def log_cdf(x: float) -> float:
        k, f = slow if slow else (0, 1.0)
        out = (n - k) * math.log1p(-min(sf(x), 1.0))
        if k:
            out += k * math.log1p(-min(sf(x / f), 1.0))
        return out

    return optimize.brentq(lambda x: log_cdf(x) - math.log(q), lo, hi, xtol=1e-10, rtol=1e-10)


def sf_sum(a: stats.rv_continuous, b: stats.rv_continuous):
    """Survival function of a + b (independent) by quadrature over b: int f_b(t) sf_a(x - t) dt.

    Beyond ``t = x - min(a)``, ``sf_a = 1`` and the rest is ``sf_b``; b's mass outside
    ``[ppf(1e-17), isf(1e-17)]`` is negligible at the levels tested (>= 1e-12).
    """
    a_lo = a.support()[0]

    def sf(x: float) -> float:
        lo, hi = b.ppf(1e-17), min(b.isf(1e-17), x - a_lo)
        if hi <= lo:
            return float(b.sf(hi))
        val, _ = integrate.quad(
            lambda t: b.pdf(t) * a.sf(x - t), lo, hi, limit=400, epsabs=0, epsrel=1e-10
        )
        return val + float(b.sf(hi))

    return sf


def run(g: StepGraph, settings: MonteCarloSettings = SETTINGS):
    with warnings.catch_warnings():
        warnings.simplefilter("error", PoolAccuracyWarning)  # every case here must be sharp
        return pa.predict(g, "montecarlo", samples=SAMPLES, mc_settings=settings)


def check(r, exact: dict[float, float], p50_width: float = 0.03) -> None:
    for q, x in exact.items():
        low, high = r.quantile_bracket(q)
        assert low <= x <= high, (q, x, low, high, r.diagnostics["pooled_groups"])
    low, high = r.quantile_bracket(0.5)
    assert (high - low) / exact[0.5] < p50_width  # informative, not just wide


@pytest.mark.parametrize("n", [10**3, 10**6, 10**9])
def test_exponential_chain_matches_the_gamma_closed_form(n):
    """exponential(1) -> exponential(1) is Gamma(2): max quantile = isf(1 - q^(1/n))."""
    g = StepGraph()
    g.add_replica_group("dp", chain(pa.exponential(1.0), pa.exponential(1.0)), n)
    # n = 1e3 is pooled too (explicit_limit below it), so all three exercise the tail pool
    r = run(g, MonteCarloSettings(pool_size=400_000, seed=11, explicit_limit=100))
    exact = {q: stats.gamma(2).isf(-math.expm1(math.log(q) / n)) for q in (0.5, 0.99)}
    check(r, exact)
    (info,) = r.diagnostics["pooled_groups"]
    assert info["n"] == n and 0 < info["ks_error"] < 0.05


@pytest.mark.parametrize("n", [10**3, 10**6, 10**9])
def test_normal_fork_join_body(n):
    """a -> (b, c) -> d with normals: the body is not a chain, its sf by quadrature."""
    body = StepGraph("body")
    body.add_op("a", pa.normal(1.0, 0.1))
    body.add_op("b", pa.normal(2.0, 0.2), ["a"])
    body.add_op("c", pa.normal(2.0, 0.2), ["a"])
    body.add_op("d", pa.normal(0.5, 0.05), ["b", "c"])
    g = StepGraph()
    g.add_replica_group("dp", body, n)
    r = run(g, MonteCarloSettings(pool_size=400_000, seed=12, explicit_limit=100))
    # a + d ~ N(1.5, .01 + .0025); max(b, c) has sf 1 - Phi(.)^2; convolve by quadrature
    ad = stats.norm(1.5, math.sqrt(0.0125))
    bc = stats.norm(2.0, 0.2)

    def sf(x: float) -> float:
        val, _ = integrate.quad(
            lambda t: ad.pdf(t) * -math.expm1(2 * bc.logcdf(x - t)), 0.5, 2.5, epsrel=1e-10
        )
        return val

    exact = {q: max_quantile(sf, n, q, 3.0, 6.0) for q in (0.5, 0.99)}
    check(r, exact)


def test_heavy_tailed_body_4096_copies():
    """The issue's reproducer: 4,096 copies of pareto(2.5) -> normal(1, 0.1), exact p99 176.42."""
    g = StepGraph()
    g.add_replica_group("dp", chain(pa.pareto(2.5), pa.normal(1.0, 0.1)), 4096)
    r = run(g)
    sf = sf_sum(stats.pareto(2.5), stats.norm(1.0, 0.1))
    exact = {q: max_quantile(sf, 4096, q, 5.0, 1e4) for q in (0.5, 0.99)}
    assert exact[0.99] == pytest.approx(176.42, abs=0.01)
    check(r, exact, p50_width=0.06)


def test_speed_factor_and_slow_copies_at_a_billion():
    """(lognormal + lognormal) x lognormal speed, 1e9 copies of which 1e7 are 1.1x slower:
    the structure ``prism predict --preset llama3-8b --gpus 1e9`` builds.
    """
    f, b, s = pa.lognormal(1.0, 0.9), pa.lognormal(2.0, 1.3), pa.lognormal(1.0, 0.017)
    g = StepGraph()
    g.add_replica_group("dp", chain(f, b), 10**9, slow=(10**7, 1.1), speed=s)
    r = run(g)
    fs = stats.lognorm(*_lognorm_params(1.0, 0.9))
    bs = stats.lognorm(*_lognorm_params(2.0, 1.3))

    def sf_fb(x: float) -> float:
        """P(F + B > x) = sf_B(x) + int_0^x f_B(t) sf_F(x - t) dt, Simpson on a log grid."""
        t = np.exp(np.linspace(math.log(bs.ppf(1e-17)), math.log(x), 10_001))
        return float(bs.sf(x) + integrate.simpson(bs.pdf(t) * fs.sf(x - t) * t, x=np.log(t)))

    assert sf_fb(30.0) == pytest.approx(sf_sum(fs, bs)(30.0), rel=1e-6)  # two quadratures
    sigma, _, scale = _lognorm_params(1.0, 0.017)
    nodes, weights = np.polynomial.hermite.hermgauss(12)  # E over log(speed) ~ normal
    speeds = scale * np.exp(math.sqrt(2) * sigma * nodes)

    def sf(x: float) -> float:
        return float(sum(wt * sf_fb(x / v) for wt, v in zip(weights, speeds)) / math.sqrt(math.pi))

    exact = {q: max_quantile(sf, 10**9, q, 10.0, 1e4, slow=(10**7, 1.1)) for q in (0.5, 0.99)}
    check(r, exact, p50_width=0.05)


def _lognorm_params(mean: float, std: float) -> tuple[float, float, float]:
    """scipy (s, loc, scale) of the lognormal with this mean and standard deviation."""
    s2 = math.log1p((std / mean) ** 2)
    return math.sqrt(s2), 0.0, mean * math.exp(-s2 / 2)


def test_plain_pool_would_collapse_but_the_tail_pool_does_not():
    """Sampled maxima keep their spread: std close to the exact max's (Gamma(2), n = 1e9)."""
    g = StepGraph()
    g.add_replica_group("dp", chain(pa.exponential(1.0), pa.exponential(1.0)), 10**9)
    r = run(g)
    x = np.sort(r.distribution.samples)
    n = 10**9
    exact = stats.gamma(2).isf(-np.expm1(np.log((np.arange(x.size) + 0.5) / x.size) / n))
    assert np.std(x) == pytest.approx(np.std(exact), rel=0.1)  # collapsed pool: std 7e-15


def test_unresolvable_pool_is_loud():
    """A tiny pool for a billion copies cannot be sharp: a warning, and the error in the CI."""
    g = StepGraph()
    body = chain(*[pa.normal(1.0, 0.1) for _ in range(3)])
    g.add_replica_group("dp", body, 10**9)
    settings = MonteCarloSettings(pool_size=2, seed=1)
    with pytest.warns(PoolAccuracyWarning, match="KS error"):
        r = pa.predict(g, "montecarlo", samples=2000, mc_settings=settings)
    assert r.pool_error > 0.05
    # an error that swallows the level leaves the interval open on that side, honestly
    assert r.pool_error == pytest.approx(1.0)
    assert r.quantile_bracket(0.5) == (-np.inf, np.inf)


def test_gridded_op_with_tail_atoms_at_a_trillion_copies():
    """A grid law trims ~1e-15 of each tail into +-inf atoms; at 1e12 copies some draws land
    there. They are kept finite and their chance (n x atoms) widens the interval; the
    closed form (max of 1e12 Gamma(3)) stays inside.
    """
    law = pa.iid_sum(pa.exponential(1.0), 3)  # gridded Gamma(3)
    assert law.above > 0
    g = StepGraph()
    g.add_replica_group("dp", chain(law), 10**12)
    r = pa.predict(g, "montecarlo", samples=SAMPLES)
    assert np.isfinite(r.distribution.samples).all()
    assert r.diagnostics["truncation_ks_error"] == pytest.approx(10**12 * (law.above + law.below))
    exact = {q: stats.gamma(3).isf(-math.expm1(math.log(q) / 10**12)) for q in (0.5, 0.99)}
    check(r, exact)
