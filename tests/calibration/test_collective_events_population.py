"""Collective noise as a population of runs (calibration.collective_population)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from prism_analytic.calibration.collective_population import (
    RunNoise,
    fit_population,
    predicted_ratio_interval,
    summarize_run,
)

MEDIAN = 50e-6
#: the true population of the synthetic data: body ln sigma = A + B ln n + session + run,
#: ln rate ~ N(RATE_MU, RATE_TAU^2), burst continuation ~ Beta(1, 3), excess lognormal
A, B, TAU_S, TAU_R = math.log(0.02), 0.1, 0.15, 0.2
RATE_MU, RATE_TAU = math.log(5e-5), 0.8
DELAY_MU, DELAY_SIGMA = math.log(70e-6), 0.6


def _true_run(n: int, session_effect: float, rate: float, burst: float, rng) -> RunNoise:
    return RunNoise(
        body_sigma=math.exp(A + B * math.log(n) + session_effect + TAU_R * rng.standard_normal()),
        rate=rate,
        burst=burst,
        delay_mu=DELAY_MU,
        delay_sigma=DELAY_SIGMA,
    )


def _new_run(n: int, rng) -> RunNoise:
    return _true_run(
        n,
        TAU_S * rng.standard_normal(),
        math.exp(RATE_MU + RATE_TAU * rng.standard_normal()),
        rng.beta(1, 3),
        rng,
    )


@pytest.fixture(scope="module")
def synthetic():
    """12 sessions at 4..128 nodes, 3 runs of 20,000 iterations each, from a known population."""
    rng = np.random.default_rng(11)
    runs = []
    for s in range(12):
        n = (4, 8, 16, 32, 64, 128)[s % 6]
        u = TAU_S * rng.standard_normal()
        rate = math.exp(RATE_MU + RATE_TAU * rng.standard_normal())
        q = rng.beta(1, 3)
        for _ in range(3):
            x = _true_run(n, u, rate, q, rng).sample(n, 20_000, MEDIAN, rng)
            runs.append(summarize_run(x, n, f"s{s}"))
    return runs, fit_population(runs)


def test_sampler_matches_its_law():
    rng = np.random.default_rng(3)
    run = RunNoise(body_sigma=0.02, rate=1e-4, burst=0.5, delay_mu=math.log(70e-6), delay_sigma=0.6)
    n, iters = 100, 400_000
    x = run.sample(n, iters, MEDIAN, rng)
    hit = x - MEDIAN > run.threshold_s
    # bursts: a delayed iteration is followed by another with probability ~ q (+ a new start)
    p = run.start_prob(n)
    follow = np.sum(hit[1:] & hit[:-1]) / hit[:-1].sum()
    assert follow == pytest.approx(run.burst + (1 - run.burst) * p, abs=0.03)
    # delayed share: starts / (1 - q) clusters, minus the rare overlaps
    assert hit.mean() == pytest.approx(p / (1 - run.burst), rel=0.08)
    # excess over the median: the lognormal truncated at the threshold (body excess negligible)
    lo = special.ndtr((math.log(run.threshold_s) - run.delay_mu) / run.delay_sigma)

    def cdf(e):
        z = special.ndtr((np.log(e) - run.delay_mu) / run.delay_sigma)
        return (z - lo) / (1 - lo)

    assert stats.kstest(x[hit] - MEDIAN, cdf).pvalue > 0.01
    # body: lognormal with the run's shape
    body = x[~hit]
    assert math.log(np.quantile(body, 0.9) / np.median(body)) / 1.2816 == pytest.approx(
        0.02, rel=0.03
    )


def test_heavy_body_keeps_its_width_and_its_tail_is_recovered():
    """A Student-t body keeps p90/p50 = exp(z_0.9 sigma); its p99/p90 shape is refitted."""
    rng = np.random.default_rng(8)
    run = RunNoise(
        body_sigma=0.03, rate=0.0, burst=0.0, delay_mu=-10.0, delay_sigma=1.0, body_dof=3.0
    )
    x = run.sample(16, 200_000, MEDIAN, rng)
    summ = summarize_run(x, 16, "s")
    assert summ.body_sigma == pytest.approx(0.03, rel=0.02)
    assert summ.body_tail == pytest.approx(stats.t.ppf(0.99, 3) / stats.t.ppf(0.9, 3), rel=0.03)
    # a 20-us collective: the body's t tail stays below the 30-us event threshold
    quiet = RunNoise(
        body_sigma=0.02, rate=0.0, burst=0.0, delay_mu=-10.0, delay_sigma=1.0, body_dof=3.0
    )
    runs = [
        summarize_run(quiet.sample(n, 20_000, 20e-6, rng), n, s)
        for n, s in ((4, "a"), (8, "b"), (16, "c"))
    ]
    rare = RunNoise(body_sigma=0.03, rate=2e-4, burst=0.0, delay_mu=DELAY_MU, delay_sigma=0.6)
    runs.append(summarize_run(rare.sample(64, 20_000, MEDIAN, rng), 64, "d"))
    pop = fit_population(runs)
    assert 2.0 < pop.body_dof < 5.0  # true 3
    with pytest.raises(ValueError, match="body_dof"):
        RunNoise(body_sigma=0.03, rate=0.0, burst=0.0, delay_mu=-10, delay_sigma=1, body_dof=0.5)


def test_population_parameters_recovered_within_intervals(synthetic):
    _, pop = synthetic
    se = np.sqrt(np.diag(pop.body_cov))
    # 3 standard errors: a test that fails when the estimator is biased, not by chance
    assert abs(pop.body_coef[0] - A) < 3 * se[0]
    assert abs(pop.body_coef[1] - B) < 3 * se[1]
    assert se[1] < 0.1  # the slope is identified, not just covered by a huge interval
    assert abs(pop.rate_mu - RATE_MU) < 3 * math.sqrt(pop.rate_cov[0, 0])
    assert 0.3 < pop.rate_tau < 2.0
    assert abs(pop.delay_mu - DELAY_MU) < 3 * math.sqrt(pop.delay_cov[0, 0])
    assert abs(math.log(pop.delay_sigma / DELAY_SIGMA)) < 3 * math.sqrt(pop.delay_cov[1, 1])
    mean_q = pop.burst_alpha / (pop.burst_alpha + pop.burst_beta)
    assert 0.1 < mean_q < 0.45  # Beta(1, 3): mean 0.25
    assert pop.sessions == 12 and pop.runs == 36 and pop.node_range == (4, 128)
    assert pop.not_identified == ()
    # no session without bursts: AIC keeps the plain lognormal (the quiet share adds nothing)
    assert pop.quiet_prob == 0 and pop.rate_models["lognormal"]["chosen"]


def test_rate_likelihood_matches_direct_integration():
    """The adaptive Gauss-Hermite likelihood against scipy's quad (an independent reference),
    including a session with hundreds of starts (a narrow integrand) and one with none."""
    from scipy import integrate

    from prism_analytic.calibration.collective_population import _fit_rate

    k = np.array([0.0, 3.0, 40.0, 660.0])
    e = np.array([1.7e6, 4e5, 2e6, 1.6e7])
    fit = _fit_rate(k, e, quiet=False)
    mu, tau = fit["mu"], fit["tau"]

    def direct(kk, ee):
        f = lambda z: stats.poisson.pmf(kk, ee * math.exp(mu + tau * z)) * stats.norm.pdf(z)  # noqa: E731
        peak = (math.log(max(kk, 0.5) / ee) - mu) / tau
        return integrate.quad(f, -12, 12, points=[peak], limit=400, epsabs=0)[0]

    assert fit["loglik"] == pytest.approx(
        sum(math.log(direct(a, b)) for a, b in zip(k, e)), abs=1e-4
    )


def test_quiet_sessions_are_a_share_not_a_huge_spread():
    """Sessions with no bursts at all next to sessions at ~2e-5 per node: AIC picks the
    zero-inflated population and its quiet share is near the true one."""
    rng = np.random.default_rng(4)
    runs = []
    for s in range(16):
        n = (8, 16, 32, 64)[s % 4]
        rate = 0.0 if s % 3 == 0 else math.exp(math.log(2e-5) + 0.3 * rng.standard_normal())
        for _ in range(2):
            run = RunNoise(
                body_sigma=0.02, rate=rate, burst=0.0, delay_mu=DELAY_MU, delay_sigma=0.6
            )
            runs.append(summarize_run(run.sample(n, 20_000, MEDIAN, rng), n, f"s{s}"))
    pop = fit_population(runs)
    assert pop.rate_models["quiet"]["chosen"]
    assert 0.15 < pop.quiet_prob < 0.6  # true 6 of 16
    assert abs(pop.rate_mu - math.log(2e-5)) < 3 * math.sqrt(pop.rate_cov[0, 0])
    with pytest.raises(ValueError, match="rate_model"):
        fit_population(runs, rate_model="gamma")


def test_prediction_covers_new_runs_out_of_sample(synthetic):
    """New runs at 512 nodes drawn from the true population: ~90% inside, not 100% of a
    uselessly wide interval."""
    _, pop = synthetic
    n, iters = 512, 5_000
    iv = predicted_ratio_interval(pop, n, iters, MEDIAN, reps=300, seed=1)
    rng = np.random.default_rng(5)
    inside = {0.9: 0, 0.99: 0}
    k = 60
    for _ in range(k):
        x = _new_run(n, rng).sample(n, iters, MEDIAN, rng)
        q = np.quantile(x, [0.5, 0.9, 0.99])
        for lev, v in ((0.9, q[1] / q[0]), (0.99, q[2] / q[0])):
            inside[lev] += iv[lev][0] <= v <= iv[lev][2]
    assert inside[0.9] / k >= 0.75 and inside[0.99] / k >= 0.75
    # sharper without the between-run spread: that spread is what the interval carries
    narrow = predicted_ratio_interval(pop, n, iters, MEDIAN, reps=300, seed=1, between_runs=False)
    for lev in (0.9, 0.99):
        assert narrow[lev][2] - narrow[lev][0] < iv[lev][2] - iv[lev][0]


def test_bad_input_is_named():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="x: need"):
        summarize_run(np.ones(10), 4, "s")
    with pytest.raises(ValueError, match="nodes"):
        summarize_run(np.ones(200), 0, "s")
    with pytest.raises(ValueError, match="rate"):
        RunNoise(body_sigma=0.02, rate=1.5, burst=0.0, delay_mu=-10, delay_sigma=1)
    runs = [summarize_run(1 + 0.01 * rng.random(200), 4, s) for s in ("a", "b")]
    with pytest.raises(ValueError, match="sessions"):
        fit_population(runs)
