"""Exact intervals of Poisson counts, shared by the fits (:mod:`.fit`, :mod:`.step_events`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

__all__ = ["garwood", "negbin_total_interval", "poisson_interval"]


def garwood(k: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Garwood) confidence interval of a Poisson mean from one count ``k``."""
    a = 1.0 - confidence
    lo = 0.0 if k == 0 else stats.chi2.ppf(a / 2, 2 * k) / 2
    hi = stats.chi2.ppf(1 - a / 2, 2 * k + 2) / 2
    return float(lo), float(hi)


def poisson_interval(mean: float, confidence: float = 0.95) -> tuple[int, int]:
    """Central ``confidence`` interval of a Poisson count with the given mean."""
    a = 1.0 - confidence
    return int(stats.poisson.ppf(a / 2, mean)), int(stats.poisson.ppf(1 - a / 2, mean))


def negbin_total_interval(
    means: Sequence[float], dispersion: float, confidence: float = 0.95
) -> tuple[int, int]:
    """Central interval of a total of independent gamma-Poisson (negative binomial) counts.

    Count ``r`` has mean ``means[r]`` and variance ``m + dispersion * m**2`` (its Poisson rate
    is multiplied by a gamma variable of mean 1 and variance ``dispersion``: events that
    cluster in runs). ``dispersion = 0`` is the Poisson case. The total's law is the exact
    convolution of the per-run probability mass functions.
    """
    if not (math.isfinite(dispersion) and dispersion >= 0):
        raise ValueError(f"dispersion must be finite and >= 0, got {dispersion!r}")
    m = np.asarray(means, dtype=float)
    if m.ndim != 1 or m.size == 0 or np.any(~np.isfinite(m)) or np.any(m < 0):
        raise ValueError("means must be a non-empty list of finite counts >= 0")
    if dispersion == 0:
        return poisson_interval(float(m.sum()), confidence)
    size = 1.0 / dispersion
    laws = [stats.nbinom(size, size / (size + mu)) for mu in m if mu > 0]
    if not laws:
        return 0, 0
    top = int(sum(law.ppf(1 - 1e-9) for law in laws)) + 1
    pmf = np.array([1.0])
    for law in laws:
        pmf = np.convolve(pmf, law.pmf(np.arange(top + 1)))[: top + 1]
    cdf = np.cumsum(pmf)
    a = 1.0 - confidence
    return int(np.searchsorted(cdf, a / 2)), int(np.searchsorted(cdf, 1 - a / 2))
