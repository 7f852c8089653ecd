"""Distributions given by data: the empirical distribution of samples, and a point mass."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._checks import check_finite, check_probabilities
from .base import Distribution

__all__ = ["Empirical", "empirical", "PointMass", "point_mass"]


class Empirical(Distribution):
    """The empirical distribution of observed samples (each sample has mass 1/n).

    Parameters
    ----------
    samples : array_like
        One-dimensional, non-empty, finite observations (seconds).
    """

    is_exact = True

    def __init__(self, samples: Any) -> None:
        try:
            arr = np.asarray(samples, dtype=float).ravel()
        except (TypeError, ValueError) as exc:
            raise TypeError(f"samples must be numeric, got {samples!r}"[:200]) from exc
        if arr.size == 0:
            raise ValueError("samples must not be empty")
        if not np.isfinite(arr).all():
            raise ValueError("samples must be finite (no NaN or inf)")
        self.samples = np.sort(arr)

    def __repr__(self) -> str:
        return f"Empirical(n={self.samples.size})"

    @property
    def n(self) -> int:
        """Number of samples."""
        return int(self.samples.size)

    tail_index = float("inf")  # bounded support: every moment exists

    @property
    def support(self) -> tuple[float, float]:
        """Smallest and largest sample."""
        return float(self.samples[0]), float(self.samples[-1])

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.samples, x, side="right") / self.n

    def _sf(self, x: np.ndarray) -> np.ndarray:
        return (self.n - np.searchsorted(self.samples, x, side="right")) / self.n

    def _quantile(self, q: np.ndarray) -> np.ndarray:
        # Smallest sample with ECDF >= q (inverse of a right-continuous step function).
        idx = np.clip(np.ceil(q * self.n).astype(np.int64) - 1, 0, self.n - 1)
        return self.samples[idx]

    def _isf(self, p: np.ndarray) -> np.ndarray:
        # Smallest sample x with P(X > x) <= p, i.e. at least n (1 - p) samples at or below x.
        idx = np.clip(np.ceil((1.0 - p) * self.n).astype(np.int64) - 1, 0, self.n - 1)
        return self.samples[idx]

    def _mean(self) -> float:
        return float(self.samples.mean())

    def _var(self) -> float:
        return float(self.samples.var())

    def _sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        return rng.choice(self.samples, size=size, replace=True)

    def dkw_epsilon(self, alpha: float = 0.05) -> float:
        """Half-width of the Dvoretzky-Kiefer-Wolfowitz band at confidence 1 - alpha."""
        (a,) = check_probabilities([alpha], "alpha")
        if not 0 < a < 1:
            raise ValueError(f"alpha must lie in (0, 1), got {a}")
        return float(np.sqrt(np.log(2.0 / a) / (2.0 * self.n)))

    def cdf_band(self, x: Any, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
        """Simultaneous (1 - alpha) confidence band (low, high) for the true CDF at ``x``."""
        eps = self.dkw_epsilon(alpha)
        f = np.asarray(self.cdf(x))
        return np.clip(f - eps, 0.0, 1.0), np.clip(f + eps, 0.0, 1.0)


def empirical(samples: Any) -> Empirical:
    """The empirical distribution of ``samples`` (see :class:`Empirical`)."""
    return Empirical(samples)


class PointMass(Distribution):
    """A deterministic latency: all mass at ``value``."""

    is_exact = True

    def __init__(self, value: float) -> None:
        self.value = check_finite(value, "value")

    def _key(self) -> Any:
        return ("point", self.value)

    def __repr__(self) -> str:
        return f"PointMass({self.value:.6g})"

    tail_index = float("inf")

    @property
    def support(self) -> tuple[float, float]:
        """The point itself, at both ends."""
        return self.value, self.value

    def _to_grid(self, h: float, policy: Any) -> Any:
        from .grid import GridDistribution

        k_lo = int(np.floor(self.value / h))
        k_hi = int(np.ceil(self.value / h))
        lo = np.zeros(k_hi - k_lo + 1)
        hi = np.zeros_like(lo)
        lo[0] = 1.0
        hi[-1] = 1.0
        return GridDistribution(h, k_lo, lo, hi, policy=policy, moments=(self.value, 0.0))

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        return (x >= self.value).astype(float)

    def _sf(self, x: np.ndarray) -> np.ndarray:
        return (x < self.value).astype(float)

    def _quantile(self, q: np.ndarray) -> np.ndarray:
        return np.full(np.shape(q), self.value)

    def _isf(self, p: np.ndarray) -> np.ndarray:
        return np.full(np.shape(p), self.value)

    def _mean(self) -> float:
        return self.value

    def _var(self) -> float:
        return 0.0

    def _sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        return np.full(size, self.value)


def point_mass(value: float) -> PointMass:
    """A deterministic latency equal to ``value``."""
    return PointMass(value)
