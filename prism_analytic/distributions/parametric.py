"""Closed-form latency distributions: any scipy.stats continuous law, and constructors by moments."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

from .._checks import check_finite, check_positive
from .base import Distribution

__all__ = [
    "ScipyDistribution",
    "from_scipy",
    "normal",
    "lognormal",
    "gamma",
    "exponential",
    "uniform",
    "pareto",
]


class ScipyDistribution(Distribution):
    """A frozen ``scipy.stats`` continuous distribution behind the common interface.

    Parameters
    ----------
    frozen : scipy.stats frozen continuous distribution
        For example ``scipy.stats.norm(0, 1)``.
    """

    is_exact = True

    def __init__(self, frozen: Any) -> None:
        dist = getattr(frozen, "dist", None)
        if not isinstance(dist, stats.rv_continuous):
            raise TypeError(
                "frozen must be a frozen scipy.stats continuous distribution such as "
                f"scipy.stats.norm(0, 1), got {frozen!r}"
            )
        params = [*frozen.args, *frozen.kwds.values()]
        for value in params:
            if isinstance(value, int | float | np.number) and not math.isfinite(float(value)):
                raise ValueError(f"frozen distribution parameters must be finite, got {params}")
        if np.isnan(frozen.ppf(0.5)):  # scipy answers NaN everywhere for invalid parameters
            raise ValueError(
                f"frozen: invalid parameters for scipy.stats.{dist.name}: "
                f"args={frozen.args}, kwds={frozen.kwds}"
            )
        self.frozen = frozen

    @property
    def family(self) -> str:
        """Scipy's name of the family, e.g. ``'norm'``."""
        return self.frozen.dist.name

    def __repr__(self) -> str:
        args = ", ".join(
            [
                *(f"{a:.6g}" for a in self.frozen.args),
                *(f"{k}={v:.6g}" for k, v in self.frozen.kwds.items()),
            ]
        )
        return f"ScipyDistribution({self.family}({args}))"

    @property
    def support(self) -> tuple[float, float]:
        lo, hi = self.frozen.support()
        return float(lo), float(hi)

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        return self.frozen.cdf(x)

    def _sf(self, x: np.ndarray) -> np.ndarray:
        return self.frozen.sf(x)

    def _quantile(self, q: np.ndarray) -> np.ndarray:
        return self.frozen.ppf(q)

    def _isf(self, p: np.ndarray) -> np.ndarray:
        return self.frozen.isf(p)

    # scipy answers NaN where a moment diverges (e.g. Frechet with alpha <= 1); the interface
    # promises inf there.
    def _mean(self) -> float:
        m = float(self.frozen.mean())
        return np.inf if np.isnan(m) else m

    def _var(self) -> float:
        v = float(self.frozen.var())
        return np.inf if np.isnan(v) else v

    def pdf(self, x: Any) -> float | np.ndarray:
        """Probability density (closed-form families only)."""
        return self.frozen.pdf(x)

    def _sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(self.frozen.rvs(size=size, random_state=rng), dtype=float)


def from_scipy(frozen: Any) -> ScipyDistribution:
    """Wrap any frozen ``scipy.stats`` continuous distribution.

    Examples
    --------
    >>> from scipy import stats
    >>> d = from_scipy(stats.expon())
    >>> round(d.quantile(0.5), 6)
    0.693147
    """
    return ScipyDistribution(frozen)


def normal(mean: float, std: float) -> ScipyDistribution:
    """Normal distribution with the given mean and standard deviation (std > 0)."""
    return from_scipy(stats.norm(check_finite(mean, "mean"), check_positive(std, "std")))


def lognormal(mean: float, std: float) -> ScipyDistribution:
    """Lognormal with the given mean (> 0) and standard deviation (> 0) of the variable itself.

    Examples
    --------
    >>> d = lognormal(1.0, 0.05)
    >>> round(d.mean(), 12), round(d.std(), 12)
    (1.0, 0.05)
    """
    mean = check_positive(mean, "mean")
    std = check_positive(std, "std")
    sigma2 = math.log1p((std / mean) ** 2)
    mu = math.log(mean) - 0.5 * sigma2
    return from_scipy(stats.lognorm(s=math.sqrt(sigma2), scale=math.exp(mu)))


def gamma(mean: float, std: float) -> ScipyDistribution:
    """Gamma with the given mean (> 0) and standard deviation (> 0)."""
    mean = check_positive(mean, "mean")
    std = check_positive(std, "std")
    shape = (mean / std) ** 2
    return from_scipy(stats.gamma(shape, scale=mean / shape))


def exponential(mean: float = 1.0, loc: float = 0.0) -> ScipyDistribution:
    """Exponential with the given mean (> 0), optionally shifted by ``loc``."""
    return from_scipy(stats.expon(loc=check_finite(loc, "loc"), scale=check_positive(mean, "mean")))


def uniform(low: float, high: float) -> ScipyDistribution:
    """Uniform on [low, high] (low < high)."""
    low = check_finite(low, "low")
    high = check_finite(high, "high")
    if high <= low:
        raise ValueError(f"high must be > low, got low={low}, high={high}")
    return from_scipy(stats.uniform(loc=low, scale=high - low))


def pareto(alpha: float, scale: float = 1.0) -> ScipyDistribution:
    """Pareto (type I) with tail index ``alpha`` > 0 and minimum ``scale`` > 0."""
    return from_scipy(
        stats.pareto(check_positive(alpha, "alpha"), scale=check_positive(scale, "scale"))
    )
