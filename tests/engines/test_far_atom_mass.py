"""A rare stall far beyond a narrow step body keeps its probability mass (no CDF ending below 1).

Reference: a normal body plus an additive two-point stall (0 with probability 1 - p, ``s``
otherwise; each atom a narrow uniform as the step builder makes it) has the closed-form CDF
``(1 - p) F_0(x) + p F_s(x)``, ``F_a`` the CDF of a normal plus a uniform on ``[a, a + eps]``.
Before the fix, a stall whose distance from the body exceeded 16 requested cells times
``max_cells`` was cut out of the lattice window: its mass became a +inf atom, p99 was nan, the
mean of a grid without carried moments silently left the stall out (llama3-70b at 256 GPUs with
a 30 s stall: mean 63.73 s instead of 64.63 s).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats

import prism_analytic as pa
from prism_analytic.distributions.grid import convolve_grids, to_grid
from prism_analytic.workload.builder import _hiccup_law

MU, SD, P, S = 10.0, 0.01, 0.03, 30.0
EPS = 1e-6 * S  # the builder's atom width
POLICY = pa.GridPolicy(max_cells=4096)  # a 1e-4 s spacing reaches 16 * 4096 cells = 6.6 s
H = 1e-4


def _normal_plus_uniform_cdf(x: np.ndarray, a: float) -> np.ndarray:
    """P(N(MU, SD) + U(a, a + EPS) <= x), closed form: SD / EPS * [G(z0) - G(z1)]."""

    def g(z: np.ndarray) -> np.ndarray:  # integral of the normal CDF
        return z * stats.norm.cdf(z) + stats.norm.pdf(z)

    z0 = (x - a - MU) / SD
    return SD / EPS * (g(z0) - g(z0 - EPS / SD))


def exact_cdf(x: np.ndarray) -> np.ndarray:
    """The closed-form CDF of the body plus the stall."""
    x = np.asarray(x, dtype=float)
    return (1 - P) * _normal_plus_uniform_cdf(x, 0.0) + P * _normal_plus_uniform_cdf(x, S)


def exact_quantile(q: float) -> float:
    """Inverse of :func:`exact_cdf` (bisection on a bracket wide enough for both atoms)."""
    return optimize.brentq(lambda x: exact_cdf(x) - q, MU - 20 * SD, MU + S + 20 * SD, xtol=1e-12)


EXACT_MEAN = MU + (1 - P) * EPS / 2 + P * (S + EPS / 2)
LEVELS = (0.5, 0.99, 0.999)


def test_the_far_atom_stays_on_the_lattice():
    g = to_grid(_hiccup_law(P, S), H, POLICY)
    assert g.above <= POLICY.tail_mass and g.below <= POLICY.tail_mass
    assert g.lo.size <= POLICY.max_cells
    assert g.points[-1] >= S + EPS  # the atom at S is inside the window
    # mass is conserved on each side
    assert g.lo.sum() + g.below == pytest.approx(1.0, abs=1e-12)
    assert g.hi.sum() + g.above == pytest.approx(1.0, abs=1e-12)


def test_body_plus_far_stall_matches_the_closed_form():
    body = to_grid(pa.normal(MU, SD), H, POLICY)
    step = convolve_grids(body, to_grid(_hiccup_law(P, S), H, POLICY))
    assert step.above <= 1e-12  # nothing parked at +inf (it was 0.03)
    low, high = step.quantile_bracket(np.array(LEVELS))
    est = step.quantile(np.array(LEVELS))
    for q, lo, hi, e in zip(LEVELS, low, high, est, strict=True):
        exact = exact_quantile(q)
        assert lo <= exact <= hi, (q, lo, exact, hi)  # the bracket contains the truth
        assert lo <= e <= hi and np.isfinite(e)
    assert est[1] == pytest.approx(exact_quantile(0.99), abs=2 * step.h)
    assert est[2] == pytest.approx(exact_quantile(0.999), abs=2 * step.h)
    # the point estimate's CDF reaches 1 above the stall (it stopped at 1 - P / 2)
    assert step.cdf(MU + S + 1.0) == pytest.approx(1.0, abs=1e-12)
    # the lattice's own mean (the carried exact moments dropped) includes the stall
    bare = type(step)(step.h, step.k0, step.lo, step.hi, step.below, step.above, step.policy)
    assert bare.mean() == pytest.approx(EXACT_MEAN, abs=step.h)
    assert bare.std() == pytest.approx(np.sqrt(SD**2 + P * (1 - P) * S**2), rel=1e-3)


def test_log_lattice_sum_keeps_the_stall_on_a_linear_grid():
    # the public sum of a body and the stall goes on the log lattice (the stall's far atom
    # counts as a far tail); turning it into a linear grid cut the stall out (above 0.03)
    from prism_analytic.operations import convolve

    total = convolve(pa.normal(MU, SD), _hiccup_law(P, S))
    g = to_grid(total, H, POLICY)
    assert g.above <= 1e-12 and g.lo.size <= POLICY.max_cells
    low, high = g.quantile_bracket(np.array(LEVELS))
    for q, lo, hi in zip(LEVELS, low, high, strict=True):
        assert lo <= exact_quantile(q) <= hi, (q, lo, exact_quantile(q), hi)
    assert g.cdf(MU + S + 1.0) == pytest.approx(1.0, abs=1e-12)


def test_log_lattice_heavy_tail_still_becomes_an_atom():
    from prism_analytic.operations import convolve

    total = convolve(pa.pareto(1.5), pa.pareto(1.5))  # a heavy tail: no gap before the atom
    g = to_grid(total, 0.001, POLICY)
    assert g.above > 1e-4 and g.h <= 16 * 0.001


def test_mixture_without_components_keeps_its_far_cluster():
    # a factor-conditioned pipeline's mixture of normals has arrays, not components: the
    # window sees the empty gap before the far cluster and covers it
    from prism_analytic.engines.pipeline_factors import NormalMixture

    law = NormalMixture([1 - P, P], [MU, MU + S], [SD, SD])
    g = to_grid(law, H, POLICY)
    assert g.above <= 1e-9 and g.below <= 1e-9  # the bulk (1e-9 levels) is held
    for q in LEVELS:
        low, high = g.quantile_bracket(q)
        exact = optimize.brentq(lambda x, q=q: float(law.cdf(x)) - q, MU - 1, MU + S + 1)
        assert low <= exact <= high


def test_mixture_of_far_apart_grids_is_coarsened_before_it_is_aligned():
    # a slow regime 100 s beside a fast one, both on 1e-5 s cells: aligning first built
    # 1e7-cell arrays (1e8 and 2.9 GB for a 1,000 s gap) before trimmed() re-binned them
    from prism_analytic.distributions.grid import mix_grids

    fast = to_grid(pa.normal(MU, SD), 1e-5)
    slow = to_grid(pa.normal(MU + 100.0, 1.0), 1e-5)
    law = pa.mixture([pa.normal(MU, SD), pa.normal(MU + 100.0, 1.0)], [1 - P, P])
    mixed = mix_grids([fast, slow], np.array([1 - P, P]))
    assert mixed.lo.size <= mixed.policy.max_cells
    assert mixed.above <= 1e-9 and mixed.below <= 1e-9  # the operands' own bulk windows
    for q in (0.5, 0.98, 0.999):
        low, high = mixed.quantile_bracket(q)
        assert low <= float(law.quantile(q)) <= high


def test_heavy_tail_still_becomes_an_atom():
    # the window fallback is for mixtures only: a Pareto keeps its capped bulk and its atom
    g = to_grid(pa.pareto(1.5), 0.001, POLICY)
    assert g.above > 1e-4 and g.h <= 16 * 0.001


def test_mixture_with_a_heavy_component_loses_no_more_than_the_component_alone():
    heavy = pa.pareto(1.5)
    alone = to_grid(heavy, 0.001, POLICY)
    law = pa.mixture([heavy, pa.uniform(500.0, 501.0)], [0.9, 0.1])
    mix = to_grid(law, 0.001, POLICY)
    assert mix.above <= 0.9 * alone.above * (1 + 1e-9)
    low, high = mix.quantile_bracket(0.95)
    assert low <= float(law.quantile(0.95)) <= high


def _job(probability: float):
    from prism_analytic.workload.jobs import build_job, merge_config

    overlay = {
        "variability": {
            "spatial": {"cv": 0.0, "slow_fraction": 0.0},
            "temporal": {"step_jitter_rel": 0.0},
            "hiccups": {"probability": probability, "size_s": S},
        }
    }
    return merge_config(build_job("llama3-70b", 256), overlay)


def test_preset_with_a_30s_stall_is_the_quiet_step_mixed_with_its_shift():
    """llama3-70b at 256 GPUs (G's report): mean 63.73 s and p99 nan before the fix."""
    from prism_analytic.workload.prediction import predict_job

    quiet, _, _ = predict_job(_job(0.0))
    stalled, _, _ = predict_job(_job(P))
    bounds, _, _ = predict_job(_job(P), method="bounds")  # guaranteed for the model
    assert stalled.mean() == pytest.approx(quiet.mean() + P * S, abs=1e-3)
    for q in LEVELS:
        # (1 - P) F(x) + P F(x - S) = q, F the quiet step's CDF (the same body, exact shift)
        ref = optimize.brentq(
            lambda x, q=q: (1 - P) * quiet.cdf(x) + P * quiet.cdf(x - S) - q,
            quiet.quantile(1e-6),
            quiet.quantile(1 - 1e-9) + S,
            xtol=1e-9,
        )
        lo, hi = stalled.quantile_bracket(q)
        assert np.isfinite(lo) and np.isfinite(hi)
        assert stalled.quantile(q) == pytest.approx(ref, abs=max(hi - lo, 1e-3))
        b_lo, b_hi = bounds.quantile_bracket(q)
        assert b_lo <= ref <= b_hi and b_lo <= stalled.quantile(q) <= b_hi
