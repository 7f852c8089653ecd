"""Gaussian vs skew-aware core on a grid of reconvergent cases (what ``core_shape="auto"`` reads).

For every case one Monte Carlo sample (fresh seed 20261202; earlier readings used 20261130
and 20261201; none is the suite's 12345 nor the lognormal trial's 31) judges the analytic
engine with ``core_shape="normal"`` (Gaussian Clark-Mehler) and ``"skew"``
(:mod:`prism_analytic.engines.skew_core`), and ``"auto"`` when the
engine has it. Cases (classes of :mod:`prism_analytic.engines.core_shape`):

* compact pipelines, 1F1B and interleaved (vpp 2) at 4x8, 8x32, 16x64 (32x64 with ``--deep``),
  F 1 / B 2 per stage (divided by vpp), ops normal or lognormal at CV 5% and 20%, balanced and
  with the last stage 1.25x slower (an imbalanced loss/head stage);
* the same 4x8 pipelines inside 512 replicas (the max: its p99 is the "replica-max p99");
* FSDP-like overlap of a serial communication stream with compute (8 and 16 layers, as the
  suite's ``fsdp_overlap`` with every op of the chosen law family and CV), alone and inside 512
  replicas, and op-by-op 1F1B / interleaved pipelines (cores the engine sees op by op and
  classes by their lattice, as the compact nodes: ``core_shape.lattice_schedule``).

Rule v2 (the first table): a class gets ``skew`` when the skew core's KS is <= the Gaussian
core's, or a tie (a difference within the two analytic CDFs' numerical brackets:
:func:`skew_not_worse`), on every variant of the class. Since reading C (seed 20261203, given
with ``--seed``) the kurtosis core (:mod:`prism_analytic.engines.kurtosis_core`) is measured
too, and the v3 criterion (:func:`v3_class`, written in ``validation/results/
core_shape_choice.md`` before that reading) is applied: a lower worst-case KS, resolved beyond
Monte Carlo noise and the brackets, and resolvably worse on no variant. Since reading D
(seed 20261204, ``--fresh`` adds 30 held-out variants, ``--by-class`` runs class by class) the
cumulant core (:mod:`prism_analytic.engines.cumulant_core`) is measured too and the v4
criterion (:func:`v4_class`: the v3 conditions with four shapes, each class split by the ops'
CV at 10%, :data:`EARLIER_LOWEST_V4`) is applied.

Metrics: KS (``scipy.stats.kstest`` of the sample against the analytic CDF), relative errors
of p99 and of the spread p99 - p50 (with the Monte Carlo spread's 95% half-width), mean error
in Monte Carlo sd. Replica cases sample every replica (no pooling) with fewer steps
(``--replica-samples``, default 10,000). Usage::

    nice python validation/core_shape_choice.py [--samples N] [--seed S] [--deep]
        [--only SUBSTRING ...] [--json FILE] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

import prism_analytic as pa
from prism_analytic.engines.core_shape import AUTO_RULE
from prism_analytic.engines.predict import CORE_SHAPES
from prism_analytic.graph import StepGraph
from prism_analytic.graph.pipeline import pipeline_step_graph

SEED = 20261202
SAMPLES = 100_000
REPLICA_SAMPLES = 10_000
REPLICAS = 512
MS = 1e-3


@dataclass(frozen=True)
class Case:
    """One grid case: a name, its class, a builder and whether it is a replica max."""

    name: str
    cls: str
    build: Callable[[], StepGraph]
    replicas: bool = False


def law(family: str, mean: float, cv: float) -> pa.Distribution:
    """An op law of the family (``normal``, ``lognormal`` or ``gamma``) with this mean and CV."""
    make = {"normal": pa.normal, "lognormal": pa.lognormal, "gamma": pa.gamma}
    if family not in make:
        raise ValueError(f"family must be one of {sorted(make)}, got {family!r}")
    return make[family](mean, cv * mean)


def pipe(
    p: int,
    m: int,
    sched: str,
    family: str,
    cv: float,
    last: float = 1.0,
    compact: bool = True,
    first: float = 1.0,
    vpp: int | None = None,
) -> StepGraph:
    """A pipeline: F 1, B 2 divided by vpp (2 for interleaved unless ``vpp`` is given).

    The last / first stage is ``last`` / ``first`` times slower.
    """
    vpp = vpp or (2 if sched == "interleaved" else 1)

    def latency(phase: str, stage: int, mb: int, chunk: int) -> pa.Distribution:
        slow = (last if stage == p - 1 else 1.0) * (first if stage == 0 else 1.0)
        return law(family, (1.0 if phase == "F" else 2.0) / vpp * slow, cv)

    return pipeline_step_graph(
        p, m, latency, schedule=sched, vpp=vpp, name=f"{sched} {p}x{m}", compact=compact
    )


def fsdp(
    layers: int, family: str, cv: float, compute: tuple[str, float] | None = None
) -> StepGraph:
    """The suite's FSDP overlap (comm stream prefetching one layer ahead), laws of ``family``.

    ``compute`` = ``(family, cv)`` gives the compute ops (F, B, optimizer) their own law family
    and CV (mixed laws, as the suite's case); by default they share the communication's.
    """
    cfam, ccv = compute or (family, cv)
    g = StepGraph(f"fsdp{layers}")
    stream: list[str] = []
    fwd: list[str] = []
    for i in range(layers):
        deps = stream + ([fwd[i - 2]] if i >= 2 else [])
        stream = [g.add_collective(f"AG_f{i}", law(family, 2.5 * MS, cv), deps)]
        fwd.append(g.add_op(f"F{i}", law(cfam, 3 * MS, ccv), stream + fwd[-1:]))
    bwd: dict[int, str] = {}
    for i in reversed(range(layers)):
        deps = [bwd[i + 1]] if i + 1 < layers else [fwd[-1]]
        if i < layers - 1:
            gather_deps = stream + ([bwd[i + 2]] if i + 2 < layers else [fwd[-1]])
            stream = [g.add_collective(f"AG_b{i}", law(family, 2.5 * MS, cv), gather_deps)]
            deps = deps + stream
        bwd[i] = g.add_op(f"B{i}", law(cfam, 6 * MS, ccv), deps)
        stream = [g.add_collective(f"RS{i}", law(family, 2.5 * MS, cv), stream + [bwd[i]])]
    g.add_op("optimizer", law(cfam, 1 * MS, ccv), stream + [bwd[0]])
    return g


def in_replicas(body: StepGraph) -> StepGraph:
    """``body`` in each of :data:`REPLICAS` data-parallel replicas (the step is their max)."""
    g = StepGraph(f"{body.name} x{REPLICAS}")
    g.add_replica_group("replicas", body, REPLICAS)
    return g


LAWS = [("normal", 0.05), ("normal", 0.2), ("lognormal", 0.05), ("lognormal", 0.2)]


def _kind(family: str) -> str:
    return "symmetric" if family == "normal" else "skewed"


def grid(deep: bool = False) -> list[Case]:
    """Every case of the grid (module docstring)."""
    cases: list[Case] = []
    sizes = [(4, 8), (8, 32), (16, 64)] + ([(32, 64)] if deep else [])
    for sched in ("1f1b", "interleaved"):
        structure = "pipeline-1f1b" if sched == "1f1b" else "pipeline-interleaved"
        for p, m in sizes:
            for fam, cv in LAWS:
                tag = f"{sched} {p}x{m} {fam} {cv:.0%}"
                cls = f"{structure}, {_kind(fam)} ops"
                cases.append(Case(tag, cls, lambda a=(p, m, sched, fam, cv): pipe(*a)))
                if (fam, cv) in (("normal", 0.05), ("lognormal", 0.2)):
                    cases.append(
                        Case(
                            tag + " last x1.25",
                            cls,
                            lambda a=(p, m, sched, fam, cv): pipe(*a, last=1.25),
                        )
                    )
        for fam, cv in (("normal", 0.05), ("lognormal", 0.2)):
            cls = f"{structure}, {_kind(fam)} ops"
            cases.append(
                Case(
                    f"{sched} 4x8 {fam} {cv:.0%} x{REPLICAS}",
                    cls,
                    lambda a=(4, 8, sched, fam, cv): in_replicas(pipe(*a)),
                    replicas=True,
                )
            )
    for fam, cv in LAWS:
        cls = f"explicit, {_kind(fam)} ops"
        cases.append(Case(f"fsdp 8 layers {fam} {cv:.0%}", cls, lambda a=(8, fam, cv): fsdp(*a)))
    for fam, cv in (("normal", 0.05), ("lognormal", 0.2)):
        cls = f"explicit, {_kind(fam)} ops"
        cases.append(Case(f"fsdp 16 layers {fam} {cv:.0%}", cls, lambda a=(16, fam, cv): fsdp(*a)))
        cases.append(
            Case(
                f"fsdp 8 layers {fam} {cv:.0%} x{REPLICAS}",
                cls,
                lambda a=(8, fam, cv): in_replicas(fsdp(*a)),
                replicas=True,
            )
        )
        for sched, p, m in (("1f1b", 4, 8), ("1f1b", 8, 32), ("interleaved", 4, 8)):
            # an op-by-op pipeline is classed by its lattice, as the compact node is
            structure = "pipeline-1f1b" if sched == "1f1b" else "pipeline-interleaved"
            cases.append(
                Case(
                    f"op-by-op {sched} {p}x{m} {fam} {cv:.0%}",
                    f"{structure}, {_kind(fam)} ops",
                    lambda a=(p, m, sched, fam, cv): pipe(*a, compact=False),
                )
            )
    return cases


def fresh_grid() -> list[Case]:
    """Reading D's held-out variants, never measured before (the v4 criterion lists them)."""
    cases: list[Case] = []

    def add(name: str, cls: str, build: Callable[[], StepGraph], replicas: bool = False) -> None:
        cases.append(Case(name + " (new)", cls, build, replicas))

    def structure(sched: str) -> str:
        return "pipeline-1f1b" if sched == "1f1b" else "pipeline-interleaved"

    for sched in ("1f1b", "interleaved"):
        big = (24, 64) if sched == "1f1b" else (24, 72)  # interleaved needs m % p == 0
        for p, m in ((12, 48), big):
            for fam, cv in (("normal", 0.02), ("normal", 0.1), ("lognormal", 0.1)):
                add(
                    f"{sched} {p}x{m} {fam} {cv:.0%}",
                    f"{structure(sched)}, {_kind(fam)} ops",
                    lambda a=(p, m, sched, fam, cv): pipe(*a),
                )
    for sched in ("1f1b", "interleaved"):
        for p, m, fam in ((32, 64, "normal"), (8, 32, "lognormal")):
            add(
                f"{sched} {p}x{m} {fam} 2%",
                f"{structure(sched)}, {_kind(fam)} ops",
                lambda a=(p, m, sched, fam, 0.02): pipe(*a),
            )
    for sched in ("1f1b", "interleaved"):
        for fam, cv in (("normal", 0.05), ("lognormal", 0.2)):
            add(
                f"{sched} 16x64 {fam} {cv:.0%} first x1.25",
                f"{structure(sched)}, {_kind(fam)} ops",
                lambda a=(16, 64, sched, fam, cv): pipe(*a, first=1.25),
            )
    for p, m, vpp, fam, cv in (
        (8, 32, 4, "normal", 0.02),
        (8, 32, 4, "lognormal", 0.1),
        (16, 16, 8, "normal", 0.02),
    ):
        add(
            f"interleaved {p}x{m} vpp {vpp} {fam} {cv:.0%}",
            f"pipeline-interleaved, {_kind(fam)} ops",
            lambda a=(p, m, "interleaved", fam, cv), v=vpp: pipe(*a, vpp=v),
        )
    for sched in ("1f1b", "interleaved"):
        add(
            f"{sched} 4x8 normal 10% x{REPLICAS}",
            f"{structure(sched)}, symmetric ops",
            lambda a=(4, 8, sched, "normal", 0.1): in_replicas(pipe(*a)),
            replicas=True,
        )
    for fam, cv in (("normal", 0.02), ("normal", 0.1), ("lognormal", 0.1)):
        add(
            f"fsdp 12 layers {fam} {cv:.0%}",
            f"explicit, {_kind(fam)} ops",
            lambda a=(12, fam, cv): fsdp(*a),
        )
    for sched, p, m, fam, cv in (
        ("1f1b", 6, 16, "normal", 0.02),
        ("interleaved", 4, 16, "lognormal", 0.1),
    ):
        add(
            f"op-by-op {sched} {p}x{m} {fam} {cv:.0%}",
            f"{structure(sched)}, {_kind(fam)} ops",
            lambda a=(p, m, sched, fam, cv): pipe(*a, compact=False),
        )
    return cases


def fresh_e_grid() -> list[Case]:
    """Reading E's held-out variants (the v5 criterion lists them), shapes never measured before.

    Interleaved pipelines of the two classes v5 reads, op CV 2-8% (the low band), depth ratios
    (stages x vpp) / microbatches from 0.25 to 8 around the split R0 = 2.
    """
    cases: list[Case] = []
    rows = [  # (p, m, vpp, family, cv, last, first, replicas, compact)
        (8, 8, 2, "normal", 0.03, 1.0, 1.0, False, True),
        (6, 24, 2, "normal", 0.04, 1.0, 1.0, False, True),
        (20, 80, 2, "normal", 0.03, 1.0, 1.0, False, True),
        (8, 64, 2, "normal", 0.06, 1.0, 1.0, False, True),
        (16, 32, 2, "normal", 0.08, 1.0, 1.0, False, True),
        (16, 64, 4, "normal", 0.02, 1.0, 1.0, False, True),
        (8, 16, 4, "normal", 0.08, 1.0, 1.0, False, True),
        (12, 24, 4, "normal", 0.05, 1.0, 1.0, False, True),
        (8, 32, 8, "normal", 0.06, 1.0, 1.0, False, True),
        (8, 32, 2, "normal", 0.04, 1.25, 1.0, False, True),
        (8, 8, 2, "normal", 0.03, 1.0, 1.0, True, True),
        (4, 8, 4, "normal", 0.03, 1.0, 1.0, False, False),
        (4, 8, 5, "normal", 0.03, 1.0, 1.0, False, True),
        (4, 4, 5, "normal", 0.03, 1.0, 1.0, False, True),
        (6, 6, 4, "normal", 0.05, 1.0, 1.0, False, True),
        (12, 12, 8, "normal", 0.03, 1.0, 1.0, False, True),
        (8, 8, 2, "lognormal", 0.03, 1.0, 1.0, False, True),
        (6, 24, 2, "lognormal", 0.08, 1.0, 1.0, False, True),
        (10, 80, 2, "lognormal", 0.04, 1.0, 1.0, False, True),
        (12, 48, 4, "lognormal", 0.06, 1.0, 1.0, False, True),
        (16, 32, 4, "lognormal", 0.02, 1.0, 1.0, False, True),
        (12, 24, 2, "lognormal", 0.06, 1.0, 1.25, False, True),
        (4, 8, 4, "lognormal", 0.05, 1.0, 1.0, True, True),
        (16, 32, 8, "lognormal", 0.02, 1.0, 1.0, False, True),
        (8, 16, 8, "lognormal", 0.05, 1.0, 1.0, False, True),
    ]
    for p, m, vpp, fam, cv, last, first, replicas, compact in rows:
        name = ("" if compact else "op-by-op ") + f"interleaved {p}x{m} vpp {vpp} {fam} {cv:.0%}"
        name += (f" last x{last}" if last != 1 else "") + (f" first x{first}" if first != 1 else "")
        name += f" x{REPLICAS}" if replicas else ""

        def build(
            a=(p, m, "interleaved", fam, cv), k=(last, compact, first, vpp), rep=replicas
        ) -> StepGraph:
            body = pipe(*a, last=k[0], compact=k[1], first=k[2], vpp=k[3])
            return in_replicas(body) if rep else body

        cases.append(
            Case(name + " (E)", f"pipeline-interleaved, {_kind(fam)} ops", build, replicas)
        )
    return cases


def reading_f_grid() -> list[Case]:
    """Reading F's held-out explicit cores with skewed ops (its criterion lists them).

    FSDP overlap bodies of layer counts, law families and CVs never read in this class before
    (none is the agreement suite's ``fsdp_overlap``), both op-CV bands, and one in 512 replicas.
    The mixed cases name the communication's (largest) CV first: :func:`op_cv` reads it.
    """
    cls = "explicit, skewed ops"
    rows = [  # (layers, family, cv, compute law or None, replicas)
        (6, "lognormal", 0.03, None, False),
        (10, "gamma", 0.08, None, False),
        (24, "lognormal", 0.08, None, False),
        (24, "gamma", 0.03, None, False),
        (10, "lognormal", 0.08, ("normal", 0.03), False),
        (6, "gamma", 0.25, None, False),
        (10, "lognormal", 0.15, None, False),
        (24, "lognormal", 0.25, None, False),
        (24, "gamma", 0.15, None, False),
        (10, "lognormal", 0.25, ("normal", 0.03), False),
        (6, "lognormal", 0.15, None, True),
    ]
    cases: list[Case] = []
    for layers, fam, cv, compute, replicas in rows:
        name = f"fsdp {layers} layers "
        if compute:
            name += f"comm {fam} {cv:.0%} compute {compute[0]} {compute[1]:.0%}"
        else:
            name += f"{fam} {cv:.0%}"
        name += (f" x{REPLICAS}" if replicas else "") + " (F)"

        def build(a=(layers, fam, cv, compute), rep=replicas) -> StepGraph:
            body = fsdp(*a)
            return in_replicas(body) if rep else body

        cases.append(Case(name, cls, build, replicas))
    return cases


#: ``--by-class`` order: the classes holding the workload presets' cores first (all in the low
#: op-CV band: interleaved with normal ops: gpt3-175b, llama3-70b; interleaved lognormal:
#: llama3-405b; 1F1B lognormal: mixtral-8x22b), then the rest.
CLASS_ORDER = (
    "pipeline-interleaved, symmetric ops",
    "pipeline-interleaved, skewed ops",
    "pipeline-1f1b, skewed ops",
    "pipeline-1f1b, symmetric ops",
    "explicit, symmetric ops",
    "explicit, skewed ops",
)


def _class_order(case: Case) -> tuple[int, int]:
    return band({"case": case.name}) != "CV <= 10%", CLASS_ORDER.index(case.cls)


def measure(case: Case, samples: int, replica_samples: int, seed: int) -> list[dict]:
    """One row per core shape for ``case``."""
    graph = case.build()
    # the grid's labels were fixed before measuring; the engine's classifier must agree
    (core,) = pa.predict(graph, "analytic", core_shape="normal").diagnostics["cores"]
    assert core["core_class"] == case.cls, (case.name, core["core_class"], case.cls)
    n = replica_samples if case.replicas else samples
    start = time.perf_counter()
    mc = pa.predict(graph, "montecarlo", samples=n, seed=seed)
    mc_s = time.perf_counter() - start
    if mc.diagnostics["pooled_groups"]:
        raise RuntimeError(f"{case.name}: Monte Carlo pooled a replica group")
    x = mc.distribution.samples
    q50, q99 = np.quantile(x, [0.5, 0.99])
    mean, sd = float(np.mean(x)), float(np.std(x))
    lo, hi = mc.quantile_bracket(0.99, confidence=0.95)
    lo50, hi50 = mc.quantile_bracket(0.5, confidence=0.95)
    # the Monte Carlo spread's 95% half-width (the p99 and p50 intervals' half-widths together)
    spread_ci = float((hi - lo) + (hi50 - lo50)) / 2 / float(q99 - q50)
    shapes = [s for s in ("normal", "skew", "kurtosis", "cumulant", "auto") if s in CORE_SHAPES]
    rows = []
    for shape in shapes:
        res = pa.predict(graph, "analytic", core_shape=shape)
        a50, a99 = (float(res.quantile(q)) for q in (0.5, 0.99))
        cores = res.diagnostics["cores"]
        rows.append(
            {
                "case": case.name,
                "class": case.cls,
                "core_shape": shape,
                "used": cores[0].get("shape") if cores else None,
                "ks": float(stats.kstest(x, res.cdf).statistic),
                "p99_err": a99 / q99 - 1.0,
                "spread_err": (a99 - a50) / (q99 - q50) - 1.0,
                "mean_err_sd": (res.mean() - mean) / sd,
                "std_err": res.std() / sd - 1.0,
                "analytic_s": res.compute_time_s,
                "mc_s": mc_s,
                "samples": n,
                "seed": seed,
                "dkw_95": float(mc.diagnostics["dkw_95"]),
                "p99_ci": float(hi - lo) / 2 / q99,
                "spread_ci": spread_ci,
                # the analytic CDF's numerical bracket (grid rounding): its KS is known to +- this
                "cdf_width": _cdf_width(res.distribution),
                "replicas": case.replicas,
                "op_cv": op_cv(case.name),
                # pipelines only: an explicit core in replicas ("... x512") has no depth
                "depth_ratio": (
                    depth_ratio(case.name) if re.search(r"\d+x\d+", case.name) else None
                ),
            }
        )
    return rows


def _cdf_width(dist: pa.GridDistribution) -> float:
    """Largest width of a grid law's CDF bracket (its lower and upper cumulative masses)."""
    return float(np.abs(np.cumsum(dist.lo) - np.cumsum(dist.hi)).max())


def skew_not_worse(normal: dict, skew: dict) -> str:
    """Whether the skew core's KS is <= the Gaussian core's: ``"yes"``, ``"tie"`` or ``"NO"``.

    Each KS is computed from an analytic CDF known only to within its numerical bracket
    (``cdf_width``), so a KS larger by at most the two widths together is not resolved by
    the engine: a tie, which counts as not worse. (Fixed before the 20261202 reading; rows
    without ``cdf_width`` compare strictly.)
    """
    if skew["ks"] <= normal["ks"]:
        return "yes"
    resolution = normal.get("cdf_width", 0.0) + skew.get("cdf_width", 0.0)
    return "tie" if skew["ks"] - normal["ks"] <= resolution else "NO"


SHAPES3 = ("normal", "skew", "kurtosis")
TARGET_KS = 0.03
TARGET_SPREAD = 0.03

#: The v2 rule (``cur`` of the v3 criterion): the shapes ``auto`` used before reading C.
V2_RULE: dict[str, str] = {
    "pipeline-1f1b, symmetric ops": "skew",
    "pipeline-1f1b, skewed ops": "normal",
    "pipeline-interleaved, symmetric ops": "normal",
    "pipeline-interleaved, skewed ops": "normal",
    "explicit, symmetric ops": "normal",
    "explicit, skewed ops": "skew",
}

#: Condition 2 of the v3 criterion (``validation/results/core_shape_choice.md``, written
#: before reading C): the shapes other than v2's that had the lowest worst-case KS of the
#: shapes measured in the class on every earlier reading that measured them (A: 20261201,
#: B: 20261202, B's compact pipelines also with kurtosis).
EARLIER_LOWEST: dict[str, frozenset[str]] = {
    "pipeline-1f1b, symmetric ops": frozenset({"kurtosis"}),
    "pipeline-1f1b, skewed ops": frozenset({"kurtosis"}),
    "pipeline-interleaved, symmetric ops": frozenset({"kurtosis"}),
    "pipeline-interleaved, skewed ops": frozenset({"kurtosis"}),
    "explicit, symmetric ops": frozenset({"skew"}),
    "explicit, skewed ops": frozenset(),
}


def _band(r: dict) -> float:
    """How far a KS may be from the true sup distance: DKW half-width plus the CDF bracket."""
    return r["dkw_95"] + r.get("cdf_width", 0.0)


def class_summary(variants: list[dict[str, dict]], shape: str) -> dict:
    """Worst-case KS with its noise interval, worst spread interval and targets met."""
    rs = [v[shape] for v in variants]
    sp_ci = [r.get("spread_ci", 0.0) for r in rs]
    return {
        "W": max(r["ks"] for r in rs),
        "W_lo": max(r["ks"] - _band(r) for r in rs),
        "W_hi": max(r["ks"] + _band(r) for r in rs),
        "sp_lo": max(abs(r["spread_err"]) - c for r, c in zip(rs, sp_ci)),
        "sp_hi": max(abs(r["spread_err"]) + c for r, c in zip(rs, sp_ci)),
        "sp": max(abs(r["spread_err"]) for r in rs),
        "met": sum(r["ks"] <= TARGET_KS and abs(r["spread_err"]) <= TARGET_SPREAD for r in rs),
    }


def v3_class(cls: str, variants: list[dict[str, dict]]) -> tuple[str, dict[str, list[bool]]]:
    """The v3 criterion for one class: ``(picked shape, {candidate: [cond 1..5]})``.

    Conditions (``validation/results/core_shape_choice.md``, "v3 criterion"): 1. resolvably
    lower worst-case KS than the v2 shape; 2. lowest worst case on the earlier readings
    (:data:`EARLIER_LOWEST`); 3. resolvably worse on no variant; 4. worst spread error not
    resolvably larger; 5. at least as many variants meeting both targets.
    """
    cur = V2_RULE[cls]
    summ = {s: class_summary(variants, s) for s in SHAPES3}
    conds: dict[str, list[bool]] = {}
    for s in SHAPES3:
        if s == cur:
            continue
        # one sample judges both: their KS difference is known to 2 DKW + the two brackets
        worse = any(v[s]["ks"] - _band(v[s]) > v[cur]["ks"] + _band(v[cur]) for v in variants)
        conds[s] = [
            summ[s]["W_hi"] < summ[cur]["W_lo"],
            s in EARLIER_LOWEST[cls],
            not worse,
            summ[s]["sp_lo"] <= summ[cur]["sp_hi"],
            summ[s]["met"] >= summ[cur]["met"],
        ]
    eligible = [s for s, c in conds.items() if all(c)]
    if not eligible:
        return cur, conds
    eligible.sort(key=lambda s: summ[s]["W"])
    best = eligible[0]
    for s in eligible[1:]:  # a cheaper shape not resolvably worse in the worst case wins
        if SHAPES3.index(s) < SHAPES3.index(best) and not summ[best]["W_hi"] < summ[s]["W_lo"]:
            best = s
    return best, conds


def _by_class(by_case: dict[str, dict[str, dict]]) -> dict[str, list[dict[str, dict]]]:
    out: dict[str, list[dict[str, dict]]] = {}
    for shapes in by_case.values():
        out.setdefault(shapes["normal"]["class"], []).append(shapes)
    return out


def three_shapes(by_case: dict[str, dict[str, dict]]) -> str:
    """One line per case: KS, spread error and mean error of the three shapes."""
    out = [
        "| class | case | KS normal / skew / kurtosis | spread normal / skew / kurtosis "
        "| MC spread 95% | p99 normal / skew / kurtosis | mean err (sd) normal / skew / kurtosis "
        "| kurtosis s | MC DKW 95% |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, sh in by_case.items():
        rs = [sh[s] for s in SHAPES3]
        best = min(r["ks"] for r in rs)
        ks = " / ".join(f"**{r['ks']:.4f}**" if r["ks"] == best else f"{r['ks']:.4f}" for r in rs)
        out.append(
            f"| {rs[0]['class']} | {name} | {ks} | "
            + " / ".join(f"{r['spread_err']:+.2%}" for r in rs)
            + f" | {rs[0].get('spread_ci', float('nan')):.2%} | "
            + " / ".join(f"{r['p99_err']:+.3%}" for r in rs)
            + " | "
            + " / ".join(f"{r['mean_err_sd']:+.3f}" for r in rs)
            + f" | {sh['kurtosis']['analytic_s']:.2f} | {rs[0]['dkw_95']:.4f} |"
        )
    return "\n".join(out)


def v3_table(by_case: dict[str, dict[str, dict]]) -> str:
    """The v3 criterion applied to every class (its conditions 1-5 for each candidate)."""
    out = [
        "| class | variants | v2 shape | worst KS [band] normal / skew / kurtosis "
        "| worst abs spread normal / skew / kurtosis | both targets met normal / skew / kurtosis "
        "| candidate: conditions 1-5 | v3 pick |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for cls, variants in _by_class(by_case).items():
        pick, conds = v3_class(cls, variants)
        summ = {s: class_summary(variants, s) for s in SHAPES3}
        worst = " / ".join(
            f"{summ[s]['W']:.4f} [{summ[s]['W_lo']:.4f}, {summ[s]['W_hi']:.4f}]" for s in SHAPES3
        )
        cand = "; ".join(
            f"{s}: " + "".join("y" if ok else "n" for ok in c) for s, c in conds.items()
        )
        out.append(
            f"| {cls} | {len(variants)} | {V2_RULE[cls]} | {worst} | "
            + " / ".join(f"{summ[s]['sp']:.2%}" for s in SHAPES3)
            + " | "
            + " / ".join(str(summ[s]["met"]) for s in SHAPES3)
            + f" | {cand} | {pick} |"
        )
    return "\n".join(out)


SHAPES4 = ("normal", "skew", "kurtosis", "cumulant")
CV_SPLIT = 0.10
BANDS = ("CV <= 10%", "CV > 10%")

#: ``cur`` of the v4 criterion: the v3 table (the engine's ``AUTO_RULE`` before reading D).
V3_RULE: dict[str, str] = {**V2_RULE, "pipeline-interleaved, symmetric ops": "kurtosis"}

#: Condition 2 of the v4 criterion (``validation/results/core_shape_choice.md``, written before
#: reading D): per (class, op-CV band), the shapes that had the lowest worst-case KS of the shapes
#: measured there on every earlier reading that measured them (A, B, the cumulant closure study's
#: grid S and C; ties at 4 decimals count for each). ``cur`` needs no such condition.
EARLIER_LOWEST_V4: dict[tuple[str, str], frozenset[str]] = {
    ("pipeline-1f1b, symmetric ops", BANDS[0]): frozenset({"kurtosis"}),
    ("pipeline-1f1b, symmetric ops", BANDS[1]): frozenset({"kurtosis"}),
    ("pipeline-1f1b, skewed ops", BANDS[0]): frozenset({"normal"}),
    ("pipeline-1f1b, skewed ops", BANDS[1]): frozenset({"cumulant"}),
    ("pipeline-interleaved, symmetric ops", BANDS[0]): frozenset({"cumulant"}),
    ("pipeline-interleaved, symmetric ops", BANDS[1]): frozenset({"kurtosis"}),
    ("pipeline-interleaved, skewed ops", BANDS[0]): frozenset({"cumulant"}),
    ("pipeline-interleaved, skewed ops", BANDS[1]): frozenset({"cumulant"}),
    ("explicit, symmetric ops", BANDS[0]): frozenset({"skew", "kurtosis"}),
    ("explicit, symmetric ops", BANDS[1]): frozenset({"kurtosis"}),
    ("explicit, skewed ops", BANDS[0]): frozenset({"skew", "kurtosis"}),
    ("explicit, skewed ops", BANDS[1]): frozenset({"kurtosis"}),
}


def op_cv(case: str) -> float:
    """The ops' CV of a grid case, from its name (every op of a case has the same CV)."""
    found = re.search(r"(\d+)%", case)
    if found is None:
        raise ValueError(f"case name {case!r} gives no op CV")
    return int(found.group(1)) / 100


def band(row: dict) -> str:
    """The op-CV band of a row (the v4 class split: largest op CV <= 10% or above)."""
    cv = row["op_cv"] if "op_cv" in row else op_cv(row["case"])  # rows before D: the name
    return BANDS[0] if cv <= CV_SPLIT * (1 + 1e-9) else BANDS[1]


def _by_class_band(
    by_case: dict[str, dict[str, dict]],
) -> dict[tuple[str, str], list[dict[str, dict]]]:
    out: dict[tuple[str, str], list[dict[str, dict]]] = {}
    for shapes in by_case.values():
        r = shapes["normal"]
        out.setdefault((r["class"], band(r)), []).append(shapes)
    return dict(sorted(out.items()))


def v4_class(
    cls: str,
    cv_band: str,
    variants: list[dict[str, dict]],
    earlier: dict[tuple[str, str], frozenset[str]] | None = None,
) -> tuple[str, dict[str, list[bool]]]:
    """The v4 criterion for one (class, band): ``(picked shape, {candidate: [cond 1..5]})``.

    As :func:`v3_class` with four shapes, ``cur`` = :data:`V3_RULE` and condition 2 read from
    ``earlier`` (default :data:`EARLIER_LOWEST_V4`; reading F passes :data:`EARLIER_LOWEST_F`);
    among eligible shapes the lowest worst case wins, except that a cheaper one (order of
    :data:`SHAPES4`) is kept when the dearer does not resolvably lower it.
    """
    earlier = EARLIER_LOWEST_V4 if earlier is None else earlier
    cur = V3_RULE[cls]
    summ = {s: class_summary(variants, s) for s in SHAPES4}
    conds: dict[str, list[bool]] = {}
    for s in SHAPES4:
        if s == cur:
            continue
        worse = any(v[s]["ks"] - _band(v[s]) > v[cur]["ks"] + _band(v[cur]) for v in variants)
        conds[s] = [
            summ[s]["W_hi"] < summ[cur]["W_lo"],
            s in earlier[(cls, cv_band)],
            not worse,
            summ[s]["sp_lo"] <= summ[cur]["sp_hi"],
            summ[s]["met"] >= summ[cur]["met"],
        ]
    eligible = sorted((s for s, c in conds.items() if all(c)), key=lambda s: summ[s]["W"])
    if not eligible:
        return cur, conds
    best = eligible[0]
    for s in eligible[1:]:
        if SHAPES4.index(s) < SHAPES4.index(best) and not summ[best]["W_hi"] < summ[s]["W_lo"]:
            best = s
    return best, conds


#: Condition 2 of reading F (``core_shape_choice.md``, "Reading F criterion", computed before
#: any row from readings C and D; A and B measured normal and skew only): the shapes with the
#: lowest worst-case KS of this class and band on every earlier reading that measured them.
EARLIER_LOWEST_F: dict[tuple[str, str], frozenset[str]] = {
    ("explicit, skewed ops", BANDS[0]): frozenset({"kurtosis", "cumulant"}),
    ("explicit, skewed ops", BANDS[1]): frozenset({"kurtosis"}),
}


def f_table(by_case: dict[str, dict[str, dict]]) -> str:
    """Reading F's verdict per band: the v4 conditions with :data:`EARLIER_LOWEST_F`."""
    return v4_table(by_case, EARLIER_LOWEST_F, ("current shape", "reading F pick"))


def v4_picks(rows: list[dict]) -> dict[tuple[str, str], str]:
    """The v4 pick of every (class, band) read in ``rows`` (each case with all four shapes)."""
    return {
        key: v4_class(*key, variants)[0] for key, variants in _by_class_band(_cases(rows)).items()
    }


def _cases(rows: list[dict]) -> dict[str, dict[str, dict]]:
    by_case: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[r["core_shape"]] = r
    return by_case


def four_shapes(by_case: dict[str, dict[str, dict]]) -> str:
    """One line per case: KS, spread error and mean error of the four shapes (v4 reading)."""
    out = [
        "| class | band | case | KS normal / skew / kurtosis / cumulant "
        "| spread normal / skew / kurtosis / cumulant | MC spread 95% "
        "| mean err (sd) normal / skew / kurtosis / cumulant | auto | cumulant s | MC DKW 95% |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, sh in by_case.items():
        rs = [sh[s] for s in SHAPES4]
        best = min(r["ks"] for r in rs)
        ks = " / ".join(f"**{r['ks']:.4f}**" if r["ks"] == best else f"{r['ks']:.4f}" for r in rs)
        auto = sh.get("auto", {}).get("used") or "-"
        out.append(
            f"| {rs[0]['class']} | {band(rs[0])} | {name} | {ks} | "
            + " / ".join(f"{r['spread_err']:+.2%}" for r in rs)
            + f" | {rs[0].get('spread_ci', float('nan')):.2%} | "
            + " / ".join(f"{r['mean_err_sd']:+.3f}" for r in rs)
            + f" | {auto} | {sh['cumulant']['analytic_s']:.2f} | {rs[0]['dkw_95']:.4f} |"
        )
    return "\n".join(out)


def v4_table(
    by_case: dict[str, dict[str, dict]],
    earlier: dict[tuple[str, str], frozenset[str]] | None = None,
    labels: tuple[str, str] = ("v3 shape", "v4 pick"),
) -> str:
    """The v4 criterion applied to every (class, band) (conditions 1-5 for each candidate).

    ``earlier`` and the two column ``labels`` serve a later reading under the same conditions
    (reading F: :func:`f_table`).
    """
    out = [
        f"| class | band | variants | {labels[0]} "
        "| worst KS [band] normal / skew / kurtosis / cumulant "
        "| worst abs spread n / s / k / c | both targets met n / s / k / c "
        f"| candidate: conditions 1-5 | {labels[1]} |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (cls, cv_band), variants in _by_class_band(by_case).items():
        pick, conds = v4_class(cls, cv_band, variants, earlier)
        summ = {s: class_summary(variants, s) for s in SHAPES4}
        worst = " / ".join(
            f"{summ[s]['W']:.4f} [{summ[s]['W_lo']:.4f}, {summ[s]['W_hi']:.4f}]" for s in SHAPES4
        )
        cand = "; ".join(
            f"{s}: " + "".join("y" if ok else "n" for ok in c) for s, c in conds.items()
        )
        out.append(
            f"| {cls} | {cv_band} | {len(variants)} | {V3_RULE[cls]} | {worst} | "
            + " / ".join(f"{summ[s]['sp']:.2%}" for s in SHAPES4)
            + " | "
            + " / ".join(str(summ[s]["met"]) for s in SHAPES4)
            + f" | {cand} | {pick} |"
        )
    return "\n".join(out)


#: The v5 split (``validation/results/core_shape_choice.md``, "v5 criterion", fixed before
#: reading E from the drift study's mechanism): a core is shallow when its depth ratio
#: (stages x vpp) / microbatches is <= R0.
R0 = 2.0

#: ``cur`` of the v5 criterion: the v4 shape of the two (class, band) pairs v5 reads.
V4_LOW: dict[str, str] = {
    "pipeline-interleaved, symmetric ops": "kurtosis",
    "pipeline-interleaved, skewed ops": "normal",
}

#: Condition 2 of v5 (computed before reading E from S and D restricted to shallow variants):
#: cumulant had the lowest worst-case KS in both shallow parts on both readings.
EARLIER_LOWEST_V5: dict[str, frozenset[str]] = {cls: frozenset({"cumulant"}) for cls in V4_LOW}


def depth_ratio(case: str) -> float:
    """``(stages x vpp) / microbatches`` of a grid pipeline case, from its name.

    The grid's names give ``PxM`` and, where it is not the default, ``vpp V`` (default 2 for
    interleaved, 1 for 1F1B / GPipe).
    """
    size = re.search(r"(\d+)x(\d+)", case)
    if size is None:
        raise ValueError(f"case name {case!r} gives no pipeline size")
    vpp = re.search(r"vpp (\d+)", case)
    v = int(vpp.group(1)) if vpp else (2 if "interleaved" in case else 1)
    return int(size.group(1)) * v / int(size.group(2))


def v5_read(rows: list[dict]) -> dict[tuple[str, str], list[dict[str, dict]]]:
    """The variants v5 reads: ``(class, "shallow" | "deep")`` -> cases (op CV <= 10% only)."""
    out: dict[tuple[str, str], list[dict[str, dict]]] = {}
    for name, shapes in _cases(rows).items():
        r = shapes["normal"]
        if r["class"] in V4_LOW and band(r) == BANDS[0]:
            part = "shallow" if depth_ratio(name) <= R0 else "deep"
            out.setdefault((r["class"], part), []).append(shapes)
    return out


def v5_class(cls: str, variants: list[dict[str, dict]]) -> tuple[str, list[bool]]:
    """The v5 criterion on one class's shallow variants: ``(shape, [cond 1..5] of cumulant)``."""
    cur, s = V4_LOW[cls], "cumulant"
    summ = {k: class_summary(variants, k) for k in (cur, s)}
    worse = any(v[s]["ks"] - _band(v[s]) > v[cur]["ks"] + _band(v[cur]) for v in variants)
    conds = [
        summ[s]["W_hi"] < summ[cur]["W_lo"],
        s in EARLIER_LOWEST_V5[cls],
        not worse,
        summ[s]["sp_lo"] <= summ[cur]["sp_hi"],
        summ[s]["met"] >= summ[cur]["met"],
    ]
    return (s if all(conds) else cur), conds


def v5_table(rows: list[dict]) -> str:
    """Per (class, depth part): worst KS / spread / std error and targets, and the v5 verdict."""
    out = [
        "| class | part | variants | v4 shape | worst KS [band] v4 shape / cumulant "
        "| worst abs spread v4 / cumulant | worst abs std err v4 / cumulant "
        "| both targets met v4 / cumulant | cumulant: conditions 1-5 | v5 pick |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (cls, part), variants in sorted(v5_read(rows).items()):
        cur = V4_LOW[cls]
        summ = {k: class_summary(variants, k) for k in (cur, "cumulant")}
        std = {k: max(abs(v[k]["std_err"]) for v in variants) for k in (cur, "cumulant")}
        if part == "shallow":
            pick, conds = v5_class(cls, variants)
            verdict = "".join("y" if ok else "n" for ok in conds)
        else:
            pick, verdict = cur, "not a candidate (deep)"
        out.append(
            f"| {cls} | {part} | {len(variants)} | {cur} | "
            + " / ".join(
                f"{summ[k]['W']:.4f} [{summ[k]['W_lo']:.4f}, {summ[k]['W_hi']:.4f}]"
                for k in (cur, "cumulant")
            )
            + f" | {summ[cur]['sp']:.2%} / {summ['cumulant']['sp']:.2%}"
            + f" | {std[cur]:.2%} / {std['cumulant']:.2%}"
            + f" | {summ[cur]['met']} / {summ['cumulant']['met']} | {verdict} | {pick} |"
        )
    return "\n".join(out)


def v5_cases(rows: list[dict]) -> str:
    """One line per case v5 reads: its depth ratio and the v4 shape's and cumulant's errors.

    KS, spread, std and mean errors of both, the Monte Carlo spread half-width and DKW band, and
    the shape ``auto`` used.
    """
    out = [
        "| class | part | r | case | KS v4 / cumulant | spread v4 / cumulant | MC spread 95% "
        "| std err v4 / cumulant | mean err (sd) v4 / cumulant | auto | cumulant s | MC DKW 95% |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (cls, part), variants in sorted(v5_read(rows).items()):
        cur = V4_LOW[cls]
        for sh in sorted(variants, key=lambda v: depth_ratio(v[cur]["case"])):
            a, c = sh[cur], sh["cumulant"]
            auto = sh.get("auto", {}).get("used") or "-"
            out.append(
                f"| {cls} | {part} | {depth_ratio(a['case']):.3g} | {a['case']} "
                f"| {a['ks']:.4f} / {c['ks']:.4f} "
                f"| {a['spread_err']:+.2%} / {c['spread_err']:+.2%} "
                f"| {a['spread_ci']:.2%} | {a['std_err']:+.2%} / {c['std_err']:+.2%} "
                f"| {a['mean_err_sd']:+.3f} / {c['mean_err_sd']:+.3f} | {auto} "
                f"| {c['analytic_s']:.2f} | {a['dkw_95']:.4f} |"
            )
    return "\n".join(out)


def markdown(rows: list[dict]) -> str:
    """The table (one line per case: both shapes side by side) and the per-class verdict."""
    by_case: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[r["core_shape"]] = r
    out = [
        "| class | case | KS normal | KS skew | spread normal | spread skew | p99 normal "
        "| p99 skew | mean err (sd) normal / skew | MC DKW 95% | skew KS <= normal "
        "| auto (its KS) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    verdict: dict[str, list[bool]] = {}
    for name, shapes in by_case.items():
        n, s = shapes["normal"], shapes["skew"]
        cmp = skew_not_worse(n, s)
        ok = cmp != "NO"
        verdict.setdefault(n["class"], []).append(ok)
        p99 = "replica-max p99" if n["replicas"] else "p99"
        out.append(
            f"| {n['class']} | {name} | {n['ks']:.4f} | {s['ks']:.4f} | "
            f"{n['spread_err']:+.2%} | {s['spread_err']:+.2%} | {n['p99_err']:+.3%} | "
            f"{s['p99_err']:+.3%} ({p99}) | {n['mean_err_sd']:+.3f} / {s['mean_err_sd']:+.3f} | "
            f"{n['dkw_95']:.4f} | {cmp} | {AUTO_RULE[n['class']]}"
            + (f" ({shapes['auto']['ks']:.4f}) |" if "auto" in shapes else " |")
        )
    out += [
        "",
        "| class | variants | skew KS <= normal (or tie) on | rule: shape | engine's AUTO_RULE |",
        "|---|---|---|---|---|",
    ]
    for cls, oks in verdict.items():
        rule = "skew" if all(oks) else "normal"
        out.append(f"| {cls} | {len(oks)} | {sum(oks)} | {rule} | {AUTO_RULE[cls]} |")
    if all("cumulant" in shapes for shapes in by_case.values()):
        out += ["", four_shapes(by_case), "", v4_table(by_case)]
    elif all("kurtosis" in shapes for shapes in by_case.values()):
        out += ["", three_shapes(by_case), "", v3_table(by_case)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Run the grid; print and optionally write the markdown table and JSON rows."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=SAMPLES)
    ap.add_argument("--replica-samples", type=int, default=REPLICA_SAMPLES)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--deep", action="store_true", help="also 32x64 pipelines")
    ap.add_argument("--fresh", action="store_true", help="also reading D's held-out variants")
    ap.add_argument("--fresh-e", action="store_true", help="also reading E's held-out variants")
    ap.add_argument(
        "--only-classes-e",
        action="store_true",
        help="only the cases v5 reads (interleaved pipelines, op CV <= 10%%)",
    )
    ap.add_argument("--v5", action="store_true", help="also print the v5 tables")
    ap.add_argument(
        "--reading-f",
        action="store_true",
        help="only reading F's held-out explicit skewed cores, and its verdict",
    )
    ap.add_argument(
        "--by-class",
        action="store_true",
        help="run class by class (op-CV band too), the workload presets' classes first, so a run"
        " stopped early leaves whole classes read",
    )
    ap.add_argument("--only", nargs="+", metavar="SUBSTRING", help="cases whose name contains")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--markdown", metavar="FILE")
    ap.add_argument(
        "--render", nargs="+", metavar="JSON", help="only print the table of saved --json rows"
    )
    args = ap.parse_args(argv)
    if args.render:
        rows = []
        for path in args.render:
            with open(path) as fh:
                rows += json.load(fh)
        if args.reading_f:
            print(four_shapes(_cases(rows)) + "\n\n" + f_table(_cases(rows)))
        else:
            print(markdown(rows) if not args.v5 else v5_table(rows) + "\n\n" + v5_cases(rows))
        return 0
    every = grid(args.deep) + (fresh_grid() if args.fresh else [])
    every = reading_f_grid() if args.reading_f else every
    every += fresh_e_grid() if args.fresh_e else []
    cases = [c for c in every if not args.only or any(s in c.name for s in args.only)]
    if args.only_classes_e:
        cases = [c for c in cases if c.cls in V4_LOW and op_cv(c.name) <= CV_SPLIT]
    if args.by_class:  # same rows in another order: every case has its own seeded sample
        cases.sort(key=_class_order)
    rows: list[dict] = []
    for case in cases:
        start = time.perf_counter()
        rows += measure(case, args.samples, args.replica_samples, args.seed)
        ks = {r["core_shape"]: round(r["ks"], 4) for r in rows[-5:] if r["case"] == case.name}
        print(f"{case.name}: {ks} {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
        if args.json:  # written as it goes: a long run keeps what it finished
            with open(args.json, "w") as fh:
                json.dump(rows, fh, indent=1)
    if args.reading_f:  # one class: its four-shape rows and reading F's verdict only
        table = four_shapes(_cases(rows)) + "\n\n" + f_table(_cases(rows))
    else:
        table = markdown(rows)
    if args.v5 or args.fresh_e:
        table += "\n\n" + v5_table(rows) + "\n\n" + v5_cases(rows)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
