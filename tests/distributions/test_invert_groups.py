"""Grouped bisection (``Distribution._invert_groups``) equals separate ``_invert`` calls, bitwise.

The grid's window (:func:`~prism_analytic.distributions.grid.discretize`) reads five quantiles of a
law without a closed-form inverse from one grouped bisection per side; the speed-up is only
allowed if every value is the one the separate calls give.
"""

from __future__ import annotations

import numpy as np
import pytest

import prism_analytic as pa
from prism_analytic.distributions.grid import _window_levels, discretize
from prism_analytic.distributions.mixture import Mixture

LAWS = [
    Mixture([pa.uniform(0.0, 1.2e-6), pa.uniform(1.2, 1.2 + 1.2e-6)], [0.996, 0.004]),
    Mixture([pa.normal(1.0, 0.1), pa.lognormal(3.0, 0.5)], [0.9, 0.1]),
    Mixture([pa.exponential(2.0), pa.normal(-5.0, 1.0)], [0.5, 0.5]),  # infinite bracket end
]
GROUPS = [[1e-12], [0.25, 0.75], [], [1e-9, 0.5, 1 - 1e-9], [0.999]]


@pytest.mark.parametrize("law", LAWS, ids=["hiccup", "normal-lognormal", "exp-normal"])
@pytest.mark.parametrize("upper", [False, True])
def test_groups_equal_separate_calls(law: Mixture, upper: bool) -> None:
    grouped = law._invert_groups([np.array(g, dtype=float) for g in GROUPS], upper=upper)
    for g, got in zip(GROUPS, grouped, strict=True):
        want = law._invert(np.array(g, dtype=float), upper=upper)
        assert got.shape == want.shape
        assert [v.hex() for v in got.tolist()] == [v.hex() for v in want.tolist()]


def test_groups_differ_from_one_joint_call() -> None:
    """The grouping matters: a joint call keeps bisecting converged elements (so the test above
    can fail if the groups were merged)."""
    law = LAWS[1]
    levels = np.array([1e-12, 0.5, 1 - 1e-9])
    joint = law._invert(levels, upper=False)
    apart = [law._invert(levels[i : i + 1], upper=False)[0] for i in range(3)]
    grouped = np.concatenate(law._invert_groups([levels[i : i + 1] for i in range(3)], upper=False))
    assert grouped.tolist() == apart
    assert np.allclose(joint, apart, rtol=1e-14)


@pytest.mark.parametrize("law", LAWS[:2], ids=["hiccup", "normal-lognormal"])
def test_window_levels_are_the_separate_calls(law: Mixture) -> None:
    tail = 1e-12
    levels = _window_levels(law, tail)
    assert levels["q_tail"]().tolist() == law._quantile(np.array([tail])).tolist()
    assert levels["s_tail"]().tolist() == law._isf(np.array([tail])).tolist()
    assert levels["q_mid"]().tolist() == law._quantile(np.array([0.25, 0.75])).tolist()
    assert levels["q_bulk"]().tolist() == law._quantile(np.array([1e-9])).tolist()
    assert levels["s_bulk"]().tolist() == law._isf(np.array([1e-9])).tolist()
    grid = discretize(law, 1e-3)  # and the grid built from them holds the law's quantiles
    for q in (0.1, 0.5, 0.999):
        lo, hi = grid.quantile_bracket(q)
        assert lo <= float(law.quantile(q)) <= hi


def test_empty() -> None:
    assert LAWS[0]._invert_groups([], upper=False) == []
    (out,) = LAWS[0]._invert_groups([np.array([])], upper=True)
    assert out.shape == (0,)
