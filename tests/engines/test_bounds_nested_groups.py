"""Bounds of huge replica groups with a per-copy speed factor stay bounds (fuzz regression).

A fuzz graph (two nested groups of n = 1e12 with a lognormal speed factor) had its lower
bound's quantiles above its upper bound's: the speed factor's scale mixture used a plain FFT
convolution whose round-off (~1e-17 per cell, reported in ``roundoff`` and then dropped) became
mass near the top of the lattice once ``F^n`` with n = 1e12 read that deep into the tail. The
reference here is a closed form: lognormal X times lognormal S is lognormal (log-sigmas add in
quadrature), and the max of n iid copies has quantile F^{-1}(q^{1/n}), taken through
``expm1``/``isf`` so that no digits are lost at n = 1e12.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa
from prism_analytic.distributions.parametric import from_scipy
from prism_analytic.graph import StepGraph

SIGMA_X, SCALE_X = 0.3, 0.9  # lattice stays positive (lognormal 0.47 alone reaches 0)
SIGMA_S = 0.02


def _group(n: int, speed: bool = True) -> StepGraph:
    body = StepGraph("body")
    body.add_op("op", from_scipy(stats.lognorm(s=SIGMA_X, scale=SCALE_X)))
    g = StepGraph("g")
    law = from_scipy(stats.lognorm(s=SIGMA_S, scale=1.0)) if speed else None
    g.add_replica_group("ranks", body, n, speed=law)
    return g


def _exact_max_quantile(q: float, n: int, speed: bool = True) -> float:
    """Closed form: quantile of the max of n iid copies of S * X (both lognormal)."""
    sigma = math.hypot(SIGMA_X, SIGMA_S) if speed else SIGMA_X
    per_copy_sf = -math.expm1(math.log(q) / n)  # 1 - q^{1/n} without cancellation
    return SCALE_X * math.exp(sigma * stats.norm.isf(per_copy_sf))


@pytest.mark.parametrize("n", [1, 10**6, 10**12])
@pytest.mark.parametrize("q", [0.5, 0.99, 1.0 - 1e-6])
def test_speed_factor_group_bracket_contains_closed_form(n: int, q: float) -> None:
    # before the fix the lower side at n = 1e12 sat near the top of the lattice (far above)
    low, high = pa.predict(_group(n), "bounds").quantile_bracket(q)
    exact = _exact_max_quantile(q, n)
    assert low <= exact <= high, (n, q, low, exact, high)
    assert high - low < 0.05 * exact  # still a useful bracket, not just a valid one


def test_nested_huge_groups_not_inverted() -> None:
    # the fuzz shape: a group of 1e12 copies whose body is a group of 1e12 with a speed factor
    # (3 copies 2x slow on each level); lower must not exceed upper at any level
    inner_body = StepGraph("inner_body")
    inner_body.add_op("x", from_scipy(stats.lognorm(s=SIGMA_X, scale=SCALE_X)))
    inner_body.add_op("y", from_scipy(stats.norm(1.0, 0.1)))
    inner = StepGraph("inner")
    speed = from_scipy(stats.lognorm(s=SIGMA_S, scale=1.0))
    inner.add_replica_group("ranks", inner_body, 10**12, slow=(3, 2.0), speed=speed)
    outer = StepGraph("outer")
    outer.add_replica_group("replicas", inner, 10**12, slow=(3, 2.0))
    levels = np.array([0.01, 0.5, 0.9, 0.99])
    low, high = pa.predict(outer, "bounds").quantile_bracket(levels)
    assert np.all(low <= high), (low, high)
    # without the speed factor the answer is within ~2% of it (sigma_S = 0.02 is small next to
    # sigma_X = 0.47): the broken lower bound was 2x too large
    plain = StepGraph("plain")
    plain.add_replica_group("ranks", inner_body, 10**12, slow=(3, 2.0))
    ref = StepGraph("ref")
    ref.add_replica_group("replicas", plain, 10**12, slow=(3, 2.0))
    ref_low, ref_high = pa.predict(ref, "bounds").quantile_bracket(levels)
    assert np.all(low < 1.1 * ref_high) and np.all(high > ref_low)


def test_bounded_convolution_keeps_tiny_tail_atoms() -> None:
    # 1 - (1 - a)(1 - b) rounds a = 5e-30 to 0; the upper side's +inf atom must survive (it
    # was read back by F^n with n = 1e24 as a ~4e-6 CDF inversion in the fuzz graph)
    from prism_analytic.distributions import to_grid
    from prism_analytic.distributions.grid import convolve_grids_bounded
    from prism_analytic.policy import DEFAULT_POLICY

    policy = replace(DEFAULT_POLICY, tail_mass=1e-30)  # the bounds engine's tail policy
    a = to_grid(from_scipy(stats.norm(1.0, 0.1)), 0.01, policy)
    a = type(a)(a.h, a.k0, a.lo, a.hi, a.below, 5e-30, a.policy)
    out = convolve_grids_bounded(a, a)
    assert out.above >= 2 * 5e-30 - 1e-59  # either operand's atom: old code kept ~7.6e-31


def test_inverted_pair_is_refused() -> None:
    from prism_analytic.distributions import to_grid
    from prism_analytic.engines.bounds import _checked
    from prism_analytic.policy import DEFAULT_POLICY

    g = _group(1, speed=False)
    low = to_grid(from_scipy(stats.norm(2.0, 0.1)), 0.01, DEFAULT_POLICY)
    high = to_grid(from_scipy(stats.norm(1.0, 0.1)), 0.01, DEFAULT_POLICY)
    assert _checked(high, low, g) == (high, low)
    with pytest.raises(RuntimeError, match="inverted"):
        _checked(low, high, g)
