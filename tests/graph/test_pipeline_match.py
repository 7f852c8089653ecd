"""The shared op-by-op pipeline recogniser (``graph.pipeline_match``)."""

from __future__ import annotations

import pytest

import prism_analytic as pa
from prism_analytic.graph.pipeline import pipeline_step_graph
from prism_analytic.graph.pipeline_match import match_pipeline, parse_op_name, pipeline_edges


def _graph(p: int, m: int, schedule: str = "1f1b", vpp: int = 1):
    return pipeline_step_graph(
        p, m, lambda ph, s, mb, c: pa.normal(1.0, 0.05), schedule=schedule, vpp=vpp
    ).graph


def test_parse_op_name() -> None:
    assert parse_op_name("B s3 m10 c1") == ("B", 3, 10, 1)
    for bad in ("F s0 m0", "X s0 m0 c0", "F s0 m0 c0 ", ("in", "F s0 m0 c0"), 3):
        assert parse_op_name(bad) is None


@pytest.mark.parametrize(
    ("schedule", "p", "m", "vpp"),
    [("1f1b", 4, 8, 1), ("gpipe", 3, 5, 1), ("interleaved", 2, 4, 2), ("1f1b", 1, 1, 1)],
)
def test_recognises_each_schedule(schedule: str, p: int, m: int, vpp: int) -> None:
    dag = _graph(p, m, schedule, vpp)
    # a DiGraph's edge view is also a Mapping: the edges must still be counted, not read as data
    assert match_pipeline(dag.nodes, dag.edges()) == (schedule, p, m, vpp)


def test_structure_decides_not_names() -> None:
    dag = _graph(4, 8)
    u, v = next(iter(dag.edges()))
    dag.remove_edge(u, v)  # one dependency fewer: the names still propose 4 x 8
    assert match_pipeline(dag.nodes, dag.edges()) is None
    dag.add_edge(u, v)
    dag.add_edge(u, v)  # a DiGraph keeps one copy: matches again
    assert match_pipeline(dag.nodes, dag.edges()) == ("1f1b", 4, 8, 1)
    # the same edge twice in a multigraph's edge list is not the schedule's DAG
    assert match_pipeline(dag.nodes, [*dag.edges(), (u, v)]) is None
    assert match_pipeline([*dag.nodes, "optimizer"], dag.edges()) is None
    assert match_pipeline([], []) is None


def test_plausible_guard_and_reference() -> None:
    dag = _graph(2, 4)
    seen = []
    guard = lambda p, m, vpp, n: seen.append((p, m, vpp, n)) or False  # noqa: E731
    assert match_pipeline(dag.nodes, dag.edges(), plausible=guard) is None
    assert seen == [(2, 4, 1, 16)]

    def reference(schedule, p, m, vpp):
        if schedule == "1f1b":
            raise ValueError("sizes not allowed")  # skipped, GPipe is still tried
        return pipeline_edges("1f1b", p, m, vpp)

    assert match_pipeline(dag.nodes, dag.edges(), reference=reference) == ("gpipe", 2, 4, 1)
