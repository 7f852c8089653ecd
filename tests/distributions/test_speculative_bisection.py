"""Distribution._invert's speculative bisection equals the step-by-step loop, bit for bit.

The reference below is the loop :meth:`Distribution._invert` ran before it evaluated the CDF
once per several steps (``distributions.base._speculative_bisection``); the laws are the kinds
whose quantiles are found by bisection in a prediction (a replica speed factor's mixture of
slowest-of-n laws, maxima and minima of independent laws, a regime mixture).
"""

from __future__ import annotations

import numpy as np
import pytest

import prism_analytic as pa
from prism_analytic.distributions import base
from prism_analytic.distributions.extremes import IIDMax, MaxOfIndependent
from prism_analytic.distributions.mixture import mixture
from prism_analytic.engines.pipeline_factors import NormalMixture


def _stepwise(law: base.Distribution, p: np.ndarray, *, upper: bool) -> np.ndarray:
    """The step-by-step bisection (one CDF or SF call per step)."""
    p = np.asarray(p, dtype=float)
    out = np.empty(p.shape)
    if p.size == 0:
        return out
    lo, hi = law._bracket_for_inversion()
    a = np.full(p.shape, lo, dtype=float)
    b = np.full(p.shape, hi, dtype=float)
    for _ in range(2200):
        mid = base._bisection_midpoint(a, b)
        go_right = law._sf(mid) > p if upper else law._cdf(mid) < p
        a = np.where(go_right, mid, a)
        b = np.where(go_right, b, mid)
        width = b - a
        if np.all(np.isfinite(width) & (width <= 4 * np.spacing(np.maximum(np.abs(a), np.abs(b))))):
            break
    out[...] = b
    return out


def _laws() -> dict[str, base.Distribution]:
    slowest = IIDMax(pa.lognormal(1.0, 0.017), 128)
    return {
        "speed mixture": mixture([slowest, base.affine(slowest, scale=1.1)], [0.3, 0.7]),
        "regime mixture": mixture([pa.normal(1.0, 0.05), pa.normal(3.0, 0.2)], [0.95, 0.05]),
        "slowest of 64": IIDMax(pa.normal(1.0, 0.1), 64),
        "scaled lognormal": base.affine(pa.lognormal(1.1, 0.2), shift=0.5, scale=2.0),
    }


LEVELS = [
    np.array([1e-15]),
    np.array([0.5]),
    np.array(0.3),
    np.array([1e-12, 0.2, 0.7, 1 - 1e-9]),
    np.array([[0.1, 0.2], [0.3, 0.4]]),
    np.linspace(0.01, 0.99, 8),
    np.linspace(0.01, 0.99, 9),  # more levels than the speculative path takes: the plain loop
]


def test_which_laws_are_bisected_speculatively() -> None:
    """Laws of ufuncs declare it; a BLAS product over components (rounding that may follow the
    array's length: 2 of 74 NormalMixture inversions moved when it was bisected so) does not."""
    assert all(law._pointwise_cdf for law in _laws().values())
    mix = NormalMixture(np.linspace(1.0, 2.0, 200), np.linspace(5.0, 6.0, 200), np.full(200, 0.05))
    assert not mix._pointwise_cdf
    assert not MaxOfIndependent([pa.normal(1.0, 0.1), pa.lognormal(1.1, 0.2)])._pointwise_cdf
    assert not mixture([mix, pa.normal(5.0, 0.1)], [0.5, 0.5])._pointwise_cdf
    sizes = []
    mix._cdf = lambda x, f=mix._cdf: sizes.append(x.size) or f(x)  # type: ignore[method-assign]
    mix._invert(np.array([0.3, 0.6]), upper=False)
    assert max(sizes) == 2  # one point per level and step, as the step-by-step loop


@pytest.mark.parametrize("name", list(_laws()))
@pytest.mark.parametrize("upper", [False, True])
def test_invert_matches_stepwise_bisection(name: str, upper: bool) -> None:
    law = _laws()[name]
    for p in LEVELS:
        got = law._invert(p, upper=upper)
        want = _stepwise(law, p, upper=upper)
        assert got.shape == want.shape
        assert np.array_equal(got.view(np.int64), want.view(np.int64)), (name, p, got, want)


def test_invert_solves_the_cdf() -> None:
    """Independent check: the answer is where the CDF crosses the level (normal closed form)."""
    law = mixture([pa.normal(0.0, 1.0), pa.normal(0.0, 1.0)], [0.5, 0.5])
    q = np.array([1e-6, 0.025, 0.5, 0.975])
    x = law._invert(q, upper=False)
    np.testing.assert_allclose(x, pa.normal(0.0, 1.0).quantile(q), rtol=0, atol=1e-12)


def test_speculative_path_is_taken() -> None:
    """One call of the CDF per several steps (else the test above compares the loop to itself)."""
    law = mixture([pa.normal(1.0, 0.05), pa.normal(3.0, 0.2)], [0.95, 0.05])
    calls = []
    law._cdf = lambda x, f=law._cdf: calls.append(x.size) or f(x)  # type: ignore[method-assign]
    law._invert(np.array([0.3]), upper=False)
    steps = sum(1 for _ in calls)
    assert steps * base._SPECULATE_STEPS >= 40 and max(calls) == 2**base._SPECULATE_STEPS - 1


GROUPS = [
    [np.array([1e-15]), np.array([0.5, 0.9])],
    [np.array([1e-12, 0.2]), np.array([]), np.array([0.7]), np.array([1 - 1e-9])],
    [np.array([0.3])],
    [np.linspace(0.05, 0.95, 5), np.array([0.5, 0.6, 0.7, 0.8])],  # 9 levels: the plain loop
]


@pytest.mark.parametrize("name", list(_laws()))
@pytest.mark.parametrize("upper", [False, True])
def test_invert_groups_match_separate_stepwise_bisections(name: str, upper: bool) -> None:
    """Each group as its own step-by-step bisection (what _invert_groups promises)."""
    law = _laws()[name]
    for groups in GROUPS:
        got = law._invert_groups(groups, upper=upper)
        for g, p in zip(got, groups, strict=True):
            want = _stepwise(law, p, upper=upper)
            assert np.array_equal(g.view(np.int64), want.view(np.int64)), (name, p, g, want)
