"""The factor quadrature of engines/pipeline_factors.py: the mean path's own, larger level.

With the mean path ``L(f)`` evaluated only at the core's 2**15 points, the mixture's
quadrature of ``L``'s law left p99 -0.75% and KS 0.0024 on a 8x8 pipeline with per-microbatch
factors of CV 50% (against 1e6 op-by-op Monte Carlo samples); the agreement's 8x32 rows showed
KS 0.003-0.005 (validation/results/factor_conditioning.md).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa
from prism_analytic.engines import pipeline_core as pc
from prism_analytic.engines import pipeline_factors as pf
from prism_analytic.engines.pipeline_mc import sample_pipeline
from prism_analytic.graph.pipeline_spec import PipelineSpec, law_key

SAMPLES = 1_000_000
#: Allowance for the approximation itself beyond Monte Carlo's noise (relative).
ALLOW = 0.001


def _spec(p: int, m: int, cv: float) -> PipelineSpec:
    laws = {
        law_key(ph, s): pa.normal(1.0 if ph == "F" else 2.0, 0.05 * (1.0 if ph == "F" else 2.0))
        for ph in ("F", "B")
        for s in range(p)
    }
    return PipelineSpec(p, m, laws, microbatch_factor=pa.lognormal(1.0, cv))


def _interval(x: np.ndarray, q: float, conf: float = 0.999) -> tuple[float, float]:
    """Distribution-free ``conf`` interval of the q-quantile from sorted samples (binomial)."""
    n = x.size
    lo, hi = stats.binom.ppf([(1 - conf) / 2, (1 + conf) / 2], n, q).astype(int)
    return float(x[max(lo - 1, 0)]), float(x[min(hi, n - 1)])


@pytest.fixture(scope="module")
def case() -> tuple[PipelineSpec, np.ndarray]:
    spec = _spec(8, 8, 0.5)
    return spec, np.sort(sample_pipeline(spec, SAMPLES, np.random.default_rng(2026)))


def _mixture(comps: list) -> pf.NormalMixture:
    return pf.NormalMixture(*map(np.array, zip(*comps, strict=True)))


def _inside(mix: pf.NormalMixture, x: np.ndarray) -> dict[str, bool]:
    """Whether p99 and the p50-p99 spread lie in Monte Carlo's 99.9% intervals (+ ALLOW)."""
    lo50, hi50 = _interval(x, 0.5)
    lo99, hi99 = _interval(x, 0.99)
    a50, a99 = (float(mix.quantile(q)) for q in (0.5, 0.99))
    spread = (a99 - a50) / (hi99 - lo50)  # relative to the widest spread Monte Carlo allows
    return {
        "p99": lo99 * (1 - ALLOW) <= a99 <= hi99 * (1 + ALLOW),
        "spread": (lo99 - hi50) * (1 - 10 * ALLOW) <= a99 - a50 <= (hi99 - lo50) * (1 + 10 * ALLOW)
        and spread > 0,
    }


def test_mean_path_level_matches_monte_carlo(case):
    spec, x = case
    comps, info = pc.pipeline_components(spec)
    assert info["binned_on_mean_path"] and info["factor_points"] > info["core_points"]
    mix = _mixture(comps)
    assert _inside(mix, x) == {"p99": True, "spread": True}
    # KS within the DKW band at 99.9% plus a small allowance for the approximation
    dkw = np.sqrt(np.log(2 / 0.001) / (2 * SAMPLES))
    assert stats.kstest(x, lambda v: mix.cdf(np.asarray(v))).statistic <= dkw + 0.0005


def test_one_level_quadrature_misses(case):
    # the former design (mean path only at the core's points) fails the same check: the test
    # above can fail, and the level of the mean path is what fixes it
    spec, x = case
    core = pc._conditioned_core(spec, "clark-mehler", None)
    old = {"n": pf.N_POINTS, "n_path": pf.N_POINTS, "anchors": pf.N_ANCHORS}
    comps, _ = pf.factor_components(spec, core, **old)
    assert not _inside(_mixture(comps), x)["p99"]


def test_mean_paths_equal_the_recursions_path():
    spec = _spec(4, 8, 0.15)
    w, s = pf.factor_points(spec, pf.normal_scores(spec, 512))
    assert np.array_equal(pf.mean_paths(spec, w, s), pf.conditional_moments(spec, w, s)["path"])


def test_factor_components_are_deterministic():
    spec = _spec(4, 8, 0.5)
    core = pc._conditioned_core(spec, "clark-mehler", None)
    a, info_a = pf.factor_components(spec, core)
    b, info_b = pf.factor_components(spec, core)
    # the anchor rule too: the same anchors, the same error estimate
    assert a == b and info_a == info_b and info_a["anchor_rule"] == "adaptive"
