"""Agreement suite: the analytic engine against Monte Carlo on named step-graph scenarios.

Every scenario is a function returning a :class:`~prism_analytic.StepGraph`. For each one the
suite computes the analytic distribution, a seeded Monte Carlo sample (the exact semantics) and
the guaranteed bounds, and reports

* ``ks``: sup |F_analytic - F_mc| over the Monte Carlo sample points (``scipy.stats.kstest``);
* ``p50_rel_err``, ``p99_rel_err``, ``p999_rel_err``: analytic / Monte Carlo quantile - 1;
* ``spread_rel_err``: the same for the spread p99 - p50;
* ``in_bounds``: whether Monte Carlo's quantiles at 0.01 ... 0.999 are consistent with the
  ``bounds`` bracket: every level's distribution-free 99.9% order-statistic interval overlaps
  the bracket (``in_bounds_point`` is the stricter "the point quantile lies inside", which a
  tight bracket can fail by Monte Carlo noise alone);
* ``analytic_s``, ``montecarlo_s``, ``bounds_s``: compute times of the three engines;
* ``reconvergent``: the analytic engine needed its canonical form (``diagnostics["exact"]`` is
  False); then the same metrics for the baselines ``core_method="independent"`` and ``"clark"``
  (keys suffixed ``_independent`` and ``_clark``);
* Monte Carlo's own noise: ``mc_dkw_95`` (95% DKW half-width of its CDF), ``mc_pool_ks`` (the
  largest KS error of a pooled replica group, 0 when every group is sampled exactly) and
  ``p50_mc_ci``, ``p99_mc_ci``, ``p999_mc_ci`` (relative half-widths of 95% order-statistic
  intervals of its quantiles).

Targets (the verdict column): non-reconvergent scenarios need KS <= 0.005, |p99 error| <= 0.1%
and ``in_bounds``; reconvergent ones need KS <= 0.03, |p50| error <= 0.2%, |p99| error <= 0.3%,
|spread error| <= 3% (issue #8), and a smaller KS and |spread error| than both baselines. A miss
whose size is within Monte Carlo's own interval of the target is marked ``~noise``.

Beside it, ``issue8_verdict`` / ``issue8_misses`` judge the row exactly as issue #8's acceptance
words it, noise-strict (:mod:`~prism_analytic.validation.issue8`); its "beats independence and
plain Clark on KS" is the paired bootstrap ``ks_paired`` (baseline -> ``diff, low, high,
outcome, resamples``: :mod:`~prism_analytic.validation.paired_ks`), computed on reconvergent
rows; ``replicas`` is the scenario's largest replica group.

A verdict that Monte Carlo's noise decides is not a verdict: with ``confirm=True``
(``--confirm-noise``) such a row is re-measured once against a larger sample with an independent
seed, and that verdict stands, pass or fail (the rule, written down before it was run, is
:mod:`~prism_analytic.validation.confirmation`'s docstring).

Usage::

    prism agreement [--samples N] [--seed S] [--only NAME ...] [--json]
                    [--core-shape auto|normal|template|skew|kurtosis|cumulant] [--strict]
                    [--confirm-noise [--confirm-samples N]]
    prism agreement --timing [--json]      # replica-count independence of cost
    prism agreement --list

The module is importable: :data:`SCENARIOS`, :func:`evaluate`, :func:`run_suite`,
:func:`timing` are its API; :mod:`~prism_analytic.validation.report` formats and runs it
(``prism agreement`` calls :func:`~prism_analytic.validation.report.run`).
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

import prism_analytic as pa
from prism_analytic.graph import StepGraph

from .confirmation import (
    Comparison,
    confirmation_samples,
    confirmation_seed,
    confirmed_misses,
    mc_noise,
    noise_decided,
    target_comparison,
    unconfirmable_miss,
)
from .issue8 import issue8_verdict, largest_replica_group
from .paired_ks import paired_ks
from .power_reference import is_iid_max, power_reference, reference_metrics
from .scenarios import SCENARIOS, Scenario, pipeline

__all__ = [
    "Scenario",
    "SCENARIOS",
    "TARGETS",
    "BOUND_LEVELS",
    "DEFAULT_SAMPLES",
    "DEFAULT_SEED",
    "evaluate",
    "affordable_samples",
    "comparisons",
    "verdict",
    "run_suite",
    "timing",
]

#: Quantile levels at which Monte Carlo must be consistent with the guaranteed bounds.
BOUND_LEVELS = (0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999)
#: Per-level confidence of the order-statistic interval used by ``in_bounds`` (11 levels: the
#: family-wise confidence is still above 98.9%).
BOUND_CONFIDENCE = 0.999
BASELINES = ("independent", "clark")
DEFAULT_SAMPLES = 100_000
DEFAULT_SEED = 12345

TARGETS: dict[str, dict[str, float]] = {
    "exact": {"ks": 0.005, "p99": 1e-3},
    # issue #8: KS <= 0.03, spread <= 3%, p99 (of the max over 512 replicas) within 0.3%
    "reconvergent": {"ks": 0.03, "p50": 2e-3, "p99": 3e-3, "spread": 0.03},
}


# ----- metrics ----------------------------------------------------------------------------------
def _pct(q: float) -> str:
    return f"{q * 100:g}".replace(".", "")


def _rel(a: float, b: float) -> float:
    return float(a / b - 1.0) if b != 0 else math.inf


def _metrics(result: pa.StepTimeResult, mc: _McView) -> dict[str, float]:
    """KS and relative quantile/spread errors of ``result`` against the Monte Carlo sample."""
    ks = float(stats.kstest(mc.samples, result.cdf).statistic)
    q50, q99, q999 = (float(result.quantile(q)) for q in (0.5, 0.99, 0.999))
    return {
        "ks": ks,
        "p50_rel_err": _rel(q50, mc.q[0.5]),
        "p99_rel_err": _rel(q99, mc.q[0.99]),
        "p999_rel_err": _rel(q999, mc.q[0.999]),
        "spread_rel_err": _rel(q99 - q50, mc.q[0.99] - mc.q[0.5]),
        "mean_rel_err": _rel(result.mean(), mc.mean),
        "std_rel_err": _rel(result.std(), mc.std),
    }


@dataclass
class _McView:
    samples: np.ndarray
    q: dict[float, float]
    mean: float
    std: float


def _bounds_check(bounds: pa.StepTimeResult, mc: pa.StepTimeResult) -> dict[str, Any]:
    """Monte Carlo's quantiles against the guaranteed bracket at :data:`BOUND_LEVELS`."""
    overlap, inside, excess, finite = True, True, 0.0, True
    for q in BOUND_LEVELS:
        low, high = bounds.quantile_bracket(q)
        finite &= bool(np.isfinite(low) and np.isfinite(high))
        point = float(mc.quantile(q))
        ci_low, ci_high = mc.quantile_bracket(q, confidence=BOUND_CONFIDENCE)
        inside &= low <= point <= high
        overlap &= ci_high >= low and ci_low <= high
        excess = max(excess, (low - point) / abs(point), (point - high) / abs(point))
    return {
        "in_bounds": bool(overlap),
        "in_bounds_point": bool(inside),
        "bounds_excess": float(max(excess, 0.0)),
        "bounds_finite": finite,
    }


def _mc_half_width(mc: pa.StepTimeResult, q: float) -> float:
    """Half-width (seconds) of Monte Carlo's distribution-free 95% interval for its q-quantile."""
    low, high = mc.quantile_bracket(q, confidence=0.95)
    return float(high - low) / 2


def evaluate(
    name: str,
    samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
    *,
    bounds: bool = True,
    baselines: bool = True,
    core_shape: str | None = None,
    confirm: bool = False,
    confirm_samples: int | None = None,
) -> dict[str, Any]:
    """Every agreement metric of one scenario.

    Parameters
    ----------
    name : str
        A key of :data:`SCENARIOS`.
    samples : int
        Monte Carlo samples.
    seed : int
        Monte Carlo seed.
    bounds : bool
        Also run the ``bounds`` engine and check Monte Carlo against it.
    baselines : bool
        For reconvergent scenarios, also evaluate ``core_method="independent"`` and ``"clark"``.
    core_shape : str, optional
        ``core_shape`` of the analytic engine for every method (None: the engine's default).
    confirm : bool
        Apply the confirmation rule (:mod:`.confirmation`): a noise-decided row is re-measured
        once against a larger Monte Carlo sample with seed ``seed + 1``, and that row stands.
    confirm_samples : int, optional
        Size of that sample (None: :func:`~.confirmation.confirmation_samples`' default, 10x
        ``samples``, at least 1e6).

    Returns
    -------
    dict
        The row (see the module docstring for the keys), including ``verdict``, ``misses``,
        ``noise_decided`` (the comparisons inside Monte Carlo's noise, empty when the verdict
        is decided) and ``confirmation`` (None, or how the row was confirmed; the first row is
        then under ``first``).
    """
    if name not in SCENARIOS:
        raise KeyError(f"unknown scenario {name!r}; choose from {sorted(SCENARIOS)}")
    graph = SCENARIOS[name].build()
    shape = {} if core_shape is None else {"core_shape": core_shape}
    answers = _Answers(analytic=pa.predict(graph, "analytic", **shape))
    if bounds:
        try:
            answers.bounds = pa.predict(graph, "bounds")
        except pa.GraphError as exc:  # e.g. shared factors: no op-by-op form to bound
            answers.bounds_error = str(exc)
    if baselines and not answers.analytic.diagnostics["exact"]:
        for method in BASELINES:
            answers.baselines[method] = pa.predict(graph, "analytic", core_method=method, **shape)
    row = _against_monte_carlo(name, graph, answers, samples, seed, core_shape)
    row["confirmation"] = None
    if confirm and row["noise_decided"]:
        row = _confirm(row, graph, answers, confirm_samples, core_shape)
    return row


@dataclass
class _Answers:
    """The analytic side of a row, computed once and judged by one or two Monte Carlo samples."""

    analytic: pa.StepTimeResult
    bounds: pa.StepTimeResult | None = None
    bounds_error: str | None = None
    baselines: dict[str, pa.StepTimeResult] = field(default_factory=dict)


def _against_monte_carlo(
    name: str,
    graph: StepGraph,
    answers: _Answers,
    samples: int,
    seed: int,
    core_shape: str | None,
) -> dict[str, Any]:
    """The row of ``answers`` judged by a Monte Carlo sample of ``samples`` (guard-capped)."""
    analytic = answers.analytic
    requested, samples = samples, affordable_samples(graph, samples)
    mc = pa.predict(graph, "montecarlo", samples=samples, seed=seed)
    emp = mc.distribution
    view = _McView(
        emp.samples, {q: float(mc.quantile(q)) for q in (0.5, 0.99, 0.999)}, mc.mean(), mc.std()
    )
    description = SCENARIOS[name].description
    row: dict[str, Any] = {"name": name, "description": description, **_metrics(analytic, view)}
    row["in_bounds"] = None
    if answers.bounds_error is not None:
        row["bounds_error"] = answers.bounds_error
    if answers.bounds is not None:
        row.update(_bounds_check(answers.bounds, mc))
        row["bounds_s"] = answers.bounds.compute_time_s
    hw = {q: _mc_half_width(mc, q) for q in (0.5, 0.99, 0.999)}
    row.update(
        analytic_s=analytic.compute_time_s,
        montecarlo_s=mc.compute_time_s,
        reconvergent=not analytic.diagnostics["exact"],
        samples=samples,
        requested_samples=requested,
        seed=seed,
        core_shape=core_shape,
        # the shape each approximated core got (core_shape="auto" picks it per core)
        shapes_used=sorted({str(c.get("shape")) for c in analytic.diagnostics["cores"]}),
        mc_dkw_95=float(mc.diagnostics["dkw_95"]),
        mc_pool_ks=max((p["ks_error"] for p in mc.diagnostics["pooled_groups"]), default=0.0),
        **{f"p{_pct(q)}_mc_ci": hw[q] / abs(view.q[q]) for q in hw},
        spread_mc_ci=(hw[0.5] + hw[0.99]) / (view.q[0.99] - view.q[0.5]),
    )
    for method, res in answers.baselines.items():
        for key, value in _metrics(res, view).items():
            row[f"{key}_{method}"] = value
        row[f"analytic_s_{method}"] = res.compute_time_s
    row["replicas"] = largest_replica_group(graph)
    if answers.baselines:
        # issue #8's "beats on KS", tested paired: both distances on the same resamples of the
        # same sample (reported beside the suite's DKW comparison; used by issue8_verdict)
        paired = paired_ks(
            emp.samples,
            analytic.cdf,
            {m: res.cdf for m, res in answers.baselines.items()},
            seed=seed,
            widen=row["mc_pool_ks"],
        )
        row["ks_paired"] = {m: p.as_dict() for m, p in paired.items()}
    verdict_, misses = verdict(row)
    row["verdict"], row["misses"] = verdict_, misses
    row["noise_decided"] = noise_decided(comparisons(row))
    row["issue8_verdict"], row["issue8_misses"] = issue8_verdict(row)
    return row


def _confirm(
    first: dict[str, Any],
    graph: StepGraph,
    answers: _Answers,
    confirm_samples: int | None,
    core_shape: str | None,
) -> dict[str, Any]:
    """Rule 5, then rules 2-4 of :mod:`.confirmation`, on a noise-decided row ``first``."""
    target = confirmation_samples(first["requested_samples"], confirm_samples)
    seed = confirmation_seed(first["seed"])
    if affordable_samples(graph, target) < target and is_iid_max(graph):
        return _against_power_reference(first, graph, answers, target, seed)  # rule 5
    if affordable_samples(graph, target) <= first["samples"]:
        row = dict(first)
        row["misses"] = [*first["misses"], unconfirmable_miss(first["samples"])]
        row["verdict"] = "MISS"
        row["confirmation"] = {"status": "unconfirmed", "requested_samples": target}
        row["first"] = first
        return row
    start = time.perf_counter()
    row = _against_monte_carlo(first["name"], graph, answers, target, seed, core_shape)
    elapsed = time.perf_counter() - start
    row["misses"] = confirmed_misses(row["misses"], comparisons(row))
    row["verdict"] = "PASS" if not row["misses"] else "MISS"
    row["confirmation"] = {
        "status": "confirmed",
        "samples": row["samples"],
        "seed": seed,
        "requested_samples": target,
        "time_s": elapsed,
    }
    row["first"] = first
    return row


def _against_power_reference(
    first: dict[str, Any], graph: StepGraph, answers: _Answers, target: int, seed: int
) -> dict[str, Any]:
    """Rule 5 of :mod:`.confirmation`: a guard-capped row judged by the power reference.

    The step is the max over copies that are i.i.d. given its regimes, so
    :func:`~.power_reference.power_reference` (one copy sampled many times, a simultaneous
    Clopper-Pearson band) replaces Monte Carlo; its band fills Monte Carlo's noise columns and
    the confirmed verdict is strict (rule 3).
    """
    start = time.perf_counter()
    ref = power_reference(graph, seed=seed)
    stale = ("in_bounds_point", "bounds_excess")  # the first sample's, not the reference's
    row = {k: v for k, v in first.items() if k not in stale}
    row.update(
        reference_metrics(ref, answers.analytic, answers.baselines, answers.bounds, BOUND_LEVELS)
    )
    elapsed = time.perf_counter() - start
    row.update(samples=ref.bodies[0], seed=seed, montecarlo_s=elapsed, mc_pool_ks=0.0)
    misses = verdict(row)[1]
    row["noise_decided"] = noise_decided(comparisons(row))
    row["misses"] = confirmed_misses(misses, comparisons(row))
    row["verdict"] = "PASS" if not row["misses"] else "MISS"
    row.pop("ks_paired", None)  # the first sample's; the reference has no sample to resample
    row["issue8_verdict"], row["issue8_misses"] = issue8_verdict(row)
    row["confirmation"] = {
        "status": "confirmed",
        "method": "power reference",
        "samples": ref.bodies[0],
        "copy_graphs": len(ref.bodies),
        "seed": seed,
        "requested_samples": target,
        "time_s": elapsed,
        "band_confidence": ref.confidence,
        "band_events": ref.events,
        "draws": ref.draws,
    }
    row["first"] = first
    return row


def affordable_samples(graph: StepGraph, samples: int) -> int:
    """``samples``, or fewer where Monte Carlo's work guard would refuse them.

    The guard (``MonteCarloSettings.max_draws``) refuses e.g. 1e5 steps of 512 explicit 1F1B
    8x32 replicas (2.6e10 draws); the suite then runs the most it allows (about 19,000 there)
    and reports them (``samples``, ``requested_samples``; Monte Carlo's noise columns widen).
    """
    from prism_analytic.engines.montecarlo import MonteCarloSettings, estimated_draws

    settings = MonteCarloSettings(seed=0)
    one = estimated_draws(graph, 1, settings)
    per = max(estimated_draws(graph, 2, settings) - one, 1)
    if estimated_draws(graph, samples, settings) <= settings.max_draws:
        return samples
    return max(2, min(samples, (settings.max_draws - one + per) // per))


def comparisons(row: dict[str, Any]) -> list[Comparison]:
    """The comparisons :func:`verdict` is made of, each with whether it is inside MC's noise.

    Noise: 95% DKW half-width plus the pooled groups' KS error for KS, 95% quantile intervals
    for the quantiles and the spread. Targets are met when ``|value| <= target`` and inside the
    noise when ``| |value| - target | <= noise``; the analytic core beats a baseline when its
    ``|error|`` is smaller. The same Monte Carlo sample judges both, but its noise can still
    swap two close methods: for KS when the two differ by at most the noise; for the spread
    when the midpoint of the two spreads lies inside Monte Carlo's interval of its spread
    (the exact condition for a swap). A failed bounds check (99.9% intervals, already
    noise-aware) is decided outside the noise.
    """
    noise = mc_noise(row)
    out: list[Comparison] = []

    def target(metric: str, value: float, goal: float) -> None:
        out.append(target_comparison(metric, value, goal, noise[metric]))

    if row["reconvergent"]:
        t = TARGETS["reconvergent"]
        target("ks", row["ks"], t["ks"])
        target("p50", row["p50_rel_err"], t["p50"])
        target("p99", row["p99_rel_err"], t["p99"])
        target("spread", row["spread_rel_err"], t["spread"])
        if f"ks_{BASELINES[0]}" in row:
            for m in BASELINES:
                ours, theirs = row["ks"], row[f"ks_{m}"]
                out.append(
                    Comparison(
                        f"ks<{m}", bool(ours < theirs), bool(abs(ours - theirs) <= noise["ks"])
                    )
                )
            for m in BASELINES:
                # two spreads s_a, s_b against Monte Carlo's s_mc: s_a is the closer one exactly
                # when s_mc lies on its side of the midpoint (s_a + s_b) / 2, so the sample's
                # noise can swap them only if that midpoint, (e_a + e_b) / 2 relative to s_mc,
                # lies inside s_mc's interval (|e_a| - |e_b| overstates it for errors of one sign)
                ours, theirs = row["spread_rel_err"], row[f"spread_rel_err_{m}"]
                out.append(
                    Comparison(
                        f"spread<{m}",
                        bool(abs(ours) < abs(theirs)),
                        bool(abs(ours + theirs) / 2 <= noise["spread"]),
                    )
                )
    else:
        t = TARGETS["exact"]
        target("ks", row["ks"], t["ks"])
        target("p99", row["p99_rel_err"], t["p99"])
        if row.get("in_bounds") is not None:
            out.append(Comparison("bounds", bool(row["in_bounds"]), False))
    return out


def verdict(row: dict[str, Any]) -> tuple[str, list[str]]:
    """``("PASS" | "MISS", misses)`` of a row against :data:`TARGETS`.

    A miss is named after the metric (``ks``, ``p50``, ``p99``, ``spread``, ``bounds``, or
    ``ks>clark``, ``spread>independent``... when a baseline is better by more than Monte
    Carlo's own noise); ``~noise`` is appended when the shortfall is within that noise (95% DKW
    half-width for KS, 95% quantile intervals for the quantiles and the spread). A baseline
    at least as good but within that noise is ``ks tie clark (within MC noise)``: not a
    defeat the sample can show, but still a miss (the target is to be better). The
    comparisons are :func:`comparisons`'; :mod:`.confirmation` re-measures the rows they
    leave to the noise.
    """
    misses: list[str] = []
    comps = comparisons(row)
    for c in comps:
        if "<" not in c.name and not c.met:
            misses.append(c.name + ("~noise" if c.within_noise else ""))
    for metric in ("ks", "spread"):
        # a baseline ahead by less than the noise is a tie, not a defeat; either way the
        # target "better than both baselines" is not met
        worse = [c for c in comps if c.name.startswith(f"{metric}<") and not c.met]
        beaten = [c.name.split("<")[1] for c in worse if not c.within_noise]
        tied = [c.name.split("<")[1] for c in worse if c.within_noise]
        if beaten:
            misses.append(f"{metric}>{'+'.join(beaten)}")
        if tied:
            misses.append(f"{metric} tie {'+'.join(tied)} (within MC noise)")
    return ("PASS" if not misses else "MISS"), misses


def run_suite(
    names: Iterable[str] | None = None,
    samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
    *,
    bounds: bool = True,
    baselines: bool = True,
    core_shape: str | None = None,
    confirm: bool = False,
    confirm_samples: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Evaluate the named scenarios (all by default), in registration order.

    ``progress`` receives one line per finished scenario; the other options are
    :func:`evaluate`'s.
    """
    names = list(SCENARIOS) if names is None else list(names)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise ValueError(f"unknown scenario(s) {unknown}; choose from {sorted(SCENARIOS)}")
    rows = []
    for name in names:
        start = time.perf_counter()
        row = evaluate(
            name,
            samples,
            seed,
            bounds=bounds,
            baselines=baselines,
            core_shape=core_shape,
            confirm=confirm,
            confirm_samples=confirm_samples,
        )
        rows.append(row)
        if progress is not None:
            conf = row["confirmation"]
            note = ""
            if conf is not None:
                first = row["first"]["verdict"]
                note = (
                    f", first {first}; confirmed at {conf['samples']:,} samples, seed "
                    f"{conf['seed']} in {conf['time_s']:.1f} s"
                    if conf["status"] == "confirmed"
                    else f", first {first}; unconfirmed (MC work guard)"
                )
            progress(f"{name}: {row['verdict']} ({time.perf_counter() - start:.1f} s{note})")
    return rows


# ----- timing -----------------------------------------------------------------------------------
def timing(
    replicas: Sequence[int] = (1, 512, 1_000, 1_000_000),
    stages: int = 16,
    microbatches: int = 64,
    repeats: int = 5,
) -> dict[str, Any]:
    """Time analytic ``predict`` on a 1F1B pipeline inside replica groups of several sizes.

    The cost should not depend on the number of replicas (DESIGN.md §3): the ratio of the
    slowest to the fastest time is reported (best of ``repeats`` per size), for wall time and
    for this process's CPU time (less sensitive to other processes on a shared machine).

    Returns
    -------
    dict
        ``{"pipeline": "16x64", "times_s": {n: wall seconds}, "cpu_s": {n: CPU seconds},
        "ratio_max_min": float, "ratio_max_min_cpu": float, "p99_s": {n: analytic p99}}``.
    """
    body = pipeline(stages, microbatches)
    graphs = {}
    for n in replicas:
        graphs[n] = StepGraph(f"pipe_{stages}x{microbatches}_x{n}")
        graphs[n].add_replica_group("replicas", body, n)
    times = dict.fromkeys(replicas, math.inf)
    cpu = dict.fromkeys(replicas, math.inf)
    p99: dict[int, float] = {}
    # sizes interleaved within each repeat, so that a change in machine load hits all of them
    for _ in range(repeats):
        for n, g in graphs.items():
            # as timeit does: a collection triggered by an earlier run must not be billed here
            gc.collect()
            gc.disable()
            try:
                start, start_cpu = time.perf_counter(), time.process_time()
                res = pa.predict(g, "analytic")
                cpu[n] = min(cpu[n], time.process_time() - start_cpu)
                times[n] = min(times[n], time.perf_counter() - start)
            finally:
                gc.enable()
            p99[n] = float(res.quantile(0.99))
    return {
        "pipeline": f"{stages}x{microbatches}",
        "times_s": times,
        "cpu_s": cpu,
        "ratio_max_min": max(times.values()) / min(times.values()),
        "ratio_max_min_cpu": max(cpu.values()) / min(cpu.values()),
        "p99_s": p99,
    }
