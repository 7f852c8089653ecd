"""Run-level clustering of stalls: a gamma-Poisson (negative binomial) per-run stall rate.

A bad allocation (a flaky node, a noisy neighbour) makes stalls cluster in the runs that
hold it. Run ``r`` then has the stall rate ``q * G_r`` with ``G_r`` gamma distributed, mean
1 and variance ``alpha`` (the *dispersion*); its count over ``n_r`` steps is negative
binomial with mean ``q n_r`` and variance ``q n_r + alpha (q n_r)^2``. ``alpha = 0`` is one
common Poisson rate.

``alpha`` is fitted by maximum likelihood over the runs' counts with a profile-likelihood
interval (``q`` profiled out). It is reported *not identified* (no number) when fewer than
two stalls or two runs exist (a single stall cannot cluster), and when the profile interval
is unbounded above. A user may then give it (``predict_events(..., stall_dispersion=)``,
``prism calibrate --stall-dispersion``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import optimize, special, stats

from .result import FittedParameter

__all__ = ["ALPHA_GRID", "fit_stall_dispersion", "negbin_loglike"]

#: Dispersions at which the profile likelihood is evaluated (0 added: the Poisson case).
ALPHA_GRID = np.geomspace(1e-3, 1e3, 121)
_KEY = "events.stall_dispersion"


def negbin_loglike(counts: np.ndarray, exposure: np.ndarray, q: float, alpha: float) -> float:
    """Log likelihood of per-run counts under rate ``q`` per step and dispersion ``alpha``."""
    mu = q * exposure
    if alpha == 0:
        return float(stats.poisson.logpmf(counts, mu).sum())
    size = 1.0 / alpha
    return float(stats.nbinom.logpmf(counts, size, size / (size + mu)).sum())


def _profile(counts: np.ndarray, exposure: np.ndarray, alpha: float) -> float:
    """Log likelihood at ``alpha`` maximised over the rate (on the logit scale)."""
    k, n = counts.sum(), exposure.sum()
    x0 = special.logit(min(max(k / n, 1e-12), 0.5))
    res = optimize.minimize_scalar(
        lambda z: -negbin_loglike(counts, exposure, float(special.expit(z)), alpha),
        bracket=(x0 - 1.0, x0 + 1.0),
    )
    return -float(res.fun)


def fit_stall_dispersion(
    counts: Sequence[int], exposure: Sequence[int], confidence: float = 0.95
) -> FittedParameter:
    """The dispersion of the per-run stall rate, or why it is not identified.

    Parameters
    ----------
    counts : sequence of int
        Stalls per run.
    exposure : sequence of int
        Steps per run.
    confidence : float
        Level of the profile-likelihood interval (chi-square, 1 degree of freedom).

    Returns
    -------
    FittedParameter
        ``events.stall_dispersion``: value, interval ``(low, high)`` and how it was found.
    """
    c = np.asarray(counts, dtype=float)
    e = np.asarray(exposure, dtype=float)
    k, runs = int(c.sum()), int(np.sum(e > 0))
    if k < 2 or runs < 2:
        return FittedParameter(
            _KEY,
            None,
            None,
            False,
            f"not identified: {k} stall(s) in {runs} run(s); clustering needs >= 2 stalls and"
            " >= 2 runs (give it as stall_dispersion / --stall-dispersion)",
        )
    grid = np.concatenate([[0.0], ALPHA_GRID])
    prof = np.array([_profile(c, e, float(a)) for a in grid])
    best = int(np.argmax(prof))
    cut = prof[best] - stats.chi2.ppf(confidence, 1) / 2
    # the interval's ends lie between grid points: take the neighbours outside (wider)
    idx = np.flatnonzero(prof >= cut)
    lo, hi = float(grid[max(idx[0] - 1, 0)]), float(grid[min(idx[-1] + 1, len(grid) - 1)])
    per_run = "/".join(str(int(x)) for x in c)
    lr0 = 2 * (prof[best] - prof[0])
    p0 = 0.5 * float(stats.chi2.sf(lr0, 1)) if lr0 > 0 else 1.0
    how = (
        f"per-run stalls {per_run} over {int(e.sum())} steps; maximum likelihood (gamma-Poisson,"
        f" rate profiled out) on a grid 0, 1e-3..1e3; profile-likelihood {confidence:.0%}"
        f" interval (grid neighbours outside); LR test of one common rate p = {p0:.2g}"
    )
    if hi >= ALPHA_GRID[-1]:
        return FittedParameter(
            _KEY,
            None,
            (lo, math.inf),
            False,
            how + "; not identified: the interval is unbounded above",
        )
    return FittedParameter(_KEY, float(grid[best]), (lo, hi), True, how)
