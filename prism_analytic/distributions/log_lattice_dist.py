"""The law on the log lattice: its sandwich, views, JSON form and conversions.

See :mod:`.log_lattice` for the lattice (octaves ``[2^j, 2^(j+1))`` of ``n`` equal cells, a lower
and an upper side) and why it keeps the guarantee; :mod:`.log_lattice_build` puts laws on it and
:mod:`.log_lattice_ops` adds and maximises them. The brackets are
:class:`~.grid.RoundingSandwich`'s, shared with the linear grid.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..policy import DEFAULT_POLICY, GridPolicy
from .base import Distribution
from .grid import GridDistribution, RoundingSandwich, lattice_window

__all__ = ["LogLatticeDistribution", "MAX_OCTAVES", "MIN_POINTS", "MAX_POINTS"]

#: Octaves of float64's normal range: lattice points stay exact binary fractions.
_MIN_OCTAVE, _MAX_OCTAVE = -1000, 1000

#: Most octaves one lattice may span (the rest of a range becomes tail atoms).
MAX_OCTAVES = 400

#: Fewest and most cells per octave chosen by :func:`points_per_octave`.
MIN_POINTS, MAX_POINTS = 1024, 4096


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

    def _beyond_a_gap(self, window: tuple[float, int, int], tail: float) -> bool:
        """Whether the mass a linear window leaves out lies beyond an empty gap.

        A heavy tail's density reaches the window's edge: the outer quarter of the window on
        that side holds more than the tail budget, and the mass beyond is left as an atom by
        design. A separate far cluster (body plus a rare stall) leaves the outer quarter on
        the side it lies empty: every side that loses mass must show that gap.
        """
        h, k_start, k_end = window
        pts, (lo_m, hi_m) = self.points, (self._flat("lo"), self._flat("hi"))
        bottom, top, quarter = k_start * h, k_end * h, 0.25 * (k_end - k_start) * h
        sides = (
            (pts < bottom, (pts >= bottom) & (pts <= bottom + quarter)),
            (pts > top, (pts <= top) & (pts >= top - quarter)),
        )
        gap = True
        for out, edge in sides:
            if lo_m[out].sum() + hi_m[out].sum() > tail:
                gap = gap and max(lo_m[edge].sum(), hi_m[edge].sum()) <= tail
        return gap

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
        # The window as for an exact law (grid.lattice_window) ...
        q = np.array([1e-9, 0.25, 0.5, 0.75])
        b_lo, q1, med, q3 = (float(v) for v in self._q_var(q, "lo"))
        b_hi = float(self._isf_var(np.array([1e-9]), "hi")[0])
        bulk = b_hi - b_lo if np.isfinite(b_hi - b_lo) else x_max - x_min
        window = lattice_window(h, x_min, x_max, bulk, q3 - q1, lambda: med, policy, top_margin=1)
        lo_m, hi_m = self._flat("lo"), self._flat("hi")
        h, k_start, k_end = window
        if lo_m[pts < k_start * h].sum() + hi_m[
            pts > k_end * h
        ].sum() > 2 * tail and self._beyond_a_gap(window, tail):
            # A far cluster (a rare 30 s stall beside a narrow body), not a tail: the capped
            # window would leave its mass at +inf. Cover it, coarsening as far as needed.
            b_hi = b_hi if np.isfinite(b_hi) else x_max
            spacing = max(h, bulk / (policy.max_cells - 8))
            fits = (x_max - x_min) / spacing <= policy.max_cells - 8
            low, high = (x_min, x_max) if fits else (b_lo, b_hi)
            h, k_start, k_end = (
                spacing,
                int(np.floor(low / spacing)) - 1,
                int(np.ceil(high / spacing)) + 1,
            )
        size = k_end - k_start + 1
        # Clipped before the cast: points beyond 2^63 cells would wrap around in int64 (and
        # put upper-side mass from the far tail into the bottom cell).
        bounds = (k_start - 1, k_start + size)
        k_lo = np.clip(np.floor(pts / h), *bounds).astype(np.int64) - k_start
        k_hi = np.clip(np.ceil(pts / h), *bounds).astype(np.int64) - k_start
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
