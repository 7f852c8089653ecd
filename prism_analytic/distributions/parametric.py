"""Closed-form latency distributions: any scipy.stats continuous law; constructors by moments."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

from .._checks import check_finite, check_positive
from .base import Distribution
from .gamma_large import LARGE_SHAPE, gamma_cdf_sf, gamma_quantile
from .tails import FAMILY_TAIL_INDEX

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

    def _key(self) -> Any:
        f = self.frozen
        # parameters identify the law only for scipy's own families: a histogram or a user's
        # rv_continuous subclass keeps its data outside args/kwds (and may share a name)
        if type(f.dist) is not type(getattr(stats, f.dist.name, None)):
            return ("object", id(self))
        return ("scipy", self.family, tuple(f.args), tuple(sorted(f.kwds.items())))

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
    def tail_index(self) -> float:
        """The power-tail index of the family (:data:`.tails.FAMILY_TAIL_INDEX`), else inf."""
        rule = FAMILY_TAIL_INDEX.get(self.family)
        if rule is not None:
            shapes, _, _ = self.frozen.dist._parse_args(*self.frozen.args, **self.frozen.kwds)
            try:
                return float(rule([float(a) for a in shapes]))
            except (IndexError, ZeroDivisionError):
                pass
        return super().tail_index

    @property
    def support(self) -> tuple[float, float]:
        """The frozen scipy distribution's support."""
        lo, hi = self.frozen.support()
        return float(lo), float(hi)

    @property
    def _large_gamma(self) -> tuple[float, float, float] | None:
        """(shape, loc, scale) of a gamma law whose shape scipy's gammainc mishandles, else None.

        See :mod:`.gamma_large`: from shape 1e5 on scipy's tails can be off by far more than
        the precision the certified brackets assume.
        """
        if self.family != "gamma":
            return None
        shapes, loc, scale = self.frozen.dist._parse_args(*self.frozen.args, **self.frozen.kwds)
        a = float(shapes[0])
        return (a, float(loc), float(scale)) if a >= LARGE_SHAPE else None

    @property
    def _pointwise_cdf(self) -> bool:  # type: ignore[override]  # scipy.stats' ufuncs
        return self._large_gamma is None

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        if (g := self._large_gamma) is not None:
            return gamma_cdf_sf(x, *g)[0]
        return self.frozen.cdf(x)

    def _sf(self, x: np.ndarray) -> np.ndarray:
        if (g := self._large_gamma) is not None:
            return gamma_cdf_sf(x, *g)[1]
        return self.frozen.sf(x)

    def _quantile(self, q: np.ndarray) -> np.ndarray:
        if (g := self._large_gamma) is not None:
            return gamma_quantile(q, *g)
        return self.frozen.ppf(q)

    def _isf(self, p: np.ndarray) -> np.ndarray:
        if (g := self._large_gamma) is not None:
            return gamma_quantile(p, *g, upper=True)
        return self.frozen.isf(p)

    # scipy answers NaN where a moment diverges (e.g. Frechet with alpha <= 1); the interface
    # promises inf there, and NaN only where the mean is undefined: both tails too heavy
    # (Cauchy: the integral is inf - inf, not +inf).
    # A family with a known power tail is judged by its index, not by scipy's number
    # (invweibull with c < 1 has an infinite mean, scipy answers Gamma(1 - 1/c) < 0).
    def _mean(self) -> float:
        m = float(self.frozen.mean())
        if self.family in FAMILY_TAIL_INDEX:
            upper = self.tail_index <= 1.0
        else:
            upper = np.isnan(m) or m == np.inf
        upper = upper and not np.isfinite(self.support[1])
        if not upper and np.isfinite(m):
            return m
        lower = _heavy_lower_tail(self)
        if upper and lower:
            return np.nan
        return np.inf if upper else (-np.inf if lower else m)

    def _var(self) -> float:
        if self.family == "lognorm" and not self.frozen.args:
            # scipy forms exp(s^2) - 1, which is 0 for s < 1e-8 and overflows early; in logs:
            # Var = scale^2 exp(s^2) expm1(s^2).
            s2 = float(self.frozen.kwds.get("s", 1.0)) ** 2
            log_scale = math.log(float(self.frozen.kwds.get("scale", 1.0)))
            if s2 > 0 and "loc" not in self.frozen.kwds:
                log_var = 2 * log_scale + s2 + math.log(math.expm1(min(s2, 700.0)))
                return math.exp(log_var) if log_var < 709.0 else np.inf
        if self.family in FAMILY_TAIL_INDEX and self.tail_index <= 2.0:
            return np.inf  # scipy's number can be finite (and negative) there
        with np.errstate(over="ignore"):  # an overflow is an inf variance, said by the value
            v = float(self.frozen.var())
        return np.inf if np.isnan(v) else v

    def _std(self) -> float:
        # scale * the standard shape's std where scale^2 * var leaves the normal range: it
        # overflows at scale 1e300 and underflows to 0 below scale 1e-154
        var = self._var()
        if np.isfinite(var) and var >= np.finfo(float).tiny:
            return float(np.sqrt(var))
        shapes, _, scale = self.frozen.dist._parse_args(*self.frozen.args, **self.frozen.kwds)
        if self.family == "lognorm":  # scipy's exp(s^2) - 1 is 0 below s ~ 1e-8
            s2 = float(shapes[0]) ** 2
            unit = math.sqrt(math.exp(s2) * math.expm1(s2)) if s2 < 700 else math.inf
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                unit = float(self.frozen.dist.std(*shapes))
        if not np.isfinite(unit):
            return float(np.sqrt(var))
        return float(scale * unit)

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
    cv = std / mean
    # sigma^2 = log(1 + cv^2), without overflowing cv^2 or rounding a tiny cv^2 to zero.
    if cv < 1e-100:
        sigma = cv
    elif cv > 1e100:
        sigma = math.sqrt(2.0 * math.log(cv))
    else:
        sigma = math.sqrt(math.log1p(cv * cv))
    mu = math.log(mean) - 0.5 * sigma * sigma
    if sigma > 30.0 or mu < -700.0:
        raise ValueError(
            f"std/mean = {cv:.3g} is too large for a lognormal: its log-sigma {sigma:.3g} "
            "(at most 30) puts the median below 1e-300; lognormal(mean, std) needs std/mean "
            "<= about 1e195"
        )
    return from_scipy(stats.lognorm(s=sigma, scale=math.exp(mu)))


def gamma(mean: float, std: float) -> ScipyDistribution:
    """Gamma with the given mean (> 0) and standard deviation (> 0)."""
    mean = check_positive(mean, "mean")
    std = check_positive(std, "std")
    ratio = mean / std
    # shape = (mean/std)^2 must be a finite, non-zero float for scipy's incomplete gamma.
    if not 1e-150 <= ratio <= 1e150:
        raise ValueError(
            f"mean/std = {ratio:.3g} is out of range for a gamma law (shape (mean/std)^2 must "
            f"lie in [1e-300, 1e300]); got mean={mean:g}, std={std:g}"
        )
    shape = ratio * ratio
    return from_scipy(stats.gamma(shape, scale=std / ratio))


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


def _heavy_lower_tail(dist: ScipyDistribution) -> bool:
    """Whether E[max(-X, 0)] may diverge: an unbounded lower support with a power tail.

    The lower tail's power index is read from two far quantiles (``F(x) ~ |x|^-a`` gives
    ``a = log(p1 / p2) / log(x2 / x1)``); an index up to 1.1 (Cauchy: 1) is taken as divergent,
    a light tail (normal, logistic) reads far above it.
    """
    if np.isfinite(dist.support[0]):
        return False
    p1, p2 = 1e-6, 1e-12
    # the standard form (loc 0, scale 1): a far location would swallow the tail's digits
    frozen = dist.frozen
    shapes, _, _ = frozen.dist._parse_args(*frozen.args, **frozen.kwds)
    with np.errstate(all="ignore"):
        x1, x2 = (float(v) for v in frozen.dist.ppf([p1, p2], *shapes))
    if not (np.isfinite(x1) and np.isfinite(x2)) or x2 >= x1 or x1 >= 0:
        return not np.isfinite(x2)
    return math.log(p1 / p2) / math.log(x2 / x1) <= 1.1
