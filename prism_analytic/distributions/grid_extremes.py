"""Maxima, minima and order statistics of gridded variables, applied to both sandwich sides.

Every map used here (product of CDFs, F -> F^n, F -> I_F(k, n-k+1)) is monotone in each
operand, so the lower and upper variables stay lower and upper bounds. Their floating-point
round-off is bounded (:mod:`.cdf_roundoff`, :mod:`.binomial_tail`) and reported in
``roundoff`` or folded outwards.
"""

from __future__ import annotations

import numpy as np

from ..policy import GridPolicy
from .binomial_tail import order_statistic_values
from .cdf_roundoff import (
    exp_log_cdf_error,
    exp_log_fold,
    gamma,
    log_sum_rel_error,
    order_statistic_error,
    sum_error,
)
from .grid import GridDistribution, _pmf_from_cdf_sf, align, move_mass_down, move_mass_up
from .max_moments import iid_max_moments, max_independent_moments
from .roundoff import UNIT_ROUNDOFF

_U = UNIT_ROUNDOFF

__all__ = ["max_grids", "min_grids", "iid_max_grid", "order_statistic_grid"]


def _cdf_sf(pmf: np.ndarray, below: float, above: float) -> tuple[np.ndarray, np.ndarray]:
    """CDF and SF at the lattice points of a pmf with atoms at -inf (below) and +inf (above)."""
    cdf = below + np.cumsum(pmf)
    sf = np.concatenate((np.cumsum(pmf[::-1])[::-1][1:], [0.0])) + above
    return cdf, sf


def _log_cdf(cdf: np.ndarray, sf: np.ndarray) -> np.ndarray:
    # FFT round-off can push an unused branch slightly outside [0, 1]; np.where picks the other.
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sf < 0.5, np.log1p(-sf), np.log(np.maximum(cdf, 0.0)))


def _log_sf(cdf: np.ndarray, sf: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(cdf < 0.5, np.log1p(-cdf), np.log(np.maximum(sf, 0.0)))


def _from_log_cdf(
    h: float,
    k0: int,
    lc_lo: np.ndarray,
    lc_hi: np.ndarray,
    below: float,
    policy,
    tail_index: float = np.inf,
    roundoff: float = 0.0,
) -> GridDistribution:
    f_lo, s_lo = np.exp(lc_lo), -np.expm1(lc_lo)
    f_hi, s_hi = np.exp(lc_hi), -np.expm1(lc_hi)
    lo = _pmf_from_cdf_sf(f_lo, s_lo, below)
    hi = _pmf_from_cdf_sf(f_hi, s_hi, 0.0)
    return GridDistribution(
        h, k0, lo, hi, below, float(s_hi[-1]), policy, tail_index=tail_index, roundoff=roundoff
    ).trimmed()


def _own_error(
    policy: GridPolicy,
    cells: int,
    terms: int,
    roundoff: float,
    to_raise: np.ndarray,
    to_lower: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """An extreme's own round-off (:mod:`.cdf_roundoff`): reported, or folded outwards.

    ``to_raise`` and ``to_lower`` are log-values (<= 0) that the two sides are rebuilt from
    by ``exp``, computed from ``terms`` operands of ``cells`` cells. Folding scales
    ``to_raise`` by ``1 - w`` (its ``exp`` grows) and ``to_lower`` by ``1 + w``; the caller
    passes each side where that is its safe direction. Returns ``(to_raise, to_lower,
    roundoff, w)``: ``w`` is 0 when the error is reported in ``roundoff`` instead.
    """
    rho = log_sum_rel_error(cells, terms)
    if policy.fold_roundoff:
        w = exp_log_fold(rho)
        return to_raise * (1.0 - w), to_lower * (1.0 + w), roundoff, w
    return to_raise, to_lower, min(roundoff + exp_log_cdf_error(rho), 1.0), 0.0


def max_grids(grids: list[GridDistribution]) -> GridDistribution:
    """Maximum of independent gridded variables."""
    h, k0, los, his = align(grids)
    lc_lo = sum(_log_cdf(*_cdf_sf(lo, g.below, 0.0)) for lo, g in zip(los, grids))
    lc_hi = sum(_log_cdf(*_cdf_sf(hi, 0.0, g.above)) for hi, g in zip(his, grids))
    below = float(np.prod([g.below for g in grids]))
    tail = min(g.tail_index for g in grids)
    roundoff = min(float(sum(g.roundoff for g in grids)), 1.0)  # |d prod F_i| <= sum |dF_i|
    # max: a higher CDF is the lower side's safe direction
    lc_lo, lc_hi, roundoff, w = _own_error(
        grids[0].policy, los[0].size, len(grids), roundoff, lc_lo, lc_hi
    )
    below = min(below * (1.0 + w), 1.0)  # a product of atoms: relative gamma(m) < w
    out = _from_log_cdf(h, k0, lc_lo, lc_hi, below, grids[0].policy, tail, roundoff)
    if all(g.moments is not None and g.moments[1] == 0.0 for g in grids):
        out.moments = (max(g.moments[0] for g in grids), 0.0)  # constants: their largest
    elif all(g.law is not None for g in grids):
        out.moments = max_independent_moments([g.law for g in grids])
    return out


def _iid_max_moments(g: GridDistribution, n: int) -> tuple[float, float] | None:
    """Exact moments of the max of ``n`` copies of ``g`` where they are known, else None.

    One copy keeps the operand's; a constant stays itself; a grid of a closed-form law gets
    them by quadrature of that law (:func:`~.max_moments.iid_max_moments`). Otherwise the
    grid's own estimate stands (and the result says it is one).
    """
    if n == 1 or (g.moments is not None and g.moments[1] == 0.0):
        return g.moments
    if g.law is not None:
        return iid_max_moments(g.law, n)
    return None


def iid_max_grid(g: GridDistribution, n: int) -> GridDistribution:
    """Maximum of ``n`` independent copies: F^n computed as exp(n log F) (stable to n ~ 1e12)."""
    lc_lo = n * _log_cdf(*_cdf_sf(g.lo, g.below, 0.0))
    lc_hi = n * _log_cdf(*_cdf_sf(g.hi, 0.0, g.above))
    roundoff = min(n * g.roundoff, 1.0)  # |d F^n / dF| <= n
    lc_lo, lc_hi, roundoff, w = _own_error(g.policy, g.lo.size, 1, roundoff, lc_lo, lc_hi)
    # log of one atom (2u) times n (u): relative error inside rho, so the same widening holds
    below = float(np.exp(n * np.log(g.below) * (1.0 - w))) if g.below > 0 else 0.0
    out = _from_log_cdf(g.h, g.k0, lc_lo, lc_hi, below, g.policy, g.tail_index, roundoff)
    out.moments = _iid_max_moments(g, n)
    if g.law is not None:  # the maximum's own closed form, for a later barrier or max
        from .extremes import IIDMax

        out.law = g.law if n == 1 else IIDMax(g.law, n)
    return out


def min_grids(grids: list[GridDistribution]) -> GridDistribution:
    """Minimum of independent gridded variables (product of survival functions)."""
    h, k0, los, his = align(grids)
    ls_lo = sum(_log_sf(*_cdf_sf(lo, g.below, 0.0)) for lo, g in zip(los, grids))
    ls_hi = sum(_log_sf(*_cdf_sf(hi, 0.0, g.above)) for hi, g in zip(his, grids))
    below = 1.0 - float(np.prod([1.0 - g.below for g in grids]))
    above = float(np.prod([g.above for g in grids]))
    roundoff = min(float(sum(g.roundoff for g in grids)), 1.0)
    # min: a lower survival is the lower side's safe direction, so ls_lo is scaled up
    ls_hi, ls_lo, roundoff, w = _own_error(
        grids[0].policy, los[0].size, len(grids), roundoff, ls_hi, ls_lo
    )
    if w > 0:
        # the union of m atoms is off by at most 1.5 m u (absolute): adding gamma(2m + 2)
        # keeps at least (2m + 1) u after this addition's own rounding
        below = min(below + gamma(2 * len(grids) + 2), 1.0)
        above = min(above * (1.0 + w), 1.0)  # a product of atoms: relative gamma(m) < w
    f_lo, s_lo = -np.expm1(ls_lo), np.exp(ls_lo)
    f_hi, s_hi = -np.expm1(ls_hi), np.exp(ls_hi)
    lo = _pmf_from_cdf_sf(f_lo, s_lo, below)
    hi = _pmf_from_cdf_sf(f_hi, s_hi, 0.0)
    tail = float(sum(g.tail_index for g in grids))  # S = prod S_i: the tail indices add
    return GridDistribution(
        h, k0, lo, hi, below, above, grids[0].policy, tail_index=tail, roundoff=roundoff
    ).trimmed()


def order_statistic_grid(g: GridDistribution, k: int, n: int) -> GridDistribution:
    """k-th smallest of ``n`` independent copies: CDF I_F(k, n - k + 1) on both sides.

    ``k = n`` is :func:`iid_max_grid` (``exp(n log F)``, exact to ``n ~ 1e12`` and counted).
    Otherwise scipy's ``betainc`` values are kept and their distance from rigorous enclosures
    of the exact values (:func:`~.binomial_tail.order_statistic_values`, which also covers
    the sides' own sum errors) is counted (:func:`~.cdf_roundoff.order_statistic_error`):
    reported in ``roundoff``, or folded by moving that mass to the tail atoms.
    """
    if k == n:
        return iid_max_grid(g, n)
    delta = gamma(g.lo.size + 2)  # each CDF or survival value: a sum of size + 1 terms
    values, err = [], 0.0
    for pmf, below, above in ((g.lo, g.below, 0.0), (g.hi, 0.0, g.above)):
        cdf, sf = _cdf_sf(pmf, below, above)
        # the point before the first cell (the -inf atom) leads, so it stays monotone too
        f, s, e = order_statistic_values(
            k, n, np.concatenate(([below], cdf)), np.concatenate(([1.0 - below], sf)), delta
        )
        values.append((f, s))
        err = max(err, e)
    (f_lo, s_lo), (f_hi, s_hi) = values
    below, above = float(f_lo[0]), float(s_hi[-1])  # the upper side's last S is its atom
    lo = _pmf_from_cdf_sf(f_lo[1:], s_lo[1:], below)
    hi = _pmf_from_cdf_sf(f_hi[1:], s_hi[1:], 0.0)
    tail = (n - k + 1) * g.tail_index  # exceeding x needs n - k + 1 copies above x
    roundoff = min(n * g.roundoff, 1.0)  # the binomial tail's derivative in F is at most n
    own = order_statistic_error(err)
    if g.policy.fold_roundoff:
        # moving ``amount`` to -inf (lower side) and +inf (upper side) shifts every CDF and
        # survival value outwards by it; the moves' own sums err by sum_error at most
        amount = own + sum_error(lo.size, lo.size)
        lo, below = move_mass_down(lo, amount), min((below + amount) * (1.0 + 2.0 * _U), 1.0)
        hi, above = move_mass_up(hi, amount), min((above + amount) * (1.0 + 2.0 * _U), 1.0)
    else:
        roundoff = min(roundoff + own, 1.0)
    return GridDistribution(
        g.h, g.k0, lo, hi, below, above, g.policy, tail_index=tail, roundoff=roundoff
    ).trimmed()
