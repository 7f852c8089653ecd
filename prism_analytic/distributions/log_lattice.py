"""Sums of heavy-tailed laws on a log-spaced (octave) lattice with a guaranteed sandwich.

A linear lattice cannot hold a Pareto or a wide lognormal: the far tail needs a range of
1e10-1e30 times the bulk, and a linear cell small enough for the bulk would need far more
cells than memory allows. Here the lattice is made of octaves ``[2^j, 2^(j+1))``, each cut
into ``n`` equal cells (``n`` a power of two), so every cell is at most ``1/n`` of its value
wide, whatever the scale. The variable is ``shift + Y`` with ``Y`` on that lattice.

As in :mod:`.grid`, two discrete variables are carried: ``lo`` (every mass rounded down to
a lattice point, plus an atom at -inf, ``below``) and ``hi`` (rounded up, plus an atom at
+inf, ``above``); ``lo <= X <= hi`` stochastically. The sum of independent variables is
monotone, so summing the ``lo`` sides and rounding the result down (and the ``hi`` sides,
rounding up) keeps the sandwich: every quantile bracket provably contains the exact quantile
(up to the floating-point round-off reported in ``roundoff``).

The sum of two lattice variables is computed octave by octave. Every pair ``(x, y)`` whose
larger member lies in octave ``b`` sums to a value in octaves ``b`` or ``b + 1``, whose cells
are ``h_b = 2^b / n`` or ``2 h_b`` wide. The smaller member is rounded (down on the lower
side, up on the upper side) onto the ``h_b`` lattice first: since the larger member already
lies on it, ``floor_h(x + y) = y + floor_h(x)``, and rounding to the nested ``2 h_b`` lattice
afterwards gives the same point as rounding the exact sum, so each sum is rounded once. The
pairs of all octaves are then batched FFT convolutions of length ``2 n``: a sum costs
``O(J n log n)`` for ``J`` octaves, and ``iid_sum`` of ``m`` copies takes ``log2(m)``
doublings plus one addition per set bit of ``m``.

Each sum moves each point by at most one cell (``1/n`` of its value), so after ``s`` sums the
bracket is at most about ``s / n`` of the value wide (about half that in practice: a rounding
moves a point by half a cell on average; measured 0.2-0.5% at ``m = 1e6`` with ``n = 4096``,
``validation/heavy_tail_sums.py``). Below the first octave, a variable known to be >= 0 keeps
its lower side's mass in a zero atom rather than at -inf (mass at 0, very wide laws).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.fft

from ..policy import DEFAULT_POLICY, GridPolicy
from .base import Distribution
from .grid import GridDistribution, RoundingSandwich, move_mass_down, move_mass_up
from .roundoff import UNIT_ROUNDOFF

__all__ = [
    "LogLatticeDistribution",
    "log_lattice_convolve",
    "log_lattice_iid_max",
    "log_lattice_iid_sum",
    "needs_log_lattice",
    "points_per_octave",
    "sum_needs_log_lattice",
    "to_log_lattice",
]

#: Octaves of float64's normal range: lattice points stay exact binary fractions.
_MIN_OCTAVE, _MAX_OCTAVE = -1000, 1000

#: Most octaves one lattice may span (the rest of a range becomes tail atoms).
MAX_OCTAVES = 400

#: Fewest and most cells per octave chosen by :func:`points_per_octave`.
MIN_POINTS, MAX_POINTS = 1024, 4096

#: A law needs the log lattice when its far tail (the 1e-12 upper quantile) lies more than
#: this many interquartile ranges above its median: a linear lattice of ``max_cells`` cells
#: then cannot resolve the bulk and reach the tail (lognormal sigma >= 1.5, Pareto alpha < 3).
FAR_TAIL_RATIO = 1e4


class LogLatticeDistribution(RoundingSandwich, Distribution):
    """A law known through its rounding sandwich on a log-spaced lattice (see module doc).

    Parameters
    ----------
    n : int
        Cells per octave (a power of two).
    j0 : int
        Exponent of the first octave: the lattice points are
        ``shift + 2^j (1 + i / n)`` for ``j = j0 .. j0 + J - 1`` and ``i = 0 .. n - 1``.
    lo, hi : ndarray
        Point masses of the lower and upper variables, shape ``(J, n)``.
    below : float
        Mass of the lower variable at -inf.
    above : float
        Mass of the upper variable at +inf.
    shift : float
        Constant added to every lattice point.
    policy : GridPolicy
        The policy that produced this lattice.
    moments : tuple of float, optional
        Exact (mean, variance) of the variable, when known (sums add them).
    tail_index : float
        Moments of order >= ``tail_index`` are infinite (see :mod:`.tails`).
    roundoff : float
        Rigorous bound on the CDF error left by floating-point round-off of the FFTs and not
        folded into the sides (as in :class:`~.grid.GridDistribution`).
    zero : float
        Mass of the lower variable at ``shift`` itself (lattice value 0): where the lattice
        variable is known to be >= 0, mass below the first octave rounds down to 0 instead of
        to -inf, so a bottom that the octaves do not reach costs nothing in a sum.
    nonneg : bool
        Whether the lattice variable is known to be >= 0 (then ``zero`` may hold mass).
    """

    is_exact = False

    def __init__(
        self,
        n: int,
        j0: int,
        lo: np.ndarray,
        hi: np.ndarray,
        below: float = 0.0,
        above: float = 0.0,
        shift: float = 0.0,
        policy: GridPolicy = DEFAULT_POLICY,
        moments: tuple[float, float] | None = None,
        tail_index: float = math.inf,
        roundoff: float = 0.0,
        zero: float = 0.0,
        nonneg: bool = False,
    ) -> None:
        lo = np.asarray(lo, dtype=float)
        hi = np.asarray(hi, dtype=float)
        if lo.shape != hi.shape or lo.ndim != 2 or lo.shape[1] != n or lo.shape[0] == 0:
            raise ValueError(f"lo and hi must both have shape (octaves, {n}), got {lo.shape}")
        if n < 2 or n & (n - 1):
            raise ValueError(f"n must be a power of two >= 2, got {n}")
        self.n = int(n)
        self.j0 = int(j0)
        self.lo = lo
        self.hi = hi
        self.below = float(below)
        self.above = float(above)
        self.shift_value = float(shift)
        self.policy = policy
        self.moments = None if moments is None else (float(moments[0]), float(moments[1]))
        self._tail_index = float(tail_index)
        self.roundoff = float(roundoff)
        self.zero = float(zero)
        self.nonneg = bool(nonneg)
        if self.zero > 0 and not self.nonneg:
            raise ValueError("a zero atom needs nonneg=True (the lattice variable is >= 0)")
        self._cache: dict[str, np.ndarray] = {}

    def __repr__(self) -> str:
        return (
            f"LogLatticeDistribution(n={self.n}, octaves={self.lo.shape[0]}, "
            f"range=[{self.points[1]:.6g}, {self.points[-1]:.6g}], "
            f"below={self.below:.2g}, above={self.above:.2g})"
        )

    @property
    def tail_index(self) -> float:
        """Moments of order >= this are infinite (carried from the operands)."""
        return self._tail_index

    # ----- lattice views ------------------------------------------------------------------
    @property
    def octaves(self) -> int:
        """Number of octaves the lattice spans."""
        return int(self.lo.shape[0])

    def _raw_points(self, extra: int = 0) -> np.ndarray:
        """Points of the unshifted lattice, with ``extra`` points of the next octave."""
        j = self.j0 + np.arange(self.octaves + (1 if extra else 0))
        pts = np.ldexp(1.0 + np.arange(self.n) / self.n, j[:, None]).ravel()
        return pts[: self.octaves * self.n + extra]

    @property
    def points(self) -> np.ndarray:
        """Lattice points (seconds), shift included; the first is ``shift`` (lattice value 0)."""
        if "points" not in self._cache:
            self._cache["points"] = np.concatenate(([0.0], self._raw_points())) + self.shift_value
        return self._cache["points"]

    def _flat(self, which: str) -> np.ndarray:
        """One side's masses at :attr:`points` (the zero atom first; the upper side has none)."""
        if which == "lo":
            return np.concatenate(([self.zero], self.lo.ravel()))
        return np.concatenate(([0.0], self.hi.ravel()))

    def _flat_sides(self) -> tuple[np.ndarray, np.ndarray]:
        return self._flat("lo"), self._flat("hi")

    # ----- the sandwich ---------------------------------------------------------------------
    def _index(self, x: np.ndarray) -> np.ndarray:
        """Index of the last lattice point <= x (-1 below the first point)."""
        return np.searchsorted(self.points, np.asarray(x, dtype=float), side="right") - 1

    # ----- point estimate: each atom spread uniformly over its cell ---------------------
    def _knot_points(self) -> np.ndarray:
        pts = self.points
        beyond = math.ldexp(1.0, self.j0 + self.octaves) + self.shift_value
        return np.concatenate(([2 * pts[0] - pts[1]], pts, [beyond]))

    def _moments(self) -> tuple[float, float]:
        if self.tail_index <= 1:
            return math.inf, math.inf
        if self.moments is not None:
            mean, var = self.moments
            return mean, (math.inf if self.tail_index <= 2 else var)
        # Cell-centre estimate from the two sides (the lattice holds only a window of the law).
        w = 0.5 * (self._flat("lo") + self._flat("hi"))
        w = w / max(w.sum(), 1e-300)
        mean = float(np.dot(w, self.points))
        var = math.inf if self.tail_index <= 2 else float(np.dot(w, (self.points - mean) ** 2))
        return mean, var

    def _mean(self) -> float:
        return self._moments()[0]

    def _var(self) -> float:
        return self._moments()[1]

    def _sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        u = rng.random(size)
        out = np.empty(size)
        lower = u < 0.5
        out[lower] = self._quantile(u[lower])
        out[~lower] = self._isf(1.0 - u[~lower])
        return out

    def to_dict(self, levels: tuple[float, ...] = (0.5, 0.9, 0.95, 0.99, 0.999)) -> dict:
        """Plain-dict summary (JSON-friendly), with the lattice's size and policy."""
        d = super().to_dict(levels)
        d.update(
            points_per_octave=self.n,
            octaves=self.octaves,
            below=self.below,
            above=self.above,
            roundoff=self.roundoff,
            policy=self.policy.to_dict(),
        )
        return d

    # ----- JSON round trips (serialize.CUSTOM_CLASSES) -----------------------------------------
    def to_spec_fields(self) -> dict[str, Any]:
        """Constructor arguments, for JSON round trips (infinite values are left out)."""
        fields: dict[str, Any] = {
            "n": self.n,
            "j0": self.j0,
            "lo": self.lo.tolist(),
            "hi": self.hi.tolist(),
            "below": self.below,
            "above": self.above,
            "shift": self.shift_value,
            "zero": self.zero,
            "nonneg": self.nonneg,
        }
        if math.isfinite(self.tail_index):
            fields["tail_index"] = self.tail_index
        if self.moments is not None:  # an infinite moment is written as None (JSON null)
            fields["moments"] = [v if math.isfinite(v) else None for v in self.moments]
        return fields

    @classmethod
    def from_spec_fields(cls, fields: dict[str, Any]) -> LogLatticeDistribution:
        """Inverse of :meth:`to_spec_fields`, checked: each side must be a probability law."""
        from .._checks import check_count, check_finite, check_positive

        where = "LogLatticeDistribution"
        try:
            n = check_count(fields["n"], f"{where}.n", minimum=2, maximum=MAX_POINTS)
            j0 = int(check_finite(fields["j0"], f"{where}.j0"))
            sides = {k: np.asarray(fields[k], dtype=float) for k in ("lo", "hi")}
            atoms = {k: float(fields.get(k, 0.0)) for k in ("below", "above", "zero")}
            nonneg = fields.get("nonneg", False)
            if not isinstance(nonneg, bool):
                raise ValueError(f"nonneg must be true or false, got {nonneg!r}")
            shift = check_finite(fields.get("shift", 0.0), f"{where}.shift")
            tail = check_positive(fields.get("tail_index", math.inf), f"{where}.tail_index")
        except KeyError as exc:
            raise ValueError(f"{where}: missing field {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None
        for k, v in sides.items():
            if v.ndim != 2 or v.shape[1] != n or not np.isfinite(v).all() or (v < 0).any():
                raise ValueError(f"{where}.{k} must be octaves x {n} finite masses >= 0")
        for k, v in atoms.items():
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{where}.{k} must lie in [0, 1], got {v}")
        for side, atom in (("lo", "below"), ("hi", "above")):
            zero = atoms["zero"] if side == "lo" else 0.0
            total = float(sides[side].sum()) + atoms[atom] + zero
            if abs(total - 1.0) > 1e-9:
                raise ValueError(f"{where}: {side} + {atom} must sum to 1, got {total:.12g}")
        if not _MIN_OCTAVE <= j0 <= _MAX_OCTAVE - sides["lo"].shape[0]:
            raise ValueError(f"{where}.j0 must keep the octaves in [2^-1000, 2^1000], got {j0}")
        moments = fields.get("moments")
        if moments is not None:
            moments = tuple(math.inf if v is None else float(v) for v in moments[:2])
        return cls(
            n,
            j0,
            sides["lo"],
            sides["hi"],
            atoms["below"],
            atoms["above"],
            shift,
            moments=moments,
            tail_index=tail,
            zero=atoms["zero"],
            nonneg=nonneg,
        )

    # ----- conversions ------------------------------------------------------------------------
    def _affine(self, shift: float, scale: float) -> Distribution:
        if scale == 1.0:
            return self._with(shift=self.shift_value + shift)
        # Scaling by a power of two keeps the lattice; any other factor goes through Affine.
        mant, exp = math.frexp(scale)
        if mant == 0.5:
            moments = None
            if self.moments is not None:
                moments = (scale * self.moments[0] + shift, scale * scale * self.moments[1])
            return self._with(
                j0=self.j0 + exp - 1, shift=scale * self.shift_value + shift, moments=moments
            )
        return super()._affine(shift, scale)

    def _with(self, **changes: Any) -> LogLatticeDistribution:
        args = dict(
            n=self.n,
            j0=self.j0,
            lo=self.lo,
            hi=self.hi,
            below=self.below,
            above=self.above,
            shift=self.shift_value,
            policy=self.policy,
            moments=self.moments,
            tail_index=self.tail_index,
            roundoff=self.roundoff,
            zero=self.zero,
            nonneg=self.nonneg,
        )
        if "shift" in changes and "moments" not in changes and self.moments is not None:
            delta = changes["shift"] - self.shift_value
            changes["moments"] = (self.moments[0] + delta, self.moments[1])
        args.update(changes)
        return LogLatticeDistribution(**args)

    def _to_grid(self, h: float, policy: Any) -> GridDistribution:
        """The same sandwich on the linear lattice ``k * h`` (lo rounds down, hi rounds up)."""
        policy = policy if isinstance(policy, GridPolicy) else self.policy
        tail = policy.tail_mass
        with np.errstate(invalid="ignore"):
            x_min = float(self._q_var(np.array([tail]), "lo")[0])
            x_max = float(self._isf_var(np.array([tail]), "hi")[0])
        pts = self.points
        x_min = x_min if np.isfinite(x_min) else float(pts[0])
        x_max = x_max if np.isfinite(x_max) else float(pts[-1])
        # As in discretize: a window the policy cannot hold coarsens the cells only as far as
        # the bulk stays resolved; beyond that the window is centred on the median ...
        q = np.array([1e-9, 0.25, 0.5, 0.75])
        b_lo, q1, med, q3 = (float(v) for v in self._q_var(q, "lo"))
        b_hi = float(self._isf_var(np.array([1e-9]), "hi")[0])
        bulk = b_hi - b_lo if np.isfinite(b_hi - b_lo) else x_max - x_min
        h = max(h, min(bulk / (policy.max_cells - 4), max(16.0 * h, 1e-3 * (q3 - q1))))
        k_start = int(np.floor(x_min / h)) - 1
        k_end = int(np.ceil(x_max / h)) + 1
        if k_end - k_start + 1 > policy.max_cells:
            k_start = max(k_start, int(np.floor(med / h)) - policy.max_cells // 2)
            k_end = min(k_end, k_start + policy.max_cells - 1)
        size = k_end - k_start + 1
        k_lo = np.clip(np.floor(pts / h).astype(np.int64) - k_start, -1, size)
        k_hi = np.clip(np.ceil(pts / h).astype(np.int64) - k_start, -1, size)
        lo_m, hi_m = self._flat("lo"), self._flat("hi")
        # ... and mass outside it goes where the sandwich allows: lo below -> -inf, lo above ->
        # the top cell (rounding down), hi below -> the bottom cell, hi above -> +inf.
        below = self.below + float(lo_m[k_lo < 0].sum())
        above = self.above + float(hi_m[k_hi >= size].sum())
        lo = np.bincount(np.clip(k_lo[k_lo >= 0], 0, size - 1), lo_m[k_lo >= 0], size)
        hi = np.bincount(np.clip(k_hi[k_hi < size], 0, size - 1), hi_m[k_hi < size], size)
        return GridDistribution(
            h,
            k_start,
            lo,
            hi,
            below,
            above,
            policy,
            self.moments,
            self.tail_index,
            self.roundoff,
        ).trimmed()


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
    if not (dist.is_exact and _short_lower_tail(dist, policy)):
        return False
    with np.errstate(all="ignore"):  # a very wide law's moments overflow to inf in scipy
        q1, med, q3 = (float(v) for v in dist._quantile(np.array([0.25, 0.5, 0.75])))
        far = float(dist._isf(np.array([1e-12]))[0])
        heavy = dist.tail_index < 3
    iqr = q3 - q1
    return bool(heavy or (np.isfinite(far) and far - med > FAR_TAIL_RATIO * iqr))


def _short_lower_tail(dist: Distribution, policy: GridPolicy) -> bool:
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
        _short_lower_tail(d, policy) for d in dists
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
def _octave_range(x_low: float, x_high: float, keep_top: bool) -> tuple[int, int]:
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
    j0, octaves = _octave_range(lo_x, max(x_max - shift, lo_x), keep_top=nonneg)
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
    j0, octaves = _octave_range(bottom, max(last - shift, bottom), keep_top=nonneg)
    raw = np.ldexp(1.0 + np.arange(n) / n, (j0 + np.arange(octaves))[:, None]).ravel()
    top = raw.size
    i_lo = np.searchsorted(raw, pts - shift, side="right") - 1  # last point <= value
    i_hi = np.searchsorted(raw, pts - shift, side="left")  # first point >= value
    off = float(grid.lo[i_lo < 0].sum())  # below the first octave: to 0 if >= 0, else -inf
    zero = off if nonneg else 0.0
    below = grid.below + (0.0 if nonneg else off)
    above = grid.above + float(grid.hi[i_hi >= top].sum())
    lo = np.bincount(np.minimum(i_lo[i_lo >= 0], top - 1), grid.lo[i_lo >= 0], top)
    hi = np.bincount(i_hi[i_hi < top], grid.hi[i_hi < top], top)
    return LogLatticeDistribution(
        n,
        j0,
        lo.reshape(octaves, n),
        hi.reshape(octaves, n),
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
