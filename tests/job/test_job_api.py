"""The task-level API (prism_analytic.Job): the same numbers as the library and the commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import prism_analytic as pa
from prism_analytic.cli import main
from prism_analytic.job import Job, list_presets, predict_trace
from prism_analytic.workload.jobs import build_job, load_config, merge_config

#: JSON fields that are wall times or other run-to-run facts, not results.
TIMINGS = {"compute_time_s", "build_time_s"}


def _cli_json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _strip(d):
    """``d`` without wall-time fields, at any depth."""
    if isinstance(d, dict):
        return {k: _strip(v) for k, v in d.items() if k not in TIMINGS and "time" not in k}
    if isinstance(d, list):
        return [_strip(v) for v in d]
    return d


@pytest.fixture(scope="module")
def small():
    return Job("llama3-8b", gpus=8)


@pytest.fixture(scope="module")
def small_prediction(small):
    return small.predict()


# ----- construction ------------------------------------------------------------------------------
def test_job_is_exported_and_builds_the_commands_job():
    assert pa.Job is Job
    assert Job("llama3-8b", 8).config == build_job("llama3-8b", 8)
    assert Job.from_preset("llama3-405b", gpus=16384).config == build_job("llama3-405b", 16384)


def test_keyword_overrides_merge_like_a_toml_file(tmp_path):
    toml = tmp_path / "o.toml"
    toml.write_text("[parallelism]\npp = 2\n[variability.spatial]\ncv = 0.03\n")
    job = Job.from_preset(
        "llama3-70b", gpus=64, parallelism={"pp": 2}, variability={"spatial": {"cv": 0.03}}
    )
    assert job.config == build_job("llama3-70b", 64, toml)
    assert job.config.parallelism.dp == 4


def test_hardware_preset_by_name():
    job = Job("llama3-8b", 8, hardware="h200-sxm-141gb")
    assert job.config.hardware.name == "h200-sxm-141gb"


def test_from_toml_and_from_dict_read_a_whole_job(tmp_path):
    text = '[job]\npreset = "llama3-70b"\ngpus = 64\n[parallelism]\npp = 2\n'
    path = tmp_path / "job.toml"
    path.write_text(text)
    overlay = tmp_path / "fit.toml"
    overlay.write_text("[hardware.efficiency]\ngemm = 0.6\n")
    assert Job.from_toml(path).config == build_job(None, None, path)
    assert Job.from_dict(
        {"job": {"preset": "llama3-70b", "gpus": 64}, "parallelism": {"pp": 2}}
    ).config == load_config(text)
    stacked = Job.from_toml(path, overlay).config
    assert stacked == merge_config(build_job(None, None, path), overlay)
    assert stacked.hardware.efficiency.gemm == 0.6


def test_at_rebuilds_the_preset_layout_at_another_size():
    assert Job("llama3-8b", 8).at(64).config == build_job("llama3-8b", 64)
    cv = {"spatial": {"cv": 0.02}}
    assert Job("llama3-8b", 8, variability=cv).at(64).config.variability.spatial.cv == 0.02


def test_overlay_accepts_text_and_mappings():
    base = Job("llama3-8b", 8)
    a = base.overlay("[training]\nprecision = 'fp8'\n").config
    b = base.overlay({"training": {"precision": "fp8"}}).config
    assert a == b and a.training.precision == "fp8"
    assert base.config.training.precision == "bf16"  # a new job; the old one is unchanged


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: Job("llama3-8b", 8, paralelism={"tp": 2}), "paralelism: unknown override"),
        (lambda: Job("llama3-8b", 0), "gpus: expected a positive integer"),
        (lambda: Job("llama3-8b", 8.0), "gpus: expected a positive integer"),
        (lambda: Job("llama3-9b", 8), "unknown model preset 'llama3-9b'"),
        (lambda: Job("llama3-8b", 8, parallelism={"tpp": 2}), "parallelism.tpp"),
        (lambda: Job.from_toml("/no/such.toml"), "no such config file"),
    ],
)
def test_bad_jobs_are_value_errors_naming_the_field(make, match):
    with pytest.raises(ValueError, match=match):
        make()


# ----- predict -----------------------------------------------------------------------------------
def test_predict_matches_the_command_json(small_prediction, capsys):
    cli = _cli_json(capsys, ["predict", "--preset", "llama3-8b", "--gpus", "8", "--json"])
    ours = small_prediction.to_dict()
    assert _strip(ours) == _strip(cli)
    json.dumps(ours, allow_nan=False)  # plain JSON


def test_predict_text_is_the_command_text(small_prediction, capsys):
    assert main(["predict", "--preset", "llama3-8b", "--gpus", "8"]) == 0
    cli = capsys.readouterr().out.strip().splitlines()
    ours = small_prediction.summary().splitlines()
    # the build and compute times differ run to run; every other line is the same
    timed = ("step graph:", "step time (")
    assert [x for x in ours if not x.startswith(timed)] == [
        x for x in cli if not x.startswith(timed)
    ]
    assert len(ours) == len(cli)


def test_predict_delegates_to_the_engine_result(small_prediction):
    r = small_prediction
    assert r.exact is True
    low, high = r.quantile_bracket(0.99)
    assert low <= r.quantile(0.99) <= high
    assert r.to_dict()["p99_s"] == pytest.approx(float(r.quantile(0.99)), rel=1e-12)
    assert r.info["graph_nodes"] >= 1


def test_predict_bad_method_is_a_value_error(small):
    with pytest.raises(ValueError, match="method: expected one of analytic, montecarlo, bounds"):
        small.predict("exact")


def test_predict_takes_the_commands_options(small):
    with pytest.raises(ValueError, match="--scheduler distributes Monte Carlo blocks"):
        small.predict(scheduler="local")
    with pytest.raises(ValueError, match="executor= or scheduler=, not both"):
        small.predict("montecarlo", scheduler="local", executor=object())
    with pytest.raises(ValueError, match="cannot evaluate llama3-8b@8: tolerance"):
        small.predict(tolerance=2.0)
    here = small.predict("montecarlo", samples=500, seed=4).to_dict()
    local = small.predict("montecarlo", samples=500, seed=4, scheduler="local", workers=1)
    assert local.to_dict()["p99_s"] == here["p99_s"]


def test_plot_and_html(small_prediction, tmp_path):
    fig = small_prediction.plot()
    assert len(fig.axes) == 1 and fig.axes[0].get_title().startswith("llama3-8b@8")
    target = tmp_path / "cdf.png"
    small_prediction.plot(target)
    assert target.stat().st_size > 1000
    html = small_prediction._repr_html_()
    assert html.startswith("<table>") and "p99_s" in html
    with pytest.raises(ValueError, match="plot path: folder"):
        small_prediction.plot(tmp_path / "missing" / "x.png")
    with pytest.raises(ValueError, match="plot path: format"):
        small_prediction.plot(tmp_path / "x.nope")


# ----- runtime, slowdown -------------------------------------------------------------------------
def test_runtime_is_run_time_of_the_job(small):
    from prism_analytic.analyses.interruptions import Interruptions
    from prism_analytic.analyses.runtime import run_time

    res = small.runtime(steps=500, deadline_s=30_000.0, prob=0.9)
    ref = run_time(small.config, 500, interruptions=Interruptions())
    assert res.to_dict()["p99_s"] == pytest.approx(float(ref.quantile(0.99)), rel=1e-12)
    assert res.to_dict()["p_within_deadline"] == pytest.approx(float(ref.cdf(30_000.0)))
    assert res.to_dict()["time_at_prob_s"] == pytest.approx(float(ref.quantile(0.9)))
    alone = small.runtime(steps=500, failures=False)
    assert alone.to_dict()["interruptions"] is None
    assert alone.mean() < res.mean()  # failures and checkpoints only add time
    with pytest.raises(ValueError, match="exactly one of steps= or tokens="):
        small.runtime()
    with pytest.raises(ValueError, match="prob: expected a probability"):
        small.runtime(steps=10, prob=1.5)


def test_runtime_passes_the_lattice_sizes_to_run_time(small):
    from prism_analytic.analyses.interruptions import Interruptions
    from prism_analytic.analyses.runtime import run_time

    res = small.runtime(steps=200, cells=1000, renewal_cells=1 << 12)
    ref = run_time(small.config, 200, interruptions=Interruptions(), cells=1000, renewal_cells=4096)
    assert res.to_dict()["p99_s"] == pytest.approx(float(ref.quantile(0.99)), rel=1e-12)
    assert len(res.x) == len(ref.x)
    with pytest.raises(ValueError, match="renewal_cells: expected an integer"):
        small.runtime(steps=10, renewal_cells=3)
    with pytest.raises(ValueError, match="cells: expected an integer"):
        small.runtime(steps=10, cells=2.5)


def test_runtime_and_slowdown_commands_print_the_jobs_result(small, capsys):
    argv = ["runtime", "--preset", "llama3-8b", "--gpus", "8", "--steps", "300"]
    res = small.runtime(300, deadline_s=10_000.0)
    assert _cli_json(capsys, [*argv, "--deadline", "1e4", "--json"]) == res.to_dict()
    assert main([*argv, "--deadline", "1e4"]) == 0
    assert capsys.readouterr().out == res.summary() + "\n"
    sd = Job.from_args("llama3-8b", 8).slowdown([8, 64], threshold=0.05)
    argv = ["slowdown", "--preset", "llama3-8b", "--gpus", "8,64", "--threshold", "0.05"]
    assert _cli_json(capsys, [*argv, "--json"]) == sd.to_dict()
    assert main(argv) == 0
    assert capsys.readouterr().out == sd.summary() + "\n"


def test_slowdown_matches_the_library_at_each_scale():
    from prism_analytic.analyses.slowdown import slowdown

    ours = Job("llama3-8b", 8).slowdown([8, 64], threshold=0.1).to_dict()
    assert ours == json.loads(json.dumps(slowdown("llama3-8b", [8, 64], 0.1).to_dict()))
    with pytest.raises(ValueError, match="threshold"):
        Job("llama3-8b", 8).slowdown(threshold=-1)


# ----- placement, sensitivity (the commands call these) ------------------------------------------
def test_placement_matches_the_command(capsys):
    argv = ["placement", "--preset", "llama3-8b", "--gpus", "16", "--slow-gpus", "2"]
    argv += ["--slow-factor", "1.5", "--no-search"]
    cli = _cli_json(capsys, [*argv, "--json"])
    res = Job("llama3-8b", 16).placement(2, 1.5, search=False)
    assert _strip(res.to_dict()) == _strip(cli)
    assert res.rows  # delegated to the PlacementResult


# ----- calibrate, trace --------------------------------------------------------------------------
def test_calibrate_to_mfu_reaches_the_target():
    res = Job("llama3-8b", 8).calibrate(mfu=0.40)
    assert res.to_dict()["goodness_of_fit"]["predicted_mfu_at_mean_step"] == pytest.approx(
        0.40, abs=2e-3
    )
    assert "hardware.efficiency" in res.to_toml()
    with pytest.raises(ValueError, match="has no plot"):
        res.plot()
    with pytest.raises(ValueError, match="exactly one target"):
        Job("llama3-8b", 8).calibrate()
    with pytest.raises(ValueError, match="mfu: expected a fraction"):
        Job("llama3-8b", 8).calibrate(mfu=41)


def test_calibrated_overlay_moves_the_prediction_to_the_target(tmp_path):
    out = tmp_path / "fit.toml"
    job = Job("llama3-8b", 8)
    fitted = job.calibrate(mfu=0.40, out=out)
    assert out.read_text() == fitted.to_toml()
    after = job.overlay(out).predict(verify=False)
    # the overlay rounds the efficiency to 6 digits; the target is the published rate's step
    target = fitted.to_dict()["target"]["target_mean_step_s"]
    assert after.mean() == pytest.approx(target, rel=1e-3)


@pytest.fixture(scope="module")
def trace_csv(tmp_path_factory):
    pytest.importorskip("pandas")
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from _traces_synth import make_trace

    frame, _ = make_trace(steps=20, seed=1)
    path = tmp_path_factory.mktemp("trace") / "trace.csv"
    frame.to_csv(path, index=False)
    return path


def test_predict_trace_is_the_library_call(trace_csv):
    from prism_analytic.traces.predict import predict_trace as library

    ours = predict_trace(trace_csv, samples=1000, analytic="off")
    ref = library(trace_csv, samples=1000, analytic="off")
    assert _strip(ours.to_dict()) == _strip(json.loads(json.dumps(pa_jsonable(ref.to_dict()))))
    assert ours.summary() == ref.summary()


def pa_jsonable(d):
    from prism_analytic.json_safe import jsonable

    return jsonable(d)


# ----- sweep, presets ----------------------------------------------------------------------------
def test_sweep_rows_are_the_predictions_of_the_variants():
    job = Job("llama3-8b", 8)
    res = job.sweep({"variability.spatial.cv": [0.01, 0.03]})
    rows = res.to_dict()["rows"]
    assert [r["status"] for r in rows] == ["ok", "ok"]
    for row, cv in zip(rows, (0.01, 0.03)):
        direct = job.overlay({"variability": {"spatial": {"cv": cv}}}).predict(verify=False)
        assert row["mean_s"] == pytest.approx(direct.mean(), rel=1e-9)
    assert res.summary().startswith("2 configurations: 2 ok")


def test_list_presets_is_the_command(capsys):
    assert _cli_json(capsys, ["presets", "--json"]) == list_presets().to_dict()
    assert "llama3-405b" in list_presets().summary()


def test_result_to_dict_is_a_copy(small_prediction):
    d = small_prediction.to_dict()
    d["p99_s"] = np.nan
    assert small_prediction.to_dict()["p99_s"] is not None


def test_from_args_is_build_job(tmp_path):
    over = tmp_path / "o.toml"
    over.write_text("[parallelism]\npp = 2\n")
    assert Job.from_args("llama3-70b", 64, over).config == build_job("llama3-70b", 64, over)
    assert Job.from_args("llama3-70b", 64, over).at(128).config == build_job(
        "llama3-70b", 128, over
    )
    with pytest.raises(ValueError, match="--preset"):
        Job.from_args()


def test_check_compares_the_prediction_with_logs(tmp_path):
    from prism_analytic.calibration import check_against_logs, read_step_log

    job = Job("llama3-8b", 8)
    median = float(job.predict(verify=False).quantile(0.5))
    rng = np.random.default_rng(1)
    log = tmp_path / "steps.csv"
    steps = median * 1.02 * (1 + 0.004 * rng.standard_normal(100))
    log.write_text("step_time_s\n" + "\n".join(f"{s:.5f}" for s in steps) + "\n")
    report = job.check(log).to_dict()
    ref = check_against_logs(job.config, [read_step_log(log)], seed=0, shape="within-run")
    assert report["median_rel_error"] == pytest.approx(ref["median_rel_error"])
    # the logs run 2% slower than the prediction: the check says so
    assert report["median_rel_error"] == pytest.approx(-0.02, abs=0.005)


def _steps_log(path, median, scale, seed, n=120):
    rng = np.random.default_rng(seed)
    steps = median * scale * np.exp(0.01 * rng.standard_normal(n))
    path.write_text("step_time_s\n" + "\n".join(f"{s:.5f}" for s in steps) + "\n")
    return path


def test_calibrate_command_prints_the_jobs_result(tmp_path, capsys):
    out = tmp_path / "fit.toml"
    argv = ["calibrate", "--preset", "llama3-8b", "--gpus", "8", "--mfu", "0.4"]
    res = Job("llama3-8b", 8).calibrate(mfu=0.4, out=out)
    assert main([*argv, "--out", str(out)]) == 0
    assert capsys.readouterr().out == res.summary() + "\n"
    assert out.read_text() == res.to_toml()
    assert _cli_json(capsys, [*argv, "--json"]) == res.to_dict()


def test_check_with_events_from_is_the_command(tmp_path, capsys, monkeypatch):
    job = Job("llama3-8b", 8)
    median = float(job.predict(verify=False).quantile(0.5))
    log = _steps_log(tmp_path / "a.csv", median, 1.02, 1)
    ref = _steps_log(tmp_path / "b.csv", median, 1.02, 2)
    opts = {"events_from": ref, "events_gpus": 8, "body_mode": "engine", "stall_dispersion": 0.5}
    result = job.check(log, **opts)
    report = result.to_dict()
    # the event options reach the check (predict_events reports them)
    assert report["events"]["body_mode"] == "engine"
    assert report["events"]["stall_dispersion_used"] == 0.5
    assert report["events"]["stall_dispersion_from"] == "given"
    # the command is a thin call: it hands Job.check the same options and prints its result (the
    # check itself is not rerun: it is deterministic for a seed and costs ~12 s)
    calls = []

    def recorded(self, steps, **kw):
        calls.append((self.config, [Path(p) for p in steps], kw))
        return result

    monkeypatch.setattr(Job, "check", recorded)
    argv = ["calibrate", "--preset", "llama3-8b", "--gpus", "8", "--steps", str(log), "--check"]
    argv += ["--events-from", str(ref), "--events-gpus", "8", "--body-mode", "engine"]
    assert _cli_json(capsys, [*argv, "--stall-dispersion", "0.5", "--json"]) == report
    ((config, steps, kw),) = calls
    assert config == job.config and steps == [log]
    assert [Path(p) for p in kw.pop("events_from")] == [ref]
    assert {k: kw[k] for k in ("events_gpus", "body_mode", "stall_dispersion")} == {
        "events_gpus": 8,
        "body_mode": "engine",
        "stall_dispersion": 0.5,
    }


@pytest.mark.parametrize(
    ("opts", "match"),
    [
        ({"events_gpus": 8}, "go together"),
        ({"events_from": "x.csv"}, "go together"),
        ({"events_from": "x.csv", "events_gpus": 0}, "events_gpus"),
        ({"body_mode": "median"}, "body_mode"),
        ({"stall_dispersion": -1.0}, "stall_dispersion"),
        ({"body_mode": "none"}, "apply with events_from"),
        ({"stall_dispersion": 0.5}, "apply with events_from"),
    ],
)
def test_check_refuses_bad_event_options(opts, match):
    with pytest.raises(ValueError, match=match):
        Job("llama3-8b", 8).check("steps.csv", **opts)


def test_sweep_command_and_job_share_one_report(tmp_path, capsys):
    out = tmp_path / "sweep.csv"
    res = Job("llama3-8b", 8).sweep({"parallelism.tp": [1, 2, 3]}, out=out)
    text = res.summary()
    assert text.startswith("3 configurations: 1 invalid, 2 ok (3 evaluated now, 0 already")
    assert "best by mean: preset llama3-8b, gpus 8, tp 2, pp 1, dp 4" in text
    assert text.endswith(f"table written to {out}")
    out.unlink()
    argv = ["sweep", "--preset", "llama3-8b", "--gpus", "8", "--set", "parallelism.tp=1,2,3"]
    assert main([*argv, "--workers", "1", "--out", str(out)]) == 0
    assert capsys.readouterr().out == text + "\n"
    rows = _cli_json(capsys, [*argv, "--workers", "1", "--json"])["rows"]
    expected = res.to_dict()["rows"]
    for row in (*rows, *expected):
        row.pop("compute_time_s")  # wall-clock time of each row
    assert rows == expected


def test_sweep_of_a_toml_job_keeps_its_tables(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text('[job]\npreset = "llama3-8b"\ngpus = 8\n[variability.spatial]\ncv = 0.03\n')
    rows = Job.from_toml(path).sweep().to_dict()["rows"]
    direct = Job("llama3-8b", 8, variability={"spatial": {"cv": 0.03}}).predict(verify=False)
    assert rows[0]["mean_s"] == pytest.approx(direct.mean(), rel=1e-9)


def test_from_args_checks_its_overlays_against_the_final_job(tmp_path):
    # as `prism predict --config a --config b`: an FP8 efficiency that a later file's FP8
    # precision uses is accepted; step by step, the first overlay alone would be refused
    fit = tmp_path / "fit.toml"
    fit.write_text("[hardware.efficiency]\ngemm_fp8 = 0.5\n")
    fp8 = tmp_path / "fp8.toml"
    fp8.write_text('[training]\nprecision = "fp8"\n')
    job = Job.from_args("llama3-8b", 8, fit, fp8).config
    assert job.hardware.efficiency.gemm_fp8 == 0.5 and job.training.precision == "fp8"
    with pytest.raises(ValueError, match="gemm_fp8"):
        Job.from_args("llama3-8b", 8, fit)
    with pytest.raises(ValueError, match="--config: no such config file"):
        Job.from_args("llama3-8b", 8, None, tmp_path / "missing.toml")


def test_an_overlay_for_an_unused_precision_is_refused(tmp_path):
    fit = tmp_path / "fit.toml"
    fit.write_text("[hardware.efficiency]\ngemm = 0.6\n")
    fp8 = Job("llama3-8b", 8, training={"precision": "fp8"})
    with pytest.raises(ValueError, match="gemm_fp8"):
        fp8.overlay(fit)
    with pytest.raises(ValueError, match="gemm_fp8"):
        fp8.overlay(str(fit))
    over = tmp_path / "over.toml"
    over.write_text('[training]\nprecision = "fp8"\n[hardware.efficiency]\ngemm = 0.6\n')
    with pytest.raises(ValueError, match="gemm_fp8"):
        Job.from_args("llama3-8b", 8, over)
    assert Job("llama3-8b", 8).overlay(fit).config.hardware.efficiency.gemm == 0.6
