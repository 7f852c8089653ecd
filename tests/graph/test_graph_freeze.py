"""A replica body is frozen once added, and a graph that contains itself is refused clearly.

Before: ``b.add_op(...); g.add_replica_group("r", b, 4); b.add_replica_group("back", g, 2)``
made ``predict`` loop with growing memory and ``validate`` recurse without end.
"""

from __future__ import annotations

import pytest

import prism_analytic as pa
from prism_analytic import GraphError, StepGraph

N = pa.normal(1.0, 0.1)


def _outer_with_body() -> tuple[StepGraph, StepGraph]:
    body = StepGraph("b")
    body.add_op("x", N)
    g = StepGraph("g")
    g.add_replica_group("r", body, 4)
    return g, body


def test_body_cannot_take_its_outer_graph_back() -> None:
    g, body = _outer_with_body()
    with pytest.raises(GraphError, match=r"graph 'b' is frozen.*group 'r' in graph 'g'"):
        body.add_replica_group("back", g, 2)


@pytest.mark.parametrize(
    "change",
    [
        lambda b: b.add_op("y", N, after=["x"]),
        lambda b: b.add_collective("c", N),
        lambda b: b.add_regime("net", {"a": 1.0}, {"a": 2.0}),
        lambda b: b.add_replica_group("inner", StepGraph.from_dict(b.to_dict()), 2),
    ],
)
def test_every_change_to_a_body_is_refused(change) -> None:
    _, body = _outer_with_body()
    before = body.to_dict()
    with pytest.raises(GraphError, match="frozen"):
        change(body)
    assert body.to_dict() == before


def test_outer_graph_that_is_a_body_cannot_take_a_group_of_itself() -> None:
    inner = StepGraph("inner")
    inner.add_op("x", N)
    outer = StepGraph("outer")
    outer.add_replica_group("r", inner, 2)
    top = StepGraph("top")
    top.add_replica_group("o", outer, 3)
    with pytest.raises(GraphError, match="frozen"):
        outer.add_op("late", N)


def test_shared_body_and_outer_graph_stay_usable() -> None:
    g, body = _outer_with_body()
    g.add_replica_group("r2", body, 2, after=["r"])  # one frozen body, two groups
    g.add_op("tail", N, after=["r2"])  # the outer graph is not a body: still editable
    g.validate()
    assert g.total_ops() == 7


def _raw_cycle() -> StepGraph:
    """A cycle made behind the API's back (networkx directly): validation must catch it."""
    g, body = _outer_with_body()
    body.graph.add_node("back", type="replica", body=g, n=2, slow=None, speed=None)
    return g


@pytest.mark.parametrize(
    "call",
    [
        lambda g: g.validate(),
        lambda g: g.total_ops(),
        lambda g: pa.predict(g),
        lambda g: pa.predict(g, "bounds"),
        lambda g: pa.predict(g, "montecarlo", samples=10),
    ],
)
def test_a_cycle_of_bodies_is_named_not_looped(call) -> None:
    g = _raw_cycle()
    with pytest.raises(GraphError, match=r"cycle .*'g' -> group 'r' body graph 'b' -> group"):
        call(g)


def test_cycle_walk_and_tags_terminate() -> None:
    g = _raw_cycle()
    assert g.body_cycle()[0] == "graph 'g'"
    assert {"compute", "comm"} <= g.tags()


def test_no_cycle_reported_for_a_tree() -> None:
    g, _ = _outer_with_body()
    assert g.body_cycle() == []
