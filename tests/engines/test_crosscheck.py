"""Every result says what it guarantees; the cross-check measures and flags approximation."""

from __future__ import annotations

import json

import numpy as np
import pytest

import prism_analytic as pa
from prism_analytic.engines.crosscheck import band_grid, verify
from prism_analytic.engines.resolution import resolve_policy
from prism_analytic.engines.result import AnalyticResult, BoundsResult, MonteCarloResult
from prism_analytic.graph.pipeline import pipeline_step_graph

LEVELS = (0.5, 0.9, 0.99)


def lat(phase, stage, mb, chunk):
    return pa.normal(1.0 if phase == "F" else 2.0, 0.05 if phase == "F" else 0.1)


@pytest.fixture(scope="module")
def pipe():
    g = pipeline_step_graph(4, 8, lat, compact=True)
    return g, pa.predict(g, "montecarlo", samples=100_000, seed=11)


def test_exact_results_say_so_and_need_no_check():
    g = pa.StepGraph()
    g.add_op("a", pa.normal(1.0, 0.1))
    g.add_op("b", pa.gamma(2.0, 0.3), ["a"])
    r = pa.predict(g)
    assert isinstance(r, AnalyticResult) and r.exact
    d = r.to_dict()
    assert d["exact"] is True and "guaranteed" in d["guarantee"]
    assert d["quantiles"]["0.5"]["numerical_bracket_guaranteed"] is True
    v = verify(g, r)
    assert v.verification["needed"] is False


def test_each_engine_has_its_own_result_class(pipe):
    g, mc = pipe
    b = pa.predict(g, "bounds")
    assert isinstance(b, BoundsResult) and isinstance(mc, MonteCarloResult)
    for attr in ("mean", "quantile", "std", "distribution"):
        assert not hasattr(b, attr), attr  # bounds never give a point estimate
    d = b.to_dict()
    assert d["exact"] is False and "mean_s" not in d and "p50_s" not in d
    json.dumps(d)
    a = pa.predict(g)
    assert a.exact is False and "NOT its error" in a.guarantee
    assert a.to_dict()["quantiles"]["0.99"]["numerical_bracket_guaranteed"] is False


def test_guaranteed_intervals_contain_monte_carlo(pipe):
    """Every interval labelled guaranteed contains Monte Carlo's 99.9% interval."""
    g, mc = pipe
    v = verify(g, pa.predict(g), samples=4000, bounds=True)
    bounds = v.verification["bounds"]
    for q in (0.5, 0.9, 0.95, 0.99, 0.999):
        low, high = bounds[str(q)]
        ci_low, ci_high = mc.quantile_bracket(q, confidence=0.999)
        assert low <= ci_low and ci_high <= high, q


def test_compact_pipelines_get_default_bounds_by_their_own_cost():
    """A compact pipeline is bounded by its path sums (cheap), not counted as explicit ops.

    8 x 64 has 1,024 ops (over BOUNDS_MAX_OPS as explicit ops) but costs ~21 grid nodes, so
    ``verify`` bounds it by default; the bounds contain Monte Carlo's 99.9% intervals.
    """
    from prism_analytic.engines.crosscheck import BOUNDS_MAX_OPS
    from prism_analytic.engines.predict import grid_nodes

    g = pipeline_step_graph(8, 64, lat, compact=True)
    assert g.total_ops() > BOUNDS_MAX_OPS >= grid_nodes(g, "bounds")
    v = verify(g, pa.predict(g), samples=2000, seed=5).verification
    assert v["bounds_note"].startswith("computed"), v["bounds_note"]
    mc = pa.predict(g, "montecarlo", samples=20_000, seed=12)
    for q in (0.5, 0.99):
        low, high = v["bounds"][str(q)]
        ci_low, ci_high = mc.quantile_bracket(q, confidence=0.999)
        assert low <= ci_low and ci_high <= high, q


def test_cross_check_passes_a_good_core_and_flags_a_degraded_one(pipe):
    g, _ = pipe
    good = verify(g, pa.predict(g), samples=4000, seed=3).verification
    (core,) = good["cores"]
    # Clark-Mehler's KS at 4 x 8 is ~0.008 (a diagnostic only); its step quantiles are within
    # 0.1% of the quantile (the default tolerance): no warning
    assert core["samples"] >= 500 and core["ks"] < 0.02, core["summary"]
    assert good["warning"] is None
    for row in good["quantile_errors"]:
        assert row["within_tolerance"], row
        band = good["step_band"][str(row["q"])]
        assert row["error_s"] == pytest.approx(band["estimate_s"] - band["montecarlo_propagated_s"])
    bad = verify(g, pa.predict(g, core_method="independent"), samples=4000, seed=3)
    ver = bad.verification
    assert ver["warning"] is not None and "above the tolerance" in ver["warning"]
    worst = max(abs(r["error_rel"]) for r in ver["quantile_errors"])
    assert worst > 2e-3  # independence at every max is far off
    assert "WARNING" in bad.summary()


def test_step_band_is_a_band_for_the_replica_max():
    """Propagated through F^n exactly, the band contains Monte Carlo's replica-max quantiles."""
    body = pipeline_step_graph(4, 8, lat, compact=True)
    g = pa.StepGraph()
    g.add_replica_group("dp", body, 8)
    r = verify(g, pa.predict(g), samples=4000, seed=5)
    mc = pa.predict(g, "montecarlo", samples=50_000, seed=6)
    for q in ("0.5",):  # (1 - band)^8 leaves the upper tail unresolved by design
        row = r.verification["step_band"][q]
        low, high = row["band_s"]
        assert low is not None and high is not None
        ci = mc.quantile_bracket(float(q), confidence=0.999)
        assert low <= ci[1] and ci[0] <= high, q
        assert row["inside"]


def test_band_grid_brackets_the_empirical_law():
    x = np.sort(np.random.default_rng(0).normal(5.0, 1.0, 1000))
    grid = band_grid(x, 0.05, 0.01, pa.DEFAULT_POLICY)
    low, high = grid.quantile_bracket(0.5)
    assert low <= np.quantile(x, 0.45) and np.quantile(x, 0.55) <= high
    assert grid.below == pytest.approx(0.05) and grid.above == pytest.approx(0.05)


def test_monte_carlo_intervals_include_the_pool_error():
    body = pa.StepGraph("rank")
    body.add_op("a", pa.normal(1.0, 0.1))
    body.add_op("b", pa.normal(1.0, 0.1), ["a"])
    g = pa.StepGraph()
    g.add_replica_group("dp", body, 4096)
    settings = pa.MonteCarloSettings(explicit_limit=16, pool_size=10_000, seed=1)
    r = pa.predict(g, "montecarlo", samples=20_000, mc_settings=settings)
    if r.pool_error == 0:
        pytest.skip("this Monte Carlo configuration sampled every copy")
    from prism_analytic.engines.result import _order_statistic_ci

    plain = _order_statistic_ci(r.distribution.samples, 0.5, 0.95)
    low, high = r.quantile_bracket(0.5)
    assert low <= plain[0] and plain[1] <= high and (high - low) > (plain[1] - plain[0])
    assert r.interval_confidence() < 0.95


def test_predict_decides_the_grid_policy_itself():
    body = pipeline_step_graph(4, 64, lat, compact=True)
    g = pa.StepGraph()
    g.add_replica_group("dp", body, 1024, speed=pa.lognormal(1.0, 0.3))
    pol = resolve_policy(g)
    assert pol.rel_width > pa.DEFAULT_POLICY.rel_width  # this graph needs a coarser grid
    r1, r2 = pa.predict(g), pa.predict(g, policy=pol)
    assert r1.diagnostics["policy"] == pol.to_dict() == r2.diagnostics["policy"]
    assert float(r1.quantile(0.99)) == float(r2.quantile(0.99))


def test_cli_cross_checks_by_default_and_skips_with_no_verify(capsys):
    from prism_analytic import cli

    argv = ["predict", "--preset", "llama3-70b", "--gpus", "8192", "--json"]
    assert cli.main(argv) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["exact"] is False and d["cross_check"]["needed"] is True
    assert d["cross_check"]["cores"] and d["cross_check"]["step_band"]
    assert cli.main([*argv, "--no-verify"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert "cross_check" not in d and d["exact"] is False


def test_bounds_mean_interval_says_what_it_guarantees():
    """The mean interval of a bounds result contains the exact mean and names its tail atoms."""
    g = pa.StepGraph()
    g.add_op("a", pa.gamma(4.0, 0.25))
    g.add_op("b", pa.gamma(9.0, 1 / 9), ["a"])
    g.add_op("c", pa.normal(1.0, 0.1), [])
    g.add_op("d", pa.normal(0.5, 0.05), ["b", "c"])
    r = pa.predict(g, "bounds")
    mc = pa.predict(g, "montecarlo", samples=200_000, seed=4)
    low, high = r.to_dict()["mean_bounds_s"]
    half = 4 * mc.std() / np.sqrt(200_000)
    assert low <= mc.mean() + half and mc.mean() - half <= high
    note = r.to_dict()["mean_bounds_note"]
    below, above = float(r.lower.below), float(r.upper.above)
    assert ("guaranteed" == note) == (below == 0 and above == 0), note
    assert note.split(" (")[0] in r.summary()
