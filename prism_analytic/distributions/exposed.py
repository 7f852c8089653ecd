"""The exposed part of an overlapped communication: ``max(0, a * M - hidden)``, in closed form."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np
from scipy import special

from .base import Distribution

__all__ = ["ExposedComm"]


class ExposedComm(Distribution):
    """``max(0, a * M - hidden)``: the exposed part of a communication of mean time ``a``.

    ``M`` is a tier's noise multiplier (``tier``: anything with ``sigma``, ``tail_prob`` and
    ``tail_factor``, such as :class:`~prism_analytic.workload.config.TierNoise`): a mean-one
    lognormal with shape ``sigma``, times ``tail_factor`` with probability ``tail_prob``; ``hidden``
    (>= 0) is the part that overlap hides. Everything is closed form (CDF, survival, mean and
    variance through normal CDFs, as in the Black-Scholes formula; quantiles by vectorised
    bisection in log space), so the engines never integrate or invert it numerically.
    Quantile levels inside the atom at 0 return ``-1e-12 * a`` (see :meth:`_quantile`).
    A ``sigma`` of 0 is floored at 1e-6 (a mixture of point masses is not gridded exactly).
    """

    def __init__(self, a: float, tier: Any, hidden: float = 0.0) -> None:
        if not (math.isfinite(a) and a > 0):
            raise ValueError(f"a must be a finite positive time, got {a!r}")
        if not (math.isfinite(hidden) and hidden >= 0):
            raise ValueError(f"hidden must be a finite time >= 0, got {hidden!r}")
        self.a, self.hidden = float(a), float(hidden)
        self.sigma = max(float(tier.sigma), 1e-6)
        q, f = float(tier.tail_prob), float(tier.tail_factor)
        if q > 0 and f > 1:
            self.w, self.scales = np.array([1 - q, q]), np.array([self.a, self.a * f])
        else:
            self.w, self.scales = np.array([1.0]), np.array([self.a])
        self.mu = -0.5 * self.sigma**2  # log-mean of the mean-one body

    def to_spec_fields(self) -> dict[str, float]:
        """Constructor arguments, for JSON round trips of step graphs."""
        return {
            "a": self.a,
            "hidden": self.hidden,
            "sigma": self.sigma,
            "tail_prob": float(self.w[1]) if self.w.size > 1 else 0.0,
            "tail_factor": float(self.scales[1] / self.a) if self.w.size > 1 else 1.0,
        }

    @classmethod
    def from_spec_fields(cls, fields: dict[str, float]) -> ExposedComm:
        """Inverse of :meth:`to_spec_fields`."""
        tier = SimpleNamespace(
            sigma=fields["sigma"], tail_prob=fields["tail_prob"], tail_factor=fields["tail_factor"]
        )
        return cls(fields["a"], tier, fields["hidden"])

    def __repr__(self) -> str:
        return (
            f"ExposedComm(a={self.a:.6g}, sigma={self.sigma:g}, hidden={self.hidden:.6g},"
            f" tail={self.w[1:].tolist()}x{(self.scales[1:] / self.a).tolist()})"
        )

    @property
    def support(self) -> tuple[float, float]:
        """Exposure is never negative and has no upper end."""
        return 0.0, math.inf

    def _z(self, x: np.ndarray) -> np.ndarray:
        """Standardised log of (x + hidden) / scale per component: shape (..., components)."""
        y = np.maximum(np.asarray(x, dtype=float) + self.hidden, 0.0)[..., None]
        with np.errstate(divide="ignore"):
            return (np.log(y) - np.log(self.scales) - self.mu) / self.sigma

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        out = special.ndtr(self._z(x)) @ self.w
        return np.where(np.asarray(x) < 0, 0.0, out)

    def _sf(self, x: np.ndarray) -> np.ndarray:
        out = special.ndtr(-self._z(x)) @ self.w
        return np.where(np.asarray(x) < 0, 1.0, out)

    def _solve(self, level: np.ndarray, upper: bool) -> np.ndarray:
        """X with cdf(x) = level (or sf(x) = level when ``upper``), for x >= 0."""
        level = np.asarray(level, dtype=float)
        # each component's own quantile in log space brackets the mixture's
        z = special.ndtri(level) if not upper else -special.ndtri(level)
        comp = np.log(self.scales) + self.mu + self.sigma * z[..., None]
        lo, hi = comp.min(axis=-1), comp.max(axis=-1)
        for _ in range(64 if len(self.w) > 1 else 0):
            mid = 0.5 * (lo + hi)
            zm = (mid[..., None] - np.log(self.scales) - self.mu) / self.sigma
            if upper:
                below = special.ndtr(-zm) @ self.w > level
            else:
                below = special.ndtr(zm) @ self.w < level
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        with np.errstate(over="ignore"):
            return np.maximum(np.exp(0.5 * (lo + hi)) - self.hidden, 0.0)

    def _quantile(self, q: np.ndarray) -> np.ndarray:
        q = np.asarray(q, dtype=float)
        out = self._solve(np.clip(q, 1e-300, 1.0), upper=False)
        # Levels inside the atom at 0 map to a point a hair below 0 (1e-12 a): the grid
        # discretisation starts at the lowest quantile and would otherwise book the atom as
        # mass *below* its grid (an infinite lower bound and a biased mean).
        return np.where(q <= self._cdf(np.zeros_like(q)), -1e-12 * self.a, out)

    def _isf(self, p: np.ndarray) -> np.ndarray:
        p = np.asarray(p, dtype=float)
        out = self._solve(np.clip(p, 1e-300, 1.0), upper=True)
        return np.where(p >= self._sf(np.zeros_like(p)), 0.0, out)

    def _partial(self, n: int) -> np.ndarray:
        """E[L^n; L > k_j] per component, L the mean-one lognormal, k_j = hidden / scale_j."""
        s = self.sigma
        with np.errstate(divide="ignore"):
            lk = (
                np.log(self.hidden / self.scales)
                if self.hidden > 0
                else np.full_like(self.scales, -np.inf)
            )
        return np.exp(n * self.mu + 0.5 * n * n * s * s) * special.ndtr(
            (self.mu + n * s * s - lk) / s
        )

    def _mean(self) -> float:
        e0, e1 = self._partial(0), self._partial(1)
        return float(self.w @ (self.scales * e1 - self.hidden * e0))

    def _var(self) -> float:
        e0, e1, e2 = self._partial(0), self._partial(1), self._partial(2)
        h = self.hidden
        second = float(self.w @ (self.scales**2 * e2 - 2 * h * self.scales * e1 + h * h * e0))
        return max(0.0, second - self._mean() ** 2)

    def _sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        comp = rng.choice(len(self.w), size=size, p=self.w)
        body = np.exp(self.mu + self.sigma * rng.standard_normal(size))
        return np.maximum(self.scales[comp] * body - self.hidden, 0.0)
