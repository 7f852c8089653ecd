"""Allocations of point-mass speed laws: every replica degraded, and explicit slow copies.

A speed law of one point mass (``slow_fraction = 1`` with no
spread) gave NaN allocation moments, and the ``k`` explicitly slow copies of a group were given
speed ``f`` instead of ``f`` times their own draw (19 Monte Carlo sd off).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from prism_analytic.analyses.allocation import allocation_moments
from prism_analytic.analyses.decompose import decompose
from prism_analytic.analyses.runtime import _parts, simulate_runs
from prism_analytic.workload.builder import build_step_graph
from prism_analytic.workload.presets import preset_job


def _job(fraction: float):
    job = preset_job("llama3-8b", 64)
    sp = replace(job.variability.spatial, cv=0.0, slow_fraction=fraction, slow_factor=1.3)
    return replace(job, variability=replace(job.variability, spatial=sp))


def test_every_replica_degraded_is_the_limit_of_almost_every():
    """slow_fraction 1 (one point mass) agrees with 1 - 1e-6 (a two-atom mixture)."""
    every = allocation_moments(_parts(_job(1.0)))
    almost = allocation_moments(_parts(_job(1.0 - 1e-6)))
    assert np.all(np.isfinite(every.mean)) and np.all(np.isfinite(every.var))
    mean_almost = float(np.dot(almost.weights, almost.mean))
    assert float(np.dot(every.weights, every.mean)) == pytest.approx(mean_almost, rel=1e-6)


def test_explicit_slow_copies_keep_their_own_draw():
    """Two copies 1.2x slower on top of a degraded-GPU speed law, against simulate_runs."""
    graph = build_step_graph(_job(0.05))
    graph.graph.nodes[graph.topological_order()[0]]["slow"] = (2, 1.2)
    parts = decompose(graph)
    am = allocation_moments(parts)
    runs = simulate_runs(parts, 1, 4000, seed=5)
    se = runs.std() / math.sqrt(runs.size)
    # 4 standard errors (the old code was 19 off)
    assert abs(float(np.dot(am.weights, am.mean)) - runs.mean()) <= 4 * se
