"""The order statistic's own round-off, against 80-digit binomial sums.

``order_statistic_grid`` reads ``scipy.special.betainc``, which publishes no error bound. Its
values are now checked against rigorous enclosures (:mod:`.binomial_tail`) and the distance is
counted. Here operands whose masses sum to 1 exactly go through it, and each output side is
compared with ``P(Bin(n, F) >= k)`` of the operand's exact side, summed term by term in mpmath
at 80 digits (the survival form as the lower tail's own sum, never ``1 - G``), in the halves
the readers use (:func:`test_op_roundoff._check`). The old code reported no round-off for
exact operands; :func:`test_old_code_misses` shows it failing the same checks.
"""

from __future__ import annotations

import functools
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import special
from test_op_roundoff import FOLD, POLICY, _check, _grid, _ref_sides, _span

from prism_analytic.distributions.binomial_tail import binomial_tail_enclosure, log_binomial
from prism_analytic.distributions.grid import GridDistribution, _pmf_from_cdf_sf
from prism_analytic.distributions.grid_extremes import _cdf_sf, order_statistic_grid

mpmath.mp.dps = 80


def _tails(k: int, n: int, x: mpmath.mpf) -> tuple[mpmath.mpf, mpmath.mpf]:
    """(P(Bin(n, x) >= k), P(Bin(n, x) <= k - 1)), each its own sum (closed forms at huge n)."""
    if n > 10**4:  # only k = 1 or 2 are used at this size
        none = (1 - x) ** n
        one = n * x * (1 - x) ** (n - 1)
        low = none if k == 1 else none + one
        return 1 - low, low
    if x == 0 or x == 1:
        return (mpmath.mpf(0), mpmath.mpf(1)) if x == 0 else (mpmath.mpf(1), mpmath.mpf(0))
    terms, t, ratio = [], (1 - x) ** n, x / (1 - x)
    for j in range(n + 1):  # C(n, j) x^j (1 - x)^(n - j) by the exact ratio, at 80 digits
        terms.append(t)
        t = t * (n - j) / (j + 1) * ratio
    # the recurrence's 80-digit rounding can pass 1 by ~1e-80; the exact tails cannot
    return min(mpmath.fsum(terms[k:]), 1), min(mpmath.fsum(terms[:k]), 1)


@functools.cache
def _case(k: int, n: int) -> tuple[GridDistribution, np.ndarray, list]:
    """The operand (seeded by k, n), the lattice points checked and the exact reference."""
    g = _grid(np.random.default_rng(k * 1000 + n), 60, 0.2, 1e-20, POLICY)
    at = _span(g)
    return g, at, _reference(g, k, n, at)


def _reference(g: GridDistribution, k: int, n: int, at: np.ndarray):
    """Exact (F_lo, S_lo, F_hi, S_hi) of the order statistic of the operand's exact sides."""
    out = []
    for f_lo, _, _, s_hi in _ref_sides(g, at):
        g_lo, s_lo = _tails(k, n, f_lo)
        g_hi, s_hi_out = _tails(k, n, 1 - s_hi)  # the upper side's point, as the readers take it
        out.append((g_lo, s_lo, g_hi, s_hi_out))
    return out


def replace_policy(g: GridDistribution, policy) -> GridDistribution:
    """The same sides under another policy."""
    return GridDistribution(g.h, g.k0, g.lo, g.hi, g.below, g.above, policy)


def _small_cells_grid(policy) -> GridDistribution:
    """Cells of 1e-13..1e-11 first (where (1 - F)^1e12 is O(1)), then the rest, summing to 1."""
    head = [float(v) * 2.0**-45 for v in (1, 2, 3, 5, 8, 13, 21, 34)]
    rest = Fraction(1) - sum(Fraction(v) for v in head)
    tail = []
    while rest > 0:  # 53-bit pieces of the remainder, each rounded down
        piece = float(rest / 3) if len(tail) < 2 else float(rest)
        if Fraction(piece) > rest:
            piece = float(np.nextafter(piece, 0.0))
        tail.append(piece)
        rest -= Fraction(piece)
    cells = np.array(head + tail)
    assert sum(Fraction(c) for c in cells) == 1
    return GridDistribution(1.0, 0, cells, cells.copy(), 0.0, 0.0, policy)


CASES = [(2, 5), (3, 7), (1, 40), (20, 40), (39, 40), (100, 200)]


@pytest.mark.parametrize("fold", [False, True])
@pytest.mark.parametrize(("k", "n"), CASES)
def test_order_statistic_sides_hold(k: int, n: int, fold: bool) -> None:
    g, at, ref = _case(k, n)
    g = replace_policy(g, FOLD if fold else POLICY)
    out = order_statistic_grid(g, k, n)
    assert _check(out, ref, at, fold) <= 0.0


@pytest.mark.parametrize("fold", [False, True])
@pytest.mark.parametrize("k", [1, 2])
def test_order_statistic_of_1e12(k: int, fold: bool) -> None:
    n = 10**12
    g = _small_cells_grid(FOLD if fold else POLICY)
    at = _span(g)
    out = order_statistic_grid(g, k, n)
    assert _check(out, _reference(g, k, n, at), at, fold) <= 0.0
    if not fold:
        assert out.roundoff < 1e-9  # only the values read count (S near 1 is ill-conditioned)


def _old_order_statistic_grid(g: GridDistribution, k: int, n: int) -> GridDistribution:
    """The code before this test (scipy's betainc, nothing counted)."""
    out = []
    for pmf, below, above in ((g.lo, g.below, 0.0), (g.hi, 0.0, g.above)):
        cdf, sf = _cdf_sf(pmf, below, above)
        out.append(
            (
                special.betainc(k, n - k + 1, np.clip(cdf, 0, 1)),
                special.betainc(n - k + 1, k, np.clip(sf, 0, 1)),
            )
        )
    below = float(special.betainc(k, n - k + 1, g.below))
    above = float(special.betainc(n - k + 1, k, g.above))
    lo = _pmf_from_cdf_sf(*out[0], below)
    hi = _pmf_from_cdf_sf(*out[1], 0.0)
    return GridDistribution(
        g.h, g.k0, lo, hi, below, above, g.policy, roundoff=min(n * g.roundoff, 1.0)
    ).trimmed()


def test_old_code_misses() -> None:
    # the same checks fail on the old function (by 5e-20 to 4e-16 on the unsafe side)
    misses = 0
    for k, n in CASES:
        g, at, ref = _case(k, n)
        misses += _check(_old_order_statistic_grid(g, k, n), ref, at, False) > 0
    assert misses == len(CASES)


# ----- the enclosure itself --------------------------------------------------------------------
@pytest.mark.parametrize(("k", "n"), [(1, 1), (1, 6), (4, 9), (9, 9), (35, 70), (2, 300)])
def test_enclosure_contains_exact_tails(k: int, n: int) -> None:
    rng = np.random.default_rng(n)
    # 1e-310 and 4e-320: x / (1 - x) beyond e^+-699 (the clipped ratio)
    extremes = [0.0, 1.0, 1e-300, 1e-310, 4e-320, 1e-18, 0.5, 1 - 2**-53]
    v = np.concatenate((rng.uniform(0, 1, 10), extremes))
    for via_sf in (False, True):
        g_lo, g_hi, s_lo, s_hi = binomial_tail_enclosure(k, n, v, np.full(v.size, via_sf))
        for i, vi in enumerate(v):
            with mpmath.workdps(400 if 0 < vi < 1e-250 else 80):  # 1 - 1e-310 held exactly
                x = 1 - mpmath.mpf(vi) if via_sf else mpmath.mpf(vi)
                g, s = _tails(k, n, x)
            assert g_lo[i] <= g <= g_hi[i], (vi, via_sf, g_lo[i], g, g_hi[i])
            assert s_lo[i] <= s <= s_hi[i], (vi, via_sf, s_lo[i], s, s_hi[i])
            assert g_hi[i] - g_lo[i] <= 1e-12 and s_hi[i] - s_lo[i] <= 1e-12


def test_enclosure_bulk_of_a_large_n() -> None:
    # n = 1e6 near the mode (the centred log terms): an 80-digit sum of the terms that matter
    k, n = 300_000, 10**6
    v = np.array([0.2990, 0.2999, 0.3, 0.3003, 0.3010])
    g_lo, g_hi, s_lo, s_hi = binomial_tail_enclosure(k, n, v, np.zeros(v.size, dtype=bool))
    for i, vi in enumerate(v):
        x = mpmath.mpf(vi)
        log_t = lambda j: mpmath.loggamma(n + 1) - mpmath.loggamma(j + 1)  # noqa: E731
        base = (
            log_t(k) - mpmath.loggamma(n - k + 1) + k * mpmath.log(x) + (n - k) * mpmath.log1p(-x)
        )
        up, t, j = mpmath.mpf(0), mpmath.exp(base), k
        while t > mpmath.mpf(10) ** -40:  # upward terms; past the mode they fall geometrically
            up += t
            t *= mpmath.mpf(n - j) / (j + 1) * x / (1 - x)
            j += 1
        down, t, j = mpmath.mpf(0), mpmath.exp(base) * k / (n - k + 1) * (1 - x) / x, k - 1
        while t > mpmath.mpf(10) ** -40:
            down += t
            t *= mpmath.mpf(j) / (n - j + 1) * (1 - x) / x
            j -= 1
        assert g_lo[i] <= up <= g_hi[i] and s_lo[i] <= down <= s_hi[i]
        assert g_hi[i] - g_lo[i] < 1e-9  # u sqrt(n)-sized, not u n


def test_log_binomial_against_exact_integers() -> None:
    for n, j in ((5, 2), (1000, 500), (4000, 1234), (10**6, 3)):
        value, err = log_binomial(n, j)
        exact = mpmath.log(mpmath.binomial(n, j))
        assert abs(value - exact) <= err
