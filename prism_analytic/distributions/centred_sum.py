"""Sums of many i.i.d. copies on a lattice that follows the sum's spread (centred rounding).

The rounding sandwich of :mod:`.grid` moves every copy's mass to the left (or right) edge of its
cell, so after ``m`` copies the two sides are ``m * h`` apart: a bracket that grows like the
sum's *location*. A concentrated sum (a run of 10,000 steps, 1e9 gamma variables) has a spread
far below that, and its shape is lost.

Here a single lattice variable ``L`` is carried instead, and the rounding errors are kept as
what they are: bounded, independent and of known mean. With ``S`` the exact sum,
``S = L + R`` where ``R`` is the sum of every rounding error made on the way (the initial
discretisation of each copy, and each re-binning when the lattice is coarsened as the sum
spreads). Errors made at one point of the computation appear in ``n`` independent copies of a
partial sum. Re-binning uses stochastic rounding (a point goes to either end of its new cell
with probabilities that keep its mean), so the centred errors form a martingale, and
Freedman's inequality gives ``|R - E[R]| <= T`` with probability at least ``1 - delta``, with
``T`` growing like the square root of the summed error variances. ``E[R] = E[S] - E[L]`` is
known exactly: ``E[S] = m E[X]`` and ``E[L]`` from the lattice. So ``L + E[R] - T`` and
``L + E[R] + T`` bracket ``S`` except on an event of probability ``delta``, which goes into the
grid's tail atoms (moving mass to -inf for the lower side, +inf for the upper side keeps the
sandwich valid). The bracket then grows like ``h sqrt(m)``: the spread of the sum. For exact
laws the variance of one copy's rounding error is bounded from sub-cell masses
(:func:`_rounding_variance_bound`, about 0.1 h^2 for smooth laws) instead of the worst case
h^2 / 4; re-binning errors keep the worst case, as their conditional variance depends on the
point.

Floating point is bounded too: every FFT convolution adds a rigorous bound on its L1 error
(Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Thm 24.2, with a factor-2
margin) to ``roundoff``, folded into the tail atoms when ``GridPolicy.fold_roundoff`` is set and
reported on the grid otherwise; so do the base lattice's normalisation (:data:`NORMALISE_L1`
per copy) and the final grid's re-binning and normalisation (:func:`_to_grid`). For an exact
law the cell masses are differences of ``dist._cdf`` / ``dist._sf`` values, taken as exact
(README, "What is guaranteed").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .roundoff import UNIT_ROUNDOFF, fft_convolve, fft_l1_error

#: L1 error of a normalised base lattice: each mass within 3u of its exact share.
NORMALISE_L1 = 3.01 * UNIT_ROUNDOFF

__all__ = ["LatticeSum", "centred_iid_sum", "iid_sum_grid"]


def _convolve(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float]:
    out = fft_convolve(a, b)
    return np.maximum(out, 0.0), fft_l1_error(a, b)


@dataclass
class _Lattice:
    """One lattice variable ``(k0 + i) * h`` with point masses ``pmf``."""

    pmf: np.ndarray
    k0: int
    h: float
    # (copies in the final sum, width of one error, variance bound of one error)
    sources: list[tuple[int, float, float]] = field(default_factory=list)
    fail: float = 0.0  # probability of the events outside every bound so far
    roundoff: float = 0.0  # L1 bound on the floating-point error of the lattice's law

    def mean(self) -> float:
        pts = (self.k0 + np.arange(self.pmf.size)) * self.h
        return float(np.dot(self.pmf, pts) / self.pmf.sum())


def _trim(lat: _Lattice, tail: float) -> None:
    """Drop negligible end mass so lattices do not grow needlessly.

    The dropped mass changes the lattice's law by that much in L1, like round-off, and is
    counted with it (FFT noise of ~1e-19 a cell would otherwise never be trimmed).
    """
    c = np.cumsum(lat.pmf)
    r = np.cumsum(lat.pmf[::-1])[::-1]
    start = int(np.searchsorted(c, tail, side="right"))
    end = int(np.nonzero(r > tail)[0][-1]) if (r > tail).any() else lat.pmf.size - 1
    start = min(start, end)
    dropped = (c[start - 1] if start > 0 else 0.0) + (r[end + 1] if end + 1 < r.size else 0.0)
    lat.roundoff += float(dropped)
    lat.pmf = lat.pmf[start : end + 1]
    lat.k0 += start


def _rebin(lat: _Lattice, factor: float, copies: int) -> None:
    """Coarsen by ``factor`` with *stochastic* rounding.

    A point at fraction ``f`` of a new cell goes to its left end with probability ``1 - f``
    and to its right end with ``f``.

    The new lattice variable is then the old one plus an error of conditional mean zero given
    everything before it (|error| < new h, conditional variance <= h^2 / 4): a martingale
    increment, so the errors of every level add up like a random walk, not linearly.
    """
    if factor <= 1:
        return
    k = lat.k0 + np.arange(lat.pmf.size)
    y = k / factor  # position in new cells (factor may be any real > 1)
    kk = np.floor(y).astype(np.int64)
    frac = np.clip(y - kk, 0.0, 1.0)
    base = int(kk[0])
    n = int(kk[-1]) - base + 2
    pmf = np.bincount(kk - base, weights=lat.pmf * (1.0 - frac), minlength=n)
    pmf += np.bincount(kk - base + 1, weights=lat.pmf * frac, minlength=n)
    lat.pmf = pmf
    lat.k0 = base
    lat.h *= factor
    if copies > 0:
        lat.sources.append((copies, lat.h, lat.h * lat.h / 4.0))


def _add(a: _Lattice, b: _Lattice, cap: int, copies: int, tail: float) -> _Lattice:
    """The independent sum of two lattice variables, coarsened to ``cap`` cells if needed."""
    if a.h != b.h:  # bring the finer one to the coarser lattice (h's are nested by factors)
        fine, coarse = (a, b) if a.h < b.h else (b, a)
        # a copy: this rounding belongs to this one use of the finer variable
        fine = _Lattice(fine.pmf, fine.k0, fine.h, list(fine.sources), fine.fail, fine.roundoff)
        _rebin(fine, coarse.h / fine.h, 1)
        a, b = fine, coarse
    pmf, err = _convolve(a.pmf, b.pmf)
    sources = _unique_sources(a.sources + b.sources)
    roundoff = a.roundoff + b.roundoff + err  # L1 errors add under convolution
    out = _Lattice(pmf, a.k0 + b.k0, a.h, sources, a.fail + b.fail, roundoff)
    # FFT noise (~1e-19 a cell) sits at every cell and would keep the lattice from shrinking:
    # trim ends holding under 1e-14; what is dropped is counted with the round-off.
    _trim(out, max(tail, 1e-14))
    if out.pmf.size > cap:  # powers of two keep every lattice nested in the coarser ones
        _rebin(out, 2 ** math.ceil(math.log2(out.pmf.size / cap)), copies)
    return out


@dataclass
class LatticeSum:
    """The result of :func:`centred_iid_sum`: ``S`` lies in ``L + [low, high]`` w.p. >= 1 - fail.

    Attributes
    ----------
    pmf, k0, h : lattice variable ``L`` (masses at ``(k0 + i) * h``)
    low, high : float
        Offsets (seconds) such that ``L + low <= S <= L + high`` outside the failure event.
    fail : float
        Probability of the failure event (truncation, concentration bound).
    roundoff : float
        L1 bound on the floating-point error of the lattice's law (every FFT convolution).
    """

    pmf: np.ndarray
    k0: int
    h: float
    low: float
    high: float
    fail: float
    roundoff: float = 0.0


def centred_iid_sum(
    pmf: np.ndarray,
    k0: int,
    h: float,
    m: int,
    mean_one: float,
    base_width: float,
    base_fail: float,
    *,
    cap: int,
    tail: float = 1e-18,
    delta: float = 1e-14,
    base_var: float | None = None,
) -> LatticeSum:
    """The sum of ``m`` i.i.d. copies of a variable X given on a floor lattice.

    Parameters
    ----------
    pmf, k0, h : lattice of one copy's floor-rounded value ``L_1`` (``L_1 <= X < L_1 + w``).
    m : int
        Number of copies.
    mean_one : float
        The exact E[X] (of the variable the lattice rounds, on the no-failure event).
    base_width : float
        ``w``: the width of one copy's rounding error ``X - L_1`` (0 if X is the lattice
        variable itself).
    base_fail : float
        Probability that one copy falls outside its lattice (then nothing is claimed).
    cap : int
        Largest lattice length; longer partial sums are coarsened (with counted errors).
    tail, delta : float
        End mass dropped per convolution (counted as failure), and the failure probability
        given to the concentration bound.
    base_var : float, optional
        An upper bound on the variance of one copy's rounding error ``X - L_1``; default
        ``w^2 / 4``, the largest any variable in an interval of width ``w`` can have.
    """
    base = _Lattice(np.asarray(pmf, dtype=float), int(k0), float(h))
    base.pmf = base.pmf / math.fsum(base.pmf.tolist())
    # each mass is within 3u of its exact share (the caller's difference or stored value,
    # fsum's one rounding, the division): an L1 error that every copy carries (_add sums it)
    base.roundoff = NORMALISE_L1
    base.fail = base_fail  # per copy: sums add their operands' failure probabilities
    if base_width > 0:  # one error per copy, in [0, w): variance at most w^2 / 4
        var = base_width * base_width / 4.0
        var = var if base_var is None else min(base_var, var)
        base.sources.append((m, base_width, var))
    result: _Lattice | None = None
    level, rest = 0, m
    while True:
        if rest & 1:
            result = base if result is None else _add(result, base, cap, 1, tail)
        rest >>= 1
        if not rest:
            break
        level += 1
        # the squared base appears floor(m / 2^level) times in the final sum
        twin = _Lattice(base.pmf, base.k0, base.h, list(base.sources), base.fail, base.roundoff)
        base = _add(base, twin, cap, m >> level, tail)
    assert result is not None
    # Every source was recorded once per creation with its final multiplicity; a squaring
    # copies its operand's list into both halves, so sources are counted by identity.
    sources = _unique_sources(result.sources)
    # Ordered base errors first (independent, centred by their mean), then each re-binning
    # in the order it happened, the centred errors form a martingale with increments bounded
    # by c and predictable quadratic variation at most V. Freedman's inequality:
    # P(|R - E R| >= t) <= 2 exp(-t^2 / (2 (V + c t / 3))).
    t = _deviation_bound(sources, math.log(2.0 / delta))
    l_mean = float(np.dot(result.pmf, (result.k0 + np.arange(result.pmf.size)) * result.h))
    l_mean /= float(result.pmf.sum())
    er = m * mean_one - l_mean
    fail = result.fail + delta
    return LatticeSum(result.pmf, result.k0, result.h, er - t, er + t, fail, result.roundoff)


def _deviation_bound(sources: list[tuple[int, float, float]], log_term: float) -> float:
    """Smallest bound on |R - E R| over the width cuts.

    Freedman for the errors up to a width cut, and the trivial bound (copies x width) for the
    few wide ones (the last re-binnings, used once).
    """
    if not sources:
        return 0.0
    order = sorted(sources, key=lambda s: s[1])
    best = math.fsum(n * c for n, c, _ in order)  # everything trivial
    for i in range(1, len(order) + 1):
        head, rest = order[:i], order[i:]
        c = head[-1][1]
        v = math.fsum(n * var for n, _, var in head)
        a = c * log_term / 3.0
        t = a + math.sqrt(a * a + 2.0 * v * log_term) + math.fsum(n * w for n, w, _ in rest)
        best = min(best, t)
    return best


def _unique_sources(sources: list[tuple[int, float, float]]) -> list[tuple[int, float, float]]:
    """Sources by identity: a squaring copies its operand's list into both halves."""
    seen: dict[int, tuple[int, float, float]] = {}
    for s in sources:
        seen[id(s)] = s
    return list(seen.values())


# ----- building the sum of a distribution -------------------------------------------------------
def _partial_tail_expectation(dist, x_lo: float, x_hi: float) -> float:
    """A bound on E[|X|; X outside [x_lo, x_hi]] (integrals of the tails, factor-2 margin)."""
    from scipy import integrate

    def sf(x: float) -> float:
        return float(dist._sf(np.array([x]))[0])

    def cdf(x: float) -> float:
        return float(dist._cdf(np.array([x]))[0])

    with np.errstate(all="ignore"):
        upper = abs(x_hi) * sf(x_hi) + integrate.quad(sf, x_hi, np.inf, limit=200)[0]
        lower = abs(x_lo) * cdf(x_lo) + integrate.quad(cdf, -np.inf, x_lo, limit=200)[0]
    total = 2.0 * (abs(upper) + abs(lower))
    return total if math.isfinite(total) else math.inf


#: Sub-cells per lattice cell in the bound on the rounding error's variance.
SUB_CELLS = 16


def _rounding_variance_bound(dist, k0: int, k1: int, h: float, inside: float) -> float:
    """An upper bound on Var(X - L_1 | inside) for the floor lattice of cells ``(x_i, x_i+1]``.

    Var(E) <= E[(E - h/2)^2] for the error E in (0, h]. Each cell is cut into
    :data:`SUB_CELLS` equal parts; the mass of each part (CDF differences below the median,
    survival-function differences above) times the largest ``(e - h/2)^2`` on it bounds the
    expectation from above, whatever the density does inside the part. A smooth law gives
    about 0.1 h^2 instead of the worst case h^2 / 4; a law with atoms at the cells' ends keeps
    h^2 / 4. The masses carry floating-point error of order 1e-16 each: a relative margin of
    1e-6 covers it.
    """
    k = SUB_CELLS
    part = np.zeros(k)  # mass at each sub-position, summed over cells
    block = 2**16  # cells at a time: 1M evaluation points, not the whole lattice at once
    for c0 in range(k0, k1, block):
        c1 = min(c0 + block, k1)
        x = (c0 * k + np.arange((c1 - c0) * k + 1)) * (h / k)
        cdf, sf = dist._cdf(x), dist._sf(x)
        sub = np.where(cdf[1:] <= 0.5, cdf[1:] - cdf[:-1], sf[:-1] - sf[1:])
        part += np.maximum(sub, 0.0).reshape(-1, k).sum(axis=0)
    ends = (np.arange(k + 1) / k - 0.5) ** 2
    worst = np.maximum(ends[:-1], ends[1:]) * h * h
    bound = float(np.dot(part, worst)) / inside * (1.0 + 1e-6)
    return bound if math.isfinite(bound) else h * h / 4.0


def _normalised(pmf: np.ndarray, roundoff: float) -> tuple[np.ndarray, float]:
    """``pmf / sum(pmf)`` and the CDF error bound of the result against the exact law.

    If ``pmf`` is within ``E`` (``roundoff``) of a law of total mass 1 in L1 (errors
    ``e_i``), the normalised CDF ``(F + A) / s`` (``A`` the errors' partial sum, ``s = 1 +
    sum e``) is off by ``|(1 - F) sum_{<=x} e - F sum_{>x} e| / s <= E / (1 - E)``: normalising
    does not add to ``E`` beyond that factor. In floating point, ``math.fsum`` rounds the
    sum once and each division once: every CDF value is then within ``2u`` relative, plus
    ``u`` for the remainders.
    """
    out = pmf / math.fsum(pmf.tolist())
    exact_part = roundoff / (1.0 - roundoff) if roundoff < 0.5 else 1.0
    return out, min(exact_part + 3.0 * UNIT_ROUNDOFF, 1.0)


def _move_slack(pmf: np.ndarray, amount: float) -> float:
    """A bound on how far :func:`~.grid.move_mass_down` (or up) moves from ``amount``.

    It sums the masses from the top (``np.cumsum``: ``gamma(size)`` relative) until the
    running sum reaches ``amount``: that sum is at most ``amount`` plus one cell; then one
    subtraction (``u``). Nothing moves when ``amount`` is 0.
    """
    from .cdf_roundoff import gamma

    if amount <= 0 or pmf.size == 0:
        return 0.0
    reach = amount + float(pmf.max())
    return (gamma(pmf.size + 1) * reach + 2.0 * UNIT_ROUNDOFF * reach) * 1.01


def _to_grid(side_lo: LatticeSum, side_hi: LatticeSum, policy, moments, tail):
    """The sandwich (lower side from one run, upper side from another) as a grid.

    Its round-off: each run's (the lattice's L1 bound), the re-binning of the finer run to
    the coarser lattice (:meth:`GridDistribution.rebin`'s ``gamma``), the normalisation
    (:func:`_normalised`), and, when folded, the sums of moving mass to the tail atoms
    (:func:`_move_slack`).
    """
    from .grid import GridDistribution, move_mass_down, move_mass_up

    d_lo = int(math.floor(side_lo.low / side_lo.h))
    d_hi = int(math.ceil(side_hi.high / side_hi.h))
    g_lo = GridDistribution(side_lo.h, side_lo.k0 + d_lo, side_lo.pmf, side_lo.pmf)
    g_hi = GridDistribution(side_hi.h, side_hi.k0 + d_hi, side_hi.pmf, side_hi.pmf)
    h = max(g_lo.h, g_hi.h)
    # lower side rounds down, upper side up; rebin reports its own sums' error (the default
    # policy of these two grids does not fold)
    g_lo, g_hi = g_lo.rebin(h), g_hi.rebin(h)
    k0 = min(g_lo.k0, g_hi.k0)
    k1 = max(g_lo.k0 + g_lo.lo.size, g_hi.k0 + g_hi.hi.size)
    lo = np.pad(g_lo.lo, (g_lo.k0 - k0, k1 - g_lo.k0 - g_lo.lo.size))
    hi = np.pad(g_hi.hi, (g_hi.k0 - k0, k1 - g_hi.k0 - g_hi.hi.size))
    lo, err_lo = _normalised(lo, min(side_lo.roundoff + g_lo.roundoff, 1.0))
    hi, err_hi = _normalised(hi, min(side_hi.roundoff + g_hi.roundoff, 1.0))
    below, above = min(side_lo.fail, 1.0), min(side_hi.fail, 1.0)
    # move_mass_down/up may move less (or more) than asked: its running sum up to the cut
    # holds at most the amount plus one cell, off by gamma(size) of that, and one subtraction
    slack = max(_move_slack(lo, below + err_lo), _move_slack(hi, above + err_hi))
    roundoff = min(max(err_lo, err_hi) + slack, 1.0)
    if policy.fold_roundoff:  # see GridPolicy.fold_roundoff: ask for that much more
        below = min((below + err_lo + slack) * (1.0 + 2.0 * UNIT_ROUNDOFF), 1.0)
        above = min((above + err_hi + slack) * (1.0 + 2.0 * UNIT_ROUNDOFF), 1.0)
        roundoff = 0.0
    lo, hi = move_mass_down(lo, below), move_mass_up(hi, above)
    return GridDistribution(h, k0, lo, hi, below, above, policy, moments, tail, roundoff).trimmed()


def iid_sum_grid(dist, m: int, policy):
    """The sum of ``m`` i.i.d. copies of ``dist`` with a spread-relative bracket, or None.

    Applies to exact laws with every moment finite (tail index > 4) and to grids (each side
    of the sandwich summed on its own); returns None otherwise (the caller falls back to the
    location-relative rounding sandwich).
    """
    from .grid import GridDistribution

    cap = policy.max_cells
    tail = dist.tail_index
    if isinstance(dist, GridDistribution):
        pts = dist.points
        runs = []
        for pmf, atom in ((dist.lo, dist.below), (dist.hi, dist.above)):
            if pmf.sum() <= 0:
                return None
            mean_one = float(np.dot(pmf, pts) / pmf.sum())  # law given no atom: exact
            runs.append(centred_iid_sum(pmf, dist.k0, dist.h, m, mean_one, 0.0, atom, cap=cap))
        moments = (m * dist.mean(), m * dist.var())
        return _to_grid(runs[0], runs[1], policy, moments, dist.tail_index)
    if not dist.is_exact or tail <= 4:
        return None
    mean, var = dist.mean(), dist.var()
    if not (math.isfinite(mean) and math.isfinite(var)) or var <= 0:
        return None
    p_w = min(policy.tail_mass, 1e-14 / m)
    x_lo = float(dist._quantile(np.array([p_w]))[0])
    x_hi = float(dist._isf(np.array([p_w]))[0])
    if not (math.isfinite(x_lo) and math.isfinite(x_hi)) or x_hi <= x_lo:
        return None
    h = (x_hi - x_lo) / (cap - 2)
    k0 = int(math.floor(x_lo / h))
    k1 = int(math.ceil(x_hi / h))
    x = (k0 + np.arange(k1 - k0 + 1)) * h
    cdf, sf = dist._cdf(x), dist._sf(x)
    prev_cdf, prev_sf = cdf[:-1], sf[:-1]
    cell = np.where(cdf[1:] <= 0.5, cdf[1:] - prev_cdf, prev_sf - sf[1:])  # mass of (x_i, x_i+1]
    cell = np.maximum(cell, 0.0)
    inside = float(cell.sum())
    out_mass = float(cdf[0] + sf[-1])
    # E[X | inside] differs from E[X] by at most (E|X|;outside + |E X| P(outside)) / P(inside)
    shift = (_partial_tail_expectation(dist, x[0], x[-1]) + abs(mean) * out_mass) / inside
    base_var = _rounding_variance_bound(dist, k0, k1, h, inside)
    run = centred_iid_sum(cell, k0, h, m, mean, h, out_mass, cap=cap, base_var=base_var)
    run.low -= m * shift
    run.high += m * shift
    return _to_grid(run, run, policy, (m * mean, m * var), tail)
