"""Noise floors of the slowest-of-n check against a held-out set of m GPUs.

The target compares a predicted continuous law H of the slowest of n GPUs with "subsampling
the other half". That phrase needs a definition, and each definition has its own floor:

* **with replacement** (``replace=True``, what :mod:`~prism_analytic.traces.gpu_variability`
  uses). The law of the max of n GPUs drawn with replacement from the m held-out values is
  ``G_m^n``, where ``G_m`` is their empirical CDF. It exists for every n. Its level just after
  the k-th smallest value is ``(k/m)^n``.
* **without replacement** (``replace=False``, n <= m). The max of n distinct GPUs of the m has
  ``P(max <= b_(k)) = C(k, n) / C(m, n)``.
* **disjoint groups** (:func:`disjoint_groups_floor`). The m GPUs are cut into
  ``k = m // n`` groups; the k group maxima are independent and scored by a one-sample KS.

The first two are computed exactly here, with no subsampling noise. Drawing S random subsets
instead adds a sampling error of its own: by the DKW inequality, at most
``sqrt(log(2 / alpha) / (2 S))`` with probability ``1 - alpha`` (0.043 at S = 1000 and
alpha = 0.05). The subsets share GPUs, so their maxima are dependent and take at most m
distinct values. A KS *test* p-value computed from them would be meaningless. Only the
distance is used.

Two floors for each definition:

* :func:`ks_lower_bound`, a proven bound. The plug-in law is a step function, and its largest
  jump is at the largest held-out value: ``1 - (1 - 1/m)^n`` with replacement, ``n / m``
  without. Any continuous H passes that point continuously, so it is at least half the jump
  away on one side. The bound is tight: a continuous CDF through the midpoint of every jump
  reaches it.
* :func:`perfect_max_ks`, Monte Carlo draws of the KS that the *true* law scores against a
  held-out set of m GPUs drawn from it. For a continuous per-GPU law F, ``u = F(x)`` maps the
  held-out values to uniforms and H = F^n to u^n. So this distribution is the same for every
  continuous F, and uniforms compute it exactly up to Monte Carlo error.
"""

from __future__ import annotations

import numpy as np
from scipy import special, stats

__all__ = [
    "disjoint_groups_floor",
    "ks_lower_bound",
    "max_ks",
    "perfect_max_ks",
    "plugin_max_levels",
]


def _check(m, n, replace):
    for name, v in (("m", m), ("n", n)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    if not replace and n > m:
        raise ValueError(f"n = {n} > m = {m}: without replacement needs n <= m")


def plugin_max_levels(m: int, n: int, *, replace: bool = True) -> np.ndarray:
    """The held-out plug-in law of the slowest of n GPUs at the held-out order statistics.

    Parameters
    ----------
    m : int
        Held-out GPUs.
    n : int
        Group size.
    replace : bool
        Subsets drawn with replacement (``(k/m)^n``) or without (``C(k,n)/C(m,n)``).

    Returns
    -------
    numpy.ndarray
        ``m + 1`` levels: entry k is the CDF just after the k-th smallest value (entry 0 is 0).
    """
    _check(m, n, replace)
    k = np.arange(m + 1)
    if replace:
        return (k / m) ** n
    # C(k, n) / C(m, n) through log-gamma; zero for k < n
    with np.errstate(divide="ignore", invalid="ignore"):
        log = (
            special.gammaln(k + 1)
            - special.gammaln(np.maximum(k - n, 0) + 1)
            - special.gammaln(m + 1)
            + special.gammaln(m - n + 1)
        )
    return np.where(k >= n, np.exp(log), 0.0)


def max_ks(max_cdf, held_out, n: int, *, replace: bool = True) -> float:
    """Exact KS distance between a continuous law of the max and the held-out plug-in law.

    Parameters
    ----------
    max_cdf : callable
        CDF of the predicted slowest of n.
    held_out : array_like
        Held-out per-GPU values (distinct).
    n : int
        Group size.
    replace : bool
        Plug-in law with or without replacement (see :func:`plugin_max_levels`).

    Returns
    -------
    float
        ``sup_x |max_cdf(x) - plug-in(x)|``, attained at the jumps on one side or the other.
    """
    b = np.sort(np.asarray(held_out, dtype=float))
    levels = plugin_max_levels(b.size, n, replace=replace)
    model = np.asarray(max_cdf(b), dtype=float)
    return float(max(np.max(np.abs(model - levels[1:])), np.max(np.abs(model - levels[:-1]))))


def ks_lower_bound(m: int, n: int, *, replace: bool = True) -> float:
    """Smallest KS any continuous law of the max can reach against the held-out plug-in law.

    Parameters
    ----------
    m : int
        Held-out GPUs (distinct values).
    n : int
        Group size.
    replace : bool
        Plug-in law with or without replacement.

    Returns
    -------
    float
        Half the largest jump: ``(1 - (1 - 1/m)^n) / 2`` with replacement, ``n / (2 m)``
        without.
    """
    levels = plugin_max_levels(m, n, replace=replace)
    return float(np.max(np.diff(levels)) / 2)


def perfect_max_ks(m: int, n: int, *, replace: bool = True, reps: int = 20000, seed=0):
    """KS scored by the true law against held-out sets of m GPUs drawn from it.

    Parameters
    ----------
    m : int
        Held-out GPUs.
    n : int
        Group size.
    replace : bool
        Plug-in law with or without replacement.
    reps : int
        Monte Carlo held-out sets (>= 10).
    seed : int
        Random seed.

    Returns
    -------
    numpy.ndarray
        ``reps`` KS values. They do not depend on the per-GPU law, as long as it is
        continuous (see the module docstring).
    """
    _check(m, n, replace)
    if isinstance(reps, bool) or not isinstance(reps, (int, np.integer)) or reps < 10:
        raise ValueError(f"reps must be an integer >= 10, got {reps!r}")
    levels = plugin_max_levels(m, n, replace=replace)
    rng = np.random.default_rng(seed)
    out = np.empty(reps)
    for start in range(0, reps, 2000):
        u = np.sort(rng.random((min(2000, reps - start), m)), axis=1) ** n
        out[start : start + u.shape[0]] = np.maximum(
            np.abs(u - levels[1:]).max(axis=1), np.abs(u - levels[:-1]).max(axis=1)
        )
    return out


def disjoint_groups_floor(m: int, n: int, limit: float = 0.1) -> dict:
    """Floors when the held-out GPUs are cut into disjoint groups of n (independent maxima).

    Parameters
    ----------
    m : int
        Held-out GPUs.
    n : int
        Group size.
    limit : float
        The KS target.

    Returns
    -------
    dict
        ``groups`` (k = m // n), ``lower_bound`` (``1 / (2 k)``: the nearest any continuous
        CDF gets to an empirical CDF of k points), ``perfect_median`` and
        ``perfect_p_le_limit`` (median of the true law's one-sample KS against k independent
        maxima, and the chance it is <= ``limit``, both exact from ``scipy.stats.kstwo``).
        When k = 0 all are None.
    """
    _check(m, n, True)
    k = m // n
    if k == 0:
        return {
            "groups": 0,
            "lower_bound": None,
            "perfect_median": None,
            "perfect_p_le_limit": None,
        }
    law = stats.kstwo(k)
    return {
        "groups": k,
        "lower_bound": 1 / (2 * k),
        "perfect_median": float(law.median()),
        "perfect_p_le_limit": float(law.cdf(limit)),
    }
