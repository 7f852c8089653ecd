"""prism trace-predict and prism validate; real-data cases where the data folder exists."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _traces_synth import make_trace

from prism_analytic.cli import main


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    frame, _ = make_trace(steps=24, mb_sd=0.03, seed=5)
    path = tmp_path_factory.mktemp("cli") / "t.parquet"
    frame.to_parquet(path)
    return path


def test_trace_predict_json_and_plot(trace_file, tmp_path, capsys):
    plot = tmp_path / "cdf.png"
    code = main(
        [
            "trace-predict",
            str(trace_file),
            "--json",
            "--samples",
            "500",
            "--analytic",
            "off",
            "--plot",
            str(plot),
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("mean_s", "std_s", "p50_s", "p90_s", "p95_s"):
        assert np.isfinite(out["predicted"][key]) and np.isfinite(out["measured"][key])
    for key in (
        "mean_rel_err",
        "p50_rel_err",
        "p90_rel_err",
        "p95_in_measured_ci",
        "ks",
        "ks_shape_pvalue",
        "std_ratio",
        "typical_step_s",
        "effects",
    ):
        assert key in out
    assert {"slow_ranks", "stage_imbalance", "shared_factors"} <= set(out["effects"])
    assert plot.stat().st_size > 0


def test_trace_predict_errors(trace_file, tmp_path, capsys):
    assert main(["trace-predict", str(trace_file), "--plot", str(tmp_path / "no" / "x.png")]) == 2
    assert "--plot" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    assert main(["trace-predict", str(bad)]) == 2
    assert "bad.csv" in capsys.readouterr().err
    assert main(["trace-predict", str(tmp_path / "missing.parquet")]) == 2
    assert main(["trace-predict", str(trace_file), "--warmup", "x"]) == 2


def test_validate_without_data(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PRISM_DATA", str(tmp_path / "absent"))
    assert main(["validate"]) == 0
    assert "skipped" in capsys.readouterr().err


def test_validate_list(shared_data, capsys):
    assert main(["validate", "--list"]) == 0
    names = capsys.readouterr().out.split()
    assert "straggler-ST-structure" in names and "gpu-variability-sgemm-max" in names


def test_straggler_structure_cases(shared_data):
    from prism_analytic.traces.cases import run_case

    for name in ("ST", "AR"):
        r = run_case(f"straggler-{name}-structure", shared_data)
        assert r["passed"], r
        assert abs(r["metrics"]["by_type_rel_err"]) < 0.01


def test_straggler_st_held_out(shared_data):
    """Held-out half of ST: the core figures (means, quantiles) land within their targets."""
    from prism_analytic.traces.predict import predict_trace

    folder = shared_data / "straggler_traces"
    r = predict_trace(
        folder / "trace-ST.parquet",
        measured=folder / "result-ST.json",
        samples=2000,
        analytic="off",
        library=False,
    )
    m = r.to_dict()
    assert abs(m["mean_rel_err"]) <= 0.02 and abs(m["in_sample_mean_rel_err"]) <= 0.01
    assert abs(m["p50_rel_err"]) <= 0.02 and abs(m["p90_rel_err"]) <= 0.03
    assert len(m["warmup_steps_excluded"]) == 5
    assert m["effects"]["stage_imbalance"] > 1.3  # ST's long last stage


def test_gpu_and_kineto_cases(shared_data):
    from prism_analytic.traces.cases import run_case

    g = run_case("gpu-variability-sgemm-max", shared_data)
    assert all(0 <= v <= 1 for k, v in g["metrics"].items() if k.startswith("ks_n"))
    k = run_case("kineto-fixture", shared_data)
    assert k["passed"]
