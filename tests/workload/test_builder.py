"""The job -> step-DAG builder and the ``prism presets`` / ``prism predict`` commands."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import prism_analytic as pa
from prism_analytic import cli
from prism_analytic.cli.predict import build_job
from prism_analytic.policy import DEFAULT_POLICY
from prism_analytic.workload import builder as pa_builder
from prism_analytic.workload.builder import (
    MAX_REL_WIDTH,
    ExposedComm,
    build_step_graph,
    grid_policy,
    slow_replica_probability,
)
from prism_analytic.workload.config import (
    ConfigError,
    HiccupConfig,
    NetworkVariability,
    RegimeConfig,
    SpatialVariability,
    TemporalVariability,
    TierNoise,
    VariabilityConfig,
)
from prism_analytic.workload.presets import MODELS, preset_job
from prism_analytic.workload.step_estimate import step_time

_QUIET = TierNoise(sigma=0.0, tail_prob=0.0, tail_factor=1.0)
NO_NOISE = VariabilityConfig(
    spatial=SpatialVariability(cv=0.0, slow_fraction=0.0, slow_factor=1.0),
    temporal=TemporalVariability(kernel_cv=0.0, step_jitter_rel=0.0),
    network=NetworkVariability(intra_node=_QUIET, inter_node=_QUIET, cross_dc=_QUIET),
    hiccups=HiccupConfig(probability=0.0, size_s=0.0),
)


def _nodes(g: pa.StepGraph) -> int:
    return len(g) + len(g.node("replicas")["body"])


def _with_microbatches(job, mb: int):
    return job.replace(parallelism=dataclasses.replace(job.parallelism, microbatches=mb))


# ----- the builder ------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(MODELS))
def test_graph_size_does_not_grow_with_gpus(name):
    big = preset_job(name, 65536)
    # the preset's fixed token batch gives fewer microbatches per replica at 64x the GPUs;
    # with the per-replica work held equal the graph is identical in size
    small = _with_microbatches(preset_job(name, 1024), big.parallelism.microbatches)
    g_small, g_big = build_step_graph(small), build_step_graph(big)
    assert _nodes(g_small) == _nodes(g_big)
    assert g_big.node("replicas")["n"] == big.parallelism.dp
    assert g_big.total_ops() > g_small.total_ops()
    # at the preset's own layouts the graph only shrinks with scale
    assert _nodes(g_big) <= _nodes(build_step_graph(preset_job(name, 1024)))
    g_big.validate()


def test_graph_structure_llama3_405b():
    job = preset_job("llama3-405b", 16384)
    # slow GPUs on (the default has none: validation/fit_variability.py), to see the mixture
    spatial = dataclasses.replace(job.variability.spatial, slow_fraction=0.01)
    job = job.replace(variability=dataclasses.replace(job.variability, spatial=spatial))
    g = build_step_graph(job)
    p = job.parallelism
    body = g.node("replicas")["body"]
    spec = body.node("pipeline")["spec"]  # one compact node for the whole schedule
    assert len(body) == 1 and spec.n_ops == 2 * p.pp * p.microbatches * p.vpp
    assert g.nodes[:2] == ["replicas", "pp_fill_drain"]
    assert "optimizer" in g.nodes
    # degraded GPUs: each replica slow with probability q (a speed mixture), not a fixed count
    assert g.node("replicas")["slow"] is None
    assert g.node("replicas")["speed"].weights[1] == pytest.approx(slow_replica_probability(job))
    # the first chunk of the first stage trades a layer for the embedding
    first, mid = spec.law("F", 0, 0), spec.law("F", 1, 0)
    assert first.mean() < mid.mean()


@pytest.mark.parametrize(
    "name,gpus", [("llama3-8b", 1024), ("llama3-70b", 65536), ("mixtral-8x22b", 65536)]
)
def test_noise_free_graph_matches_mean_model(name, gpus):
    job = preset_job(name, gpus).replace(variability=NO_NOISE)
    r = pa.predict(build_step_graph(job), "analytic")
    assert r.mean() == pytest.approx(step_time(job).step_s, rel=0.03)
    assert r.std() < 1e-3 * r.mean()


def test_noise_only_slows_the_step():
    job = preset_job("llama3-8b", 1024)
    r = pa.predict(build_step_graph(job), "analytic")
    det = step_time(job).step_s
    assert det < r.quantile(0.5) < 1.3 * det
    assert r.quantile(0.5) < r.quantile(0.99) < r.quantile(0.999)


def test_analytic_matches_montecarlo_llama3_8b():
    g = build_step_graph(preset_job("llama3-8b", 1024))
    a = pa.predict(g, "analytic")
    m = pa.predict(g, "montecarlo", samples=20_000, seed=7)
    x = np.sort(m.distribution.samples)
    n = x.size
    cdf = np.asarray(a.cdf(x))
    ks = max(np.max(np.arange(1, n + 1) / n - cdf), np.max(cdf - np.arange(n) / n))
    assert ks < 0.05


def test_regime_spatial_options_and_errors():
    job = preset_job("llama3-70b", 1024)
    var = dataclasses.replace(
        job.variability, regimes=RegimeConfig(probabilities=(0.9, 0.1), slowdowns=(1.0, 2.0))
    )
    g = build_step_graph(job.replace(variability=var))
    assert [r.name for r in g.regimes] == ["network"]
    assert g.regimes[0].applies_to == "comm"
    assert not build_step_graph(job).regimes
    slowest = build_step_graph(job).node("replicas")["speed"]
    per_copy = build_step_graph(job, spatial="per-copy").node("replicas")["speed"]
    assert slowest.mean() > per_copy.mean()
    with pytest.raises(ValueError, match="spatial"):
        build_step_graph(job, spatial="fastest")
    with pytest.raises(TypeError, match="JobConfig"):
        build_step_graph("llama3-8b")


def test_exposed_comm_matches_sampling():
    tier = TierNoise(sigma=0.3, tail_prob=0.01, tail_factor=10.0)
    rng = np.random.default_rng(3)
    for hidden in (0.0, 0.15):
        d = ExposedComm(0.2, tier, hidden)
        x = d.sample(400_000, rng)
        assert d.mean() == pytest.approx(x.mean(), rel=0.01)
        assert d.std() == pytest.approx(x.std(), rel=0.02)
        grid = np.array([0.0, 0.05, 0.2, 1.0, 3.0])
        assert np.allclose(d.cdf(grid), (x[:, None] <= grid).mean(axis=0), atol=3e-3)
        q = np.array([0.5, 0.9, 0.999])
        assert np.allclose(d.cdf(d.quantile(q)), q, atol=1e-9)
        assert np.allclose(d.sf(d.isf(np.array([1e-3, 1e-9]))), [1e-3, 1e-9], rtol=1e-6)
    # the clipped mass at 0 is kept on the analytic grid (mean not biased)
    g = pa.StepGraph("one")
    g.add_op("c", ExposedComm(0.2, tier, 0.15), kind="comm")
    assert pa.predict(g, "analytic").mean() == pytest.approx(d.mean(), rel=1e-3)
    with pytest.raises(ValueError):
        ExposedComm(0.0, tier)


def test_grid_policy_coarsens_only_deep_bodies():
    assert grid_policy(build_step_graph(preset_job("llama3-8b", 1024))) == DEFAULT_POLICY
    g = pa.StepGraph("deep")
    body = pa.StepGraph("chain")
    prev: list[str] = []
    for i in range(5000):
        prev = [body.add_op(f"op{i}", pa.lognormal(0.01, 0.0005), prev)]
    g.add_replica_group("replicas", body, 1024, speed=pa.iid_max(pa.lognormal(1, 0.017), 128))
    pol = grid_policy(g)
    assert DEFAULT_POLICY.rel_width < pol.rel_width <= MAX_REL_WIDTH
    assert pol.max_cells == DEFAULT_POLICY.max_cells


# ----- the command line -------------------------------------------------------------------
@pytest.fixture
def prism(monkeypatch, capsys):
    """Run ``prism``; returns (rc, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        try:
            rc = cli.main(list(argv))
        except SystemExit as exc:  # argparse usage errors
            rc = exc.code
        out = capsys.readouterr()
        return rc, out.out, out.err

    return run


def test_cli_predict_json_keys(prism):
    rc, out, _ = prism("predict", "--preset", "llama3-8b", "--gpus", "1024", "--json")
    assert rc == 0
    d = json.loads(out)
    for key in (
        "preset",
        "gpus",
        "layout",
        "method",
        "mean_s",
        "std_s",
        "p50_s",
        "p95_s",
        "p99_s",
        "p999_s",
        "bracket",
        "compute_time_s",
        "graph_nodes",
    ):
        assert key in d, key
    assert d["preset"] == "llama3-8b" and d["gpus"] == 1024
    assert d["layout"]["dp"] == 1024 and d["method"] == "analytic"
    assert d["p50_s"] <= d["p99_s"]


def test_cli_predict_montecarlo_text_and_plot(prism, tmp_path):
    plot = tmp_path / "cdf.png"
    rc, out, _ = prism(
        "predict",
        "--preset",
        "llama3-8b",
        "--gpus",
        "64",
        "--method",
        "montecarlo",
        "--samples",
        "2000",
        "--plot",
        str(plot),
    )
    assert rc == 0
    assert "montecarlo" in out and "p99" in out
    assert plot.stat().st_size > 0


def test_cli_presets(prism):
    rc, out, _ = prism("presets", "--json")
    assert rc == 0
    d = json.loads(out)
    assert set(d["models"]) == set(MODELS)
    assert d["models"]["llama3-405b"]["gpu_multiple"] == 128
    rc, out, _ = prism("presets")
    assert rc == 0 and "llama3-405b" in out and "h100-sxm-80gb" in out


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--preset", "gpt5", "--gpus", "1024"], "unknown model preset 'gpt5'; available:"),
        (["--preset", "h100-sxm-80gb", "--gpus", "1024"], "unknown model preset"),
        (["--preset", "llama3-405b", "--gpus", "1000"], "multiple of 128 GPUs"),
        (["--preset", "llama3-405b"], "--gpus: required"),
        ([], "give --preset NAME --gpus N"),
        (
            ["--preset", "llama3-8b", "--gpus", "64", "--config", "/no/such.toml"],
            "no such config file",
        ),
    ],
)
def test_cli_bad_input_exits_2(prism, argv, message):
    rc, out, err = prism("predict", *argv)
    assert rc == 2
    assert message in err
    assert out == ""


def test_cli_bad_config_names_the_key(prism, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[parallelism]\ntpp = 2\n")
    rc, _, err = prism("predict", "--preset", "llama3-8b", "--gpus", "64", "--config", str(bad))
    assert rc == 2 and "parallelism.tpp" in err
    bad.write_text("[parallelism\n")
    rc, _, err = prism("predict", "--preset", "llama3-8b", "--gpus", "64", "--config", str(bad))
    assert rc == 2 and "not valid TOML" in err
    rc, _, err = prism("predict", "--preset", "llama3-8b", "--gpus", "0")
    assert rc == 2 and "positive integer" in err


def test_build_job_config_overrides_and_whole_file(tmp_path):
    over = tmp_path / "over.toml"
    over.write_text("[variability.spatial]\ncv = 0.05\n")
    job = build_job("llama3-70b", 1024, over)
    assert job.variability.spatial.cv == 0.05 and job.gpus == 1024
    whole = tmp_path / "job.toml"
    whole.write_text('[job]\npreset = "llama3-8b"\ngpus = 64\n')
    assert build_job(None, None, whole).gpus == 64
    assert build_job(None, 128, whole).gpus == 128
    with pytest.raises(ConfigError):
        build_job(None, None, None)


def test_step_model_names_its_parts():
    job = build_job("llama3-8b", 1024)
    model = pa_builder.build_step_model(job)
    assert model.graph.node(model.replicas)["body"] is model.body
    assert model.tail and "optimizer" in model.tail and model.replicas not in model.tail
    assert model.layout.dp == job.parallelism.dp and model.layout.gpus == 1024
    assert model.graph_nodes == len(model.graph) + len(model.body)
