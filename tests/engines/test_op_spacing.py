"""Ops next to a coarse replica-group grid are discretised no finer than useful.

A replica group with a speed factor comes back on a coarse lattice H; every sum or max with it
lands on H. Ops beside it get H / (4 k) (k ops on the deepest path) instead of the depth-based
spacing: smaller FFTs, the same brackets.
"""

from __future__ import annotations

import pytest

import prism_analytic as pa
from prism_analytic.engines import analytic
from prism_analytic.graph.pipeline import pipeline_step_graph


def _step() -> pa.StepGraph:
    body = pipeline_step_graph(
        8, 64, lambda ph, s, mb, c: pa.lognormal(1.0 + (ph == "B"), 0.02), compact=True
    )
    g = pa.StepGraph("step")
    g.add_replica_group("replicas", body, 256, speed=pa.lognormal(1.0, 0.02))
    g.add_op("allreduce", pa.lognormal(0.5, 0.1), ["replicas"])
    g.add_op("optimizer", pa.lognormal(0.05, 0.005), ["allreduce"])
    return g


def test_spacing_is_bounded_by_the_group_grid(monkeypatch) -> None:
    g = _step()
    seen = []
    real = analytic._op_spacing
    monkeypatch.setattr(
        analytic,
        "_op_spacing",
        lambda g_, h, w, *r: seen.append((h, dict(w), real(g_, h, w, *r))) or seen[-1][2],
    )
    pa.predict(g)
    (h, children, h_ops) = seen[-1]  # the step graph (its replica body comes first)
    coarse = min(w.h for w in children.values())
    assert h < h_ops == pytest.approx(coarse / (4 * 2))  # two ops on the deepest path
    assert h_ops <= coarse


def test_brackets_are_those_of_the_fine_spacing(monkeypatch) -> None:
    g = _step()
    fast = pa.predict(g)
    monkeypatch.setattr(analytic, "_op_spacing", lambda g_, h, w, *r: h)  # depth-based spacing
    fine = pa.predict(g)
    cell = fast.distribution.h
    for q in (0.01, 0.5, 0.99, 0.999):
        lo_f, hi_f = fast.quantile_bracket(q)
        lo_s, hi_s = fine.quantile_bracket(q)
        assert lo_f <= hi_s and lo_s <= hi_f  # the two brackets overlap
        assert (hi_f - lo_f) <= (hi_s - lo_s) + cell + 1e-12, q
