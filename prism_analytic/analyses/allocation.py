"""Step-time moments given the job's persistent allocation, as a law over allocations.

A job's GPUs are allocated once: each replica's speed factor ``s_r`` is drawn once and kept for
every step, while the temporal noise of each step is fresh. Given the allocation
the steps are i.i.d. with mean ``mu(a)`` and variance ``v(a)``; across allocations ``mu(a)``
varies, mostly through the slowest replicas. :func:`allocation_moments` computes the law of
``(mu(a), v(a))`` by conditioning on the **slowest replica's factor** ``s*`` (its law is exact,
``H(s) = prod_p G_p(s)^{n_p}`` over the healthy and slow populations) and replacing the other
replicas by their conditional mean log-CDF given ``S <= s*``:

``log P(barrier <= t | s*) = log F_B(t / s*) + sum_p (n_p - pi_p) E[log F_B(t / S_p) | S_p <= s*]``

with ``pi_p`` the probability that the slowest replica is of population ``p``. This ignores the
allocation-to-allocation spread of the other replicas' product (a law-of-large-numbers step);
:func:`simulate_runs` in :mod:`.runtime` draws whole allocations and measures the error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from .decompose import StepParts

__all__ = ["AllocationMoments", "allocation_moments", "barrier_grid"]


@dataclass(frozen=True)
class AllocationMoments:
    """Per-step moments over a quadrature of allocations.

    Attributes
    ----------
    weights : ndarray
        Probability of each quadrature cell (sums to 1).
    mean, var : ndarray
        Step mean and variance given the cell's allocation (seconds, seconds squared).
    slowest : ndarray
        The slowest replica's factor at each cell (``nan`` when the job has no speed law).
    """

    weights: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    slowest: np.ndarray


def barrier_grid(parts: StepParts, s_lo: float, s_hi: float, cells: int = 1500) -> np.ndarray:
    """Times covering the barrier for slowest factors in ``[s_lo, s_hi]``."""
    b = parts.body
    # a level inside a grid's unresolved tail mass has no quantile (NaN): take the first
    # resolved one of a few ever less extreme levels
    lo_b = next(v for q in (1e-9, 1e-7, 1e-5) if np.isfinite(v := float(b.quantile(q))))
    hi_b = next(v for q in (1e-12, 1e-10, 1e-8) if np.isfinite(v := float(b.isf(q))))
    return np.linspace(lo_b * s_lo, hi_b * s_hi, cells)


def _moments_from_cdf(t: np.ndarray, cdf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of laws on ``[t0, t_end]`` from their CDFs on ``t`` (rows)."""
    # E[X] = t0 + int (1 - F); E[X^2] = t0^2 + int 2 x (1 - F) dx (trapezoid rule)
    sf = 1.0 - cdf
    dt = np.diff(t)
    m1 = t[0] + np.sum(0.5 * (sf[..., 1:] + sf[..., :-1]) * dt, axis=-1)
    g = 2 * t * sf
    m2 = t[0] ** 2 + np.sum(0.5 * (g[..., 1:] + g[..., :-1]) * dt, axis=-1)
    return m1, np.maximum(m2 - m1**2, 0.0)


def allocation_moments(
    parts: StepParts, cells: int = 400, t_cells: int = 1500
) -> AllocationMoments:
    """The law of the per-step mean and variance over persistent allocations.

    Parameters
    ----------
    parts : StepParts
        The decomposed step (:func:`~.decompose.decompose`).
    cells : int
        Quadrature cells for the slowest replica's factor.
    t_cells : int
        Time points for the barrier CDF.
    """
    tail_m, tail_v = float(parts.tail.mean()), float(parts.tail.var())
    n, (k, f) = parts.n, parts.slow
    if parts.speed is None:
        speeds = np.r_[np.ones(n - k), np.full(k, f)]
        t = barrier_grid(parts, float(speeds.min()), float(speeds.max()), t_cells)
        m, v = _moments_from_cdf(t, parts.barrier_cdf(t, speeds))
        return AllocationMoments(
            np.ones(1), np.array([m + tail_m]), np.array([v + tail_v]), np.array([np.nan])
        )
    atoms = _speed_atoms(parts.speed)
    if atoms is not None:
        return _discrete_allocations(parts, atoms, t_cells, tail_m, tail_v)
    g = parts.speed
    pops = [(n - k, 1.0)] + ([(k, f)] if k else [])

    def cdf_p(s: np.ndarray, scale: float) -> np.ndarray:
        return np.asarray(g.cdf(s / scale), dtype=float)

    # the slowest factor lives in the upper tail of the populations: its law H on edges
    lo = min(float(g.quantile(1e-9)) * sc for _, sc in pops)
    hi = max(float(g.isf(1e-12)) * sc for _, sc in pops)
    edges = np.linspace(lo, hi, 4 * cells + 1)
    log_h = sum(c * np.log(np.maximum(cdf_p(edges, sc), 1e-300)) for c, sc in pops)
    h = np.exp(log_h)
    # keep the range where the slowest factor actually lies, then refine
    keep = np.flatnonzero((h > 1e-12) & (h < 1 - 1e-12))
    s_lo = edges[max(keep[0] - 1, 0)] if keep.size else lo
    s_hi = edges[min(keep[-1] + 1, edges.size - 1)] if keep.size else hi
    star = np.linspace(s_lo, s_hi, cells + 1)
    log_h = sum(c * np.log(np.maximum(cdf_p(star, sc), 1e-300)) for c, sc in pops)
    h = np.exp(log_h)
    w_star = np.diff(h)
    mid = 0.5 * (star[1:] + star[:-1])
    t = barrier_grid(parts, s_lo, s_hi, t_cells)
    # the other replicas: S-grid from where log F_B(t / s) stops being 0 up to s_hi
    b_top = float(parts.body.isf(1e-12))
    s_min = float(t[0] / b_top) if np.isfinite(b_top) and b_top > 0 else s_lo
    s_edges = np.linspace(min(s_min, s_lo), s_hi, 2 * cells + 1)
    s_mid = 0.5 * (s_edges[1:] + s_edges[:-1])
    with np.errstate(divide="ignore"):
        logf = np.log(np.maximum(parts.body.cdf(t[:, None] / s_mid[None, :]), 1e-300))
    parts_p = []
    for c, sc in pops:
        w = np.diff(cdf_p(s_edges, sc))
        cum = np.cumsum(logf * w[None, :], axis=1)  # int_{s_min}^{edge} log F_B(t/s) dG_p(s)
        idx = np.clip(np.searchsorted(s_edges, mid) - 1, 0, w.size - 1)
        g_mid = np.maximum(cdf_p(mid, sc), 1e-300)
        # hazard-weighted share of the slowest replica: n_p g_p(s*) / G_p(s*)
        haz = c * np.gradient(cdf_p(mid, sc), mid) / g_mid
        parts_p.append((c, cum[:, idx] / g_mid[None, :], haz))
    tot = sum(p[2] for p in parts_p)
    rest = np.zeros((t.size, mid.size))
    for c, rest_p, haz in parts_p:
        pi = haz / np.maximum(tot, 1e-300)
        rest += rest_p * (c - pi)[None, :]
    with np.errstate(divide="ignore"):
        own = np.log(np.maximum(parts.body.cdf(t[:, None] / mid[None, :]), 1e-300))
    cdf = np.exp(own + rest).T  # rows: star cells
    m, v = _moments_from_cdf(t, cdf)
    total = w_star.sum()
    return AllocationMoments(w_star / total, m + tail_m, v + tail_v, mid)


def _speed_atoms(speed: Any) -> list[tuple[float, float]] | None:
    """(value, probability) of a speed law made of one or two point masses, else None.

    A job without a lognormal spread but with degraded GPUs has the builder's speed law
    ``(1 - q) delta_1 + q delta_f``: the quadrature over a continuous slowest factor cannot
    read it, and the allocations are few enough to enumerate.
    """
    lo, hi = speed.support
    if lo == hi and np.isfinite(lo):  # one point mass (every replica degraded: q = 1)
        return [(float(lo), 1.0)]
    parts = getattr(speed, "components", None)
    weights = getattr(speed, "weights", None)
    if parts is None or weights is None:
        return None
    atoms = []
    for c, w in zip(parts, weights, strict=True):
        lo, hi = c.support
        if lo != hi or not np.isfinite(lo):
            return None
        if w > 0:
            atoms.append((float(lo), float(w)))
    return atoms if 1 <= len(atoms) <= 2 else None


def _discrete_allocations(
    parts: StepParts,
    atoms: list[tuple[float, float]],
    t_cells: int,
    tail_m: float,
    tail_v: float,
) -> AllocationMoments:
    """Every allocation of a two-valued speed law: Binomial counts at the second value.

    The ``n - k`` free replicas and the ``k`` explicitly slow ones (``f`` times their own
    draw, as the engine and :func:`simulate_runs` have them) each take the second value
    independently: counts ``j1 ~ Binomial(n - k, p2)`` and ``j2 ~ Binomial(k, p2)``. Count
    pairs whose probability is below 1e-15 are left out (their total is reported in the
    weights' normalisation: at most ``(n + 1)^2`` times that).
    """
    n, (k, f) = parts.n, parts.slow
    free = n - k
    v1 = atoms[0][0]
    v2, p2 = atoms[1] if len(atoms) == 2 else (v1, 0.0)
    j1, j2 = np.meshgrid(np.arange(free + 1), np.arange(k + 1), indexing="ij")
    w = stats.binom.pmf(j1, free, p2) * stats.binom.pmf(j2, k, p2)
    keep = w > 1e-15
    j1, j2, w = j1[keep], j2[keep], w[keep]
    values = [v1, v2] + ([f * v1, f * v2] if k else [])
    t = barrier_grid(parts, min(values), max(values), t_cells)
    rows = []
    for a, b in zip(j1, j2, strict=True):
        speeds = np.r_[
            np.full(free - a, v1), np.full(a, v2), np.full(k - b, f * v1), np.full(b, f * v2)
        ]
        rows.append(parts.barrier_cdf(t, speeds))
    m, v = _moments_from_cdf(t, np.array(rows))
    # the slowest factor present in each allocation
    present = [
        (j1 < free, v1),
        (j1 > 0, v2),
        (j2 < k, f * v1),
        (j2 > 0, f * v2),
    ]
    slowest = np.max([np.where(mask, value, -np.inf) for mask, value in present], axis=0)
    return AllocationMoments(w / w.sum(), m + tail_m, v + tail_v, slowest)
