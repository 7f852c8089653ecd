"""A calibration fitted at one size predicts another (the transfer error table, issue #24).

Synthetic logs are drawn from the model itself at two sizes of one NVFP4 job (16 GPUs with
4 microbatches per rank, 32 with 2: the same global batch, a step about half as long) at a
known GEMM efficiency, a jitter of 1% of the step and rare stalls of 30% of the step.
Calibrated at 16 GPUs, the overlay must predict 32 GPUs within the acceptance rule
(:data:`~prism_analytic.calibration.transfer.TARGETS`). The same fit with its jitter carried
in seconds (what the overlay wrote before it became a fraction of the step) must miss the
p90/p50 there: the test can fail.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from _gb200_fp4_job import JOB_TOML, TRUE_EFF

from prism_analytic import Job
from prism_analytic.calibration import StepLog, calibrate_to_logs, predicted_law
from prism_analytic.calibration.result import CalibrationError
from prism_analytic.calibration.transfer import SizeCase, transfer_table, transfer_text
from prism_analytic.cli import main
from prism_analytic.workload.jobs import load_config, merge_config
from prism_analytic.workload.step_estimate import step_time

JITTER_REL = 0.01
STALL_PROB, STALL_REL = 0.01, 0.3
QUIET = {"variability": {"spatial": {"cv": 0.0, "slow_fraction": 0.0}}}


def _job_toml(gpus: int, microbatches: int) -> str:
    text = JOB_TOML.replace("gpus = 16", f"gpus = {gpus}")
    text = text.replace("microbatches = 4", f"microbatches = {microbatches}")
    # no persistent GPU spread: one allocation per run is then every run's law
    return text + "\n[variability.spatial]\ncv = 0.0\nslow_fraction = 0.0\n"


def _truth(job, stall_prob: float = STALL_PROB):
    """``job`` at the true efficiency, jitter and stalls (stall seconds from its own step)."""
    over = {"hardware": {"efficiency": {"gemm_fp4": TRUE_EFF}}}
    truth = merge_config(job, over)
    core = step_time(truth).step_s
    var = {
        "temporal": {"step_jitter_rel": JITTER_REL, "step_jitter_s": 0.0},
        "hiccups": {"probability": stall_prob, "size_s": STALL_REL * core},
    }
    return merge_config(truth, {"variability": var})


def _logs(
    job, seed: int, runs: int = 2, steps: int = 250, stall_prob: float = STALL_PROB
) -> list[StepLog]:
    law = predicted_law(_truth(job, stall_prob))
    rng = np.random.default_rng(seed)
    return [StepLog(f"synthetic-{job.gpus}-{r}", law.sample(steps, rng)) for r in range(runs)]


@pytest.fixture(scope="module")
def sizes(tmp_path_factory):
    """Job files, logs (as CSV too) and the calibration at 16 GPUs."""
    tmp = tmp_path_factory.mktemp("transfer")
    out = {}
    for gpus, mb, seed in ((16, 4, 1), (32, 2, 2)):
        path = tmp / f"job_{gpus}.toml"
        path.write_text(_job_toml(gpus, mb))
        job = load_config(path)
        logs = _logs(job, seed)
        csvs = []
        for i, lg in enumerate(logs):
            csv = tmp / f"steps_{gpus}_{i}.csv"
            csv.write_text("step_time_s\n" + "\n".join(repr(float(t)) for t in lg.times_s))
            csvs.append(csv)
        out[gpus] = (path, job, logs, csvs)
    fit = calibrate_to_logs(
        out[16][1], out[16][2], n_resamples=400, check_body=False, shape="within-run"
    )
    overlay = tmp / "fit.toml"
    overlay.write_text(fit.to_toml())
    return out, fit, overlay


def _table(sizes, overlay: dict) -> dict:
    out, _, _ = sizes
    cases = [SizeCase(merge_config(job, overlay), job, logs) for _, job, logs, _ in out.values()]
    return transfer_table(cases[0], cases[1:])


def test_overlay_fitted_at_one_size_transfers_to_another(sizes):
    out, fit, _ = sizes
    # the 32-GPU step is about half the 16-GPU one: seconds would not carry
    assert out[32][2][0].times_s.mean() < 0.7 * out[16][2][0].times_s.mean()
    table = _table(sizes, fit.overlay())
    ref, other = table["rows"]
    assert ref["in_sample"] and not other["in_sample"] and other["gpus"] == 32
    assert abs(other["median_error"]) <= 0.03
    assert abs(other["p90_over_p50_error"]) <= 0.01
    assert abs(other["median_error"]) <= abs(other["ratio_median_error"]) + 0.005
    assert other["passes"] and table["all_pass"]
    assert "32" in transfer_text(table) and "pass" in transfer_text(table)


def test_jitter_in_seconds_would_not_transfer(sizes):
    """The same fit with its jitter frozen in seconds widens the shorter step too much."""
    out, fit, _ = sizes
    overlay = fit.overlay()
    rel = overlay["variability"]["temporal"]["step_jitter_rel"]
    tuned16 = merge_config(out[16][1], overlay)
    seconds = rel * step_time(tuned16).step_s
    overlay["variability"]["temporal"] = {"step_jitter_s": seconds, "step_jitter_rel": 0.0}
    other = _table(sizes, overlay)["rows"][1]
    assert abs(other["p90_over_p50_error"]) > 0.01 and not other["passes"]


def test_check_prints_and_returns_the_transfer_table(sizes, capsys):
    out, _, overlay = sizes
    path16, _, _, csv16 = out[16]
    path32, _, _, csv32 = out[32]
    args = ["calibrate", "--check", "--config", str(path16), "--overlay", str(overlay)]
    args += ["--steps", *map(str, csv16), "--drop-first", "0"]
    args += ["--size", str(path32), *map(str, csv32), "--json"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    rows = report["transfer"]["rows"]
    assert [r["gpus"] for r in rows] == [16, 32] and rows[1]["passes"]
    # Job.check is what the command calls: the same table
    res = Job.from_args(None, None, path16, overlay).check(
        csv16, drop_first=0, sizes=[(path32, csv32)]
    )
    assert res.to_dict()["transfer"]["rows"][1]["median_error"] == rows[1]["median_error"]
    assert "ratio err" in res.summary()


def test_transfer_needs_an_overlay_and_another_size(sizes, tmp_path):
    out, _, overlay = sizes
    path16, job16, logs16, csv16 = out[16]
    with pytest.raises(ValueError, match="no overlay"):
        Job.from_args(None, None, path16).check(csv16, drop_first=0, sizes=[(path16, csv16)])
    with pytest.raises(ValueError, match=r"sizes\[0\]"):
        Job.from_args(None, None, path16, overlay).check(csv16, drop_first=0, sizes=[path16])
    case = SizeCase(job16, job16, logs16)
    with pytest.raises(CalibrationError, match="second size"):
        transfer_table(case, [])
    with pytest.raises(CalibrationError, match="repeat"):
        transfer_table(case, [case])


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--size", "job.toml", "log.csv"], "--size JOB LOG... is for --check"),
        (["--check", "--size", "job.toml"], "give a job file and at least one step log"),
    ],
)
def test_size_option_errors(extra, message, tmp_path, capsys):
    args = ["calibrate", "--preset", "llama3-8b", "--gpus", "8", "--steps", "x.csv", *extra]
    assert main(args) != 0
    assert message in capsys.readouterr().err


def test_stall_size_is_reported_relative_to_the_step(sizes):
    """The stall is also given as a fraction of the step, and that form is the one written."""
    out, fit, _ = sizes
    params = {p.key: p for p in fit.parameters}
    size_s, rel = params["variability.hiccups.size_s"], params["variability.hiccups.size_rel"]
    core = step_time(merge_config(out[16][1], fit.overlay())).step_s
    assert rel.value == pytest.approx(size_s.value / core)
    assert rel.written and not size_s.written
    hiccups = fit.overlay()["variability"]["hiccups"]
    assert set(hiccups) == {"probability", "size_rel", "size_s"} and hiccups["size_s"] == 0.0


def test_overlay_writes_the_relative_stall(sizes):
    """The stall size is written as a fraction of the step, the seconds set to 0."""
    from prism_analytic.calibration import fit as fit_module
    from prism_analytic.calibration.result import CalibrationResult, FittedParameter

    out, _, _ = sizes
    job = out[16][1]
    size = FittedParameter("variability.hiccups.size_s", 0.05, (0.04, 0.06), True, "test")
    params = fit_module._stall_relative([size], job)
    overlay = CalibrationResult("j", {}, params, {}, {}).overlay()["variability"]["hiccups"]
    assert overlay == {"size_rel": pytest.approx(0.05 / step_time(job).step_s), "size_s": 0.0}
    # the overlay merges (the two keys are exclusive in the config: size_s is 0)
    merged = merge_config(job, {"variability": {"hiccups": overlay}})
    assert merged.variability.hiccups.size_rel == overlay["size_rel"]


def test_an_overlay_in_seconds_is_named_with_the_key_to_refit(tmp_path):
    """Old overlays stay readable; the table says which of their keys do not scale."""
    from prism_analytic.calibration.transfer import seconds_notes

    old = tmp_path / "old_fit.toml"
    old.write_text("[variability.temporal]\nstep_jitter_s = 0.05\n")
    notes = seconds_notes([old, {"variability": {"temporal": {"step_jitter_rel": 0.004}}}])
    assert len(notes) == 1 and "step_jitter_s" in notes[0] and "refit" in notes[0]
    assert seconds_notes([{"variability": {"temporal": {"step_jitter_s": 0.0}}}]) == []
    table = {"calibration_gpus": 8, "ratio_factor": 1.0, "rows": [], "notes": notes}
    assert "note: " in transfer_text(table)


def test_frequent_stalls_transfer_as_a_fraction_of_the_step(tmp_path):
    """Stalls in 15% of steps (p90 lies among them): relative sizes carry, seconds do not."""
    out = {}
    for gpus, mb, seed in ((16, 4, 3), (32, 2, 4)):
        path = tmp_path / f"job_{gpus}.toml"
        path.write_text(_job_toml(gpus, mb))
        job = load_config(path)
        out[gpus] = (job, _logs(job, seed, stall_prob=0.15))
    fit = calibrate_to_logs(*out[16], n_resamples=400, check_body=False, shape="within-run")
    overlay = fit.overlay()
    assert overlay["variability"]["hiccups"]["size_rel"] == pytest.approx(STALL_REL, rel=0.1)

    def table(over):
        cases = [SizeCase(merge_config(j, over), j, logs) for j, logs in out.values()]
        return transfer_table(cases[0], cases[1:])["rows"][1]

    assert table(overlay)["passes"]
    core = step_time(merge_config(out[16][0], overlay)).step_s
    hiccups = overlay["variability"]["hiccups"]
    hiccups["size_s"], hiccups["size_rel"] = hiccups["size_rel"] * core, 0.0
    frozen = table(overlay)
    assert abs(frozen["p90_over_p50_error"]) > 0.01 and not frozen["passes"]


# --------------------------------------------------------------------------------------
# The public MLPerf logs (slow: a calibration and two predictions per size)
# --------------------------------------------------------------------------------------
#: Sizes exempt from the ratio-scaling bound, and why. Llama 3.1 8B on Tyche at 512 GPUs:
#: the uncalibrated model errs by about the same fraction at 8 and 512 GPUs (and the other
#: way at 72), so ratio scaling lands close by accident, while the GEMM efficiency fitted at 8
#: GPUs moves a 512-GPU step that is mostly not GEMMs; as the defaults moved during their fit
#: the calibration stood 0.1 to 1.1 points beyond ratio scaling there
#: (validation/results/calibration_transfer.md).
EXEMPT = {("Tyche GB200 llama31_8b (v5.1)", 512)}


@pytest.mark.slow
def test_mlperf_calibration_never_worse_than_ratio_scaling(shared_data, monkeypatch):
    """Calibrated at each system's smallest size: the median no worse than ratio scaling.

    Every other size of every multi-size system but the :data:`EXEMPT` ones: the calibrated
    median error at most 0.5 points above ratio scaling's. The 3% / 0.01 targets are
    measured, not asserted here (where the uncalibrated model misses a size or a slow mode
    appears only at the larger sizes, no fit at one size can know it):
    ``validation/results/calibration_transfer.md``.
    """
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validation"))
    import calibration_transfer as study

    monkeypatch.setattr(study, "DATA", shared_data)
    systems = study.multi_size_systems()
    assert len(systems) >= 5, f"multi-size systems found: {sorted(systems)}"
    checked = 0
    for name, sizes in systems.items():
        table = study.system_table(sizes)
        ref, *others = table["rows"]
        assert abs(ref["median_error"]) < 1e-3, name  # the fit itself
        for row in others:
            if (name, row["gpus"]) in EXEMPT:
                continue
            worse = abs(row["median_error"]) - abs(row["ratio_median_error"])
            assert worse <= 0.005, f"{name} at {row['gpus']} GPUs: {worse:+.2%}"
            checked += 1
    assert checked >= 7  # Carina 4, Tyche 405B 1, HiPerGator 1, Tyche 8B 1, Theia 8B 2
