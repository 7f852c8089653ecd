"""The third-cumulant closure core (core_shape="cumulant"): closed forms, Monte Carlo, wiring."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
from scipy import integrate, stats

import prism_analytic as pa
from prism_analytic.engines.cumulant_core import (
    _rectifier,
    cumulant_makespan,
    cumulant_pipeline,
)
from prism_analytic.engines.pipeline_mc import sample_pipeline
from prism_analytic.engines.skew_core import skew_makespan
from prism_analytic.graph.pipeline import PipelineSpec, law_key, pipeline_step_graph


def _quadrature(dm: float, th: float, g1: float, g2: float) -> dict[str, float]:
    """The same moments by numerical integration of the Gram-Charlier density."""

    def dens(z: float) -> float:
        he3, he4 = z**3 - 3 * z, z**4 - 6 * z * z + 3
        return stats.norm.pdf(z) * (1 + g1 * he3 / 6 + g2 * he4 / 24)

    def e(h) -> float:
        c = -dm / th  # split at the kink
        lo = integrate.quad(lambda z: h(z) * dens(z), -14, c, epsabs=1e-13)[0]
        hi = integrate.quad(lambda z: h(z) * dens(z), c, 14, epsabs=1e-13)[0]
        return lo + hi

    def f(z: float) -> float:
        return max(dm + th * z, 0.0)

    ef = e(f)

    def fc(z: float) -> float:
        return f(z) - ef

    return {
        "P": e(lambda z: float(dm + th * z > 0)),
        "Ef": ef,
        "Vf": e(lambda z: fc(z) ** 2),
        "CfD": e(lambda z: fc(z) * th * z),
        "kfDD": e(lambda z: fc(z) * (th * z) ** 2),
        "kffD": e(lambda z: fc(z) ** 2 * th * z),
        "k3f": e(lambda z: fc(z) ** 3),
    }


@pytest.mark.parametrize(
    "dm, th, g1, g2",
    [(0.0, 1.0, 0.0, 0.0), (-0.3, 1.2, 0.3, 0.6), (0.7, 0.9, -0.5, 1.5), (-2.5, 0.5, 0.2, 0.0)],
)
def test_rectifier_marginals_match_quadrature(dm, th, g1, g2):
    # P(D > 0), density at 0, E f, Var f and the joint cumulants of f = D+ with D
    got = _rectifier(dm, th, g1, g2, None)[0]
    ref = _quadrature(dm, th, g1, g2)
    for key, val in ref.items():
        assert got[key] == pytest.approx(val, abs=1e-8), key


def test_single_max_of_correlated_normals_is_exact_and_equals_skew_core():
    # a -> (b, c) -> d: one max of jointly normal inputs, where the closure has no third
    # cumulant to correct with: Clark's exact mean and variance, like the skew core
    g = nx.DiGraph([("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    mean = dict(a=1.0, b=2.0, c=2.3, d=0.0)
    std = dict(a=0.5, b=0.4, c=0.6, d=0.0)
    r = cumulant_makespan(g, mean, std)
    s = skew_makespan(g, mean, std)
    assert r.mean == pytest.approx(s.mean, rel=1e-12)
    assert r.std == pytest.approx(s.std, rel=1e-12)
    rng = np.random.default_rng(3)
    n = 2_000_000
    za = rng.standard_normal(n)
    x = (
        1.0
        + 0.5 * za
        + np.maximum(2.0 + 0.4 * rng.standard_normal(n), 2.3 + 0.6 * rng.standard_normal(n))
    )
    assert r.mean == pytest.approx(x.mean(), abs=4 * x.std() / math.sqrt(n))
    assert r.skew == pytest.approx(stats.skew(x), abs=0.01)  # exact kappa3 of the max


def test_chain_of_skewed_ops_is_an_exact_sum():
    g = nx.DiGraph([("a", "b"), ("b", "c")])
    mean, std = dict(a=1.0, b=2.0, c=3.0), dict(a=0.3, b=0.4, c=0.5)
    k3 = dict(a=0.01, b=0.02, c=-0.005)
    r = cumulant_makespan(g, mean, std, kappa3=k3)
    var = 0.3**2 + 0.4**2 + 0.5**2
    assert r.mean == pytest.approx(6.0)
    assert r.std == pytest.approx(math.sqrt(var))
    assert r.skew == pytest.approx(0.025 / var**1.5)


def test_three_input_max_against_monte_carlo():
    g = nx.DiGraph([("s", "a"), ("s", "b"), ("s", "c"), ("a", "t"), ("b", "t"), ("c", "t")])
    mean = dict(s=1.0, a=2.0, b=2.1, c=1.9, t=0.5)
    std = dict(s=0.2, a=0.3, b=0.25, c=0.35, t=0.1)
    r = cumulant_makespan(g, mean, std)
    rng = np.random.default_rng(5)
    n = 400_000
    z = {k: mean[k] + std[k] * rng.standard_normal(n) for k in mean}
    x = z["s"] + np.maximum(np.maximum(z["a"], z["b"]), z["c"]) + z["t"]
    assert stats.kstest(x, r.law().cdf).statistic < 0.01
    assert r.std == pytest.approx(x.std(), rel=0.02)


def _spec(p: int, m: int, schedule: str, vpp: int) -> PipelineSpec:
    laws = {
        law_key(ph, s, c): pa.normal(mu / vpp, 0.05 * mu / vpp)
        for ph, mu in (("F", 1.0), ("B", 2.0))
        for s in range(p)
        for c in range(vpp)
    }
    return PipelineSpec(p, m, laws, schedule, vpp)


@pytest.mark.parametrize(
    "args, ks_max",
    # measured KS 0.0037 / 0.0076 / 0.023 at 40k samples (kurtosis core 0.0039 / 0.0060 /
    # 0.024); the bound is the measured value plus twice the 20k-sample DKW 95% width
    [
        ((4, 8, "1f1b", 1), 0.025),
        ((4, 8, "interleaved", 2), 0.03),
        ((8, 8, "interleaved", 2), 0.045),
    ],
)
def test_small_pipelines_against_monte_carlo(args, ks_max):
    spec = _spec(*args)
    x = sample_pipeline(spec, 20_000, np.random.default_rng(11))
    r, info = cumulant_pipeline(spec)
    assert info["evaluated_microbatches"] == [spec.microbatches]
    assert stats.kstest(x, r.law().cdf).statistic < ks_max
    assert abs(r.mean - x.mean()) < 0.1 * x.std()
    assert r.std == pytest.approx(x.std(), rel=0.03)


def test_predict_core_shape_cumulant_is_wired():
    def latency(phase: str, stage: int, mb: int, chunk: int) -> pa.Distribution:
        mean = 1.0 if phase == "F" else 2.0
        return pa.normal(mean, 0.05 * mean)

    g = pipeline_step_graph(4, 8, latency, schedule="1f1b", compact=True)
    res = pa.predict(g, "analytic", core_shape="cumulant")
    core = res.diagnostics["cores"][0]
    assert core["shape"] == "cumulant"
    direct, _ = cumulant_pipeline(_spec(4, 8, "1f1b", 1))
    assert res.mean() == pytest.approx(direct.mean, rel=1e-4)
    with pytest.raises(ValueError, match="core_shape"):
        pa.predict(g, "analytic", core_shape="cumulants")
