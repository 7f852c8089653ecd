"""The time of a whole run of M steps, with its guarantee, failures and checkpoints.

Given the job's persistent allocation ``a`` (DESIGN.md §3: speeds drawn once, held for the
whole run) the M steps are i.i.d. with mean ``mu(a)`` and variance ``v(a)``
(:func:`~.allocation.allocation_moments`), so their sum is ``N(M mu(a), M v(a))`` by the
central limit theorem (M is thousands). Across allocations the run time is the mixture of
those normals. Interruptions (:mod:`.interruptions`): the run is a sum of checkpoint
segments, each a geometric renewal of failed attempts and restarts whose law
:mod:`.renewal` computes exactly in every failure regime, given the work (cut into narrow
strata of its law).
:func:`~.renewal_mc.simulate_walls` checks that part; :func:`simulate_runs` checks the steps:
it draws whole
allocations, the barrier's exact conditional law ``prod_r F_B(t / s_r)`` for each, and M
steps from it (barrier and tail sampled separately).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special

from .allocation import AllocationMoments, allocation_moments, barrier_grid
from .decompose import StepParts, decompose
from .interruptions import Interruptions, failslow_loss, optimal_interval, young_interval
from .renewal import WorkMixture, run_wall_law

__all__ = ["RunTime", "run_time", "simulate_runs", "steps_for_tokens"]

LEVELS = (0.01, 0.5, 0.9, 0.95, 0.99)


def steps_for_tokens(job: Any, tokens: float) -> int:
    """Steps needed to train on ``tokens`` tokens (global batch x sequence length per step)."""
    if not (math.isfinite(tokens) and tokens > 0):
        raise ValueError(f"--tokens must be a positive number, got {tokens!r}")
    per_step = job.parallelism.global_batch * job.model.seq_len
    return max(1, math.ceil(tokens / per_step))


@dataclass(frozen=True)
class RunTime:
    """The law of a run's wall time (seconds) on a lattice.

    Attributes
    ----------
    steps : int
    gpus : int
    x, cdf : ndarray
        Lattice of run times and the CDF there.
    work : dict
        The steps alone (no interruptions): mean, std and quantiles.
    interruptions : dict or None
        Rates, interval, the expected numbers of events and goodput (None when off).

    exact_mean_s : float or None
        The exact expected run time where known in closed form (``mean()`` returns it; the
        lattice's own mean differs from it by less than a lattice step); ``inf`` when it
        exceeds the largest float, and then every quantile is ``inf`` too.

    ``work`` also holds ``evaluations`` and ``evaluation_s``: the job's evaluation pauses
    and the slow steps after them (``[training.evaluation]``), a fixed time added to the
    run (``x``), not to the steps alone.
    """

    steps: int
    gpus: int
    x: np.ndarray = field(repr=False)
    cdf_values: np.ndarray = field(repr=False)
    work: dict[str, float]
    interruptions: dict[str, Any] | None
    exact_mean_s: float | None = None

    def _infinite(self) -> bool:
        return self.exact_mean_s is not None and not math.isfinite(self.exact_mean_s)

    def cdf(self, t: Any) -> Any:
        """P(run <= t)."""
        # a CDF topping out below 1 leaves the rest to runs no float holds
        return np.interp(t, self.x, self.cdf_values, left=0.0, right=float(self.cdf_values[-1]))

    def quantile(self, p: Any) -> Any:
        """The run time met with probability ``p``."""
        p = np.asarray(p, dtype=float)
        if np.any((p <= 0) | (p >= 1)):
            raise ValueError(f"probability must lie strictly between 0 and 1, got {p}")
        c = np.maximum.accumulate(self.cdf_values)
        if not np.isfinite(self.x[-1]):  # no float holds any run
            return np.full(p.shape, np.inf)[()]
        i = np.clip(np.searchsorted(c, p), 1, c.size - 1)
        f = (p - c[i - 1]) / np.maximum(c[i] - c[i - 1], 1e-300)
        q = self.x[i - 1] + np.clip(f, 0, 1) * (self.x[i] - self.x[i - 1])
        # above the CDF's top: the runs no float holds (a CDF reaching 1 has none)
        return np.where(p > c[-1] + 1e-12, np.inf, q)[()]

    def mean(self) -> float:
        """Expected run time."""
        if self.exact_mean_s is not None:
            return float(self.exact_mean_s)
        pmf = np.diff(self.cdf_values, prepend=0.0)
        return float(pmf @ self.x)

    def std(self) -> float:
        """Standard deviation of the run time."""
        if self._infinite():
            return math.inf
        pmf = np.diff(self.cdf_values, prepend=0.0)
        m = pmf @ self.x
        return float(math.sqrt(max(pmf @ (self.x - m) ** 2, 0.0)))

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (seconds)."""
        return {
            "steps": self.steps,
            "gpus": self.gpus,
            "mean_s": self.mean(),
            "std_s": self.std(),
            **{f"p{round(q * 100)}_s": float(self.quantile(q)) for q in LEVELS},
            "work": self.work,
            "interruptions": self.interruptions,
        }

    def summary(self) -> str:
        """A few lines in hours."""
        d = self.to_dict()
        lines = [
            f"run of {self.steps:,} steps on {self.gpus:,} GPUs: mean {d['mean_s'] / 3600:.4g} h,"
            f" std {d['std_s'] / 3600:.3g} h",
            "  "
            + "  ".join(
                f"p{round(q * 100)} {d[f'p{round(q * 100)}_s'] / 3600:.4g} h" for q in LEVELS
            ),
            f"  steps alone: mean {self.work['mean_s'] / 3600:.4g} h, p99"
            f" {self.work['p99_s'] / 3600:.4g} h (allocation held fixed across steps)",
        ]
        if self.work.get("evaluations"):
            lines.append(
                f"  evaluations: {self.work['evaluations']:,} pauses and the slow steps after"
                f" them add {self.work['evaluation_s'] / 3600:.4g} h"
            )
        if self.interruptions:
            i = self.interruptions
            every = (
                f"checkpoint every {i['checkpoint_interval_s'] / 60:.4g} min"
                if math.isfinite(i["checkpoint_interval_s"])
                else "no checkpoint"
            )
            young = i["young_interval_s"]
            lines.append(
                f"  interruptions: {i['expected_failures']:.4g} failures expected, {every}"
                f" (optimal {i['optimal_interval_s'] / 60:.4g} min, Young"
                f" {(young or math.inf) / 60:.4g} min), goodput {i['goodput']:.3g}"
            )
            if i.get("note"):
                lines.append(f"  note: {i['note']}")
        return "\n".join(lines)

    def plot(self, ax: Any = None) -> Any:
        """CDF of the run time in hours."""
        import matplotlib.pyplot as plt

        ax = ax or plt.gca()
        ax.plot(self.x / 3600, self.cdf_values, label="run time")
        ax.set_xlabel("run time (h)")
        ax.set_ylabel("P(run <= t)")
        ax.grid(alpha=0.3)
        return ax


def _mixture_cdf(x: np.ndarray, am: AllocationMoments, steps: int) -> np.ndarray:
    mu = steps * am.mean
    sd = np.sqrt(steps * np.maximum(am.var, 1e-300))
    return special.ndtr((x[:, None] - mu[None, :]) / sd[None, :]) @ am.weights


def run_time(
    job_or_parts: Any,
    steps: int,
    *,
    interruptions: Interruptions | None = None,
    gpus: int | None = None,
    cells: int = 4000,
    renewal_cells: int = 1 << 14,
) -> RunTime:
    """The distribution of the wall time of ``steps`` training steps.

    Parameters
    ----------
    job_or_parts : JobConfig or StepParts
        The job (its step graph is built) or an already decomposed step.
    steps : int
        Steps in the run (>= 1).
    interruptions : Interruptions, optional
        Failures, checkpoints, restarts, fail-slow episodes; ``None``: the steps alone.
    gpus : int, optional
        GPUs of the job (failure rates are per GPU); required with ``StepParts``.
    cells : int
        Lattice size of the steps-alone law.
    renewal_cells : int
        Lattice size of each work stratum's law with interruptions
        (:func:`~.renewal.run_wall_law`).

    Returns
    -------
    RunTime
    """
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    parts = job_or_parts if isinstance(job_or_parts, StepParts) else _parts(job_or_parts)
    if gpus is None:
        if isinstance(job_or_parts, StepParts):
            raise ValueError("gpus is required when run_time is given StepParts")
        gpus = int(job_or_parts.gpus)
    # evaluation pauses and their slow first steps: a fixed time on top of the steps
    ev = getattr(getattr(job_or_parts, "training", None), "evaluation", None)
    ev_n, ev_s = (ev.pauses(steps), ev.time_s(steps)) if ev is not None else (0, 0.0)
    am = allocation_moments(parts)
    mu = steps * am.mean
    sd = np.sqrt(steps * am.var)
    lo, hi = float((mu - 9 * sd).min()), float((mu + 9 * sd).max())
    work_x = np.linspace(lo, hi, cells)
    work_cdf = _mixture_cdf(work_x, am, steps)
    work = RunTime(steps, gpus, work_x, work_cdf, {}, None)
    work_d = {
        "mean_s": float(am.weights @ mu),
        "std_s": work.std(),
        **{f"p{round(q * 100)}_s": float(work.quantile(q)) for q in LEVELS},
        "step_mean_s": float(am.weights @ am.mean),
        "evaluations": ev_n,
        "evaluation_s": ev_s,
    }
    if interruptions is None or (
        interruptions.failure_rate <= 0 and interruptions.failslow_rate <= 0
    ):
        return RunTime(steps, gpus, work_x + ev_s, work_cdf, work_d, None)
    return _with_interruptions(steps, gpus, am, work_d, interruptions, ev_s, renewal_cells)


def _with_interruptions(
    steps: int,
    gpus: int,
    am: AllocationMoments,
    work_d: dict[str, Any],
    intr: Interruptions,
    ev_s: float,
    cells: int,
) -> RunTime:
    """The run's law with failures, checkpoints, restarts and fail-slow episodes."""
    w_mean = work_d["mean_s"]
    lam = intr.failure_rate * gpus / 3600.0
    eta = intr.failslow_rate * gpus / 3600.0
    loss = failslow_loss(intr, gpus)
    best = optimal_interval(w_mean, intr, gpus, min_interval_s=work_d["step_mean_s"])
    tau = intr.checkpoint_interval_s or best
    work = WorkMixture(am.weights, steps * am.mean, steps * am.var)
    jump = intr.failslow_duration_s * (1 - 1 / intr.failslow_factor)
    law = run_wall_law(
        work, tau, lam, intr.checkpoint_cost_s, intr.restart_s, failslow=(eta, jump), cells=cells
    )
    wall = law.mean  # failures and fail-slow included, evaluation pauses not
    mtbf = 1 / lam if lam > 0 else math.inf
    info = {
        **intr.to_dict(),
        "checkpoint_interval_s": tau,
        "optimal_interval_s": best,
        "young_interval_s": young_interval(intr.checkpoint_cost_s, mtbf) if lam > 0 else None,
        "job_mtbf_h": mtbf / 3600,
        "checkpoints": math.floor(w_mean / tau),  # inf interval: 0
        "expected_failures": lam * wall * (1 - loss),
        "expected_failslow_episodes": eta * wall,
        "expected_wall_s": wall + ev_s,
        "goodput": w_mean / wall,
        "lattice_step_s": law.h,
        "quantile_resolution_s": law.resolution,
        "mass_outside_lattice": law.outside,
    }
    if not math.isfinite(wall):
        info["p_run_beyond_floats"] = law.at_inf if np.isfinite(law.x[-1]) else 1.0
        info["note"] = (
            "the expected wall time exceeds the largest float (failures come faster than"
            " a checkpoint segment or a restart completes): a run with a failure does not"
            " finish in any meaningful time; the mean, and every quantile above the chance"
            f" of a run without one (1 - {info['p_run_beyond_floats']:.3g}), are inf"
        )
        if not np.isfinite(law.x[-1]):
            return RunTime(steps, gpus, law.x, law.cdf, work_d, info, math.inf)
        return RunTime(steps, gpus, law.x + ev_s, law.cdf, work_d, info, math.inf)
    keep = np.flatnonzero((law.cdf > 1e-15) & (law.cdf < 1 - 1e-15))
    i0, i1 = (max(keep[0] - 1, 0), min(keep[-1] + 2, law.x.size)) if keep.size else (0, None)
    x, cdf = law.x[i0:i1] + ev_s, law.cdf[i0:i1]
    return RunTime(steps, gpus, x, cdf, work_d, info, wall + ev_s)


def _parts(job: Any) -> StepParts:
    from ..workload.builder import build_step_graph

    return decompose(build_step_graph(job))


def simulate_runs(
    parts: StepParts,
    steps: int,
    runs: int,
    *,
    seed: int = 0,
    t_cells: int = 3000,
) -> np.ndarray:
    """Monte Carlo of whole runs: one allocation per run, held for all its ``steps`` steps.

    Each run draws every replica's speed factor (``n - k`` from the speed law, ``k`` times
    the slow factor), computes the barrier's conditional CDF ``prod_r F_B(t / s_r)`` exactly,
    draws ``steps`` barrier times from it by inversion and ``steps`` tail times from the tail
    law, and sums them. Returns the ``runs`` run times (seconds, no interruptions).
    """
    rng = np.random.default_rng(seed)
    n, (k, f) = parts.n, parts.slow
    out = np.empty(runs)
    for i in range(runs):
        if parts.speed is None:
            s = np.r_[np.ones(n - k), np.full(k, f)]
        else:
            s = parts.speed.sample(n, rng=rng)
            s[:k] *= f
        t = barrier_grid(parts, float(s.max()), float(s.max()), t_cells)
        c = parts.barrier_cdf(t, s)
        c = np.maximum.accumulate(c)
        u = rng.random(steps)
        bar = np.interp(u, c, t)
        tail = parts.tail.sample(steps, rng=rng)
        out[i] = bar.sum() + tail.sum()
    return out
