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
and ``in_bounds``; reconvergent ones need KS <= 0.05, |p50|, |p99| errors <= 0.2%, |spread
error| <= 5%, and a smaller KS and |spread error| than both baselines. A miss whose size is within
Monte Carlo's own interval of the target is marked ``~noise``.

Usage::

    python validation/agreement.py [--samples N] [--seed S] [--only NAME ...] [--json]
                                   [--core-shape template|normal] [--strict]
    python validation/agreement.py --timing [--json]      # replica-count independence of cost
    python validation/agreement.py --list

The module is importable: :data:`SCENARIOS`, :func:`evaluate`, :func:`run_suite`,
:func:`timing` and :func:`run` are its API (``prism agreement`` calls :func:`run`).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

import prism_analytic as pa
from prism_analytic.agreement_cli import add_arguments
from prism_analytic.graph import StepGraph
from prism_analytic.graph.pipeline import pipeline_step_graph

__all__ = [
    "Scenario",
    "SCENARIOS",
    "TARGETS",
    "BOUND_LEVELS",
    "evaluate",
    "verdict",
    "run_suite",
    "timing",
    "format_table",
    "run",
    "main",
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
    "reconvergent": {"ks": 0.05, "p50": 2e-3, "p99": 2e-3, "spread": 0.05},
}

MS = 1e-3  # scenario latencies are written in milliseconds


# ----- scenarios --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    """A named step graph of the suite.

    Attributes
    ----------
    name : str
        Identifier used by ``--only``.
    build : callable
        Returns a fresh :class:`StepGraph`.
    description : str
        One line: what the scenario exercises.
    """

    name: str
    build: Callable[[], StepGraph]
    description: str


SCENARIOS: dict[str, Scenario] = {}


def scenario(
    name: str, description: str
) -> Callable[[Callable[[], StepGraph]], Callable[[], StepGraph]]:
    """Register a scenario builder under ``name``."""

    def deco(fn: Callable[[], StepGraph]) -> Callable[[], StepGraph]:
        if name in SCENARIOS:
            raise ValueError(f"scenario {name!r} registered twice")
        SCENARIOS[name] = Scenario(name, fn, description)
        return fn

    return deco


def _rank_body(name: str = "rank") -> StepGraph:
    """One rank's local step: forward, backward, local gradient bucket copy."""
    g = StepGraph(name)
    g.add_op("fwd", pa.normal(4 * MS, 0.12 * MS))
    g.add_op("bwd", pa.gamma(8 * MS, 0.4 * MS), after=["fwd"])
    g.add_op("bucket", pa.lognormal(0.5 * MS, 0.1 * MS), after=["bwd"], kind="comm")
    return g


def _barrier(n: int, body: StepGraph, name: str, **group: Any) -> StepGraph:
    g = StepGraph(name)
    g.add_replica_group("ranks", body, n, **group)
    g.add_collective("allreduce", pa.lognormal(2 * MS, 0.2 * MS), after=["ranks"])
    g.add_op("optimizer", pa.normal(1 * MS, 0.03 * MS), after=["allreduce"])
    return g


@scenario("chain", "12 ops in series (normal, gamma, lognormal)")
def chain() -> StepGraph:
    g = StepGraph("chain")
    prev: list[str] = []
    for i in range(12):
        lat = (
            pa.normal(2 * MS, 0.1 * MS),
            pa.gamma(1.5 * MS, 0.15 * MS),
            pa.lognormal(0.8 * MS, 0.16 * MS),
        )[i % 3]
        prev = [g.add_op(f"op{i}", lat, prev, kind="comm" if i % 3 == 2 else "compute")]
    return g


@scenario("fork_join", "4 parallel branches of 3 ops between a head and a join")
def fork_join() -> StepGraph:
    g = StepGraph("fork_join")
    g.add_op("head", pa.normal(1 * MS, 0.05 * MS))
    ends = []
    for b in range(4):
        prev = ["head"]
        for j in range(3):
            mean = (2.0 + 0.1 * b) * MS
            lat = pa.gamma(mean, 0.08 * mean) if j != 1 else pa.lognormal(mean, 0.1 * mean)
            prev = [g.add_op(f"b{b}_{j}", lat, prev)]
        ends.extend(prev)
    g.add_op("join", pa.normal(1 * MS, 0.05 * MS), after=ends)
    g.add_op("tail", pa.gamma(0.5 * MS, 0.05 * MS), after=["join"])
    return g


@scenario("barrier_8", "8 ranks (3-op chain each) joined by a barrier, then all-reduce")
def barrier_8() -> StepGraph:
    return _barrier(8, _rank_body(), "barrier_8")


@scenario("barrier_1024", "1,024 ranks (3-op chain each): Monte Carlo samples every rank")
def barrier_1024() -> StepGraph:
    return _barrier(1024, _rank_body(), "barrier_1024")


@scenario("barrier_65536", "65,536 ranks of one lognormal kernel (exact symmetric MC)")
def barrier_65536() -> StepGraph:
    body = StepGraph("kernel")
    body.add_op("kernel", pa.lognormal(10 * MS, 0.5 * MS))
    return _barrier(65_536, body, "barrier_65536")


@scenario("slow_copies", "256 ranks of which 4 are 1.3x slower")
def slow_copies() -> StepGraph:
    return _barrier(256, _rank_body(), "slow_copies", slow=(4, 1.3))


@scenario("speed_factors", "512 ranks with persistent speed factors lognormal(1, 0.02)")
def speed_factors() -> StepGraph:
    return _barrier(512, _rank_body(), "speed_factors", speed=pa.lognormal(1.0, 0.02))


@scenario("regime_mixture", "64 ranks; every comm op x3 in a congested step (p = 0.05)")
def regime_mixture() -> StepGraph:
    body = StepGraph("rank")
    prev: list[str] = []
    for layer in range(4):
        c = body.add_op(f"compute{layer}", pa.normal(3 * MS, 0.1 * MS), prev)
        prev = [body.add_op(f"comm{layer}", pa.lognormal(1 * MS, 0.1 * MS), [c], kind="comm")]
    g = _barrier(64, body, "regime_mixture")
    g.add_regime(
        "congestion",
        {"calm": 0.95, "congested": 0.05},
        {"calm": 1.0, "congested": 3.0},
        applies_to="comm",
    )
    return g


@scenario("heavy_tail_comm", "compute/comm chain; comm lognormal sd = 3 x mean and Pareto(2.5)")
def heavy_tail_comm() -> StepGraph:
    g = StepGraph("heavy_tail_comm")
    g.add_op("fwd", pa.normal(3 * MS, 0.1 * MS))
    g.add_op("send", pa.lognormal(1 * MS, 3 * MS), after=["fwd"], kind="comm")  # sigma = 1.52
    g.add_op("bwd", pa.normal(6 * MS, 0.2 * MS), after=["send"])
    g.add_collective("allreduce", pa.pareto(2.5, 0.6 * MS), after=["bwd"])
    g.add_op("optimizer", pa.normal(1 * MS, 0.03 * MS), after=["allreduce"])
    return g


@scenario(
    "fsdp_overlap",
    "FSDP, 8 layers: all-gather/reduce-scatter on a comm stream "
    "overlapping compute (not series-parallel)",
)
def fsdp_overlap(layers: int = 8) -> StepGraph:
    g = StepGraph("fsdp_overlap")
    ag = lambda: pa.lognormal(2.5 * MS, 0.25 * MS)  # noqa: E731
    stream: list[str] = []  # the comm stream is serial: each comm op follows the previous one
    fwd: list[str] = []
    for i in range(layers):
        # prefetch at most one layer ahead: the gather of layer i waits for compute of i - 2
        deps = stream + ([fwd[i - 2]] if i >= 2 else [])
        stream = [g.add_collective(f"AG_f{i}", ag(), deps)]
        fwd.append(g.add_op(f"F{i}", pa.normal(3 * MS, 0.09 * MS), stream + fwd[-1:]))
    bwd: dict[int, str] = {}
    for i in reversed(range(layers)):
        deps = [bwd[i + 1]] if i + 1 < layers else [fwd[-1]]
        if i < layers - 1:  # the last layer's parameters stay gathered after forward
            gather_deps = stream + ([bwd[i + 2]] if i + 2 < layers else [fwd[-1]])
            stream = [g.add_collective(f"AG_b{i}", ag(), gather_deps)]
            deps = deps + stream
        bwd[i] = g.add_op(f"B{i}", pa.normal(6 * MS, 0.18 * MS), deps)
        stream = [g.add_collective(f"RS{i}", pa.lognormal(2.5 * MS, 0.25 * MS), stream + [bwd[i]])]
    g.add_op("optimizer", pa.normal(1 * MS, 0.03 * MS), stream + [bwd[0]])
    return g


def _pipeline_latency(
    vpp: int = 1, cv: float = 0.05
) -> Callable[[str, int, int, int], pa.Distribution]:
    def latency(phase: str, stage: int, microbatch: int, chunk: int) -> pa.Distribution:
        mean = (1.0 if phase == "F" else 2.0) / vpp
        return pa.normal(mean, cv * mean)

    return latency


def _pipeline(stages: int, microbatches: int, schedule: str = "1f1b", vpp: int = 1) -> StepGraph:
    return pipeline_step_graph(
        stages,
        microbatches,
        _pipeline_latency(vpp),
        schedule=schedule,
        vpp=vpp,
        name=f"{schedule} {stages}x{microbatches}",
    )


@scenario("pipe_1f1b_4x8", "1F1B pipeline, 4 stages x 8 microbatches (F 1, B 2, CV 5%)")
def pipe_1f1b_4x8() -> StepGraph:
    return _pipeline(4, 8)


@scenario("pipe_1f1b_8x32", "1F1B pipeline, 8 stages x 32 microbatches")
def pipe_1f1b_8x32() -> StepGraph:
    return _pipeline(8, 32)


@scenario("pipe_1f1b_16x64", "1F1B pipeline, 16 stages x 64 microbatches")
def pipe_1f1b_16x64() -> StepGraph:
    return _pipeline(16, 64)


@scenario("pipe_interleaved_8x32", "interleaved 1F1B, vpp 2, 8 stages x 32 microbatches")
def pipe_interleaved_8x32() -> StepGraph:
    return _pipeline(8, 32, "interleaved", vpp=2)


@scenario("pipe_4x8_x512", "1F1B 4x8 pipeline in each of 512 data-parallel replicas")
def pipe_4x8_x512() -> StepGraph:
    g = StepGraph("pipe_4x8_x512")
    g.add_replica_group("replicas", _pipeline(4, 8), 512)
    return g


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

    Returns
    -------
    dict
        The row (see the module docstring for the keys), including ``verdict`` and ``misses``.
    """
    if name not in SCENARIOS:
        raise KeyError(f"unknown scenario {name!r}; choose from {sorted(SCENARIOS)}")
    scn = SCENARIOS[name]
    graph = scn.build()
    shape = {} if core_shape is None else {"core_shape": core_shape}
    analytic = pa.predict(graph, "analytic", **shape)
    mc = pa.predict(graph, "montecarlo", samples=samples, seed=seed)
    emp = mc.distribution
    view = _McView(
        emp.samples, {q: float(mc.quantile(q)) for q in (0.5, 0.99, 0.999)}, mc.mean(), mc.std()
    )
    row: dict[str, Any] = {"name": name, "description": scn.description, **_metrics(analytic, view)}
    row["in_bounds"] = None
    if bounds:
        b = pa.predict(graph, "bounds")
        row.update(_bounds_check(b, mc))
        row["bounds_s"] = b.compute_time_s
    hw = {q: _mc_half_width(mc, q) for q in (0.5, 0.99, 0.999)}
    row.update(
        analytic_s=analytic.compute_time_s,
        montecarlo_s=mc.compute_time_s,
        reconvergent=not analytic.diagnostics["exact"],
        samples=samples,
        seed=seed,
        core_shape=core_shape,
        mc_dkw_95=float(mc.diagnostics["dkw_95"]),
        mc_pool_ks=max((p["ks_error"] for p in mc.diagnostics["pooled_groups"]), default=0.0),
        **{f"p{_pct(q)}_mc_ci": hw[q] / abs(view.q[q]) for q in hw},
        spread_mc_ci=(hw[0.5] + hw[0.99]) / (view.q[0.99] - view.q[0.5]),
    )
    if row["reconvergent"] and baselines:
        for method in BASELINES:
            res = pa.predict(graph, "analytic", core_method=method, **shape)
            for key, value in _metrics(res, view).items():
                row[f"{key}_{method}"] = value
            row[f"analytic_s_{method}"] = res.compute_time_s
    verdict_, misses = verdict(row)
    row["verdict"], row["misses"] = verdict_, misses
    return row


def verdict(row: dict[str, Any]) -> tuple[str, list[str]]:
    """``("PASS" | "MISS", misses)`` of a row against :data:`TARGETS`.

    A miss is named after the metric (``ks``, ``p50``, ``p99``, ``spread``, ``bounds``, or
    ``ks>clark``, ``spread>independent``... when a baseline is at least as good); ``~noise`` is
    appended when the shortfall is within Monte Carlo's own noise (95% DKW half-width for KS,
    95% quantile intervals for the quantiles and the spread).
    """
    misses: list[str] = []
    noise = {
        "ks": row["mc_dkw_95"] + row["mc_pool_ks"],
        "p50": row["p50_mc_ci"],
        "p99": row["p99_mc_ci"],
        "spread": row["spread_mc_ci"],
    }

    def check(metric: str, value: float, target: float) -> None:
        if not abs(value) <= target:
            misses.append(metric + ("~noise" if abs(value) - noise[metric] <= target else ""))

    if row["reconvergent"]:
        t = TARGETS["reconvergent"]
        check("ks", row["ks"], t["ks"])
        check("p50", row["p50_rel_err"], t["p50"])
        check("p99", row["p99_rel_err"], t["p99"])
        check("spread", row["spread_rel_err"], t["spread"])
        if f"ks_{BASELINES[0]}" in row:
            # the same Monte Carlo sample judges every method, but its noise can still swap two
            # methods whose errors differ by less than that noise
            for metric, key, slack in (
                ("ks", "ks", noise["ks"]),
                ("spread", "spread_rel_err", noise["spread"]),
            ):
                ours = abs(row[key])
                worse = [m for m in BASELINES if not ours < abs(row[f"{key}_{m}"])]
                if worse:
                    close = all(ours - abs(row[f"{key}_{m}"]) <= slack for m in worse)
                    misses.append(f"{metric}>{'+'.join(worse)}" + ("~noise" if close else ""))
    else:
        t = TARGETS["exact"]
        check("ks", row["ks"], t["ks"])
        check("p99", row["p99_rel_err"], t["p99"])
        if row.get("in_bounds") is False:
            misses.append("bounds")
    return ("PASS" if not misses else "MISS"), misses


def run_suite(
    names: Iterable[str] | None = None,
    samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
    *,
    bounds: bool = True,
    baselines: bool = True,
    core_shape: str | None = None,
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
        rows.append(
            evaluate(name, samples, seed, bounds=bounds, baselines=baselines, core_shape=core_shape)
        )
        if progress is not None:
            progress(f"{name}: {rows[-1]['verdict']} ({time.perf_counter() - start:.1f} s)")
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
    body = _pipeline(stages, microbatches)
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


# ----- reporting --------------------------------------------------------------------------------
_COLUMNS = [
    ("scenario", "name", "{}"),
    ("rc", "reconvergent", "{}"),
    ("KS", "ks", "{:.4f}"),
    ("p50 err", "p50_rel_err", "{:+.3%}"),
    ("p99 err", "p99_rel_err", "{:+.3%}"),
    ("p99.9 err", "p999_rel_err", "{:+.3%}"),
    ("spread err", "spread_rel_err", "{:+.2%}"),
    ("bounds", "bounds_cell", "{}"),
    ("analytic s", "analytic_s", "{:.3f}"),
    ("MC s", "montecarlo_s", "{:.2f}"),
    ("MC DKW", "mc_dkw_95", "{:.4f}"),
    ("MC p99 CI", "p99_mc_ci", "{:.3%}"),
    ("verdict", "verdict", "{}"),
]


def _bounds_cell(row: dict[str, Any]) -> str:
    """Yes / NO, with ``(inf)`` when some bracket is unbounded (a vacuous but valid bound)."""
    if row.get("in_bounds") is None:
        return "-"
    return ("yes" if row["in_bounds"] else "NO") + ("" if row["bounds_finite"] else " (inf)")


def _cell(fmt: str, value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    return fmt.format(value)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """A readable table of rows, followed by the baselines of reconvergent scenarios."""
    header = [c[0] for c in _COLUMNS]
    body = []
    for r in rows:
        cells = [
            _cell(fmt, _bounds_cell(r) if key == "bounds_cell" else r.get(key))
            for _, key, fmt in _COLUMNS
        ]
        if r["misses"]:
            cells[-1] += " (" + ", ".join(r["misses"]) + ")"
        body.append(cells)
    lines = [_render(header, body)]
    rec = [r for r in rows if r["reconvergent"] and f"ks_{BASELINES[0]}" in r]
    if rec:
        head = [
            "scenario",
            "method",
            "KS",
            "p50 err",
            "p99 err",
            "p99.9 err",
            "spread err",
            "std err",
            "analytic s",
        ]
        table = []
        for r in rec:
            for method, sfx in (("clark-mehler", ""), *((m, f"_{m}") for m in BASELINES)):
                table.append(
                    [
                        r["name"],
                        method,
                        f"{r['ks' + sfx]:.4f}",
                        f"{r['p50_rel_err' + sfx]:+.3%}",
                        f"{r['p99_rel_err' + sfx]:+.3%}",
                        f"{r['p999_rel_err' + sfx]:+.3%}",
                        f"{r['spread_rel_err' + sfx]:+.2%}",
                        f"{r['std_rel_err' + sfx]:+.2%}",
                        f"{r[('analytic_s' + sfx)]:.3f}",
                    ]
                )
        lines += [
            "",
            "Reconvergent scenarios: correlation-aware core against the baselines",
            "",
            _render(head, table),
        ]
    lines += [
        "",
        "Targets: non-reconvergent KS <= 0.005, |p99 err| <= 0.1%, in bounds; "
        "reconvergent KS <= 0.05, |p50|,|p99| <= 0.2%, |spread| <= 5%, "
        "and KS and |spread| better than both baselines. '~noise': within MC's own "
        "noise of the target. Bounds: MC 99.9% quantile intervals at "
        f"{len(BOUND_LEVELS)} levels (0.01..0.999) overlap the guaranteed bracket; "
        "'(inf)': some bracket end is infinite.",
    ]
    return "\n".join(lines)


def _render(header: list[str], body: list[list[str]]) -> str:
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(header)]
    out = [
        "  ".join(h.ljust(w) for h, w in zip(header, widths)),
        "  ".join("-" * w for w in widths),
    ]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in body]
    return "\n".join(out)


def format_timing(t: dict[str, Any]) -> str:
    """A readable version of :func:`timing`'s result."""
    lines = [f"analytic predict, 1F1B {t['pipeline']} pipeline inside n replicas (best time):"]
    for n, s in t["times_s"].items():
        lines.append(
            f"  n = {n:>9,}: {s:8.3f} s wall, {t['cpu_s'][n]:8.3f} s CPU   "
            f"p99 {t['p99_s'][n]:.6g} s"
        )
    lines.append(
        f"  ratio max/min time: {t['ratio_max_min']:.3f} wall, {t['ratio_max_min_cpu']:.3f} CPU"
    )
    return "\n".join(lines)


# ----- command line -----------------------------------------------------------------------------
def run(
    samples: int = DEFAULT_SAMPLES,
    only: Sequence[str] | None = None,
    as_json: bool = False,
    *,
    seed: int = DEFAULT_SEED,
    do_timing: bool = False,
    list_only: bool = False,
    strict: bool = False,
    core_shape: str | None = None,
    out: Any = None,
    err: Any = None,
) -> int:
    """Run the suite and print the report; returns an exit status.

    Parameters
    ----------
    samples, seed : int
        Monte Carlo options.
    only : sequence of str, optional
        Scenario names (default: all).
    as_json : bool
        Print a JSON list of row objects instead of a table (timing: one JSON object).
    do_timing : bool
        Run :func:`timing` instead of the scenarios.
    list_only : bool
        Print the scenario names and descriptions.
    strict : bool
        Return 1 when a scenario misses its targets.
    core_shape : str, optional
        Passed to the analytic engine (None: its default).
    out, err : file-like, optional
        Report and progress streams (default stdout and stderr).
    """
    out = out or sys.stdout
    err = err or sys.stderr
    if list_only:
        for s in SCENARIOS.values():
            print(f"{s.name:<24} {s.description}", file=out)
        return 0
    if do_timing:
        t = timing()
        print(json.dumps(t, indent=2) if as_json else format_timing(t), file=out)
        return 0
    if only:
        unknown = [n for n in only if n not in SCENARIOS]
        if unknown:
            raise ValueError(f"unknown scenario(s) {unknown}; choose from {', '.join(SCENARIOS)}")
    rows = run_suite(
        only,
        samples,
        seed,
        core_shape=core_shape,
        progress=lambda line: print(line, file=err, flush=True),
    )
    if as_json:
        print(json.dumps(rows, indent=2, default=_json_default), file=out)
    else:
        shape = "" if core_shape is None else f", core_shape {core_shape}"
        print(f"Analytic vs Monte Carlo ({samples:,} samples, seed {seed}{shape})\n", file=out)
        print(format_table(rows), file=out)
    return 1 if strict and any(r["verdict"] != "PASS" for r in rows) else 0


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def main(argv: Sequence[str] | None = None) -> int:
    """``python validation/agreement.py``: parse arguments and :func:`run`."""
    parser = add_arguments(
        argparse.ArgumentParser(
            prog="agreement", description="Analytic engine against Monte Carlo on named scenarios."
        )
    )
    args = parser.parse_args(argv)
    samples = DEFAULT_SAMPLES if args.samples is None else args.samples
    seed = DEFAULT_SEED if args.seed is None else args.seed
    try:
        return run(
            samples,
            args.only,
            args.json,
            seed=seed,
            do_timing=args.timing,
            list_only=args.list,
            strict=args.strict,
            core_shape=args.core_shape,
        )
    except ValueError as exc:
        parser.error(str(exc))
        return 2  # unreachable: parser.error exits


if __name__ == "__main__":
    sys.exit(main())
