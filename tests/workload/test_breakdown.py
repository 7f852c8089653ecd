"""Per-rank compute / exposed-communication breakdown (``prism_analytic.workload.breakdown``)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from prism_analytic.workload.breakdown import (
    Breakdown,
    describe,
    rank_breakdown,
    rank_compute_law,
    stage_compute,
)
from prism_analytic.workload.config import (
    HiccupConfig,
    NetworkVariability,
    SpatialVariability,
    TemporalVariability,
    TierNoise,
)
from prism_analytic.workload.mean_model import op_means
from prism_analytic.workload.presets import preset_job

_QUIET = TierNoise(sigma=0.0, tail_prob=0.0, tail_factor=1.0)


def _small_pipeline(gpus: int = 4096, mb: int = 8):
    """llama3-70b (tp 8, pp 4, vpp 5) with few microbatches: a 320-op pipeline body."""
    job = preset_job("llama3-70b", gpus)
    return job.replace(parallelism=dataclasses.replace(job.parallelism, microbatches=mb))


@pytest.fixture(scope="module")
def pipe() -> Breakdown:
    return rank_breakdown(_small_pipeline(), samples=20_000, seed=3)


def test_stage_compute_matches_the_mean_model():
    job = preset_job("llama3-8b", 64)
    om = op_means(job)
    (only,) = stage_compute(job, om)
    comp = sum(o.count * o.seconds for o in om.layer_fwd + om.layer_bwd if o.kind == "compute")
    emb = sum(
        o.count * o.seconds for o in om.embedding_fwd + om.embedding_bwd + om.head_fwd + om.head_bwd
    )
    expected = job.parallelism.microbatches * (job.model.layers * comp + emb) + om.optimizer.seconds
    assert only.role == "only" and only.weight == 1.0
    assert only.mean_s == pytest.approx(expected, rel=1e-12)
    # temporal noise of a sum of independent kernels: tiny relative spread
    assert 0 < only.std_s / only.mean_s < job.variability.temporal.kernel_cv / 10


def test_stage_weights_and_roles_of_a_pipeline():
    st = stage_compute(_small_pipeline())
    assert [s.role for s in st] == ["first", "middle", "last"]
    assert sum(s.weight for s in st) == pytest.approx(1.0)
    assert st[1].weight == pytest.approx(0.5)
    assert all(s.kernels > 0 and s.mean_s > 0 for s in st)


def test_compute_law_without_noise_is_the_kernel_sum():
    job = preset_job("llama3-8b", 64)
    var = dataclasses.replace(
        job.variability,
        spatial=SpatialVariability(cv=0.0, slow_fraction=0.0, slow_factor=1.0),
        temporal=TemporalVariability(kernel_cv=0.0),
    )
    job = job.replace(variability=var)
    law = rank_compute_law(job)
    assert law.std() == 0.0
    assert law.mean() == pytest.approx(stage_compute(job)[0].mean_s)


def test_compute_law_spread_is_the_spatial_factor():
    job = preset_job("llama3-8b", 64)
    spatial = SpatialVariability(cv=0.02, slow_fraction=0.0, slow_factor=1.0)
    job = job.replace(variability=dataclasses.replace(job.variability, spatial=spatial))
    law = rank_compute_law(job)
    k = stage_compute(job)[0]
    assert law.mean() == pytest.approx(k.mean_s, rel=1e-9)
    # CV of a product of independent lognormals: sqrt((1+a^2)(1+b^2) - 1)
    cv = math.sqrt((1 + 0.02**2) * (1 + (k.std_s / k.mean_s) ** 2) - 1)
    assert law.std() / law.mean() == pytest.approx(cv, rel=1e-6)


def test_samples_are_consistent(pipe):
    assert isinstance(pipe, Breakdown)
    np.testing.assert_allclose(pipe.comm_samples, pipe.step_samples - pipe.compute_samples)
    assert (pipe.comm_samples > 0).all()  # the step contains the rank's compute
    assert pipe.compute_samples.shape == (20_000,)
    d = describe(pipe)
    assert {"compute", "comm", "step", "stages"} <= set(d)
    assert "per rank and step" in pipe.summary()


def test_compute_samples_follow_the_analytic_law(pipe):
    ks = stats.kstest(pipe.compute_samples, pipe.compute.cdf).statistic
    assert ks < 0.015
    assert pipe.stats["compute"]["std"] == pytest.approx(
        pipe.stats["compute_analytic"]["std"], rel=0.05
    )


def test_joint_step_marginal_matches_the_step_law(pipe):
    # the joint (rank, step) construction must not change the step time's law
    ks = stats.kstest(pipe.step_samples, pipe.step.cdf).statistic
    assert ks < 0.02
    assert pipe.stats["step"]["mean"] == pytest.approx(
        pipe.stats["step_analytic"]["mean"], rel=2e-3
    )


def test_independence_shortcut_is_close_at_many_replicas(pipe):
    assert pipe.dp == 128
    assert abs(pipe.stats["corr_compute_step"]) < 0.1
    assert pipe.stats["comm"]["std"] == pytest.approx(pipe.stats["comm_std_independent"], rel=0.1)


def test_one_replica_couples_compute_and_step():
    # dp = 1: the rank's own speed sets its replica's pace, so compute and step correlate
    job = _small_pipeline(gpus=32)
    quiet = dataclasses.replace(
        job.variability,
        network=NetworkVariability(intra_node=_QUIET, inter_node=_QUIET, cross_dc=_QUIET),
        hiccups=HiccupConfig(probability=0.0, size_s=0.0),
        spatial=SpatialVariability(cv=0.05, slow_fraction=0.0, slow_factor=1.0),
    )
    b = rank_breakdown(job.replace(variability=quiet), samples=5000, seed=1, spatial="per-copy")
    assert b.dp == 1
    # (below 1: the stage kinds differ in compute but share the step)
    assert b.stats["corr_compute_step"] > 0.8


def test_bad_arguments():
    job = preset_job("llama3-8b", 64)
    with pytest.raises(ValueError, match="spatial"):
        rank_breakdown(job, spatial="nope")
    with pytest.raises(ValueError, match="samples"):
        rank_breakdown(job, samples=1)
