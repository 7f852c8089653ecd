"""predict(): the analytic engine against closed forms, foundation operations and Monte Carlo;
the bounds engine's guarantees; the result object.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections import Counter

import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa
from prism_analytic.graph import StepGraph
from prism_analytic.graph.pipeline import pipeline_step_graph

MC_SAMPLES = 50_000
KS_MAX = 0.01  # DKW 95% band at 5e4 samples is 0.0061
LEVELS = (0.01, 0.5, 0.99, 0.999)


# ----- helpers ------------------------------------------------------------------------------------
def ks(result_mc: pa.StepTimeResult, dist) -> float:
    return float(stats.kstest(result_mc.distribution.samples, dist.cdf).statistic)


def assert_same_law(got, ref, levels=LEVELS):
    """Two numerical answers for one exact law: brackets intersect, estimates within a width."""
    for q in levels:
        g_lo, g_hi = got.quantile_bracket(q)
        r_lo, r_hi = ref.quantile_bracket(q)
        assert g_lo <= r_hi and r_lo <= g_hi, (q, (g_lo, g_hi), (r_lo, r_hi))
        tol = (g_hi - g_lo) + (r_hi - r_lo)
        assert abs(float(got.quantile(q)) - float(ref.quantile(q))) <= tol, q


def chain(*latencies, name="chain") -> StepGraph:
    g = StepGraph(name)
    prev: list[str] = []
    for i, lat in enumerate(latencies):
        g.add_op(f"o{i}", lat, prev)
        prev = [f"o{i}"]
    return g


def two_op_body() -> StepGraph:
    body = StepGraph("body")
    body.add_op("fwd", pa.normal(1.0, 0.05))
    body.add_op("bwd", pa.gamma(2.0, 0.1), after=["fwd"], kind="comm")
    return body


def two_op_law():
    return pa.convolve(pa.normal(1.0, 0.05), pa.gamma(2.0, 0.1))


def group_graph(n, **kwargs) -> StepGraph:
    g = StepGraph("group")
    g.add_replica_group("dp", two_op_body(), n, **kwargs)
    return g


def pipeline(p=4, m=8) -> StepGraph:
    return pipeline_step_graph(
        p, m, lambda ph, s, mb, c: pa.normal(1.0, 0.05) if ph == "F" else pa.normal(2.0, 0.1)
    )


@pytest.fixture(scope="module")
def pipeline_results():
    g = pipeline()
    return (
        pa.predict(g),
        pa.predict(g, "bounds"),
        pa.predict(g, "montecarlo", samples=MC_SAMPLES, seed=3),
    )


# ----- series-parallel graphs are exact -----------------------------------------------------------
def test_chain_of_normals_matches_the_closed_form():
    mus, sds = [1.0, 0.5, 2.0, 0.25, 0.75], [0.05, 0.1, 0.02, 0.01, 0.03]
    r = pa.predict(chain(*(pa.normal(m, s) for m, s in zip(mus, sds))))
    exact = stats.norm(sum(mus), math.sqrt(sum(s * s for s in sds)))
    for q in (0.001, 0.5, 0.99, 0.999):
        low, high = r.quantile_bracket(q)
        assert low <= exact.ppf(q) <= high, q
        assert high - low <= 1e-3 * exact.ppf(q)  # policy rel_width 2.5e-4, with slack
    assert r.mean() == pytest.approx(exact.mean(), rel=1e-6)
    assert r.std() == pytest.approx(exact.std(), rel=1e-4)
    assert r.diagnostics["exact"] is True and r.diagnostics["cores"] == []


def test_chain_of_exponentials_is_gamma():
    r = pa.predict(chain(*[pa.exponential(0.5)] * 6))
    exact = stats.gamma(6, scale=0.5)
    for q in (0.01, 0.5, 0.99, 0.999):
        low, high = r.quantile_bracket(q)
        assert low <= exact.ppf(q) <= high, q


def fork_join() -> tuple[StepGraph, tuple]:
    laws = (pa.normal(1.0, 0.1), pa.normal(2.0, 0.2), pa.gamma(2.1, 0.3), pa.lognormal(0.5, 0.05))
    a, b, c, d = laws
    g = StepGraph("fork-join")
    g.add_op("A", a)
    g.add_op("B", b, ["A"])
    g.add_op("C", c, ["A"], kind="comm")
    g.add_op("D", d, ["B", "C"])
    return g, laws


def test_fork_join_with_shared_ancestor_is_A_plus_max_plus_D():
    g, (a, b, c, d) = fork_join()
    r = pa.predict(g)
    assert r.diagnostics["exact"] is True
    ref = pa.convolve(a, pa.max_independent(b, c), d)
    assert_same_law(r, ref)
    assert r.mean() == pytest.approx(ref.mean(), rel=1e-4)
    assert r.std() == pytest.approx(ref.std(), rel=1e-3)
    # treating A+B and A+C as independent is a different (larger) answer, not this one
    wrong = pa.max_independent(pa.convolve(a, b), pa.convolve(a, c))
    assert pa.convolve(wrong, d).quantile(0.5) > r.quantile_bracket(0.5)[1]


def test_fork_join_agrees_with_monte_carlo():
    g, _ = fork_join()
    r = pa.predict(g)
    mc = pa.predict(g, "montecarlo", samples=MC_SAMPLES, seed=11)
    assert ks(mc, r) <= KS_MAX
    assert mc.mean() == pytest.approx(r.mean(), rel=2e-3)


def test_independent_sinks_and_sources():
    a, b, c = pa.normal(1.0, 0.1), pa.normal(1.1, 0.1), pa.normal(0.5, 0.1)
    g = StepGraph()
    g.add_op("a", a)
    g.add_op("b", b)  # a second source and sink
    g.add_op("c", c, ["a"])
    r = pa.predict(g)
    assert r.diagnostics["exact"] is True
    assert_same_law(r, pa.max_independent(pa.convolve(a, c), b))


# ----- replica groups -----------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 7, 1000, 10**6])
def test_replica_group_is_iid_max_of_the_body(n):
    r = pa.predict(group_graph(n))
    assert r.diagnostics["exact"] is True
    assert_same_law(r, pa.iid_max(two_op_law(), n))


def test_replica_group_matches_the_normal_maximum_oracle():
    """E[max of 65,536 N(0,1)] = 4.2911, sd 0.2770, q99 5.1193, shifted by 10."""
    body = StepGraph("rank")
    body.add_op("x", pa.normal(10.0, 1.0))
    g = StepGraph()
    g.add_replica_group("world", body, 65536)
    r = pa.predict(g)
    assert r.mean() == pytest.approx(14.2911, abs=2e-3)
    assert r.std() == pytest.approx(0.2770, abs=2e-3)
    low, high = r.quantile_bracket(0.99)
    assert low - 1e-4 <= 15.1193 <= high + 1e-4


def test_replica_group_in_context():
    load, sync = pa.normal(0.3, 0.01), pa.gamma(0.2, 0.02)
    g = StepGraph()
    g.add_op("load", load)
    g.add_replica_group("dp", two_op_body(), 512, ["load"])
    g.add_collective("sync", sync, ["dp"])
    r = pa.predict(g)
    assert_same_law(r, pa.convolve(load, pa.iid_max(two_op_law(), 512), sync))


def test_nested_replica_groups_multiply_counts():
    inner = StepGraph("tp")
    inner.add_op("k", pa.normal(1.0, 0.05))
    mid = StepGraph("pp")
    mid.add_replica_group("tp", inner, 8)
    g = StepGraph()
    g.add_replica_group("dp", mid, 2000)
    assert_same_law(pa.predict(g), pa.iid_max(pa.normal(1.0, 0.05), 16000))


def test_slow_copies():
    r = pa.predict(group_graph(64, slow=(3, 1.2)))
    body = two_op_law()
    ref = pa.max_independent(pa.iid_max(body, 61), pa.iid_max(body.scale(1.2), 3))
    assert_same_law(r, ref)
    mc = pa.predict(group_graph(64, slow=(3, 1.2)), "montecarlo", samples=MC_SAMPLES, seed=5)
    assert ks(mc, r) <= KS_MAX
    # all copies slow is the scaled group
    assert_same_law(pa.predict(group_graph(64, slow=(64, 1.2))), pa.iid_max(body.scale(1.2), 64))
    # slow copies only ever slow the step down
    base = pa.predict(group_graph(64))
    for q in LEVELS:
        assert r.quantile(q) >= base.quantile(q)


@pytest.mark.parametrize("n, speed", [(64, pa.lognormal(1.0, 0.03)), (16, pa.uniform(0.5, 1.5))])
def test_speed_factors_agree_with_monte_carlo(n, speed):
    g = group_graph(n, speed=speed)
    r = pa.predict(g)
    mc = pa.predict(g, "montecarlo", samples=MC_SAMPLES, seed=2)
    assert mc.diagnostics["pooled_groups"] == []  # explicit copies: exact semantics
    assert ks(mc, r) <= KS_MAX
    # persistent spread makes the barrier slower than the speed-free group
    assert r.quantile(0.5) > pa.predict(group_graph(n)).quantile(0.5)


def test_speed_for_a_single_copy_is_a_scale_mixture():
    speed = pa.uniform(0.8, 1.2)
    r = pa.predict(group_graph(1, speed=speed))
    # E[S X] = E[S] E[X]; Var[S X] = E[S^2] E[X^2] - (E[S] E[X])^2
    body = two_op_law()
    es, es2 = speed.mean(), speed.var() + speed.mean() ** 2
    ex, ex2 = body.mean(), body.var() + body.mean() ** 2
    assert r.mean() == pytest.approx(es * ex, rel=1e-4)
    assert r.std() == pytest.approx(math.sqrt(es2 * ex2 - (es * ex) ** 2), rel=1e-3)


@pytest.mark.parametrize("method", ["analytic", "bounds"])
def test_point_mass_speed_is_a_constant_slowdown(method):
    r = pa.predict(group_graph(8, speed=pa.point_mass(1.25)), method)
    ref = pa.iid_max(two_op_law().scale(1.25), 8)
    if method == "bounds":  # no point estimate: the bounds contain the answer
        low, high = r.quantile_bracket(0.5)
        assert low <= float(ref.quantile(0.5)) <= high
        return
    assert r.quantile(0.5) == pytest.approx(float(ref.quantile(0.5)), rel=1e-3)


def test_discrete_speed_law_is_exact():
    x = pa.normal(1.0, 0.05)
    body = StepGraph("rank")
    body.add_op("x", x)
    g = StepGraph()
    g.add_replica_group(
        "dp", body, 64, speed=pa.mixture([pa.point_mass(1.0), pa.point_mass(1.5)], [0.99, 0.01])
    )
    r = pa.predict(g)
    # each copy is X with prob 0.99 and 1.5 X with prob 0.01, independently: F^64 of the mixture
    ref = pa.iid_max(pa.mixture([x, x.scale(1.5)], [0.99, 0.01]), 64)
    for q in (0.1, 0.5, 0.9):
        assert r.quantile(q) == pytest.approx(float(ref.quantile(q)), rel=2e-3), q
        assert math.isfinite(r.quantile_bracket(q)[0])


# ----- regimes ------------------------------------------------------------------------------------
def regime_graph() -> StepGraph:
    body = StepGraph("body")
    body.add_op("f", pa.normal(1.0, 0.05))
    body.add_op("ar", pa.lognormal(0.3, 0.03), ["f"], kind="comm")
    g = StepGraph("regimes")
    g.add_op("load", pa.normal(0.2, 0.01))
    g.add_replica_group("dp", body, 16, ["load"])
    g.add_collective("sync", pa.gamma(0.1, 0.01), ["dp"], tags=("inter-node",))
    g.add_regime("net", {"ok": 0.8, "slow": 0.2}, {"ok": 1.0, "slow": 1.5})
    g.add_regime("dc", {"ok": 0.9, "bad": 0.1}, {"ok": 1.0, "bad": 4.0}, applies_to="inter-node")
    return g


def test_regimes_are_the_mixture_of_conditioned_results():
    g = regime_graph()
    r = pa.predict(g)
    states = list(g.regime_states())
    assert len(states) == 4
    parts = [pa.predict(g.conditioned(f)).distribution for _, f in states]
    mix = pa.mixture(parts, [p for p, _ in states])
    for q in (0.1, 0.5, 0.9, 0.99, 0.999):
        low, high = r.quantile_bracket(q)
        assert abs(r.quantile(q) - mix.quantile(q)) <= 2 * (high - low), q
    assert r.mean() == pytest.approx(mix.mean(), rel=1e-4)
    # each conditioned law is itself exact: e.g. the all-good state
    good = g.conditioned({"comm": 1.0, "inter-node": 1.0})
    ref = pa.convolve(
        pa.normal(0.2, 0.01),
        pa.iid_max(pa.convolve(pa.normal(1.0, 0.05), pa.lognormal(0.3, 0.03)), 16),
        pa.gamma(0.1, 0.01),
    )
    assert_same_law(pa.predict(good), ref)


def test_regimes_agree_with_monte_carlo():
    g = regime_graph()
    r = pa.predict(g)
    mc = pa.predict(g, "montecarlo", samples=MC_SAMPLES, seed=4)
    assert ks(mc, r) <= KS_MAX
    # the shock is common to the step: drawing it independently per op is a different law
    # (the max over 16 copies would almost surely meet a slow one: 1 - 0.8^16 = 0.97)
    ar = pa.lognormal(0.3, 0.03)
    body = StepGraph("body")
    body.add_op("f", pa.normal(1.0, 0.05))
    body.add_op("ar", pa.mixture([ar, ar.scale(1.5)], [0.8, 0.2]), ["f"], kind="comm")
    per_op = StepGraph()
    per_op.add_op("load", pa.normal(0.2, 0.01))
    per_op.add_replica_group("dp", body, 16, ["load"])
    per_op.add_collective("sync", pa.gamma(0.1, 0.01), ["dp"])
    assert pa.predict(per_op).quantile(0.5) > r.quantile(0.5) + 0.05


@pytest.mark.parametrize("method", ["analytic", "bounds"])
def test_a_certain_regime_state_still_applies_its_factor(method):
    g = StepGraph()
    g.add_collective("ar", pa.normal(1.0, 0.05))
    g.add_regime("net", {"ok": 1.0, "bad": 0.0}, {"ok": 2.0, "bad": 3.0})
    assert pa.predict(g, "montecarlo", samples=1000).quantile(0.5) == pytest.approx(2.0, rel=0.01)
    low, high = pa.predict(g, method).quantile_bracket(0.5)
    assert 2.0 * (1 - 5e-3) <= low <= 2.0 <= high <= 2.0 * (1 + 5e-3)  # bounds: coarse grid


# ----- cost independent of the replica count ------------------------------------------------------
def _library_calls(graph: StepGraph) -> tuple[Counter, pa.StepTimeResult]:
    """Every call into the library's own functions while predicting ``graph``."""
    root = os.path.dirname(pa.__file__)
    calls: Counter = Counter()

    def profiler(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(root):
            calls[(os.path.relpath(frame.f_code.co_filename, root), frame.f_code.co_name)] += 1

    old = sys.getprofile()
    sys.setprofile(profiler)
    try:
        result = pa.predict(graph)
    finally:
        sys.setprofile(old)
    return calls, result


def test_analytic_cost_does_not_depend_on_n():
    def build(n):
        g = StepGraph()
        g.add_op("load", pa.normal(0.3, 0.01))
        g.add_replica_group("dp", two_op_body(), n, ["load"], slow=(1, 1.1))
        g.add_op("opt", pa.normal(0.2, 0.01), ["dp"])
        return g

    calls_small, small = _library_calls(build(10))
    calls_big, big = _library_calls(build(10**6))
    assert calls_small == calls_big  # the same operations, whatever n
    assert sum(calls_small.values()) < 2000
    cells = pa.DEFAULT_POLICY.max_cells
    assert small.distribution.lo.size <= cells and big.distribution.lo.size <= cells
    huge = pa.predict(build(10**12))
    for q in LEVELS:
        values = [float(r.quantile(q)) for r in (small, big, huge)]
        if not math.isfinite(huge.quantile_bracket(q)[1]):
            # a level inside the grid's tail atom at n = 1e12 is unresolved: nan, not clipped
            assert math.isnan(values[2]), q
            values = values[:2]
        assert all(map(math.isfinite, values))
        assert all(a < b for a, b in zip(values, values[1:])), q


# ----- bounds -------------------------------------------------------------------------------------
def test_bounds_bracket_the_exact_answer_on_series_parallel_graphs():
    mus, sds = [1.0, 0.5, 2.0], [0.05, 0.1, 0.02]
    rb = pa.predict(chain(*(pa.normal(m, s) for m, s in zip(mus, sds))), "bounds")
    exact = stats.norm(sum(mus), math.sqrt(sum(s * s for s in sds)))
    for q in LEVELS:
        low, high = rb.quantile_bracket(q)
        assert low <= exact.ppf(q) <= high
    g, _ = fork_join()
    ra, rb = pa.predict(g), pa.predict(g, "bounds")
    assert rb.lower is not None and rb.upper is not None
    assert not hasattr(rb, "quantile") and not hasattr(rb, "mean")  # no point estimate
    for q in LEVELS:
        assert rb.lower.quantile_bracket(q)[0] <= ra.quantile(q) <= rb.upper.quantile_bracket(q)[1]
        assert rb.quantile_bracket(q) == (
            rb.lower.quantile_bracket(q)[0],
            rb.upper.quantile_bracket(q)[1],
        )


def test_bounds_contain_analytic_and_monte_carlo_on_a_pipeline(pipeline_results):
    ra, rb, mc = pipeline_results
    levels = (0.001, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999)
    for q in levels:
        low = rb.lower.quantile_bracket(q)[0]
        high = rb.upper.quantile_bracket(q)[1]
        assert low <= ra.quantile(q) <= high, q
        assert low <= mc.quantile(q) <= high, q
        assert (low, high) == rb.quantile_bracket(q)
    # the upper bound dominates the true law (up to Monte Carlo's DKW band)
    x = np.quantile(mc.distribution.samples, np.linspace(0.01, 0.99, 99))
    eps = mc.diagnostics["dkw_95"]
    assert np.all(mc.cdf(x) >= rb.upper.cdf_bounds(x)[0] - eps)
    assert np.all(mc.cdf(x) <= rb.lower.cdf_bounds(x)[1] + eps)


def test_pipeline_analytic_is_close_to_monte_carlo(pipeline_results):
    """Not exact (a Clark-Mehler core), but much better than the independence upper bound."""
    ra, rb, mc = pipeline_results
    assert ra.diagnostics["exact"] is False
    assert len(ra.diagnostics["cores"]) == 1 and ra.diagnostics["cores"][0]["edges"] > 0
    assert ks(mc, ra) <= 0.02  # Clark-Mehler: KS 0.008 at 4x8
    assert ks(mc, rb.upper) > 0.2  # the independence answer is far off
    assert ra.mean() == pytest.approx(mc.mean(), rel=1e-3)


def test_bounds_with_regimes_and_groups_contain_analytic():
    g = regime_graph()
    ra, rb = pa.predict(g), pa.predict(g, "bounds")
    for q in LEVELS:
        low, high = rb.quantile_bracket(q)
        assert low <= ra.quantile(q) <= high


# ----- the result object --------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["analytic", "bounds", "montecarlo"])
def test_result_to_dict_summary_plot(method):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g, _ = fork_join()
    r = pa.predict(g, method, samples=20_000)
    assert isinstance(r, pa.StepTimeResult) and r.method == method
    d = r.to_dict()
    assert d["exact"] is (method == "analytic") and d["guarantee"]
    assert set(d["quantiles"]) == {"0.5", "0.9", "0.95", "0.99", "0.999"}
    assert d["method"] == method and d["compute_time_s"] >= 0
    if method == "bounds":  # lower and upper only, never a point estimate
        assert "mean_s" not in d and "p50_s" not in d
        assert d["quantiles"]["0.99"]["guaranteed_bounds_s"] == d["bracket"]["0.99"]
        json.dumps(d)
        assert "[" in r.summary()
        r.plot()
        plt.close("all")
        return
    for key in ("mean_s", "std_s", "p50_s", "p99_s", "p999_s", "bracket", "compute_time_s"):
        assert key in d, key
    assert d["p50_s"] == pytest.approx(float(r.quantile(0.5)))
    assert d["p999_s"] == pytest.approx(float(r.quantile(0.999)))
    assert d["mean_s"] == pytest.approx(r.mean()) and d["std_s"] == pytest.approx(r.std())
    for q, key in (("0.5", "p50_s"), ("0.99", "p99_s"), ("0.999", "p999_s")):
        low, high = d["bracket"][q]
        assert low <= d[key] <= high
    json.dumps(d)  # JSON-friendly, diagnostics included
    text = r.summary()
    assert method in text and "p99" in text and "p999" in text
    ax = r.plot()
    assert ax.get_lines()
    ax2 = r.plot(ccdf=True)
    assert ax2.get_yscale() == "log"
    plt.close("all")


def test_diagnostics_report_exactness_and_policy(pipeline_results):
    g, _ = fork_join()
    policy = pa.GridPolicy(rel_width=1e-3)
    r = pa.predict(g, policy=policy)
    assert r.diagnostics["exact"] is True
    assert r.diagnostics["policy"] == policy.to_dict()
    assert pa.predict(g, "bounds", policy=policy).diagnostics["policy"] == policy.to_dict()
    low, high = r.quantile_bracket(0.5)
    fine_low, fine_high = pa.predict(g).quantile_bracket(0.5)
    assert high - low > fine_high - fine_low  # a coarser policy is honestly wider
    assert pipeline_results[0].diagnostics["exact"] is False


def test_summary_of_a_zero_step():
    g = StepGraph()
    g.add_op("noop", pa.point_mass(0.0))
    assert "mean 0" in pa.predict(g).summary()


def test_predict_rejects_bad_arguments():
    g, _ = fork_join()
    with pytest.raises(pa.GraphError, match="graph must be a StepGraph, got str"):
        pa.predict("graph")
    with pytest.raises(ValueError, match="method must be one of"):
        pa.predict(g, "exact")
    with pytest.raises(ValueError, match="paths must be an integer >= 1"):
        pa.predict(g, "bounds", paths=0)
    with pytest.raises(ValueError, match="method must be one of"):
        pa.predict(pipeline(2, 2), core_method="magic")


@pytest.mark.parametrize("kwargs", [{"core_method": "magic"}, {"policy": "fine"}])
def test_predict_validates_options_on_any_graph(kwargs):
    g, _ = fork_join()
    with pytest.raises((ValueError, TypeError), match="core_method|policy"):
        pa.predict(g, **kwargs)


def test_result_quantile_bracket_takes_one_level_or_an_array():
    """Every engine's result answers an array of levels level by level (was a TypeError)."""
    g = StepGraph()
    g.add_op("a", pa.normal(1.0, 0.1))
    g.add_op("b", pa.exponential(1.0), after=["a"])
    for method, extra in (("analytic", {}), ("bounds", {}), ("montecarlo", {"samples": 2000})):
        result = pa.predict(g, method, **extra)
        low, high = result.quantile_bracket([0.5, 0.99])
        assert low.shape == high.shape == (2,)
        for i, q in enumerate((0.5, 0.99)):
            assert (low[i], high[i]) == result.quantile_bracket(q)
        with pytest.raises(ValueError, match="q"):
            result.quantile_bracket(1.5)
