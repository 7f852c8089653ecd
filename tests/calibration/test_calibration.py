"""prism calibrate: log readers, bad logs, the fit on the predicted law, overlays."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from prism_analytic.calibration import (
    CalibrationError,
    PredictedLaw,
    StepLogError,
    calibrate_to_logs,
    pool_logs,
    read_step_log,
    solve_gemm_efficiency,
)
from prism_analytic.calibration.fit import garwood, poisson_interval
from prism_analytic.workload.jobs import merge_config
from prism_analytic.workload.presets import preset_job


class _Law:
    """A stand-in analytic result: lognormal steps of a given median and shape."""

    def __init__(self, median: float, sigma: float = 0.005) -> None:
        from scipy import stats

        self.d = stats.lognorm(sigma, scale=median)

    def quantile(self, q):
        return self.d.ppf(q)

    def sf(self, x):
        return self.d.sf(x)


def _stub(a: float = 10.0, b: float = 2.0):
    """Median step = a / gemm + b: a model with a known answer (no engine call)."""

    def evaluate(job) -> PredictedLaw:
        med = a / job.hardware.efficiency.for_precision(job.training.precision) + b
        law = _Law(med)
        q = law.quantile([0.5, 0.9, 0.99])
        return PredictedLaw(med * 1.0000125, q[0], q[1], q[2], 0.005 * med, result=law)

    return evaluate


def _write(tmp_path, name: str, text: str):
    p = tmp_path / name
    p.write_text(text)
    return p


def _mllog(times, extra: str = "") -> str:
    lines = [':::MLLOG {"key": "global_batch_size", "value": 896}']
    for i, t in enumerate(times):
        if i == 30:
            lines.append(':::MLLOG {"key": "eval_stop", "value": null}')
        lines.append(f':::MLLOG {{"key": "tracked_stats", "value": {{"train_step_time": {t}}}}}')
    return "\n".join(lines) + extra + "\n"


def test_readers_agree_across_formats(tmp_path):
    times = list(np.linspace(1.0, 1.1, 40))
    a = read_step_log(_write(tmp_path, "a.txt", _mllog(times)), drop_first=0)
    b = read_step_log(
        _write(
            tmp_path,
            "b.csv",
            "step,step_time_s\n" + "".join(f"{i},{t}\n" for i, t in enumerate(times)),
        ),
        drop_first=0,
    )
    c = read_step_log(_write(tmp_path, "c.json", json.dumps({"step_times_s": times})), drop_first=0)
    d = read_step_log(
        _write(
            tmp_path,
            "d.json",
            json.dumps({"step_t_base": {str(i): t for i, t in enumerate(times)}}),
        )
    )
    for lg in (a, b, c, d):
        np.testing.assert_allclose(lg.times_s, times)
    assert a.meta["global_batch_size"] == 896 and a.after_pause[30] and a.after_pause.sum() == 1


@pytest.mark.parametrize(
    "name, text, match",
    [
        ("none.txt", 'hello\n:::MLLOG {"key": "run_start", "value": null}\n', "no step records"),
        ("trunc.json", '{"step_times_s": [1.0, 2.0', "truncated or invalid JSON"),
        ("trunc.txt", ':::MLLOG {"key": "tracked_stats", "value": {"train_step', "truncated"),
        ("neg.csv", "step_time_s\n1.0\n-2\n", "must be > 0"),
        ("cols.csv", "a,b\n1,2\n", "no step-time column"),
        ("obj.json", '{"foo": 1}', "no step records"),
    ],
)
def test_bad_logs_get_clear_errors(tmp_path, name, text, match):
    with pytest.raises(StepLogError, match=match):
        read_step_log(_write(tmp_path, name, text))


def test_missing_file_mixed_jobs_and_too_few_steps(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_step_log(tmp_path / "nope.txt")
    a = read_step_log(_write(tmp_path, "a.txt", _mllog([1.0] * 30)))
    b = read_step_log(_write(tmp_path, "b.txt", _mllog([1.0] * 30).replace("896", "768")))
    with pytest.raises(StepLogError, match="mixed jobs"):
        pool_logs([a, b])
    short = read_step_log(_write(tmp_path, "s.csv", "step_time_s\n" + "1.0\n" * 10))
    with pytest.raises(StepLogError, match="too few steps"):
        pool_logs([short])


def test_secant_finds_the_known_efficiency():
    job = preset_job("llama3-8b", 8)
    # median = 10 / eff + 2 = 22 at eff 0.5
    eff, law = solve_gemm_efficiency(job, 22.0, "p50", evaluate=_stub())
    assert eff == pytest.approx(0.5, rel=1e-3)
    with pytest.raises(CalibrationError, match="unreachable"):
        solve_gemm_efficiency(job, 5.0, "p50", evaluate=_stub())


def test_fit_to_logs_matches_the_predicted_median_with_intervals(tmp_path):
    rng = np.random.default_rng(3)
    runs = []
    for r in range(3):
        t = 22.0 * rng.lognormal(0, 0.004, 300)
        t[[50, 150]] *= 1.3  # two stalls per run
        runs.append(_write(tmp_path, f"r{r}.csv", "step_time_s\n" + "\n".join(map(str, t))))
    logs = [read_step_log(p, drop_first=0) for p in runs]
    job = preset_job("llama3-8b", 8)
    res = calibrate_to_logs(job, logs, n_resamples=300, check_body=False, evaluate=_stub())
    p = {x.key: x for x in res.parameters}
    gemm = p["hardware.efficiency.gemm"]
    med = float(np.median(np.concatenate([lg.times_s for lg in logs])))
    assert 10 / gemm.value + 2 == pytest.approx(med, rel=1e-3)
    assert gemm.interval[0] < gemm.value < gemm.interval[1]
    prob = p["variability.hiccups.probability"]
    assert prob.value == pytest.approx(6 / 900) and prob.interval[0] < 6 / 900 < prob.interval[1]
    assert p["variability.hiccups.size_s"].value == pytest.approx(0.3 * 22, rel=0.05)
    assert not p["training.step_overhead_s"].identified
    # the overlay is what predict --config takes, and only identified keys appear
    over = tmp_path / "fit.toml"
    over.write_text(res.to_toml())
    merged = merge_config(job, over)
    assert merged.hardware.efficiency.gemm == pytest.approx(gemm.value)
    assert "step_overhead_s" not in over.read_text().split("[")[-1]


def test_no_stall_is_not_identified(tmp_path):
    t = 5.0 + 0.01 * np.sin(np.arange(200))
    lg = read_step_log(_write(tmp_path, "q.csv", "step_time_s\n" + "\n".join(map(str, t))))
    res = calibrate_to_logs(
        preset_job("llama3-8b", 8),
        [lg],
        n_resamples=200,
        check_body=False,
        evaluate=_stub(a=1.0, b=2.0),
    )
    p = {x.key: x for x in res.parameters}
    assert not p["variability.hiccups.probability"].identified
    assert p["variability.hiccups.probability"].value is None
    assert "hiccups" not in res.overlay().get("variability", {})


def test_no_stall_in_enough_steps_refutes_the_jobs_stall_rate(tmp_path):
    """2,000 steps without a stall: rate <= 0.0018 (95%), below the job's 0.0039: 0 written."""
    t = 5.0 + 0.01 * np.sin(np.arange(2000))
    lg = read_step_log(_write(tmp_path, "q.csv", "step_time_s\n" + "\n".join(map(str, t))))
    job = preset_job("llama3-8b", 8)
    assert job.variability.hiccups.probability > 3.689 / 2000  # the default, on other logs
    res = calibrate_to_logs(
        job, [lg], n_resamples=200, check_body=False, evaluate=_stub(a=1.0, b=2.0)
    )
    p = {x.key: x for x in res.parameters}
    rate = p["variability.hiccups.probability"]
    assert rate.identified and rate.value == 0.0
    assert rate.interval[1] == pytest.approx(3.689 / 2000, rel=1e-3)
    assert res.overlay()["variability"]["hiccups"] == {"probability": 0.0}
    assert not p["variability.hiccups.size_s"].identified


def test_poisson_intervals_against_closed_forms():
    lo, hi = garwood(0)
    assert lo == 0 and hi == pytest.approx(-math.log(0.025), rel=1e-9)  # 3.689
    assert poisson_interval(0.0) == (0, 0)
    a, b = poisson_interval(10.0)
    assert (a, b) == (4, 17)


def test_cli_calibrate_errors_and_mfu(tmp_path, capsys):
    from prism_analytic.cli import main

    assert main(["calibrate", "--preset", "llama3-8b", "--gpus", "8"]) == 2
    assert "exactly one target" in capsys.readouterr().err
    assert (
        main(["calibrate", "--preset", "llama3-8b", "--gpus", "8", "--mfu", "0.4", "--check"]) == 2
    )
    bad = _write(tmp_path, "bad.json", "[1.0, 2.0")
    assert main(["calibrate", "--preset", "llama3-8b", "--gpus", "8", "--steps", str(bad)]) == 2
    assert "truncated" in capsys.readouterr().err


def test_fp8_job_fits_its_own_efficiency_key():
    job = merge_config(
        preset_job("llama3-8b", 8), {"training": {"precision": "fp8", "param_gather_bytes": 1}}
    )
    eff, _ = solve_gemm_efficiency(job, 22.0, "p50", evaluate=_stub())
    from prism_analytic.calibration.fit import gemm_key

    assert gemm_key(job) == "gemm_fp8" and eff == pytest.approx(0.5, rel=1e-3)
    tuned = merge_config(job, {"hardware": {"efficiency": {"gemm_fp8": eff}}})
    # the BF16 fraction is untouched, so a BF16 job is not changed by an FP8 calibration
    assert tuned.hardware.efficiency.gemm == job.hardware.efficiency.gemm


def test_precisions_run_at_their_peaks():
    from prism_analytic.workload.config import ConfigError
    from prism_analytic.workload.mean_model import op_means

    base = preset_job("llama3-8b", 8, hardware="gb200-nvl72")
    gemm = {}
    for prec in ("bf16", "fp8", "mxfp8", "nvfp4"):
        om = op_means(merge_config(base, {"training": {"precision": prec}}))
        gemm[prec] = om.compute_by_class("fwd")["gemm"]
        attn = om.compute_by_class("fwd")["attention"]
        assert attn == pytest.approx(op_means(base).compute_by_class("fwd")["attention"])
    # compute-bound GEMMs scale with the peak (memory-bound ones do not): ratios at most 2x
    assert gemm["fp8"] == gemm["mxfp8"] < gemm["bf16"] and gemm["nvfp4"] < gemm["fp8"]
    with pytest.raises(ConfigError, match="peak_flops.fp4"):
        merge_config(preset_job("llama3-8b", 8), {"training": {"precision": "nvfp4"}})


def test_cli_end_to_end_overlay_reproduces_the_median(tmp_path, capsys):
    from prism_analytic.calibration import predicted_law
    from prism_analytic.cli import main

    job = preset_job("llama3-8b", 8)
    target = 1.1 * predicted_law(job).p50_s
    rng = np.random.default_rng(5)
    t = target * rng.lognormal(0, 0.003, 120)
    log = _write(tmp_path, "steps.csv", "step_time_s\n" + "\n".join(map(str, t)))
    out = tmp_path / "fit.toml"
    argv = ["calibrate", "--preset", "llama3-8b", "--gpus", "8", "--steps", str(log)]
    assert main([*argv, "--out", str(out), "--bootstrap", "200", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["parameters"][0]["key"] == "hardware.efficiency.gemm"
    assert (
        main(["predict", "--preset", "llama3-8b", "--gpus", "8", "--config", str(out), "--json"])
        == 0
    )
    pred = json.loads(capsys.readouterr().out)
    assert pred["p50_s"] == pytest.approx(np.median(t[2:]), rel=1e-3)


def test_jitter_is_fitted_to_the_within_run_spread(tmp_path):
    from prism_analytic.calibration import predicted_law

    quiet = {"spatial": {"cv": 0.0, "slow_fraction": 0.0}, "hiccups": {"probability": 0.0}}
    job = merge_config(preset_job("llama3-8b", 8), {"variability": quiet})
    truth = merge_config(job, {"variability": {"temporal": {"step_jitter_s": 0.02}}})
    law = predicted_law(truth)
    rng = np.random.default_rng(4)
    t = np.asarray(law.result.quantile(rng.uniform(0.001, 0.999, 1500)))  # the true law
    log = _write(tmp_path, "s.csv", "step_time_s\n" + "\n".join(map(str, t)))
    res = calibrate_to_logs(job, [read_step_log(log, drop_first=0)], n_resamples=300)
    p = {x.key: x for x in res.parameters}["variability.temporal.step_jitter_s"]
    assert p.identified and p.interval[0] < 0.02 < p.interval[1]
    assert p.value == pytest.approx(0.02, rel=0.25)


def test_two_sizes_identify_the_fixed_cost(tmp_path):
    from prism_analytic.calibration import calibrate_sizes

    def stub(job) -> PredictedLaw:
        # median = work / (gpus * eff) + fixed cost: GEMM part shrinks with size, cost does not
        eff = job.hardware.efficiency.for_precision(job.training.precision)
        med = 8000.0 / (job.gpus * eff) + job.training.step_overhead_s
        law = _Law(med)
        q = law.quantile([0.5, 0.9, 0.99])
        return PredictedLaw(med, q[0], q[1], q[2], 0.005 * med, result=law)

    rng = np.random.default_rng(6)
    cases = []
    for gpus in (8, 16, 32):
        truth = 8000.0 / (gpus * 0.5) + 0.7
        t = truth * rng.lognormal(0, 0.002, 300)
        p = _write(tmp_path, f"{gpus}.csv", "step_time_s\n" + "\n".join(map(str, t)))
        cases.append((preset_job("llama3-8b", gpus), [read_step_log(p, drop_first=0)]))
    res = calibrate_sizes(cases, n_resamples=200, evaluate=stub)
    p = {x.key: x for x in res.parameters}
    eff, cost = p["hardware.efficiency.gemm"], p["training.step_overhead_s"]
    assert eff.interval[0] < 0.5 < eff.interval[1] and eff.value == pytest.approx(0.5, rel=0.01)
    assert cost.interval[0] < 0.7 < cost.interval[1] and cost.value == pytest.approx(0.7, rel=0.1)
    with pytest.raises(CalibrationError, match="at least 2"):
        calibrate_sizes(cases[:1], evaluate=stub)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_interval_contains_its_estimate_at_the_fewest_resamples(tmp_path, seed):
    """At the smallest resample count allowed (200), on a lumpy log (few distinct values,
    a handful of stalls), every reported interval still holds its own estimate."""
    rng = np.random.default_rng(seed)
    t = np.round(20.0 + 0.08 * rng.standard_normal(120), 1)
    t[rng.choice(t.size, 4, replace=False)] += 4.0
    lg = read_step_log(_write(tmp_path, "lumpy.csv", "step_time_s\n" + "\n".join(map(str, t))))
    res = calibrate_to_logs(
        preset_job("llama3-8b", 8), [lg], n_resamples=200, check_body=False, evaluate=_stub()
    )
    lo, hi = res.target["median_ci_s"]
    assert lo <= res.target["median_s"] <= hi
    for p in res.parameters:
        if p.value is not None and p.interval is not None:
            assert p.interval[0] <= p.value <= p.interval[1], p.key
