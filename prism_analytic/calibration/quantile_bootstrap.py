"""Sample quantiles of many samples without drawing the samples: the order statistics of uniforms.

A sample quantile (``numpy.quantile``, linear method) of ``n`` draws is a linear interpolation
between two order statistics. The ``k``-th order statistic of ``n`` i.i.d. draws from a law with
quantile function ``F^-1`` is ``F^-1(U_(k))``, where ``U_(k)`` is the ``k``-th order statistic
of ``n`` uniforms, ``Beta(k, n + 1 - k)``; given ``U_(k) = u``, the next order statistic needed,
``U_(k + d)``, is ``u + (1 - u) Beta(d, n + 1 - k - d)`` (the other ``n - k`` uniforms are
uniform on ``(u, 1)``). So a few order statistics of each of ``B`` samples cost ``O(B)`` beta
draws, not ``B x n`` values: the law of the result is the same as sorting ``B`` samples of ``n``.

Two uses:

* :func:`bootstrap_quantiles`: the nonparametric bootstrap of a quantile statistic. A resample
  draws ``n`` indices uniformly from the sorted data, ``floor(n U)``, and ``floor`` keeps the
  order, so the resample's ``k``-th value is ``sorted[floor(n U_(k))]``: exactly the percentile
  bootstrap that :func:`scipy.stats.bootstrap` computes for a median or a quantile ratio, with
  memory ``O(n + B)`` instead of ``O(n B)`` (1e6 steps x 2,000 resamples is 16 GB there).
* :func:`sample_quantiles`: the sampling spread of a model law's quantiles at ``n`` steps.

``tests/calibration/test_quantile_bootstrap.py`` compares both with brute-force resampling (KS
two-sample).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

__all__ = [
    "MAX_RESAMPLES",
    "min_resamples",
    "check_resamples",
    "uniform_order_statistics",
    "sample_quantiles",
    "bootstrap_quantiles",
    "percentile_interval",
]

#: Most resamples accepted: the Monte Carlo error of a percentile end (~ 1/sqrt(B) of the
#: interval's scale) is then far below the interval itself, and B x (a few) values fit in
#: tens of MB; more only spends memory and time.
MAX_RESAMPLES = 1_000_000
#: Resamples that must lie beyond each end of a percentile interval for the end to be an
#: ordered value of the resamples rather than an extrapolation from the one or two extremes
#: (the same rule as :mod:`prism_analytic.validation.paired_ks`).
TAIL_RESAMPLES = 5


def min_resamples(confidence: float) -> int:
    """Fewest resamples whose percentile interval at ``confidence`` has 5 values beyond each end.

    >>> min_resamples(0.95)
    200
    """
    return math.ceil(round(2 * TAIL_RESAMPLES / (1.0 - confidence), 9))


def check_resamples(n_resamples: object, confidence: float, name: str = "n_resamples") -> int:
    """``n_resamples`` as an int, or a ValueError naming ``name`` and the allowed range.

    Parameters
    ----------
    n_resamples : int
        Bootstrap resamples asked for.
    confidence : float
        Level of the percentile interval they serve, in (0, 1).
    name : str
        What the caller calls the count (``--bootstrap`` on the command line).
    """
    lo = min_resamples(confidence)
    ok = isinstance(n_resamples, int | np.integer) and not isinstance(n_resamples, bool)
    if not ok or not lo <= int(n_resamples) <= MAX_RESAMPLES:
        raise ValueError(
            f"{name} must be an integer from {lo:,} to {MAX_RESAMPLES:,} (a {confidence:.0%}"
            f" percentile interval needs {TAIL_RESAMPLES} resamples beyond each end; more than"
            f" {MAX_RESAMPLES:,} no longer narrows its Monte Carlo error usefully), got"
            f" {n_resamples!r}"
        )
    return int(n_resamples)


def uniform_order_statistics(
    n: int, ranks: Sequence[int], size: int, rng: np.random.Generator
) -> np.ndarray:
    """Joint draws of the order statistics ``U_(k)``, ``k`` in ``ranks``, of ``n`` uniforms.

    Parameters
    ----------
    n : int
        Sample size (>= 1).
    ranks : sequence of int
        1-based ranks, strictly increasing, in ``[1, n]``.
    size : int
        Independent samples.
    rng : numpy.random.Generator

    Returns
    -------
    numpy.ndarray
        Shape ``(size, len(ranks))``; row ``b`` holds the ranks' order statistics of sample ``b``.
    """
    ks = np.asarray(ranks, dtype=np.int64)
    if ks.ndim != 1 or ks.size == 0 or ks[0] < 1 or ks[-1] > n or np.any(np.diff(ks) <= 0):
        raise ValueError(f"ranks must be strictly increasing integers in [1, {n}], got {ranks!r}")
    out = np.empty((size, ks.size))
    u = np.zeros(size)
    prev = 0
    for j, k in enumerate(ks):
        # the next order statistic among the n - prev uniforms left above u
        u = u + (1.0 - u) * rng.beta(k - prev, n + 1 - k, size)
        out[:, j] = u
        prev = k
    return out


def _quantile_ranks(n: int, levels: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower rank, upper rank, weight of the upper) of numpy's linear quantile, 1-based."""
    h = (n - 1) * np.asarray(levels, dtype=float)
    lo = np.floor(h).astype(np.int64)
    frac = h - lo
    hi = np.minimum(lo + 1, n - 1)
    return lo + 1, hi + 1, frac


def _quantiles_from(
    ppf: Callable[[np.ndarray], np.ndarray],
    n: int,
    levels: Sequence[float],
    size: int,
    rng: np.random.Generator,
) -> np.ndarray:
    lo, hi, frac = _quantile_ranks(n, levels)
    ranks = np.unique(np.concatenate([lo, hi]))
    u = uniform_order_statistics(n, ranks, size, rng)
    x = np.asarray(ppf(u), dtype=float).reshape(u.shape)
    col = {int(k): j for j, k in enumerate(ranks)}
    a = x[:, [col[int(k)] for k in lo]]
    b = x[:, [col[int(k)] for k in hi]]
    with np.errstate(invalid="ignore"):  # inf - inf: both ends beyond a grid, the level too
        q = a + frac * (b - a)
    return np.where(np.isnan(q) & (np.isinf(a) | np.isinf(b)), np.inf, q)


def sample_quantiles(
    ppf: Callable[[np.ndarray], np.ndarray],
    n: int,
    levels: Sequence[float],
    size: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """``numpy.quantile(sample, levels)`` of ``size`` samples of ``n`` draws from a law.

    Parameters
    ----------
    ppf : callable
        The law's quantile function, vectorised over an array of levels in (0, 1).
    n : int
        Draws per sample.
    levels : sequence of float
        Quantile levels in [0, 1].
    size : int
        Samples.
    rng : numpy.random.Generator

    Returns
    -------
    numpy.ndarray
        Shape ``(size, len(levels))``. Same law as drawing the samples and taking the quantiles.
    """
    return _quantiles_from(ppf, n, levels, size, rng)


def bootstrap_quantiles(
    data: np.ndarray, levels: Sequence[float], size: int, rng: np.random.Generator
) -> np.ndarray:
    """``numpy.quantile(resample, levels)`` of ``size`` bootstrap resamples of ``data``.

    Returns
    -------
    numpy.ndarray
        Shape ``(size, len(levels))``; the same law as resampling ``data`` with replacement.
    """
    x = np.sort(np.asarray(data, dtype=float))
    n = x.size

    def ppf(u: np.ndarray) -> np.ndarray:
        return x[np.minimum((n * u).astype(np.int64), n - 1)]

    return _quantiles_from(ppf, n, levels, size, rng)


def percentile_interval(
    replicates: np.ndarray, estimate: float, confidence: float
) -> tuple[float, float, bool]:
    """The percentile interval of bootstrap ``replicates``, made to contain ``estimate``.

    A percentile interval can miss the estimate it is about (a skewed or discrete
    bootstrap law: the median of a few values); where it does, the missed side is moved to
    the estimate, and the third value says so (the caller states it).

    Returns
    -------
    tuple of (float, float, bool)
        Low end, high end, and whether an end was moved to the estimate.
    """
    a = 1.0 - confidence
    lo, hi = (float(v) for v in np.percentile(replicates, [100 * a / 2, 100 * (1 - a / 2)]))
    moved = not lo <= estimate <= hi
    return min(lo, estimate), max(hi, estimate), moved
