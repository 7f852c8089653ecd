"""Exact intervals of Poisson counts, shared by the fits (:mod:`.fit`, :mod:`.step_events`)."""

from __future__ import annotations

from scipy import stats

__all__ = ["garwood", "poisson_interval"]


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
