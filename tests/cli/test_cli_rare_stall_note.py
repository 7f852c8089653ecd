"""`prism predict` says which high quantiles the rare whole-step stall sets."""

from __future__ import annotations

from prism_analytic.cli import main
from prism_analytic.job import rare_stall_note
from prism_analytic.workload.jobs import build_job, merge_config
from prism_analytic.workload.prediction import predict_job


def _quiet(job):
    return merge_config(job, {"variability": {"hiccups": {"probability": 0.0}}})


def test_note_names_the_level_the_stall_lifts():
    job = build_job("llama3-8b", 64, None)
    note = rare_stall_note(job)
    p = job.variability.hiccups.probability
    assert note is not None and f"p{100 * (1 - p):.4g}" in note
    assert rare_stall_note(_quiet(job)) is None


def test_the_note_is_true_p999_moves_by_the_stall_p99_does_not():
    job = build_job("llama3-8b", 64, None)
    size = job.variability.hiccups.size_s
    with_stall, _, _ = predict_job(job, verify=False)
    without, _, _ = predict_job(_quiet(job), verify=False)
    assert abs(with_stall.quantile(0.99) - without.quantile(0.99)) < 0.1 * size
    assert with_stall.quantile(0.999) - without.quantile(0.999) > 0.5 * size


def test_cli_prints_the_note(capsys):
    assert main(["predict", "--preset", "llama3-8b", "--gpus", "64", "--no-verify"]) == 0
    assert "rare whole-step stall" in capsys.readouterr().out
