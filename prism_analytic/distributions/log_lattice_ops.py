"""Sums and maxima of independent variables on the log lattice (see :mod:`.log_lattice`)."""

from __future__ import annotations

import math

import numpy as np
import scipy.fft

from ..policy import DEFAULT_POLICY, GridPolicy
from .base import Distribution
from .cdf_roundoff import exp_log_cdf_error, exp_log_fold, log_sum_rel_error
from .doubling import sum_by_doubling
from .grid import ATOM_UNION_ERROR, move_mass_down, move_mass_up
from .log_lattice_build import (
    _coarsen,
    octave_range,
    points_per_octave,
    round_onto,
    to_log_lattice,
)
from .log_lattice_dist import _MAX_OCTAVE, MAX_OCTAVES, LogLatticeDistribution
from .roundoff import UNIT_ROUNDOFF

__all__ = [
    "log_lattice_add",
    "log_lattice_convolve",
    "log_lattice_iid_max",
    "log_lattice_iid_sum",
    "log_lattice_max",
    "log_lattice_scaled",
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
    # 1 - (1 - a)(1 - b) kept for bit-identity; its error (atoms below ~1e-16 round to 0) is
    # at most ATOM_UNION_ERROR: reported in roundoff, or moved outwards into the atoms
    below = 1.0 - (1.0 - a.below) * (1.0 - b.below)
    above = 1.0 - (1.0 - a.above) * (1.0 - b.above)
    roundoff = a.roundoff + b.roundoff
    policy = a.policy
    if policy.fold_roundoff:  # move the bound's mass outwards: the sides then hold exactly
        shape = lo.shape
        lo = move_mass_down(lo.ravel(), err_lo).reshape(shape)
        hi = move_mass_up(hi.ravel(), err_hi).reshape(shape)
        below = min(below + err_lo + ATOM_UNION_ERROR, 1.0)
        above = min(above + err_hi + ATOM_UNION_ERROR, 1.0)
    else:
        roundoff += max(err_lo, err_hi) + ATOM_UNION_ERROR
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


def log_lattice_add(a: LogLatticeDistribution, b: LogLatticeDistribution) -> LogLatticeDistribution:
    """The sum of two independent log-lattice variables (rounded once, see :mod:`.log_lattice`)."""
    return _add(a, b)


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
    return sum_by_doubling(base, m, _add, lambda d: _add(d, None))


def _log_cdf(f: np.ndarray, sf: np.ndarray) -> np.ndarray:
    """``log F`` at the points, from whichever of ``F`` and ``1 - S`` keeps its precision.

    Near 1 the running sum ``F`` has lost the digits of ``1 - F`` (a CDF of 1 - 1e-11 summed
    over thousands of cells is off by ~1e-13, i.e. 1% of 1 - F), and ``n log F`` multiplies
    that error by ``n``: ``log1p(-S)`` from the survival sum is exact to a few ulps there.
    """
    with np.errstate(divide="ignore"):
        f, sf = np.clip(f, 0.0, 1.0), np.clip(sf, 0.0, 1.0)
        return np.where(sf < 0.5, np.log1p(-sf), np.log(f))


def _power_side(f: np.ndarray, sf: np.ndarray, n: int, widen: float = 1.0) -> np.ndarray:
    """Masses of the law whose CDF at the points is ``f**n`` (survival ``1 - (1 - sf)**n``).

    The CDF power is taken in log space (:func:`_log_cdf`), and the differences from the CDF
    below the median and from the survival function above it, where each keeps its precision.
    ``widen`` scales ``n log F`` (``1 -+ w`` moves the side out by its round-off, see
    :func:`~.cdf_roundoff.exp_log_fold`).
    """
    log_f = n * _log_cdf(f, sf) * widen
    return _side_from_logs(log_f, log_f)


def _side_from_logs(log_f: np.ndarray, log_s: np.ndarray) -> np.ndarray:
    """Masses at the points of the law with CDF ``exp(log_f)`` and SF ``-expm1(log_s)``."""
    f_n = np.exp(log_f)
    s_n = -np.expm1(log_s)
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
    # the power's own round-off (sums, logs, exp: cdf_roundoff), reported or folded outwards
    rho = log_sum_rel_error(f_lo.size, 1)
    w = exp_log_fold(rho) if dist.policy.fold_roundoff else 0.0
    own = 0.0 if w else exp_log_cdf_error(rho)
    below = min(dist.below**n * (1.0 + w), 1.0)
    lo = _power_side(f_lo, s_lo, n, 1.0 - w)
    # the first CDF value includes the -inf atom (and is only that without a zero atom)
    zero = max(lo[0] - below, 0.0) if dist.nonneg else 0.0
    hi = _power_side(f_hi, s_hi, n, 1.0 + w)
    above = float(-np.expm1(n * np.log1p(-dist.above) * (1.0 + w)))
    return dist._with(
        lo=lo[1:].reshape(dist.lo.shape),
        hi=hi[1:].reshape(dist.hi.shape),
        below=below,
        above=above,
        zero=zero,
        moments=None,
        roundoff=min(1.0, n * dist.roundoff + own),
    )


# ----- maxima of different variables and scaling: re-rounding onto a common lattice ---------------
#: Relative error allowed for a value computed in floating point from a lattice point (a shift
#: difference or a scale factor, a few operations): the values are widened by it before they are
#: rounded, so that a lower side never rounds up (nor an upper side down) through round-off.
_VALUE_SLACK = 8 * np.finfo(float).eps


def _values(
    d: LogLatticeDistribution | float, shift: float, factor: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lower values, upper values, lower masses, upper masses) of ``factor * d - shift``.

    ``d`` is a lattice (its flat points, zero atom first) or a constant. The values are exact
    when nothing moves (``factor`` 1, the same shift); otherwise they are widened by the
    round-off of the few operations that computed them.
    """
    if isinstance(d, LogLatticeDistribution):
        raw = np.concatenate(([0.0], d._raw_points()))
        lo_m, hi_m = d._flat("lo"), d._flat("hi")
        base = d.shift_value
    else:
        raw, lo_m, hi_m, base = np.zeros(1), np.ones(1), np.ones(1), float(d)
    if factor == 1.0 and base == shift:
        return raw, raw, lo_m, hi_m
    offset = factor * base - shift
    v = factor * raw + offset
    err = _VALUE_SLACK * (np.abs(factor * raw) + abs(factor * base) + abs(shift) + np.abs(v))
    return v - err, v + err, lo_m, hi_m


def _relattice(
    parts: list[tuple[LogLatticeDistribution | float, float]],
) -> list[LogLatticeDistribution]:
    """Lattices and constants ``(d, factor)`` (standing for ``factor * d``) on one lattice.

    The common lattice has the fewest cells per octave among them and the lowest shift; every
    mass is re-rounded onto it (the lower side down, the upper side up, see
    :func:`~.log_lattice_build.round_onto`), so each result keeps its sandwich. A part already
    on that lattice is copied exactly. The results have no moments (a maximum has none known).
    """
    lattices = [d for d, _ in parts if isinstance(d, LogLatticeDistribution)]
    n = min(d.n for d in lattices)
    shifts = [f * d.shift_value for d, f in parts if isinstance(d, LogLatticeDistribution)]
    shift = min(shifts)
    if any(f != 1.0 for _, f in parts):  # a scaled shift may be rounded above the exact one
        shift -= _VALUE_SLACK * abs(shift)
    nonneg = any(d.nonneg for d in lattices)
    values = [_values(d, shift, f) for d, f in parts]
    ends = [
        (v_lo[(lo_m > 0) & (v_lo > 0)], v_hi[(hi_m > 0) | (lo_m > 0)])
        for v_lo, v_hi, lo_m, hi_m in values
    ]
    bottoms = [float(b.min()) for b, _ in ends if b.size]
    tops = [float(t.max()) for _, t in ends if t.size]
    top = max(tops + [1.0])
    bottom = min(bottoms + [top])
    j0, octaves = octave_range(max(bottom, top * 1e-300), max(top, bottom), keep_top=nonneg)
    out = []
    for (d, _), (v_lo, v_hi, lo_m, hi_m) in zip(parts, values):
        lo, hi, off, off_hi = round_onto(v_lo, v_hi, lo_m, hi_m, n, j0, octaves)
        if isinstance(d, LogLatticeDistribution):
            below, above, own = d.below, d.above, d.nonneg
            tail, roundoff, policy = d.tail_index, d.roundoff, d.policy
        else:  # a constant: >= the lattice's shift when its value is
            below, above, own = 0.0, 0.0, bool(float(d) >= shift)
            tail, roundoff, policy = math.inf, 0.0, lattices[0].policy
        out.append(
            LogLatticeDistribution(
                n,
                j0,
                lo,
                hi,
                below + (0.0 if own else off),
                above + off_hi,
                shift,
                policy,
                None,
                tail,
                roundoff,
                zero=off if own else 0.0,
                nonneg=own,
            )
        )
    return out


def log_lattice_scaled(dist: LogLatticeDistribution, factor: float) -> LogLatticeDistribution:
    """The law of ``factor * X`` (``factor`` > 0) on a log lattice, keeping the sandwich.

    A power of two moves the octaves (exact); any other factor re-rounds every point.
    """
    if not (factor > 0 and math.isfinite(factor)):
        raise ValueError(f"factor must be finite and > 0, got {factor}")
    if math.frexp(factor)[0] == 0.5:
        return dist._affine(0.0, factor)
    (out,) = _relattice([(dist, factor)])
    if dist.moments is None:
        return out
    return out._with(moments=(factor * dist.moments[0], factor * factor * dist.moments[1]))


def log_lattice_max(
    dists: list[LogLatticeDistribution], floor: float | None = None
) -> LogLatticeDistribution:
    """The maximum of independent log-lattice variables (and of a constant ``floor``).

    The maximum is monotone in each operand: the operands' lower sides give the lower side
    of the result (the product of their CDFs, in log space), the upper sides the upper one.
    Operands on different lattices are first re-rounded onto a common one (one more rounding
    each). A CDF error ``e_k`` of each operand moves the product by at most ``sum e_k``.
    """
    parts: list[tuple[LogLatticeDistribution | float, float]] = [(d, 1.0) for d in dists]
    if floor is not None:
        parts.append((float(floor), 1.0))
    if len(parts) == 1:
        return dists[0]
    common = _relattice(parts)
    log_lo = sum(_log_cdf(c._cum("F_lo"), c._cum("S_lo")) for c in common)
    log_hi = sum(_log_cdf(c._cum("F_hi"), c._cum("S_hi")) for c in common)
    # the product's own round-off (sums, logs, exp: cdf_roundoff), reported or folded outwards
    rho = log_sum_rel_error(common[0]._cum("F_lo").size, len(common))
    w = exp_log_fold(rho) if common[0].policy.fold_roundoff else 0.0
    own = 0.0 if w else exp_log_cdf_error(rho)
    lo = _side_from_logs(log_lo * (1.0 - w), log_lo * (1.0 - w))
    hi = _side_from_logs(log_hi * (1.0 + w), log_hi * (1.0 + w))
    below = min(float(np.prod([c.below for c in common])) * (1.0 + w), 1.0)
    log_above = np.sum(np.log1p(-np.array([c.above for c in common]))) * (1.0 + w)
    nonneg = any(c.nonneg for c in common)
    first = common[0]
    return first._with(
        lo=lo[1:].reshape(first.lo.shape),
        hi=hi[1:].reshape(first.hi.shape),
        below=below,
        above=float(-np.expm1(log_above)),
        zero=max(float(lo[0]) - below, 0.0) if nonneg else 0.0,
        nonneg=nonneg,
        moments=None,
        tail_index=min(c.tail_index for c in common),
        roundoff=min(1.0, sum(c.roundoff for c in common) + own),
    )
