"""The gamma CDF, survival function and quantiles at very large shapes (sums of many gammas).

Why not scipy: ``scipy.special.gammainc(a, x)`` (cephes ``igam``) uses Temme's uniform
expansion only while ``|x - a| / a < 4.5 / sqrt(a)`` (four and a half standard deviations) and
otherwise a power series or continued fraction capped at 2,000 terms. At ``a = 4e6`` the series
needs about 10,000 terms at 4.75 standard deviations below the mean and stops early: its
``P(a, x)`` is 0.44% low there, and at ``a = 4e9`` it is 7x low (4.4e-7 against 3.19e-6), so
``gammaincinv`` and every bracket certified with it can miss the true quantile.

Here the same uniform expansion is used everywhere (DLMF 8.12.3-8.12.8; Temme, *Special
functions*, 1996, section 11.2):

``P(a, x) = erfc(-eta sqrt(a / 2)) / 2 - R``, ``Q(a, x) = erfc(eta sqrt(a / 2)) / 2 + R``,
``R = exp(-a eta^2 / 2) / sqrt(2 pi a) (c0(eta) + c1(eta) / a + ...)``,

with ``lambda = x / a``, ``eta^2 / 2 = lambda - 1 - log(lambda)`` and ``eta`` of the sign of
``lambda - 1``. Keeping ``c0`` and ``c1`` leaves a relative error of order ``c2 / (c0 a^2)``
(about 1e-12 at the smallest shape used, :data:`LARGE_SHAPE`) in ``R``, which is itself a small
part of ``P`` or ``Q`` in both tails. The cancellations in ``c0`` and ``c1`` near ``eta = 0``
are avoided by their Taylor series (coefficients as in cephes ``igam.h``), and
``lambda - 1 - log(lambda)`` by its series for small ``lambda - 1``.

How it was checked (``tests/distributions/test_gamma_large.py``,
``validation/reliability_numerics.py``):
against Kummer's series ``P(a, x) = x^a e^-x / Gamma(a + 1) sum_k x^k / ((a+1)...(a+k))``
summed to convergence in mpmath at 40 digits (all terms positive, no cancellation), at shapes
1e5 to 4e9 and 8 standard deviations either side: relative error below 1e-13.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

__all__ = ["LARGE_SHAPE", "gamma_cdf_sf", "gamma_quantile"]

#: From this shape on, gamma laws use this module instead of scipy's ``gammainc``.
LARGE_SHAPE = 1e5

# Taylor coefficients of c0(eta) and c1(eta) about eta = 0 (cephes igam.h, rows d[0], d[1]).
_C0 = (
    -1.0 / 3.0,
    1.0 / 12.0,
    -2.0 / 135.0,
    1.0 / 864.0,
    1.0 / 2835.0,
    -139.0 / 777600.0,
    1.0 / 25515.0,
)
_C1 = (-1.0 / 540.0, -1.0 / 288.0, 1.0 / 378.0, -77.0 / 77760.0, 8.0 / 38880.0)
_SERIES_ETA = 0.01  # below |eta| the series (truncation error < 1e-16), above it closed forms


def _split(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Veltkamp split: ``v = hi + lo`` with 26-bit halves (products of halves are exact)."""
    c = 134217729.0 * v  # 2^27 + 1
    hi = c - (c - v)
    return hi, v - hi


def _two_product(a: float, b: float) -> tuple[float, float]:
    """``p + e = a * b`` exactly (Dekker), so the mean ``a * scale`` carries no rounding."""
    p = a * b
    ah, al = _split(np.float64(a))
    bh, bl = _split(np.float64(b))
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return float(p), float(e)


def _half_eta_sq(mu: np.ndarray) -> np.ndarray:
    """``mu - log1p(mu)`` (= eta^2 / 2) without cancellation for small ``mu``."""
    with np.errstate(invalid="ignore"):
        out = np.where(np.isposinf(mu), np.inf, mu - np.log1p(mu))
    small = np.abs(mu) < 0.1
    if small.any():
        m = mu[small]
        term = m * m
        acc = term / 2.0
        for k in range(3, 40):  # |mu| < 0.1: 0.1^40 / 40 is far below float precision
            term = -term * m
            acc = acc + term / k
        out[small] = acc
    return out


def _poly(coeffs: tuple[float, ...], x: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x)
    for c in reversed(coeffs):
        out = out * x + c
    return out


def _c0_c1(mu: np.ndarray, eta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The expansion's first two coefficient functions (DLMF 8.12.9-8.12.10)."""
    small = np.abs(eta) < _SERIES_ETA
    with np.errstate(divide="ignore", invalid="ignore"):
        c0 = 1.0 / mu - 1.0 / eta
        c1 = 1.0 / eta**3 - 1.0 / mu**3 - 1.0 / mu**2 - 1.0 / (12.0 * mu)
    c0 = np.where(small, _poly(_C0, eta), c0)
    c1 = np.where(small, _poly(_C1, eta), c1)
    return c0, c1


def gamma_cdf_sf(
    x: np.ndarray, a: float, loc: float = 0.0, scale: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """``P`` and ``Q`` (CDF and survival function) of Gamma(a, loc, scale) at ``x``.

    Parameters
    ----------
    x : ndarray
        Points.
    a : float
        Shape, at least :data:`LARGE_SHAPE` (smaller shapes: use scipy).
    loc, scale : float
        Location and scale of the law.

    Returns
    -------
    (ndarray, ndarray)
        ``P(X <= x)`` and ``P(X > x)``, each computed directly (no ``1 - p``).
    """
    if not a >= LARGE_SHAPE:
        raise ValueError(f"a must be at least {LARGE_SHAPE:g} for this expansion, got {a!r}")
    x = np.asarray(x, dtype=float)
    mean_hi, mean_lo = _two_product(a, scale)  # the mean a * scale, exactly as hi + lo
    d = ((x - loc) - mean_hi) - mean_lo  # x - loc - mean: near the mean, no cancellation
    mu = d / (a * scale)  # lambda - 1
    below = x - loc <= 0
    mu = np.where(below, -0.5, mu)  # placeholder, overwritten below
    with np.errstate(all="ignore"):  # x = inf: eta = inf, r = 0, P = 1
        h = _half_eta_sq(mu)
        eta = np.sign(mu) * np.sqrt(2.0 * h)
        c0, c1 = _c0_c1(mu, eta)
        r = np.exp(-a * h) / math.sqrt(2.0 * math.pi * a) * (c0 + c1 / a)
        r = np.where(np.isfinite(r), r, 0.0)
        w = eta * math.sqrt(a / 2.0)
        p = 0.5 * special.erfc(-w) - r
        q = 0.5 * special.erfc(w) + r
    p = np.where(below, 0.0, np.clip(p, 0.0, 1.0))
    q = np.where(below, 1.0, np.clip(q, 0.0, 1.0))
    return p, q


def gamma_quantile(
    levels: np.ndarray, a: float, loc: float = 0.0, scale: float = 1.0, *, upper: bool = False
) -> np.ndarray:
    """Quantiles (``upper=False``: P = levels) or upper quantiles (Q = levels) of Gamma(a).

    Wilson-Hilferty gives the start; Newton steps on ``log P`` (or ``log Q``) with
    :func:`gamma_cdf_sf` make it exact to the precision of that function (callers certify the
    result with the CDF, see :func:`.base._verified_bracket`).
    """
    levels = np.asarray(levels, dtype=float)
    z = stats.norm.isf(levels) if upper else stats.norm.ppf(levels)
    with np.errstate(all="ignore"):
        t = np.maximum(1.0 - 1.0 / (9.0 * a) + z / (3.0 * math.sqrt(a)), 1e-3)
        x = a * t**3  # in units of scale, from 0
        for _ in range(6):
            p, q = gamma_cdf_sf(loc + scale * x, a, loc, scale)
            f = _density(x, a)  # density of Gamma(a, 1) at x
            if upper:
                step = -(np.log(levels) - np.log(q)) * q / f
            else:
                step = (np.log(levels) - np.log(p)) * p / f
            x = np.where(np.isfinite(step), np.maximum(x + step, x / 2.0), x)
    out = loc + scale * x
    out = np.where(levels == (1.0 if upper else 0.0), loc, out)
    return np.where(levels == (0.0 if upper else 1.0), np.inf, out)


def _density(x: np.ndarray, a: float) -> np.ndarray:
    """Gamma(a, 1) density from Stirling's series (only steers Newton; no guarantee rests on it)."""
    mu = x / a - 1.0
    h = _half_eta_sq(mu)
    return np.exp(-a * h) * math.sqrt(a / (2.0 * math.pi)) / x * (1.0 - 1.0 / (12.0 * a))
