"""Bounds on an op-by-op pipeline go through the compact pipeline's lattice pass.

An op-by-op pipeline whose ops are named as ``pipeline_step_graph`` names them, whose laws
repeat over microbatches and whose edges are exactly a schedule's DAG is the same random
makespan as the compact node: ``bounds`` gives it the compact node's bounds (one lattice pass,
~20x faster at 16 x 64). Checked against the generic op-by-op bounds engine (an independent
computation of the same guarantees) and against Monte Carlo; anything else keeps the generic
engine.
"""

from __future__ import annotations

import pytest

import prism_analytic as pa
from prism_analytic.engines import bounds
from prism_analytic.graph.pipeline import pipeline_step_graph

LEVELS = (0.01, 0.5, 0.9, 0.99)


def lat(phase: str, stage: int, mb: int, chunk: int) -> pa.Distribution:
    return pa.normal(1.0 if phase == "F" else 2.0, 0.05 if phase == "F" else 0.1)


@pytest.mark.parametrize(
    "schedule,p,m,vpp", [("1f1b", 4, 8, 1), ("gpipe", 3, 5, 1), ("interleaved", 4, 8, 2)]
)
def test_op_by_op_pipeline_gets_the_compact_bounds(
    schedule: str, p: int, m: int, vpp: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    explicit = pipeline_step_graph(p, m, lat, schedule=schedule, vpp=vpp)
    compact = pipeline_step_graph(p, m, lat, schedule=schedule, vpp=vpp, compact=True)
    fast = pa.predict(explicit, "bounds")
    same = pa.predict(compact, "bounds")
    monkeypatch.setattr(bounds, "_as_compact", lambda g: None)  # the generic op-by-op engine
    generic = pa.predict(explicit, "bounds")
    mc = pa.predict(compact, "montecarlo", samples=20_000, seed=3)
    for q in LEVELS:
        low, high = fast.quantile_bracket(q)
        assert (low, high) == same.quantile_bracket(q)
        g_low, g_high = generic.quantile_bracket(q)
        ci = mc.quantile_bracket(q, confidence=0.999)
        assert low <= ci[0] and ci[1] <= high, q  # a guaranteed bound holds the truth
        assert g_low <= ci[0] and ci[1] <= g_high, q
        # the same two bounds (lattice rounding aside)
        assert high == pytest.approx(g_high, rel=5e-3), q
        assert low == pytest.approx(g_low, rel=5e-3), q


def test_anything_else_keeps_the_generic_engine() -> None:
    base = pipeline_step_graph(3, 4, lat)
    assert bounds._as_compact(base) is not None
    # one microbatch with its own law: not one law per (phase, stage, chunk)
    odd = pipeline_step_graph(
        3, 4, lambda ph, s, mb, c: pa.normal(1.5, 0.1) if mb == 2 else lat(ph, s, mb, c)
    )
    assert bounds._as_compact(odd) is None
    # an extra dependency
    extra = pipeline_step_graph(3, 4, lat)
    extra.graph.add_edge("F s0 m0 c0", "F s2 m3 c0")
    assert bounds._as_compact(extra) is None
    # an op that is not a pipeline op
    more = pipeline_step_graph(3, 4, lat)
    more.add_op("optimizer", pa.normal(1.0, 0.01), after=["B s0 m3 c0"])
    assert bounds._as_compact(more) is None
