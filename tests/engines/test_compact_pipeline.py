"""Compact pipeline nodes: same answers as the explicit schedule, cost flat in the microbatches."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa
from prism_analytic.engines.montecarlo import sample_step
from prism_analytic.engines.pipeline_core import pipeline_makespan, truncation
from prism_analytic.graph import GraphError
from prism_analytic.graph.pipeline import PipelineSpec, law_key, pipeline_step_graph
from prism_analytic.schedules import pipeline_dag, schedule_levels


def lat(phase, stage, mb, chunk):
    base = 1.0 if phase == "F" else 2.0
    return pa.normal(base * (1 + 0.05 * stage), 0.05 * base)


@pytest.mark.parametrize(
    "p,m,schedule,vpp", [(4, 8, "1f1b", 1), (4, 8, "interleaved", 2), (3, 5, "gpipe", 1)]
)
def test_schedule_levels_match_networkx_generations(p, m, schedule, vpp):
    order, preds, sizes = schedule_levels(p, m, schedule, vpp)
    dag = pipeline_dag(p, m, schedule, vpp)
    gens = [set(g) for g in nx.topological_generations(dag)]
    assert [len(g) for g in gens] == sizes
    start = 0
    for g, size in zip(gens, sizes):
        assert set(order[start : start + size]) == g
        start += size
    for i, n in enumerate(order):
        assert {order[j] for j in preds[i]} == set(dag.predecessors(n))


@pytest.mark.parametrize("shape", ["normal", "skew"])
@pytest.mark.parametrize("schedule,vpp", [("1f1b", 1), ("interleaved", 2)])
def test_compact_equals_explicit_analytic(schedule, vpp, shape):
    # per core shape: the default core_shape="auto" classes a compact 1F1B node and an
    # explicit core apart (engines/core_shape.py), so it may give them different shapes
    explicit = pipeline_step_graph(4, 8, lat, schedule=schedule, vpp=vpp)
    compact = pipeline_step_graph(4, 8, lat, schedule=schedule, vpp=vpp, compact=True)
    a, b = (pa.predict(g, core_shape=shape) for g in (explicit, compact))
    assert a.exact is False and b.exact is False
    assert b.mean() == pytest.approx(a.mean(), rel=1e-9)
    assert b.std() == pytest.approx(a.std(), rel=1e-6)


def test_compact_monte_carlo_samples_the_same_law():
    explicit = pipeline_step_graph(4, 8, lat)
    compact = pipeline_step_graph(4, 8, lat, compact=True)
    x = sample_step(explicit, 20_000, settings=pa.MonteCarloSettings(seed=1))
    y = sample_step(compact, 20_000, settings=pa.MonteCarloSettings(seed=2))
    assert stats.ks_2samp(x, y).pvalue > 1e-3


def test_single_stage_or_single_microbatch_is_exact():
    for p, m in ((1, 6), (5, 1)):
        g = pipeline_step_graph(p, m, lat, compact=True)
        r = pa.predict(g)
        assert r.exact is True
        total = sum(lat(ph, s, 0, 0).mean() for ph in "FB" for s in range(p)) * (m if p == 1 else 1)
        assert r.mean() == pytest.approx(total, rel=1e-6)


def test_json_round_trip_and_regimes_on_compact_pipelines():
    g = pa.StepGraph("step")
    body = pipeline_step_graph(4, 8, lat, compact=True)
    g.add_replica_group("dp", body, 64)
    g.add_op("ar", pa.normal(0.5, 0.05), ["dp"], kind="comm")
    g.add_regime("hot", {"ok": 0.9, "slow": 0.1}, {"ok": 1.0, "slow": 1.2}, applies_to="stage3")
    back = pa.StepGraph.from_json(g.to_json())
    assert back.to_dict() == g.to_dict()
    assert g.total_ops() == 64 * 64 + 1
    a, b = pa.predict(g), pa.predict(back)
    assert float(a.quantile(0.99)) == pytest.approx(float(b.quantile(0.99)), rel=1e-12)
    # the regime rescales the stage-3 ops of the compact node as it would the explicit ops
    explicit = pa.StepGraph("step")
    explicit.add_replica_group("dp", pipeline_step_graph(4, 8, lat), 64)
    explicit.add_op("ar", pa.normal(0.5, 0.05), ["dp"], kind="comm")
    explicit.add_regime(
        "hot", {"ok": 0.9, "slow": 0.1}, {"ok": 1.0, "slow": 1.2}, applies_to="stage3"
    )
    # per core shape (the default "auto" classes compact and explicit cores apart)
    for shape in ("normal", "skew"):
        a, c = (pa.predict(x, core_shape=shape) for x in (g, explicit))
        for q in (0.5, 0.95, 0.99):
            assert float(a.quantile(q)) == pytest.approx(float(c.quantile(q)), rel=1e-6)


def test_bad_pipeline_specs_are_rejected():
    laws = {law_key(ph, s): pa.normal(1.0, 0.1) for ph in "FB" for s in range(4)}
    with pytest.raises(GraphError, match="missing"):
        PipelineSpec(4, 8, {k: v for k, v in laws.items() if k != "F s0 c0"})
    with pytest.raises(GraphError, match="divisible by stages"):
        PipelineSpec(
            4,
            6,
            {
                law_key(ph, s, c): pa.normal(1, 0.1)
                for ph in "FB"
                for s in range(4)
                for c in range(2)
            },
            "interleaved",
            2,
        )
    with pytest.raises(GraphError, match="schedule must be one of"):
        PipelineSpec(4, 8, laws, "zigzag")
    with pytest.raises(GraphError, match="spec must be a PipelineSpec"):
        pa.StepGraph().add_pipeline("p", {"stages": 4})


def test_long_pipelines_are_extrapolated_at_flat_cost():
    laws = {law_key(ph, s): lat(ph, s, 0, 0) for ph in "FB" for s in range(4)}
    short = PipelineSpec(4, 48, laws)
    direct = pipeline_makespan(short, cap=10**9)
    extrap = pipeline_makespan(short, cap=8 * 24)  # forces m = 20, 24 and 6 blocks of 4
    assert extrap[2]["evaluated_microbatches"] == [20, 24]
    assert extrap[0] == pytest.approx(direct[0], rel=2e-4)
    assert extrap[1] == pytest.approx(direct[1], rel=0.1)
    # the evaluated sizes do not depend on the microbatch count
    long = PipelineSpec(4, 48_000, laws)
    assert truncation(long, 8 * 24) == truncation(short, 8 * 24)
    # and the long answer agrees with sampling that schedule op by op
    mean, std, _ = pipeline_makespan(PipelineSpec(4, 400, laws), cap=8 * 24)
    x = sample_step(pipeline_step_graph(4, 400, lat, compact=True), 2000)
    se = x.std() / np.sqrt(x.size)
    assert abs(mean - x.mean()) < 4 * se + 0.3 * x.std()
    assert std == pytest.approx(x.std(), rel=0.25)


def test_shared_factors_round_trip_and_sample_their_semantics():
    w, s = pa.lognormal(1.0, 0.1), pa.gamma(1.0, 0.05)
    g = pipeline_step_graph(3, 6, lat, compact=True, microbatch_factor=w, stage_factor=s)
    back = pa.StepGraph.from_json(g.to_json())
    assert back.to_dict() == g.to_dict()
    spec = back.node("pipeline")["spec"]
    assert spec.microbatch_factor is not None and spec.stage_factor is not None
    with pytest.raises(GraphError, match="compact"):
        pipeline_step_graph(3, 6, lat, microbatch_factor=w)
    with pytest.raises(GraphError, match="positive factor"):
        pipeline_step_graph(3, 6, lat, compact=True, stage_factor=pa.normal(1.0, 0.5))
    # one stage, one microbatch: the makespan is (F + B) * W * S exactly
    one = pipeline_step_graph(1, 1, lat, compact=True, microbatch_factor=w, stage_factor=s)
    x = sample_step(one, 100_000, settings=pa.MonteCarloSettings(seed=3))
    rng = np.random.default_rng(4)
    ref = (
        (lat("F", 0, 0, 0)._sample(100_000, rng) + lat("B", 0, 0, 0)._sample(100_000, rng))
        * w._sample(100_000, rng)
        * s._sample(100_000, rng)
    )
    assert stats.ks_2samp(x, ref).pvalue > 1e-3
    r = pa.predict(one)  # moments of the canonical form are exact for a chain
    assert r.mean() == pytest.approx(ref.mean(), rel=5e-3)
    assert r.std() == pytest.approx(ref.std(), rel=0.03)


def test_stage_factor_loadings_grow_linearly_when_extrapolated():
    laws = {law_key(ph, s): lat(ph, s, 0, 0) for ph in "FB" for s in range(2)}
    spec = PipelineSpec(2, 64, laws, stage_factor=pa.lognormal(1.0, 0.05))
    direct = pipeline_makespan(spec, cap=10**9)
    extrap = pipeline_makespan(spec, cap=4 * 16)
    assert extrap[0] == pytest.approx(direct[0], rel=1e-3)
    assert extrap[1] == pytest.approx(direct[1], rel=0.05)


def test_rare_heavy_microbatches_are_conditioned_on():
    heavy = pa.mixture([pa.uniform(1.0, 1.0 + 1e-6), pa.uniform(3.0, 3.0 + 1e-6)], [0.98, 0.02])
    g = pipeline_step_graph(4, 8, lat, compact=True, microbatch_factor=heavy)
    r = pa.predict(g)
    (core,) = r.diagnostics["cores"]
    assert core["components"] > 1 + 8  # none, each single heavy microbatch, some pairs
    x = np.sort(sample_step(g, 40_000, settings=pa.MonteCarloSettings(seed=8)))
    f = np.asarray(r.cdf(x))
    i = np.arange(1, x.size + 1)
    ks = max(np.max(i / x.size - f), np.max(f - (i - 1) / x.size))
    assert ks < 0.04  # a single normal (no conditioning) is off by KS ~0.3 here
    assert float(r.quantile(0.99)) == pytest.approx(float(np.quantile(x, 0.99)), rel=0.01)


@pytest.mark.parametrize("schedule,vpp", [("1f1b", 1), ("interleaved", 2)])
def test_compact_bounds_contain_monte_carlo_and_the_explicit_bounds(schedule, vpp):
    compact = pipeline_step_graph(4, 8, lat, schedule=schedule, vpp=vpp, compact=True)
    explicit = pipeline_step_graph(4, 8, lat, schedule=schedule, vpp=vpp)
    b = pa.predict(compact, "bounds")
    e = pa.predict(explicit, "bounds")
    mc = pa.predict(compact, "montecarlo", samples=50_000, seed=9)
    for q in (0.01, 0.5, 0.9, 0.99, 0.999):
        low, high = b.quantile_bracket(q)
        ci = mc.quantile_bracket(q, confidence=0.999)
        assert low <= ci[0] and ci[1] <= high, q
        # the same independence bound as the explicit engine (lattice rounding aside)
        assert high == pytest.approx(e.quantile_bracket(q)[1], rel=5e-3), q
        assert high <= 1.02 * float(mc.quantile(q)), q
