"""Run time: analytic quantiles vs Monte Carlo of whole runs; interruptions vs simulation."""

import math

import numpy as np
import pytest

from prism_analytic.analyses.decompose import decompose
from prism_analytic.analyses.interruptions import (
    LLAMA3_RATE_PER_GPU_HOUR,
    Interruptions,
    expected_interruptions,
    expected_wall,
    optimal_interval,
    young_interval,
)
from prism_analytic.analyses.runtime import run_time, simulate_runs, steps_for_tokens
from prism_analytic.cli import main
from prism_analytic.workload.builder import build_step_graph
from prism_analytic.workload.presets import preset_job


@pytest.fixture(scope="module")
def parts():
    return decompose(build_step_graph(preset_job("llama3-8b", 256)))


def test_run_quantiles_match_whole_run_monte_carlo(parts):
    steps = 2000
    rt = run_time(parts, steps, gpus=256)
    sims = simulate_runs(parts, steps, 150, seed=3, t_cells=800)
    for q in (0.5, 0.9):
        assert rt.quantile(q) == pytest.approx(np.quantile(sims, q), rel=5e-3)
    # the allocation is persistent: the run's spread is far above sqrt(M) x step std
    step_std = math.sqrt(float(parts.tail.var()) + float(parts.body.var()))
    assert rt.std() > 3 * math.sqrt(steps) * step_std


def test_llama3_interruption_count_from_per_gpu_rate():
    n = expected_interruptions(LLAMA3_RATE_PER_GPU_HOUR, 16384, 54 * 24)
    assert n == pytest.approx(466)
    # at twice the GPUs the job sees twice as many
    assert expected_interruptions(LLAMA3_RATE_PER_GPU_HOUR, 32768, 54 * 24) == pytest.approx(932)


def _simulate_wall(work, tau, intr, gpus, runs, rng):
    """Discrete-event simulation: exponential failures, checkpoints, restarts."""
    lam = intr.failure_rate * gpus / 3600
    out = np.empty(runs)
    c, r = intr.checkpoint_cost_s, intr.restart_s
    for i in range(runs):
        done, wall = 0.0, 0.0
        while done < work:
            seg = min(tau, work - done)
            need = seg + (c if done + seg < work else 0.0)
            t_fail = rng.exponential(1 / lam)
            if t_fail >= need:
                wall += need
                done += seg
            else:
                wall += t_fail + r
        out[i] = wall
    return out


def test_interruptions_match_event_simulation():
    intr = Interruptions(failure_rate=LLAMA3_RATE_PER_GPU_HOUR * 2, restart_s=600)
    gpus, work = 16384, 50 * 3600.0
    tau = optimal_interval(work, intr, gpus)
    mtbf = 3600 / (intr.failure_rate * gpus)
    assert tau == pytest.approx(young_interval(intr.checkpoint_cost_s, mtbf), rel=0.15)
    sims = _simulate_wall(work, tau, intr, gpus, 400, np.random.default_rng(1))
    assert expected_wall(work, tau, intr, gpus) == pytest.approx(sims.mean(), rel=0.01)


def test_run_time_with_failures(parts):
    intr = Interruptions(failure_rate=1e-3)
    rt = run_time(parts, 20000, interruptions=intr, gpus=256)
    d = rt.to_dict()
    assert d["interruptions"]["goodput"] < 1
    assert d["mean_s"] == pytest.approx(d["interruptions"]["expected_wall_s"], rel=0.02)
    assert d["p99_s"] > d["work"]["p99_s"]


def test_bad_arguments(parts):
    with pytest.raises(ValueError, match="steps"):
        run_time(parts, 0, gpus=256)
    with pytest.raises(ValueError, match="failure_rate"):
        Interruptions(failure_rate=-1)
    with pytest.raises(ValueError, match="failslow_factor"):
        Interruptions(failslow_factor=0.5)
    with pytest.raises(ValueError, match="tokens"):
        steps_for_tokens(preset_job("llama3-8b", 8), -5)


def test_cli_runtime(capsys):
    assert (
        main(["runtime", "--preset", "llama3-8b", "--gpus", "64", "--steps", "100", "--json"]) == 0
    )
    import json

    d = json.loads(capsys.readouterr().out)
    assert d["steps"] == 100 and d["p99_s"] >= d["p50_s"]
    assert main(["runtime", "--preset", "llama3-8b", "--gpus", "64"]) == 2
    assert "exactly one of --steps" in capsys.readouterr().err


def test_run_time_distribution_with_failures_matches_event_simulation(parts):
    intr = Interruptions(failure_rate=2e-3, restart_s=300, checkpoint_cost_s=30)
    rt = run_time(parts, 80_000, interruptions=intr, gpus=256)
    info = rt.interruptions
    assert info["expected_failures"] > 20  # enough events for a spread
    work = rt.work["mean_s"]
    sims = _simulate_wall(
        work, info["checkpoint_interval_s"], intr, 256, 600, np.random.default_rng(5)
    )
    for q in (0.5, 0.95):
        assert rt.quantile(q) == pytest.approx(np.quantile(sims, q), rel=0.02)
