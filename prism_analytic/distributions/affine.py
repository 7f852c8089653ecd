"""Shift and scale by constants: X -> a X + c with a > 0."""

from __future__ import annotations

import numpy as np

from .base import Distribution

__all__ = ["Affine", "affine"]


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

    def _sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        return self._from_base(self.base._sample(size, rng))

    def quantile_bracket(self, q):  # noqa: D102 - same meaning as the base method
        low, high = self.base.quantile_bracket(q)
        return (
            self._from_base(np.asarray(low)) if np.ndim(low) else float(self._from_base(low)),
            self._from_base(np.asarray(high)) if np.ndim(high) else float(self._from_base(high)),
        )


def affine(dist: Distribution, *, shift: float = 0.0, scale: float = 1.0) -> Distribution:
    """``scale * dist + shift``; grids stay grids (the lattice scales exactly)."""
    from .grid import GridDistribution

    if isinstance(dist, GridDistribution):
        return dist.scaled(scale).shifted(shift)
    if isinstance(dist, Affine):
        return Affine(dist.base, dist.shift_value * scale + shift, dist.scale_factor * scale)
    return Affine(dist, shift, scale)
