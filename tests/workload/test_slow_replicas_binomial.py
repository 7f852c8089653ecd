"""Degraded GPUs make each replica slow independently: Binomial(dp, q) slow replicas.

The builder used the rounded expected count ``round(dp q)``: 0.4 expected slow replicas
became none (the step law lost a 33% chance of a slow replica) and 0.64 became one for
certain. The reference here is the binomial mixture over fixed counts,
``sum_k P(K = k) F_k``, each ``F_k`` predicted from a graph with exactly ``k`` slow copies
(the engine's separate ``F(t / factor)^k`` path), against the builder's speed mixture
``((1 - q) F(t) + q F(t / factor))^dp`` (the scale-mixture path).
"""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import optimize, stats

import prism_analytic as pa
from prism_analytic.workload.builder import build_step_graph, slow_replica_probability
from prism_analytic.workload.presets import preset_job

LEVELS = (0.5, 0.7, 0.9, 0.99)


def _job(fraction: float, factor: float):
    job = preset_job("llama3-8b", 8)  # dp = 8 replicas of one GPU each
    spatial = replace(job.variability.spatial, slow_fraction=fraction, slow_factor=factor)
    return replace(job, variability=replace(job.variability, spatial=spatial))


def _with_fixed_count(job, k: int, factor: float) -> pa.StepGraph:
    """The job's graph without degraded GPUs, then ``k`` copies ``factor`` times slower."""
    g = copy.deepcopy(
        build_step_graph(
            replace(
                job,
                variability=replace(
                    job.variability, spatial=replace(job.variability.spatial, slow_fraction=0.0)
                ),
            )
        )
    )
    node = g.graph.nodes[g.topological_order()[0]]
    node["slow"] = (k, factor) if k else None
    return g


@pytest.mark.parametrize("fraction", [0.05, 0.08])  # 0.4 and 0.64 expected slow replicas
def test_step_law_is_the_binomial_mixture(fraction: float) -> None:
    factor = 1.1
    job = _job(fraction, factor)
    dp = job.parallelism.dp
    q = slow_replica_probability(job)
    assert q == pytest.approx(fraction) and dp * q == pytest.approx(dp * fraction)
    new = pa.predict(build_step_graph(job), "analytic")
    weights = stats.binom.pmf(np.arange(dp + 1), dp, q)
    laws = [
        pa.predict(_with_fixed_count(job, k, factor), "analytic") if w > 1e-12 else None
        for k, w in enumerate(weights)
    ]

    def mixture_cdf(x: float) -> float:
        return sum(w * float(r.cdf(x)) for w, r in zip(weights, laws) if r is not None)

    live = [r for r in laws if r is not None]
    lo = min(float(r.quantile(1e-6)) for r in live)
    hi = max(float(r.quantile(1 - 1e-9)) for r in live)
    for level in LEVELS:
        want = optimize.brentq(lambda x, q=level: mixture_cdf(x) - q, lo, hi, xtol=1e-9)
        got = float(new.quantile(level))
        # two lattice paths (scale mixture vs scaled copies): agree to the grids' resolution
        assert got == pytest.approx(want, rel=2e-4), (level, got, want)  # measured <= 2.1e-5
    # what the rounded count gave: none (0.4) or one slow replica for certain (0.64)
    k_old = round(dp * q)
    old = laws[k_old]
    p_slow = 1.0 - weights[0]
    assert p_slow > 0.3  # a third or more of allocations hold a slow replica
    med_gap = abs(float(old.quantile(0.5)) - float(new.quantile(0.5)))
    top_gap = abs(float(old.quantile(0.99)) - float(new.quantile(0.99)))
    assert max(med_gap, top_gap) > 0.02 * float(new.quantile(0.5))  # the rounding was visible


def test_no_degraded_gpus_leaves_the_speed_law_alone() -> None:
    job = _job(0.0, 1.1)
    node = build_step_graph(job).node("replicas")
    assert node["slow"] is None and not hasattr(node["speed"], "weights")
    assert slow_replica_probability(_job(0.05, 1.0)) == 0.0  # factor 1: nothing is slower
    assert slow_replica_probability(_job(1.0, 1.5)) == 1.0
    assert math.isclose(slow_replica_probability(_job(0.01, 1.5)), 0.01)


def test_runs_over_allocations_without_a_lognormal_spread() -> None:
    # cv = 0: the speed law is two point masses; the allocation law enumerates Binomial counts
    # (the continuous quadrature read it as one allocation: std 1 s against Monte Carlo's 64 s)
    from prism_analytic.analyses.allocation import allocation_moments
    from prism_analytic.analyses.runtime import _parts, simulate_runs

    job = preset_job("llama3-8b", 64)
    spatial = replace(job.variability.spatial, cv=0.0, slow_fraction=0.05, slow_factor=1.3)
    job = replace(job, variability=replace(job.variability, spatial=spatial))
    parts = _parts(job)
    am = allocation_moments(parts)
    q = slow_replica_probability(job)
    assert am.weights[0] == pytest.approx(stats.binom.pmf(0, 64, q), rel=1e-9)
    steps = 50
    mean = steps * float(np.dot(am.weights, am.mean))
    std = steps * math.sqrt(float(np.dot(am.weights, (am.mean - np.dot(am.weights, am.mean)) ** 2)))
    runs = simulate_runs(parts, steps, 3000, seed=5)
    assert abs(mean - runs.mean()) < 4.0 * runs.std() / math.sqrt(runs.size)  # MC's own error
    # the spread across allocations (3.8% of them have no slow replica): within MC error
    assert std == pytest.approx(runs.std(), rel=0.1)
