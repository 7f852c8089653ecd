"""Shared pipeline factors by conditioning (engines/pipeline_factors.py) vs op-by-op Monte Carlo."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

import prism_analytic as pa
from prism_analytic.engines import pipeline_core as pc
from prism_analytic.engines.pipeline_factors import (
    NormalMixture,
    factor_points,
    merge_components,
    normal_scores,
)
from prism_analytic.engines.pipeline_mc import sample_pipeline
from prism_analytic.graph.pipeline_spec import PipelineSpec, law_key


def _spec(p: int, m: int, **factors: pa.Distribution) -> PipelineSpec:
    laws = {
        law_key(ph, s): pa.normal(1.0 if ph == "F" else 2.0, 0.05 * (1.0 if ph == "F" else 2.0))
        for ph in ("F", "B")
        for s in range(p)
    }
    return PipelineSpec(p, m, laws, **factors)


def _ks_vs_mc(spec: PipelineSpec, samples: int = 20000) -> tuple[float, float, float]:
    """(KS, relative p50 error, relative spread error) of the engine's mixture vs Monte Carlo."""
    comps, _ = pc.pipeline_components(spec)
    mix = NormalMixture(*map(np.array, zip(*comps, strict=True)))
    x = np.sort(sample_pipeline(spec, samples, np.random.default_rng(7)))
    ks = stats.kstest(x, lambda v: mix.cdf(np.asarray(v))).statistic
    p50, p99 = np.quantile(x, [0.5, 0.99])
    a50, a99 = (float(mix.quantile(q)) for q in (0.5, 0.99))
    return float(ks), (a50 - p50) / p50, ((a99 - a50) - (p99 - p50)) / (p99 - p50)


@pytest.mark.parametrize(
    ("factors", "ks_max"),
    [
        ({"microbatch_factor": pa.lognormal(1.0, 0.15)}, 0.03),  # r ~ 0.9
        ({"microbatch_factor": pa.lognormal(1.0, 0.5)}, 0.03),  # r ~ 0.99
        ({"stage_factor": pa.lognormal(1.0, 0.05)}, 0.03),
    ],
)
def test_conditioned_factors_match_monte_carlo(factors, ks_max):
    # 20,000 samples: the KS statistic's own noise is about 0.01 (99%: 0.0115)
    ks, p50_err, spread_err = _ks_vs_mc(_spec(4, 8, **factors))
    assert ks <= ks_max
    assert abs(p50_err) <= 0.003
    assert abs(spread_err) <= 0.06


def test_conditioning_beats_canonical_loadings():
    # the former treatment (factors as canonical-form loadings) is pipeline_makespan's normal
    spec = _spec(4, 8, microbatch_factor=pa.lognormal(1.0, 0.5))
    mu, sd, _ = pc.pipeline_makespan(spec)
    x = np.sort(sample_pipeline(spec, 20000, np.random.default_rng(3)))
    ks_loadings = stats.kstest(x, stats.norm(mu, sd).cdf).statistic
    ks_cond, _, _ = _ks_vs_mc(spec)
    assert ks_cond < ks_loadings / 3


def test_factor_points_follow_the_factor_laws():
    spec = _spec(2, 4, microbatch_factor=pa.lognormal(1.0, 0.2), stage_factor=pa.gamma(1.0, 0.1))
    z = normal_scores(spec, 4096)
    assert z.shape == (4096, 6)
    w, s = factor_points(spec, z)
    assert w.shape == (4096, 4) and s.shape == (4096, 2)
    assert stats.kstest(w[:, 1], lambda v: spec.microbatch_factor.cdf(v)).statistic < 0.02
    assert stats.kstest(s[:, 0], lambda v: spec.stage_factor.cdf(v)).statistic < 0.02


def test_no_factor_is_a_clear_error():
    with pytest.raises(ValueError, match="microbatch_factor or stage_factor"):
        normal_scores(_spec(2, 4))


def test_normal_mixture_lattice_path_equals_dense():
    rng = np.random.default_rng(0)
    mix = NormalMixture(rng.random(50), rng.normal(10, 2, 50), np.r_[rng.uniform(0.1, 1, 49), 0])
    x = np.linspace(0, 20, 5001)  # sorted, long: the windowed path
    dense_cdf = special.ndtr(mix._z(x)[0]) @ mix.w
    dense_sf = special.ndtr(-mix._z(x)[0]) @ mix.w
    np.testing.assert_allclose(mix.cdf(x), dense_cdf, atol=1e-15)
    np.testing.assert_allclose(mix.sf(x), dense_sf, atol=1e-15)
    assert mix.mean() == pytest.approx(float(mix.w @ mix.mu))


def test_merge_keeps_mean_and_variance():
    rng = np.random.default_rng(1)
    w = rng.random(1000)
    w /= w.sum()
    mu, sd = rng.normal(0, 3, 1000), rng.uniform(0.2, 0.5, 1000)
    merged = np.array(merge_components(w, mu, sd, bins=32))
    assert len(merged) <= 32
    mean = w @ mu
    var = w @ (sd**2 + mu**2) - mean**2
    assert merged[:, 0] @ merged[:, 1] == pytest.approx(mean, abs=1e-12)
    m2 = merged[:, 0] @ (merged[:, 2] ** 2 + merged[:, 1] ** 2)
    assert m2 - mean**2 == pytest.approx(var, rel=1e-12)


def test_bad_mixture_input_is_a_clear_error():
    with pytest.raises(ValueError, match="stds"):
        NormalMixture([1.0], [0.0], [-1.0])
