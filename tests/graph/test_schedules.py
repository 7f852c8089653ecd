"""Pipeline schedule DAGs: structure, per-stage order and closed-form makespans."""

from __future__ import annotations

import networkx as nx
import pytest

from prism_analytic.schedules import SCHEDULES, pipeline_dag, stage_program


def deterministic_makespan(g: nx.DiGraph, t_f: float = 1.0, t_b: float = 2.0) -> float:
    """Longest path with node weights F = t_f / vpp, B = t_b / vpp."""
    v = g.graph["vpp"]
    finish: dict = {}
    for n in nx.topological_sort(g):
        lat = (t_f if g.nodes[n]["phase"] == "F" else t_b) / v
        finish[n] = max((finish[p] for p in g.predecessors(n)), default=0.0) + lat
    return max(finish.values())


CONFIGS = [
    (sch, p, m, 1) for sch in ("gpipe", "1f1b") for p in (1, 2, 3, 4, 8) for m in (1, 2, 5, 8, 16)
] + [("interleaved", p, k * p, v) for v in (2, 3, 4) for p in (1, 2, 4, 8) for k in (1, 2, 4)]


@pytest.mark.parametrize(("schedule", "p", "m", "v"), CONFIGS)
def test_structure(schedule: str, p: int, m: int, v: int) -> None:
    g = pipeline_dag(p, m, schedule, vpp=v)
    assert nx.is_directed_acyclic_graph(g)
    assert g.number_of_nodes() == 2 * p * m * v
    assert max(d for _, d in g.in_degree()) <= 2
    for s in range(p):
        prog = stage_program(g, s)
        assert len(prog) == 2 * m * v
        # every (phase, microbatch, chunk) exactly once per stage
        assert {(n[0], n[2], n[3]) for n in prog} == {
            (ph, i, c) for ph in "FB" for i in range(m) for c in range(v)
        }
        for a, b in zip(prog, prog[1:], strict=False):
            assert g.has_edge(a, b)  # program order
        # a stage's backward of (mb, chunk) comes after its forward of the same
        pos = {n: k for k, n in enumerate(prog)}
        assert all(pos[("F", s, i, c)] < pos[("B", s, i, c)] for i in range(m) for c in range(v))
    for n, d in g.nodes(data=True):
        assert (d["phase"], d["stage"], d["microbatch"], d["chunk"]) == n


@pytest.mark.parametrize(("schedule", "p", "m", "v"), CONFIGS)
def test_closed_form_makespan(schedule: str, p: int, m: int, v: int) -> None:
    # GPipe and 1F1B: (m + p - 1)(tF + tB), for every m including m < p. Interleaved (Megatron):
    # bubble (p - 1)(tF + tB)/v, i.e. bubble ratio (p - 1)/(v m), with chunk work 1/v.
    g = pipeline_dag(p, m, schedule, vpp=v)
    expected = (m + (p - 1) / v) * 3.0
    assert deterministic_makespan(g) == pytest.approx(expected, rel=1e-12)


def test_1f1b_stage_order() -> None:
    g = pipeline_dag(4, 6, "1f1b")
    # stage 0: warm-up p-s-1 = 3 forwards, then F/B pairs, then the remaining backwards
    assert stage_program(g, 0) == [
        ("F", 0, 0, 0), ("F", 0, 1, 0), ("F", 0, 2, 0),
        ("F", 0, 3, 0), ("B", 0, 0, 0), ("F", 0, 4, 0), ("B", 0, 1, 0), ("F", 0, 5, 0),
        ("B", 0, 2, 0), ("B", 0, 3, 0), ("B", 0, 4, 0), ("B", 0, 5, 0),
    ]  # fmt: skip
    last = [(n[0], n[2]) for n in stage_program(g, 3)]
    assert last == [(ph, i) for i in range(6) for ph in "FB"]


def test_gpipe_stage_order() -> None:
    g = pipeline_dag(3, 4, "gpipe")
    assert [(n[0], n[2]) for n in stage_program(g, 1)] == [("F", i) for i in range(4)] + [
        ("B", i) for i in range(4)
    ]


def test_interleaved_stage_order() -> None:
    # Megatron, p=2, m=4, v=2, stage 0: warm-up (p-s-1)*2 + (v-1)*p = 4 virtual microbatches;
    # forward k -> chunk (k % 4)//2, microbatch (k//4)*2 + k%2; backward chunks reversed.
    g = pipeline_dag(2, 4, "interleaved", vpp=2)
    assert [(n[0], n[2], n[3]) for n in stage_program(g, 0)] == [
        ("F", 0, 0), ("F", 1, 0), ("F", 0, 1), ("F", 1, 1),
        ("F", 2, 0), ("B", 0, 1), ("F", 3, 0), ("B", 1, 1),
        ("F", 2, 1), ("B", 0, 0), ("F", 3, 1), ("B", 1, 0),
        ("B", 2, 1), ("B", 3, 1), ("B", 2, 0), ("B", 3, 0),
    ]  # fmt: skip


def test_interleaved_data_dependencies() -> None:
    g = pipeline_dag(2, 2, "interleaved", vpp=2)
    # chunk c on stage s is virtual stage c*p + s
    assert g.has_edge(("F", 1, 0, 0), ("F", 0, 0, 1))
    assert g.has_edge(("B", 0, 0, 1), ("B", 1, 0, 0))
    assert g.has_edge(("F", 0, 0, 0), ("F", 1, 0, 0))
    assert g.has_edge(("B", 1, 1, 1), ("B", 0, 1, 1))


def test_graph_attributes() -> None:
    g = pipeline_dag(4, 8, "interleaved", vpp=2)
    assert g.graph == {"schedule": "interleaved", "stages": 4, "microbatches": 8, "vpp": 2}
    assert g.nodes[("F", 0, 0, 0)]["position"] == 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"stages": 0, "microbatches": 4}, "stages"),
        ({"stages": 2.0, "microbatches": 4}, "stages"),
        ({"stages": True, "microbatches": 4}, "stages"),
        ({"stages": 2, "microbatches": -1}, "microbatches"),
        ({"stages": 2, "microbatches": 4, "schedule": "zb"}, "schedule must be one of"),
        ({"stages": 2, "microbatches": 4, "schedule": "1f1b", "vpp": 2}, "vpp must be 1"),
        ({"stages": 2, "microbatches": 4, "schedule": "interleaved", "vpp": 1}, "vpp must be >= 2"),
        ({"stages": 2, "microbatches": 4, "schedule": "interleaved", "vpp": 0}, "vpp"),
        ({"stages": 4, "microbatches": 6, "schedule": "interleaved", "vpp": 2}, "divisible"),
    ],
)
def test_invalid_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        pipeline_dag(**kwargs)


def test_stage_program_unknown_stage() -> None:
    with pytest.raises(ValueError, match="stage"):
        stage_program(pipeline_dag(2, 2), 5)


def test_schedules_constant() -> None:
    assert SCHEDULES == ("gpipe", "1f1b", "interleaved")
