"""The analytic engine's op-grid cache (engines/grid_cache.py): same bits, bounded, keyed right."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa
from prism_analytic.distributions import to_grid
from prism_analytic.engines import grid_cache
from prism_analytic.engines.grid_cache import cached_grid, clear_grid_cache, grid_cache_info
from prism_analytic.engines.predict import predict
from prism_analytic.policy import GridPolicy

LEVELS = np.array([0.01, 0.5, 0.9, 0.99])


def _step() -> pa.StepGraph:
    step = pa.StepGraph("s")
    step.add_op("a", pa.lognormal(1e-3, 2e-4))
    step.add_op("b", pa.mixture([pa.normal(2e-3, 1e-4), pa.normal(9e-3, 1e-4)], [0.99, 0.01]))
    step.add_op("c", pa.lognormal(1e-3, 2e-4), after=["a", "b"])
    return step


def _answer(step: pa.StepGraph, policy: GridPolicy | None = None) -> bytes:
    d = predict(step, "analytic", policy=policy).distribution
    lo, hi = d.quantile_bracket(LEVELS)
    return np.concatenate([d.quantile(LEVELS), lo, hi]).tobytes()


def test_cached_answer_is_bit_identical() -> None:
    clear_grid_cache()
    cold = _answer(_step())
    assert grid_cache_info()["misses"] > 0 and grid_cache_info()["hits"] == 0
    warm = _answer(_step())  # a fresh graph: parameter-keyed laws hit
    assert grid_cache_info()["hits"] > 0
    clear_grid_cache()
    assert _answer(_step()) == cold == warm


def test_policy_is_part_of_the_key() -> None:
    # tail_mass changes the grids' windows at the same spacing h, so only the policy in the
    # key keeps them apart (a rel_width change would move h, already in the key)
    clear_grid_cache()
    wide = _answer(_step(), GridPolicy(tail_mass=1e-15))
    short = _answer(_step(), GridPolicy(tail_mass=1e-6))
    assert wide != short
    clear_grid_cache()
    assert _answer(_step(), GridPolicy(tail_mass=1e-6)) == short


def test_scipy_laws_outside_scipys_families_are_keyed_by_object() -> None:
    # rv_histogram keeps its data outside args/kwds: two histograms must not share a grid
    bins = np.array([1.0, 1.1, 1.2, 1.3])
    a = stats.rv_histogram((np.array([6, 1, 3]), bins)).freeze()
    b = stats.rv_histogram((np.array([3, 1, 6]), bins)).freeze()
    la, lb = pa.from_scipy(a), pa.from_scipy(b)
    assert la._key() != lb._key()
    assert pa.from_scipy(stats.norm(1, 2))._key() == pa.from_scipy(stats.norm(1, 2))._key()

    def step(law: pa.Distribution) -> pa.StepGraph:
        s = pa.StepGraph("s")
        s.add_op("x", law)
        return s

    clear_grid_cache()
    predict(step(la), "analytic")
    after_a = predict(step(lb), "analytic").distribution.quantile(LEVELS)
    np.testing.assert_allclose(after_a, b.ppf(LEVELS), atol=2e-3)


def test_id_keyed_law_is_held_and_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_grid_cache()
    law = pa.normal(1.0, 0.1)
    grid = to_grid(law, 1e-3)
    key = ("object", id(law))
    out = cached_grid(law, key, 1e-3, grid.policy, lambda: grid)
    assert out is grid
    assert cached_grid(law, key, 1e-3, grid.policy, lambda: pytest.fail("rebuilt")) is grid
    assert grid_cache._GRIDS[(key, 1e-3, grid.policy)][0] is law  # the id stays unique
    monkeypatch.setattr(grid_cache, "MAX_CELLS", grid.lo.size + 1)
    other = to_grid(pa.normal(2.0, 0.1), 1e-3)
    cached_grid(law, ("other",), 1e-3, grid.policy, lambda: other)
    info = grid_cache_info()
    assert info["entries"] == 1 and info["cells"] == other.lo.size  # the older one left
    clear_grid_cache()
    assert grid_cache_info() == {"entries": 0, "values": 0, "cells": 0, "hits": 0, "misses": 0}


def test_speed_range_is_kept_and_identical() -> None:
    from prism_analytic.engines.resolution import resolve_policy

    replica = pa.StepGraph("r")
    replica.add_op("w", pa.normal(1.0, 0.01))
    step = pa.StepGraph("s")
    speed = pa.mixture([pa.lognormal(1.0, 0.02), pa.lognormal(1.5, 0.03)], [0.99, 0.01])
    step.add_replica_group("dp", replica, n=8, speed=speed)
    tight = GridPolicy(max_cells=64)  # the speed range decides the spacing here
    clear_grid_cache()
    first = resolve_policy(step, tight)
    assert grid_cache_info()["values"] == 1
    assert resolve_policy(step, tight) == first != tight
    tail = tight.tail_mass
    key = ("speed range", speed._key(), tail)
    assert grid_cache._VALUES[key] == (speed, (float(speed.quantile(tail)), float(speed.isf(tail))))
