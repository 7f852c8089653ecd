"""The power reference (max over i.i.d. copies) against closed forms and explicit-replica MC."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, optimize, stats

import prism_analytic as pa
from prism_analytic.engines.montecarlo import MonteCarloSettings, sample_step
from prism_analytic.graph import StepGraph
from prism_analytic.validation.power_reference import (
    NotIidError,
    iid_terms,
    power_reference,
    reference_metrics,
)
from prism_analytic.validation.scenarios import pipeline

SD = float(np.hypot(0.1, 0.2))  # the chain's normal sum: N(3, SD)


def _body() -> StepGraph:
    body = StepGraph("body")
    body.add_op("a", pa.normal(1.0, 0.1))
    body.add_op("c", pa.normal(2.0, 0.2), after=["a"], kind="comm")
    return body


def _group(n: int, **kw) -> StepGraph:
    g = StepGraph("step")
    g.add_replica_group("r", _body(), n, **kw)
    return g


def _covers(ref, exact) -> bool:
    f = exact(ref.grid)
    return bool(np.all(ref.lower <= f + 1e-12) and np.all(f <= ref.upper + 1e-12))


def _true_ks(f, g) -> float:
    x = np.linspace(2.0, 6.0, 400_001)
    return float(np.max(np.abs(f(x) - g(x))))


def _exact_quantile(f, q: float) -> float:
    return optimize.brentq(lambda x: f(x) - q, 0.0, 10.0, xtol=1e-12)


def test_regime_on_part_of_the_copy_matches_closed_form():
    """comm x1.3 with p 0.2: two copy samples; the band contains the exact mixture of powers."""
    g = _group(64)
    g.add_regime("net", {"calm": 0.8, "hot": 0.2}, {"calm": 1.0, "hot": 1.3}, applies_to="comm")
    copies, states, n = iid_terms(g)
    assert len(copies) == 2 and n == 64

    def exact(x):
        hot = np.hypot(0.1, 0.26)
        return 0.8 * stats.norm.cdf(x, 3.0, SD) ** 64 + 0.2 * stats.norm.cdf(x, 3.6, hot) ** 64

    ref = power_reference(g, 200_000, seed=3)
    assert _covers(ref, exact)
    assert ref.grid[-1] > _exact_quantile(exact, 1 - 1e-6)  # the grid reaches past the pilot
    est, lo, hi = ref.ks(exact)
    assert lo == 0.0 and est <= hi
    shifted = lambda x: exact(x - 0.01)  # noqa: E731
    true = _true_ks(shifted, exact)
    est, lo, hi = ref.ks(shifted)
    assert lo <= true <= hi
    assert lo > 0  # the band is narrow enough to see a 0.01 s shift (KS 0.034)
    for q in (0.5, 0.9, 0.99, 0.999):
        a, b = ref.quantile_interval(q)
        assert a <= _exact_quantile(exact, q) <= b
        # finite where the sample can certify it: at p99.9 even zero copies above the last
        # point leave the power's lower end below 0.999 with 2e5 copies of 64 (1 - 5.5e-5)^64
        assert np.isfinite(b) or q == 0.999
        assert a <= ref.quantile(q) <= b


def test_uniform_regime_reuses_the_sample_and_slow_copies():
    """A regime on every op only rescales the copy: one sample, read at x / 1.3 (exact)."""
    g = _group(128, slow=(4, 1.2))
    g.add_regime("all", {"calm": 0.9, "hot": 0.1}, {"calm": 1.0, "hot": 1.3}, applies_to="compute")
    g.add_regime("all2", {"calm": 0.9, "hot": 0.1}, {"calm": 1.0, "hot": 1.3}, applies_to="comm")
    copies, states, _ = iid_terms(g)
    assert len(copies) == 3  # (hot, hot) rescales (calm, calm); the two mixed states do not
    assert {t.scale for _, ts in states for t in ts} == {1.0, 1.2, 1.3, 1.3 * 1.2}

    def power(x, c):
        return stats.norm.cdf(x / c, 3.0, SD) ** 124 * stats.norm.cdf(x / (1.2 * c), 3.0, SD) ** 4

    def mixed(x, fa, fc):
        s = np.hypot(0.1 * fa, 0.2 * fc)
        m = 1.0 * fa + 2.0 * fc
        return stats.norm.cdf(x, m, s) ** 124 * stats.norm.cdf(x / 1.2, m, s) ** 4

    def exact(x):
        return (
            0.81 * power(x, 1.0)
            + 0.01 * power(x, 1.3)
            + 0.09 * mixed(x, 1.3, 1.0)
            + 0.09 * mixed(x, 1.0, 1.3)
        )

    ref = power_reference(g, 100_000, seed=5)
    assert _covers(ref, exact)
    assert ref.ks(exact)[1] == 0.0
    mean = integrate.quad(lambda x: 1 - exact(x), 0, 10, limit=200)[0]
    assert ref.moments()[0] == pytest.approx(mean, rel=2e-3)


def test_against_explicit_replica_monte_carlo(monkeypatch):
    """A 2x4 1F1B pipeline in 32 replicas with a compute regime: the engine's own MC agrees.

    Drawn in 7 chunks (the real runs draw millions of copies in chunks of 2^20).
    """
    from prism_analytic.validation import power_reference as module

    monkeypatch.setattr(module, "CHUNK", 16_384)
    g = StepGraph("pipes")
    g.add_replica_group("r", pipeline(2, 4), 32)
    g.add_regime("slow", {"a": 0.7, "b": 0.3}, {"a": 1.0, "b": 1.05}, applies_to="compute")
    ref = power_reference(g, 100_000, seed=1)
    mc = np.sort(sample_step(g, 40_000, settings=MonteCarloSettings(seed=9)))
    emp = np.searchsorted(mc, ref.grid, side="right") / mc.size
    dkw = np.sqrt(np.log(2 / 1e-3) / (2 * mc.size))  # 99.9% DKW band of the MC sample
    assert np.all(emp >= ref.lower - dkw) and np.all(emp <= ref.upper + dkw)
    res = pa.predict(g, "analytic")
    row = reference_metrics(ref, res, {}, pa.predict(g, "bounds"), (0.1, 0.5, 0.99))
    assert row["ks_low"] <= row["ks"] <= row["ks_high"]
    for p, (lo, est, hi) in row["reference_q"].items():
        assert lo <= est <= hi, p
        assert lo <= np.quantile(mc, float(p)) <= hi, p
    assert row["in_bounds"] is True
    assert row["mc_dkw_95"] >= row["ks_high"] - row["ks"]


def test_refusals_name_the_reason():
    g = _group(8)
    g.add_op("after", pa.normal(1.0, 0.1), after=["r"])
    with pytest.raises(NotIidError, match="exactly one replica group"):
        iid_terms(g)
    inner = StepGraph("inner")
    inner.add_replica_group("many", _body(), 5000)
    outer = StepGraph("outer")
    outer.add_replica_group("r", inner, 4)
    with pytest.raises(NotIidError, match="explicit limit"):
        iid_terms(outer)
    with pytest.raises(ValueError, match="bodies"):
        power_reference(_group(8), 10)
    with pytest.raises(ValueError, match="confidence"):
        power_reference(_group(8), 1000, confidence=1.5)
    with pytest.raises(ValueError, match="grid"):
        power_reference(_group(8), 1000, grid=[1.0])


def test_confirmation_uses_the_reference_where_the_guard_caps(monkeypatch):
    """Rule 5: a guard-capped, noise-decided row is judged by the power reference."""
    from functools import partial

    from prism_analytic.validation import agreement, report
    from prism_analytic.validation.scenarios import Scenario

    def build() -> StepGraph:
        g = StepGraph("tiny_x64")
        g.add_replica_group("r", pipeline(2, 4), 64)
        return g

    monkeypatch.setitem(agreement.SCENARIOS, "tiny_x64", Scenario("tiny_x64", build, "test"))
    monkeypatch.setattr(agreement, "power_reference", partial(power_reference, bodies=50_000))
    first = agreement.evaluate("tiny_x64", 3000, 1, bounds=False)
    # as if the guard allowed no more than the first run's samples
    monkeypatch.setattr(agreement, "affordable_samples", lambda graph, n: min(n, 3000))
    first = {**first, "noise_decided": ["ks"]}
    answers = agreement._Answers(analytic=pa.predict(build(), "analytic"))
    row = agreement._confirm(first, build(), answers, None, None)
    conf = row["confirmation"]
    assert conf["method"] == "power reference" and conf["samples"] == 50_000
    assert conf["seed"] == 2 and row["first"] is first
    assert row["ks_low"] <= row["ks"] <= row["ks_high"]
    assert row["verdict"] == ("PASS" if not row["misses"] else "MISS")
    assert "50,000 copies / 2" in report.format_confirmations([row])
