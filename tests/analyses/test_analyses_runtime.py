"""Run time: analytic quantiles vs Monte Carlo of whole runs; interruptions vs simulation."""

import math

import numpy as np
import pytest
from scipy import stats

from prism_analytic.analyses.decompose import decompose
from prism_analytic.analyses.interruptions import (
    LLAMA3_RATE_PER_GPU_HOUR,
    Interruptions,
    expected_interruptions,
    expected_wall,
    optimal_interval,
    young_interval,
)
from prism_analytic.analyses.renewal import (
    WorkMixture,
    expected_run,
    log_cf_excess,
    negbin_upper,
    run_wall_law,
)
from prism_analytic.analyses.renewal_mc import simulate_walls, simulate_walls_events
from prism_analytic.analyses.runtime import run_time, simulate_runs, steps_for_tokens
from prism_analytic.cli import main
from prism_analytic.workload.builder import build_step_graph
from prism_analytic.workload.jobs import merge_config
from prism_analytic.workload.presets import preset_job


@pytest.fixture(scope="module")
def parts():
    # 1% slow GPUs: a persistent allocation effect that dominates the run's spread
    slow = {"variability": {"spatial": {"slow_fraction": 0.01}}}
    return decompose(build_step_graph(merge_config(preset_job("llama3-8b", 256), slow)))


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
    """Event simulation: exponential failures (also during restarts), checkpoints, restarts."""
    return simulate_walls_events(np.full(runs, work), tau, intr, gpus, rng=rng)


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


# --- the renewal law in every failure regime --------------------------------------------


def _mc_check(law, walls, levels=(0.01, 0.5, 0.99)):
    """The law's mean within 4 standard errors of the Monte Carlo's; its quantiles inside the
    Monte Carlo's 99.9% order-statistic intervals (widened by the law's stated resolution)."""
    n = walls.size
    se = walls.std(ddof=1) / math.sqrt(n)
    assert abs(law.mean - walls.mean()) < 4 * se, (law.mean, walls.mean(), se)
    w = np.sort(walls)
    for q in levels:
        lo = max(int(stats.binom.ppf(0.0005, n, q)) - 1, 0)
        hi = min(int(stats.binom.ppf(0.9995, n, q)), n - 1)
        qa = float(np.interp(q, law.cdf, law.x))
        assert w[lo] - law.resolution <= qa <= w[hi] + law.resolution, (q, qa, w[lo], w[hi])


@pytest.mark.parametrize(
    ("rate", "restart", "ckpt", "tau"),
    [
        (1e-3, 600.0, 60.0, 900.0),  # MTBF 3.9 h >> restart: a few failures per run
        (0.1, 600.0, 60.0, 120.0),  # MTBF 75 min
        (3.0, 600.0, 30.0, 40.0),  # MTBF 150 s < restart 600 s: failure-dominated
        (0.02, 600.0, 60.0, math.inf),  # no checkpoint: a failure redoes the whole run
    ],
)
def test_renewal_law_matches_event_by_event_monte_carlo(rate, restart, ckpt, tau):
    gpus, w_mean, w_sd = 8, 20_000.0, 200.0
    intr = Interruptions(failure_rate=rate, restart_s=restart, checkpoint_cost_s=ckpt)
    lam = rate * gpus / 3600
    law = run_wall_law(
        WorkMixture(np.array([1.0]), np.array([w_mean]), np.array([w_sd**2])),
        tau,
        lam,
        ckpt,
        restart,
    )
    rng = np.random.default_rng(7)
    work = w_mean + w_sd * rng.standard_normal(3000)
    walls = simulate_walls_events(work, tau, intr, gpus, rng=rng)
    _mc_check(law, walls)
    # the segment-wise simulator (used where events are too many to play) agrees too
    _mc_check(law, simulate_walls(work, tau, intr, gpus, rng=rng))


def test_renewal_law_far_below_restart_time():
    # MTBF 45 s, restart 600 s: e^13 restart attempts per failure, far too many to play
    gpus, rate, tau = 8, 10.0, 50.0
    intr = Interruptions(failure_rate=rate)
    work = WorkMixture(np.array([1.0]), np.array([5000.0]), np.array([50.0**2]))
    law = run_wall_law(work, tau, rate * gpus / 3600, 60.0, 600.0)
    rng = np.random.default_rng(3)
    walls = simulate_walls(5000 + 50 * rng.standard_normal(3000), tau, intr, gpus, rng=rng)
    _mc_check(law, walls)
    assert law.mean > 1e8  # the run is dominated by restarts that rarely complete


def test_segment_mean_is_dalys_closed_form():
    lam, t, r = 1 / 300, 200.0, 100.0
    e = float(expected_run(lam, t, 1e12, 0.0, r))
    assert e == pytest.approx(math.expm1(lam * t) * math.exp(lam * r) / lam, rel=1e-12)
    # the characteristic function's slope at 0 is the mean of S - T
    eps = 1e-7
    d = log_cf_excess(np.array([-1j * eps]), lam, t, r)[0]
    assert (d.imag / -eps) == pytest.approx(e - t, rel=1e-5)


def test_chernoff_count_bound_dominates_the_exact_quantile():
    for m, x in [(1, 0.5), (30, 2.0), (3000, 0.51), (1e6, 1e-3)]:
        exact = stats.nbinom.isf(1e-10, m, math.exp(-x))
        assert negbin_upper(m, x, 1e-10) >= exact


def test_optimal_interval_beats_its_neighbours():
    intr = Interruptions(failure_rate=1e-3)
    gpus, work = 256, 1e5
    tau = optimal_interval(work, intr, gpus)
    best = expected_wall(work, tau, intr, gpus)
    for t in np.geomspace(tau / 20, min(tau * 20, work), 200):
        assert best <= expected_wall(work, t, intr, gpus) * (1 + 1e-9)
    assert tau < 3600 / (intr.failure_rate * gpus)  # below the job's MTBF


def test_expensive_checkpoints_mean_no_checkpoint():
    intr = Interruptions(checkpoint_cost_s=1e9)
    assert optimal_interval(5e4, intr, 8) == math.inf
    assert expected_wall(5e4, math.inf, intr, 8) < 5e4 * 1.01


def _cli_json(capsys, *args):
    import json

    assert main(["runtime", "--preset", "llama3-8b", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    "args",
    [
        ["--gpus", "8", "--steps", "1000", "--failure-rate", "3"],
        ["--gpus", "8", "--steps", "1000", "--failure-rate", "10"],
        ["--gpus", "8", "--steps", "1000", "--checkpoint-cost", "1e9"],
        ["--gpus", "8", "--steps", "1000", "--checkpoint-interval", "1e12"],
        ["--gpus", "8", "--steps", "1000", "--checkpoint-cost", "0"],
        ["--gpus", "1", "--steps", "100"],
    ],
)
def test_cli_runtime_is_consistent_in_every_regime(capsys, args):
    d = _cli_json(capsys, *args)
    i = d["interruptions"]
    assert d["mean_s"] == pytest.approx(i["expected_wall_s"], rel=1e-12)
    assert d["p99_s"] >= d["p50_s"] >= d["p1_s"] >= d["work"]["p1_s"] * 0.99
    assert d["std_s"] > 0
    # goodput and mean tell the same story
    assert i["goodput"] == pytest.approx(d["work"]["mean_s"] / d["mean_s"], rel=1e-9)


@pytest.mark.parametrize(
    ("args", "finite_p50"),
    [
        (["--failure-rate", "1e6"], False),
        (["--checkpoint-interval", "1e12", "--failure-rate", "10"], False),
        # a failure is rare (2%) but its restart never ends: p50 is a run without one
        (["--restart", "1e12"], True),
    ],
)
def test_cli_runtime_beyond_floats_is_inf_with_a_note(capsys, args, finite_p50):
    d = _cli_json(capsys, "--gpus", "8", "--steps", "1000", *args)
    assert d["mean_s"] is None  # inf in JSON
    assert "exceeds the largest float" in d["interruptions"]["note"]
    if finite_p50:  # a failure in 0.2% of the runs: p99 is still a run without one
        assert d["work"]["p1_s"] * 0.99 < d["p1_s"] <= d["p50_s"] <= d["p99_s"]
        assert d["p99_s"] < 1.1 * d["work"]["p99_s"]
        assert 0.001 < d["interruptions"]["p_run_beyond_floats"] < 0.01
    else:
        assert d["p1_s"] is None and d["p50_s"] is None and d["p99_s"] is None


def test_failslow_covering_the_run_is_a_clear_error():
    with pytest.raises(ValueError, match="failslow_rate"):
        expected_wall(1e4, 600.0, Interruptions(failslow_rate=1.0), 8)


def test_no_overflow_and_ordered_quantiles_across_the_options_ranges():
    work = WorkMixture(np.array([0.7, 0.3]), np.array([4e4, 4.2e4]), np.array([4e5, 9e5]))
    rates = (0.0, 1e-9, 1e-3, 1.0, 1e3, 1e6)  # per GPU-hour, 8 GPUs
    restarts, costs = (0.0, 600.0, 1e12), (0.0, 60.0, 1e9)
    intervals = (1e-6, 100.0, 1e12, math.inf)
    for rate in rates:  # the expected wall: a number or inf, never an exception
        for r in restarts:
            for c in costs:
                for tau in intervals:
                    e = expected_wall(4e4, tau, Interruptions(rate, None, c, r), 8)
                    assert e >= 4e4 * (1 - 1e-9) or math.isinf(e)
    rng = np.random.default_rng(0)
    for _ in range(12):  # the law, on a sample of the combinations
        rate, r, c, tau = (float(rng.choice(v)) for v in (rates, restarts, costs, intervals))
        law = run_wall_law(work, tau, rate * 8 / 3600, c, r)
        top = law.cdf[-1]  # below 1 by the runs no float holds
        q = np.where(np.array([0.01, 0.5, 0.99]) > top, np.inf, 0.0)
        q = q + np.interp([0.01, 0.5, 0.99], law.cdf, law.x)
        assert np.all(q[:-1] <= q[1:]), (rate, r, c, tau, q)
        assert q[0] >= 0.99 * 4e4 - 4 * 950


def test_failslow_episodes_follow_the_runs_own_length():
    # rare failures and frequent fail-slow episodes: the count of episodes grows with the
    # run (a fixed-mean Poisson count was 1.4% off at p1)
    gpus, w_mean, w_sd = 8, 48_000.0, 500.0
    intr = Interruptions(failure_rate=1.0, failslow_rate=0.03)
    jump = intr.failslow_duration_s * (1 - 1 / intr.failslow_factor)
    law = run_wall_law(
        WorkMixture(np.array([1.0]), np.array([w_mean]), np.array([w_sd**2])),
        600.0,
        gpus / 3600,
        60.0,
        600.0,
        failslow=(0.03 * gpus / 3600, jump),
    )
    rng = np.random.default_rng(2)
    walls = simulate_walls(w_mean + w_sd * rng.standard_normal(4000), 600.0, intr, gpus, rng=rng)
    _mc_check(law, walls)
