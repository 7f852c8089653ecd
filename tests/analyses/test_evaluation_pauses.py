"""Evaluation pauses and the slow step after them (``[training.evaluation]``) in run time."""

from __future__ import annotations

import pytest

from prism_analytic.analyses.interruptions import Interruptions
from prism_analytic.analyses.runtime import run_time
from prism_analytic.cli import main
from prism_analytic.workload.config import ConfigError, EvaluationConfig
from prism_analytic.workload.jobs import merge_config
from prism_analytic.workload.presets import preset_job

# MLPerf GB200 at 512 GPUs (shared/data/mlperf_llama405b): every 52 steps, ~46 s, the first
# step after the run's first pause +0.98 s, after later pauses +0.11 s
MLPERF_512 = {"interval_steps": 52, "pause_s": 46.0, "first_step_extra_s": 0.11}


@pytest.fixture(scope="module")
def jobs():
    base = preset_job("llama3-8b", 64)
    ev = {**MLPERF_512, "first_pause_extra_s": 0.98}
    return base, merge_config(base, {"training": {"evaluation": ev}})


def test_hand_count():
    ev = EvaluationConfig(**MLPERF_512, first_pause_extra_s=0.98)
    # 1,000 steps: pauses after 52, ..., 988 (19); each followed by a step
    assert ev.pauses(1000) == 19
    assert ev.time_s(1000) == pytest.approx(19 * 46.0 + 0.98 + 18 * 0.11)
    # a run that ends on a pause: its slow step never comes
    assert ev.time_s(52) == pytest.approx(46.0)
    assert ev.time_s(51) == 0.0 and EvaluationConfig().time_s(10**6) == 0.0


def test_run_time_shifts_by_the_pauses(jobs):
    base, with_ev = jobs
    steps = 1000
    extra = 19 * 46.0 + 0.98 + 18 * 0.11
    a, b = run_time(base, steps), run_time(with_ev, steps)
    assert a.work["evaluations"] == 0 and b.work["evaluations"] == 19
    assert b.work["evaluation_s"] == pytest.approx(extra)
    assert b.mean() - a.mean() == pytest.approx(extra, rel=1e-9)
    for q in (0.5, 0.99):
        assert b.quantile(q) - a.quantile(q) == pytest.approx(extra, rel=1e-9)
    # the steps alone do not move; with interruptions the whole law moves by the same time
    assert b.work["mean_s"] == a.work["mean_s"]
    intr = Interruptions(failure_rate=1e-4)
    ai, bi = run_time(base, steps, interruptions=intr), run_time(with_ev, steps, interruptions=intr)
    assert bi.quantile(0.5) - ai.quantile(0.5) == pytest.approx(extra, rel=1e-9)
    assert "evaluations: 19 pauses" in b.summary()


@pytest.mark.parametrize(
    ("ev", "key"),
    [
        ({"pause_s": 46.0}, "training.evaluation.interval_steps"),
        ({"interval_steps": -1}, "training.evaluation.interval_steps"),
        ({"interval_steps": 52, "pause_s": -1.0}, "training.evaluation.pause_s"),
        (
            {"interval_steps": 52, "first_step_extra_s": "x"},
            "training.evaluation.first_step_extra_s",
        ),
        ({"interval_steps": 52.5}, "training.evaluation.interval_steps"),
        ({"every": 52}, "training.evaluation.every"),
    ],
)
def test_bad_values_name_the_key(ev, key):
    with pytest.raises(ConfigError) as err:
        merge_config(preset_job("llama3-8b", 64), {"training": {"evaluation": ev}})
    assert err.value.key == key


def test_cli_runtime_reports_evaluations(tmp_path, capsys):
    cfg = tmp_path / "job.toml"
    cfg.write_text(
        '[job]\npreset = "llama3-8b"\ngpus = 64\n\n[training.evaluation]\n'
        "interval_steps = 52\npause_s = 46.0\nfirst_step_extra_s = 0.11\n"
    )
    assert main(["runtime", "--config", str(cfg), "--steps", "520", "--no-failures"]) == 0
    assert "evaluations: 10 pauses" in capsys.readouterr().out
