"""Failures, checkpoints, restarts and fail-slow episodes: their cost to a training run.

Model (each job-level process is Poisson, which is what independent per-GPU failures at a
constant rate give):

* **Failures** arrive at ``failure_rate * gpus`` per hour of wall time, also during restarts
  and checkpoint writes. Each one loses the work since the last checkpoint and costs a
  restart of ``restart_s``, itself begun again if a failure hits it (Daly 2006).
* **Checkpoints** every ``interval`` seconds of work, each costing ``checkpoint_cost_s``
  (none after the last, partial, segment).
* **Fail-slow episodes** (a GPU or link that stays slow for minutes to hours) arrive at
  ``failslow_rate * gpus`` per hour, last an exponential time of mean ``failslow_duration_s``
  during which the whole job (synchronous) runs ``failslow_factor`` times slower: each costs
  ``D * (1 - 1 / factor)`` of extra wall time. Overlapping episodes are counted twice (a
  slight over-estimate).

The run is a sum of independent checkpoint segments, each a geometric renewal of attempts
and restarts: :mod:`.renewal` has its exact mean and law in every failure regime (a job MTBF
far above or far below the restart time). :func:`expected_wall` is its mean; the optimal
checkpoint interval minimises it; Young's ``sqrt(2 C MTBF)`` is reported beside it.

Default rate: Llama 3 (Dubey et al. 2024, §3.3.4) reports 466 job interruptions (47 planned,
419 unexpected) in a 54-day snapshot on 16,384 H100 GPUs, i.e. 466 / (54 * 24 * 16384) =
2.19e-5 interruptions per GPU-hour.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import optimize

from .renewal import expected_run, log_expected_segment

__all__ = [
    "LLAMA3_INTERRUPTIONS",
    "LLAMA3_DAYS",
    "LLAMA3_GPUS",
    "LLAMA3_RATE_PER_GPU_HOUR",
    "Interruptions",
    "optimal_interval",
    "young_interval",
    "expected_wall",
    "expected_interruptions",
    "failslow_loss",
]

LLAMA3_INTERRUPTIONS = 466
LLAMA3_DAYS = 54
LLAMA3_GPUS = 16_384
#: Interruptions per GPU-hour implied by the Llama 3 paper's 54-day snapshot.
LLAMA3_RATE_PER_GPU_HOUR = LLAMA3_INTERRUPTIONS / (LLAMA3_DAYS * 24 * LLAMA3_GPUS)


@dataclass(frozen=True)
class Interruptions:
    """What interrupts or slows a run (rates per GPU-hour, times in seconds).

    Parameters
    ----------
    failure_rate : float
        Job-stopping failures per GPU-hour (default: Llama 3's 2.19e-5).
    checkpoint_interval_s : float or None
        Work between checkpoints; ``None`` uses the optimum for the job.
    checkpoint_cost_s : float
        Time to write one checkpoint (assumption: 60 s).
    restart_s : float
        Time from a failure to training again (assumption: 600 s).
    failslow_rate : float
        Fail-slow episodes per GPU-hour (default 0: off).
    failslow_duration_s : float
        Mean episode length.
    failslow_factor : float
        The job's slow-down while an episode lasts (>= 1).
    """

    failure_rate: float = LLAMA3_RATE_PER_GPU_HOUR
    checkpoint_interval_s: float | None = None
    checkpoint_cost_s: float = 60.0
    restart_s: float = 600.0
    failslow_rate: float = 0.0
    failslow_duration_s: float = 1800.0
    failslow_factor: float = 1.5

    def __post_init__(self) -> None:
        for name in ("failure_rate", "checkpoint_cost_s", "restart_s", "failslow_rate"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        for name in ("failslow_duration_s",):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        if not (math.isfinite(self.failslow_factor) and self.failslow_factor >= 1):
            raise ValueError(f"failslow_factor must be >= 1, got {self.failslow_factor!r}")
        iv = self.checkpoint_interval_s
        if iv is not None and not (math.isfinite(iv) and iv > 0):
            raise ValueError(f"checkpoint_interval_s must be > 0, got {iv!r}")

    def to_dict(self) -> dict:
        """Plain dict."""
        return asdict(self)


def expected_interruptions(rate_per_gpu_hour: float, gpus: int, hours: float) -> float:
    """Expected job interruptions: ``rate * gpus * hours``."""
    return rate_per_gpu_hour * gpus * hours


def young_interval(checkpoint_cost_s: float, mtbf_s: float) -> float:
    """Young's first-order optimum ``sqrt(2 C MTBF)``."""
    return math.sqrt(2.0 * checkpoint_cost_s * mtbf_s)


def failslow_loss(intr: Interruptions, gpus: int) -> float:
    """Share of wall time the fail-slow episodes add (< 1, else the job never finishes)."""
    eta = intr.failslow_rate * gpus / 3600.0
    loss = eta * intr.failslow_duration_s * (1 - 1 / intr.failslow_factor)
    if loss >= 1:
        raise ValueError(
            "failslow_rate x gpus x failslow_duration_s x (1 - 1/failslow_factor) must be"
            f" < 1 per second of wall time (fail-slow episodes would cover the whole run and"
            f" the job never finishes), got {loss * 3600:.4g} per hour"
        )
    return loss


def expected_wall(work_s: float, interval_s: float, intr: Interruptions, gpus: int) -> float:
    """Expected wall time of ``work_s`` seconds of work (exact; ``inf`` beyond floats).

    ``n E[S(tau + C)] + E[S(r)]`` with ``n = floor(work / tau)`` checkpoint segments, the
    last segment ``r`` and ``E[S(T)] = M expm1(T / M) e^(R / M)`` (``M`` the job's MTBF),
    divided by ``1 - `` the fail-slow episodes' share of the wall time.
    """
    if not interval_s > 0:
        raise ValueError(f"interval_s must be > 0 (inf: no checkpoint), got {interval_s!r}")
    lam = intr.failure_rate * gpus / 3600.0
    m = float(expected_run(lam, work_s, interval_s, intr.checkpoint_cost_s, intr.restart_s))
    return m / (1 - failslow_loss(intr, gpus))


def optimal_interval(
    work_s: float, intr: Interruptions, gpus: int, *, min_interval_s: float = 0.0
) -> float:
    """The checkpoint interval minimising :func:`expected_wall` of ``work_s`` (seconds of work).

    Within the intervals giving ``n`` full segments the expected wall grows with the
    interval (the last segment shrinks by ``n`` seconds for each second the others grow),
    so the optimum is approached just above ``work / k`` for some ``k`` segments: ``k - 1``
    checkpoints and a last segment as long as the others, with no checkpoint after it. It
    searches ``k`` around the continuous optimum of the cost per work
    ``expm1(lam (tau + C)) / tau`` (which neither the restart time nor the run length
    moves), ``k = 1`` meaning no checkpoint at all (``inf``). ``work_s`` when there are no
    failures. ``min_interval_s`` (one step: a checkpoint is written between steps) bounds
    it from below; without it a free checkpoint (``C = 0``) would be written ever more often.
    """
    lam = intr.failure_rate * gpus / 3600.0
    work = float(work_s)
    if lam <= 0 or not work > 0:
        return work
    c, r = intr.checkpoint_cost_s, intr.restart_s

    def log_cost(log_tau: float) -> float:
        tau = math.exp(log_tau)
        return float(log_expected_segment(lam, tau + c, 0.0)) - log_tau

    # at the optimum lam tau = 1 - e^(-lam (tau + C)) < 1: it lies below the MTBF 1 / lam
    top = math.log(min(work, 1.0 / lam))
    res = optimize.minimize_scalar(
        log_cost, bounds=(top - 25.0, top), method="bounded", options={"xatol": 1e-9}
    )
    tau_c = min(max(math.exp(res.x), min_interval_s), work)
    k_c = work / tau_c
    k_max = math.floor(work / min_interval_s) if min_interval_s > 0 else math.inf
    if k_c > 1e6:  # the segments' granularity is immaterial
        return tau_c
    ks = np.arange(max(1, math.floor(k_c / 3)), min(math.ceil(3 * k_c) + 2, k_max) + 1)
    ks = np.union1d(ks, [1]).astype(float)
    seg = work / ks
    # k - 1 full segments and a last one of the same work: log of (k - 1) E[S(seg + C)] + E[S(seg)]
    with np.errstate(divide="ignore"):
        full = np.log(ks - 1) + log_expected_segment(lam, seg + c, r)
    cost = np.logaddexp(full, log_expected_segment(lam, seg, r))
    k = float(ks[int(np.argmin(cost))])
    # just above work / k, so that the last segment needs no checkpoint after it
    return math.inf if k == 1 else float(np.nextafter(work / k, math.inf) * (1 + 1e-12))
