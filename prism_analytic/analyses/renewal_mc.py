"""Monte Carlo of whole runs with failures, restarts and checkpoints: the renewal law's check.

Two simulators of the model of :mod:`.renewal`, neither using its transforms or lattice:

* :func:`simulate_walls_events` plays every event (failure gaps drawn one at a time,
  vectorised over runs): exact, for runs with up to some ``10^5`` events.
* :func:`simulate_walls` draws, per segment, the number of failed attempts (Geometric:
  the gaps of a Poisson process are i.i.d. exponentials, so the first gap >= T comes after
  a Geometric(e^(-lam T)) number of shorter ones) and the sum of the lost times: exactly,
  one truncated exponential each, up to ``exact_max`` of them in a run; beyond that, a
  gamma law with the sum's exact mean and variance (the sum of more than ``exact_max``
  i.i.d. bounded terms, whose skewness is ``<= 2 / sqrt(exact_max)``). It reaches runs of
  any failure rate.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .renewal import segments

__all__ = ["simulate_walls", "simulate_walls_events"]


def _rates(intr: Any, gpus: int) -> tuple[float, float, float, float, float]:
    lam = intr.failure_rate * gpus / 3600.0
    eta = intr.failslow_rate * gpus / 3600.0
    jump = intr.failslow_duration_s * (1.0 - 1.0 / intr.failslow_factor)
    return lam, intr.checkpoint_cost_s, intr.restart_s, eta, jump


def _geometric(lam_t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Failed attempts before one lasting ``T``: ``P(N >= k) = (1 - e^(-lam T))^k`` (float)."""
    lam_t = np.asarray(lam_t, dtype=float)
    u = 1.0 - rng.random(lam_t.shape)  # (0, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.floor(np.log(u) / np.log(-np.expm1(-lam_t)))
    return np.where(lam_t > 0, out, 0.0)


def _negbin(count: np.ndarray, lam_t: float, rng: np.random.Generator) -> np.ndarray:
    """Sum of ``count`` i.i.d. :func:`_geometric` counts (negative binomial; float)."""
    count = np.asarray(count, dtype=float)
    if lam_t <= 0:
        return np.zeros_like(count)
    # Poisson(Gamma(count, odds of failure)): its large means by a normal (Poisson CV < 1e-6)
    g = rng.gamma(np.maximum(count, 1e-300), math.expm1(lam_t))
    g = np.where(count > 0, g, 0.0)
    small = g < 1e12
    out = np.where(small, rng.poisson(np.where(small, g, 0.0)), 0.0).astype(float)
    big = ~small
    out[big] = np.round(g[big] + np.sqrt(g[big]) * rng.standard_normal(int(big.sum())))
    return out


def _truncexp_moments(lam: float, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of Exp(lam) truncated to ``[0, t]``."""
    t = np.asarray(t, dtype=float)
    x = lam * t
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        m = 1.0 / lam - t / np.expm1(x)
        v = 1.0 / lam**2 - t**2 / (np.expm1(x) * -np.expm1(-x))
    # small lam t: the series (uniform law plus its first corrections)
    m_s = t / 2 - lam * t**2 / 12
    v_s = t**2 / 12 - lam**2 * t**4 / 720
    small = x < 1e-2
    return np.where(small, m_s, m), np.maximum(np.where(small, v_s, v), 0.0)


def _sum_truncexp(
    counts: np.ndarray, lam: float, t: np.ndarray, rng: np.random.Generator, exact_max: int
) -> np.ndarray:
    """Sum of ``counts`` i.i.d. Exp(lam) truncated to ``[0, t]`` (per run)."""
    counts = np.asarray(counts, dtype=float)
    t = np.broadcast_to(np.asarray(t, dtype=float), counts.shape)
    out = np.zeros(counts.shape)
    ex = (counts > 0) & (counts <= exact_max)
    if ex.any():
        k = int(counts[ex].max())
        u = rng.random((int(ex.sum()), k))
        tt = t[ex][:, None]
        x = -np.log1p(u * np.expm1(-lam * tt)) / lam
        x[np.arange(k)[None, :] >= counts[ex][:, None]] = 0.0
        out[ex] = x.sum(axis=1)
    big = counts > exact_max
    if big.any():
        m, v = _truncexp_moments(lam, t[big])
        mean, var = counts[big] * m, counts[big] * v
        out[big] = rng.gamma(mean**2 / var, var / mean)
    return out


def _failslow(wall: np.ndarray, eta: float, jump: float, rng: np.random.Generator) -> np.ndarray:
    """Extra time of fail-slow episodes: Poisson in wall time, episodes during the extra too."""
    if eta <= 0 or jump <= 0:
        return np.zeros_like(wall)
    extra = np.zeros_like(wall)
    pending = wall.copy()
    for _ in range(200):
        k = rng.poisson(eta * pending).astype(float)
        if not k.any():
            break
        add = np.where(k > 0, rng.gamma(np.maximum(k, 1e-300), jump), 0.0)
        extra += add
        pending = add
    return extra


def simulate_walls(
    work_s: np.ndarray,
    interval_s: float,
    intr: Any,
    gpus: int,
    *,
    rng: Any = None,
    exact_max: int = 256,
) -> np.ndarray:
    """Wall times of runs of ``work_s`` seconds of work each (segment-by-segment Monte Carlo).

    Parameters
    ----------
    work_s : array
        Work of each run (seconds).
    interval_s : float
        Work between checkpoints.
    intr : Interruptions
        Rates and times.
    gpus : int
        GPUs of the job (the failure rates are per GPU).
    rng : Generator or seed, optional
    exact_max : int
        Sums of up to this many lost times are drawn term by term.

    Returns
    -------
    ndarray
        Wall seconds per run (evaluation pauses not included).
    """
    rng = np.random.default_rng(rng)
    work = np.asarray(work_s, dtype=float)
    lam, c, r_s, eta, jump = _rates(intr, gpus)
    n, rest = segments(work, interval_s)
    wall = work + n * c
    if lam > 0:
        t_full = interval_s + c
        n_max = int(n.max())
        if n_max * work.size <= 5e7:  # one Geometric draw per segment
            fails = np.zeros(work.size)
            for j0 in range(0, n_max, 512):
                j = np.arange(j0, min(j0 + 512, n_max))
                g = _geometric(np.full((work.size, j.size), lam * t_full), rng)
                fails += np.where(j[None, :] < n[:, None], g, 0.0).sum(axis=1)
        else:  # their sum, a negative binomial
            fails = _negbin(n, lam * t_full, rng)
        last = _geometric(lam * rest, rng)
        lost = _sum_truncexp(fails, lam, t_full, rng, exact_max)
        lost += _sum_truncexp(last, lam, rest, rng, exact_max)
        failures = fails + last
        restart_fails = _negbin(failures, lam * r_s, rng)
        lost += failures * r_s + _sum_truncexp(restart_fails, lam, r_s, rng, exact_max)
        wall = wall + lost
    return wall + _failslow(wall, eta, jump, rng)


def simulate_walls_events(
    work_s: np.ndarray, interval_s: float, intr: Any, gpus: int, *, rng: Any = None
) -> np.ndarray:
    """Wall times by playing every failure, restart and checkpoint (vectorised over runs).

    Each step of the loop draws the next failure gap of every unfinished run and either
    completes its current segment or restart, or loses the gap and restarts.
    """
    rng = np.random.default_rng(rng)
    work = np.asarray(work_s, dtype=float)
    lam, c, r_s, eta, jump = _rates(intr, gpus)
    n, rest = segments(work, interval_s)
    segs = n + (rest > 0)
    seg = np.zeros(work.size)
    wall = np.zeros(work.size)
    restarting = np.zeros(work.size, dtype=bool)
    active = seg < segs
    while active.any():
        idx = np.flatnonzero(active)
        gap = rng.exponential(1.0 / lam, idx.size) if lam > 0 else np.full(idx.size, np.inf)
        rs = restarting[idx]
        need = np.where(rs, r_s, np.where(seg[idx] < n[idx], interval_s + c, rest[idx]))
        ok = gap >= need
        wall[idx] += np.where(ok, need, gap)
        seg[idx[ok & ~rs]] += 1
        restarting[idx] = ~ok  # a failure (anywhere) starts a restart; a success ends one
        active = seg < segs
    return wall + _failslow(wall, eta, jump, rng)
