"""The one interface every latency distribution shares."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from .._checks import check_count, check_finite, check_probabilities, check_x

__all__ = ["Distribution", "as_rng"]

#: Most samples drawn by one ``sample`` call (8 GB of float64).
MAX_SAMPLES = 10**9

#: Relative slack put around quantiles that are computed exactly but in floating point, so the
#: reported bracket contains the exact value despite rounding in scipy's special functions.
_FLOAT_SLACK = 1e-12


def as_rng(rng: Any) -> np.random.Generator:
    """Return a ``numpy.random.Generator`` from a Generator, a seed, a SeedSequence or None."""
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(rng)


#: Relative error allowed for the CDF and SF evaluations that certify a bracket.
_CDF_REL_ERR = 1e-11


def _verified_bracket(
    dist: Distribution, q: np.ndarray, value: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Widen ``value`` around each level until the CDF/SF certify that it brackets Q(q).

    ``low <= Q(q)`` holds when F(low) < q, and ``high >= Q(q)`` when F(high) >= q; below the
    median these are tested with the CDF, above it with the survival function (which keeps
    precision for tiny tail probabilities). Each test leaves room for a relative evaluation
    error of ``_CDF_REL_ERR``. A side that cannot be certified becomes the support's end.
    """
    sup_lo, sup_hi = dist.support
    low = np.where(q == 0, sup_lo, value)
    high = np.where(q == 1, sup_hi, value)
    finite = np.isfinite(value) & (q > 0) & (q < 1)
    upper = q > 0.5
    p = 1.0 - q
    # A quantile at (or near) zero has no relative scale: fall back to the law's own spread.
    spread = np.abs(np.asarray(dist._quantile(np.array([0.25, 0.75])), dtype=float))
    spread = float(np.max(spread[np.isfinite(spread)], initial=0.0)) or 1.0
    slack = _FLOAT_SLACK * np.maximum(np.abs(value), 1e-6 * spread)
    slack = np.where(np.isfinite(slack), slack, 0.0)
    ok_lo = ~finite
    ok_hi = ~finite
    with np.errstate(all="ignore"):
        for _ in range(160):
            if ok_lo.all() and ok_hi.all():
                break
            cand_lo = np.where(ok_lo, low, value - slack)
            cand_hi = np.where(ok_hi, high, value + slack)
            f_lo = np.where(upper, dist._sf(cand_lo), dist._cdf(cand_lo))
            f_hi = np.where(upper, dist._sf(cand_hi), dist._cdf(cand_hi))
            good_lo = np.where(upper, f_lo > p * (1 + _CDF_REL_ERR), f_lo < q * (1 - _CDF_REL_ERR))
            good_hi = np.where(
                upper, f_hi <= p * (1 - _CDF_REL_ERR), f_hi >= q * (1 + _CDF_REL_ERR)
            )
            good_lo |= cand_lo <= sup_lo
            good_hi |= cand_hi >= sup_hi
            low = np.where(~ok_lo & good_lo, np.maximum(cand_lo, sup_lo), low)
            high = np.where(~ok_hi & good_hi, np.minimum(cand_hi, sup_hi), high)
            ok_lo |= good_lo
            ok_hi |= good_hi
            slack = slack * 2.0  # doubling: at most twice the width the check needs
    low = np.where(ok_lo, low, sup_lo)
    high = np.where(ok_hi, high, sup_hi)
    return low, high


def _scalar_or_array(values: np.ndarray, like: np.ndarray) -> float | np.ndarray:
    return float(values) if np.ndim(like) == 0 else values


class Distribution(ABC):
    """A univariate latency distribution (seconds, float64).

    Subclasses implement the private vectorised ``_cdf``, ``_sf`` (computed directly, never as
    ``1 - cdf``), ``_quantile`` and ``_isf``; the public methods validate input and keep
    scalars scalar. ``is_exact`` says whether values are exact up to floating point (closed
    forms) or numerical with a guaranteed bracket (grids).
    """

    #: Whether ``_cdf`` and ``_sf`` act point by point, each value independent of the array it
    #: is computed in (ufuncs only: no BLAS product or sum across points or components, whose
    #: rounding may follow the array's length). Such laws' few-level bisections evaluate the
    #: points of several steps in one call, with the same bits (:func:`_speculative_bisection`);
    #: a subclass declares it only where it holds (default: not).
    _pointwise_cdf: ClassVar[bool] = False

    is_exact: bool = True

    # ----- to implement -----------------------------------------------------------------
    @abstractmethod
    def _cdf(self, x: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def _sf(self, x: np.ndarray) -> np.ndarray: ...

    @property
    @abstractmethod
    def support(self) -> tuple[float, float]:
        """Closed interval outside which the distribution has no mass."""

    # ----- defaults that subclasses may replace by closed forms -----------------------------
    def _quantile(self, q: np.ndarray) -> np.ndarray:
        return self._invert(q, upper=False)

    def _isf(self, p: np.ndarray) -> np.ndarray:
        return self._invert(p, upper=True)

    def _mean(self) -> float:
        return self._numeric_moments()[0]

    def _var(self) -> float:
        return self._numeric_moments()[1]

    def _sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        u = rng.random(size)
        # Inverse transform, upper half through the survival function for tail accuracy.
        out = np.empty(size)
        lower = u < 0.5
        out[lower] = self._quantile(u[lower])
        out[~lower] = self._isf(1.0 - u[~lower])
        return out

    # ----- public interface ------------------------------------------------------------------
    def cdf(self, x: Any) -> float | np.ndarray:
        """P(X <= x)."""
        arr = check_x(x)
        return _scalar_or_array(self._cdf(np.atleast_1d(arr)).reshape(arr.shape), arr)

    def sf(self, x: Any) -> float | np.ndarray:
        """P(X > x), computed directly so that small upper-tail probabilities keep precision."""
        arr = check_x(x)
        return _scalar_or_array(self._sf(np.atleast_1d(arr)).reshape(arr.shape), arr)

    def quantile(self, q: Any) -> float | np.ndarray:
        """The smallest x with P(X <= x) >= q, for q in [0, 1].

        ``q = 0`` and ``q = 1`` give the ends of the support (possibly infinite); a level the
        numerics cannot resolve (e.g. inside a grid's tail atom) gives ``nan``.
        """
        arr = check_probabilities(q)
        flat = np.atleast_1d(arr)
        out = np.empty(flat.shape)
        upper = flat > 0.5
        out[~upper] = self._quantile(flat[~upper])
        out[upper] = self._isf(1.0 - flat[upper])
        # The levels 0 and 1 are the support's ends by definition; numerical inversions would
        # answer with wherever their search stopped.
        if (flat == 0).any() or (flat == 1).any():
            lo, hi = self.support
            out[flat == 0] = lo
            out[flat == 1] = hi
        return _scalar_or_array(out.reshape(arr.shape), arr)

    def isf(self, p: Any) -> float | np.ndarray:
        """Upper-tail quantile: the x with P(X > x) = p; precise for tiny p (e.g. 1e-12)."""
        arr = check_probabilities(p, "p")
        return _scalar_or_array(self._isf(np.atleast_1d(arr)).reshape(arr.shape), arr)

    def quantile_bracket(self, q: Any) -> tuple[float | np.ndarray, float | np.ndarray]:
        """An interval (low, high) that contains the exact q-quantile.

        For exact distributions it is the computed quantile widened by floating-point slack,
        then checked against the CDF (or, above the median, the survival function) and widened
        until the check passes. Grid results override it with the rounding
        sandwich.
        """
        arr = check_probabilities(q)
        flat = np.atleast_1d(arr).astype(float)
        value = np.atleast_1d(np.asarray(self.quantile(flat), dtype=float))
        low, high = _verified_bracket(self, flat, value)
        if arr.ndim == 0:
            return float(low[0]), float(high[0])
        return low.reshape(arr.shape), high.reshape(arr.shape)

    @property
    def tail_index(self) -> float:
        """Upper tail index: moments of order >= it are infinite (``inf``: all are finite).

        This default only knows the first two moments (1 if the mean is infinite, 2 if the
        variance is); laws with a known power tail override it (see :mod:`.tails`).
        """
        if not math.isfinite(self.mean()):
            return 1.0
        if not math.isfinite(self.var()):
            return 2.0
        return math.inf

    def mean(self) -> float:
        """Expected value (``+-inf`` when it diverges, ``nan`` when undefined, e.g. Cauchy)."""
        return float(self._mean())

    def var(self) -> float:
        """Variance (``inf`` when it does not exist)."""
        return float(self._var())

    def std(self) -> float:
        """Standard deviation (``inf`` when it does not exist)."""
        return float(self._std())

    def _std(self) -> float:
        # a subclass whose variance overflows while the std does not overrides this
        return float(np.sqrt(self._var()))

    def sample(self, size: int | tuple[int, ...], rng: Any = None) -> np.ndarray:
        """Draw independent samples of shape ``size``; ``rng`` is a Generator or a seed."""
        shape = tuple(size) if isinstance(size, tuple | list) else (size,)
        dims = [check_count(s, "size", minimum=0, maximum=MAX_SAMPLES) for s in shape]
        n = math.prod(dims)
        if n > MAX_SAMPLES:  # 8 GB of float64: beyond it the request is a mistake
            raise ValueError(f"size asks for {n} samples; at most {MAX_SAMPLES} at once")
        return self._sample(n, as_rng(rng)).reshape(dims)

    # ----- constants only: shift and scale (independence is never implied by operators) --
    def shift(self, c: float) -> Distribution:
        """The distribution of X + c for a constant c."""
        return self._affine(check_finite(c, "c"), 1.0)

    def scale(self, a: float) -> Distribution:
        """The distribution of a X for a constant a > 0."""
        a = check_finite(a, "a")
        if a <= 0:
            raise ValueError(f"a must be > 0 (latencies keep their orientation), got {a}")
        return self._affine(0.0, a)

    # ----- hooks for subclasses with faster or exact paths -------------------------------
    def _affine(self, shift: float, scale: float) -> Distribution:
        """``scale * X + shift``; override where the result stays in the class (grids)."""
        return Affine(self, shift, scale)

    def _key(self) -> Any:
        """A hashable identity: equal parameters give equal keys (default: the object)."""
        return ("object", id(self))

    def _to_grid(self, h: float, policy: Any) -> Any:
        """The law on a lattice of spacing ``h``, or None to discretise its CDF (the default).

        Override where a lattice follows exactly from the parts (point masses, mixtures).
        """
        return None

    def __add__(self, other: Any) -> Distribution:
        if isinstance(other, Distribution):
            raise TypeError(
                "adding two distributions would hide an independence assumption: "
                "use prism_analytic.convolve(a, b) for the sum of independent variables"
            )
        return self.shift(other)

    __radd__ = __add__

    def __mul__(self, other: Any) -> Distribution:
        if isinstance(other, Distribution):
            raise TypeError("the product of two distributions is not supported")
        return self.scale(other)

    __rmul__ = __mul__

    # ----- reporting ----------------------------------------------------------------------
    def summary(self, levels: tuple[float, ...] = (0.5, 0.9, 0.99, 0.999)) -> str:
        """A short human-readable description with mean, std and a few quantiles."""
        mean = self.mean()
        text = "undefined (both tails too heavy)" if math.isnan(mean) else f"{mean:.6g}"
        lines = [f"{self!r}", f"  mean {text}  std {self.std():.6g}"]
        for q in levels:
            low, high = self.quantile_bracket(q)
            lines.append(f"  q{q:<6g} {self.quantile(q):.6g}   bracket [{low:.6g}, {high:.6g}]")
        return "\n".join(lines)

    def to_dict(self, levels: tuple[float, ...] = (0.5, 0.9, 0.95, 0.99, 0.999)) -> dict:
        """Plain-dict summary (JSON-friendly)."""
        return {
            "type": type(self).__name__,
            "mean": self.mean(),
            "std": self.std(),
            "quantiles": {str(q): float(self.quantile(q)) for q in levels},
            "bracket": {str(q): [float(v) for v in self.quantile_bracket(q)] for q in levels},
        }

    def plot(self, ax: Any = None, *, ccdf: bool = False, label: str | None = None) -> Any:
        """Plot the CDF (or the CCDF on a log axis) on ``ax``; returns the axes."""
        from ..plotting import plot_distribution

        return plot_distribution(self, ax=ax, ccdf=ccdf, label=label)

    # ----- numerical helpers ----------------------------------------------------------------
    def _bracket_for_inversion(self) -> tuple[float, float]:
        lo, hi = self.support
        return lo, hi

    def _invert(self, p: np.ndarray, *, upper: bool) -> np.ndarray:
        """Vectorised bisection: solve cdf(x) = p (or sf(x) = p when ``upper``)."""
        p = np.asarray(p, dtype=float)
        out = np.empty(p.shape)
        if p.size == 0:
            return out
        lo, hi = self._bracket_for_inversion()
        a = np.full(p.shape, lo, dtype=float)
        b = np.full(p.shape, hi, dtype=float)
        if p.size <= _SPECULATE_MAX_LEVELS and self._pointwise_cdf:
            out[...] = _speculative_bisection(self._sf if upper else self._cdf, p, a, b, upper)
            return out
        for _ in range(2200):  # enough for any float64 interval; exits early when converged
            mid = _bisection_midpoint(a, b)
            if upper:
                go_right = self._sf(mid) > p  # still too much mass above mid
            else:
                go_right = self._cdf(mid) < p
            a = np.where(go_right, mid, a)
            b = np.where(go_right, b, mid)
            width = b - a
            if np.all(
                np.isfinite(width) & (width <= 4 * np.spacing(np.maximum(np.abs(a), np.abs(b))))
            ):
                break
        out[...] = b
        return out

    def _invert_groups(self, groups: list[np.ndarray], *, upper: bool) -> list[np.ndarray]:
        """``[self._invert(p, upper=upper) for p in groups]`` in one pass.

        Each group is bisected as its own :meth:`_invert` call would bisect it (the same
        bracket and steps, stopping once all of its own elements have converged), and each
        step evaluates the CDF (or SF) once on the unfinished groups together: the same values
        at a fraction of the calls (a mixture pays its components' per-call overhead per step).
        Bit for bit only when the CDF acts elementwise (the values it returns on the joint
        array are those it returns on each group's). A law that sums its components with a
        BLAS product (``NormalMixture``, ``ExposedComm``: rounding depends on the array's
        length) can differ from the separate calls in the last bits (2 of 36 grouped
        inversions of a normal mixture); each answer is still a bisection
        to the same tolerance.
        """
        arrays = [np.asarray(p, dtype=float) for p in groups]
        if not arrays:
            return []
        sizes = [p.size for p in arrays]
        p = np.concatenate([q.ravel() for q in arrays])
        label = np.repeat(np.arange(len(arrays)), sizes)
        lo, hi = self._bracket_for_inversion() if p.size else (0.0, 0.0)
        a = np.full(p.shape, lo, dtype=float)
        b = np.full(p.shape, hi, dtype=float)
        active = np.array(sizes) > 0
        if p.size <= _SPECULATE_MAX_LEVELS and self._pointwise_cdf:  # one call, several steps
            _speculative_groups(self._sf if upper else self._cdf, p, a, b, label, active, upper)
            ends = np.cumsum(sizes)[:-1]
            return [
                part.reshape(q.shape) for part, q in zip(np.split(b, ends), arrays, strict=True)
            ]
        for _ in range(2200):  # each group: at most _invert's 2200 steps
            idx = np.flatnonzero(active[label])
            if idx.size == 0:
                break
            ai, bi = a[idx], b[idx]
            mid = _bisection_midpoint(ai, bi)
            if upper:
                go_right = self._sf(mid) > p[idx]
            else:
                go_right = self._cdf(mid) < p[idx]
            ai = np.where(go_right, mid, ai)
            bi = np.where(go_right, bi, mid)
            a[idx], b[idx] = ai, bi
            width = bi - ai
            done = np.isfinite(width) & (
                width <= 4 * np.spacing(np.maximum(np.abs(ai), np.abs(bi)))
            )
            # a group stops when every one of its elements has converged (as _invert does)
            pending = np.bincount(label[idx], weights=~done, minlength=len(arrays))
            active &= pending > 0
        ends = np.cumsum(sizes)[:-1]
        return [part.reshape(q.shape) for part, q in zip(np.split(b, ends), arrays, strict=True)]

    def _numeric_moments(self, points: int = 20001) -> tuple[float, float]:
        """Mean and variance by integrating the survival function over the bulk.

        The range [Q(1e-13), Q(1 - 1e-13)] holds all but 2e-13 of the mass; subclasses with
        possibly infinite moments check that before calling this. Memoised per object (a
        distribution's parameters do not change): ``mean()`` and ``var()`` each ask for it, and
        one prediction asks a law several times (llama3-405b: a speed-factor law 4 times, ~10 ms
        CPU each; the builder's slowest-of-n segments twice each).
        """
        memo = getattr(self, "__dict__", None)
        if memo is None:  # a subclass with __slots__: no memo
            return self._integrate_moments(points)
        cache = memo.setdefault("_numeric_moments_memo", {})
        if points not in cache:
            cache[points] = self._integrate_moments(points)
        return cache[points]

    def _integrate_moments(self, points: int) -> tuple[float, float]:
        """:meth:`_numeric_moments`, computed."""
        # Points spaced by probability, not by value: heavy tails stretch the range by orders
        # of magnitude, and a uniform grid would then put the whole bulk inside one cell.
        tails = np.logspace(-13, -1, points // 2)
        middle = np.linspace(0.1, 0.5, points // 4)
        x = np.unique(
            np.concatenate(
                (
                    self._quantile(np.concatenate((tails, middle))),
                    self._isf(np.concatenate((middle, tails))),
                )
            )
        )
        x = x[np.isfinite(x)]
        lo = float(x[0])
        if x[-1] <= lo:
            return lo, 0.0
        # ... plus a uniform grid, which light tails need for 1e-8 accuracy
        x = np.unique(np.concatenate((x, np.linspace(lo, x[-1], points))))
        s = self._sf(x)
        # E[X] = lo + int_lo^hi S(x) dx; E[(X - lo)^2] = 2 int (x - lo) S(x) dx (tails negligible)
        mean = lo + np.trapezoid(s, x)
        second = 2.0 * np.trapezoid((x - lo) * s, x)
        var = max(second - (mean - lo) ** 2, 0.0)
        return float(mean), float(var)


class Affine(Distribution):
    """The distribution of ``scale * base + shift`` (scale > 0), evaluated through ``base``."""

    def __init__(self, base: Distribution, shift: float, scale: float) -> None:
        self.base = base
        self.shift_value = float(shift)
        self.scale_factor = float(scale)
        self.is_exact = base.is_exact

    def __repr__(self) -> str:
        return f"Affine({self.scale_factor:.6g} * {self.base!r} + {self.shift_value:.6g})"

    def _to_base(self, x: np.ndarray) -> np.ndarray:
        return (x - self.shift_value) / self.scale_factor

    def _from_base(self, y: np.ndarray) -> np.ndarray:
        return self.scale_factor * y + self.shift_value

    @property
    def tail_index(self) -> float:  # noqa: D102 - a positive scale keeps the tail
        return self.base.tail_index

    @property
    def _pointwise_cdf(self) -> bool:  # type: ignore[override]  # as its base
        return self.base._pointwise_cdf

    @property
    def support(self) -> tuple[float, float]:
        lo, hi = self.base.support
        return float(self._from_base(np.float64(lo))), float(self._from_base(np.float64(hi)))

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        return self.base._cdf(self._to_base(x))

    def _sf(self, x: np.ndarray) -> np.ndarray:
        return self.base._sf(self._to_base(x))

    def _quantile(self, q: np.ndarray) -> np.ndarray:
        return self._from_base(self.base._quantile(q))

    def _isf(self, p: np.ndarray) -> np.ndarray:
        return self._from_base(self.base._isf(p))

    def _mean(self) -> float:
        return self.scale_factor * self.base.mean() + self.shift_value

    def _var(self) -> float:
        return self.scale_factor**2 * self.base.var()

    def _std(self) -> float:
        return self.scale_factor * self.base.std()

    def _sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        return self._from_base(self.base._sample(size, rng))

    def _affine(self, shift: float, scale: float) -> Distribution:
        return Affine(self.base, self.shift_value * scale + shift, self.scale_factor * scale)

    def quantile_bracket(self, q):  # noqa: D102 - same meaning as the base method
        low, high = self.base.quantile_bracket(q)
        return (
            self._from_base(np.asarray(low)) if np.ndim(low) else float(self._from_base(low)),
            self._from_base(np.asarray(high)) if np.ndim(high) else float(self._from_base(high)),
        )


def affine(dist: Distribution, *, shift: float = 0.0, scale: float = 1.0) -> Distribution:
    """``scale * dist + shift`` for constants (``scale > 0``); grids stay grids."""
    return dist._affine(shift, scale)


def _bisection_midpoint(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Next bisection point of ``[a, b]``; a step of ``max(1, |end|)`` out of an infinite side."""
    finite = np.isfinite(a) & np.isfinite(b)
    if np.count_nonzero(finite) == finite.size:  # (the first branch's values, without where())
        return 0.5 * (a + b)
    with np.errstate(invalid="ignore"):  # inf - inf in the branches np.where discards
        return np.where(
            finite,
            0.5 * (a + b),
            np.where(
                np.isfinite(a),
                a + np.maximum(1.0, np.abs(a)),
                np.where(np.isfinite(b), b - np.maximum(1.0, np.abs(b)), 0.0),
            ),
        )


#: :meth:`Distribution._invert` of at most this many levels evaluates the CDF once per
#: :data:`_SPECULATE_STEPS` bisection steps (:func:`_speculative_bisection`); more levels
#: step one by one (each extra point costs more than the call it saves).
_SPECULATE_MAX_LEVELS = 8
#: Bisection steps replayed per evaluation: 2^6 - 1 = 63 points per level and call.
_SPECULATE_STEPS = 6


def _speculative_round(
    f: Callable[[np.ndarray], np.ndarray], a: np.ndarray, b: np.ndarray, k: int
) -> tuple[list[np.ndarray], np.ndarray]:
    """The midpoints the next ``k`` bisection steps of brackets ``[a, b]`` may visit, and ``f``.

    Level ``d`` holds ``2^d`` candidate brackets per element: child ``j`` (left: ``b = mid``)
    and ``j + 2^d`` (right: ``a = mid``) of bracket ``j``. ``f`` is called once, on every
    candidate midpoint of every level, flattened level by level.
    """
    lows, highs, mids = a[None, :], b[None, :], []
    for d in range(k):
        m = _bisection_midpoint(lows, highs)
        mids.append(m)
        if d + 1 < k:
            lows, highs = np.concatenate((lows, m)), np.concatenate((m, highs))
    return mids, f(np.concatenate([m.ravel() for m in mids]))


def _speculative_bisection(
    f: Callable[[np.ndarray], np.ndarray], p: np.ndarray, a: np.ndarray, b: np.ndarray, upper: bool
) -> np.ndarray:
    """The bisection of :meth:`Distribution._invert` from ``[a, b]``, bit for bit: its ``b``.

    A bisection step evaluates the CDF (or SF, ``upper``) ``f`` at one point per level, and a
    law built of scipy distributions (a mixture of slowest-of-n laws: the replica speed factor)
    spends nearly all of a call on per-call overhead: 52 steps cost ~8 ms. Here each round lays
    out every point the next k steps may visit (the bisection tree of depth k, ``2^k - 1``
    points per level, each the midpoint rule of its ends), evaluates ``f`` on all of them in
    one call, and replays the k steps: each takes the value at the point its path reached.
    The ends, the points, the decisions and the stopping test are those of the step-by-step
    loop, so is the result; ``f`` must act elementwise, as :meth:`~Distribution._invert_groups`
    also requires, and more: each value must not depend on the array it is computed in, which
    a BLAS product over components (``ExposedComm``, ``pipeline_factors.NormalMixture``) does
    not promise (its rounding follows the array's length: 2 of 74 NormalMixture inversions
    moved). So only laws that declare :attr:`Distribution._pointwise_cdf` are bisected so.
    """
    shape, n = p.shape, p.size
    p, a, b = p.ravel(), a.ravel(), b.ravel()
    cols = np.arange(n)
    steps = 0
    while steps < 2200:  # the step-by-step loop's cap
        k = min(_SPECULATE_STEPS, 2200 - steps)
        mids, vals = _speculative_round(f, a, b, k)
        at = 0
        path = np.zeros(n, dtype=np.intp)
        for d, m in enumerate(mids):
            mid = m[path, cols]
            val = vals[at : at + m.size].reshape(m.shape)[path, cols]
            at += m.size
            go_right = val > p if upper else val < p
            a = np.where(go_right, mid, a)
            b = np.where(go_right, b, mid)
            steps += 1
            width = b - a
            if np.all(
                np.isfinite(width) & (width <= 4 * np.spacing(np.maximum(np.abs(a), np.abs(b))))
            ):
                return b.reshape(shape)
            path = path + go_right * (1 << d)
    return b.reshape(shape)


def _speculative_groups(
    f: Callable[[np.ndarray], np.ndarray],
    p: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    label: np.ndarray,
    active: np.ndarray,
    upper: bool,
) -> None:
    """The grouped bisection of :meth:`Distribution._invert_groups`, bit for bit, in place.

    As :func:`_speculative_bisection` (each round evaluates ``f`` once on every point the next
    steps may visit, then replays them), with the grouped loop's bookkeeping: a step moves
    every element of the groups still ``active``, and a group stops after the step at which
    all of its elements have converged. ``a`` and ``b`` (flat, one entry per level) and
    ``active`` (one per group) are updated as that loop updates them.
    """
    steps = 0
    while steps < 2200:  # each group: at most _invert's 2200 steps
        idx = np.flatnonzero(active[label])
        if idx.size == 0:
            return
        k = min(_SPECULATE_STEPS, 2200 - steps)
        mids, vals = _speculative_round(f, a[idx], b[idx], k)
        at = 0
        path = np.zeros(idx.size, dtype=np.intp)
        sub = np.arange(idx.size)  # positions in idx of the elements still stepping
        for d, m in enumerate(mids):
            level = vals[at : at + m.size].reshape(m.shape)
            at += m.size
            el = idx[sub]
            mid, val = m[path[sub], sub], level[path[sub], sub]
            go_right = val > p[el] if upper else val < p[el]
            ai = np.where(go_right, mid, a[el])
            bi = np.where(go_right, b[el], mid)
            a[el], b[el] = ai, bi
            steps += 1
            width = bi - ai
            done = np.isfinite(width) & (
                width <= 4 * np.spacing(np.maximum(np.abs(ai), np.abs(bi)))
            )
            pending = np.bincount(label[el], weights=~done, minlength=active.size)
            active &= pending > 0
            path[sub] += go_right * (1 << d)
            sub = sub[active[label[el]]]
            if sub.size == 0 or steps >= 2200:
                break
