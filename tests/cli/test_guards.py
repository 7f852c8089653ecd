"""Resource guards and boundary validation: refused up front, with the input and limit named."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

import prism_analytic as pa
from prism_analytic.cli import main
from prism_analytic.distributions.serialize import to_spec
from prism_analytic.engines import MonteCarloSettings, sample_step
from prism_analytic.engines.montecarlo import estimated_draws
from prism_analytic.engines.predict import MAX_GRID_NODES
from prism_analytic.graph import GraphError, StepGraph
from prism_analytic.graph import step_graph as sg
from prism_analytic.workload.config import ConfigError
from prism_analytic.workload.jobs import load_config


def chain(n: int) -> StepGraph:
    g = StepGraph("chain")
    prev: list[str] = []
    for i in range(n):
        prev = [g.add_op(f"o{i}", pa.normal(1.0, 0.1), prev)]
    return g


def nested(depth: int) -> StepGraph:
    g = chain(1)
    for _ in range(depth):
        outer = StepGraph("outer")
        outer.add_replica_group("r", g, 2)
        g = outer
    return g


# ----- graphs ------------------------------------------------------------------------------------
def test_deep_nesting_is_refused_not_a_recursion_error():
    g = nested(sg.MAX_DEPTH)
    outer = StepGraph("too deep")
    with pytest.raises(GraphError, match=f"limit is {sg.MAX_DEPTH}"):
        outer.add_replica_group("r", g, 2)
    # as JSON: 3,000 levels, as in the issue (text built by hand: json.dumps would recurse)
    leaf = {"nodes": [{"id": "k", "type": "op", "latency": to_spec(pa.normal(1.0, 0.1))}]}
    head = '{"nodes": [{"id": "r", "type": "replica", "n": 2, "body": '
    text = head * 3000 + json.dumps(leaf) + "}]}" * 3000
    with pytest.raises(GraphError, match="deep"):
        StepGraph.from_json(text)
    data = leaf
    for _ in range(3000):
        data = {"nodes": [{"id": "r", "type": "replica", "n": 2, "body": data}]}
    with pytest.raises(GraphError, match="deep"):
        StepGraph.from_dict(data)


def test_node_limit(monkeypatch):
    monkeypatch.setattr(sg, "MAX_NODES", 3)
    with pytest.raises(GraphError, match="already has 3 nodes, the limit"):
        chain(4)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"tags": 5}, "tags must be a string or a list of strings, got int 5"),
        ({"tags": [1]}, "tags must contain strings only"),
        ({"after": 5}, "after must be a string or a list of strings, got int 5"),
        ({"after": {"a": 1}}, "after must be a string or a list"),
    ],
)
def test_after_and_tags_types(kwargs, match):
    g = StepGraph()
    with pytest.raises(GraphError, match=match):
        g.add_op("x", pa.normal(1.0, 0.1), **kwargs)


def test_after_none_means_no_predecessor():
    g = StepGraph()
    g.add_op("x", pa.normal(1.0, 0.1), after=None)
    assert list(g.graph.predecessors("x")) == []


@pytest.mark.parametrize(
    "data, match",
    [
        ({"nodes": 5}, "'nodes' must be a list, got int 5"),
        ({"nodes": [], "edges": 5}, "'edges' must be a list"),
        ({"nodes": [{"id": 3}]}, r"nodes\[0\] must be an object with a string 'id'"),
        ({"nodes": [], "edges": [{"source": [1], "target": "a"}]}, "must be node ids"),
        (
            {
                "nodes": [{"id": "a", "type": "op", "latency": to_spec(pa.normal(1.0, 0.1))}],
                "regimes": [{"name": "net", "factors": {"x": 1.0}}],
            },
            r"regimes\[0\] must be an object with \['name', 'probs', 'factors'\]",
        ),
        ({"nodes": [], "regimes": "x"}, "'regimes' must be a list"),
    ],
)
def test_json_graph_shapes(data, match):
    with pytest.raises(GraphError, match=match):
        StepGraph.from_dict(data)


@pytest.mark.parametrize(
    "text, match", [("{", "not valid JSON"), (b"\xff\xfe", "not UTF-8"), (5, "must be text")]
)
def test_json_text(text, match):
    with pytest.raises(GraphError, match=match):
        StepGraph.from_json(text)


def test_regime_applies_to_typo_is_caught():
    g = chain(2)
    g.add_regime("net", {"ok": 0.9, "slow": 0.1}, {"ok": 1.0, "slow": 2.0}, applies_to="comms")
    with pytest.raises(GraphError, match="applies_to 'comms' matches no op kind or tag"):
        pa.predict(g)
    h = chain(2)  # a kind with no op of that kind is fine (it just scales nothing)
    h.add_regime("net", {"ok": 0.9, "slow": 0.1}, {"ok": 1.0, "slow": 2.0}, applies_to="comm")
    h.validate()


# ----- engines ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"mc_settings": "x"}, "mc_settings must be a MonteCarloSettings"),
        ({"executor": "x"}, "executor must be a concurrent.futures.Executor"),
        ({"progress": 5}, "progress must be callable"),
    ],
)
def test_predict_montecarlo_argument_types(kwargs, match):
    with pytest.raises(TypeError, match=match):
        pa.predict(chain(2), "montecarlo", samples=100, **kwargs)


def test_grid_engines_refuse_huge_graphs_up_front():
    g = chain(MAX_GRID_NODES + 1)
    for method in ("analytic", "bounds"):
        start = time.perf_counter()
        with pytest.raises(GraphError, match=f"over its limit of {MAX_GRID_NODES:,}"):
            pa.predict(g, method)
        assert time.perf_counter() - start < 2.0
    assert pa.predict(g, "montecarlo", samples=100).mean() == pytest.approx(5001, rel=0.01)


def test_bounds_guard_counts_pipelines_as_the_engine_evaluates_them(monkeypatch):
    """A pipeline, compact or op by op, is charged what the bounds engine spends on it."""
    import importlib

    from prism_analytic.graph.pipeline import pipeline_step_graph

    predict_mod = importlib.import_module("prism_analytic.engines.predict")  # the module

    def lat(phase, stage, mb, chunk):
        return pa.normal(1.0 if phase == "F" else 2.0, 0.1)

    monkeypatch.setattr(predict_mod, "MAX_GRID_NODES", 100)
    op_by_op = pipeline_step_graph(8, 16, lat)  # 256 explicit ops
    compact = pipeline_step_graph(8, 16, lat, compact=True)
    assert op_by_op.total_ops() == compact.total_ops() == 256 > 100
    assert predict_mod.grid_nodes(op_by_op, "bounds") == predict_mod.grid_nodes(compact, "bounds")
    a, b = (pa.predict(g, "bounds") for g in (op_by_op, compact))
    assert a.quantile_bracket(0.99) == b.quantile_bracket(0.99)
    with pytest.raises(GraphError, match="over its limit of 100"):
        pa.predict(chain(101), "bounds")


def test_montecarlo_work_guard():
    g = StepGraph()
    g.add_replica_group("dp", chain(100), 1000)  # 1e5 draws a sample
    assert estimated_draws(g, 10, MonteCarloSettings()) == 10 * 100 * 1000
    settings = MonteCarloSettings(max_draws=10**6)
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"samples: .* over the limit of 1e\+06"):
        sample_step(g, 100, settings=settings)
    assert time.perf_counter() - start < 1.0
    with pytest.raises(ValueError, match="samples must be <= 1000000000"):
        sample_step(g, 10**10)


@pytest.mark.parametrize(
    "kwargs", [{"pool_size": 10**9}, {"explicit_limit": 10**8}, {"max_draws": 0}]
)
def test_montecarlo_settings_limits(kwargs):
    with pytest.raises(ValueError, match="|".join(kwargs)):
        MonteCarloSettings(**kwargs)


def test_sample_and_policy_sizes():
    with pytest.raises(ValueError, match="size"):
        pa.normal(0.0, 1.0).sample(10**11)
    with pytest.raises(ValueError, match="max_cells"):
        pa.GridPolicy(max_cells=2**40)


def test_plot_axes_type():
    with pytest.raises(TypeError, match="ax must be a matplotlib Axes"):
        pa.normal(1.0, 0.1).plot(ax="x")


# ----- config and CLI ----------------------------------------------------------------------------
BASE = '[job]\npreset = "llama3-8b"\ngpus = 8\n'


@pytest.mark.parametrize(
    "extra, key",
    [
        ("[hardware]\nhbm_bandwidth = 1e-300\n", "hardware.hbm_bandwidth"),
        ("[hardware.peak_flops]\nbf16 = 5e-324\n", "hardware.peak_flops.bf16"),
        ("[hardware]\nhbm_bandwidth = 1e300\n", "hardware.hbm_bandwidth"),
        ("[parallelism]\nmicrobatches = 16000\n", "parallelism.microbatches"),
        ("[parallelism]\nmicrobatches = 1000000\n", "parallelism.microbatches"),
    ],
)
def test_config_extremes_are_named(tmp_path, extra, key):
    path = tmp_path / "job.toml"
    path.write_text(BASE + extra)
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(path)
    assert time.perf_counter() - start < 2.0


def test_pipeline_op_limit(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text(
        '[job]\npreset = "llama3-405b"\ngpus = 128\n[parallelism]\nmicrobatches = 8192\n'
    )
    with pytest.raises(ConfigError, match="2,097,152 ops, over the limit of 1,048,576"):
        load_config(path)


def test_binary_config_file_is_named(tmp_path):
    path = tmp_path / "job.toml"
    path.write_bytes(bytes(range(256)))
    with pytest.raises(ConfigError, match="job.toml' is not UTF-8 text"):
        load_config(path)


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--preset", "llama3-8b", "--gpus", "1e30"], "--gpus: at most 1e+12 GPUs"),
        (["--preset", "llama3-8b", "--gpus", "8", "--plot", "/proc/x.png"], "--plot: cannot"),
        (["--preset", "llama3-8b", "--gpus", "8", "--plot", "x.txt"], "--plot: format '.txt'"),
        (["--config", "BINARY"], "not UTF-8 text"),
    ],
)
def test_cli_errors(tmp_path, capsys, argv, match):
    binary = tmp_path / "b.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    argv = [str(binary) if a == "BINARY" else a for a in argv]
    assert main(["predict", *argv]) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err


def test_cli_plot_to_a_folder_name_says_the_real_file(tmp_path, capsys):
    target = tmp_path / "figure"
    assert main(["predict", "--preset", "llama3-8b", "--gpus", "8", "--plot", str(target)]) == 0
    out = capsys.readouterr().out
    assert f"written to {target}.png" in out and (tmp_path / "figure.png").is_file()


def test_samples_in_scientific_notation_everywhere(capsys):
    assert main(["predict", "--preset", "llama3-8b", "--gpus", "8", "--method", "montecarlo",
                 "--samples", "1e3", "--json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["diagnostics"]["samples"] == 1000
    assert np.isfinite(1000)


def test_convolve_of_a_law_at_1e155_scale_keeps_its_bracket():
    """Squared scales overflow above ~1e154; the lattice spacing must not (was 'h ... got inf')."""
    big = pa.pareto(2.65, scale=1.8e155)
    s = pa.convolve(pa.exponential(1.0), pa.normal(0.0, 1.0), big)
    for q in (0.5, 0.99):
        exact = 1.8e155 * (1.0 - q) ** (-1 / 2.65)  # the O(1) operands move it by ~1e-155
        low, high = s.quantile_bracket(q)
        assert low <= exact <= high
        assert high - low <= 0.01 * exact


def test_convolve_whose_sum_overflows_names_the_operands():
    huge = pa.normal(1e308, 1e306)
    with pytest.raises(ValueError, match=r"overflows float64.*operand 0.*operand 1"):
        pa.convolve(huge, huge)


def test_iid_sum_whose_sum_overflows_is_refused():
    with pytest.raises(ValueError, match=r"overflows float64.*operand 0"):
        pa.iid_sum(pa.pareto(1.5, scale=1e300), 10**9)
