"""Failures, checkpoints, restarts and fail-slow episodes: their cost to a training run.

Model (each job-level process is Poisson, which is what independent per-GPU failures at a
constant rate give):

* **Failures** arrive at ``failure_rate * gpus`` per hour of wall time. Each one costs the
  restart time ``restart_s`` plus the work lost since the last checkpoint, uniform on
  ``[0, interval + checkpoint_cost]`` (a failure falls anywhere in a segment).
* **Checkpoints** every ``interval`` seconds of work, each costing ``checkpoint_cost_s``.
* **Fail-slow episodes** (a GPU or link that stays slow for minutes to hours) arrive at
  ``failslow_rate * gpus`` per hour, last an exponential time of mean ``failslow_duration_s``
  during which the whole job (synchronous) runs ``failslow_factor`` times slower: each costs
  ``D * (1 - 1 / factor)`` of extra wall time. Overlapping episodes are counted twice (a
  slight over-estimate).

The number of events over a run is Poisson with mean ``rate * E[wall]`` and
``E[wall] = work * (1 + C / tau) / (1 - lambda * (R + (tau + C) / 2) - eta * d (1 - 1/f))``;
the extra time is a compound Poisson law, computed on a lattice by FFT. The optimal
checkpoint interval minimises the expected wall time (Daly 2006, exponential failures);
Young's ``sqrt(2 C MTBF)`` is reported beside it.

Default rate: Llama 3 (Dubey et al. 2024, §3.3.4) reports 466 job interruptions (47 planned,
419 unexpected) in a 54-day snapshot on 16,384 H100 GPUs, i.e. 466 / (54 * 24 * 16384) =
2.19e-5 interruptions per GPU-hour.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import optimize, stats

__all__ = [
    "LLAMA3_INTERRUPTIONS",
    "LLAMA3_DAYS",
    "LLAMA3_GPUS",
    "LLAMA3_RATE_PER_GPU_HOUR",
    "Interruptions",
    "optimal_interval",
    "young_interval",
    "expected_wall",
    "compound_poisson_pmf",
    "expected_interruptions",
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


def expected_wall(work_s: float, interval_s: float, intr: Interruptions, gpus: int) -> float:
    """Expected wall time of ``work_s`` seconds of work (Daly 2006, exponential failures).

    ``M e^(R/M) (e^((tau + C)/M) - 1) work / tau`` with ``M`` the job's MTBF, plus the
    fail-slow episodes' expected extra time (first order).
    """
    lam = intr.failure_rate * gpus / 3600.0
    c, r = intr.checkpoint_cost_s, intr.restart_s
    if lam > 0:
        m = 1.0 / lam
        wall = m * math.exp(r / m) * math.expm1((interval_s + c) / m) * work_s / interval_s
    else:
        wall = work_s * (1 + c / interval_s)
    eta = intr.failslow_rate * gpus / 3600.0
    loss = eta * intr.failslow_duration_s * (1 - 1 / intr.failslow_factor)
    if loss >= 1:
        raise ValueError("fail-slow episodes cover the whole run: the job never finishes")
    return wall / (1 - loss)


def optimal_interval(work_s: float, intr: Interruptions, gpus: int) -> float:
    """The checkpoint interval minimising :func:`expected_wall` (seconds of work)."""
    lam = intr.failure_rate * gpus / 3600.0
    c = max(intr.checkpoint_cost_s, 1e-9)
    if lam <= 0:
        return float(work_s)
    guess = young_interval(c, 1.0 / lam)
    res = optimize.minimize_scalar(
        lambda lt: expected_wall(work_s, math.exp(lt), intr, gpus),
        bounds=(math.log(guess / 100), math.log(guess * 100)),
        method="bounded",
        options={"xatol": 1e-6},
    )
    return float(math.exp(res.x))


def compound_poisson_pmf(
    h: float, cells: int, events: list[tuple[float, np.ndarray]]
) -> np.ndarray:
    """Lattice pmf of a compound Poisson sum, by FFT.

    Parameters
    ----------
    h : float
        Lattice spacing.
    cells : int
        Lattice length (the sum must fit: mean plus many standard deviations).
    events : list of (mean count, jump pmf on the lattice)
        Independent event types.
    """
    n = 1 << int(math.ceil(math.log2(max(cells, 2))))
    log_phi = np.zeros(n // 2 + 1, dtype=complex)
    for mean_count, jump in events:
        if mean_count <= 0:
            continue
        jp = np.zeros(n)
        jp[: min(jump.size, n)] = jump[:n]
        log_phi += mean_count * (np.fft.rfft(jp) - 1.0)
    pmf = np.fft.irfft(np.exp(log_phi), n)[:cells]
    return np.clip(pmf, 0.0, None)


def interruption_events(
    h: float, cells: int, interval_s: float, intr: Interruptions, gpus: int, wall_s: float
) -> list[tuple[float, np.ndarray]]:
    """The event types of :func:`compound_poisson_pmf` for a run of expected wall ``wall_s``."""
    x = np.arange(cells + 1) * h
    out = []
    lam = intr.failure_rate * gpus / 3600.0
    if lam > 0:
        lost = stats.uniform(intr.restart_s, interval_s + intr.checkpoint_cost_s)
        out.append((lam * wall_s, np.diff(lost.cdf(x - 0.5 * h))))
    eta = intr.failslow_rate * gpus / 3600.0
    if eta > 0 and intr.failslow_factor > 1:
        extra = stats.expon(scale=intr.failslow_duration_s * (1 - 1 / intr.failslow_factor))
        out.append((eta * wall_s, np.diff(extra.cdf(x - 0.5 * h))))
    return out
