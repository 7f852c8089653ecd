"""variability.scale: mechanisms whose effect grows with the job's size."""

from __future__ import annotations

import math

import numpy as np
import pytest

import prism_analytic as pa
from prism_analytic.workload.builder import build_step_graph
from prism_analytic.workload.config import ConfigError
from prism_analytic.workload.jobs import merge_config
from prism_analytic.workload.presets import preset_job
from prism_analytic.workload.scale_variability import (
    ScaleEvents,
    apply_scale_variability,
    nodes_spanned,
    scale_events,
    scale_factors,
)
from prism_analytic.workload.step_estimate import step_time


def _job(gpus: int, **scale):
    return merge_config(preset_job("llama3-405b", gpus), {"variability": {"scale": scale}})


def test_off_by_default_and_idempotent():
    job = preset_job("llama3-405b", 16384)
    assert apply_scale_variability(job) is job
    assert scale_events(job) == ScaleEvents()
    on = apply_scale_variability(_job(65536, population_cv=0.03, fail_slow_prob=1e-6))
    # the fleet spread is folded once; the event mechanisms stay for the builder
    assert apply_scale_variability(on) is on and on.variability.scale.population_cv == 0
    assert [d[0] for d in scale_events(on).step_delays] == ["fail_slow"]


def test_fleet_heterogeneity_adds_the_spread_of_m_populations():
    small, big = _job(16384, population_cv=0.04), _job(65536, population_cv=0.04)
    cv0 = small.variability.spatial.cv
    assert apply_scale_variability(small).variability.spatial.cv == cv0  # m = 1
    want = math.sqrt(cv0**2 + 0.75 * 0.04**2)  # m = 4
    assert apply_scale_variability(big).variability.spatial.cv == pytest.approx(want)
    # the expected variance of m population means about their own average, by sampling
    rng = np.random.default_rng(0)
    draws = rng.normal(0, 0.04, size=(200_000, 4))
    assert draws.var(axis=1).mean() == pytest.approx(0.75 * 0.04**2, rel=0.01)


def test_collective_tail_is_its_own_event_of_the_slowest_of_n_nodes():
    job = _job(65536, node_tail_prob=1e-4)
    n = nodes_spanned(job)
    assert n == 512  # dp 512 ranks of tp 8: one per 8-GPU node
    inter = job.variability.network.inter_node
    # the tier's own tail is left alone; the per-node event is a second, independent one
    assert apply_scale_variability(job).variability.network.inter_node == inter
    ev = scale_events(job)
    assert ev.collective_events == (
        (pytest.approx(1 - (1 - 1e-4) ** n), pytest.approx(inter.tail_factor)),
    )
    assert ev.tier_events("inter_node") == ev.collective_events
    assert ev.tier_events("intra_node") == ev.tier_events(None) == ()


def test_stall_mechanisms_are_independent_ops():
    job = _job(65536, rack_throttle_prob=1e-4, fail_slow_prob=1e-6)
    f = scale_factors(job)
    det = step_time(job).step_s
    got = {name: (p, s) for name, p, s in scale_events(job).step_delays}
    assert got["rack_throttle"] == pytest.approx((f["rack_hit_prob"], 0.1 * det))
    assert got["fail_slow"] == pytest.approx((f["fail_slow_hit_prob"], 0.5 * det))
    assert f["racks"] == math.ceil(65536 / 72)
    assert f["fail_slow_hit_prob"] == pytest.approx(1 - (1 - 1e-6) ** 65536)
    g = build_step_graph(job)
    assert list(g.nodes)[-3:] == ["hiccup", "rack_throttle", "fail_slow"]
    # the configured hiccup is untouched
    assert apply_scale_variability(job).variability.hiccups == job.variability.hiccups


def test_fail_slow_shorter_than_the_hiccup_raises_the_variance():
    """A fail-slow delay shorter than the default 1.2 s hiccup (0.5 x a 0.73 s step).

    The earlier merge into one hiccup narrowed 0.36 s and 1.2 s into one size and lowered
    the variance (std 0.0708 s against 0.0753 s off); independent ops add it exactly.
    """
    base = preset_job("llama3-8b", 1024)
    on_job = merge_config(base, {"variability": {"scale": {"fail_slow_prob": 1e-5}}})
    (name, p, s), *_ = scale_events(on_job).step_delays
    assert name == "fail_slow" and s < base.variability.hiccups.size_s
    off = pa.predict(build_step_graph(base), "analytic")
    on = pa.predict(build_step_graph(on_job), "analytic")
    added = p * (1 - p) * s * s  # an independent Bernoulli delay: variances add
    assert on.std() > off.std()
    assert on.std() ** 2 - off.std() ** 2 == pytest.approx(added, rel=0.02)
    assert on.mean() - off.mean() == pytest.approx(p * s, rel=0.02)
    with pytest.raises(ConfigError, match="variability.scale"):
        _job(16384, population_cvv=0.1)
