"""Gridded distributions with a guaranteed rounding sandwich (docs/numerics.md).

A :class:`GridDistribution` stores two discrete variables on one lattice ``k * h``:

* ``lo``: every cell's mass moved to its left edge, plus an atom at -inf (``below``);
* ``hi``: every cell's mass moved to its right edge, plus an atom at +inf (``above``).

``lo <= X <= hi`` stochastically. Sums and maxima are monotone, so applying every operation to
both keeps the sandwich: the exact answer's quantiles always lie in ``quantile_bracket``. The
point estimate spreads each atom uniformly over its cell and averages the two.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..policy import DEFAULT_POLICY, GridPolicy
from .base import Affine, Distribution
from .bounded_conv import bounded_convolve, fold_up
from .cdf_roundoff import gamma, mix_error, sum_error, union_up
from .roundoff import UNIT_ROUNDOFF, fft_convolve, fft_l1_error

__all__ = ["GridDistribution", "discretize", "to_grid", "to_grid_like", "align"]

#: The bulk of a law: all but this probability on each side (what :func:`lattice_window`
#: tries to cover).
BULK_LEVEL = 1e-9


def _pmf_from_cdf_sf(cdf: np.ndarray, sf: np.ndarray, cdf_before: float) -> np.ndarray:
    """Point masses from a CDF and a survival function sampled at the same points.

    Differences of the CDF lose precision in the upper tail and of the survival function in the
    lower tail; take each where it is precise.
    """
    prev_cdf = np.concatenate(([cdf_before], cdf[:-1]))
    prev_sf = np.concatenate(([1.0 - cdf_before], sf[:-1]))
    pmf = np.where(cdf <= 0.5, cdf - prev_cdf, prev_sf - sf)
    return np.maximum(pmf, 0.0)


#: Bound on the error of an atom ``1 - (1 - a)(1 - b)`` computed in floating point (``a, b`` in
#: [0, 1]): rounding ``1 - a`` and ``1 - b`` (u/2 each: both lie in [1/2, 1] or are exact), the
#: product (u/2 in [1/2, 1), where the last subtraction is exact by Sterbenz; else u/4 and
#: u/2 for that subtraction) add to at most 1.75 u + O(u^2) < 2 u. The FFT's own bound
#: (``fft_l1_error``) does not cover it: it can be as small as u |a|_1 |b|_1 (a one-cell
#: operand), and 1-cell grids with atoms 0.44 and 0.17 lose 1.3 u (test_tail_atom_cancellation).
ATOM_UNION_ERROR = 2.0 * UNIT_ROUNDOFF


def move_mass_down(pmf: np.ndarray, amount: float) -> np.ndarray:
    """``pmf`` with ``amount`` of its top mass removed (to be put in the -inf atom).

    Moving mass down keeps a lower variable lower: used to fold a probability of failure
    (truncation, round-off) into the lower side of a sandwich.
    """
    if amount <= 0:
        return pmf
    out = pmf.copy()
    tail = np.cumsum(out[::-1])[::-1]  # mass at and above each cell
    cut = int(np.searchsorted(-tail, -amount, side="right")) - 1  # last cell with tail >= amount
    cut = max(cut, 0)
    out[cut + 1 :] = 0.0
    out[cut] = max(tail[cut] - amount, 0.0)
    return out


def move_mass_up(pmf: np.ndarray, amount: float) -> np.ndarray:
    """``pmf`` with ``amount`` of its bottom mass removed (to be put in the +inf atom)."""
    return move_mass_down(pmf[::-1], amount)[::-1].copy()


class CellSpreadEstimate:
    """The point estimate of a rounding sandwich: every atom spread uniformly over its cell.

    Shared by the linear lattice (:class:`GridDistribution`) and the log lattice. A subclass
    gives :meth:`_knot_points` (its points with one more beyond each end) and has ``below``,
    ``above``, ``_cache`` and ``_cum(name)`` (cumulative ``F_lo``, ``S_lo``, ``F_hi``, ``S_hi``).
    """

    below: float
    above: float
    _cache: dict[str, Any]

    def _knot_points(self) -> np.ndarray:
        raise NotImplementedError

    def _cum(self, name: str) -> np.ndarray:
        raise NotImplementedError

    def _knots(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Knots (one point beyond each end) with the estimate's CDF and SF there."""
        if "knots" not in self._cache:
            x = self._knot_points()
            # lo's atom at x_i spread over [x_i, x_(i+1)]: its CDF at x_j is F_lo(x_(j-1)).
            f_lo = np.concatenate(([self.below, self.below], self._cum("F_lo")))
            s_lo = np.concatenate(([1 - self.below, 1 - self.below], self._cum("S_lo")))
            # hi's atom at x_i spread over [x_(i-1), x_i]: its CDF at x_j is F_hi(x_j).
            f_hi = np.concatenate(([0.0], self._cum("F_hi"), [1.0 - self.above]))
            s_hi = np.concatenate(([1.0], self._cum("S_hi"), [self.above]))
            self._cache["knots"] = x
            # FFT round-off can leave totals a hair above 1
            self._cache["f_est"] = np.clip(0.5 * (f_lo + f_hi), 0.0, 1.0)
            self._cache["s_est"] = np.clip(0.5 * (s_lo + s_hi), 0.0, 1.0)
        return self._cache["knots"], self._cache["f_est"], self._cache["s_est"]

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        k, f, _ = self._knots()
        return np.interp(x, k, f, left=0.5 * self.below, right=1.0 - 0.5 * self.above)

    def _sf(self, x: np.ndarray) -> np.ndarray:
        k, _, s = self._knots()
        return np.interp(x, k, s, left=1.0 - 0.5 * self.below, right=0.5 * self.above)


class RoundingSandwich(CellSpreadEstimate):
    """Brackets of a rounding sandwich, shared by the linear and the log lattice.

    A subclass holds a lower variable (masses rounded down, an atom ``below`` at -inf) and an
    upper one (rounded up, an atom ``above`` at +inf) at its lattice :attr:`points`, and gives
    :meth:`_flat_sides` (both sides' masses at those points) and :meth:`_index` (the last point
    <= x). Everything read from the two sides is written here once: the cumulative sums, the
    CDF and survival bounds, the quantile brackets (a quantile of the lower variable bounds the
    exact one from below, of the upper variable from above) and the point estimate's clipping.
    """

    points: np.ndarray
    lo: np.ndarray

    def _flat_sides(self) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _index(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _cum(self, name: str) -> np.ndarray:
        if name not in self._cache:
            lo, hi = self._flat_sides()
            if name == "F_lo":
                v = self.below + np.cumsum(lo)
            elif name == "F_hi":
                v = np.cumsum(hi)
            elif name == "S_lo":  # P(lo > x_i)
                v = np.concatenate((np.cumsum(lo[::-1])[::-1][1:], [0.0]))
            elif name == "S_hi":
                v = np.concatenate((np.cumsum(hi[::-1])[::-1][1:], [0.0])) + self.above
            else:  # pragma: no cover - internal misuse
                raise KeyError(name)
            self._cache[name] = v
        return self._cache[name]

    @property
    def support(self) -> tuple[float, float]:
        """First and last lattice points with mass; infinite where mass lies off the lattice."""
        pts = self.points
        lo, hi = self._flat_sides()
        first = -np.inf if self.below > 0 else float(pts[np.argmax(lo > 0)])
        last = np.inf if self.above > 0 else float(pts[hi.size - 1 - np.argmax(hi[::-1] > 0)])
        return first, last

    def cdf_bounds(self, x: Any) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) bounds on P(X <= x): the CDFs of the upper and lower variables."""
        x = np.asarray(x, dtype=float)
        i = self._index(x)
        size = self.points.size
        inside = np.clip(i, 0, size - 1)
        f_lo = np.where(i < 0, self.below, np.where(i >= size, 1.0, self._cum("F_lo")[inside]))
        f_hi = np.where(
            i < 0, 0.0, np.where(i >= size, 1.0 - self.above, self._cum("F_hi")[inside])
        )
        return f_hi, f_lo

    def sf_bounds(self, x: Any) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) bounds on P(X > x), computed from upper-tail sums."""
        x = np.asarray(x, dtype=float)
        i = self._index(x)
        size = self.points.size
        inside = np.clip(i, 0, size - 1)
        s_lo = np.where(
            i < 0, 1.0 - self.below, np.where(i >= size, 0.0, self._cum("S_lo")[inside])
        )
        s_hi = np.where(i < 0, 1.0, np.where(i >= size, self.above, self._cum("S_hi")[inside]))
        return s_lo, s_hi

    def _sum_slack(self) -> float:
        """Relative error bound of the cumulative sums (n terms, unit round-off u each)."""
        return (self.lo.size + 2) * np.finfo(float).eps

    def _q_var(self, q: np.ndarray, which: str) -> np.ndarray:
        """Lower-tail quantile (first point with CDF >= q) of the lower or upper variable."""
        # a cumulative sum of n non-negative terms is within n u of relative error
        slack = self._sum_slack()
        if which == "lo":
            f = self._cum("F_lo")
            i = np.searchsorted(f, q * (1 - slack), side="left")
            out = self.points[np.clip(i, 0, f.size - 1)]
            return np.where(q <= self.below, -np.inf, out)
        f = self._cum("F_hi")
        i = np.searchsorted(f, q * (1 + slack), side="left")
        out = self.points[np.clip(i, 0, f.size - 1)]
        return np.where((q > 1.0 - self.above) | (i >= f.size), np.inf, out)

    def _isf_var(self, p: np.ndarray, which: str) -> np.ndarray:
        """Upper-tail quantile (first point with P(V > x) <= p) of the lower or upper variable."""
        s = self._cum("S_lo" if which == "lo" else "S_hi")  # non-increasing
        # first index with s <= p  == count of entries with s > p (s is non-increasing)
        slack = self._sum_slack()
        i = np.searchsorted(-s, -p * ((1 + slack) if which == "lo" else (1 - slack)), side="left")
        out = self.points[np.clip(i, 0, s.size - 1)]
        if which == "lo":
            return np.where(p >= 1.0 - self.below, -np.inf, out)
        return np.where(p < self.above, np.inf, out)

    def quantile_bracket(self, q: Any) -> tuple[Any, Any]:
        """(low, high) that provably contain the exact q-quantile (up to FFT round-off)."""
        from .._checks import check_probabilities

        arr = check_probabilities(q)
        flat = np.atleast_1d(arr)
        upper = flat > 0.5
        low = np.where(upper, self._isf_var(1.0 - flat, "lo"), self._q_var(flat, "lo"))
        high = np.where(upper, self._isf_var(1.0 - flat, "hi"), self._q_var(flat, "hi"))
        # Round-off (within self.roundoff) can cross the two sides in a far tail; the exact
        # sides never cross, so the ordered pair is as good a bound as the raw one.
        low, high = np.minimum(low, high), np.maximum(low, high)
        if arr.ndim == 0:
            return float(low[0]), float(high[0])
        return low.reshape(arr.shape), high.reshape(arr.shape)

    def isf_bracket(self, p: Any) -> tuple[Any, Any]:
        """(low, high) containing the exact upper-tail quantile at tail probability ``p``."""
        from .._checks import check_probabilities

        arr = np.atleast_1d(check_probabilities(p, "p"))
        low, high = self._isf_var(arr, "lo"), self._isf_var(arr, "hi")
        low, high = np.minimum(low, high), np.maximum(low, high)
        if np.ndim(p) == 0:
            return float(low[0]), float(high[0])
        return low, high

    def width(self, q: float) -> float:
        """Width of the numerical bracket at level q."""
        low, high = self.quantile_bracket(q)
        return float(high - low)

    def _quantile(self, q: np.ndarray) -> np.ndarray:
        k, f, _ = self._knots()
        est = np.interp(q, f, k)
        low, high = self._q_var(q, "lo"), self._q_var(q, "hi")
        # Inside a tail atom the lattice does not know where the quantile is: say so.
        return np.where(np.isfinite(low) & np.isfinite(high), np.clip(est, low, high), np.nan)

    def _isf(self, p: np.ndarray) -> np.ndarray:
        k, _, s = self._knots()
        est = np.interp(-p, -s, k)
        low, high = self._isf_var(p, "lo"), self._isf_var(p, "hi")
        return np.where(np.isfinite(low) & np.isfinite(high), np.clip(est, low, high), np.nan)

    def mean_bracket(self) -> tuple[float, float]:
        """(low, high) containing the exact mean (the means of the lower and upper variables)."""
        lo, hi = self._flat_sides()
        low = -np.inf if self.below > 0 else float(np.dot(lo, self.points))
        high = np.inf if self.above > 0 else float(np.dot(hi, self.points))
        return low, high


class GridDistribution(RoundingSandwich, Distribution):
    """A distribution known through its rounding sandwich on the lattice ``k * h``.

    Parameters
    ----------
    h : float
        Lattice spacing (seconds).
    k0 : int
        Lattice index of the first point.
    lo, hi : ndarray
        Point masses of the lower and upper variables at ``(k0 + i) * h``.
    below : float
        Mass of the lower variable at -inf (probability below the grid).
    above : float
        Mass of the upper variable at +inf (probability above the grid).
    policy : GridPolicy
        The policy that produced this grid (recorded for reports).
    moments : tuple of float, optional
        The exact (mean, variance) of the variable the grid stands for, when an operation
        knows them (sums add them); otherwise they are estimated from the lattice.
    tail_index : float
        Moments of order >= ``tail_index`` are infinite (see :mod:`.tails`); ``inf`` for laws
        with every moment.
    roundoff : float
        Rigorous bound on the CDF error left by floating-point round-off and not folded into
        the sides (see ``GridPolicy.fold_roundoff``): the brackets contain the quantiles of a
        law whose CDF is within ``roundoff`` of the exact one.
    law : Distribution, optional
        The closed-form law the grid discretises, when there is one (kept through re-binning,
        trimming and affine maps, dropped by every other operation): maxima of i.i.d. copies
        take their exact moments from it (:mod:`.max_moments`).
    """

    is_exact = False

    def __init__(
        self,
        h: float,
        k0: int,
        lo: np.ndarray,
        hi: np.ndarray,
        below: float = 0.0,
        above: float = 0.0,
        policy: GridPolicy = DEFAULT_POLICY,
        moments: tuple[float, float] | None = None,
        tail_index: float = np.inf,
        roundoff: float = 0.0,
        law: Distribution | None = None,
    ) -> None:
        lo = np.asarray(lo, dtype=float)
        hi = np.asarray(hi, dtype=float)
        if lo.shape != hi.shape or lo.ndim != 1 or lo.size == 0:
            raise ValueError("lo and hi must be non-empty 1-d arrays of equal length")
        if not (h > 0 and np.isfinite(h)):
            raise ValueError(f"h must be finite and > 0, got {h}")
        self.h = float(h)
        self.k0 = int(k0)
        self.lo = lo
        self.hi = hi
        self.below = float(below)
        self.above = float(above)
        self.policy = policy
        self.moments = None if moments is None else (float(moments[0]), float(moments[1]))
        self._tail_index = float(tail_index)
        self.roundoff = float(roundoff)
        self.law = law
        self._cache: dict[str, np.ndarray] = {}

    @property
    def tail_index(self) -> float:
        """Moments of order >= this are infinite (carried from the operands)."""
        return self._tail_index

    def _derived(
        self,
        h: float,
        k0: int,
        lo: np.ndarray,
        hi: np.ndarray,
        below: float | None = None,
        above: float | None = None,
        moments: tuple[float, float] | None | str = "same",
        law: Distribution | None | str = "same",
    ) -> GridDistribution:
        """A new grid for the same variable (re-binned, trimmed): carries what is known."""
        return GridDistribution(
            h,
            k0,
            lo,
            hi,
            self.below if below is None else below,
            self.above if above is None else above,
            self.policy,
            self.moments if moments == "same" else moments,
            self.tail_index,
            self.roundoff,
            self.law if law == "same" else law,
        )

    def __repr__(self) -> str:
        return (
            f"GridDistribution(h={self.h:.4g}, cells={self.lo.size}, "
            f"range=[{self.points[0]:.6g}, {self.points[-1]:.6g}], "
            f"below={self.below:.2g}, above={self.above:.2g})"
        )

    # ----- lattice views ------------------------------------------------------------------
    @property
    def points(self) -> np.ndarray:
        """Lattice points (seconds)."""
        if "points" not in self._cache:
            self._cache["points"] = (self.k0 + np.arange(self.lo.size)) * self.h
        return self._cache["points"]

    def _flat_sides(self) -> tuple[np.ndarray, np.ndarray]:
        return self.lo, self.hi

    # ----- the sandwich (brackets: RoundingSandwich) ------------------------------------------
    def _index(self, x: np.ndarray) -> np.ndarray:
        """Index of the last lattice point <= x (may be -1 or beyond the end)."""
        with np.errstate(invalid="ignore"):
            k = np.floor(x / self.h) - self.k0
        return np.clip(
            np.nan_to_num(k, nan=-1, posinf=self.lo.size, neginf=-1), -1, self.lo.size
        ).astype(np.int64)

    # ----- point estimate: each atom spread uniformly over its cell ---------------------
    def _knot_points(self) -> np.ndarray:
        return (self.k0 - 1 + np.arange(self.lo.size + 2)) * self.h

    def _moments(self) -> tuple[float, float]:
        if self.tail_index <= 1:
            return np.inf, np.inf
        if self.moments is not None:
            mean, var = self.moments
            return mean, (np.inf if self.tail_index <= 2 else var)
        if "moments" not in self._cache:
            w = 0.5 * (self.lo + self.hi) / max(0.5 * (self.lo.sum() + self.hi.sum()), 1e-300)
            # Lower variable's atoms sit at left edges, upper's at right edges: the average is
            # the cell-centre estimate (exact to O(h^2) for smooth laws).
            m = float(np.dot(w, self.points))
            # Each atom stands for mass spread over a cell: add the within-cell variance h^2/12
            # minus the h^2/4 introduced by averaging a left- and a right-shifted copy.
            raw = float(np.dot(w, (self.points - m) ** 2))
            var = np.inf if self.tail_index <= 2 else max(raw - self.h * self.h / 6.0, 0.0)
            self._cache["moments"] = (m, var)
        return self._cache["moments"]

    def _mean(self) -> float:
        return self._moments()[0]

    def _var(self) -> float:
        return self._moments()[1]

    def _sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        return self._quantile(rng.random(size))

    def to_dict(self, levels: tuple[float, ...] = (0.5, 0.9, 0.95, 0.99, 0.999)) -> dict:
        """Plain-dict summary (JSON-friendly), with the lattice step, size and policy."""
        d = super().to_dict(levels)
        d.update(
            h=self.h,
            cells=int(self.lo.size),
            below=self.below,
            above=self.above,
            policy=self.policy.to_dict(),
        )
        return d

    # ----- lattice operations (used by operations.py) ----------------------------------------
    def rebin(self, h: float) -> GridDistribution:
        """The same sandwich on the coarser lattice ``k * h`` (lo rounds down, hi rounds up)."""
        if h == self.h:
            return self
        if h < self.h:
            raise ValueError(f"cannot refine a grid (h={self.h:g}) to a finer spacing {h:g}")
        ratio = self.h / h
        k = self.k0 + np.arange(self.lo.size)
        k_lo = np.floor(k * ratio).astype(np.int64)
        k_hi = np.ceil(k * ratio).astype(np.int64)
        base = int(k_lo[0])
        n = int(k_hi[-1]) - base + 1
        lo = np.bincount(k_lo - base, weights=self.lo, minlength=n)
        hi = np.bincount(k_hi - base, weights=self.hi, minlength=n)
        # each new cell sums at most ceil(h / self.h) + 1 old ones: relative gamma of that in
        # every CDF and survival value (cdf_roundoff.gamma); reported, or folded outwards
        rel = gamma(int(np.ceil(h / self.h)) + 1)
        if self.policy.fold_roundoff:
            lo, hi, below, above = _fold_relative(lo, hi, self.below, self.above, rel)
            return self._derived(h, base, lo, hi, below, above)
        out = self._derived(h, base, lo, hi)
        out.roundoff = min(self.roundoff + rel, 1.0)
        return out

    def _affine(self, shift: float, scale: float) -> GridDistribution:
        return self.scaled(scale).shifted(shift)

    def scaled(self, a: float) -> GridDistribution:
        """The grid of a X for a > 0 (exact: the lattice scales with it)."""
        moments = None if self.moments is None else (a * self.moments[0], a * a * self.moments[1])
        law = None if self.law is None else self.law.scale(a)
        return self._derived(self.h * a, self.k0, self.lo, self.hi, moments=moments, law=law)

    def shifted(self, c: float) -> GridDistribution:
        """The grid of X + c; a shift off the lattice rounds lo down and hi up by one cell."""
        steps = c / self.h
        whole = int(np.floor(steps))
        moments = None if self.moments is None else (self.moments[0] + c, self.moments[1])
        law = None if self.law is None else self.law.shift(c)
        if steps == whole:
            return self._derived(
                self.h, self.k0 + whole, self.lo, self.hi, moments=moments, law=law
            )
        lo = np.concatenate((self.lo, [0.0]))
        hi = np.concatenate(([0.0], self.hi))
        return self._derived(self.h, self.k0 + whole, lo, hi, moments=moments, law=law)

    def trimmed(self) -> GridDistribution:
        """Drop negligible tails into the atoms and cap the length at ``policy.max_cells``."""
        tail = self.policy.tail_mass
        lo = np.maximum(self.lo, 0.0)
        hi = np.maximum(self.hi, 0.0)
        c_lo = np.cumsum(lo)
        r_hi = np.cumsum(hi[::-1])[::-1]
        start = int(np.searchsorted(c_lo, tail, side="right"))  # lo mass before start <= tail
        if r_hi.size and not np.isnan(r_hi[0]):
            # r_hi never increases (a running sum of non-negative terms only grows, rounding
            # included): the last entry above tail by one binary search, not a scan that
            # allocates an index per cell (~0.4 ms at 2^18 cells); the same index
            k = int(np.searchsorted(r_hi[::-1], tail, side="right"))  # entries <= tail
            end = r_hi.size - k - 1 if k < r_hi.size else lo.size - 1
        else:
            end = int(np.nonzero(r_hi > tail)[0][-1]) if (r_hi > tail).any() else lo.size - 1
        start = min(start, end)
        cut_below = c_lo[start - 1] if start > 0 else 0.0
        cut_above = r_hi[end + 1] if end + 1 < hi.size else 0.0
        new_lo = lo[start : end + 1].copy()
        new_hi = hi[start : end + 1].copy()
        new_lo[-1] += lo[end + 1 :].sum()  # lower variable may only move mass down
        new_hi[0] += hi[:start].sum()  # upper variable may only move mass up
        below, above = self.below + cut_below, self.above + cut_above
        roundoff = self.roundoff
        if start > 0 or end + 1 < lo.size:
            # the two atoms and two end cells that took mass are sums of at most n + 1
            # non-negative terms: relative gamma(n + 1) each, and each enters a CDF or
            # survival value once. Reported, or folded outwards: the atoms grow, the lower
            # side's top cell and the upper side's bottom cell shrink (only the CDF near 1,
            # resp. the survival near 1, which no reader takes, can move the wrong way).
            rel = gamma(lo.size + 1)
            if self.policy.fold_roundoff:
                w = rel + 2.0 * UNIT_ROUNDOFF
                below, above = min(below * (1.0 + w), 1.0), min(above * (1.0 + w), 1.0)
                new_lo[-1] *= 1.0 - w
                new_hi[0] *= 1.0 - w
            else:
                touched = below + above + new_lo[-1] + new_hi[0]
                roundoff = min(roundoff + rel * touched, 1.0)
        out = self._derived(self.h, self.k0 + start, new_lo, new_hi, below, above)
        out.roundoff = roundoff
        factor = 1
        while out.lo.size > self.policy.max_cells:  # an off-lattice start can add a cell or two
            factor = max(factor + 1, int(np.ceil(out.lo.size * factor / self.policy.max_cells)))
            out = out.rebin(self.h * factor)
        return out


# ----- building grids --------------------------------------------------------------------------
def lattice_window(
    h: float,
    x_min: float,
    x_max: float,
    bulk: float,
    iqr: float,
    median: Callable[[], float],
    policy: GridPolicy,
    top_margin: int = 0,
) -> tuple[float, int, int]:
    """Spacing and index range ``(h, k_start, k_end)`` of a linear window for a law.

    The window should span ``[x_min, x_max]`` (the ``policy.tail_mass`` quantiles) on spacing
    ``h``. A spacing too fine for the bulk (``bulk``: the 1e-9 to 1 - 1e-9 range) to fit in
    ``policy.max_cells`` is coarsened, but only as far as the bulk stays resolved (16 times
    ``h``, or 1e-3 of the interquartile range ``iqr``); beyond that the window is centred on
    the median (called only then) and a heavy tail becomes an atom, an infinite bound at its
    levels. One cell of margin below (an atom exactly at ``x_min``, e.g. a point mass at zero
    inside a mixture, must fall inside the first cell), ``top_margin`` above.
    """
    h_bulk = bulk / (policy.max_cells - 4) if np.isfinite(bulk) else np.inf
    h = max(h, min(h_bulk, max(16.0 * h, 1e-3 * iqr)))
    if not np.isfinite(x_max):
        x_max = x_min + (policy.max_cells - 4) * h
    k_start = int(np.floor(x_min / h)) - 1
    k_end = int(np.ceil(x_max / h)) + top_margin
    if k_end - k_start + 1 > policy.max_cells:
        # Keep the bulk: centre the window on the median so both tails become atoms.
        k_start = max(k_start, int(np.floor(median() / h)) - policy.max_cells // 2)
        k_end = min(k_end, k_start + policy.max_cells - 1)
    return h, k_start, k_end


def _window_levels(dist: Distribution, tail: float) -> dict[str, Callable[[], np.ndarray]]:
    """The quantiles :func:`discretize` reads (each ``f()`` returns what its own call gave).

    ``q_tail``/``s_tail``: ``_quantile``/``_isf`` at ``tail``; ``q_mid``: ``_quantile`` at 0.25
    and 0.75; ``q_bulk``/``s_bulk``: at 1e-9. A law that inverts its CDF by bisection (no closed
    form: mixtures) gets all five calls' answers from one vectorised bisection per side
    (:meth:`~.base.Distribution._invert_groups`, the same bits as the separate calls for a law
    whose CDF is elementwise, the last bits may differ for BLAS-summed mixtures: llama3-405b's
    hiccup mixture, 5 bisections of ~70 steps, 26 -> 11 ms); any other law is asked call by
    call, only when a value is read.
    """
    cls = type(dist)
    low = {"q_tail": [tail], "q_mid": [0.25, 0.75], "q_bulk": [BULK_LEVEL]}
    high = {"s_tail": [tail], "s_bulk": [BULK_LEVEL]}
    if cls._quantile is Distribution._quantile and cls._isf is Distribution._isf:
        with np.errstate(over="ignore", invalid="ignore"):
            lows = dist._invert_groups([np.array(v) for v in low.values()], upper=False)
            highs = dist._invert_groups([np.array(v) for v in high.values()], upper=True)
        done = dict(zip([*low, *high], [*lows, *highs], strict=True))
        return {k: (lambda v=v: v) for k, v in done.items()}
    out = {k: (lambda v=v: dist._quantile(np.array(v))) for k, v in low.items()}
    out.update({k: (lambda v=v: dist._isf(np.array(v))) for k, v in high.items()})
    return out


def _law_window(dist: Distribution, h: float, policy: GridPolicy) -> tuple[float, int, int]:
    """:func:`lattice_window` for an exact law, from its own quantiles."""
    levels = _window_levels(dist, policy.tail_mass)
    x_min = float(levels["q_tail"]()[0])
    x_max = float(levels["s_tail"]()[0])
    if not np.isfinite(x_min):
        raise ValueError(f"cannot discretise {dist!r}: its lower tail quantile is not finite")
    q1, q3 = (float(v) for v in levels["q_mid"]())
    with np.errstate(over="ignore", invalid="ignore"):
        bulk = float(levels["s_bulk"]()[0] - levels["q_bulk"]()[0])
    return lattice_window(
        h,
        x_min,
        x_max,
        bulk,
        q3 - q1,
        lambda: float(dist._quantile(np.array([0.5]))[0]),
        policy,
    )


def _mixture_parts(dist: Distribution) -> list[Distribution] | None:
    """A finite mixture's components of positive weight (also under an affine map), else None.

    Duck-typed (``components``, ``weights``): mixture.py imports this module.
    """
    comps, weights = getattr(dist, "components", None), getattr(dist, "weights", None)
    if comps is not None and weights is not None:
        return [c for c, w in zip(comps, weights) if w > 0]
    if isinstance(dist, Affine):
        inner = _mixture_parts(dist.base)
        if inner is not None:
            return [Affine(c, dist.shift_value, dist.scale_factor) for c in inner]
    return None


def _parts_window(
    dist: Distribution, h: float, policy: GridPolicy
) -> tuple[float, int, int] | None:
    """A window holding every mixture component's own window (None for other laws).

    Each component keeps what it would keep alone (its tail-budget quantiles, or its own
    heavy-tail atom); the spacing is coarsened until their union fits ``policy.max_cells``
    cells. A mixture's mass outside this window is at most the weighted sum of the
    components' own, so a far atom with mass above the tail budget is never left out.
    """
    parts = _mixture_parts(dist)
    if parts is None:
        return None
    wins = [_parts_window(c, h, policy) or _law_window(c, h, policy) for c in parts]
    low = min(w[1] * w[0] for w in wins)
    high = max(w[2] * w[0] for w in wins)
    spacing = max(h, *(w[0] for w in wins), (high - low) / (policy.max_cells - 4))
    return spacing, int(np.floor(low / spacing)) - 1, int(np.ceil(high / spacing))


def _beyond_a_gap(cdf: np.ndarray, sf: np.ndarray, tail: float) -> bool:
    """Whether the mass a window leaves out lies beyond an empty gap, not in a tail.

    A heavy tail's density reaches the window's edge: the outer quarter of the window on that
    side holds more than the tail budget (the mass beyond is then an atom by design). A far
    cluster leaves that quarter empty; every side that loses mass must show the gap.
    """
    quarter = max(cdf.size // 4, 1)
    gap = True
    if cdf[0] > tail:
        gap = gap and cdf[quarter] - cdf[0] <= tail
    if sf[-1] > tail:
        gap = gap and sf[-1 - quarter] - sf[-1] <= tail
    return gap


def _covering_window(
    dist: Distribution, h: float, policy: GridPolicy
) -> tuple[float, int, int] | None:
    """A window over the tail-budget quantiles (else the bulk), as coarse as that needs."""
    levels = _window_levels(dist, policy.tail_mass)
    x_min, x_max = float(levels["q_tail"]()[0]), float(levels["s_tail"]()[0])
    b_lo, b_hi = float(levels["q_bulk"]()[0]), float(levels["s_bulk"]()[0])
    if not np.isfinite(b_hi - b_lo):
        return None
    room = policy.max_cells - 8
    spacing = max(h, (b_hi - b_lo) / room)
    low, high = (x_min, x_max) if (x_max - x_min) / spacing <= room else (b_lo, b_hi)
    return spacing, int(np.floor(low / spacing)) - 1, int(np.ceil(high / spacing))


def discretize(
    dist: Distribution,
    h: float,
    policy: GridPolicy = DEFAULT_POLICY,
    *,
    with_moments: bool = True,
) -> GridDistribution:
    """Discretise an exact distribution from its CDF and SF on the lattice ``k * h``.

    The range is [Q(tail), Q(1 - tail)], capped at ``policy.max_cells`` cells. A heavy tail
    does not coarsen the lattice beyond what the bulk can bear (16 times the requested spacing
    or 1e-3 of the interquartile range): the mass beyond the window becomes explicit atoms
    (the lower side keeps it at the top point, the upper side at +inf), never silently dropped,
    and quantiles inside it are reported as unresolved. The grid carries the law's exact mean
    and variance unless ``with_moments`` is False (for a caller that drops them: numeric
    moments of a law without closed forms cost a 20,001-point integral).

    What the bracket assumes (not counted in ``roundoff``): ``dist._cdf`` and ``dist._sf`` at
    the lattice points, and their differences, are the law's exact values (scipy publishes no
    error bound for its CDFs); an error ``e`` there is a CDF error ``e`` of the grid.
    """
    requested = h
    h, k_start, k_end = _law_window(dist, h, policy)
    x = (k_start + np.arange(k_end - k_start + 1)) * h
    cdf = dist._cdf(x)
    sf = dist._sf(x)
    if cdf[0] + sf[-1] > 2 * policy.tail_mass:
        # The window left more than the tail budget outside. For a heavy tail that is the
        # design (an atom, unresolved levels), but a finite mixture's far component (a rare
        # 30 s stall beside a narrow body) is not a tail: its mass would be read as +inf and
        # the point estimate's CDF would stop below 1. Hold every component's own window.
        wider = _parts_window(dist, requested, policy)
        if wider is None and _beyond_a_gap(cdf, sf, policy.tail_mass):
            # No components to read (a mixture of normals by arrays, say), but the mass left
            # out lies beyond an empty stretch: a far cluster, not a tail. Cover it.
            wider = _covering_window(dist, h, policy)
        if wider is not None:
            x2 = (wider[1] + np.arange(wider[2] - wider[1] + 1)) * wider[0]
            cdf2, sf2 = dist._cdf(x2), dist._sf(x2)
            if cdf2[0] + sf2[-1] < cdf[0] + sf[-1]:
                (h, k_start, k_end), x, cdf, sf = wider, x2, cdf2, sf2
    cell = _pmf_from_cdf_sf(cdf, sf, cdf[0])[1:]  # mass of (x_i, x_{i+1}]
    lo = np.concatenate((cell, [sf[-1]]))  # left edges; mass above the grid kept at the top
    hi = np.concatenate(([cdf[0]], cell))  # right edges; mass below the grid kept at the bottom
    return GridDistribution(
        h,
        k_start,
        lo,
        hi,
        below=float(cdf[0]),
        above=float(sf[-1]),
        policy=policy,
        moments=(dist.mean(), dist.var()) if with_moments else None,
        tail_index=dist.tail_index,
        law=dist if dist.is_exact else None,
    )


def to_grid(dist: Distribution, h: float, policy: GridPolicy = DEFAULT_POLICY) -> GridDistribution:
    """Any distribution as a grid on spacing ``h`` (or coarser if it is already a coarser grid)."""
    if isinstance(dist, GridDistribution):
        return dist.rebin(max(h, dist.h))
    if isinstance(dist, Affine) and not dist.base.is_exact:
        base = to_grid(dist.base, h / dist.scale_factor, policy)
        return base.scaled(dist.scale_factor).shifted(dist.shift_value)
    special = dist._to_grid(h, policy)  # point masses, mixtures of grids: exact lattices
    return special if special is not None else discretize(dist, h, policy)


def to_grid_like(dist: Distribution, policy: GridPolicy = DEFAULT_POLICY) -> GridDistribution:
    """A grid for ``dist`` with a spacing chosen from its own scale (for brackets of mixtures).

    The scale is max(|mean|, std), unless the law is heavy-tailed (infinite variance, or a
    standard deviation above 10 interquartile ranges): then max(|median|, IQR), so that a
    far tail does not put the whole bulk into one cell.
    """
    mean, std = dist.mean(), dist.std()
    q1, med, q3 = (float(v) for v in dist.quantile([0.25, 0.5, 0.75]))
    iqr = q3 - q1
    if np.isfinite(mean) and np.isfinite(std) and (iqr <= 0 or std <= 10 * iqr):
        scale = max(abs(mean), std)
    else:
        scale = max(abs(med), iqr)
    h = policy.rel_width * max(scale, 1e-300)
    return to_grid(dist, h, policy)


def align(grids: list[GridDistribution]) -> tuple[float, int, list[np.ndarray], list[np.ndarray]]:
    """Put grids on one lattice (the coarsest spacing) and one index range.

    Returns ``(h, k0, los, his)`` with equal-length arrays; padding adds zero mass.
    """
    h = max(g.h for g in grids)
    grids = [g.rebin(h) for g in grids]
    k0 = min(g.k0 for g in grids)
    k1 = max(g.k0 + g.lo.size for g in grids)
    los, his = [], []
    for g in grids:
        pad = (g.k0 - k0, k1 - g.k0 - g.lo.size)
        los.append(np.pad(g.lo, pad))
        his.append(np.pad(g.hi, pad))
    return h, k0, los, his


def mix_grids(grids: list[GridDistribution], weights: np.ndarray) -> GridDistribution:
    """Mixture of grids with the given weights (mixing is monotone: the sandwich survives)."""
    h = max(g.h for g in grids)
    first = min(g.points[0] for g in grids)
    span = (max(g.points[-1] for g in grids) - first) / h
    room = grids[0].policy.max_cells - 2
    if span > room:
        # Far-apart components (a slow regime beside a fast one) would be aligned on the finest
        # common lattice first: a 1,000 s gap at 1e-5 s is 1e8 cells (2.9 GB), later re-binned
        # by trimmed(). Coarsen to an integer multiple that fits before aligning.
        factor = int(np.ceil((span + 2) / room))
        grids = [g.rebin(h * factor) for g in grids]
    h, k0, los, his = align(grids)
    lo = sum(w * a for w, a in zip(weights, los))
    hi = sum(w * a for w, a in zip(weights, his))
    below = float(sum(w * g.below for w, g in zip(weights, grids)))
    above = float(sum(w * g.above for w, g in zip(weights, grids)))
    moments = None
    if all(g.moments is not None for g in grids):
        means = np.array([g.moments[0] for g in grids])
        variances = np.array([g.moments[1] for g in grids])
        w = np.asarray(weights, dtype=float)
        if np.isfinite(means).all() and np.isfinite(variances).all():
            mean = float(np.dot(w, means))
            moments = (mean, float(np.dot(w, variances + (means - mean) ** 2)))
        else:
            moments = (np.inf, np.inf)
    tail = min(g.tail_index for g in grids)
    roundoff = float(np.dot(weights, [g.roundoff for g in grids]))
    # the weighted sums' own round-off and the weights' distance from summing to 1 (relative,
    # in every CDF and survival value): reported, or folded outwards
    rel = mix_error(weights)
    if grids[0].policy.fold_roundoff:
        lo, hi, below, above = _fold_relative(lo, hi, below, above, rel)
    else:
        roundoff = min(roundoff + rel, 1.0)
    return GridDistribution(
        h, k0, lo, hi, below, above, grids[0].policy, moments, tail, roundoff
    ).trimmed()


def _fold_relative(
    lo: np.ndarray, hi: np.ndarray, below: float, above: float, rel: float
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Sides whose cells and atoms are each within relative ``rel`` of exact, moved outwards.

    With ``c = 2 rel + 4u``: the lower side's cells shrink by ``c`` (every survival value falls
    below the exact one) and its -inf atom gains ``2c`` (every CDF value rises above it: the
    cells' total is at most ~1). The upper side's +inf atom and cells grow by ``c`` (survival
    values rise), and :func:`~.bounded_conv.fold_up` takes the excess over a lower bound on
    the exact mass from the bottom (CDF values fall): ``fl(sum hi) (1 - c)`` less the sums'
    own error (:func:`~.cdf_roundoff.sum_error`, also covering fold_up's sums). The mass
    taken is ~``2c``, so only CDF values below ~``2c`` lose their survival form, never read.
    """
    c = 2.0 * rel + 4.0 * UNIT_ROUNDOFF
    lo_out = lo * (1.0 - c)
    below_out = min((below + 2.0 * c) * (1.0 + c), 1.0)
    above_out = min(above * (1.0 + c), 1.0)
    total = float(hi.sum()) * (1.0 - c) - sum_error(hi.size, hi.size, hi.size)
    return lo_out, fold_up(hi, c * hi, max(total, 0.0)), below_out, above_out


def convolve_grids(a: GridDistribution, b: GridDistribution) -> GridDistribution:
    """Sum of two independent gridded variables (both sandwiches convolved)."""
    if a.policy.fold_roundoff:  # per-cell round-off bounds folded into each side (tighter)
        return convolve_grids_bounded(a, b)
    h = max(a.h, b.h)
    a, b = a.rebin(h), b.rebin(h)
    lo, hi = fft_convolve(a.lo, b.lo), fft_convolve(a.hi, b.hi)  # power-of-two FFTs
    # Kept as 1 - (1 - a)(1 - b) for bit-identity of the analytic numbers; its error (atoms
    # below ~1e-16 round to 0) is at most ATOM_UNION_ERROR, a CDF error counted in roundoff.
    below = 1.0 - (1.0 - a.below) * (1.0 - b.below)
    above = 1.0 - (1.0 - a.above) * (1.0 - b.above)
    # Round-off of the convolution, bounded rigorously in L1 (a CDF error at every point):
    # the lower side moves that much mass to -inf, the upper side to +inf.
    err_lo, err_hi = fft_l1_error(a.lo, b.lo), fft_l1_error(a.hi, b.hi)
    lo, hi = np.maximum(lo, 0.0), np.maximum(hi, 0.0)
    # fold_roundoff never gets here (convolve_grids_bounded above), so round-off is reported
    roundoff = a.roundoff + b.roundoff + max(err_lo, err_hi) + ATOM_UNION_ERROR
    moments = None
    if a.moments is not None and b.moments is not None:  # independent: means and variances add
        moments = (a.moments[0] + b.moments[0], a.moments[1] + b.moments[1])
    return GridDistribution(
        h,
        a.k0 + b.k0,
        lo,  # clipped at 0 above
        hi,
        below,
        above,
        a.policy,
        moments,
        min(a.tail_index, b.tail_index),
        roundoff,
        law=_sum_law(a, b),
    ).trimmed()


def _sum_law(a: GridDistribution, b: GridDistribution) -> Distribution | None:
    """The closed-form law of the sum where one exists (normals; gammas of one scale).

    Kept so that a later maximum of i.i.d. copies takes exact moments from it.
    """
    for x, c in ((a, b), (b, a)):  # a constant shifts the other's law
        if x.law is not None and c.moments is not None and c.moments[1] == 0.0:
            return x.law.shift(c.moments[0])
    if a.law is None or b.law is None:
        return None
    from .closed_sums import closed_form_sum

    return closed_form_sum([a.law, b.law])


def convolve_grids_bounded(a: GridDistribution, b: GridDistribution) -> GridDistribution:
    """Sum of two independent grids whose sides hold against floating-point round-off.

    As :func:`convolve_grids`, but each side's convolution comes with a per-cell round-off
    bound that is folded into it, so no round-off is left to report: the result's ``roundoff``
    is the operands' only. The lower side keeps at most each cell's exact mass (estimate minus
    its bound) and the deficit joins the atom at -inf; the upper side gains each cell's bound
    and gives the excess up from the bottom (:func:`~.bounded_conv.fold_up`).
    """
    h = max(a.h, b.h)
    a, b = a.rebin(h), b.rebin(h)
    # P(either atom) as a + b - ab, rounded outwards (cdf_roundoff.union_up): 1 - (1 - a)(1 - b)
    # rounds atoms below ~1e-16 to 0, a + b - ab itself is off by up to 4u of the union (1.6u
    # short in a fuzz), and the upper side's +inf atom must never shrink (F^n reads it back)
    below = union_up(a.below, b.below)
    above = union_up(a.above, b.above)
    a_lo, b_lo = np.maximum(a.lo, 0.0), np.maximum(b.lo, 0.0)
    a_hi, b_hi = np.maximum(a.hi, 0.0), np.maximum(b.hi, 0.0)
    est, err = bounded_convolve(a_lo, b_lo)
    # Every exact cell holds at least est - err, so moving the deficit to -inf only lowers the
    # mass above every point: stochastically smaller, as fold_down's first cell is. But a
    # deficit parked in the first cell (~1e-13 to 1e-11, far above tail_mass) stopped trimmed()
    # from ever cutting the low end, so sums grew by a whole operand width per convolution (the
    # same remedy as pipeline_bounds).
    lo = np.maximum(est - err, 0.0)
    # The CDF below x is then at least the union plus the cells' whole deficit, (sum a.lo)(sum
    # b.lo) - sum lo (1 - union - sum lo when the operands' masses sum to 1 exactly), plus the
    # error of those sums (cdf_roundoff.sum_error; up to ~1e-12 for 1e4 cells, was not counted)
    n = lo.size
    deficit = float(a_lo.sum()) * float(b_lo.sum()) - float(lo.sum())
    slack = sum_error(a_lo.size, b_lo.size, n)
    below = min(max(below + max(deficit, 0.0) + slack, below), 1.0)
    # Upper side: fold_up takes the excess over ``total`` from the bottom, so every CDF value
    # stays below the exact one only if ``total`` is at most the exact mass: 1 - union and
    # (sum a.hi)(sum b.hi), less those sums' error and fold_up's own (two sums of n cells)
    mass = min(1.0 - above, float(a_hi.sum()) * float(b_hi.sum()))
    total = max(mass - sum_error(a_hi.size, b_hi.size, n, n), 0.0)
    hi = fold_up(*bounded_convolve(a_hi, b_hi), total)
    moments = None
    if a.moments is not None and b.moments is not None:  # independent: means and variances add
        moments = (a.moments[0] + b.moments[0], a.moments[1] + b.moments[1])
    return GridDistribution(
        h,
        a.k0 + b.k0,
        lo,
        hi,
        below,
        above,
        a.policy,
        moments,
        min(a.tail_index, b.tail_index),
        a.roundoff + b.roundoff,
        law=_sum_law(a, b),
    ).trimmed()
