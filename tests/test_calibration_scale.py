"""variability.scale: mechanisms whose effect grows with the job's size (issue #10 item 3)."""

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
    apply_scale_variability,
    nodes_spanned,
    scale_factors,
)
from prism_analytic.workload.step_estimate import step_time


def _job(gpus: int, **scale):
    return merge_config(preset_job("llama3-405b", gpus), {"variability": {"scale": scale}})


def test_off_by_default_and_idempotent():
    job = preset_job("llama3-405b", 16384)
    assert apply_scale_variability(job) is job
    on = apply_scale_variability(_job(65536, population_cv=0.03, fail_slow_prob=1e-6))
    assert apply_scale_variability(on) is on and not on.variability.scale.active


def test_fleet_heterogeneity_adds_the_spread_of_m_populations():
    small, big = _job(16384, population_cv=0.04), _job(65536, population_cv=0.04)
    cv0 = small.variability.spatial.cv
    assert apply_scale_variability(small).variability.spatial.cv == pytest.approx(cv0)  # m = 1
    want = math.sqrt(cv0**2 + 0.75 * 0.04**2)  # m = 4
    assert apply_scale_variability(big).variability.spatial.cv == pytest.approx(want)
    # the expected variance of m population means about their own average, by sampling
    rng = np.random.default_rng(0)
    draws = rng.normal(0, 0.04, size=(200_000, 4))
    assert draws.var(axis=1).mean() == pytest.approx(0.75 * 0.04**2, rel=0.01)


def test_collective_tail_follows_the_slowest_of_n_nodes():
    job = _job(65536, node_tail_prob=1e-4)
    n = nodes_spanned(job)
    assert n == 512  # dp 512 ranks of tp 8: one per 8-GPU node
    base = preset_job("llama3-405b", 65536).variability.network.inter_node.tail_prob
    got = apply_scale_variability(job).variability.network.inter_node.tail_prob
    assert got == pytest.approx(1 - (1 - base) * (1 - 1e-4) ** n)


def test_stall_mechanisms_keep_the_mean_delay():
    job = _job(65536, rack_throttle_prob=1e-4, fail_slow_prob=1e-6)
    f = scale_factors(job)
    hic0 = job.variability.hiccups
    det = step_time(job).step_s
    mean_delay = (
        hic0.probability * hic0.size_s
        + f["rack_hit_prob"] * 0.1 * det
        + f["fail_slow_hit_prob"] * 0.5 * det
    )
    hic = apply_scale_variability(job).variability.hiccups
    assert hic.probability * hic.size_s == pytest.approx(mean_delay)
    assert f["racks"] == math.ceil(65536 / 72)
    assert f["fail_slow_hit_prob"] == pytest.approx(1 - (1 - 1e-6) ** 65536)


def test_builder_sees_the_mechanisms_and_toml_is_checked():
    base = preset_job("llama3-8b", 1024)
    # a fail-slow delay (factor - 1) x step longer than the default 1.2 s hiccup: the merge
    # into one hiccup narrows two sizes, so a shorter one would lower the variance
    scale = {"fail_slow_prob": 1e-5, "fail_slow_factor": 3.0}
    on_job = merge_config(base, {"variability": {"scale": scale}})
    off = pa.predict(build_step_graph(base), "analytic")
    on = pa.predict(build_step_graph(on_job), "analytic")

    # the folded-in stall is an additive, independent step-level delay: variances add
    def var(h):
        return h.probability * h.size_s**2 - (h.probability * h.size_s) ** 2

    h_on = apply_scale_variability(on_job).variability.hiccups
    added = var(h_on) - var(base.variability.hiccups)
    assert added > 0
    assert on.std() ** 2 - off.std() ** 2 == pytest.approx(added, rel=0.05)
    with pytest.raises(ConfigError, match="variability.scale"):
        _job(16384, population_cvv=0.1)
