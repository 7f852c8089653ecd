"""prism sweep: spec checks before any work, rows for invalid layouts, resumable tables."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from prism_analytic.cli import main
from prism_analytic.sweep import EvalSettings, SweepError, SweepSpec, parse_set, run_sweep
from prism_analytic.sweep.executor import check_scheduler, open_executor
from prism_analytic.sweep.spec import load_sweep_file
from prism_analytic.sweep.table import journal_path

# llama3-8b on 64 GPUs is tp 1, pp 1: each configuration evaluates in well under a second
SMALL = ["--preset", "llama3-8b", "--gpus", "64"]


def small_spec(**grid):
    items = [f"{k}={v}" for k, v in grid.items()]
    return SweepSpec(presets=("llama3-8b",), gpus=(64,), grid=parse_set(items))


# ----- spec errors, before any work ---------------------------------------------------------
@pytest.mark.parametrize(
    "item, match",
    [
        ("parallelism.tpp=4", "unknown key 'tpp'; allowed keys in \\[parallelism\\]"),
        ("paralelism.tp=4", "unknown section"),
        ("parallelism.tp=", "empty value"),
        ("parallelism.tp=4,,8", "empty value"),
        ("parallelism.tp=four", "'four' is not an integer"),
        ("parallelism.tp=4.5", "'4.5' is not an integer"),
        ("parallelism.tp=0", "must be >= 1"),
        ("variability.spatial.cv=abc", "'abc' is not a number"),
        ("parallelism.schedule=zigzag", "allowed: one of"),
        ("parallelism.overlap=1", "is a table"),
        ("parallelism.tp", "expected KEY=V1,V2"),
        ("job.gpus=8", "use --preset/--gpus"),
        ("parallelism.tp=4,4", "repeated values"),
    ],
)
def test_bad_set_items_are_rejected(item, match):
    with pytest.raises(SweepError, match=match):
        parse_set([item])


def test_bad_axes_are_rejected():
    with pytest.raises(SweepError, match="unknown key|not a known preset"):
        SweepSpec(presets=("llama9",), gpus=(64,))
    with pytest.raises(SweepError, match="empty list"):
        SweepSpec(presets=("llama3-8b",), gpus=())
    with pytest.raises(SweepError, match="not a positive integer"):
        SweepSpec(presets=("llama3-8b",), gpus=(0,))
    with pytest.raises(SweepError, match="empty list of values"):
        SweepSpec(presets=("llama3-8b",), gpus=(64,), grid={"parallelism.tp": []})
    with pytest.raises(SweepError, match="given twice"):
        parse_set(["parallelism.tp=1", "parallelism.tp=2"])


def test_list_valued_keys_are_fixed_values_not_axes():
    regimes = {"probabilities": [0.95, 0.05], "slowdowns": [1.0, 1.5]}
    spec = SweepSpec(presets=("llama3-8b",), gpus=(64,), base={"variability": {"regimes": regimes}})
    assert spec.configurations()[0].job_mapping()["variability"]["regimes"] == regimes
    with pytest.raises(SweepError, match="list-valued keys cannot be swept"):
        parse_set(["variability.regimes.probabilities=0.5"])
    with pytest.raises(SweepError, match="sweep base: .*must be a list of numbers"):
        SweepSpec(
            presets=("llama3-8b",), gpus=(64,), base={"variability": {"regimes": {"slowdowns": 1}}}
        )


def test_sweep_file(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text(
        '[sweep]\npreset = "llama3-8b"\ngpus = [64, 128]\n'
        '[grid]\n"parallelism.tp" = [1, 2]\nvariability.spatial.cv = [0.01, 0.02]\n'
        "[[points]]\ntraining = {recompute = 'full'}\n[[points]]\n"
        "[base.variability.temporal]\nkernel_cv = 0.02\n"
    )
    spec = load_sweep_file(f)
    assert len(spec) == 2 * 2 * 2 * 2
    assert spec.keys == ["parallelism.tp", "variability.spatial.cv", "training.recompute"]
    first = spec.configurations()[0].job_mapping()
    assert first["variability"]["temporal"]["kernel_cv"] == 0.02
    bad = tmp_path / "bad.toml"
    bad.write_text('[sweep]\npreset = "llama3-8b"\ngpus = [64]\n[grid]\n"model.layerz" = [1]\n')
    with pytest.raises(SweepError, match="unknown key 'layerz'"):
        load_sweep_file(bad)
    bad.write_text('[sweep]\npreset = "llama3-8b"\ngpus = [64]\n[grud]\n')
    with pytest.raises(SweepError, match="unknown table"):
        load_sweep_file(bad)
    bad.write_text('[sweep]\npreset = "llama3-8b"\ngpus = []\n')
    with pytest.raises(SweepError, match="empty list"):
        load_sweep_file(bad)


@pytest.mark.parametrize(
    "address", ["tcp://", "tcp://host", "http://h:1", "tcp://h:port", "remote", ""]
)
def test_bad_scheduler_addresses(address):
    with pytest.raises(ValueError, match="--scheduler"):
        check_scheduler(address)


def test_unreachable_scheduler_fails_before_work(tmp_path, capsys):
    out = tmp_path / "t.csv"
    # port 9 (discard) on localhost: nothing listens there
    code = main(
        [
            "sweep",
            *SMALL,
            "--set",
            "parallelism.tp=1",
            "--out",
            str(out),
            "--scheduler",
            "tcp://127.0.0.1:9",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "cannot reach a dask scheduler" in err
    assert not out.exists()


def test_cli_errors_before_work(tmp_path, capsys):
    out = tmp_path / "t.csv"
    assert main(["sweep", *SMALL, "--set", "parallelism.tq=1", "--out", str(out)]) == 2
    assert "unknown key 'tq'" in capsys.readouterr().err
    assert main(["sweep", *SMALL, "--set", "parallelism.tp=1", "--out", str(tmp_path)]) == 2
    assert "--out" in capsys.readouterr().err
    assert main(["sweep", *SMALL, "--out", str(tmp_path / "t.xlsx")]) == 2
    assert not out.exists()


# ----- rows -----------------------------------------------------------------------------------
def test_invalid_layouts_are_rows_and_values_match_predict():
    from prism_analytic.workload.jobs import build_job, merge_config
    from prism_analytic.workload.prediction import predict_job as run_prediction

    spec = small_spec(**{"parallelism.tp": "2,16"})
    df = run_sweep(spec, EvalSettings()).table
    assert list(df["status"]) == ["ok", "invalid"]
    assert "parallelism.tp" in df.loc[1, "error"] and "must divide" in df.loc[1, "error"]
    # the row holds exactly what a direct prediction of the same job gives
    job = merge_config(build_job("llama3-8b", 64), {"parallelism": {"tp": 2}})
    result, _, _ = run_prediction(job)
    assert df.loc[0, "mean_s"] == result.mean()
    assert df.loc[0, "p95_s"] == float(result.quantile(0.95))
    lo, hi = result.quantile_bracket(0.95)
    assert df.loc[0, "p95_lo_s"] <= df.loc[0, "p95_s"] <= df.loc[0, "p95_hi_s"]
    assert (df.loc[0, "p95_lo_s"], df.loc[0, "p95_hi_s"]) == (lo, hi)
    assert df.loc[0, "tp"] == 2 and df.loc[0, "dp"] == 32


def test_keep_batch_holds_the_global_batch():
    spec = small_spec(**{"parallelism.tp": "1,2,8"})
    df = run_sweep(spec, EvalSettings(keep_batch=True)).table
    assert set(df["status"]) == {"ok"}
    assert df["global_batch"].nunique() == 1
    assert list(df["microbatches"] * df["dp"]) == [df["global_batch"][0]] * 3


# ----- resuming -------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_resume_skips_finished_rows(tmp_path, suffix):
    out = tmp_path / f"sweep{suffix}"
    spec = small_spec(**{"variability.spatial.cv": "0.01,0.02", "parallelism.tp": "1,16"})
    first = run_sweep(spec, EvalSettings(), out)
    assert first.evaluated == 4 and first.skipped == 0 and out.exists()
    assert not journal_path(out).exists()
    again = run_sweep(spec, EvalSettings(), out)
    assert again.evaluated == 0 and again.skipped == 4
    # a larger sweep on the same output evaluates only the new configurations
    bigger = small_spec(**{"variability.spatial.cv": "0.01,0.02,0.03", "parallelism.tp": "1,16"})
    third = run_sweep(bigger, EvalSettings(), out)
    assert third.evaluated == 2 and third.skipped == 4
    table = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
    assert len(table) == 6 and table["config_id"].is_unique
    assert list(table["index"]) == list(range(6))


def test_resume_after_a_crash_reads_the_journal(tmp_path):
    out = tmp_path / "sweep.csv"
    spec = small_spec(**{"variability.spatial.cv": "0.01,0.02,0.03"})
    settings = EvalSettings()
    full = run_sweep(spec, settings).table
    # a crash after two rows: the journal holds them (the last line cut short), no table yet
    rows = full.astype(object).where(full.notna(), None).to_dict("records")
    text = "".join(json.dumps(r) + "\n" for r in rows[:2]) + '{"config_id": "tr'
    journal_path(out).write_text(text)
    resumed = run_sweep(spec, settings, out)
    assert resumed.skipped == 2 and resumed.evaluated == 1
    table = pd.read_csv(out, dtype={"config_id": str})
    cols = [c for c in table.columns if c != "compute_time_s"]
    pd.testing.assert_frame_equal(
        table[cols], full[cols].astype(table[cols].dtypes.to_dict()), check_exact=True
    )


def test_error_rows_are_retried(tmp_path):
    out = tmp_path / "sweep.csv"
    spec = small_spec(**{"variability.spatial.cv": "0.01"})
    run_sweep(spec, EvalSettings(), out)
    table = pd.read_csv(out, dtype={"config_id": str})
    table.loc[0, "status"] = "error"
    table.to_csv(out, index=False)
    again = run_sweep(spec, EvalSettings(), out)
    assert again.evaluated == 1
    assert pd.read_csv(out)["status"].tolist() == ["ok"]


# ----- the command ------------------------------------------------------------------------------
def test_cli_sweep_json_and_local_pool(tmp_path, capsys):
    out = tmp_path / "s.parquet"
    argv = ["sweep", *SMALL, "--set", "parallelism.tp=1,16", "--out", str(out), "--json"]
    assert main([*argv, "--workers", "2"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["evaluated"] == 2 and [r["status"] for r in payload["rows"]] == [
        "ok",
        "invalid",
    ]
    assert main([*argv, "--workers", "1"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["evaluated"] == 0 and again["skipped"] == 2


def test_local_pool_gives_the_same_rows_as_this_process():
    spec = small_spec(**{"variability.spatial.cv": "0.01,0.03"})
    inline = run_sweep(spec, EvalSettings()).table
    with open_executor("local", 2) as pool:
        pooled = run_sweep(spec, EvalSettings(), executor=pool).table
    cols = [c for c in inline.columns if c != "compute_time_s"]
    pd.testing.assert_frame_equal(inline[cols], pooled[cols], check_exact=True)


def test_predict_scheduler_needs_montecarlo(capsys):
    assert main(["predict", *SMALL, "--scheduler", "dask"]) == 2
    assert "--method montecarlo" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["predict", *SMALL, "--method", "montecarlo", "--scheduler", "udp://x:1"])
