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

**Numerical resolution.** Kernel-class variability often moves the step by far less than one
cell of the grid (on llama3-8b at 64 GPUs a GEMM's variability moves the p95 by ~4e-6 s against a
1e-4 s cell and a 8e-4 s bracket). A difference of two gridded laws then carries the lattice's
rounding, which is correlated between the two but not identical. Every derivative (and the p95
drop) is therefore evaluated on two lattices, the policy's ``rel_width`` and twice it, each pair
of laws on one common policy; its **resolution** is the change between the two lattices (and, for
the p95, the disagreement of the implicit rule with finite differences). A value whose size is
not at least twice its resolution is reported as ``None`` with the reason in
:attr:`ClassSensitivity.unresolved`, instead of a number that is lattice noise.

The two lattices are the ones the engine really uses: ``predict`` coarsens a requested
``rel_width`` where a replica speed mixture would overflow its cells
(:func:`~prism_analytic.engines.resolution.resolve_policy`), so the coarse lattice is twice the
*resolved* fine one (on llama3-405b at 16,384 GPUs both requested widths resolved to the same
1.55e-4, the "change between lattices" was 0 and lattice noise passed as resolved). A
derivative whose laws were evaluated on different lattices is left unresolved.

Two further floors enter the resolution (each is a lower bound on the value's error, so the
resolution stays an estimate, not a guarantee):

* **sign**: the step is built from sums and maxima of independent parts, which is
  nondecreasing and convex in every part. So a longer class never shortens the step
  (``d_mean_d_mean``, ``d_p95_d_mean`` and its finite difference are >= 0) and a mean-preserving
  spread of a class never lowers the step's mean (``d_mean_d_var`` >= 0: ``E[g(mu + lam (X -
  mu))]`` is convex in ``lam`` with zero slope at 0 for convex ``g``). A value of the excluded
  sign is at least its own size away from the truth: its resolution is at least ``|value|``.
* **round-off**: each law's rigorous CDF round-off bound ``r`` (``AnalyticResult.roundoff``)
  moves a mean by at most ``r`` x its lattice's extent and a quantile by about ``r / density``;
  divided by the ``2 h`` of the difference.

Also reported per class: the drop in p95 when its variability is removed (``lam = 0``), and its
**criticality index** ``(d E[step] / d log mean_c) / (class time per GPU per step)``: step
seconds per second of the class's work. 0: hidden behind other work or off the critical path;
1: every second adds a second; above 1: amplified (the step waits for the slowest replica,
whose persistent speed factor stretches the class's time, e.g. 1.1x on a degraded GPU).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
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
    "resolve",
    "DERIVATIVE_FIELDS",
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


#: Derivative fields of :class:`ClassSensitivity` that are checked for resolution.
DERIVATIVE_FIELDS = (
    "d_mean_d_mean",
    "d_p95_d_mean",
    "d_std_d_mean",
    "d_mean_d_var",
    "d_p95_d_var",
    "d_std_d_var",
    "d_p95_d_var_fd",
    "d_p95_d_mean_fd",
    "p95_drop_without_variability_s",
)

#: A value is resolved when its size is at least this many times its numerical resolution.
RESOLVED_RATIO = 2.0

#: Fields the model's structure makes >= 0 (see the module notes), with the reason.
NONNEGATIVE_FIELDS = {
    "d_mean_d_mean": "a longer class cannot shorten a step of sums and maxima",
    "d_p95_d_mean": "a longer class cannot shorten a step of sums and maxima",
    "d_p95_d_mean_fd": "a longer class cannot shorten a step of sums and maxima",
    "d_mean_d_var": "a mean-preserving spread cannot lower the mean of sums and maxima"
    " (max is convex)",
}


@dataclass(frozen=True)
class ClassSensitivity:
    """One kernel class's derivatives (seconds per unit relative change).

    A derivative is ``None`` when it is below the numerical resolution (see the module notes);
    ``unresolved`` then says why, and ``resolution_s`` holds every field's resolution (its
    change between the two lattices, for the p95 also the implicit-vs-finite-difference gap).
    """

    key: str
    label: str
    time_per_rank_s: float
    exposed_per_rank_s: float
    d_mean_d_mean: float | None
    d_p95_d_mean: float | None
    d_std_d_mean: float | None
    d_mean_d_var: float | None
    d_p95_d_var: float | None
    d_std_d_var: float | None
    d_p95_d_var_fd: float | None
    d_p95_d_mean_fd: float | None
    p95_drop_without_variability_s: float | None
    criticality: float | None
    resolution_s: dict[str, float] = field(default_factory=dict)
    unresolved: dict[str, str] = field(default_factory=dict)


def _sort_key(v: float | None) -> float:
    return -np.inf if v is None else v


def _fmt(v: float | None, width: int) -> str:
    return f"{'n/r':>{width}}" if v is None else f"{v * 1e3:>{width}.4g}"


@dataclass(frozen=True)
class SensitivityResult:
    """Per-class sensitivities of one job's step time."""

    job: str
    mean_s: float
    p95_s: float
    std_s: float
    h: float
    classes: tuple[ClassSensitivity, ...]
    rel_widths: tuple[float, float] = (5e-5, 1e-4)
    requested_rel_width: float | None = None

    def ranking(self, by: str = "d_p95_d_var") -> list[str]:
        """Class keys, largest first (unresolved values last)."""
        return [c.key for c in sorted(self.classes, key=lambda c: -_sort_key(getattr(c, by)))]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (unresolved derivatives are ``None``, their reasons in ``unresolved``)."""
        return {
            "job": self.job,
            "mean_s": self.mean_s,
            "p95_s": self.p95_s,
            "std_s": self.std_s,
            "h": self.h,
            "rel_widths": list(self.rel_widths),
            "requested_rel_width": self.requested_rel_width,
            "ranking_by_p95_variability": self.ranking("d_p95_d_var"),
            "ranking_by_p95_drop": self.ranking("p95_drop_without_variability_s"),
            "classes": [asdict(c) for c in self.classes],
        }

    def summary(self) -> str:
        """A table (milliseconds of step statistic per +100% of the parameter)."""
        lines = [
            f"{self.job}: step mean {self.mean_s:.4g} s, p95 {self.p95_s:.4g} s, std"
            f" {self.std_s:.4g} s",
            "elasticities in ms of step statistic per +100% of the class's mean / variability;"
            f" n/r: below the numerical resolution (lattices rel_width {self.rel_widths[0]:g}"
            f" and {self.rel_widths[1]:g} disagree by more than half the value, or its sign is"
            " one the model excludes)",
            f"{'class':<17} {'ms/GPU':>8} {'exposed':>8} {'dMean/dmu':>10} {'dP95/dmu':>9}"
            f" {'dMean/dvar':>10} {'dP95/dvar':>9} {'(FD)':>8} {'dStd/dvar':>9} {'p95 drop':>9}"
            f" {'crit.':>6}",
        ]
        for c in sorted(self.classes, key=lambda c: -_sort_key(c.d_p95_d_var)):
            crit = f"{'n/r':>6}" if c.criticality is None else f"{c.criticality:>6.3f}"
            lines.append(
                f"{c.label:<17} {c.time_per_rank_s * 1e3:>8.4g}"
                f" {c.exposed_per_rank_s * 1e3:>8.4g} {_fmt(c.d_mean_d_mean, 10)}"
                f" {_fmt(c.d_p95_d_mean, 9)} {_fmt(c.d_mean_d_var, 10)}"
                f" {_fmt(c.d_p95_d_var, 9)} {_fmt(c.d_p95_d_var_fd, 8)}"
                f" {_fmt(c.d_std_d_var, 9)} {_fmt(c.p95_drop_without_variability_s, 9)} {crit}"
            )
        n_unres = sum(len(c.unresolved) for c in self.classes)
        if n_unres:
            asked = self.requested_rel_width
            if asked is not None and self.rel_widths[0] > asked:
                # predict coarsened the request to fit its cell budget: asking finer changes nothing
                hint = (
                    f"the engine coarsened the requested rel_width {asked:g} to"
                    f" {self.rel_widths[0]:g} for this graph (cell budget), so a finer"
                    " --rel-width cannot resolve them"
                )
            else:
                hint = "a finer --rel-width may resolve them"
            lines.append(
                f"{n_unres} value(s) unresolved: smaller than twice their numerical resolution"
                f" or of an excluded sign (see 'unresolved' in --json); {hint}"
            )
        return "\n".join(lines)

    def plot(self, ax: Any = None) -> Any:
        """Bars: p95 elasticity to each class's variability and mean (unresolved: no bar)."""
        import matplotlib.pyplot as plt

        def ms(v: float | None) -> float:
            return np.nan if v is None else v * 1e3

        ax = ax or plt.gca()
        cl = sorted(self.classes, key=lambda c: _sort_key(c.d_p95_d_var))
        y = np.arange(len(cl))
        ax.barh(
            y + 0.2,
            [ms(c.d_p95_d_var) for c in cl],
            0.4,
            label="d p95 / d variability (per +100%, linearised)",
        )
        ax.barh(
            y - 0.2,
            [ms(c.p95_drop_without_variability_s) for c in cl],
            0.4,
            label="p95 drop if variability removed",
        )
        ax.set_yticks(y, [c.label for c in cl], fontsize=8)
        ax.set_xlabel("p95 step time change (ms); no bar: below numerical resolution")
        ax.legend(fontsize=7, loc="lower right")
        ax.grid(axis="x", alpha=0.3)
        return ax


def _raw_derivatives(
    job: Any, om: Any, c: str, h: float, pol: Any, base: Any
) -> tuple[dict[str, float], dict[str, float], set[float]]:
    """Every derivative of class ``c`` with all laws on the one policy ``pol`` (``base``'s).

    Returns
    -------
    values : dict
        The derivatives (see :data:`DERIVATIVE_FIELDS`).
    floors : dict
        Each value's round-off floor (see the module notes).
    widths : set of float
        The ``rel_width`` every law was really evaluated on (one element when they share it).
    """
    laws = [base]

    def predict(g):
        r = _predict(g, policy=pol)
        laws.append(r)
        return r

    # the variability's base through the perturbation path (factor 1), so that it and the
    # perturbed and removed laws are built the same way and differ only by the perturbation
    base_var = predict(perturbed_graph(job, om, c, "variability", 1.0))
    ev = {
        (what, v): predict(perturbed_graph(job, om, c, what, v))
        for what in ("mean", "variability")
        for v in (1 + h, 1 - h)
    }
    removed = predict(perturbed_graph(job, om, c, "variability", 0.0))

    def d(stat, what):
        hi, lo = ev[(what, 1 + h)], ev[(what, 1 - h)]
        return (float(stat(hi)) - float(stat(lo))) / (2 * h)

    def q(r):
        return r.quantile(0.95)

    implicit = {}
    for what, b in (("mean", base), ("variability", base_var)):
        hq = implicit_step(h, float(b.std()), abs(d(lambda r: r.mean(), what)))
        if hq == h:
            hi, lo = ev[(what, 1 + h)], ev[(what, 1 - h)]
        else:
            hi = predict(perturbed_graph(job, om, c, what, 1 + hq))
            lo = predict(perturbed_graph(job, om, c, what, 1 - hq))
        implicit[what] = implicit_quantile_derivative(b, hi, lo, hq, 0.95)
    values = {
        "d_mean_d_mean": d(lambda r: r.mean(), "mean"),
        "d_p95_d_mean": implicit["mean"],
        "d_std_d_mean": d(lambda r: r.std(), "mean"),
        "d_mean_d_var": d(lambda r: r.mean(), "variability"),
        "d_p95_d_var": implicit["variability"],
        "d_std_d_var": d(lambda r: r.std(), "variability"),
        "d_p95_d_var_fd": d(q, "variability"),
        "d_p95_d_mean_fd": d(q, "mean"),
        "p95_drop_without_variability_s": float(q(base_var)) - float(q(removed)),
    }
    return values, _roundoff_floors(laws, h), {_rel_width(r) for r in laws}


def _rel_width(r: Any) -> float:
    """The ``rel_width`` a result was evaluated on (``predict`` may coarsen the requested one)."""
    return float(r.diagnostics["policy"]["rel_width"])


def _roundoff_floors(laws: list[Any], h: float) -> dict[str, float]:
    """Error floors from floating-point round-off: a CDF error ``r`` on each of two laws.

    A mean moves by at most ``r`` x the lattice's extent; a quantile by about ``r / density``
    (density by a symmetric difference over 0.1% of the std, as in the implicit rule).
    """
    r = max(float(getattr(x, "roundoff", 0.0)) for x in laws)
    if not r > 0:
        return {}
    base = laws[0]
    # the engine's mean is a sum over the lattice's points: a CDF error moves it by at most
    # r x the lattice's extent
    pts = np.asarray(getattr(base.distribution, "points", [0.0, np.inf]), dtype=float)
    width = float(pts[-1] - pts[0])
    q, w = float(base.quantile(0.95)), max(1e-3 * float(base.std()), 1e-12)
    dens = (float(base.cdf(q + w)) - float(base.cdf(q - w))) / (2 * w)
    mean_floor = 2 * r * width / (2 * h)
    q_floor = 2 * r / dens / (2 * h) if dens > 0 else np.inf
    return {
        "d_mean_d_mean": mean_floor,
        "d_mean_d_var": mean_floor,
        "d_p95_d_mean": q_floor,
        "d_p95_d_var": q_floor,
        "d_p95_d_var_fd": q_floor,
        "d_p95_d_mean_fd": q_floor,
        "p95_drop_without_variability_s": 2 * r / dens if dens > 0 else np.inf,
    }


def resolve(
    fine: dict[str, float],
    coarse: dict[str, float],
    ratio: float = RESOLVED_RATIO,
    floors: dict[str, float] | None = None,
) -> tuple[dict[str, float | None], dict[str, float], dict[str, str]]:
    """Keep the values that the lattice resolves.

    Parameters
    ----------
    fine, coarse : dict
        The same quantities computed on the fine and on the coarse lattice.
    ratio : float
        A value is kept when ``|fine| >= ratio * resolution``.
    floors : dict, optional
        Further lower bounds on each value's error (e.g. from round-off).

    Returns
    -------
    values : dict
        ``fine``'s values, ``None`` where unresolved.
    resolution : dict
        ``|fine - coarse|``; for the implicit p95 derivatives also at least
        ``|implicit - finite difference|``; at least ``floors``; and, for a field of
        :data:`NONNEGATIVE_FIELDS` with a negative value, at least ``|value|``.
    reasons : dict
        Why each unresolved value was left out.
    """
    floors = floors or {}
    pairs = {"d_p95_d_var": "d_p95_d_var_fd", "d_p95_d_mean": "d_p95_d_mean_fd"}
    values: dict[str, float | None] = {}
    res: dict[str, float] = {}
    reasons: dict[str, str] = {}
    for k, v in fine.items():
        r = abs(v - coarse[k])
        if k in pairs:
            r = max(r, abs(v - fine[pairs[k]]))
        if k in pairs.values():
            r = max(r, abs(v - fine[next(a for a, b in pairs.items() if b == k)]))
        r = max(r, floors.get(k, 0.0))
        wrong_sign = k in NONNEGATIVE_FIELDS and v < 0
        if wrong_sign:  # the truth is >= 0, so the error is at least |v|
            r = max(r, abs(v))
        res[k] = r
        if np.isfinite(v) and np.isfinite(r) and abs(v) >= ratio * r and v != 0:
            values[k] = v
        elif wrong_sign:
            values[k] = None
            reasons[k] = (
                f"below the numerical resolution: {v:.3g} s is negative, but"
                f" {NONNEGATIVE_FIELDS[k]}, so its error is at least its size (coarse lattice:"
                f" {coarse[k]:.3g} s)"
            )
        else:
            values[k] = None
            reasons[k] = (
                f"below the numerical resolution: {v:.3g} s on the fine lattice, {coarse[k]:.3g}"
                f" s on the coarse one (resolution {r:.2g} s; needs |value| >= {ratio:g}x it)"
            )
    return values, res, reasons


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
        Requested grid resolution of the fine lattice
        (:class:`~prism_analytic.policy.GridPolicy`), default 5e-5 (5x finer than the
        engine's default); ``predict`` may coarsen it for the graph, and the resolution check
        uses twice the width really used (both in :attr:`SensitivityResult.rel_widths`).
        ``None``: the engine's default.
    """
    from ..engines.resolution import resolve_policy
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
    requested = DEFAULT_POLICY.rel_width if rel_width is None else float(rel_width)
    graph = build_step_graph(job, means=om)
    # the coarse lattice doubles the lattice predict really uses (it may coarsen the request)
    fine_pol = resolve_policy(graph, GridPolicy(rel_width=requested))
    fine_rw = fine_pol.rel_width
    coarse_pol = resolve_policy(graph, GridPolicy(rel_width=min(2 * fine_rw, 0.5)))
    coarse_rw = coarse_pol.rel_width
    base = _predict(graph, policy=fine_pol)
    base_coarse = _predict(graph, policy=coarse_pol)
    q95 = float(base.quantile(0.95))
    out = []
    labels = dict(KERNEL_CLASSES)
    for c in classes:
        fine, floors, fine_w = _raw_derivatives(job, om, c, h, fine_pol, base)
        coarse, _, coarse_w = _raw_derivatives(job, om, c, h, coarse_pol, base_coarse)
        values, res, reasons = resolve(fine, coarse, floors=floors)
        if len(fine_w) > 1 or len(coarse_w) > 1 or fine_w == coarse_w:
            # the differences compare laws on different lattices, or the "two" lattices are
            # one: no resolution estimate, so nothing is reported as resolved
            why = (
                f"no resolution estimate: the laws were evaluated on rel_width {sorted(fine_w)}"
                f" (fine) and {sorted(coarse_w)} (coarse), not one distinct lattice each"
            )
            values = dict.fromkeys(values)
            reasons = dict.fromkeys(values, why)
        dm_mu = values["d_mean_d_mean"]
        out.append(
            ClassSensitivity(
                key=c,
                label=labels[c],
                time_per_rank_s=total[c],
                exposed_per_rank_s=per_rank[c],
                **values,
                criticality=(dm_mu / total[c] if total[c] > 0 else 0.0)
                if dm_mu is not None
                else None,
                resolution_s=res,
                unresolved=reasons,
            )
        )
    return SensitivityResult(
        job.name,
        float(base.mean()),
        q95,
        float(base.std()),
        float(h),
        tuple(out),
        (fine_rw, coarse_rw),
        requested,
    )
