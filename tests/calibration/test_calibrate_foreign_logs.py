"""``prism calibrate`` on step logs of jobs that are not in ``../shared/data`` (issue #10).

The logs are synthetic (``tests/_foreign_logs.py``): an A100 BF16 Llama 3 8B FSDP job at
16 / 64 / 256 GPUs with its own microbatch count, step times drawn from the model itself at a
known GEMM efficiency, MLLOG files whose ``metadata.step`` counts steps (not samples), a
rank prefix, evaluation pauses with a slow next step, one run per size and few steps.
Calibrating at the smallest size must recover the efficiency and predict the others; logs
that do not describe the given job, or carry no per-step time, must be refused by name.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from _foreign_logs import draw_steps, write_csv, write_json, write_mllog
from scipy import stats

from prism_analytic.calibration import (
    CalibrationError,
    PredictedLaw,
    StepLogError,
    calibrate_to_logs,
    check_against_logs,
    predicted_law,
    read_step_log,
)
from prism_analytic.calibration.log_job import check_logs_match_job
from prism_analytic.cli import main
from prism_analytic.workload.jobs import load_config, merge_config

TRUE_GEMM = 0.58  # the A100 preset's default is different: the fit has something to find
JOB_TOML = """
[job]
name = "a100-8b"
preset = "llama3-8b"
hardware = "a100-sxm-80gb"
gpus = {gpus}

[parallelism]
microbatches = 4
micro_batch_size = 1

[training]
precision = "bf16"
"""


def _job_file(tmp_path, gpus: int):
    path = tmp_path / f"a100_8b_{gpus}.toml"
    path.write_text(JOB_TOML.format(gpus=gpus))
    return path


def _truth(path) -> tuple[PredictedLaw, PredictedLaw]:
    """The job's law at the true efficiency, and its within-run law (allocation fixed)."""
    job = merge_config(load_config(path), {"hardware": {"efficiency": {"gemm": TRUE_GEMM}}})
    quiet = {"variability": {"spatial": {"cv": 0.0, "slow_fraction": 0.0}}}
    return predicted_law(job), predicted_law(merge_config(job, quiet))


def _model_log(tmp_path, gpus: int, n: int, seed: int, **kw):
    """One run of ``n`` steps from the model itself (one allocation), plus one 1.8x stall."""
    law, within = _truth(_job_file(tmp_path, gpus))
    t = within.sample(n, np.random.default_rng(seed)) * law.p50_s / within.p50_s
    t[n // 2 + 1] *= 1.8
    path = tmp_path / f"result_{gpus}.txt"
    return write_mllog(path, t, **kw), law


@pytest.fixture(scope="module")
def foreign(tmp_path_factory):
    """Logs at 16 (calibration), 64 and 256 GPUs and the true median at each size."""
    tmp = tmp_path_factory.mktemp("foreign")
    cases = {}
    for gpus, n, every, counts in ((16, 40, 16, "steps"), (64, 60, None, "samples"),
                                   (256, 80, 20, "steps")):  # fmt: skip
        path, law = _model_log(
            tmp,
            gpus,
            n,
            seed=gpus,
            global_batch_size=4 * gpus,
            gradient_accumulation_steps=4,
            max_sequence_length=8192,
            platform=f"{gpus // 8}xNVIDIA A100-SXM4-80GB",
            eval_every=every,
            pause_factor=1.4,
            step_counts=counts,
            prefix="0: " if gpus == 256 else "",
        )
        cases[gpus] = (path, law.p50_s)
    return tmp, cases


def test_calibrate_smallest_predict_others_end_to_end(foreign, capsys):
    """The documented commands: calibrate at 16 GPUs, predict and --check at 64 and 256."""
    tmp, cases = foreign
    fit = tmp / "fit.toml"
    job16 = tmp / "a100_8b_16.toml"
    assert main(["calibrate", "--config", str(job16), "--steps", str(cases[16][0]),
                 "--bootstrap", "300", "--out", str(fit), "--json"]) == 0  # fmt: skip
    res = json.loads(capsys.readouterr().out)
    gemm = next(p for p in res["parameters"] if p["key"] == "hardware.efficiency.gemm")
    lo, hi = gemm["interval"]
    # the efficiency the logs were drawn at; the interval is the median's, mapped
    assert gemm["value"] == pytest.approx(TRUE_GEMM, rel=0.01)
    assert lo <= TRUE_GEMM * 1.005 and hi >= TRUE_GEMM * 0.995
    # the slow step after each evaluation pause (1.4x) is not fitted as a stall: only the
    # one real stall is
    stalls = next(p for p in res["parameters"] if p["key"] == "variability.hiccups.probability")
    assert stalls["value"] * res["target"]["steps"] == pytest.approx(1.0)
    assert res["target"]["steps_after_eval_pause_left_out"] == 2
    for gpus in (64, 256):
        path, true_p50 = cases[gpus]
        job = tmp / f"a100_8b_{gpus}.toml"
        assert main(["predict", "--config", str(job), "--config", str(fit), "--json",
                     "--no-verify"]) == 0  # fmt: skip
        pred = json.loads(capsys.readouterr().out)
        assert pred["quantiles"]["0.5"]["estimate_s"] == pytest.approx(true_p50, rel=0.01)
        assert main(["calibrate", "--config", str(job), "--overlay", str(fit), "--steps",
                     str(path), "--check", "--json"]) == 0  # fmt: skip
        chk = json.loads(capsys.readouterr().out)
        assert abs(chk["median_rel_error"]) < 0.01, (gpus, chk["median_rel_error"])


def test_wrong_job_for_the_logs_is_refused_by_name(foreign):
    tmp, cases = foreign
    logs = [read_step_log(cases[16][0])]
    job = load_config(tmp / "a100_8b_16.toml")
    check_logs_match_job(job, logs)  # the right job passes
    bad = {
        "parallelism.microbatches": merge_config(job, {"parallelism": {"microbatches": 8}}),
        "model.seq_len": merge_config(job, {"model": {"seq_len": 4096}}),
    }
    for key, wrong in bad.items():
        with pytest.raises(CalibrationError, match=key.replace(".", r"\.")):
            calibrate_to_logs(wrong, logs)
        with pytest.raises(CalibrationError, match=key.replace(".", r"\.")):
            check_against_logs(wrong, logs)
    # the 64-GPU job given the 16-GPU log: the global batch (4 x 16) says it is not this job
    with pytest.raises(CalibrationError, match="global_batch_size = 64 .* 256 sequences"):
        check_logs_match_job(load_config(tmp / "a100_8b_64.toml"), logs)


def test_stated_gpu_count_and_token_batch(tmp_path):
    job = load_config(_job_file(tmp_path, 16))
    t = draw_steps(9.0, 30, seed=1)
    ok = write_json(tmp_path / "ok.json", t, {"world_size": 16, "global_batch_size": 64 * 8192})
    check_logs_match_job(job, [read_step_log(ok)])  # a batch stated in tokens is accepted
    bad = write_json(tmp_path / "bad.json", t, {"world_size": 32})
    with pytest.raises(CalibrationError, match="world_size = 32 but the job has 16 GPUs"):
        check_logs_match_job(job, [read_step_log(bad)])
    odd = write_json(tmp_path / "odd.json", t, {"platform": "8xA100", "gpus": "n/a"})
    check_logs_match_job(job, [read_step_log(odd)])  # nothing numeric stated: nothing assumed


def test_format_variations_read_the_same_steps(tmp_path):
    t = draw_steps(3.0, 30, seed=2)
    a = write_mllog(tmp_path / "a.txt", t, global_batch_size=64, step_counts="samples")
    b = write_mllog(tmp_path / "b.txt", t, global_batch_size=64, step_counts="steps", prefix="3: ")
    c = write_csv(tmp_path / "c.csv", t)
    d = write_json(tmp_path / "d.json", t)
    runs = [read_step_log(p) for p in (a, b, c, d)]
    for r in runs[1:]:
        np.testing.assert_allclose(r.times_s, runs[0].times_s, rtol=1e-6)  # CSV: 6 decimals
    assert runs[0].meta["global_batch_size"] == 64


def test_throughput_only_mllog_is_named(tmp_path):
    t = draw_steps(3.0, 30, seed=3)
    p = write_mllog(tmp_path / "tput.txt", t, global_batch_size=64, per_step_time=False)
    with pytest.raises(StepLogError, match="only 'throughput'.*train_step_time"):
        read_step_log(p)


def _stub_law(median: float) -> PredictedLaw:
    """A lognormal law (sd 0.2%) with the given median: a fast stand-in for the engine."""

    class _Law:
        def quantile(self, q):
            return median * np.exp(0.002 * np.asarray(stats.norm.ppf(q)))

        def sf(self, x):
            return stats.norm.sf(np.log(np.asarray(x) / median) / 0.002)

    q = _Law().quantile([0.5, 0.9, 0.99])
    return PredictedLaw(median, q[0], q[1], q[2], 0.002 * median, result=_Law())


def test_pause_steps_are_not_stalls_and_one_stall_has_a_real_interval(tmp_path):
    """Slow steps after evaluation pauses are not stalls; a single stall's size interval is
    the exact exponential-mean interval, not a zero-width observed range."""
    job = load_config(_job_file(tmp_path, 16))
    t = draw_steps(9.0, 60, jitter=0.002, seed=4)
    paused = write_mllog(tmp_path / "p.txt", t, eval_every=10, pause_factor=1.5)

    def evaluate(j) -> PredictedLaw:  # median 9 s / (efficiency / 0.5)
        return _stub_law(9.0 * 0.5 / j.hardware.efficiency.for_precision("bf16"))

    res = calibrate_to_logs(job, [read_step_log(paused)], evaluate=evaluate, n_resamples=200)
    rate = next(p for p in res.parameters if p.key == "variability.hiccups.probability")
    assert not rate.identified  # 5 pause steps at 1.5x, no stall
    assert res.goodness["steps_after_eval_pause"] == 5
    t1 = t.copy()
    t1[33] = 9.0 * 2.0  # one stall (step 33 is not after a pause)
    one = write_mllog(tmp_path / "one.txt", t1, eval_every=10, pause_factor=1.5)
    res = calibrate_to_logs(job, [read_step_log(one)], evaluate=evaluate, n_resamples=200)
    size = next(p for p in res.parameters if p.key == "variability.hiccups.size_s")
    lo, hi = size.interval
    assert lo < size.value < hi and hi / lo > 30  # chi-square with 2 degrees of freedom


def test_interleaved_ranks_are_refused(tmp_path):
    t = draw_steps(3.0, 30, seed=5)
    a = write_mllog(tmp_path / "a.txt", t, prefix="0: ").read_text().splitlines()
    b = write_mllog(tmp_path / "b.txt", t, prefix="8: ").read_text().splitlines()
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("\n".join(x for pair in zip(a, b, strict=True) for x in pair))
    with pytest.raises(StepLogError, match="several ranks are interleaved.*grep '\\^0: '"):
        read_step_log(mixed)
    assert read_step_log(tmp_path / "a.txt").n == 28  # one rank's file reads as before


def test_milliseconds_column_and_a_unit_slip(tmp_path):
    t = draw_steps(9.0, 30, jitter=0.002, seed=6)
    ms = write_csv(tmp_path / "ms.csv", 1000 * t, column="step_time_ms")
    np.testing.assert_allclose(read_step_log(ms).times_s, t[2:], rtol=1e-6)
    slip = write_csv(tmp_path / "slip.csv", 1000 * t, column="step_time")  # ms read as s
    job = load_config(_job_file(tmp_path, 16))

    def evaluate(j) -> PredictedLaw:  # at efficiency 0.001 the median is 4,500 s
        return _stub_law(9.0 * 0.5 / j.hardware.efficiency.for_precision("bf16"))

    with pytest.raises(CalibrationError, match="in seconds .* milliseconds"):
        calibrate_to_logs(job, [read_step_log(slip)], evaluate=evaluate, n_resamples=200)


def test_overlay_of_another_precision_is_refused_in_check(tmp_path, capsys):
    """A BF16 fit merged into an FP8 job changes nothing: --check says so instead."""
    job = _job_file(tmp_path, 16)
    fp8 = tmp_path / "fp8.toml"
    text = job.read_text().replace('precision = "bf16"', 'precision = "fp8"')
    fp8.write_text(text.replace("a100-sxm-80gb", "h100-sxm-80gb"))  # an A100 has no FP8
    fit = tmp_path / "fit.toml"
    fit.write_text("[hardware.efficiency]\ngemm = 0.6\n")
    log = write_mllog(tmp_path / "r.txt", draw_steps(9.0, 30, seed=7))
    args = ["calibrate", "--overlay", str(fit), "--steps", str(log), "--check", "--json"]
    assert main(["calibrate", "--config", str(fp8), *args[1:]]) == 2
    assert "hardware.efficiency.gemm_fp8: the calibration would change nothing" in (
        capsys.readouterr().err
    )
    from prism_analytic.calibration.overlay_job import check_overlay_gemm

    check_overlay_gemm(merge_config(load_config(job), fit), [fit])  # BF16 job: it applies


def test_mass_beyond_the_grid_is_unbounded_not_nan():
    """A stall far beyond a narrow body can sit in the engine's top atom (quantile nan):
    the goodness of fit says the ratio is unbounded above instead of comparing with nan."""
    from prism_analytic.calibration.fit import _goodness

    class _Atom:  # 0.5% of the mass beyond the grid, like a 30 s stall on a 0.03 s-wide body
        def quantile(self, q):
            q = np.asarray(q, dtype=float)
            return np.where(q < 0.995, 10.0 * np.exp(0.002 * stats.norm.ppf(q / 0.995)), np.nan)

        def sf(self, x):
            return 0.005 + 0.995 * stats.norm.sf(np.log(np.asarray(x) / 10.0) / 0.002)

    law = PredictedLaw(10.3, 10.0, 10.03, np.inf, 1.0, result=_Atom())
    x = law.sample(2000, np.random.default_rng(0))
    assert not np.isnan(x).any() and np.mean(np.isinf(x)) == pytest.approx(0.005, abs=0.004)
    norm = np.exp(np.random.default_rng(1).normal(0, 0.002, 200))
    g = _goodness(law, norm, 200, seed=0)
    lo, hi = g["predicted_p99_over_p50_sampling_95"]
    assert np.isfinite(lo) and hi == np.inf and lo <= g["measured_p99_over_p50"] <= hi
    assert g["predicted_mass_beyond_grid"] == pytest.approx(0.005, abs=0.002)
