"""The step DAG as a specification: building, validation errors, JSON round trips, conditioning.

The semantics of ops, collectives, replica groups and regimes, and bad input that gets a clear,
specific error naming the node and the field.
"""

from __future__ import annotations

import copy
import json
import math

import networkx as nx
import numpy as np
import pytest

import prism_analytic as pa
from prism_analytic.graph import OP, REPLICA, GraphError, Regime, StepGraph
from prism_analytic.graph.pipeline import op_name, pipeline_step_graph

N = pa.normal(1.0, 0.05)


def one_op(name: str = "body", latency=N, kind: str = "compute") -> StepGraph:
    g = StepGraph(name)
    g.add_op("x", latency, kind=kind)
    return g


def rich_graph() -> StepGraph:
    """Every node type, every serialisable distribution type, nesting two deep, two regimes."""
    g = StepGraph("rich")
    g.add_op("z", N)
    g.add_op("a", pa.exponential(0.1, loc=0.2))
    g.add_op("m", pa.gamma(1.0, 0.1), after=["z", "a"])
    g.add_collective("ar", pa.point_mass(0.3), after=["a"], tags=("inter-node",))
    inner = StepGraph("inner")
    inner.add_op("k", pa.mixture([pa.normal(1.0, 0.1), pa.lognormal(2.0, 0.1)], [0.3, 0.7]))
    body = StepGraph("body")
    body.add_op("f", pa.lognormal(1.0, 0.1))
    body.add_op("w", pa.empirical([1.0, 2.0, 2.5, 3.0]), after=["f"], kind="comm")
    body.add_replica_group("tp", inner, 8, after=["w"], slow=(2, 1.5))
    g.add_replica_group("dp", body, 64, after=["m", "ar"], speed=pa.lognormal(1.0, 0.02))
    g.add_op("aff", N.scale(2.0).shift(1.0), after=["dp"])
    g.add_op("grid", pa.convolve(N, pa.uniform(0.0, 0.1)), after=["aff"])
    g.add_regime("net", {"ok": 0.9, "bad": 0.1}, {"ok": 1.0, "bad": 3.0})
    g.add_regime("dc", {"ok": 0.95, "cut": 0.05}, {"ok": 1.0, "cut": 2.0}, applies_to="inter-node")
    return g


# ----- building -----------------------------------------------------------------------------------
def test_add_op_records_attributes_and_edges():
    g = StepGraph("g")
    assert g.add_op("fwd", N) == "fwd"
    assert g.add_op("bwd", pa.normal(2.0, 0.1), after="fwd", tags=("t1", "t2")) == "bwd"
    assert g.nodes == ["fwd", "bwd"] and len(g) == 2
    assert list(g.graph.edges) == [("fwd", "bwd")]
    d = g.node("bwd")
    assert d["type"] == OP and d["kind"] == "compute" and d["tags"] == ("t1", "t2")
    assert d["latency"].mean() == pytest.approx(2.0)
    assert g.topological_order() == ["fwd", "bwd"]
    g.validate()


def test_add_collective_is_a_comm_op():
    g = StepGraph()
    g.add_op("a", N)
    g.add_op("b", N)
    g.add_collective("ar", pa.point_mass(0.1), after=["a", "b"], tags=("inter-node",))
    d = g.node("ar")
    assert d["type"] == OP and d["kind"] == "comm" and d["tags"] == ("inter-node",)
    assert sorted(g.graph.predecessors("ar")) == ["a", "b"]


def test_add_replica_group_stores_body_n_slow_speed():
    g = StepGraph()
    g.add_op("load", N)
    speed = pa.lognormal(1.0, 0.02)
    g.add_replica_group("dp", one_op(), 4096, after=["load"], slow=(3, 1.5), speed=speed)
    d = g.node("dp")
    assert d["type"] == REPLICA and d["n"] == 4096 and d["slow"] == (3, 1.5)
    assert d["speed"] is speed and isinstance(d["body"], StepGraph)
    # float counts that are whole numbers are accepted and stored as int
    g.add_replica_group("tp", one_op(), 8.0)
    assert g.node("tp")["n"] == 8 and isinstance(g.node("tp")["n"], int)
    # zero slow copies is no slow copy at all
    g.add_replica_group("pp", one_op(), 8, slow=(0, 2.0))
    assert g.node("pp")["slow"] is None
    # every copy may be slow
    g.add_replica_group("all", one_op(), 8, slow=(8, 2.0))
    assert g.node("all")["slow"] == (8, 2.0)


def test_add_regime_and_regime_states():
    g = StepGraph()
    g.add_collective("ar", N, tags=("inter-node",))
    r = g.add_regime("net", {"ok": 0.8, "slow": 0.2}, {"ok": 1.0, "slow": 1.5})
    assert isinstance(r, Regime) and r.applies_to == "comm" and g.regimes == [r]
    g.add_regime(
        "dc",
        {"ok": 0.9, "cut": 0.1, "never": 0.0},
        {"ok": 1.0, "cut": 4.0, "never": 9.0},
        applies_to="inter-node",
    )
    states = list(g.regime_states())
    assert len(states) == 4  # zero-probability states are skipped
    assert sum(p for p, _ in states) == pytest.approx(1.0)
    assert (pytest.approx(0.02), {"comm": 1.5, "inter-node": 4.0}) in [
        (pytest.approx(p), f) for p, f in states
    ]
    # two regimes on the same class multiply their factors
    h = StepGraph()
    h.add_collective("ar", N)
    h.add_regime("a", {"x": 1.0}, {"x": 2.0})
    h.add_regime("b", {"y": 1.0}, {"y": 3.0})
    assert list(h.regime_states()) == [(1.0, {"comm": 6.0})]
    # no regimes: one state, no factors
    assert list(one_op().regime_states()) == [(1.0, {})]


def test_total_ops_counts_every_replica():
    g = rich_graph()
    # z, a, m, ar, aff, grid + 64 * (f, w + 8 * k)
    assert g.total_ops() == 6 + 64 * (2 + 8)
    big = StepGraph()
    big.add_replica_group("dp", one_op(), 10**12)
    assert big.total_ops() == 10**12


# ----- validation: clear errors that name the node and the field ---------------------------------
def test_cycle_is_reported_with_its_nodes():
    g = StepGraph("cyc")
    g.add_op("a", N)
    g.add_op("b", N, after=["a"])
    g.add_op("c", N, after=["b"])
    g.validate()
    g.graph.add_edge("c", "a")
    with pytest.raises(GraphError, match=r"graph 'cyc' has a cycle: .*a.*b.*c"):
        g.validate()
    with pytest.raises(GraphError, match="cycle"):
        g.topological_order()
    with pytest.raises(GraphError, match="cycle"):
        pa.predict(g)


def test_cycle_inside_a_replica_body_is_found():
    body = StepGraph("inner-body")
    body.add_op("x", N)
    body.add_op("y", N, after=["x"])
    g = StepGraph("outer")
    g.add_replica_group("dp", body, 4)
    body.graph.add_edge("y", "x")
    with pytest.raises(GraphError, match="'inner-body' has a cycle"):
        g.validate()


def test_empty_graph_and_foreign_nodes_are_rejected():
    with pytest.raises(GraphError, match="'empty' is empty"):
        StepGraph("empty").validate()
    g = StepGraph()
    g.graph.add_node("raw")
    with pytest.raises(GraphError, match="'raw' was not added through StepGraph"):
        g.validate()


def test_unknown_predecessor_and_duplicate_names():
    g = StepGraph("g")
    g.add_op("a", N)
    with pytest.raises(GraphError, match=r"node 'c': unknown predecessor\(s\) \['zz'\]"):
        g.add_op("c", N, after=["a", "zz"])
    with pytest.raises(GraphError, match="node 'a' already exists in graph 'g'"):
        g.add_op("a", N)
    with pytest.raises(GraphError, match="node 'a' already exists"):
        g.add_replica_group("a", one_op(), 2)
    with pytest.raises(GraphError, match="non-empty strings"):
        g.add_op("", N)
    with pytest.raises(GraphError, match="non-empty strings"):
        g.add_op(3, N)
    assert g.nodes == ["a"]  # failed additions leave nothing behind


@pytest.mark.parametrize("n", [0, -1, 2.5, "4", True, 10**13, float("nan"), None])
def test_replica_count_must_be_a_positive_integer(n):
    g = StepGraph()
    with pytest.raises(GraphError, match=r"replica group 'dp': n must be"):
        g.add_replica_group("dp", one_op(), n)
    assert len(g) == 0
    assert issubclass(GraphError, ValueError)  # catchable as the usual bad-value error


def test_latency_must_be_a_distribution():
    g = StepGraph()
    for bad in (1.0, None, "normal", np.array([1.0, 2.0])):
        with pytest.raises(GraphError, match=r"op 'x': latency must be a Distribution"):
            g.add_op("x", bad)
    with pytest.raises(GraphError, match=r"op 'c': latency must be a Distribution, got float"):
        g.add_collective("c", 0.5)


def test_kind_must_be_allowed():
    with pytest.raises(
        GraphError,
        match=r"op 'x': kind must be one of \('compute', 'comm'\), "
        r"got 'io'",
    ):
        StepGraph().add_op("x", N, kind="io")


@pytest.mark.parametrize(
    "slow, match",
    [
        ((5, 2.0), r"replica group 'dp': slow count must be <= 4, got 5"),
        ((-1, 2.0), r"replica group 'dp': slow count must be an integer >= 0"),
        ((1.5, 2.0), r"replica group 'dp': slow count must be an integer"),
        ((1, 0.0), r"replica group 'dp': slow factor must be > 0"),
        ((1, -2.0), r"replica group 'dp': slow factor must be > 0"),
        ((1, float("inf")), r"replica group 'dp': slow factor must be finite"),
        ((1, "2"), r"replica group 'dp': slow factor must be a real number"),
    ],
)
def test_bad_slow_tuples(slow, match):
    with pytest.raises(GraphError, match=match):
        StepGraph().add_replica_group("dp", one_op(), 4, slow=slow)


@pytest.mark.parametrize("slow", [(1,), 5, (1, 2.0, 3)])
def test_malformed_slow_names_group_and_field(slow):
    with pytest.raises(GraphError, match=r"replica group 'dp': slow"):
        StepGraph().add_replica_group("dp", one_op(), 4, slow=slow)


def test_speed_must_be_a_distribution_with_positive_support():
    with pytest.raises(GraphError, match=r"replica group 'dp': speed must be a Distribution"):
        StepGraph().add_replica_group("dp", one_op(), 4, speed=1.0)
    with pytest.raises(
        GraphError,
        match=r"replica group 'dp': speed factors must be positive; "
        r"support starts at -inf",
    ):
        StepGraph().add_replica_group("dp", one_op(), 4, speed=pa.normal(1.0, 0.1))
    with pytest.raises(GraphError, match="speed factors must be positive"):
        StepGraph().add_replica_group("dp", one_op(), 4, speed=pa.uniform(-0.5, 1.5))
    StepGraph().add_replica_group("dp", one_op(), 4, speed=pa.lognormal(1.0, 0.1))


def test_speed_factor_zero_is_rejected():
    with pytest.raises(GraphError, match="speed factors must be positive"):
        StepGraph().add_replica_group("dp", one_op(), 4, speed=pa.point_mass(0.0))


@pytest.mark.parametrize(
    "probs, factors, match",
    [
        (
            {"ok": 0.5, "bad": 0.4},
            {"ok": 1.0, "bad": 2.0},
            r"regime 'net': probs must sum to 1, got 0\.9",
        ),
        ({"ok": 0.7, "bad": 0.7}, {"ok": 1.0, "bad": 2.0}, r"probs must sum to 1, got 1\.4"),
        ({"ok": 1.5, "bad": -0.5}, {"ok": 1.0, "bad": 2.0}, r"probs\['ok'\] must lie in \[0, 1\]"),
        ({"ok": float("nan")}, {"ok": 1.0}, r"probs\['ok'\] must lie in \[0, 1\]"),
        ({"ok": "1"}, {"ok": 1.0}, r"probs\['ok'\] must lie in \[0, 1\], got '1'"),
        ({"ok": 0.5, "bad": 0.5}, {"ok": 1.0}, "probs and factors must name the same states"),
        ({}, {}, "needs at least one state"),
        ({"ok": 0.5, "bad": 0.5}, {"ok": 1.0, "bad": -2.0}, r"factors\['bad'\] must be > 0"),
        ({"ok": 0.5, "bad": 0.5}, {"ok": 1.0, "bad": 0.0}, r"factors\['bad'\] must be > 0"),
    ],
)
def test_bad_regimes(probs, factors, match):
    g = StepGraph()
    g.add_collective("ar", N)
    with pytest.raises(GraphError, match=match):
        g.add_regime("net", probs, factors)
    assert g.regimes == []


def test_duplicate_regime_and_too_many_combinations():
    g = StepGraph()
    g.add_collective("ar", N)
    g.add_regime("net", {"ok": 1.0}, {"ok": 1.0})
    with pytest.raises(GraphError, match="regime 'net' already declared"):
        g.add_regime("net", {"ok": 1.0}, {"ok": 2.0})
    states = {f"s{i}": 1 / 64 for i in range(64)}
    g.add_regime("a", states, dict.fromkeys(states, 1.0))
    g.add_regime("b", states, dict.fromkeys(states, 1.0))  # 4096 combinations: the limit
    with pytest.raises(
        GraphError,
        match=r"regime 'c': 8192 state combinations exceed the limit "
        r"of 4096",
    ):
        g.add_regime("c", {"x": 0.5, "y": 0.5}, {"x": 1.0, "y": 1.0})
    assert [r.name for r in g.regimes] == ["net", "a", "b"]


def test_regimes_inside_replica_bodies_are_rejected():
    body = one_op()
    body.add_regime("net", {"ok": 1.0}, {"ok": 2.0})
    with pytest.raises(
        GraphError,
        match=r"replica group 'dp': regimes are per-step shocks; "
        r"declare them on the top-level graph",
    ):
        StepGraph().add_replica_group("dp", body, 4)


def test_validate_rechecks_regimes_in_bodies():
    body = one_op(kind="comm")
    g = StepGraph()
    g.add_replica_group("dp", body, 4)
    with pytest.raises(GraphError, match="regime 'net': graph 'body' is frozen"):
        body.add_regime("net", {"ok": 0.5, "bad": 0.5}, {"ok": 1.0, "bad": 10.0})
    body.regimes.append(g.add_regime("net", {"ok": 0.5, "bad": 0.5}, {"ok": 1.0, "bad": 10.0}))
    g.regimes.clear()  # a regime put into the body behind the API's back: validate finds it
    with pytest.raises(GraphError, match="regime"):
        g.validate()


def test_empty_body_and_non_graph_body_are_rejected():
    with pytest.raises(GraphError, match=r"replica group 'dp': body graph 'nothing' is empty"):
        StepGraph().add_replica_group("dp", StepGraph("nothing"), 4)
    with pytest.raises(
        GraphError,
        match=r"replica group 'dp': body must be a StepGraph, "
        r"got ScipyDistribution",
    ):
        StepGraph().add_replica_group("dp", N, 4)


def test_graph_cannot_be_its_own_replica_body():
    g = one_op("self")
    with pytest.raises(GraphError, match="self"):
        g.add_replica_group("me", g, 2)
        g.validate()  # if the addition was accepted, validation must catch it


def test_tags_given_as_a_string():
    g = StepGraph()
    try:
        g.add_op("a", N, tags="inter-node")
    except GraphError:
        return  # rejecting it with a clear error is also fine
    assert g.node("a")["tags"] == ("inter-node",)


# ----- JSON round trip ----------------------------------------------------------------------------
def test_json_round_trip_is_lossless():
    g = rich_graph()
    d = g.to_dict()
    text = g.to_json()
    assert json.loads(text) == d  # plain JSON types only
    back = StepGraph.from_json(text)
    assert back.to_dict() == d
    assert StepGraph.from_dict(d).to_dict() == d
    assert back.total_ops() == g.total_ops()
    assert back.regimes == g.regimes
    assert sorted(back.graph.edges) == sorted(g.graph.edges)
    # the nested bodies came back with their own structure
    body = back.node("dp")["body"]
    assert body.node("tp")["n"] == 8 and body.node("tp")["slow"] == (2, 1.5)
    assert body.node("w")["kind"] == "comm"
    assert back.node("ar")["tags"] == ("inter-node",)


def test_json_round_trip_keeps_every_distribution():
    g = rich_graph()
    back = StepGraph.from_json(g.to_json())
    x = np.linspace(0.0, 5.0, 41)
    for name in ("z", "a", "m", "ar", "aff", "grid"):
        a, b = g.node(name)["latency"], back.node(name)["latency"]
        assert type(a) is type(b), name
        np.testing.assert_allclose(b.cdf(x), a.cdf(x), rtol=0, atol=1e-15, err_msg=name)
    body_a, body_b = g.node("dp")["body"], back.node("dp")["body"]
    for name in ("f", "w"):
        np.testing.assert_allclose(
            body_b.node(name)["latency"].cdf(x), body_a.node(name)["latency"].cdf(x), atol=1e-15
        )
    mix_a = body_a.node("tp")["body"].node("k")["latency"]
    mix_b = body_b.node("tp")["body"].node("k")["latency"]
    assert isinstance(mix_b, pa.Mixture)
    np.testing.assert_allclose(mix_b.weights, mix_a.weights)
    np.testing.assert_allclose(mix_b.cdf(x), mix_a.cdf(x), atol=1e-15)
    np.testing.assert_allclose(back.node("dp")["speed"].cdf(x), g.node("dp")["speed"].cdf(x))


def test_json_round_trip_preserves_the_prediction():
    g = StepGraph("small")
    g.add_op("a", pa.normal(1.0, 0.1))
    g.add_op("b", pa.empirical([0.4, 0.5, 0.55, 0.7]), after=["a"])
    g.add_collective("c", pa.gamma(0.3, 0.03), after=["a"])
    g.add_replica_group("dp", one_op(), 100, after=["b", "c"])
    g.add_regime("net", {"ok": 0.8, "slow": 0.2}, {"ok": 1.0, "slow": 2.0})
    back = StepGraph.from_json(g.to_json())
    r1, r2 = pa.predict(g), pa.predict(back)
    qs = [0.1, 0.5, 0.99]
    np.testing.assert_array_equal(r1.quantile(qs), r2.quantile(qs))


def test_from_dict_rejects_bad_documents():
    d = rich_graph().to_dict()
    with pytest.raises(GraphError, match="must be an object with 'nodes'"):
        StepGraph.from_dict([1, 2])
    with pytest.raises(GraphError, match="must be an object with 'nodes'"):
        StepGraph.from_dict({"edges": []})
    bad = copy.deepcopy(d)
    bad["edges"].append({"source": "ghost", "target": "a"})
    with pytest.raises(GraphError, match=r"edges name unknown node\(s\) \['ghost'\]"):
        StepGraph.from_dict(bad)
    bad = copy.deepcopy(d)
    bad["edges"] += [{"source": "ar", "target": "z"}, {"source": "z", "target": "ar"}]
    with pytest.raises(GraphError, match="graph data has a cycle"):
        StepGraph.from_dict(bad)
    bad = copy.deepcopy(d)
    bad["nodes"][0]["type"] = "task"
    with pytest.raises(
        GraphError, match=r"nodes\['z'\]\.type must be 'op', 'pipeline' or 'replica', got 'task'"
    ):
        StepGraph.from_dict(bad)
    bad = copy.deepcopy(d)
    bad["nodes"][0]["latency"] = {"type": "weibull"}
    with pytest.raises(ValueError, match=r"nodes\['z'\]\.latency\.type must be one of"):
        StepGraph.from_dict(bad)
    bad = copy.deepcopy(d)
    bad["nodes"][0]["latency"] = {"type": "scipy", "family": "nope"}
    with pytest.raises(ValueError, match=r"nodes\['z'\]\.latency\.family: unknown"):
        StepGraph.from_dict(bad)
    bad = copy.deepcopy(d)
    bad["nodes"][0]["latency"] = {"type": "point_mass"}
    with pytest.raises(ValueError, match=r"nodes\['z'\]\.latency: missing field 'value'"):
        StepGraph.from_dict(bad)
    bad = copy.deepcopy(d)
    bad["nodes"][0]["kind"] = "io"
    with pytest.raises(GraphError, match="op 'z': kind must be one of"):
        StepGraph.from_dict(bad)
    bad = copy.deepcopy(d)
    next(n for n in bad["nodes"] if n["id"] == "dp")["n"] = 0
    with pytest.raises(GraphError, match="replica group 'dp': n must be an integer >= 1"):
        StepGraph.from_dict(bad)
    bad = copy.deepcopy(d)
    bad["regimes"][0]["probs"]["ok"] = 0.5
    with pytest.raises(GraphError, match="regime 'net': probs must sum to 1"):
        StepGraph.from_dict(bad)


def test_from_dict_rejects_duplicate_ids():
    d = rich_graph().to_dict()
    clash = copy.deepcopy(d["nodes"][0])
    clash["latency"] = {"type": "point_mass", "value": 99.0}
    d["nodes"].append(clash)
    with pytest.raises(GraphError, match="'z'"):
        StepGraph.from_dict(d)


@pytest.mark.parametrize("field", ["latency", "id"])
def test_from_dict_missing_field_is_a_clear_error(field):
    d = rich_graph().to_dict()
    del d["nodes"][0][field]
    with pytest.raises(ValueError, match=field):
        StepGraph.from_dict(d)


def test_from_dict_rejects_invalid_scipy_parameters():
    d = rich_graph().to_dict()
    d["nodes"][0]["latency"] = {"type": "scipy", "family": "norm", "args": [1.0, -0.05], "kwds": {}}
    with pytest.raises(ValueError, match=r"nodes\['z'\]\.latency"):
        StepGraph.from_dict(d)


def test_unserialisable_latency_is_a_clear_error():
    g = StepGraph()
    g.add_op(
        "slowest", pa.max_independent(N, pa.gamma(1.0, 0.1))
    )  # evaluable, but has no JSON spec
    assert math.isfinite(pa.predict(g).mean())
    with pytest.raises(TypeError, match="cannot serialise MaxOfIndependent"):
        g.to_json()


def test_unserialisable_latency_error_names_the_node():
    g = StepGraph()
    g.add_op("a", N)
    g.add_op("slowest", pa.max_independent(N, pa.gamma(1.0, 0.1)), after=["a"])
    with pytest.raises(TypeError, match="slowest"):
        g.to_dict()


# ----- conditioning -------------------------------------------------------------------------------
def test_conditioned_scales_matching_ops_only():
    g = rich_graph()
    c = g.conditioned({"comm": 2.0, "inter-node": 3.0})
    assert c.regimes == [] and g.regimes  # regime-free copy; original untouched
    x = np.linspace(0.0, 5.0, 21)
    # "ar" is comm and tagged inter-node: scaled by both factors
    assert c.node("ar")["latency"].quantile(0.5) == pytest.approx(0.3 * 6.0)
    assert g.node("ar")["latency"].quantile(0.5) == pytest.approx(0.3)
    # compute ops untouched (the same object)
    assert c.node("z")["latency"] is g.node("z")["latency"]
    # inside bodies, recursively
    w_new = c.node("dp")["body"].node("w")["latency"]
    w_old = g.node("dp")["body"].node("w")["latency"]
    np.testing.assert_allclose(w_new.cdf(2.0 * x), w_old.cdf(x))
    assert c.node("dp")["body"].node("f")["latency"] is g.node("dp")["body"].node("f")["latency"]
    assert g.node("dp")["body"].node("w")["latency"] is w_old
    # structure, counts, slow and speed preserved
    assert sorted(c.graph.edges) == sorted(g.graph.edges)
    assert c.node("dp")["n"] == 64 and c.node("dp")["speed"] is g.node("dp")["speed"]
    assert c.node("dp")["body"].node("tp")["slow"] == (2, 1.5)
    assert c.total_ops() == g.total_ops()
    # unit factors change nothing
    same = g.conditioned({"comm": 1.0})
    assert same.node("ar")["latency"] is g.node("ar")["latency"]


def test_conditioned_mean_scales_linearly():
    g = StepGraph()
    g.add_collective("ar", pa.gamma(0.5, 0.05), tags=("x",))
    c = g.conditioned({"x": 1.5})
    assert c.node("ar")["latency"].mean() == pytest.approx(0.75)
    assert c.node("ar")["latency"].std() == pytest.approx(0.075)


# ----- pipelines ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "p, m, schedule, vpp",
    [
        (4, 8, "1f1b", 1),
        (4, 8, "gpipe", 1),
        (4, 8, "interleaved", 2),
        (1, 1, "1f1b", 1),
        (3, 2, "1f1b", 1),
    ],
)
def test_pipeline_step_graph_node_counts(p, m, schedule, vpp):
    calls = []

    def latency(phase, stage, mb, chunk):
        calls.append((phase, stage, mb, chunk))
        return pa.normal(1.0 if phase == "F" else 2.0, 0.05)

    g = pipeline_step_graph(p, m, latency, schedule=schedule, vpp=vpp)
    assert len(g) == 2 * p * m * vpp == g.total_ops() == len(calls)
    assert len(set(calls)) == len(calls)
    g.validate()
    assert nx.is_directed_acyclic_graph(g.graph)
    assert max(d for _, d in g.graph.in_degree) <= 2
    assert op_name("F", 0, 0, 0) in g.nodes
    assert op_name("B", 0, m - 1, 0) in g.nodes
    d = g.node(op_name("F", p - 1, 0, vpp - 1))
    assert d["tags"] == ("pipeline", f"stage{p - 1}") and d["kind"] == "compute"
    # a single source (F s0 m0) and a single sink (the last backward on stage 0)
    assert [v for v in g.nodes if g.graph.in_degree(v) == 0] == [op_name("F", 0, 0, 0)]
    assert len([v for v in g.nodes if g.graph.out_degree(v) == 0]) == 1


def test_pipeline_step_graph_rejects_bad_schedules():
    lat = lambda *a: N  # noqa: E731
    with pytest.raises(ValueError, match="schedule"):
        pipeline_step_graph(2, 4, lat, schedule="zigzag")
    with pytest.raises(ValueError, match="vpp"):
        pipeline_step_graph(2, 4, lat, schedule="interleaved", vpp=1)
    with pytest.raises(ValueError, match="stages"):
        pipeline_step_graph(0, 4, lat)
    with pytest.raises(GraphError, match="latency must be a Distribution"):
        pipeline_step_graph(2, 2, lambda *a: 1.0)


def test_pipeline_graph_round_trips():
    g = pipeline_step_graph(2, 3, lambda ph, s, m, c: pa.normal(1.0 + s, 0.05 * (m + 1)))
    assert StepGraph.from_json(g.to_json()).to_dict() == g.to_dict()
    assert math.isfinite(pa.predict(g).mean())
