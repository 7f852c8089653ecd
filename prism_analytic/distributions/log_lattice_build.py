"""Putting laws on the log lattice: which laws need it, how fine it is, and the conversions.

Exact laws are discretised from their CDF and survival function, linear grids and other
lattices are re-rounded onto it (the lower side down, the upper side up), so every conversion
keeps the sandwich (see :mod:`.log_lattice`).
"""

from __future__ import annotations

import math

import numpy as np

from ..policy import DEFAULT_POLICY, GridPolicy
from .base import Distribution
from .grid import GridDistribution
from .log_lattice_dist import (
    _MAX_OCTAVE,
    _MIN_OCTAVE,
    MAX_OCTAVES,
    MAX_POINTS,
    MIN_POINTS,
    LogLatticeDistribution,
)

__all__ = [
    "FAR_TAIL_RATIO",
    "needs_log_lattice",
    "points_per_octave",
    "octave_range",
    "round_onto",
    "short_lower_tail",
    "sum_needs_log_lattice",
    "to_log_lattice",
]

#: A law needs the log lattice when its far tail (the 1e-12 upper quantile) lies more than
#: this many interquartile ranges above its median: a linear lattice of ``max_cells`` cells
#: then cannot resolve the bulk and reach the tail (lognormal sigma >= 1.5, Pareto alpha < 3).
FAR_TAIL_RATIO = 1e4


# ----- when the log lattice is the right tool --------------------------------------------------
def needs_log_lattice(dist: Distribution, policy: GridPolicy = DEFAULT_POLICY) -> bool:
    """Whether a sum involving ``dist`` belongs on the log lattice rather than a linear one.

    True for log lattices, and for exact laws with a heavy upper tail (a power tail of index
    below 3, or a 1e-12 upper quantile more than :data:`FAR_TAIL_RATIO` interquartile ranges
    above the median: a linear lattice cannot hold both bulk and tail) whose lower tail is
    short (the ``policy.tail_mass`` quantile positive, or within 100 interquartile ranges of
    the median: the lattice's cells grow with the distance from its origin, so a long lower
    tail would coarsen the bulk). Linear grids stay linear.
    """
    if isinstance(dist, LogLatticeDistribution):
        return True
    if not (dist.is_exact and short_lower_tail(dist, policy)):
        return False
    with np.errstate(all="ignore"):  # a very wide law's moments overflow to inf in scipy
        q1, med, q3 = (float(v) for v in dist._quantile(np.array([0.25, 0.5, 0.75])))
        far = float(dist._isf(np.array([1e-12]))[0])
        heavy = dist.tail_index < 3
    iqr = q3 - q1
    return bool(heavy or (np.isfinite(far) and far - med > FAR_TAIL_RATIO * iqr))


def short_lower_tail(dist: Distribution, policy: GridPolicy) -> bool:
    """Whether the log lattice can hold ``dist``'s lower tail (see :func:`needs_log_lattice`)."""
    if not dist.is_exact:
        return True  # grids and lattices span a finite window
    with np.errstate(all="ignore"):
        q1, med, q3 = (float(v) for v in dist._quantile(np.array([0.25, 0.5, 0.75])))
        low = float(dist._quantile(np.array([policy.tail_mass]))[0])
    iqr = q3 - q1
    return bool(iqr > 0 and np.isfinite(low) and (low > 0 or med - low <= 100 * iqr))


def sum_needs_log_lattice(dists: list[Distribution], policy: GridPolicy = DEFAULT_POLICY) -> bool:
    """Whether a sum of ``dists`` goes on the log lattice: one needs it and all fit on it."""
    return any(needs_log_lattice(d, policy) for d in dists) and all(
        short_lower_tail(d, policy) for d in dists
    )


def points_per_octave(sums: int, policy: GridPolicy = DEFAULT_POLICY) -> int:
    """Cells per octave for a computation of ``sums`` additions.

    Each addition moves a point by at most one cell (``1/n`` of its value); ``n`` is chosen so
    that ``sums / n`` meets ``policy.rel_width * 40`` (a quarter-percent at the default), within
    [:data:`MIN_POINTS`, :data:`MAX_POINTS`] so one addition stays well under a second.
    """
    want = (sums + 1) / (40.0 * policy.rel_width)
    n = 1 << max(int(math.ceil(math.log2(max(want, 2.0)))), 1)
    return int(min(max(n, MIN_POINTS), MAX_POINTS))


# ----- building a log lattice --------------------------------------------------------------------
def octave_range(x_low: float, x_high: float, keep_top: bool) -> tuple[int, int]:
    """(j0, J) of the octaves covering [x_low, x_high] (both > 0), at most MAX_OCTAVES.

    A longer range loses its bottom octaves when ``keep_top`` (a variable >= 0, whose lower
    side then rounds that mass down to 0 at no cost to sums), its top ones otherwise.
    """
    j_lo = max(math.frexp(x_low)[1] - 1, _MIN_OCTAVE)
    j_hi = max(min(math.frexp(x_high)[1] - 1, _MAX_OCTAVE), j_lo)
    if j_hi - j_lo + 1 > MAX_OCTAVES and keep_top:
        j_lo = j_hi - MAX_OCTAVES + 1
    return j_lo, min(j_hi - j_lo + 1, MAX_OCTAVES)


def _discretize_exact(dist: Distribution, n: int, policy: GridPolicy) -> LogLatticeDistribution:
    """An exact law's sandwich on the log lattice, from its CDF and survival function."""
    tail = policy.tail_mass
    x_min = float(dist._quantile(np.array([tail]))[0])
    x_max = float(dist._isf(np.array([tail]))[0])
    if not np.isfinite(x_min):
        raise ValueError(f"cannot put {dist!r} on a log lattice: its lower tail is not finite")
    # A tail beyond float64's range ends at the last octave: the upper side's mass there
    # goes to +inf, the lower side's stays at the top point.
    x_max = min(x_max, math.ldexp(1.0, _MAX_OCTAVE))
    q1, med, q3 = (float(v) for v in dist._quantile(np.array([0.25, 0.5, 0.75])))
    scale = max(q3 - q1, abs(med), abs(q3), 1e-300)
    # Laws >= 0 sit on the lattice as they are (what lies below its first octave rounds down
    # to 0 on the lower side); others are shifted so that all but ``tail`` of their mass lies
    # above about one interquartile range.
    shift = 0.0 if x_min > 0 or dist.support[0] >= 0 else x_min - scale
    nonneg = bool(dist.support[0] >= shift)
    lo_x = max(x_min - shift, scale * 1e-15)
    j0, octaves = octave_range(lo_x, max(x_max - shift, lo_x), keep_top=nonneg)
    pts = np.ldexp(1.0 + np.arange(n) / n, (j0 + np.arange(octaves + 1))[:, None]).ravel()
    pts = pts[: octaves * n + 1] + shift  # one point beyond the last octave closes its cell
    cdf, sf = dist._cdf(pts), dist._sf(pts)
    with np.errstate(all="ignore"):  # scipy's moments of a very wide law overflow to inf
        moments, tail = (dist.mean(), dist.var()), dist.tail_index
    # Cell masses from the CDF in the lower half, the survival function in the upper half.
    cell = np.where(cdf[1:] <= 0.5, cdf[1:] - cdf[:-1], sf[:-1] - sf[1:])
    cell = np.maximum(cell, 0.0)  # mass of (x_i, x_(i+1)]
    lo = cell.copy()
    lo[-1] += sf[-1]  # the lower side keeps mass above the lattice at its top point
    # The upper side rounds mass at or below the first point up to it, and cell
    # (x_i, x_(i+1)] up to x_(i+1); the last cell rounds up past the top, into ``above``.
    hi = np.concatenate(([cdf[0]], cell[:-1]))
    return LogLatticeDistribution(
        n,
        j0,
        lo.reshape(octaves, n),
        hi.reshape(octaves, n),
        below=0.0 if nonneg else float(cdf[0]),
        above=float(cell[-1] + sf[-1]),
        shift=shift,
        policy=policy,
        moments=moments,
        tail_index=tail,
        zero=float(cdf[0]) if nonneg else 0.0,
        nonneg=nonneg,
    )


def round_onto(
    v_lo: np.ndarray,
    v_hi: np.ndarray,
    lo_m: np.ndarray,
    hi_m: np.ndarray,
    n: int,
    j0: int,
    octaves: int,
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Masses at given values rounded onto the lattice ``(n, j0, octaves)``, keeping the sandwich.

    Parameters
    ----------
    v_lo, v_hi : ndarray
        Values (relative to the target lattice's shift) of the lower and the upper side's
        masses; ``v_lo <= exact value <= v_hi`` where the values carry round-off.
    lo_m, hi_m : ndarray
        The two sides' masses at those values.
    n, j0, octaves : int
        The target lattice (see :class:`~.log_lattice_dist.LogLatticeDistribution`).

    Returns
    -------
    tuple
        ``(lo, hi, off_lo, off_hi)``: both sides on the lattice, shape ``(octaves, n)`` (the
        lower side rounded down, the upper side up; lower mass above the last point stays at
        it), the lower side's mass below the first octave (for the zero atom or -inf) and the
        upper side's above the last point (for +inf).
    """
    raw = np.ldexp(1.0 + np.arange(n) / n, (j0 + np.arange(octaves))[:, None]).ravel()
    top = raw.size
    i_lo = np.searchsorted(raw, v_lo, side="right") - 1  # last point <= value
    i_hi = np.searchsorted(raw, v_hi, side="left")  # first point >= value
    off_lo = float(lo_m[i_lo < 0].sum())
    off_hi = float(hi_m[i_hi >= top].sum())
    lo = np.bincount(np.minimum(i_lo[i_lo >= 0], top - 1), lo_m[i_lo >= 0], top)
    hi = np.bincount(i_hi[i_hi < top], hi_m[i_hi < top], top)
    return lo.reshape(octaves, n), hi.reshape(octaves, n), off_lo, off_hi


def _grid_to_log(grid: GridDistribution, n: int) -> LogLatticeDistribution:
    """A linear grid's sandwich on the log lattice: lo rounds down, hi rounds up."""
    pts = grid.points
    mass = (grid.lo > 0) | (grid.hi > 0)
    first, last = float(pts[np.argmax(mass)]), float(pts[mass.size - 1 - np.argmax(mass[::-1])])
    # A grid >= 0 sits on the lattice as it is (mass at 0 is the lower side's zero atom);
    # one reaching below zero is shifted above it by a margin of its own width.
    margin = max(last - first, abs(first), grid.h)
    nonneg = bool(first >= 0 and grid.below == 0)
    shift = 0.0 if nonneg else first - margin
    positive = pts[mass & (pts - shift > 0)]
    bottom = max(float(positive[0]) - shift if positive.size else margin, margin * 1e-15)
    j0, octaves = octave_range(bottom, max(last - shift, bottom), keep_top=nonneg)
    lo, hi, off, off_hi = round_onto(pts - shift, pts - shift, grid.lo, grid.hi, n, j0, octaves)
    zero = off if nonneg else 0.0  # below the first octave: to 0 if >= 0, else -inf
    below = grid.below + (0.0 if nonneg else off)
    above = grid.above + off_hi
    return LogLatticeDistribution(
        n,
        j0,
        lo,
        hi,
        below,
        above,
        shift,
        grid.policy,
        grid.moments,
        grid.tail_index,
        grid.roundoff,
        zero=zero,
        nonneg=nonneg,
    )


def _coarsen(d: LogLatticeDistribution, n: int) -> LogLatticeDistribution:
    """The same sandwich with ``n`` (a smaller power of two) cells per octave."""
    if n == d.n:
        return d
    f = d.n // n
    lo = d.lo.reshape(d.octaves, n, f).sum(axis=2)  # floor: point i -> i // f
    # ceil: point i -> ceil(i / f), the octave's end being the next octave's first point
    hi_src = d.hi.reshape(d.octaves, n, f)
    hi = np.zeros((d.octaves + 1, n))
    hi[:-1] += hi_src[:, :, 0]
    hi[:-1, 1:] += hi_src[:, :-1, 1:].sum(axis=2)
    hi[1:, 0] += hi_src[:, -1, 1:].sum(axis=1)
    lo = np.vstack((lo, np.zeros((1, n))))
    return d._with(n=n, lo=lo, hi=hi)


def to_log_lattice(
    dist: Distribution, n: int, policy: GridPolicy = DEFAULT_POLICY
) -> LogLatticeDistribution:
    """Any distribution as a sandwich on the log lattice with ``n`` cells per octave.

    Exact laws are discretised from their CDF and survival function, linear grids keep their
    sandwich (rounded outwards), log lattices with more cells are coarsened; anything else
    (e.g. a mixture of grids) goes through its linear grid first.
    """
    if isinstance(dist, LogLatticeDistribution):
        return _coarsen(dist, min(n, dist.n))
    if isinstance(dist, GridDistribution):
        return _grid_to_log(dist, n)
    if dist.is_exact:
        return _discretize_exact(dist, n, policy)
    from .grid import to_grid_like

    return _grid_to_log(to_grid_like(dist, policy), n)
