"""Products of independent positive variables on grids: S * X by convolution in log space.

A persistent per-GPU speed factor S multiplies a whole replica's duration X. Since
log(S X) = log S + log X, the law of S X is a convolution on a lattice in log time: both
sandwich sides are discretised there (lower side rounded down, upper side rounded up), convolved,
and mapped back to a linear lattice (exp is increasing, so the sandwich survives). The cost is a
few FFTs, whatever the spread of S relative to X.
"""

from __future__ import annotations

import math

import numpy as np

from .base import Distribution
from .grid import (
    GridDistribution,
    convolve_grids,
    convolve_grids_bounded,
    discretize,
    mix_grids,
)

__all__ = ["scale_mixture"]


class _LogOf(Distribution):
    """The law of log S for a positive variable S."""

    def __init__(self, base: Distribution) -> None:
        self.base = base
        self.is_exact = base.is_exact

    @property
    def tail_index(self) -> float:
        """No power tail (``inf``).

        P(log S > t) = P(S > e^t) decays exponentially in t even for a power-tailed S; the
        default would integrate log S's moments numerically only to find them finite.
        """
        return math.inf

    @property
    def support(self) -> tuple[float, float]:
        lo, hi = self.base.support
        with np.errstate(divide="ignore"):
            return float(np.log(lo)) if lo > 0 else -np.inf, float(np.log(hi))

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        return self.base._cdf(np.exp(x))

    def _sf(self, x: np.ndarray) -> np.ndarray:
        return self.base._sf(np.exp(x))

    def _quantile(self, q: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(self.base._quantile(q))

    def _isf(self, p: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(self.base._isf(p))


def _relattice(g: GridDistribution, transform, h: float) -> GridDistribution:
    """Map both sides of ``g`` through an increasing ``transform`` onto the lattice ``k * h``.

    The lower side rounds down and the upper side up, so the sandwich survives.
    """
    y = transform(g.points)
    k_lo = np.floor(y / h).astype(np.int64)
    k_hi = np.ceil(y / h).astype(np.int64)
    base = int(k_lo[0])
    n = int(k_hi[-1]) - base + 1
    lo = np.bincount(k_lo - base, weights=g.lo, minlength=n)
    hi = np.bincount(k_hi - base, weights=g.hi, minlength=n)
    # exp is monotone: a CDF error bound (``roundoff``) carries over unchanged
    return GridDistribution(
        h, base, lo, hi, g.below, g.above, g.policy, tail_index=g.tail_index, roundoff=g.roundoff
    ).trimmed()


def _mixture_parts(speed: Distribution) -> list[tuple[Distribution, float]]:
    """A finite mixture's (component, weight) pairs of positive weight; else ``[(speed, 1)]``.

    A speed factor with degraded GPUs is ``(1 - q) S + q f S`` (the workload builder): its
    parts have closed-form quantiles where the mixture's are found by bisection (0.06-0.09 s
    CPU per preset), and mixing their grids on one lattice is exact (mixing is monotone).
    """
    comps, weights = getattr(speed, "components", None), getattr(speed, "weights", None)
    if comps is None or weights is None:
        return [(speed, 1.0)]
    return [(c, float(w)) for c, w in zip(comps, weights) if w > 0]


def scale_mixture(
    body: GridDistribution, speed: Distribution, *, bounded: bool = False
) -> GridDistribution:
    """The law of ``S * X`` for X ~ ``body`` (positive) and an independent S ~ ``speed`` > 0.

    Parameters
    ----------
    body : GridDistribution
        The duration to scale; its lattice points must be positive.
    speed : Distribution
        The factor's law, with positive support.
    bounded : bool
        Fold the log-space convolution's floating-point round-off into the sides
        (:func:`~.grid.convolve_grids_bounded`), so each side stays a bound however far into
        the tail a later ``F^n`` reads it; the bounds engine asks for this. The plain FFT's
        round-off (~1e-17 per cell) is only reported in ``roundoff``, and ``F^n`` with
        n ~ 1e12 turns it into mass near the top of the lattice (a lower side above the upper).
    """
    if body.points[0] <= 0:
        raise ValueError(
            "body must be positive to be scaled in log space; got lattice points "
            f"from {body.points[0]:g}"
        )
    policy = body.policy
    tail = policy.tail_mass
    parts = _mixture_parts(speed)
    s_min = min(float(c.quantile(tail)) for c, _ in parts)
    s_max = max(float(c.isf(tail)) for c, _ in parts)
    if s_max <= s_min:  # a constant factor
        return body.scaled(s_min)
    # Relative resolution: each log-lattice rounding costs one cell of relative width.
    delta = policy.rel_width / 4.0
    x_log = _relattice(body, np.log, delta)
    # the product's moments are not kept (_relattice drops them): skip log S's numeric moments
    grids = [discretize(_LogOf(c), delta, policy, with_moments=False) for c, _ in parts]
    weights = np.array([w for _, w in parts])
    s_log = grids[0] if len(grids) == 1 else mix_grids(grids, weights / weights.sum())
    product = (convolve_grids_bounded if bounded else convolve_grids)(x_log, s_log)
    mean = body.mean() * speed.mean()
    h = max(body.h * s_min, policy.rel_width * mean / 4.0)
    out = _relattice(product, np.exp, h)
    out.moments = _product_moments(body, speed)
    return out


def _product_moments(body: GridDistribution, speed: Distribution) -> tuple[float, float] | None:
    """Exact (mean, variance) of ``S * X`` for independent S and X, where X's are known.

    ``E[SX] = E[S] E[X]`` and ``E[(SX)^2] = E[S^2] E[X^2]``; the variance is written as
    ``v_S v_X + v_S m_X^2 + m_S^2 v_X`` so that nothing cancels at low CV.
    """
    if body.moments is None or not speed.is_exact:
        return None
    m_x, v_x = body.moments
    m_s, v_s = float(speed.mean()), float(speed.var())
    if not all(np.isfinite(v) for v in (m_x, v_x, m_s, v_s)):
        return None
    return m_s * m_x, v_s * v_x + v_s * m_x * m_x + m_s * m_s * v_x
