"""Monte Carlo: reproducible, independent of chunking and executor, exact symmetric sampling,
pools reported with their error, DKW bands.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa
from prism_analytic.engines import MonteCarloSettings, sample_step
from prism_analytic.engines.montecarlo import (
    BLOCK,
    PoolAccuracyWarning,
    pool_ks_error,
    pooled_groups,
)
from prism_analytic.graph import StepGraph


def one_op(latency=None, name="rank") -> StepGraph:
    g = StepGraph(name)
    g.add_op("k", latency if latency is not None else pa.normal(1.0, 0.05))
    return g


def two_op_body() -> StepGraph:
    body = StepGraph("body")
    body.add_op("f", pa.normal(1.0, 0.05))
    body.add_op("ar", pa.lognormal(0.3, 0.03), ["f"], kind="comm")
    return body


def everything() -> StepGraph:
    """Explicit, exact-symmetric, pooled and slow groups, speed factors and regimes in one step."""
    g = StepGraph("everything")
    g.add_op("load", pa.normal(0.2, 0.01))
    g.add_replica_group("dp", two_op_body(), 3000, ["load"], slow=(2, 1.3))  # pooled + explicit
    g.add_replica_group("tp", one_op(pa.gamma(0.5, 0.05)), 5000, ["load"])  # exact symmetric
    g.add_replica_group("pp", two_op_body(), 5, ["load"], speed=pa.lognormal(1.0, 0.02))
    g.add_collective("sync", pa.gamma(0.1, 0.01), ["dp", "tp", "pp"], tags=("inter-node",))
    g.add_regime("net", {"ok": 0.8, "slow": 0.2}, {"ok": 1.0, "slow": 1.5})
    g.add_regime("dc", {"ok": 0.9, "bad": 0.1}, {"ok": 1.0, "bad": 3.0}, applies_to="inter-node")
    return g


SETTINGS = MonteCarloSettings(pool_size=20_000, seed=7)
SAMPLES = 2 * BLOCK + 123  # three blocks, the last one partial


@pytest.fixture(scope="module")
def reference_draws():
    return sample_step(everything(), SAMPLES, settings=SETTINGS)


# ----- reproducibility ---------------------------------------------------------------------------
def test_same_seed_same_samples(reference_draws):
    assert reference_draws.shape == (SAMPLES,)
    assert np.all(np.isfinite(reference_draws))
    again = sample_step(everything(), SAMPLES, settings=SETTINGS)  # a freshly built graph
    np.testing.assert_array_equal(again, reference_draws)
    other = sample_step(
        everything(), SAMPLES, settings=MonteCarloSettings(pool_size=20_000, seed=8)
    )
    assert not np.array_equal(other, reference_draws)


def test_prefix_property():
    """Blocks are seeded in order, so fewer samples are a prefix of more samples."""
    g = everything()
    short = sample_step(g, BLOCK + 5, settings=SETTINGS)
    long = sample_step(g, 3 * BLOCK, settings=SETTINGS)
    np.testing.assert_array_equal(long[:BLOCK], short[:BLOCK])


@pytest.mark.parametrize("blocks_per_task", [1, 2, 100])
def test_chunking_does_not_change_samples(reference_draws, blocks_per_task):
    got = sample_step(everything(), SAMPLES, settings=SETTINGS, blocks_per_task=blocks_per_task)
    np.testing.assert_array_equal(got, reference_draws)


def test_executor_does_not_change_samples(reference_draws):
    with ThreadPoolExecutor(max_workers=2) as ex:
        got = sample_step(everything(), SAMPLES, settings=SETTINGS, executor=ex, blocks_per_task=1)
        np.testing.assert_array_equal(got, reference_draws)
        r = pa.predict(
            everything(), "montecarlo", samples=SAMPLES, mc_settings=SETTINGS, executor=ex
        )
    np.testing.assert_array_equal(r.distribution.samples, np.sort(reference_draws))


def test_predict_montecarlo_uses_seed():
    # predict's seed plumbing needs no pools (everything() at the default million-copy pool
    # costs minutes); sample_step's seeding of everything() is test_same_seed_same_samples's
    g = StepGraph("seeded")
    g.add_replica_group("dp", two_op_body(), 8, speed=pa.lognormal(1.0, 0.02))
    s = MonteCarloSettings(pool_size=20_000)
    a = pa.predict(g, "montecarlo", samples=5000, seed=1, mc_settings=None)
    b = pa.predict(g, "montecarlo", samples=5000, seed=1)
    c = pa.predict(g, "montecarlo", samples=5000, seed=2)
    np.testing.assert_array_equal(a.distribution.samples, b.distribution.samples)
    assert not np.array_equal(a.distribution.samples, c.distribution.samples)
    assert a.diagnostics["seed"] == 1 and a.diagnostics["samples"] == 5000
    d = pa.predict(g, "montecarlo", samples=5000, mc_settings=s)
    assert d.diagnostics["seed"] == s.seed


# ----- exact symmetric sampling of large groups ---------------------------------------------------
def test_explicit_and_exact_symmetric_sampling_agree_with_theory():
    n, samples = 2000, 20_000
    g = StepGraph()
    g.add_replica_group("world", one_op(), n)
    theory = pa.iid_max(pa.normal(1.0, 0.05), n)
    explicit = sample_step(g, samples, settings=MonteCarloSettings(explicit_limit=n, seed=1))
    symmetric = sample_step(g, samples, settings=MonteCarloSettings(seed=1))  # n > 1024
    assert pooled_groups(g, MonteCarloSettings()) == []  # single-op bodies are never pooled
    dkw = math.sqrt(math.log(2 / 0.01) / (2 * samples))  # 99% band
    assert stats.kstest(explicit, theory.cdf).statistic <= dkw
    assert stats.kstest(symmetric, theory.cdf).statistic <= dkw
    assert stats.ks_2samp(explicit, symmetric).pvalue > 0.001


def test_exact_symmetric_sampling_far_beyond_explicit_reach():
    """n = 1e9 ranks: F^{-1}(U^{1/n}) against the exact F^n (and its slow copies)."""
    g = StepGraph()
    g.add_replica_group("world", one_op(pa.exponential(1.0)), 10**9, slow=(10, 1.5))
    draws = sample_step(g, 20_000, settings=MonteCarloSettings(seed=3))
    rank = pa.exponential(1.0)
    theory = pa.max_independent(pa.iid_max(rank, 10**9 - 10), pa.iid_max(rank.scale(1.5), 10))
    assert stats.kstest(draws, theory.cdf).pvalue > 0.001
    assert np.median(draws) == pytest.approx(float(theory.quantile(0.5)), rel=5e-3)


def test_pooled_groups_are_reported_with_their_ks_error():
    g = everything()
    pooled = pooled_groups(g, SETTINGS)
    assert [p["group"] for p in pooled] == ["/dp"]
    (dp,) = pooled
    assert dp["n"] == 3000 and dp["pool_size"] == SETTINGS.pool_size
    assert dp["ks_error"] == pytest.approx(1.05 * math.sqrt(3000 / 20_000))
    assert dp["ks_error"] == pytest.approx(pool_ks_error(3000, 20_000))
    with pytest.warns(PoolAccuracyWarning, match="/dp"):
        r = pa.predict(g, "montecarlo", samples=1000, mc_settings=SETTINGS)
    (drawn,) = r.diagnostics["pooled_groups"]
    # n: the copies drawn from the pool (the 2 slow copies are explicit)
    assert drawn["group"] == "/dp" and drawn["n"] == 2998 and drawn["pool_size"] == 20_000
    assert drawn["random_inputs"] == 2  # one survival probability per op of the body
    # the tail pool is far sharper than a plain pool of the same size, and its error is in
    # the interval
    assert 0 < drawn["ks_error"] < dp["ks_error"] / 3
    assert r.pool_error == pytest.approx(drawn["ks_error"])
    # nested groups are found too; a big enough explicit limit pools nothing
    outer = StepGraph()
    outer.add_replica_group("dp", g.conditioned({}), 2)
    assert [p["group"] for p in pooled_groups(outer, SETTINGS)] == ["/dp/dp"]
    assert pooled_groups(g, MonteCarloSettings(explicit_limit=10**4)) == []
    # speed factors force pooling even for a single-op body
    h = StepGraph()
    h.add_replica_group("sp", one_op(), 5000, speed=pa.lognormal(1.0, 0.02))
    assert [p["group"] for p in pooled_groups(h, SETTINGS)] == ["/sp"]


def _pooled_ks(seed: int) -> tuple[float, dict, float]:
    """KS distance of pooled samples (n = 2000, pool 2e5) to the exact law of the group."""
    g = StepGraph()
    g.add_replica_group("dp", two_op_body(), 2000)
    s = MonteCarloSettings(pool_size=200_000, seed=seed)
    r = pa.predict(g, "montecarlo", samples=20_000, mc_settings=s)
    (info,) = r.diagnostics["pooled_groups"]
    exact = pa.iid_max(pa.convolve(pa.normal(1.0, 0.05), pa.lognormal(0.3, 0.03)), 2000)
    ks = stats.kstest(r.distribution.samples, exact.cdf).statistic
    # the pool is unbiased: its median is right to well within the group's spread
    assert np.median(r.distribution.samples) == pytest.approx(float(exact.quantile(0.5)), abs=4e-3)
    return float(ks), info, r.diagnostics["dkw_95"]


def test_pooled_sampling_error_has_the_reported_order_of_magnitude():
    ks, info, dkw = _pooled_ks(seed=5)
    assert info["ks_error"] < pool_ks_error(2000, 200_000) / 3
    assert ks <= 4 * info["ks_error"] + dkw


def test_reported_pool_error_is_not_exceeded_by_most_pools():
    results = [_pooled_ks(seed) for seed in range(8)]
    exceeded = [ks > info["ks_error"] + dkw for ks, info, dkw in results]
    assert sum(exceeded) <= len(results) // 2


def test_pool_ks_error_formula():
    assert pool_ks_error(10**6, 10**6) == pytest.approx(1.05)
    assert pool_ks_error(100, 10**6) == pytest.approx(0.0105)
    assert pool_ks_error(4 * 100, 10**6) == pytest.approx(2 * pool_ks_error(100, 10**6))


# ----- DKW band and argument checks ---------------------------------------------------------------
def test_dkw_epsilon_value():
    for samples in (2, 1000, 20_000):
        r = pa.predict(one_op(), "montecarlo", samples=samples)
        assert r.diagnostics["dkw_95"] == pytest.approx(math.sqrt(math.log(40) / (2 * samples)))
    emp = pa.empirical(np.arange(200.0))
    assert emp.dkw_epsilon(0.01) == pytest.approx(math.sqrt(math.log(200) / 400))
    low, high = emp.cdf_band([50.0, 500.0], alpha=0.05)
    eps = emp.dkw_epsilon(0.05)
    np.testing.assert_allclose(low, [51 / 200 - eps, 1 - eps])
    np.testing.assert_allclose(high, [51 / 200 + eps, 1.0])


def test_montecarlo_bracket_is_an_order_statistic_interval():
    r = pa.predict(one_op(), "montecarlo", samples=20_000, seed=9)
    exact = stats.norm(1.0, 0.05)
    for q in (0.5, 0.99):
        low, high = r.quantile_bracket(q)
        assert low <= r.quantile(q) <= high
        assert low <= exact.ppf(q) <= high


@pytest.mark.parametrize("samples", [1, 0, -5])
def test_predict_rejects_fewer_than_two_samples(samples):
    with pytest.raises(ValueError, match="samples must be an integer >= 2"):
        pa.predict(one_op(), "montecarlo", samples=samples)


@pytest.mark.parametrize("samples", [2.5, True, "100"])
def test_predict_rejects_non_integer_samples(samples):
    with pytest.raises(TypeError, match="samples must be an integer"):
        pa.predict(one_op(), "montecarlo", samples=samples)


@pytest.mark.parametrize(
    "kwargs",
    [{"samples": 0}, {"samples": -3}, {"samples": 1.5}, {"samples": 10, "blocks_per_task": 0}],
)
def test_sample_step_validates_its_arguments(kwargs):
    with pytest.raises((ValueError, TypeError), match="samples|blocks_per_task"):
        sample_step(one_op(), **kwargs)


@pytest.mark.parametrize(
    "kwargs", [{"pool_size": 0}, {"pool_size": -5}, {"explicit_limit": -1}, {"seed": -1}]
)
def test_montecarlo_settings_are_validated(kwargs):
    with pytest.raises((ValueError, TypeError), match="|".join(kwargs)):
        MonteCarloSettings(**kwargs)


def test_large_group_of_a_single_nested_group():
    inner = StepGraph("tp")
    inner.add_op("k", pa.normal(1.0, 0.05))
    mid = StepGraph("node")
    mid.add_replica_group("tp", inner, 8)
    g = StepGraph()
    g.add_replica_group("dp", mid, 2000)
    settings = MonteCarloSettings(pool_size=20_000)
    draws = sample_step(g, 5000, settings=settings)  # pooled: the body is a group, not an op
    theory = pa.iid_max(pa.normal(1.0, 0.05), 16_000)
    r = pa.predict(g, "montecarlo", samples=5000, mc_settings=settings)
    np.testing.assert_array_equal(np.sort(draws), r.distribution.samples)
    (pooled,) = r.diagnostics["pooled_groups"]
    assert pooled["random_inputs"] == 8  # the nested group's 8 copies are explicit
    # the sampled law must stay within the pool's reported error (+ sampling noise)
    dkw = math.sqrt(math.log(2 / 0.001) / (2 * 5000))
    assert stats.kstest(draws, theory.cdf).statistic <= pooled["ks_error"] + dkw


def test_progress_reports_every_block_and_does_not_change_the_samples():
    g = StepGraph()
    g.add_op("a", pa.normal(1.0, 0.1))
    calls = []
    with_progress = sample_step(g, 3 * BLOCK + 5, progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (3 * BLOCK + 5, 3 * BLOCK + 5)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls) and len(calls) == 4
    assert np.array_equal(with_progress, sample_step(g, 3 * BLOCK + 5))
