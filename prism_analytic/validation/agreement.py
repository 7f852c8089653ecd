"""Agreement suite: the analytic engine against Monte Carlo on named step-graph scenarios.

Every scenario is a function returning a :class:`~prism_analytic.StepGraph`. For each one the
suite computes the analytic distribution, a seeded Monte Carlo sample (the exact semantics) and
the guaranteed bounds, and judges the analytic answer in the units users read: its step
quantiles at :data:`LEVELS` (p50, p90, p99, p99.9).

* ``quantiles``: per level, the analytic value, Monte Carlo's quantile and its distribution-free
  order-statistic interval (confidence :data:`INTERVAL_CONFIDENCE` per level, widened by any
  pooled replica group's KS error; an end the sample cannot resolve is infinite, ``None`` in
  JSON), the error ``analytic - Monte Carlo`` in seconds and relative to the quantile, and
  whether it is within the tolerance
  (:func:`~prism_analytic.engines.crosscheck.judge_quantile`: inside the interval widened by
  ``tolerance * |quantile|``; an infinite end resolves no error towards it);
  ``p50_err_s``, ``p50_rel_err``, ... repeat them flat;
* ``verdict``: PASS when every level is within the tolerance and Monte Carlo is consistent with
  the guaranteed bounds; ``misses`` names the levels (and ``bounds``) that are not;
* ``in_bounds``: Monte Carlo's quantiles at 0.01 ... 0.999 are consistent with the ``bounds``
  bracket: every level's 99.9% order-statistic interval overlaps it (``in_bounds_point``: the
  point quantile lies inside);
* ``ks``: sup |F_analytic - F_mc| over the sample: a diagnostic only (scale free, it flags
  0.01% quantile shifts of a narrow law and can miss a tail error);
* ``analytic_s``, ``montecarlo_s``, ``bounds_s``: compute times; ``reconvergent``: the
  analytic engine needed its canonical form; ``mc_dkw_95``, ``mc_pool_ks``: Monte Carlo's own
  noise (95% DKW half-width, largest pooled group's KS error).

Usage::

    prism agreement [--samples N] [--seed S] [--only NAME ...] [--json] [--tolerance REL]
                    [--core-shape auto|normal|skew|kurtosis|cumulant] [--strict]
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
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

import prism_analytic as pa
from prism_analytic.engines.crosscheck import DEFAULT_TOLERANCE, check_tolerance, judge_quantile
from prism_analytic.graph import StepGraph

from .scenarios import SCENARIOS, Scenario, pipeline

__all__ = [
    "Scenario",
    "SCENARIOS",
    "LEVELS",
    "INTERVAL_CONFIDENCE",
    "BOUND_LEVELS",
    "DEFAULT_SAMPLES",
    "DEFAULT_SEED",
    "DEFAULT_TOLERANCE",
    "evaluate",
    "affordable_samples",
    "quantile_rows",
    "verdict",
    "run_suite",
    "timing",
]

#: Step quantiles the verdict judges.
LEVELS = (0.5, 0.9, 0.99, 0.999)
#: Confidence of Monte Carlo's interval at each judged level (4 levels: jointly >= 99.6%).
INTERVAL_CONFIDENCE = 0.999
#: Quantile levels at which Monte Carlo must be consistent with the guaranteed bounds.
BOUND_LEVELS = (0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999)
#: Per-level confidence of the order-statistic interval used by ``in_bounds`` (11 levels: the
#: family-wise confidence is still above 98.9%).
BOUND_CONFIDENCE = 0.999
DEFAULT_SAMPLES = 100_000
DEFAULT_SEED = 12345


def _pct(q: float) -> str:
    return f"{q * 100:g}".replace(".", "")


def quantile_rows(
    result: pa.StepTimeResult, mc: pa.StepTimeResult, tolerance: float
) -> dict[str, dict[str, Any]]:
    """Per level of :data:`LEVELS`: the analytic quantile's error against Monte Carlo's interval.

    Each row: ``analytic_s``, ``montecarlo_s``, ``interval_s`` (Monte Carlo's
    :data:`INTERVAL_CONFIDENCE` interval, ``None`` for an end it cannot resolve) and
    :func:`~prism_analytic.engines.crosscheck.judge_quantile`'s ``error_s``, ``error_rel``,
    ``error_band_s``, ``within_tolerance``.
    """
    rows = {}
    for q in LEVELS:
        est = float(result.quantile(q))
        point = float(mc.quantile(q))
        low, high = (float(v) for v in mc.quantile_bracket(q, confidence=INTERVAL_CONFIDENCE))
        judged = judge_quantile(est, point, low, high, tolerance)
        rows[str(q)] = {
            "analytic_s": est,
            "montecarlo_s": point,
            "interval_s": [v if math.isfinite(v) else None for v in (low, high)],
            **judged,
        }
    return rows


def _rel(a: float, b: float) -> float:
    return float(a / b - 1.0) if b != 0 else math.inf


@dataclass
class _McView:
    """A Monte Carlo sample and its moments, for :func:`_metrics` (study scripts)."""

    samples: np.ndarray
    q: dict[float, float]
    mean: float
    std: float


def _metrics(result: pa.StepTimeResult, mc: _McView) -> dict[str, float]:
    """KS and relative quantile/spread errors against a sample (diagnostics of study scripts)."""
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


def _mc_half_width(mc: pa.StepTimeResult, q: float) -> float:
    """Half-width (seconds) of Monte Carlo's distribution-free 95% interval for its q-quantile."""
    low, high = mc.quantile_bracket(q, confidence=0.95)
    return float(high - low) / 2


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


def evaluate(
    name: str,
    samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
    *,
    bounds: bool = True,
    core_shape: str | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> dict[str, Any]:
    """Every agreement metric of one scenario.

    Parameters
    ----------
    name : str
        A key of :data:`SCENARIOS`.
    samples : int
        Monte Carlo samples (fewer where Monte Carlo's work guard would refuse them:
        :func:`affordable_samples`).
    seed : int
        Monte Carlo seed.
    bounds : bool
        Also run the ``bounds`` engine and check Monte Carlo against it.
    core_shape : str, optional
        ``core_shape`` of the analytic engine (None: the engine's default).
    tolerance : float
        Relative error of a quantile accepted (default 0.001: 0.1% of the quantile).

    Returns
    -------
    dict
        The row (see the module docstring for the keys), including ``verdict`` and
        ``misses``.
    """
    if name not in SCENARIOS:
        raise KeyError(f"unknown scenario {name!r}; choose from {sorted(SCENARIOS)}")
    tolerance = check_tolerance(tolerance)
    graph = SCENARIOS[name].build()
    shape = {} if core_shape is None else {"core_shape": core_shape}
    analytic = pa.predict(graph, "analytic", **shape)
    bounds_result, bounds_error = None, None
    if bounds:
        try:
            bounds_result = pa.predict(graph, "bounds")
        except pa.GraphError as exc:  # e.g. shared factors: no op-by-op form to bound
            bounds_error = str(exc)
    requested, samples = samples, affordable_samples(graph, samples)
    mc = pa.predict(graph, "montecarlo", samples=samples, seed=seed)
    row: dict[str, Any] = {"name": name, "description": SCENARIOS[name].description}
    row["quantiles"] = quantile_rows(analytic, mc, tolerance)
    for q, r in row["quantiles"].items():
        row[f"p{_pct(float(q))}_err_s"] = r["error_s"]
        row[f"p{_pct(float(q))}_rel_err"] = r["error_rel"]
    row["ks"] = float(stats.kstest(mc.distribution.samples, analytic.cdf).statistic)
    row["in_bounds"] = None
    if bounds_error is not None:
        row["bounds_error"] = bounds_error
    if bounds_result is not None:
        row.update(_bounds_check(bounds_result, mc))
        row["bounds_s"] = bounds_result.compute_time_s
    row.update(
        analytic_s=analytic.compute_time_s,
        montecarlo_s=mc.compute_time_s,
        reconvergent=not analytic.diagnostics["exact"],
        samples=samples,
        requested_samples=requested,
        seed=seed,
        core_shape=core_shape,
        tolerance=tolerance,
        # the shape each approximated core got (core_shape="auto" picks it per core)
        shapes_used=sorted({str(c.get("shape")) for c in analytic.diagnostics["cores"]}),
        mc_dkw_95=float(mc.diagnostics["dkw_95"]),
        mc_pool_ks=max((p["ks_error"] for p in mc.diagnostics["pooled_groups"]), default=0.0),
    )
    row["verdict"], row["misses"] = verdict(row)
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


def verdict(row: dict[str, Any]) -> tuple[str, list[str]]:
    """``("PASS" | "MISS", misses)``: every judged quantile within tolerance, and in bounds.

    A miss is the level with its error (``"p99.9 -12.95%"``), or ``bounds`` when Monte Carlo's
    intervals do not overlap the guaranteed bracket (a bug in the bounds or the sampler).
    """
    misses = [
        f"p{float(q) * 100:g} {r['error_rel']:+.2%}"
        for q, r in row["quantiles"].items()
        if not r["within_tolerance"]
    ]
    if row.get("in_bounds") is False:
        misses.append("bounds")
    return ("PASS" if not misses else "MISS"), misses


def run_suite(
    names: Iterable[str] | None = None,
    samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
    *,
    bounds: bool = True,
    core_shape: str | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
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
            name, samples, seed, bounds=bounds, core_shape=core_shape, tolerance=tolerance
        )
        rows.append(row)
        if progress is not None:
            progress(f"{name}: {row['verdict']} ({time.perf_counter() - start:.1f} s)")
    return rows


# ----- timing -----------------------------------------------------------------------------------
def timing(
    replicas: Sequence[int] = (1, 512, 1_000, 1_000_000),
    stages: int = 16,
    microbatches: int = 64,
    repeats: int = 5,
) -> dict[str, Any]:
    """Time analytic ``predict`` on a 1F1B pipeline inside replica groups of several sizes.

    The cost should not depend on the number of replicas (a replica group is one F^n): the
    ratio of the slowest to the fastest time is reported (best of ``repeats`` per size), for
    wall time and for this process's CPU time (less sensitive to other processes on a shared
    machine).

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
