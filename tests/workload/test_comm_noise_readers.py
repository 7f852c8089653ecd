"""Readers of communication noise honour ``variability.scale`` as the step builder does.

``analyses.perturb``, ``figures.collectives`` and ``validation/workload_agreement.py`` used to
read the network tier alone, so with ``variability.scale``'s per-node collective event on they
showed a different law from the one ``prism predict`` evaluates. References here are the
builder's own graph (an identity perturbation must give it back) and numpy draws of the
unmerged mechanisms at the level of their units (a collective over n nodes, each hit with its
own probability), independent of the package's laws.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from prism_analytic.analyses.perturb import class_moments_per_rank, perturbed_graph
from prism_analytic.workload.builder import build_step_graph
from prism_analytic.workload.comm_noise import CommNoise, collective_multiplier
from prism_analytic.workload.config import VariabilityConfig
from prism_analytic.workload.jobs import build_job, merge_config
from prism_analytic.workload.mean_model import op_means
from prism_analytic.workload.scale_variability import nodes_spanned, scale_factors

ROOT = Path(__file__).resolve().parents[2]
SCALE = {"node_tail_prob": 1e-3, "node_tail_factor": 10.0}
N = 400_000


def _fsdp_jobs():
    """llama3-8b (FSDP) on 64 GPUs: hidden inter-node gathers; without and with the event.

    The data-parallel overlap is set to 1 (the gathers fully overlappable): the default
    (``parallelism.overlap.dp``, fitted on MLPerf logs) leaves them partly exposed.
    """
    job = merge_config(build_job("llama3-8b", 64), {"parallelism": {"overlap": {"dp": 1.0}}})
    return job, merge_config(job, {"variability": {"scale": SCALE}})


def _draw(rng, a, hidden, tier, nodes, p_node, factor, size=N):
    """max(0, a B T - hidden): B the tier body, T = 1 + tier tail + per-node event (unmerged)."""
    s = tier.sigma
    body = np.exp(-0.5 * s * s + s * rng.standard_normal(size))
    tail = (rng.random(size) < tier.tail_prob) * (tier.tail_factor - 1)
    node = (rng.binomial(nodes, p_node, size) > 0) * (factor - 1)  # any of n nodes hit
    return np.maximum(a * body * (1 + tail + node) - hidden, 0.0)


def test_instance_law_is_the_unit_level_draw():
    _, job = _fsdp_jobs()
    o = op_means(job).dp_microbatch[0]
    assert o.tier == "inter_node" and o.hidden_s > o.seconds  # hidden on average
    law = CommNoise.of(job).instance(o)
    x = _draw(
        np.random.default_rng(1),
        o.seconds,
        o.hidden_s,
        job.variability.network.inter_node,
        nodes_spanned(job),
        SCALE["node_tail_prob"],
        SCALE["node_tail_factor"],
    )
    assert abs(law.mean() - x.mean()) < 5 * x.std() / np.sqrt(N)
    assert law.var() == pytest.approx(x.var(), rel=0.05)
    assert law.mean() > 0.003  # a slow hidden gather delays the step


def test_identity_perturbation_gives_the_builder_graph_with_scale_on():
    base, job = _fsdp_jobs()
    om = op_means(job)

    def body_moments(g):
        return g.node("replicas")["body"].node("pipeline")["spec"].moments

    for cls in ("allgather", "reduce_scatter"):
        want = body_moments(build_step_graph(job, means=om))
        got = body_moments(perturbed_graph(job, om, cls, "variability", 1.0))
        for k, (m, s) in want.items():
            assert got[k][0] == pytest.approx(m, rel=1e-9) and got[k][1] == pytest.approx(s, 1e-9)
    # the event matters here (else the check above could not fail)
    quiet = body_moments(build_step_graph(base, means=om))
    assert want["B s0 c0"][1] > 10 * quiet["B s0 c0"][1]


def test_class_moments_include_the_event():
    # mixtral's expert dispatch/combine: exposed inter-node all-to-all inside every layer
    base = build_job("mixtral-8x22b", 1024)
    job = merge_config(base, {"variability": {"scale": SCALE}})
    om = op_means(job)
    layers = om.layers_per_chunk * om.chunks_per_stage
    rng = np.random.default_rng(2)
    tier = job.variability.network.inter_node
    mean = var = 0.0
    for o in (*om.layer_fwd, *om.layer_bwd):
        if o.op_class != "alltoall":
            continue
        assert o.tier == "inter_node" and o.exposed_s > 0
        x = _draw(rng, o.exposed_s, 0.0, tier, nodes_spanned(job), *SCALE.values())
        times = layers * om.microbatches * o.count
        mean += times * x.mean()
        var += times * x.var()
    mu, sd = class_moments_per_rank(job, om)["alltoall"]
    assert mu == pytest.approx(mean, rel=0.01) and sd == pytest.approx(np.sqrt(var), rel=0.03)
    assert sd > 2 * class_moments_per_rank(base, om)["alltoall"][1]


def test_collective_multiplier_is_the_jobs_collective_law():
    _, job = _fsdp_jobs()
    n = nodes_spanned(job)
    law = collective_multiplier(job.variability, n)
    f = scale_factors(job)
    x = _draw(np.random.default_rng(3), 1.0, 0.0, job.variability.network.inter_node, n, 1e-3, 10)
    assert law.mean() == pytest.approx(CommNoise.of(job).multiplier("inter_node").mean())
    assert f["collective_hit_factor"] == 10.0
    assert stats.kstest(x, law.cdf).statistic < 0.005
    # defaults: no event, the tier alone at any size
    v = VariabilityConfig()
    assert collective_multiplier(v, 2048).quantile(0.99) == collective_multiplier(v, 4).quantile(
        0.99
    )
    with pytest.raises(ValueError, match="nodes"):
        collective_multiplier(v, 0)


def test_figure_draws_the_scale_event(shared_data, tmp_path):
    from prism_analytic.figures.collectives import make

    v = VariabilityConfig()
    on = dataclasses.replace(v, scale=dataclasses.replace(v.scale, **SCALE))
    nums = make(tmp_path, shared_data, tiny=True, variability=on)["numbers"]
    for n in (4, 512, 2048):
        m = collective_multiplier(on, n)
        want = m.quantile(0.99) / m.quantile(0.5)
        assert nums[f"inter_node_model_p99_over_p50_{n}"] == pytest.approx(want)
    assert nums["inter_node_model_p99_over_p50_512"] > 5  # half the 512-node instances: 10x


def test_folding_check_draws_the_event(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "workload_agreement", ROOT / "validation" / "workload_agreement.py"
    )
    wa = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wa)
    cfg = tmp_path / "scale.toml"
    cfg.write_text("[variability.scale]\nnode_tail_prob = 0.002\nnode_tail_factor = 20.0\n")
    # mixtral's expert dispatch/combine cross nodes inside every layer
    for row in wa.folding_check("mixtral-8x22b", 1024, 4000, 1, str(cfg)):
        assert row["cv_explicit"] > 0.05  # the event is drawn
        se = row["cv_explicit"] / np.sqrt(4000)
        assert abs(row["mean_rel_err"]) < 4 * se, row
        assert abs(row["std_rel_err"]) < 0.05, row
