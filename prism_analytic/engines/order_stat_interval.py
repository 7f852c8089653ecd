"""Distribution-free confidence intervals for a quantile from the order statistics of a sample.

With ``B ~ Binomial(n, q)`` the number of draws at or below the true q-quantile ``xi``, the
interval ``[X_(l), X_(u)]`` (1-based order statistics) covers ``xi`` unless ``B < l`` or
``B >= u``; taking ``l`` the largest index with ``P(B < l) <= alpha / 2`` and ``u`` the
smallest with ``P(B >= u) <= alpha / 2`` gives coverage at least ``1 - alpha`` for every law
(atoms make it only more conservative) and every sample size. This is the two-sided interval
of :func:`scipy.stats.quantile_test`, computed on an already sorted sample. When no order
statistic is far enough out (``l < 1`` or ``u > n``: a small sample or an extreme level), the
sample cannot bound the quantile on that side and the end is ``-inf`` or ``+inf``: clipping
it to the sample's extreme would drop the coverage (to ``1 - q^n`` for the upper end).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

__all__ = ["order_statistic_indices", "order_statistic_interval"]


def _check(n: int, q: float, confidence: float) -> None:
    if not (isinstance(n, int | np.integer) and n >= 1):
        raise ValueError(f"sample size must be an integer >= 1, got {n!r}")
    if not (isinstance(q, float | int | np.floating) and 0.0 <= q <= 1.0):
        raise ValueError(f"quantile level q must lie in [0, 1], got {q!r}")
    if not (isinstance(confidence, float | int | np.floating) and 0.0 < confidence < 1.0):
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")


def order_statistic_indices(n: int, q: float, confidence: float = 0.95) -> tuple[int, int]:
    """0-based indices ``(low, high)`` of the interval's ends in a sorted sample of size ``n``.

    Parameters
    ----------
    n : int
        Sample size.
    q : float
        Quantile level in [0, 1].
    confidence : float
        Two-sided confidence level in (0, 1); each side fails with probability at most
        ``(1 - confidence) / 2``.

    Returns
    -------
    tuple of int
        ``low`` is -1 when no order statistic bounds the quantile from below, ``high`` is
        ``n`` when none bounds it from above (the ends are then infinite).
    """
    _check(n, q, confidence)
    half = (1.0 - confidence) / 2.0
    law = stats.binom(int(n), float(q))
    # l = ppf(half): the smallest k with P(B <= k) >= half, so P(B < l) < half (scipy's rule)
    low = int(law.ppf(half)) - 1
    # u - 1 = isf(half): the smallest k with P(B > k) <= half
    high = int(law.isf(half))
    return max(low, -1), min(high, int(n))


def order_statistic_interval(
    sorted_samples: np.ndarray, q: float, confidence: float = 0.95
) -> tuple[float, float]:
    """A distribution-free ``confidence`` interval for the q-quantile of the sampled law.

    Parameters
    ----------
    sorted_samples : ndarray
        The sample, sorted ascending (not checked: sorting is the caller's, once).
    q : float
        Quantile level in [0, 1].
    confidence : float
        Two-sided confidence level in (0, 1).

    Returns
    -------
    tuple of float
        ``(low, high)``; ``-inf`` / ``+inf`` where the sample cannot bound the quantile.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.sort(np.random.default_rng(1).exponential(size=20))
    >>> low, high = order_statistic_interval(x, 0.99)
    >>> bool(np.isfinite(low)), high
    (True, inf)
    """
    x = np.asarray(sorted_samples, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"sorted_samples must be a non-empty 1-d array, got shape {x.shape}")
    lo, hi = order_statistic_indices(x.size, q, confidence)
    low = float(x[lo]) if lo >= 0 else -math.inf
    high = float(x[hi]) if hi < x.size else math.inf
    return low, high
