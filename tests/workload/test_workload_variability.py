"""Measured variability: GPU spread (Sinha et al.) and MLPerf step logs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from prism_analytic.workload.config import HiccupConfig, SpatialVariability
from prism_analytic.workload.variability import (
    DATASETS,
    load_gpu_runs,
    load_mlperf_runs,
    mlperf_step_times,
    resolve_data_dir,
    spatial_stats,
    step_outlier_stats,
)

DATA = (Path(__file__).parents[2] / ".." / "shared" / "data").resolve()
needs_data = pytest.mark.skipif(
    not (DATA / "gpu_variability").is_dir() or not (DATA / "mlperf_llama405b").is_dir(),
    reason=f"shared data not found at {DATA} (expected ../shared/data beside the repository)",
)


# --------------------------------------------------------------------------------------
# real data (SOURCE.md numbers)
# --------------------------------------------------------------------------------------
@needs_data
def test_sgemm_spatial_numbers_match_source():
    s = spatial_stats("sgemm-longhorn", DATA, n_resamples=400)
    assert (s.n_gpus, s.n_runs) == (392, 11087)
    assert s.cv == pytest.approx(0.020, abs=5e-4)
    assert s.p99_over_p50 == pytest.approx(1.050, abs=1e-3)
    assert s.max_over_p50 == pytest.approx(1.203, abs=1e-3)
    assert s.within_gpu_cv == pytest.approx(0.0012, abs=1e-4)
    for est, (lo, hi) in ((s.cv, s.cv_ci), (s.p99_over_p50, s.p99_over_p50_ci)):
        assert lo <= est <= hi
    # between-GPU spread is ~17x the within-GPU spread (SOURCE.md)
    assert 12 < s.cv / s.within_gpu_cv < 22
    assert "392 GPUs" in s.summary() and s.to_dict()["n_gpus"] == 392


@needs_data
def test_longhorn_what_if_numbers_come_from_the_data():
    # body = robust CV; outliers = GPUs beyond 3 robust sd, at their mean slowdown. The
    # defaults' cv and slow_fraction are fitted on MLPerf logs (test_variability_fit.py);
    # the outliers' factor and the documented Longhorn what-if stay these numbers.
    s = spatial_stats("sgemm-longhorn", DATA, n_resamples=50)
    default = SpatialVariability()
    assert s.robust_cv == pytest.approx(0.017, abs=5e-4)
    assert s.outlier_fraction == pytest.approx(0.010, abs=1e-3)
    assert max(1.0, s.outlier_mean_factor) == pytest.approx(default.slow_factor, abs=5e-3)
    assert "0.017" in SpatialVariability.__doc__ and "0.01``" in SpatialVariability.__doc__


@needs_data
@pytest.mark.parametrize("name", sorted(DATASETS))
def test_every_dataset_loads_in_seconds(name):
    runs = load_gpu_runs(name, DATA)
    med = np.median([np.median(v) for v in runs.values()])
    assert 0.01 < med < 10.0  # all are sub-10-second kernels/iterations


@needs_data
def test_mlperf_step_counts_and_medians_match_source():
    expect = {
        512: (948, 19.31),
        1024: (1092, 8.45),
        1536: (773, 8.50),
        2048: (771, 7.16),
        2496: (792, 5.83),
    }
    got = mlperf_step_times(DATA)
    assert sorted(got) == sorted(expect)
    for g, (n, med) in expect.items():
        assert len(got[g]) == n
        assert np.median(got[g]) == pytest.approx(med, abs=0.005)


@needs_data
def test_mlperf_run_metadata():
    runs = load_mlperf_runs(DATA)
    assert len(runs) == 15
    accum = {r.gpus: r.gradient_accumulation_steps for r in runs}
    assert accum == {512: 112, 1024: 48, 1536: 48, 2048: 40, 2496: 32}
    assert all(r.max_sequence_length == 8192 for r in runs)
    assert all(r.global_batch_size == r.gradient_accumulation_steps * r.gpus // 64 for r in runs)


@needs_data
def test_hiccup_defaults_come_from_the_data():
    s = step_outlier_stats(DATA)
    default = HiccupConfig()
    assert (s.n_steps, s.n_outliers) == (4376, 17)
    assert s.probability == pytest.approx(default.probability, abs=1e-4)
    assert s.median_excess_s == pytest.approx(default.size_s, abs=0.05)


# --------------------------------------------------------------------------------------
# synthetic files: parsing and errors, no shared data needed
# --------------------------------------------------------------------------------------
def _mllog(path: Path, times: list[float], extra: str = "") -> None:
    lines = ["garbage line", ':::MLLOG {"key": "gradient_accumulation_steps", "value": 4}']
    lines.append(':::MLLOG {"key": "tracked_stats", "value": {"warmup_time": 3.0}}')
    for t in times:
        rec = {"key": "tracked_stats", "value": {"train_step_time": t, "reduced_train_loss": 1}}
        lines.append("prefix :::MLLOG " + json.dumps(rec))
    path.write_text("\n".join(lines) + extra + "\n")


def _fake_mlperf(root: Path) -> Path:
    d = root / "mlperf_llama405b" / "carina_gb200_ngpu64"
    d.mkdir(parents=True)
    _mllog(d / "result_0.txt", [9.0, 8.0, 1.0, 2.0])
    _mllog(d / "result_1.txt", [9.0, 8.0, 3.0])
    return root


def test_mllog_parsing_drops_warmup(tmp_path):
    root = _fake_mlperf(tmp_path)
    runs = load_mlperf_runs(root)
    assert [(r.gpus, r.run, list(r.step_times_s)) for r in runs] == [
        (64, 0, [1.0, 2.0]),
        (64, 1, [3.0]),
    ]
    assert runs[0].gradient_accumulation_steps == 4
    assert list(mlperf_step_times(root, drop_first=0)[64]) == [9.0, 8.0, 1.0, 2.0, 9.0, 8.0, 3.0]


def test_mllog_bad_json_names_file_and_line(tmp_path):
    d = tmp_path / "mlperf_llama405b" / "x_ngpu8"
    d.mkdir(parents=True)
    (d / "result_0.txt").write_text(':::MLLOG {"key": \n')
    with pytest.raises(ValueError, match=r"result_0\.txt:1: bad MLLOG JSON"):
        load_mlperf_runs(tmp_path)


def test_mllog_non_positive_step_time(tmp_path):
    d = tmp_path / "mlperf_llama405b" / "x_ngpu8"
    d.mkdir(parents=True)
    _mllog(d / "result_0.txt", [1.0, -2.0])
    with pytest.raises(ValueError, match="train_step_time"):
        load_mlperf_runs(tmp_path)


def test_no_logs(tmp_path):
    (tmp_path / "mlperf_llama405b").mkdir()
    with pytest.raises(FileNotFoundError, match="result_"):
        load_mlperf_runs(tmp_path)


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="drop_first"):
        load_mlperf_runs(tmp_path, drop_first=-1)
    with pytest.raises(ValueError, match="unknown dataset"):
        load_gpu_runs("mnist", tmp_path)
    with pytest.raises(ValueError, match="confidence"):
        spatial_stats(confidence=1.5)
    with pytest.raises(ValueError, match="n_resamples"):
        spatial_stats(n_resamples=3)
    with pytest.raises(ValueError, match="threshold"):
        step_outlier_stats(tmp_path, threshold=0.9)


def test_synthetic_gpu_csv(tmp_path):
    d = tmp_path / "gpu_variability"
    d.mkdir()
    rows = ["uuid,perf"] + [f"g{i},{1000 + i}" for i in range(20)] + ["g0,1000", "g1,bad"]
    (d / "sgemm-longhorn-agg.csv").write_text("\n".join(rows) + "\n")
    runs = load_gpu_runs("sgemm-longhorn", tmp_path)
    assert len(runs) == 20 and list(runs["g0"]) == [1.0, 1.0]  # ms -> s; bad cell skipped
    s = spatial_stats("sgemm-longhorn", tmp_path, n_resamples=50)
    assert s.n_gpus == 20 and s.cv > 0


def test_csv_without_expected_columns(tmp_path):
    d = tmp_path / "gpu_variability"
    d.mkdir()
    (d / "sgemm-longhorn-agg.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="expected columns"):
        load_gpu_runs("sgemm-longhorn", tmp_path)


def test_data_dir_resolution(tmp_path, monkeypatch):
    assert resolve_data_dir(tmp_path) == tmp_path.resolve()
    monkeypatch.setenv("PRISM_DATA", str(tmp_path))
    assert resolve_data_dir() == tmp_path.resolve()
    monkeypatch.setenv("PRISM_DATA", str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match=r"PRISM_DATA"):
        resolve_data_dir()
    with pytest.raises(FileNotFoundError, match="path argument"):
        resolve_data_dir(tmp_path / "absent")
    monkeypatch.delenv("PRISM_DATA")
    monkeypatch.chdir(tmp_path)  # the default is relative to the working directory
    with pytest.raises(FileNotFoundError, match="current directory"):
        resolve_data_dir()
