"""Sums and maxima of independent variables on the log lattice (see :mod:`.log_lattice`)."""

from __future__ import annotations

import math

import numpy as np
import scipy.fft

from ..policy import DEFAULT_POLICY, GridPolicy
from .base import Distribution
from .grid import move_mass_down, move_mass_up
from .log_lattice_build import _coarsen, points_per_octave, to_log_lattice
from .log_lattice_dist import _MAX_OCTAVE, MAX_OCTAVES, LogLatticeDistribution
from .roundoff import UNIT_ROUNDOFF

__all__ = [
    "log_lattice_convolve",
    "log_lattice_iid_max",
    "log_lattice_iid_sum",
]


# ----- the sum -----------------------------------------------------------------------------------
def _partners(x: np.ndarray, up: bool) -> np.ndarray:
    """Row ``b``: every point of octaves below ``b``, rounded onto octave ``b``'s cells.

    Indices count cells of ``h_b = 2^b / n`` from zero (the octave itself is ``[n, 2n)``).
    Going up one octave halves the indices: ``floor(k / 2)`` (lower side) or ``ceil(k / 2)``
    (upper side), which composes to the rounding of the original value (nested lattices).
    """
    octaves, n = x.shape
    out = np.zeros((octaves, 2 * n))
    cur = np.zeros(2 * n)
    for b in range(octaves):
        out[b] = cur
        cur = cur.copy()
        cur[n:] += x[b]
        nxt = np.zeros(2 * n)
        nxt[:n] += cur[0::2]
        if up:
            nxt[1 : n + 1] += cur[1::2]
        else:
            nxt[:n] += cur[1::2]
        cur = nxt
    return out


def _row_errors(a: np.ndarray, b: np.ndarray) -> float:
    """Sum over rows of :func:`.roundoff.fft_l1_error` ``(a[r], b[r])``, vectorised.

    The same bound (Higham Thm 24.2 with its factor-2 margin): per row
    ``2 sqrt(N) (4 e (|a|_2 |b|_1 + |a|_1 |b|_2) + u |a|_1 |b|_1)``; checked against the
    scalar function in the tests.
    """
    n_out = a.shape[1] + b.shape[1] - 1
    n_fft = 1 << (n_out - 1).bit_length()
    mu = 4 * UNIT_ROUNDOFF
    gamma4 = 4 * UNIT_ROUNDOFF / (1 - 4 * UNIT_ROUNDOFF)
    eta = mu + gamma4 * (math.sqrt(2) + mu)
    lg = math.log2(n_fft)
    e = lg * eta / (1 - lg * eta)
    a1, b1 = np.abs(a).sum(axis=1), np.abs(b).sum(axis=1)
    a2, b2 = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    l2 = 4 * e * (a2 * b1 + a1 * b2) + UNIT_ROUNDOFF * a1 * b1
    return float(math.sqrt(n_fft) * 2.0 * l2.sum())


def _side_sum(x: np.ndarray, y: np.ndarray | None, up: bool) -> tuple[np.ndarray, float]:
    """One side of the sum on the common octaves; ``y=None`` means ``x + x'`` (i.i.d.).

    Returns the masses on ``J + 2`` octaves (a sum reaches one octave above its larger part,
    and the upper side's rounding one point further) and the L1 round-off bound.
    """
    octaves, n = x.shape
    size = 2 * n  # each product below is at most 2n long: no wrap-around
    rx = _partners(x, up)[:, : n + 1]  # x below octave b, on h_b: indices 0 .. n
    fx, frx = scipy.fft.rfft(x, size, axis=1), scipy.fft.rfft(rx, size, axis=1)
    # Pairs with the larger member in octave b: (x_b, y_<b) and (x_<b, y_b) start at index
    # n of h_b, (x_b, y_b) at 2n; the two families are transformed back separately.
    if y is None:
        mixed, top = 2.0 * fx * frx, fx * fx
        err = 2.0 * _row_errors(x, rx) + _row_errors(x, x)
    else:
        ry = _partners(y, up)[:, : n + 1]
        fy, fry = scipy.fft.rfft(y, size, axis=1), scipy.fft.rfft(ry, size, axis=1)
        mixed, top = fx * fry + frx * fy, fx * fy
        err = _row_errors(x, ry) + _row_errors(rx, y) + _row_errors(x, y)
    c = np.zeros((octaves, 4 * n))
    c[:, n : 3 * n] = scipy.fft.irfft(mixed, size, axis=1)
    c[:, 2 * n :] += scipy.fft.irfft(top, size, axis=1)
    c = np.maximum(c, 0.0)
    out = np.zeros((octaves + 2, n))
    out[:octaves] += c[:, n : 2 * n]  # sums inside octave b are on its lattice already
    if up:  # octave b + 1 has cells 2 h_b: index k -> ceil((k - 2n) / 2)
        out[1 : octaves + 1, 0] += c[:, 2 * n]
        out[1 : octaves + 1, 1:] += c[:, 2 * n + 1 : 4 * n - 1 : 2] + c[:, 2 * n + 2 : 4 * n : 2]
        out[2 : octaves + 2, 0] += c[:, 4 * n - 1]
    else:  # ... or floor((k - 2n) / 2)
        out[1 : octaves + 1] += c[:, 2 * n :: 2] + c[:, 2 * n + 1 :: 2]
    return out, err


def _pad(d: LogLatticeDistribution, j0: int, octaves: int) -> tuple[np.ndarray, np.ndarray]:
    """Both sides of ``d`` on octaves ``j0 .. j0 + octaves - 1`` (zero mass added)."""
    pad = ((d.j0 - j0, j0 + octaves - d.j0 - d.octaves), (0, 0))
    return np.pad(d.lo, pad), np.pad(d.hi, pad)


def _trim(
    j0: int,
    lo: np.ndarray,
    hi: np.ndarray,
    below: float,
    above: float,
    eps: float,
    nonneg: bool,
) -> tuple[int, np.ndarray, np.ndarray, float, float, float]:
    """Drop end octaves holding at most ``eps`` into places the sandwich allows.

    Below the kept range the lower side's mass goes to -inf, or to 0 (returned as the last
    value) for a variable >= 0, and the upper side's up to the first kept point; above it the
    upper side's goes to +inf and the lower side's down to the last kept point. The range is
    capped at :data:`MAX_OCTAVES` (keeping the top for a variable >= 0) and float64's range.

    Returns
    -------
    tuple
        ``(j0, lo, hi, below, above, to_zero)``.
    """
    per_lo, per_hi = lo.sum(axis=1), hi.sum(axis=1)
    c = np.cumsum(np.maximum(per_lo, per_hi))
    r = np.cumsum(np.maximum(per_lo, per_hi)[::-1])[::-1]
    first = int(np.searchsorted(c, eps, side="right"))
    last = int(np.nonzero(r > eps)[0][-1]) if (r > eps).any() else lo.shape[0] - 1
    first = min(first, last)
    last = min(last, _MAX_OCTAVE - j0)
    if nonneg:
        first = max(first, last - MAX_OCTAVES + 1)
    last = min(last, first + MAX_OCTAVES - 1)
    new_lo = lo[first : last + 1].copy()
    new_hi = hi[first : last + 1].copy()
    cut = float(lo[:first].sum())
    below += 0.0 if nonneg else cut
    new_hi[0, 0] += float(hi[:first].sum())
    above += float(hi[last + 1 :].sum())
    new_lo[-1, -1] += float(lo[last + 1 :].sum())
    return j0 + first, new_lo, new_hi, below, above, (cut if nonneg else 0.0)


def _add(a: LogLatticeDistribution, b: LogLatticeDistribution | None) -> LogLatticeDistribution:
    """The sum of two independent log-lattice variables (``b=None``: two copies of ``a``)."""
    same = b is None
    b = a if same else b
    if a.n != b.n:
        n = min(a.n, b.n)
        a, b = _coarsen(a, n), _coarsen(b, n)
    j0 = min(a.j0, b.j0)
    octaves = max(a.j0 + a.octaves, b.j0 + b.octaves) - j0
    a_lo, a_hi = _pad(a, j0, octaves)
    b_lo, b_hi = (a_lo, a_hi) if same else _pad(b, j0, octaves)
    lo, err_lo = _side_sum(a_lo, None if same else b_lo, up=False)
    hi, err_hi = _side_sum(a_hi, None if same else b_hi, up=True)
    # The lower sides' zero atoms add exactly: 0 + y = y is already on the lattice.
    lo[:octaves] += a.zero * b_lo + b.zero * a_lo
    zero = a.zero * b.zero
    nonneg = a.nonneg and b.nonneg
    below = 1.0 - (1.0 - a.below) * (1.0 - b.below)
    above = 1.0 - (1.0 - a.above) * (1.0 - b.above)
    roundoff = a.roundoff + b.roundoff
    policy = a.policy
    if policy.fold_roundoff:  # move the bound's mass outwards: the sides then hold exactly
        shape = lo.shape
        lo = move_mass_down(lo.ravel(), err_lo).reshape(shape)
        hi = move_mass_up(hi.ravel(), err_hi).reshape(shape)
        below, above = min(below + err_lo, 1.0), min(above + err_hi, 1.0)
    else:
        roundoff += max(err_lo, err_hi)
    j0, lo, hi, below, above, to_zero = _trim(j0, lo, hi, below, above, policy.tail_mass, nonneg)
    moments = None
    if a.moments is not None and b.moments is not None:  # independent: means and variances add
        moments = (a.moments[0] + b.moments[0], a.moments[1] + b.moments[1])
    return LogLatticeDistribution(
        a.n,
        j0,
        lo,
        hi,
        below,
        above,
        a.shift_value + b.shift_value,
        policy,
        moments,
        min(a.tail_index, b.tail_index),
        roundoff,
        zero + to_zero,
        nonneg,
    )


def log_lattice_convolve(
    dists: list[Distribution], policy: GridPolicy = DEFAULT_POLICY
) -> LogLatticeDistribution:
    """The sum of independent operands on the log lattice (see the module doc)."""
    n = points_per_octave(len(dists) - 1, policy)
    parts = [to_log_lattice(d, n, policy) for d in dists]
    out = parts[0]
    for p in parts[1:]:
        out = _add(out, p)
    return out


def log_lattice_iid_sum(
    dist: Distribution, m: int, policy: GridPolicy = DEFAULT_POLICY
) -> LogLatticeDistribution:
    """The sum of ``m`` i.i.d. copies by repeated doubling on the log lattice.

    ``log2(m)`` doublings plus one addition per further set bit of ``m``; the cells per octave
    follow from that count (:func:`points_per_octave`).
    """
    sums = (m.bit_length() - 1) + (bin(m).count("1") - 1)
    base = to_log_lattice(dist, points_per_octave(sums, policy), policy)
    result: LogLatticeDistribution | None = None
    while True:
        if m & 1:
            result = base if result is None else _add(result, base)
        m >>= 1
        if not m:
            break
        base = _add(base, None)
    return result


def _power_side(f: np.ndarray, sf: np.ndarray, n: int) -> np.ndarray:
    """Masses of the law whose CDF at the points is ``f**n`` (survival ``1 - (1 - sf)**n``).

    The CDF power is taken in log space, and the differences from the CDF below the median
    and from the survival function above it, where each keeps its precision.
    """
    with np.errstate(divide="ignore"):
        f_n = np.exp(n * np.log(np.clip(f, 0.0, 1.0)))
        s_n = -np.expm1(n * np.log1p(-np.clip(sf, 0.0, 1.0)))
    prev_f = np.concatenate(([0.0], f_n[:-1]))
    prev_s = np.concatenate(([1.0], s_n[:-1]))
    return np.maximum(np.where(f_n <= 0.5, f_n - prev_f, prev_s - s_n), 0.0)


def log_lattice_iid_max(dist: LogLatticeDistribution, n: int) -> LogLatticeDistribution:
    """The maximum of ``n`` i.i.d. copies on the same log lattice (a replica group).

    The maximum is monotone, so the maxima of the two sides bracket the exact one: each side's
    CDF is raised to the power ``n`` at the lattice points (no re-rounding is needed). A CDF
    error ``e`` becomes at most ``n e``, so the round-off bound is multiplied by ``n``.
    """
    f_lo, s_lo = dist._cum("F_lo"), dist._cum("S_lo")  # at the points, zero atom first
    f_hi, s_hi = dist._cum("F_hi"), dist._cum("S_hi")
    below = dist.below**n
    lo = _power_side(f_lo, s_lo, n)
    # the first CDF value includes the -inf atom (and is only that without a zero atom)
    zero = max(lo[0] - below, 0.0) if dist.nonneg else 0.0
    hi = _power_side(f_hi, s_hi, n)
    above = float(-np.expm1(n * np.log1p(-dist.above)))
    return dist._with(
        lo=lo[1:].reshape(dist.lo.shape),
        hi=hi[1:].reshape(dist.hi.shape),
        below=below,
        above=above,
        zero=zero,
        moments=None,
        roundoff=min(1.0, n * dist.roundoff),
    )
