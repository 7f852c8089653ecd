"""Exact results carry exact moments: the std of a low-noise step is not the grid's estimate.

Before, a grid's moments were cell-centre estimates, which overstate the spread of a law only
one or two cells wide: two ``normal(1, 7.07e-5)`` in series gave std 2.89e-4 (exact 1.0e-4),
a job with no variability 5.9 ms (exact 0). Every reference here is independent of the code
under test: closed forms, a density-based quadrature, or Monte Carlo.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

import prism_analytic as pa
from prism_analytic.distributions.max_moments import (
    iid_max_moments,
    max_independent_moments,
)

REL = 1e-6


def _group(body: pa.StepGraph, n: int, **kw) -> pa.StepGraph:
    g = pa.StepGraph("step")
    g.add_replica_group("r", body, n, **kw)
    return g


def _normal_max_reference(n: int) -> tuple[float, float]:
    """Mean and variance of the max of n N(0, 1) from its density n phi Phi^(n-1)."""

    def density(x: float) -> float:
        return n * stats.norm.pdf(x) * math.exp((n - 1) * stats.norm.logcdf(x))

    kw = {"epsabs": 0.0, "epsrel": 1e-13, "limit": 500, "points": [stats.norm.isf(1.0 / n)]}
    mean = integrate.quad(lambda x: x * density(x), -12, 12, **kw)[0]
    var = integrate.quad(lambda x: (x - mean) ** 2 * density(x), -12, 12, **kw)[0]
    return mean, var


def test_two_low_noise_normals_in_series() -> None:
    body = pa.StepGraph("b")
    body.add_op("a", pa.normal(1.0, 7.07e-5))
    body.add_op("c", pa.normal(1.0, 7.07e-5), after=["a"])
    res = pa.predict(_group(body, 1))
    assert res.std_exact
    assert res.std() == pytest.approx(math.sqrt(2) * 7.07e-5, rel=REL)
    assert res.mean() == pytest.approx(2.0, rel=1e-12)


@pytest.mark.parametrize("n", [2, 1000, 65536])
def test_replica_max_of_a_normal_op(n: int) -> None:
    body = pa.StepGraph("b")
    body.add_op("a", pa.normal(1.0, 1e-3))
    res = pa.predict(_group(body, n))
    mean, var = _normal_max_reference(n)
    assert res.std_exact
    assert res.std() == pytest.approx(1e-3 * math.sqrt(var), rel=REL)
    assert res.mean() - 1.0 == pytest.approx(1e-3 * mean, rel=REL)


def test_design_constants_of_the_normal_max() -> None:
    mean, var = iid_max_moments(pa.normal(0.0, 1.0), 65536)
    assert round(mean, 4) == 4.2911 and round(math.sqrt(var), 4) == 0.2770


def test_exponential_max_closed_form() -> None:
    n = 1000
    k = np.arange(1, n + 1)
    mean, var = iid_max_moments(pa.exponential(1.0), n)
    assert mean == pytest.approx(np.sum(1.0 / k), rel=1e-10)
    assert var == pytest.approx(np.sum(1.0 / k**2), rel=1e-10)


def test_parallel_normals_match_clark_closed_form() -> None:
    m1, s1, m2, s2 = 1.0, 0.1, 1.05, 0.2
    a = math.hypot(s1, s2)
    al = (m1 - m2) / a
    e1 = m1 * stats.norm.cdf(al) + m2 * stats.norm.cdf(-al) + a * stats.norm.pdf(al)
    e2 = (
        (m1**2 + s1**2) * stats.norm.cdf(al)
        + (m2**2 + s2**2) * stats.norm.cdf(-al)
        + (m1 + m2) * a * stats.norm.pdf(al)
    )
    g = pa.StepGraph("par")
    g.add_op("a", pa.normal(m1, s1))
    g.add_op("b", pa.normal(m2, s2))
    g.add_op("c", pa.point_mass(0.5), after=["a", "b"])
    res = pa.predict(g)
    assert res.std_exact
    assert res.mean() == pytest.approx(e1 + 0.5, rel=REL)
    assert res.std() == pytest.approx(math.sqrt(e2 - e1 * e1), rel=REL)
    assert max_independent_moments([pa.exponential(1.0)] * 3) == pytest.approx(
        (1 + 1 / 2 + 1 / 3, 1 + 1 / 4 + 1 / 9), rel=1e-10
    )


def test_no_variability_has_zero_std() -> None:
    body = pa.StepGraph("b")
    body.add_op("fwd", pa.point_mass(0.0123))
    body.add_op("bwd", pa.point_mass(0.0311), after=["fwd"])
    body.add_op("comm", pa.point_mass(0.02), after=["fwd"])
    g = _group(body, 4096)
    g.add_op("opt", pa.point_mass(0.0254), after=["r"])
    res = pa.predict(g)
    assert res.std_exact
    assert res.std() == 0.0
    assert res.mean() == pytest.approx(0.0123 + 0.0311 + 0.0254, rel=1e-12)


NO_VARIABILITY = """
[variability.spatial]
cv = 0.0
slow_fraction = 0.0
[variability.temporal]
kernel_cv = 0.0
step_jitter_rel = 0.0
[variability.network.intra_node]
sigma = 0.0
tail_prob = 0.0
[variability.network.inter_node]
sigma = 0.0
tail_prob = 0.0
[variability.network.cross_dc]
sigma = 0.0
tail_prob = 0.0
[variability.hiccups]
probability = 0.0
"""


def test_job_without_variability_has_zero_std(tmp_path) -> None:
    from prism_analytic.workload.builder import build_step_graph
    from prism_analytic.workload.jobs import build_job

    cfg = tmp_path / "novar.toml"
    cfg.write_text(NO_VARIABILITY)
    res = pa.predict(build_step_graph(build_job("llama3-8b", 8, cfg)))
    assert res.std() == 0.0  # was 5.9 ms, a cell-width artefact


def test_speed_mixture_moments_against_monte_carlo() -> None:
    body = pa.StepGraph("b")
    body.add_op("a", pa.normal(1.0, 0.01))
    speed = pa.lognormal(1.0, 0.05)
    res = pa.predict(_group(body, 1, speed=speed))
    assert res.std_exact
    rng = np.random.default_rng(5)
    n = 2_000_000
    draws = speed.sample(n, rng) * pa.normal(1.0, 0.01).sample(n, rng)
    se = draws.std() / math.sqrt(2 * n)  # normal-theory standard error of the std
    assert abs(res.std() - draws.std()) < 10 * se  # 10 se: the product is not normal
    assert res.mean() == pytest.approx(draws.mean(), abs=5 * draws.std() / math.sqrt(n))


def test_estimated_moments_say_so() -> None:
    body = pa.StepGraph("b")
    body.add_op("a", pa.normal(1.0, 0.05))
    body.add_op("c", pa.lognormal(1.0, 0.05), after=["a"])
    res = pa.predict(_group(body, 8))  # normal + lognormal has no closed form to integrate
    assert not res.std_exact
    assert "moments estimated from the grid" in res.summary()
    assert res.to_dict()["std_exact"] is False


@pytest.mark.parametrize("n", [8, 1000])
def test_replica_max_of_a_normal_chain_with_a_constant(n: int) -> None:
    """Normals and a constant in series are one normal: its max has exact moments too.

    The grid's estimate was 4x the spread here (cells 2.5e-4 s against an sd of 1e-4 s).
    """
    body = pa.StepGraph("b")
    body.add_op("a", pa.normal(1.0, 7.07e-5))
    body.add_op("k", pa.point_mass(0.5), after=["a"])
    body.add_op("c", pa.normal(1.0, 7.07e-5), after=["k"])
    res = pa.predict(_group(body, n))
    sd = math.sqrt(2) * 7.07e-5
    mean, var = _normal_max_reference(n)
    assert res.std_exact
    assert res.std() == pytest.approx(sd * math.sqrt(var), rel=REL)
    assert res.mean() == pytest.approx(2.5 + sd * mean, rel=1e-12)


def test_max_of_a_mixture_against_a_dense_reference() -> None:
    """A straggler mixture (1% of copies 2x slower): CDF-side quadrature, not bisection.

    Reference: the density of F^n by finite differences on a 1e-6 s lattice covering both
    clusters (the all-fast case, probability 0.99^1000 = 4.3e-5, sits 1 s below the rest and
    carries a fifth of the variance).
    """
    law = pa.mixture([pa.normal(1.0, 0.01), pa.normal(2.0, 0.02)], [0.99, 0.01])
    x = np.linspace(0.9, 2.3, 1_400_001)
    cdf = 0.99 * stats.norm.cdf((x - 1) / 0.01) + 0.01 * stats.norm.cdf((x - 2) / 0.02)
    pdf = np.gradient(cdf**1000, x)
    mean = np.trapezoid(x * pdf, x)
    var = np.trapezoid((x - mean) ** 2 * pdf, x)
    got = iid_max_moments(law, 1000)
    assert got[0] == pytest.approx(mean, rel=1e-9)
    assert got[1] == pytest.approx(var, rel=1e-5)


def test_slow_replicas_and_nested_groups() -> None:
    """k slow copies beside n - k healthy ones, and a group of groups, keep exact moments.

    Reference: the barrier's CDF Phi(z)^997 Phi(z_slow)^3 integrated directly (scipy quad).
    """
    body = pa.StepGraph("b")
    body.add_op("a", pa.normal(1.0, 1e-3))
    g = _group(body, 1000, slow=(3, 1.5))
    res = pa.predict(g)

    def log_cdf(x: float) -> float:
        return 997 * stats.norm.logcdf((x - 1) / 1e-3) + 3 * stats.norm.logcdf((x - 1.5) / 1.5e-3)

    kw = {"epsabs": 0.0, "epsrel": 1e-12, "limit": 500}
    lo, mid, hi = 1.47, 1.49, 1.52
    mean = (
        mid
        + integrate.quad(lambda x: -math.expm1(log_cdf(x)), mid, hi, **kw)[0]
        - integrate.quad(lambda x: math.exp(log_cdf(x)), lo, mid, **kw)[0]
    )
    var = 2 * integrate.quad(lambda x: (x - mean) * -math.expm1(log_cdf(x)), mean, hi, **kw)[0]
    var += 2 * integrate.quad(lambda x: (mean - x) * math.exp(log_cdf(x)), lo, mean, **kw)[0]
    assert res.std_exact
    assert res.std() == pytest.approx(math.sqrt(var), rel=REL)
    assert res.mean() == pytest.approx(mean, rel=1e-12)
    inner = pa.StepGraph("inner")
    inner.add_replica_group("x8", body, 8)
    nested = pa.predict(_group(inner, 125))
    flat = pa.predict(_group(body, 1000))
    assert nested.std_exact
    assert nested.std() == pytest.approx(flat.std(), rel=REL)
