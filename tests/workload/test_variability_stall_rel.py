"""``variability.hiccups.size_rel``: a stall sized as a fraction of the deterministic step."""

from __future__ import annotations

import pytest

import prism_analytic as pa
from prism_analytic.workload.builder import build_step_graph
from prism_analytic.workload.config import ConfigError
from prism_analytic.workload.jobs import merge_config
from prism_analytic.workload.presets import preset_job
from prism_analytic.workload.scale_variability import apply_scale_variability
from prism_analytic.workload.step_estimate import step_time


def _stall(job, **hiccups):
    return merge_config(job, {"variability": {"hiccups": {"probability": 0.05, **hiccups}}})


@pytest.mark.parametrize("gpus", [8, 64])
def test_relative_stall_is_that_fraction_of_each_jobs_step(gpus):
    job = preset_job("llama3-8b", gpus)
    core = step_time(job).step_s
    rel = pa.predict(build_step_graph(_stall(job, size_s=0.0, size_rel=0.3)))
    sec = pa.predict(build_step_graph(_stall(job, size_s=0.3 * core)))
    for q in (0.5, 0.97, 0.99):
        assert rel.quantile(q) == sec.quantile(q)
    assert rel.mean() == pytest.approx(sec.mean(), rel=1e-12)


def test_folded_once_and_refused_beside_seconds():
    job = _stall(preset_job("llama3-8b", 8), size_s=0.0, size_rel=0.2)
    once = apply_scale_variability(job)
    assert once.variability.hiccups.size_rel == 0.0
    assert once.variability.hiccups.size_s == pytest.approx(0.2 * step_time(job).step_s)
    assert apply_scale_variability(once) == once
    # the default size_s (1.2 s) would silently win: refused, with the way out named
    with pytest.raises(ConfigError, match="size_s = 0"):
        _stall(preset_job("llama3-8b", 8), size_rel=0.2)
