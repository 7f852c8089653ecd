"""Which kernel class to fix first: derivatives of the step's mean, p95 and std.

For each kernel class (:data:`~.perturb.KERNEL_CLASSES`) and each of its two parameters (its
mean time and its variability, :mod:`.perturb`), the derivatives are computed on the analytic
engine's law as **elasticities** (seconds of step statistic per unit relative change of the
parameter, i.e. ``d stat / d log theta`` at ``theta = 1``):

* the mean and the std from the laws at ``1 +- h`` (central differences of smooth moments);
* the p95 by **implicit differentiation** of the gridded CDF: ``F(q(theta); theta) = p`` gives
  ``dq/dtheta = -(dF/dtheta)(q) / f(q)``, with ``dF/dtheta`` at the fixed point ``q`` by
  central differences of the CDF (smooth in ``theta``) and the density ``f(q)`` from the base
  law. This avoids differencing quantiles, which move in grid-cell steps.
* the finite-difference cross-check: ``(q(1 + h) - q(1 - h)) / 2h`` directly.

Also reported per class: the drop in p95 when its variability is removed (``lam = 0``), and its
**criticality index** ``(d E[step] / d log mean_c) / (class time per GPU per step)``: step
seconds per second of the class's work. 0: hidden behind other work or off the critical path;
1: every second adds a second; above 1: amplified (the step waits for the slowest replica,
whose persistent speed factor stretches the class's time, e.g. 1.1x on a degraded GPU).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..engines.predict import predict as _predict
from .perturb import KERNEL_CLASSES, class_time_per_rank, perturbed_graph

__all__ = [
    "ClassSensitivity",
    "SensitivityResult",
    "sensitivity",
    "implicit_quantile_derivative",
    "implicit_step",
]


def implicit_step(h: float, std: float, slope: float) -> float:
    """A relative step that moves the law by at most 5% of its std (``slope``: s per unit)."""
    if slope <= 0 or std <= 0:
        return h
    return min(h, 0.05 * std / slope)


def implicit_quantile_derivative(base: Any, plus: Any, minus: Any, h: float, p: float) -> float:
    """``dq_p / dtheta`` by the implicit function theorem.

    Uses the laws at ``theta``, ``theta + h`` and ``theta - h``.
    """
    q = float(base.quantile(p))
    dfdt = (float(plus.cdf(q)) - float(minus.cdf(q))) / (2 * h)
    sd = float(base.std())
    # density at q: symmetric difference over a width well above the grid spacing
    w = max(1e-3 * sd, 4 * getattr(getattr(base, "distribution", base), "h", 0.0), 1e-12)
    dens = (float(base.cdf(q + w)) - float(base.cdf(q - w))) / (2 * w)
    if dens <= 0:
        return float("nan")
    return -dfdt / dens


@dataclass(frozen=True)
class ClassSensitivity:
    """One kernel class's derivatives (seconds per unit relative change)."""

    key: str
    label: str
    time_per_rank_s: float
    exposed_per_rank_s: float
    d_mean_d_mean: float
    d_p95_d_mean: float
    d_std_d_mean: float
    d_mean_d_var: float
    d_p95_d_var: float
    d_std_d_var: float
    d_p95_d_var_fd: float
    d_p95_d_mean_fd: float
    p95_drop_without_variability_s: float
    criticality: float


@dataclass(frozen=True)
class SensitivityResult:
    """Per-class sensitivities of one job's step time."""

    job: str
    mean_s: float
    p95_s: float
    std_s: float
    h: float
    classes: tuple[ClassSensitivity, ...]

    def ranking(self, by: str = "d_p95_d_var") -> list[str]:
        """Class keys, largest first."""
        return [c.key for c in sorted(self.classes, key=lambda c: -getattr(c, by))]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        return {
            "job": self.job,
            "mean_s": self.mean_s,
            "p95_s": self.p95_s,
            "std_s": self.std_s,
            "h": self.h,
            "ranking_by_p95_variability": self.ranking("d_p95_d_var"),
            "ranking_by_p95_drop": self.ranking("p95_drop_without_variability_s"),
            "classes": [asdict(c) for c in self.classes],
        }

    def summary(self) -> str:
        """A table (milliseconds of step statistic per +100% of the parameter)."""
        lines = [
            f"{self.job}: step mean {self.mean_s:.4g} s, p95 {self.p95_s:.4g} s, std"
            f" {self.std_s:.4g} s",
            "elasticities in ms of step statistic per +100% of the class's mean / variability",
            f"{'class':<17} {'ms/GPU':>8} {'exposed':>8} {'dMean/dmu':>10} {'dP95/dmu':>9}"
            f" {'dMean/dvar':>10} {'dP95/dvar':>9} {'(FD)':>8} {'dStd/dvar':>9} {'p95 drop':>9}"
            f" {'crit.':>6}",
        ]
        for c in sorted(self.classes, key=lambda c: -c.d_p95_d_var):
            lines.append(
                f"{c.label:<17} {c.time_per_rank_s * 1e3:>8.4g}"
                f" {c.exposed_per_rank_s * 1e3:>8.4g} {c.d_mean_d_mean * 1e3:>10.4g}"
                f" {c.d_p95_d_mean * 1e3:>9.4g} {c.d_mean_d_var * 1e3:>10.4g}"
                f" {c.d_p95_d_var * 1e3:>9.4g} {c.d_p95_d_var_fd * 1e3:>8.4g}"
                f" {c.d_std_d_var * 1e3:>9.4g} {c.p95_drop_without_variability_s * 1e3:>9.4g}"
                f" {c.criticality:>6.3f}"
            )
        return "\n".join(lines)

    def plot(self, ax: Any = None) -> Any:
        """Bars: p95 elasticity to each class's variability and mean."""
        import matplotlib.pyplot as plt

        ax = ax or plt.gca()
        cl = sorted(self.classes, key=lambda c: c.d_p95_d_var)
        y = np.arange(len(cl))
        ax.barh(
            y + 0.2,
            [c.d_p95_d_var * 1e3 for c in cl],
            0.4,
            label="d p95 / d variability (per +100%, linearised)",
        )
        ax.barh(
            y - 0.2,
            [c.p95_drop_without_variability_s * 1e3 for c in cl],
            0.4,
            label="p95 drop if variability removed",
        )
        ax.set_yticks(y, [c.label for c in cl], fontsize=8)
        ax.set_xlabel("p95 step time change (ms)")
        ax.legend(fontsize=7, loc="lower right")
        ax.grid(axis="x", alpha=0.3)
        return ax


def sensitivity(
    job: Any,
    *,
    h: float = 0.05,
    classes: list[str] | None = None,
    rel_width: float | None = 5e-5,
) -> SensitivityResult:
    """Per-class derivatives of the step's mean, p95 and std (see the module notes).

    Parameters
    ----------
    job : JobConfig
    h : float
        Relative step of the central differences (0 < h < 0.5).
    classes : list of str, optional
        Kernel class keys (default: every class with time in the step).
    rel_width : float, optional
        Grid resolution of every evaluation (:class:`~prism_analytic.policy.GridPolicy`),
        default 5e-5 (5x finer than the engine's default, to resolve the small moves a
        class's variability makes); ``None``: the engine's default.
    """
    from ..policy import DEFAULT_POLICY, GridPolicy
    from ..workload.builder import build_step_graph
    from ..workload.mean_model import op_means

    if not (isinstance(h, int | float) and 0 < h < 0.5):
        raise ValueError(f"h must lie in (0, 0.5), got {h!r}")
    om = op_means(job)
    per_rank = class_time_per_rank(job, om)
    total = class_time_per_rank(job, om, exposed=False)
    keys = [k for k, _ in KERNEL_CLASSES]
    if classes is None:
        classes = [k for k in keys if total[k] > 0]
    bad = [c for c in classes if c not in keys]
    if bad:
        raise ValueError(f"unknown kernel class {bad[0]!r}; allowed: {keys}")
    pol = DEFAULT_POLICY if rel_width is None else GridPolicy(rel_width=rel_width)

    def predict(g):
        return _predict(g, policy=pol)

    base = predict(build_step_graph(job, means=om))
    q95 = float(base.quantile(0.95))
    out = []
    labels = dict(KERNEL_CLASSES)
    for c in classes:
        ev = {
            (what, v): predict(perturbed_graph(job, om, c, what, v))
            for what in ("mean", "variability")
            for v in (1 + h, 1 - h)
        }
        removed = predict(perturbed_graph(job, om, c, "variability", 0.0))

        def d(stat, what, ev=ev):
            hi, lo = ev[(what, 1 + h)], ev[(what, 1 - h)]
            return (float(stat(hi)) - float(stat(lo))) / (2 * h)

        def q(r):
            return r.quantile(0.95)

        dm_mu = d(lambda r: r.mean(), "mean")
        implicit = {}
        for what in ("mean", "variability"):
            hq = implicit_step(h, float(base.std()), abs(d(lambda r: r.mean(), what)))
            if hq == h:
                hi, lo = ev[(what, 1 + h)], ev[(what, 1 - h)]
            else:
                hi = predict(perturbed_graph(job, om, c, what, 1 + hq))
                lo = predict(perturbed_graph(job, om, c, what, 1 - hq))
            implicit[what] = implicit_quantile_derivative(base, hi, lo, hq, 0.95)
        out.append(
            ClassSensitivity(
                key=c,
                label=labels[c],
                time_per_rank_s=total[c],
                exposed_per_rank_s=per_rank[c],
                d_mean_d_mean=dm_mu,
                d_p95_d_mean=implicit["mean"],
                d_std_d_mean=d(lambda r: r.std(), "mean"),
                d_mean_d_var=d(lambda r: r.mean(), "variability"),
                d_p95_d_var=implicit["variability"],
                d_std_d_var=d(lambda r: r.std(), "variability"),
                d_p95_d_var_fd=d(q, "variability"),
                d_p95_d_mean_fd=d(q, "mean"),
                p95_drop_without_variability_s=q95 - float(removed.quantile(0.95)),
                criticality=dm_mu / total[c] if total[c] > 0 else 0.0,
            )
        )
    return SensitivityResult(
        job.name, float(base.mean()), q95, float(base.std()), float(h), tuple(out)
    )
