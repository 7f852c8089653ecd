"""Importance-sampled tail pools: the slowest of n copies of a multi-op replica body.

The largest of ``n`` i.i.d. copies lives where one copy's survival function is about ``1/n``
(1e-9 at a billion ranks), far beyond what a plain pool of a million copies resolves: a plain
pool returns its own maximum for every sample, a law with no spread at the wrong place.

A :class:`TailPool` instead draws copies by **importance sampling over the uniforms** that drive
the copy (one survival probability per op, speed factor or nested group, in a fixed order). The
proposal is a defensive mixture:

* with weight :data:`PLAIN` the plain law (uniform on the cube), which keeps every weight below
  ``1 / PLAIN`` (bounded weights make the error estimate trustworthy);
* with weight :data:`JUMP` one coordinate, chosen at random, has its survival probability
  log-uniform on ``[1e-13, 1]`` (one op far in its tail: the big-jump route of heavy tails);
* with weight :data:`SHIFT` every coordinate is shifted by ``mu`` in normal-score space
  (``z = Phi^-1(1 - v) ~ N(mu, 1)``), for a geometric grid of ``mu`` (a collective excursion:
  the route of light-tailed sums).

The mixture density is known in closed form, so each draw gets its exact likelihood ratio and
the weighted, self-normalised empirical law estimates the copy's survival function everywhere
from the bulk down to about 1e-13. The maximum of ``n`` copies is then sampled by inversion at
the single-copy survival level ``1 - (1 - V)^(1/n)``.

Its error is estimated, not guaranteed: :meth:`TailPool.ks_error` turns the pool's pointwise
standard errors (a :data:`Z_BAND`-sigma band, plus the gap to the next pool point and a
rule-of-three bound on the mass above the pool's top) into a KS distance on the law of the
maximum of ``n`` copies via ``|a^n - b^n| <= n |a - b| max(a, b)^(n - 1)``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import cluster, special

__all__ = [
    "TailPool",
    "ColumnSource",
    "build_tail_pool",
    "is_rows",
    "PLAIN",
    "JUMP",
    "SHIFT",
    "Z_BAND",
    "MAX_IS_DIM",
]

PLAIN, JUMP, SHIFT = 0.25, 0.35, 0.40
#: Decades of survival probability the one-coordinate jump covers (down to 1e-13).
JUMP_DECADES = 13.0
#: Number of collective shifts, geometric from 0.5 / sqrt(dim) to :data:`MAX_SHIFT`.
N_SHIFTS = 10
MAX_SHIFT = 6.5
#: Width of the pointwise band, in standard errors, used for the KS error estimate.
Z_BAND = 3.0
#: Rows evaluated at once (times the dimension), to bound memory.
CHUNK_CELLS = 2**22
TINY = 1e-300
#: Copies with more random inputs than this are pooled plainly (no importance sampling).
MAX_IS_DIM = 1024
PLAIN_CHUNK = 8192
#: Cross-entropy adaptation: elite fraction, most stages, most clusters per stage.
ELITE = 0.05
MAX_STAGES = 12
MAX_CLUSTERS = 3
#: Survival levels, in units of the target, that get their own components at the end.
FINAL_LEVELS = (1.0, 30.0, 1000.0)


class ColumnSource:
    """Hands out the columns of a matrix of survival probabilities, one per random input."""

    def __init__(self, columns: np.ndarray | None, size: int) -> None:
        self.columns = columns
        self.size = size
        self.used = 0

    def take(self) -> np.ndarray:
        """The next column (or, when counting, a column of 0.5s)."""
        j = self.used
        self.used += 1
        if self.columns is None:
            return np.full(self.size, 0.5)
        if j >= self.columns.shape[1]:
            raise RuntimeError("replica body consumed more random inputs than counted")
        return self.columns[:, j]


def is_rows(size: int, dim: int, budget: int = 2**25, min_size: int = 2**14) -> int:
    """Copies a pool of requested ``size`` evaluates (adaptation stages included)."""
    if dim > MAX_IS_DIM:
        return size
    rows = int(min(size, max(min_size, budget // dim)))
    return rows + MAX_STAGES * max(2000, rows // 16)


def _isotropic(dim: int) -> np.ndarray:
    """Equal shifts of every coordinate, geometric from 0.5 / sqrt(dim) to MAX_SHIFT."""
    return np.geomspace(0.5 / np.sqrt(dim), MAX_SHIFT, N_SHIFTS)[:, None] * np.ones((1, dim))


def _draw(
    size: int, mus: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw ``size`` rows from the proposal with shift means ``mus`` (K x dim).

    Returns the survival probabilities V, their normal scores Z and the likelihood ratios.
    """
    k, dim = mus.shape
    comp = rng.choice(3, size=size, p=[PLAIN, JUMP, SHIFT])
    v = 1.0 - rng.random((size, dim))  # in (0, 1]
    jump = np.flatnonzero(comp == 1)
    cols = rng.integers(dim, size=jump.size)
    v[jump, cols] = 10.0 ** (-JUMP_DECADES * rng.random(jump.size))
    shift = np.flatnonzero(comp == 2)
    which = rng.integers(k, size=shift.size)
    v[shift] = special.ndtr(-(rng.standard_normal((shift.size, dim)) + mus[which]))
    np.maximum(v, TINY, out=v)
    z = -special.ndtri(v)
    return v, z, np.exp(-_log_density(v, z, mus))


def _log_density(v: np.ndarray, z: np.ndarray, mus: np.ndarray) -> np.ndarray:
    """Log density of the proposal mixture (the reference law is uniform: density 1)."""
    size, dim = v.shape
    in_range = v >= 10.0**-JUMP_DECADES
    with np.errstate(divide="ignore"):
        g_jump = np.where(in_range, 1.0 / (v * JUMP_DECADES * np.log(10.0)), 0.0).sum(axis=1)
        terms = [np.full(size, np.log(PLAIN)), np.log(JUMP / dim) + np.log(g_jump)]
    shift = z @ mus.T - 0.5 * (mus * mus).sum(axis=1)[None, :]
    terms.extend((np.log(SHIFT / mus.shape[0]) + shift).T)
    return special.logsumexp(np.vstack(terms), axis=0)


def _evaluate_rows(
    evaluate: Callable[[ColumnSource], np.ndarray],
    size: int,
    mus: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Durations, normal scores and weights of ``size`` proposal draws, in chunks."""
    dim = mus.shape[1]
    chunk = max(1, CHUNK_CELLS // dim)
    xs, zs, ws = [], [], []
    for start in range(0, size, chunk):
        m = min(chunk, size - start)
        v, z, w = _draw(m, mus, rng)
        xs.append(np.asarray(evaluate(ColumnSource(v, m)), dtype=float))
        zs.append(z)
        ws.append(w)
    return np.concatenate(xs), np.concatenate(zs), np.concatenate(ws)


def _level_at(x: np.ndarray, w: np.ndarray, surv: float) -> float:
    """Smallest draw whose estimated survival probability is <= ``surv``."""
    order = np.argsort(x)
    above = np.cumsum(w[order][::-1])[::-1] / w.sum()  # P(X >= x_i)
    i = np.searchsorted(-above, -surv, side="left")
    return float(x[order][min(i, x.size - 1)])


def _cluster_means(z: np.ndarray, w: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """Weighted means of a few k-means clusters of normal scores (one per route to the tail)."""
    k = int(min(MAX_CLUSTERS, max(1, z.shape[0] // 50)))
    labels = np.zeros(z.shape[0], dtype=int)
    if k > 1:
        with warnings.catch_warnings():  # an empty cluster is harmless here
            warnings.simplefilter("ignore")
            _, labels = cluster.vq.kmeans2(z, k, seed=rng, minit="++")
    return [
        (w[labels == c, None] * z[labels == c]).sum(axis=0) / w[labels == c].sum()
        for c in range(k)
        if w[labels == c].sum() > 0
    ]


def _adapt(
    evaluate: Callable[[ColumnSource], np.ndarray],
    dim: int,
    target: float,
    stage_size: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Cross-entropy stages: shift means that reach the copy's survival level ``target``.

    Each stage draws from the current mixture and takes as its level the lower of the top
    :data:`ELITE` fraction of draws and the estimated ``target`` quantile; the weighted mean
    normal scores of a few k-means clusters of the draws above it (a fork has one route per
    branch) become new shift components. Once the level is the target one, components are
    added for the levels between ``target`` and ``1000 * target`` (the body of the maximum)
    and adaptation stops.
    """
    mus = _isotropic(dim)
    for stage in range(MAX_STAGES):
        x, z, w = _evaluate_rows(evaluate, stage_size, mus, rng)
        x_target = _level_at(x, w, target)
        level = min(float(np.quantile(x, 1 - ELITE)), x_target)
        done = level >= x_target or stage == MAX_STAGES - 1
        levels = [level] if not done else [_level_at(x, w, target * f) for f in FINAL_LEVELS]
        for lv in levels:
            elite = x >= lv
            if elite.sum() >= 2 and w[elite].sum() > 0:
                mus = np.vstack([mus, *_cluster_means(z[elite], w[elite], rng)])
        if done:
            break
    return mus


@dataclass(frozen=True)
class TailPool:
    """A weighted sample of one copy's duration that resolves its upper tail.

    Attributes
    ----------
    values : numpy.ndarray
        Sorted durations.
    surv : numpy.ndarray
        Estimated P(copy > values[i]) (self-normalised importance weights).
    gap : numpy.ndarray
        Weight of the next point up (the estimate's step at values[i]).
    se : numpy.ndarray
        Standard error of ``surv`` (delta method for the self-normalised estimator).
    top_mass : float
        Rule-of-three estimate of the mass above the largest value (95%).
    dim : int
        Random inputs per copy.
    """

    values: np.ndarray
    surv: np.ndarray
    gap: np.ndarray
    se: np.ndarray
    top_mass: float
    dim: int

    @property
    def size(self) -> int:
        """Number of draws in the pool."""
        return int(self.values.size)

    def ks_error(self, count: int) -> float:
        """Estimated KS distance between the sampled and the true law of the max of ``count``."""
        delta = Z_BAND * self.se + self.gap
        low = np.maximum(self.surv - delta, 0.0)
        body = count * delta * np.exp(-(count - 1) * low)
        top = -np.expm1(-count * self.top_mass)
        return float(min(1.0, max(float(body.max(initial=0.0)), top)))


def build_tail_pool(
    evaluate: Callable[[ColumnSource], np.ndarray],
    size: int,
    rng: np.random.Generator,
    *,
    dim: int,
    plain: Callable[[int], np.ndarray] | None = None,
    target: float = 1e-12,
    budget: int = 2**25,
    min_size: int = 2**14,
) -> TailPool:
    """Draw a :class:`TailPool` of the copy that ``evaluate`` computes from a column source.

    Parameters
    ----------
    evaluate : callable
        ``evaluate(source)`` returns ``source.size`` durations, taking one column per random
        input in a fixed order.
    size : int
        Requested pool size; reduced so that ``size * dim <= budget`` (at least ``min_size``).
    rng : numpy.random.Generator
    dim : int
        Random inputs per copy (columns ``evaluate`` takes).
    plain : callable, optional
        ``plain(m)`` -> ``m`` copies drawn the ordinary way. Used instead of importance sampling
        when ``dim > MAX_IS_DIM`` (a proposal over that many inputs is not worth its cost); the
        pool's error estimate then shows how far it resolves the tail.
    target : float
        Smallest survival probability of one copy the pool must resolve (``1e-3 / n``).
    """
    if dim > MAX_IS_DIM and plain is not None:
        x = np.concatenate([plain(min(PLAIN_CHUNK, size - i)) for i in range(0, size, PLAIN_CHUNK)])
        w = np.ones(x.size)
    else:
        size = int(min(size, max(min_size, budget // dim)))
        mus = _adapt(evaluate, dim, target, max(2000, size // 16), rng)
        x, _, w = _evaluate_rows(evaluate, size, mus, rng)
    order = np.argsort(x, kind="stable")
    x, w = x[order], w[order]
    total = w.sum()
    # survival strictly above each point: mass of the points after it
    above = np.concatenate((np.cumsum(w[::-1])[::-1][1:], [0.0])) / total
    above_sq = np.concatenate((np.cumsum((w * w)[::-1])[::-1][1:], [0.0])) / total**2
    all_sq = float((w * w).sum()) / total**2
    var = above_sq * (1 - above) ** 2 + (all_sq - above_sq) * above**2
    gap = np.concatenate((w[1:], [0.0])) / total
    top = min(100, x.size)
    top_mass = 3.0 * float(w[-top:].max()) / total
    return TailPool(x, above, gap, np.sqrt(np.maximum(var, 0.0)), top_mass, dim)
