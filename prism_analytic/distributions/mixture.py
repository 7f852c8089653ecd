"""Finite mixtures: a latency that follows one of several laws with given probabilities."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .base import Distribution

__all__ = ["Mixture", "mixture"]


class Mixture(Distribution):
    """F(x) = sum_i w_i F_i(x).

    Used for regimes (a per-step common shock handled by conditioning) and for
    straggler models (a small probability of a slow execution).
    """

    def __init__(self, components: Sequence[Distribution], weights: Sequence[float]) -> None:
        components = list(components)
        if not components:
            raise ValueError("dists must contain at least one distribution")
        for i, c in enumerate(components):
            if not isinstance(c, Distribution):
                raise TypeError(f"dists[{i}] must be a Distribution, got {type(c).__name__}")
        w = np.asarray(weights, dtype=float).ravel()
        if w.size != len(components):
            raise ValueError(
                f"weights must have one entry per distribution: got {w.size} "
                f"weights for {len(components)} distributions"
            )
        if not np.isfinite(w).all() or (w < 0).any():
            raise ValueError(f"weights must be finite and >= 0, got {w.tolist()}")
        if abs(w.sum() - 1.0) > 1e-9:
            raise ValueError(f"weights must sum to 1 (within 1e-9), got sum {w.sum():.12g}")
        self.components = components
        self.weights = w / w.sum()
        self.is_exact = all(c.is_exact for c in components)

    def __repr__(self) -> str:
        parts = ", ".join(f"{w:.3g}:{c!r}" for w, c in zip(self.weights, self.components))
        return f"Mixture({parts})"

    @property
    def tail_index(self) -> float:  # noqa: D102 - the heaviest component decides
        return min(c.tail_index for w, c in zip(self.weights, self.components) if w > 0)

    @property
    def support(self) -> tuple[float, float]:
        """Smallest interval containing every component's support."""
        lows, highs = zip(*(c.support for c in self.components))
        return min(lows), max(highs)

    def _bracket_for_inversion(self) -> tuple[float, float]:
        # Finite bracket from the components' own extreme quantiles keeps bisection short.
        lo = min(float(c._quantile(np.array([0.0]))[0]) for c in self.components)
        hi = max(float(c._isf(np.array([0.0]))[0]) for c in self.components)
        return lo, hi

    @property
    def _pointwise_cdf(self) -> bool:  # type: ignore[override]  # a weighted sum, point by point
        return all(c._pointwise_cdf for c in self.components)

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        return sum(w * c._cdf(x) for w, c in zip(self.weights, self.components))

    def _sf(self, x: np.ndarray) -> np.ndarray:
        return sum(w * c._sf(x) for w, c in zip(self.weights, self.components))

    def _to_grid(self, h: float, policy: Any) -> Any:
        if self.is_exact:
            return None  # discretise the exact mixture's CDF directly
        from .grid import mix_grids, to_grid

        return mix_grids([to_grid(c, h, policy) for c in self.components], self.weights)

    def _mean(self) -> float:
        means = [c.mean() for w, c in zip(self.weights, self.components) if w > 0]
        if not all(np.isfinite(means)):  # one component with an infinite mean is enough
            return np.inf
        return float(sum(w * c.mean() for w, c in zip(self.weights, self.components)))

    def _var(self) -> float:
        m = self._mean()
        live = [(w, c) for w, c in zip(self.weights, self.components) if w > 0]
        if not np.isfinite(m) or not all(np.isfinite(c.var()) for _, c in live):
            return np.inf  # never inf - inf = nan
        second = sum(w * (c.var() + (c.mean() - m) ** 2) for w, c in live)
        return float(max(second, 0.0))

    def _sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        which = rng.choice(len(self.components), size=size, p=self.weights)
        out = np.empty(size)
        for i, c in enumerate(self.components):
            mask = which == i
            if mask.any():
                out[mask] = c._sample(int(mask.sum()), rng)
        return out

    def quantile_bracket(self, q):  # noqa: D102 - inherits the doc
        if self.is_exact:
            return super().quantile_bracket(q)
        from .grid import to_grid_like

        return to_grid_like(self).quantile_bracket(q)


def mixture(dists: Sequence[Distribution], weights: Sequence[float]) -> Mixture:
    """Mixture of ``dists`` with probabilities ``weights`` (non-negative, summing to 1)."""
    return Mixture(dists, weights)
