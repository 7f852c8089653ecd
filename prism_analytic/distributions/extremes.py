"""Maxima, minima and order statistics of independent variables with exact (closed-form) laws.

These results stay lazy: every value is computed from the operands' own CDF and SF, in log
space where it matters, so that ``n`` up to 1e12 and levels up to 1 - 1e-12 are
resolved. Gridded operands go through :mod:`.grid_extremes` instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import special

from .base import Distribution

__all__ = ["IIDMax", "OrderStatistic", "MaxOfIndependent", "MinOfIndependent", "log_cdf", "log_sf"]


def log_cdf(dist: Distribution, x: np.ndarray) -> np.ndarray:
    """Log P(X <= x), through log1p(-S) where the CDF is close to 1."""
    s = dist._sf(x)
    with np.errstate(divide="ignore"):
        return np.where(s < 0.5, np.log1p(-s), np.log(dist._cdf(x)))


def log_sf(dist: Distribution, x: np.ndarray) -> np.ndarray:
    """Log P(X > x), through log1p(-F) where the SF is close to 1."""
    f = dist._cdf(x)
    with np.errstate(divide="ignore"):
        return np.where(f < 0.5, np.log1p(-f), np.log(dist._sf(x)))


def _moments_or_inf(self: Distribution, parents: Sequence[Distribution]) -> tuple[float, float]:
    # A max or min of variables with infinite moments has infinite moments: never integrate a
    # truncated range and call it the answer.
    if any(not np.isfinite(p.var()) for p in parents):
        return np.inf, np.inf
    return self._numeric_moments()


class IIDMax(Distribution):
    """The maximum of ``n`` independent copies of ``parent``: F(x)^n."""

    def __init__(self, parent: Distribution, n: int) -> None:
        self.parent = parent
        self.n = int(n)
        self.is_exact = parent.is_exact

    def __repr__(self) -> str:
        return f"IIDMax({self.parent!r}, n={self.n})"

    @property
    def tail_index(self) -> float:  # noqa: D102 - the maximum has its parent's tail
        return self.parent.tail_index

    @property
    def support(self) -> tuple[float, float]:
        """The parent's support."""
        return self.parent.support

    @property
    def _pointwise_cdf(self) -> bool:  # type: ignore[override]  # ufuncs of the parent's
        return self.parent._pointwise_cdf

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        return np.exp(self.n * log_cdf(self.parent, x))

    def _sf(self, x: np.ndarray) -> np.ndarray:
        return -np.expm1(self.n * log_cdf(self.parent, x))

    def _quantile(self, q: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return self._parent_at(np.log(q) / self.n)

    def _isf(self, p: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return self._parent_at(np.log1p(-p) / self.n)

    def _parent_at(self, log_f: np.ndarray) -> np.ndarray:
        """The parent's quantile at CDF level ``exp(log_f)`` (F^n = q: log F = log(q) / n).

        Read on the side where the level is small: the survival level -expm1(log_f) in the
        upper half, the CDF level exp(log_f) in the lower half (1 - 1e-25 would round to 1 and
        send a lower-tail quantile to -inf).
        """
        f, s = np.exp(log_f), -np.expm1(log_f)
        return np.where(f <= s, self.parent._quantile(f), self.parent._isf(s))

    def _sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        return self._quantile(rng.random(size))

    def _mean(self) -> float:
        return _moments_or_inf(self, [self.parent])[0]

    def _var(self) -> float:
        return _moments_or_inf(self, [self.parent])[1]


class OrderStatistic(Distribution):
    """The k-th smallest of ``n`` independent copies of ``parent`` (k = n is the maximum)."""

    def __init__(self, parent: Distribution, k: int, n: int) -> None:
        self.parent = parent
        self.k = int(k)
        self.n = int(n)
        self.is_exact = parent.is_exact

    def __repr__(self) -> str:
        return f"OrderStatistic({self.parent!r}, k={self.k}, n={self.n})"

    @property
    def tail_index(self) -> float:  # noqa: D102 - exceeding x takes n - k + 1 copies above x
        return (self.n - self.k + 1) * self.parent.tail_index

    @property
    def support(self) -> tuple[float, float]:
        """The parent's support."""
        return self.parent.support

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        # The minimum and maximum in log space: betainc loses the tail at n ~ 1e12.
        if self.k == 1:
            return -np.expm1(self.n * log_sf(self.parent, x))
        if self.k == self.n:
            return np.exp(self.n * log_cdf(self.parent, x))
        # P(X_(k) <= x) = P(Binomial(n, F) >= k) = I_F(k, n - k + 1)
        return special.betainc(self.k, self.n - self.k + 1, self.parent._cdf(x))

    def _sf(self, x: np.ndarray) -> np.ndarray:
        if self.k == 1:
            return np.exp(self.n * log_sf(self.parent, x))
        if self.k == self.n:
            return -np.expm1(self.n * log_cdf(self.parent, x))
        return special.betainc(self.n - self.k + 1, self.k, self.parent._sf(x))

    def _parent_levels(self, q: np.ndarray, p: np.ndarray) -> np.ndarray:
        """Parent quantile at the level where the order statistic's CDF is q (= 1 - p).

        The minimum and maximum have closed forms in log space; otherwise the parent's CDF
        level f and SF level s come from betaincinv. Each is passed to the side of the parent
        (quantile or isf) where it is small, so that 1 - f is never formed.
        """
        with np.errstate(divide="ignore"):
            if self.k == 1:  # 1 - (1 - F)^n = q  <=>  F = -expm1(log1p(-q) / n)
                f = -np.expm1(np.log1p(-q) / self.n)
                s = np.exp(np.log(p) / self.n)
            elif self.k == self.n:  # F^n = q
                f = np.exp(np.log(q) / self.n)
                s = -np.expm1(np.log1p(-p) / self.n)
            else:
                f = special.betaincinv(self.k, self.n - self.k + 1, q)
                s = special.betaincinv(self.n - self.k + 1, self.k, p)
        return np.where(f <= s, self.parent._quantile(f), self.parent._isf(s))

    def _quantile(self, q: np.ndarray) -> np.ndarray:
        return self._parent_levels(q, 1.0 - q)

    def _isf(self, p: np.ndarray) -> np.ndarray:
        return self._parent_levels(1.0 - p, p)

    def _mean(self) -> float:
        return _moments_or_inf(self, [self.parent])[0]

    def _var(self) -> float:
        return _moments_or_inf(self, [self.parent])[1]


class MaxOfIndependent(Distribution):
    """The maximum of independent, differently distributed variables: prod F_i."""

    def __init__(self, dists: Sequence[Distribution]) -> None:
        self.dists = list(dists)
        self.is_exact = all(d.is_exact for d in self.dists)

    def __repr__(self) -> str:
        return f"MaxOfIndependent({len(self.dists)} operands)"

    @property
    def tail_index(self) -> float:  # noqa: D102
        return min(d.tail_index for d in self.dists)

    @property
    def support(self) -> tuple[float, float]:
        """Largest lower end and largest upper end of the components' supports."""
        return max(d.support[0] for d in self.dists), max(d.support[1] for d in self.dists)

    def _bracket_for_inversion(self) -> tuple[float, float]:
        lo = max(float(d._quantile(np.array([0.0]))[0]) for d in self.dists)
        hi = max(float(d._isf(np.array([0.0]))[0]) for d in self.dists)
        return lo, hi

    def _log_cdf(self, x: np.ndarray) -> np.ndarray:
        return sum(log_cdf(d, x) for d in self.dists)

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        return np.exp(self._log_cdf(x))

    def _sf(self, x: np.ndarray) -> np.ndarray:
        return -np.expm1(self._log_cdf(x))

    def _mean(self) -> float:
        return _moments_or_inf(self, self.dists)[0]

    def _var(self) -> float:
        return _moments_or_inf(self, self.dists)[1]

    def _sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        return np.max([d._sample(size, rng) for d in self.dists], axis=0)


class MinOfIndependent(Distribution):
    """The minimum of independent variables: survival function prod S_i."""

    def __init__(self, dists: Sequence[Distribution]) -> None:
        self.dists = list(dists)
        self.is_exact = all(d.is_exact for d in self.dists)

    def __repr__(self) -> str:
        return f"MinOfIndependent({len(self.dists)} operands)"

    @property
    def tail_index(self) -> float:  # noqa: D102 - S = prod S_i: the indices add
        return float(sum(d.tail_index for d in self.dists))

    @property
    def support(self) -> tuple[float, float]:
        """Smallest lower end and smallest upper end of the components' supports."""
        return min(d.support[0] for d in self.dists), min(d.support[1] for d in self.dists)

    def _bracket_for_inversion(self) -> tuple[float, float]:
        lo = min(float(d._quantile(np.array([0.0]))[0]) for d in self.dists)
        hi = min(float(d._isf(np.array([0.0]))[0]) for d in self.dists)
        return lo, hi

    def _log_sf(self, x: np.ndarray) -> np.ndarray:
        return sum(log_sf(d, x) for d in self.dists)

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        return -np.expm1(self._log_sf(x))

    def _sf(self, x: np.ndarray) -> np.ndarray:
        return np.exp(self._log_sf(x))

    def _mean(self) -> float:
        return _moments_or_inf(self, self.dists)[0]

    def _var(self) -> float:
        return _moments_or_inf(self, self.dists)[1]

    def _sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        return np.min([d._sample(size, rng) for d in self.dists], axis=0)
