"""Mean and variance of the maximum of ``n`` i.i.d. copies of a law known in closed form.

A grid's own moment estimate (cell centres less a Sheppard-type correction) is only right when
the law spans many cells; a low-noise replica barrier spans one or two, and its standard
deviation came out tens of percent high. The exact moments need the law, not its grid: with
``E = -n log F(M)`` standard exponential for a continuous ``F``, the maximum is
``M = Q(exp(-E / n))`` and

    E[g(M)] = int_0^inf g(isf(-expm1(-e / n))) exp(-e) de,

one smooth integral for any ``n`` (the upper-tail quantile keeps ``1 - F`` ~ ``e / n`` exact
for ``n`` up to 1e12). The variance is taken about the mean, both relative to the law's
median, so nothing cancels at low CV. QUADPACK (``scipy.integrate.quad``) does the integral;
its estimate of the absolute error is checked, not trusted silently.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from scipy import integrate

from .base import Distribution

__all__ = ["iid_max_moments", "max_independent_moments"]

#: Requested relative accuracy of each integral (a std good to far better than 1e-6).
RTOL = 1e-11
#: exp(-E_MAX) underflows to 0: no part of the integral lies beyond.
E_MAX = 746.0


def _quad(f, a: float, b: float, epsabs: float) -> tuple[float, float]:
    """QUADPACK at :data:`RTOL`; its warnings are dropped, its error estimate is checked."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        val, err = integrate.quad(f, a, b, epsabs=epsabs, epsrel=RTOL, limit=400)
    return float(val), float(err)


def _integral(f, what: str, scale: float) -> float:
    """``int_0^E_MAX f``; its error must be below 1e-8 of the value or of ``scale``."""
    # the integrand is smooth in e except a logarithmic growth of the quantile at e -> 0,
    # which QUADPACK's extrapolation handles; beyond E_MAX the weight exp(-e) is below the
    # smallest double, so the range ends there
    total, err_total = 0.0, 0.0
    for a, b in ((0.0, 1.0), (1.0, 40.0), (40.0, E_MAX)):
        val, err = _quad(f, a, b, epsabs=0.0)
        total += val
        err_total += err
    if not (math.isfinite(total) and err_total <= 1e-8 * max(abs(total), scale, 1e-300)):
        raise ArithmeticError(f"{what}: quadrature did not converge ({total!r} +- {err_total!r})")
    return total


def iid_max_moments(law: Distribution, n: int) -> tuple[float, float] | None:
    """Exact (mean, variance) of the maximum of ``n`` copies of ``law``, memoised per law.

    See :func:`_iid_max_moments` (the laws of a job repeat across its replica groups and
    predict calls; one evaluation costs ~0.1 s).
    """
    key = law._key()
    if key[0] == "object":  # an id-based key is not stable past the law's lifetime
        return _iid_max_moments(law, n)
    try:
        return _cached(key, n, law)
    except TypeError:  # an unhashable key
        return _iid_max_moments(law, n)


_CACHE: dict[tuple[Any, Any], tuple[float, float] | None] = {}
_CACHE_SIZE = 256


def _cached(key: Any, n: int, law: Distribution) -> tuple[float, float] | None:
    full = (key, int(n))
    if full not in _CACHE:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[full] = _iid_max_moments(law, n)
    return _CACHE[full]


def _iid_max_moments(law: Distribution, n: int) -> tuple[float, float] | None:
    """Exact (mean, variance) of the maximum of ``n`` independent copies of ``law``.

    Parameters
    ----------
    law : Distribution
        A law with closed-form quantiles (``law.is_exact``) and a finite variance.
    n : int
        Number of copies (>= 1).

    Returns
    -------
    tuple of float or None
        ``(mean, variance)``; None when they cannot be had this way (a law without closed
        forms, infinite moments, atoms, or quadrature that does not converge), so that the
        caller falls back to its estimate and says so.

    Examples
    --------
    >>> from prism_analytic.distributions import normal
    >>> mean, var = iid_max_moments(normal(0.0, 1.0), 2)
    >>> round(mean, 12) == round(1 / math.sqrt(math.pi), 12), round(var, 12)
    (True, 0.681690113816)
    """
    if n == 1:
        return float(law.mean()), float(law.var())
    if not law.is_exact or law.tail_index <= 2 or not _continuous(law):
        return None
    if not _cheap_quantiles(law):  # a mixture inverts its CDF by bisection: integrate in x
        return _max_moments_in_x([(law, int(n))])
    centre = float(law.quantile(0.5))

    def x(e: float) -> float:
        # F(M) = exp(-e / n): the upper-tail quantile while 1 - F is the small side
        t = e / n
        q = law.isf(-math.expm1(-t)) if t < math.log(2.0) else law.quantile(math.exp(-t))
        return float(q) - centre

    try:
        with np.errstate(all="ignore"):
            # a mean near the median (a left-skewed law, n = 2) is judged on the law's scale
            sd = float(law.std())
            m1 = _integral(lambda e: x(e) * math.exp(-e), "mean of the maximum", sd)
            var = _integral(
                lambda e: (x(e) - m1) ** 2 * math.exp(-e), "variance of the maximum", 1e-2 * sd * sd
            )
    except (ArithmeticError, ValueError, OverflowError):
        return None
    return centre + m1, var


def _cheap_quantiles(law: Distribution) -> bool:
    """Closed-form quantiles (scipy's families and their affine maps), not a bisection."""
    from .base import Affine
    from .extremes import IIDMax
    from .parametric import ScipyDistribution

    if isinstance(law, Affine | IIDMax):  # quantiles from the parent's, in closed form
        return _cheap_quantiles(law.base if isinstance(law, Affine) else law.parent)
    return isinstance(law, ScipyDistribution)


def _continuous(law: Distribution) -> bool:
    """No atoms the quantile substitution would miss (it assumes a continuous CDF).

    Only laws known to be continuous qualify: scipy's continuous families, their positive
    affine maps and mixtures of them (a point mass or an empirical law has atoms).
    """
    from .base import Affine
    from .extremes import IIDMax
    from .mixture import Mixture
    from .parametric import ScipyDistribution

    if isinstance(law, ScipyDistribution):
        return float(law.std()) > 0.0
    if isinstance(law, Affine):
        return law.scale_factor > 0 and _continuous(law.base)
    if isinstance(law, IIDMax):
        return _continuous(law.parent)
    if isinstance(law, Mixture):
        return all(_continuous(c) for c in law.components)
    return False


def max_independent_moments(laws: list[Distribution]) -> tuple[float, float] | None:
    """:func:`_max_independent_moments`, memoised by the laws' keys (as their order)."""
    keys = tuple(sorted(repr(d._key()) for d in laws))
    if any(d._key()[0] == "object" for d in laws):
        return _max_independent_moments(laws)
    full = ("max", keys)
    if full not in _CACHE:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[full] = _max_independent_moments(laws)
    return _CACHE[full]


def _max_independent_moments(laws: list[Distribution]) -> tuple[float, float] | None:
    """Exact (mean, variance) of the maximum of independent closed-form laws, or None.

    With ``F_M = prod F_i`` and ``S_M = 1 - F_M`` (from the survival functions, so the upper
    tail keeps its digits), in units ``x = c + s t`` around the largest median ``c`` with the
    largest standard deviation ``s``:

        E[M] = c + s (int_0^inf S_M dt - int_-inf^0 F_M dt),
        Var M = s^2 int 2 |t - t_m| (S_M if t > t_m else F_M) dt.

    Parameters
    ----------
    laws : list of Distribution
        Continuous closed-form laws with finite variance.

    Returns
    -------
    tuple of float or None
        None when a law does not qualify or the quadrature does not converge.
    """
    if not laws or not all(_continuous(d) and d.tail_index > 2 for d in laws):
        return None
    return _max_moments_in_x([_copies(d) for d in laws])


def _copies(law: Distribution) -> tuple[Distribution, int]:
    """``(parent, n)`` for a maximum of ``n`` i.i.d. copies (its CDF is F^n), else ``(law, 1)``."""
    from .extremes import IIDMax

    if isinstance(law, IIDMax):
        parent, k = _copies(law.parent)
        return parent, k * law.n
    return law, 1


def _max_moments_in_x(parts: list[tuple[Distribution, int]]) -> tuple[float, float] | None:
    """Moments of the maximum of ``count`` copies of each law, integrated over x.

    Centred where the maximum lives (the largest single-copy level ``1 - 1/count``, at least
    the median) and scaled by the largest standard deviation. The integrands are evaluated on
    arrays (tanh-sinh quadrature), one call of each law's CDF per refinement level: a step
    graph takes hundreds of these maxima.
    """
    centre = max(float(d.isf(min(0.5, 1.0 / k))) for d, k in parts)
    scale = max(float(d.std()) for d, _ in parts)
    # the CDF has a kink where a support ends: integrate each side separately
    ends = {e for d, _ in parts for e in d.support if math.isfinite(e)}
    cuts = sorted((e - centre) / scale for e in ends)

    def log_cdf(t: np.ndarray) -> np.ndarray:
        x = centre + scale * t
        return sum(k * _log_cdf_array(d, x) for d, k in parts)

    def s_m(t: np.ndarray) -> np.ndarray:
        return -np.expm1(log_cdf(t))

    def f_m(t: np.ndarray) -> np.ndarray:
        return np.exp(log_cdf(t))

    try:
        with np.errstate(all="ignore"):
            upper = _integral_x(s_m, 0.0, math.inf, cuts)
            lower = _integral_x(f_m, -math.inf, 0.0, cuts)
            t_m = upper - lower
            var = 2.0 * (
                _integral_x(lambda t: (t - t_m) * s_m(t), t_m, math.inf, cuts)
                + _integral_x(lambda t: (t_m - t) * f_m(t), -math.inf, t_m, cuts)
            )
    except (ArithmeticError, ValueError, OverflowError):
        return None
    return centre + scale * t_m, scale * scale * var


def _integral_x(f, a: float, b: float, cuts: list[float]) -> float:
    """``int_a^b f`` in standardised units, split at ``cuts``; the error estimate is checked."""
    edges = [a, *(c for c in cuts if a < c < b), b]
    val, err = 0.0, 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        res = integrate.tanhsinh(f, lo, hi, atol=1e-13, rtol=RTOL, maxlevel=12)
        if not res.success:
            raise ArithmeticError(f"quadrature did not converge on [{lo!r}, {hi!r}]")
        val += float(res.integral)
        err += float(res.error)
    if not (math.isfinite(val) and err <= 1e-8 * max(abs(val), 1e-12)):
        raise ArithmeticError(f"quadrature did not converge ({val!r} +- {err!r})")
    return val


def _log_cdf_array(law: Distribution, x: np.ndarray) -> np.ndarray:
    """``log F(x)`` on an array: from the survival function where ``F > 1/2``."""
    sf = np.asarray(law.sf(x), dtype=float)
    upper = sf < 0.5
    out = np.empty_like(sf)
    out[upper] = np.log1p(-sf[upper])
    if not upper.all():
        cdf = np.asarray(law.cdf(x[~upper]), dtype=float)
        out[~upper] = np.log(cdf)  # log(0) = -inf: F_M is 0 there
    return out
