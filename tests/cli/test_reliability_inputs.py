"""Hostile inputs and long work: a clear error naming the argument, or the right answer.

Each case below was once accepted silently, crashed deep inside a library, or ran out of
memory: negative seeds, bootstrap counts outside what a percentile interval needs, output
paths that fail only after the fit, binary files, traces with zeroed durations, shuffled
timestamps or receives that end before their sends, an unbounded bisection.
"""

from __future__ import annotations

import io
import os
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from _traces_synth import make_trace
from scipy import stats

from prism_analytic.calibration.result import PredictedLaw
from prism_analytic.cli import main
from prism_analytic.progress import Progress
from prism_analytic.traces.errors import TraceFormatError
from prism_analytic.traces.readers import read_op_table

JOB = ["--preset", "llama3-8b", "--gpus", "8"]


@pytest.fixture
def steps_csv(tmp_path: Path) -> Path:
    t = 6.0 * np.exp(0.02 * np.random.default_rng(0).standard_normal(300))
    path = tmp_path / "steps.csv"
    path.write_text("step_time_s\n" + "\n".join(f"{x:.6f}" for x in t))
    return path


@pytest.fixture
def binary(tmp_path: Path) -> Path:
    path = tmp_path / "blob.toml"
    path.write_bytes(bytes(range(256)) * 8)
    return path


def _argparse_error(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


# ----- seeds and counts --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["calibrate", *JOB, "--mfu", "0.4"],
        ["sweep", "--preset", "llama3-8b", "--gpus", "8"],
        ["trace-predict", "trace.parquet"],
        ["validate"],
    ],
)
def test_negative_seed_is_refused_naming_the_option(argv, capsys):
    err = _argparse_error([*argv, "--seed", "-1"], capsys)
    assert "argument --seed: must be a non-negative integer" in err


@pytest.mark.parametrize("count", ["1", "199", "100000000", "1e8"])
def test_bootstrap_count_outside_its_range_is_refused_before_any_work(count, steps_csv, capsys):
    err = _argparse_error(
        ["calibrate", *JOB, "--steps", str(steps_csv), "--bootstrap", count], capsys
    )
    assert "--bootstrap must be an integer from 200 to 1,000,000" in err


def test_bisection_probes_are_capped(capsys):
    argv = ["crossdc", "--preset", "llama3-70b", "--gpus", "1024", "--bandwidths", "1,10"]
    assert main([*argv, "--bisect-steps", "100000"]) == 2
    assert "--bisect-steps must be an integer from 0 to 64" in capsys.readouterr().err


# ----- output paths are checked before the work --------------------------------------------------
def _unwritable(tmp_path: Path) -> list[Path]:
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    paths = [tmp_path / "missing" / "fit.toml", blocker / "fit.toml", tmp_path]
    if Path("/proc/self").is_dir():  # writable to os.access as root, but open() fails
        paths.append(Path("/proc/prism-fit.toml"))
    return paths


def test_calibrate_out_unwritable_is_refused_before_the_fit(
    tmp_path, steps_csv, monkeypatch, capsys
):
    import prism_analytic.calibration as calibration

    def no_fit(*a, **k):
        raise AssertionError("the fit ran before --out was checked")

    monkeypatch.setattr(calibration, "calibrate_to_logs", no_fit)
    for out in _unwritable(tmp_path):
        assert main(["calibrate", *JOB, "--steps", str(steps_csv), "--out", str(out)]) == 2
        assert "--out:" in capsys.readouterr().err


def test_sweep_out_unwritable_is_refused_before_any_configuration(tmp_path, monkeypatch, capsys):
    import prism_analytic.sweep.runner as runner

    monkeypatch.setattr(runner, "run_sweep", lambda *a, **k: pytest.fail("sweep ran"))
    for out in _unwritable(tmp_path):
        target = out if out.is_dir() else out.with_suffix(".csv")
        assert main(["sweep", "--preset", "llama3-8b", "--gpus", "8", "--out", str(target)]) == 2
        assert "--out:" in capsys.readouterr().err


def test_figures_out_folder_unmakeable_is_refused_before_any_figure(tmp_path, monkeypatch, capsys):
    import prism_analytic.figures as figures

    monkeypatch.setattr(figures, "make_all", lambda *a, **k: pytest.fail("figures ran"))
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    for out in (blocker, blocker / "figs"):
        assert main(["figures", "--out", str(out)]) == 2
        assert "--out:" in capsys.readouterr().err


# ----- binary files ------------------------------------------------------------------------------
def test_binary_sweep_file_names_the_file_and_the_format(binary, capsys):
    assert main(["sweep", "--file", str(binary)]) == 2
    err = capsys.readouterr().err
    assert "--file" in err and binary.name in err and "binary" in err and "TOML sweep file" in err


def test_binary_step_log_names_the_file_and_the_formats(binary, capsys):
    assert main(["calibrate", *JOB, "--steps", str(binary)]) == 2
    err = capsys.readouterr().err
    assert binary.name in err and "binary" in err and "CSV" in err and "MLLOG" in err


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".json", ".json.gz"])
def test_binary_trace_names_the_file_and_the_formats(suffix, tmp_path):
    from prism_analytic.traces.readers import read_trace

    path = tmp_path / f"blob{suffix}"
    path.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(TraceFormatError, match=r"blob.*a trace is a per-op \.parquet or \.csv"):
        read_trace(path)


# ----- traces ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trace() -> object:
    frame, _ = make_trace(dp=2, pp=3, steps=4, seed=5)
    return frame


def _read(frame, tmp_path: Path):
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    return read_op_table(path)


def test_all_zero_durations_are_refused(trace, tmp_path):
    with pytest.raises(TraceFormatError, match=r"t\.csv: every one of the \d+ ops has duration 0"):
        _read(trace.assign(duration=0.0), tmp_path)


def test_timestamps_shuffled_across_rows_are_refused_naming_row_rank_step(trace, tmp_path):
    bad = trace.copy()
    bad["start_ts"] = np.random.default_rng(0).permutation(bad["start_ts"].to_numpy())
    with pytest.raises(TraceFormatError, match=r"t\.csv: row \d+: rank \d+ step \d+: .* before #"):
        _read(bad, tmp_path)


def test_receive_ending_before_its_send_is_refused(trace, tmp_path):
    bad = trace.copy()
    first = bad.index[(bad["optype"] == "forward-recv") & (bad["step"] == 1)][0]
    bad.loc[first, "start_ts"] -= 1.0  # ends a second before its send begins
    with pytest.raises(TraceFormatError, match=r"row \d+: rank \d+ step 1: forward-recv #0 ends"):
        _read(bad, tmp_path)


def test_rows_stored_out_of_order_give_the_same_table_and_say_so(trace, tmp_path):
    ordered = _read(trace, tmp_path)
    shuffled = _read(trace.sample(frac=1.0, random_state=1), tmp_path)
    assert "rows_sorted" in shuffled.meta and "rows_sorted" not in ordered.meta
    cols = ["rank", "step", "name", "seq_id", "start_s", "duration_s"]
    a = ordered.frame.sort_values(cols[:4]).reset_index(drop=True)[cols]
    b = shuffled.frame.sort_values(cols[:4]).reset_index(drop=True)[cols]
    assert a.equals(b)


# ----- bounded memory on long logs ---------------------------------------------------------------
class _Lognormal:
    def quantile(self, q):
        return stats.lognorm(0.03, scale=6.0).ppf(q)

    def sf(self, x):
        return stats.lognorm(0.03, scale=6.0).sf(x)


def test_goodness_memory_does_not_grow_with_400_simulated_logs():
    from prism_analytic.calibration.fit import _goodness

    n = 200_000
    law = PredictedLaw(6.0, 6.0, 6.2, 6.4, 0.18, result=_Lognormal())
    norm = np.exp(0.03 * np.random.default_rng(2).standard_normal(n))
    tracemalloc.start()
    g = _goodness(law, norm, n, seed=0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # 400 simulated logs of n steps held at once were 640 MB; one log and 1e6 draws are ~10 MB
    assert peak < 120e6
    lo, hi = g["predicted_p90_over_p50_sampling_95"]
    assert lo < float(np.exp(0.03 * stats.norm.ppf(0.9))) < hi


# ----- progress ----------------------------------------------------------------------------------
def test_progress_is_silent_for_short_work_and_reports_long_work():
    out = io.StringIO()
    quick = Progress("job", stream=out, every_s=60.0, enabled=True)
    for i in range(1, 11):
        quick(i, 10)
    assert out.getvalue() == ""
    slow = Progress("job", unit="steps", stream=out, every_s=0.0, enabled=True)
    slow(1, 3)
    slow(3, 3)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("job: 1/3 steps") and lines[-1].startswith("job: 3/3 steps")


def test_progress_as_context_shows_work_that_reports_no_count():
    out = io.StringIO()
    with Progress("fit", stream=out, every_s=0.05, enabled=True):
        time.sleep(0.3)
    assert "fit: working" in out.getvalue()


def test_progress_can_be_silenced(monkeypatch):
    monkeypatch.setitem(os.environ, "PRISM_PROGRESS", "0")
    out = io.StringIO()
    p = Progress("job", stream=out, every_s=0.0)
    p(1, 1)
    assert out.getvalue() == ""


def test_long_loops_report_their_progress():
    from prism_analytic.analyses.crossdc import crossdc
    from prism_analytic.calibration.logs import StepLog
    from prism_analytic.calibration.step_events import fit_step_events
    from prism_analytic.workload.jobs import build_job

    calls: list[tuple[int, int]] = []
    job = build_job("llama3-70b", 1024, None)
    crossdc(job, 2, [1.0, 10.0], bisect_steps=0, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(1, 3), (2, 3), (3, 3)]  # one-datacenter baseline, then each bandwidth
    rng = np.random.default_rng(3)
    t = 6.0 * np.exp(0.01 * rng.standard_normal(400))
    t[rng.choice(400, 6, replace=False)] *= 1.4
    calls.clear()
    fit_step_events(
        [StepLog("r.csv", t)],
        8,
        n_gof=2,
        n_boot=3,
        body_model=False,
        progress=lambda d, n: calls.append((d, n)),
    )
    assert calls == [(k, 5) for k in range(1, 6)]
