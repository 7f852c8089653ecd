"""Probability of slow-down versus scale.

For each GPU count the step-time law is computed analytically and compared with the
deterministic (no-variability) step time of the mean model
(:func:`~prism_analytic.workload.step_estimate.step_time`), which is what a deterministic
performance model predicts. Reported per scale:

* ``p_step_slow``: P(one step > (1 + threshold) x deterministic step), steps marginal over
  allocations (the engine's law);
* ``p_job_slow``: P(the job's mean step > (1 + threshold) x deterministic step) over
  persistent allocations (:func:`~.allocation.allocation_moments`): the chance that a job of
  that size is *persistently* slow;
* ``p_degraded``: P(the job holds at least one degraded GPU) = ``1 - (1 - f)^N`` with ``f``
  the configured ``variability.spatial.slow_fraction``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["SlowdownRow", "SlowdownResult", "slowdown", "check_scales"]


def check_scales(gpus: Any, name: str = "--gpus") -> list[int]:
    """A non-empty, strictly increasing list of positive GPU counts, or a ValueError naming it."""
    try:
        items = list(gpus)
    except TypeError:
        raise ValueError(f"{name}: expected a list of GPU counts, got {gpus!r}") from None
    if not items:
        raise ValueError(f"{name}: the list of GPU counts is empty")
    for g in items:
        if isinstance(g, bool) or not isinstance(g, int | np.integer) or g < 1:
            raise ValueError(f"{name}: GPU counts must be positive integers, got {g!r}")
    if any(b <= a for a, b in zip(items, items[1:])):
        raise ValueError(f"{name}: GPU counts must be strictly increasing, got {items}")
    return [int(g) for g in items]


@dataclass(frozen=True)
class SlowdownRow:
    """One scale's numbers (seconds and probabilities)."""

    gpus: int
    deterministic_step_s: float
    mean_s: float
    p95_s: float
    p_step_slow: float
    p_job_slow: float
    p_degraded: float


@dataclass(frozen=True)
class SlowdownResult:
    """Slow-down probabilities over scales."""

    preset: str | None
    threshold: float
    rows: tuple[SlowdownRow, ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        return {
            "preset": self.preset,
            "threshold": self.threshold,
            "rows": [r.__dict__ for r in self.rows],
        }

    def summary(self) -> str:
        """A table."""
        th = self.threshold
        lines = [
            f"P(slow-down > {th:.0%} over the deterministic step), {self.preset or 'job'}",
            f"{'GPUs':>8} {'determ. s':>10} {'mean s':>9} {'p95 s':>9} {'P(step)':>9}"
            f" {'P(job)':>9} {'P(>=1 degraded GPU)':>20}",
        ]
        for r in self.rows:
            lines.append(
                f"{r.gpus:>8,} {r.deterministic_step_s:>10.4g} {r.mean_s:>9.4g} {r.p95_s:>9.4g}"
                f" {r.p_step_slow:>9.4f} {r.p_job_slow:>9.4f} {r.p_degraded:>20.4f}"
            )
        return "\n".join(lines)

    def plot(self, ax: Any = None) -> Any:
        """Probabilities against GPU count (log x)."""
        import matplotlib.pyplot as plt

        ax = ax or plt.gca()
        g = [r.gpus for r in self.rows]
        ax.semilogx(g, [r.p_step_slow for r in self.rows], "o-", label="P(step slow)")
        ax.semilogx(g, [r.p_job_slow for r in self.rows], "s-", label="P(job persistently slow)")
        ax.semilogx(g, [r.p_degraded for r in self.rows], "^--", label="P(>= 1 degraded GPU)")
        ax.set_xlabel("GPUs")
        ax.set_ylabel(f"probability (slow = > {self.threshold:.0%} over deterministic)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        return ax


def slowdown_one(job: Any, threshold: float) -> SlowdownRow:
    """The :class:`SlowdownRow` of one built job."""
    from ..engines.predict import predict
    from ..workload.builder import build_step_graph
    from ..workload.mean_model import op_means
    from ..workload.step_estimate import step_time
    from .allocation import allocation_moments
    from .decompose import decompose

    om = op_means(job)
    base = step_time(job, om).step_s
    graph = build_step_graph(job, means=om)
    res = predict(graph)
    cut = (1 + threshold) * base
    parts = decompose(graph)
    am = allocation_moments(parts)
    f = job.variability.spatial.slow_fraction
    p_deg = -math.expm1(job.gpus * math.log1p(-f)) if f < 1 else 1.0
    return SlowdownRow(
        gpus=job.gpus,
        deterministic_step_s=base,
        mean_s=float(res.mean()),
        p95_s=float(res.quantile(0.95)),
        p_step_slow=float(res.sf(cut)),
        p_job_slow=float(am.weights[am.mean > cut].sum()),
        p_degraded=p_deg,
    )


def slowdown(
    preset: str | None,
    gpus: list[int],
    threshold: float = 0.05,
    config: str | None = None,
) -> SlowdownResult:
    """Slow-down probabilities of a preset (or config) job at each GPU count.

    Parameters
    ----------
    preset : str or None
        Model preset (``None``: the config file's job).
    gpus : list of int
        Strictly increasing GPU counts, each valid for the preset's layout.
    threshold : float
        Slow-down threshold (> 0), e.g. 0.05 for 5%.
    config : str, optional
        TOML overrides (or a whole job with ``preset=None``).
    """
    from ..workload.jobs import build_job

    gpus = check_scales(gpus)
    if not (isinstance(threshold, int | float) and math.isfinite(threshold) and threshold > 0):
        raise ValueError(f"--threshold must be a number > 0 (e.g. 0.05), got {threshold!r}")
    rows = tuple(slowdown_one(build_job(preset, g, config), threshold) for g in gpus)
    return SlowdownResult(preset, float(threshold), rows)
