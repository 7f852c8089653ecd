"""Rare per-node collective events that grow with scale (calibration.collective_events)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from prism_analytic.calibration.collective_events import (
    EventNoise,
    fit_event_noise,
    predicted_ratio_interval,
    sample_iterations,
)
from prism_analytic.workload.scale_variability import fat_tree_tiers


def test_fat_tree_tiers():
    assert [fat_tree_tiers(n, 40) for n in (1, 20, 21, 400, 401, 8000, 8001)] == [
        1,
        1,
        2,
        2,
        3,
        3,
        4,
    ]
    assert fat_tree_tiers(64, 8) == 3  # 4, 16, 64 nodes below one switch
    with pytest.raises(ValueError, match="radix"):
        fat_tree_tiers(4, 7)
    with pytest.raises(ValueError, match="nodes"):
        fat_tree_tiers(0, 40)


def test_law_matches_its_own_sampler_and_closed_forms():
    m = EventNoise(sigma=0.03, rate=1e-4, size=1.0, size_sigma=0.5, tier_growth=1.5, radix=8)
    assert m.hit_prob(512) == pytest.approx(1 - (1 - 1e-4) ** 512)
    assert m.event_median(64) == pytest.approx(1.0 * 1.5**2)  # 3 tiers at radix 8
    x = sample_iterations(m, 512, (40_000,), np.random.default_rng(1))
    ks = stats.kstest(x, lambda y: m.cdf(y, 512))
    assert ks.pvalue > 0.01
    q = m.quantile(np.array([0.5, 0.99]), 512)
    assert m.cdf(q, 512) == pytest.approx([0.5, 0.99], abs=1e-6)
    # density integrates to the CDF
    grid = np.linspace(0.9, 6, 20001)
    pdf = np.exp(m.logpdf(grid, 512))
    assert np.trapezoid(pdf, grid) == pytest.approx(m.cdf(6, 512) - m.cdf(0.9, 512), abs=2e-3)


def test_event_delay_above_min_delay():
    """Events delayed by min_delay body medians plus a lognormal: closed form, sampler, density."""
    m = EventNoise(sigma=0.03, rate=1e-4, size=0.8, size_sigma=0.7, min_delay=0.6)
    n, med = 512, m.body_median(512)
    cut = med * 1.6  # no event ends below 1.6 body medians
    p = m.hit_prob(n)
    e = stats.lognorm(0.7, scale=0.8)  # the delay beyond the cut
    y = np.array([med + 0.3, cut, cut + 0.01, cut + 1.0, cut + 2.5])
    body = stats.norm.cdf(np.log(y) / 0.03) ** n
    ev = np.where(y > cut, e.cdf(np.maximum(y - cut, 0)), 0.0)
    assert m.cdf(y, n) == pytest.approx((1 - p) * body + p * ev, rel=1e-9, abs=1e-12)
    x = sample_iterations(m, n, (40_000,), np.random.default_rng(2))
    # no event below the cut (the body passes med + 0.25 with P ~ 1e-20 per draw)
    assert not np.any((x > med + 0.25) & (x < cut))
    assert np.sum(x > cut) > 100  # while the events are there
    assert stats.kstest(x, lambda v: m.cdf(v, n)).pvalue > 0.01
    grid = np.linspace(cut, 9, 40001)
    mass = np.trapezoid(np.exp(m.logpdf(grid, n)), grid)
    assert mass == pytest.approx(m.cdf(9, n) - m.cdf(cut, n), rel=2e-3)
    # min_delay = 0 draws the same stream as before the field existed
    m0 = EventNoise(sigma=0.03, rate=1e-2, size=0.8, size_sigma=0.7)
    a = sample_iterations(m0, 64, (1000,), np.random.default_rng(3))
    rng = np.random.default_rng(3)
    u = rng.uniform(size=1000)
    hit = rng.uniform(size=1000) < m0.hit_prob(64)
    d = 0.8 * np.exp(0.7 * rng.standard_normal(1000))
    b = np.where(hit, m0.body_median(64) + d, np.exp(0.03 * special.ndtri(u ** (1 / 64))))
    assert np.array_equal(a, b)
    with pytest.raises(ValueError, match="min_delay"):
        EventNoise(sigma=0.03, rate=0.0, size=1.0, size_sigma=0.5, min_delay=-1.0)


def test_no_events_puts_the_rate_at_its_bound_with_a_profile_interval():
    """A rate at its lower bound: flagged, and its upper limit is the profile likelihood's.

    With no iteration above the body, the log-likelihood in the rate is
    ``N n log(1 - rate)`` plus a constant, so the 95% profile limit is
    ``1 - exp(-chi2_1(0.95) / (2 N n))`` (a Wald interval at a bound would be meaningless).
    """
    m = EventNoise(sigma=0.03, rate=0.0, size=1.0, size_sigma=0.5)
    iters, n = 6000, 32
    x = 50e-6 * sample_iterations(m, n, (iters,), np.random.default_rng(11))
    fit = fit_event_noise({n: x})
    assert "rate" in fit.at_bound
    lo, hi = fit.intervals["rate"]
    assert lo == pytest.approx(1e-9)
    want = -math.expm1(-stats.chi2.ppf(0.95, 1) / 2 / (iters * n))
    assert hi == pytest.approx(want, rel=0.01)
    # the body is still estimated, with a Wald interval that covers the truth
    assert fit.intervals["sigma"][0] <= 0.03 <= fit.intervals["sigma"][1]


def test_fit_recovers_known_parameters_within_its_intervals():
    # the fit's own family: events past 1.3 body medians (its default min_delay)
    true = EventNoise(
        sigma=0.03, rate=4e-4, size=1.0, size_sigma=0.5, tier_growth=1.5, radix=8, min_delay=0.3
    )
    rng = np.random.default_rng(7)
    # absolute scales differ by node count, as in real runs: the fit must not need them
    samples = {
        n: c * sample_iterations(true, n, (6_000,), rng)
        for n, c in ((4, 40e-6), (32, 55e-6), (128, 70e-6))
    }
    fit = fit_event_noise(samples, radix=8)
    assert fit.not_identified == ()
    for p in ("sigma", "rate", "size", "size_sigma", "tier_growth"):
        lo, hi = fit.intervals[p]
        assert lo <= getattr(true, p) <= hi, (p, getattr(true, p), (lo, hi))
    # one tier level: the growth is held at 1 and reported as not identified
    one = fit_event_noise({n: samples[n] for n in (32,)}, radix=8)
    assert "tier_growth" in one.not_identified and one.model.tier_growth == 1.0


def test_predicted_interval_covers_the_true_law():
    true = EventNoise(sigma=0.03, rate=5e-5, size=1.5, size_sigma=0.3)
    rng = np.random.default_rng(3)
    hits = 0
    for seed in range(20):
        x = sample_iterations(true, 1024, (5_000,), np.random.default_rng(100 + seed))
        iv = predicted_ratio_interval(true, 1024, 5_000, reps=200, seed=seed)
        q = np.quantile(x, [0.5, 0.99])
        hits += iv[0.99][0] <= q[1] / q[0] <= iv[0.99][2]
    assert hits >= 15  # 90% intervals: 18 expected of 20; 15 is P < 2% by binomial
    del rng


def test_event_law_does_not_absorb_a_misfitting_body():
    """A body that is not the slowest of n lognormals, as measured at 512 nodes.

    8% of the iterations get a shoulder (x U(1.02, 1.25)) and 1.2% a low tail
    (x U(0.88, 1)), at every node count alike; the events are per node. Fitted at 512
    nodes, the rate's interval holds the true rate and the predicted p99/p50 at 1,024
    nodes holds a fresh 1,024-node sample's.
    """
    true = EventNoise(sigma=0.02, rate=2e-5, size=1.5, size_sigma=0.6)

    def draw(n, k, rng):
        y = sample_iterations(true, n, (k,), rng)
        u = rng.uniform(size=k)
        y = np.where(u < 0.08, y * rng.uniform(1.02, 1.25, size=k), y)
        y = np.where(u > 0.988, y * rng.uniform(0.88, 1.0, size=k), y)
        return 40e-6 * y

    rng = np.random.default_rng(0)
    x512, x1024 = draw(512, 20_000, rng), draw(1024, 20_000, rng)
    fit = fit_event_noise({512: x512})
    assert fit.at_bound == ()
    lo, hi = fit.intervals["rate"]
    assert lo <= true.rate <= hi
    iv = predicted_ratio_interval(fit, 1024, len(x1024), reps=200)
    q = np.quantile(x1024, [0.5, 0.99])
    assert iv[0.99][0] <= q[1] / q[0] <= iv[0.99][2]


def _brute_forward(m: EventNoise, y: np.ndarray, n: int) -> float:
    """Textbook scaled forward recursion, one iteration at a time (the reference)."""
    lb, le = m._log_parts(y, n)
    fb, fe = np.exp(lb), np.exp(le)
    p_n, pe = m.hit_prob(n), m.episode_event
    trans = np.array([[1 - m.episode_start, m.episode_start], [1 - m.episode_stay, m.episode_stay]])
    phi = m.episode_fraction
    alpha = np.array([1 - phi, phi])
    ll = 0.0
    for t in range(len(y)):
        if t:
            alpha = alpha @ trans
        alpha = alpha * np.array([(1 - p_n) * fb[t] + p_n * fe[t], (1 - pe) * fb[t] + pe * fe[t]])
        ll += math.log(alpha.sum())
        alpha /= alpha.sum()
    return ll


def test_episode_chain_likelihood_and_sampler():
    m = EventNoise(
        sigma=0.03,
        rate=2e-5,
        size=1.0,
        size_sigma=0.4,
        episode_start=0.01,
        episode_stay=0.8,
        episode_event=0.9,
    )
    y = sample_iterations(m, 256, (1, 3001), np.random.default_rng(4))[0]
    assert m.loglik_sequence(y, 256) == pytest.approx(_brute_forward(m, y, 256), rel=1e-9)
    # without episodes the sequence likelihood is the independent sum
    m0 = EventNoise(sigma=0.03, rate=2e-5, size=1.0, size_sigma=0.4)
    assert m0.loglik_sequence(y, 256) == pytest.approx(float(np.sum(m0.logpdf(y, 256))))
    # the sampler's chain: share of delayed iterations and clustering as the chain says
    x = sample_iterations(m, 256, (40, 5000), np.random.default_rng(5))
    hit = x > m.body_median(256) * 1.2
    assert hit.mean() == pytest.approx(m.event_prob(256), rel=0.1)
    pair = np.mean(hit[:, 1:] & hit[:, :-1])
    # P(delayed, delayed next) = phi * stay * pe^2 (+ small independent terms)
    want = m.episode_fraction * m.episode_stay * m.episode_event**2
    assert pair == pytest.approx(want, rel=0.15)


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="rate"):
        EventNoise(sigma=0.03, rate=1.0, size=1.0, size_sigma=0.5)
    with pytest.raises(ValueError, match="sigma"):
        EventNoise(sigma=0.0, rate=0.0, size=1.0, size_sigma=0.5)
    with pytest.raises(ValueError, match="samples"):
        fit_event_noise({})
    with pytest.raises(ValueError, match=r"samples\[4\]"):
        fit_event_noise({4: np.ones(10)})
    with pytest.raises(ValueError, match="tier levels"):
        fit_event_noise(
            {4: np.exp(np.random.default_rng(0).normal(size=100))}, fit_tier_growth=True
        )
    with pytest.raises(ValueError, match="iterations"):
        predicted_ratio_interval(EventNoise(0.03, 0.0, 1.0, 0.5), 4, 1)


@pytest.mark.slow  # a study on the measured Leonardo runs (~27 s)
def test_real_data_out_of_sample(shared_data):
    """Leonardo (collective_latency): what the scale model gets right and what it misses.

    Measured (validation/results/collective_noise.md): the per-node event rate is steady
    across 512-2,048 nodes within one session (2025-03-28), so a fit at 512 nodes predicts
    p99/p50 at 1,024 nodes; but the 128-node run (2025-03-19) has a per-node rate about 5x
    higher, so a fit at <= 128 nodes over-predicts p99/p50 at 2,048 nodes.

    The 512-node prediction holds because an event is a delay beyond the body
    (``min_delay``) in a minority of iterations (``max_event_prob``). Left free, the event
    law fits the body's misfit instead (validation/results/collective_event_fit.md): a
    tiny, very wide event that takes in the shoulder at 1.02-1.3x the median, which does
    not scale per node (the fit before the restriction ended there with scipy >= 1.15 and
    predicted p99/p50 at 1,024 nodes in [2.65, 3.63] against 2.21), or, at the highest
    likelihood found, an "event" in 89% of the iterations (predicting 1.03).
    """
    from prism_analytic.calibration.collective_noise import load_latencies

    algo, count = "default_ompi", 64
    x128 = load_latencies("2025_03_19___20_04_47", 0, algo, count, shared_data)
    x512 = load_latencies("2025_03_28___18_19_43", 0, algo, count, shared_data)
    x1024 = load_latencies("2025_03_28___17_42_08", 0, algo, count, shared_data)
    x2048 = load_latencies("2025_03_28___16_48_20", 0, algo, count, shared_data)

    def rate(x, n):
        return -math.log1p(-np.mean(x > 1.5 * np.median(x))) / n

    r512, r1024, r2048 = rate(x512, 512), rate(x1024, 1024), rate(x2048, 2048)
    assert max(r512, r1024, r2048) / min(r512, r1024, r2048) < 1.5  # per-node scaling in session
    assert rate(x128, 128) > 3 * r2048  # another session, another machine state

    in_session = fit_event_noise({512: x512})
    assert in_session.at_bound == ()  # an interior maximum: the Wald intervals apply
    # in sample first: the fitted law gives its own data's p99/p50 (the unrestricted fit's
    # law gave 1.85 against the measured 1.41)
    iv = predicted_ratio_interval(in_session, 512, len(x512), reps=200)
    q = np.quantile(x512, [0.5, 0.99])
    assert iv[0.99][0] <= q[1] / q[0] <= iv[0.99][2]
    iv = predicted_ratio_interval(in_session, 1024, len(x1024), reps=200)
    q = np.quantile(x1024, [0.5, 0.99])
    assert iv[0.99][0] <= q[1] / q[0] <= iv[0.99][2]

    held_out = fit_event_noise({128: x128})
    iv = predicted_ratio_interval(held_out, 2048, len(x2048), reps=200)
    q = np.quantile(x2048, [0.5, 0.99])
    assert q[1] / q[0] < iv[0.99][0]  # the documented miss: predicted tail too heavy

    # the 128-node run's delays come in bursts (half follow a delayed iteration)
    hit = x128 > 1.5 * np.median(x128)
    assert np.sum(hit[1:] & hit[:-1]) > 10 * hit.sum() ** 2 / len(hit)
    # with session episodes split off, the per-node rate fitted at 128 nodes is the other
    # session's (2025-03-28, 512-2,048 nodes) within a factor 2, and p99/p50 at 2,048 nodes
    # falls inside the prediction (2,048 B: measured 2.62 in [1.96, 2.94])
    x128 = load_latencies("2025_03_19___20_04_47", 0, algo, 512, shared_data)
    x2048 = load_latencies("2025_03_28___16_48_20", 0, algo, 512, shared_data)
    ep = fit_event_noise({128: x128}, episodes=True)
    assert 0.5 * min(r512, r1024, r2048) < ep.model.rate < 2 * max(r512, r1024, r2048)
    iv = predicted_ratio_interval(ep, 2048, len(x2048), reps=200)
    q = np.quantile(x2048, [0.5, 0.99])
    assert iv[0.99][0] <= q[1] / q[0] <= iv[0.99][2]


def _scaled_job(gpus: int, **scale):
    from prism_analytic.workload.jobs import merge_config
    from prism_analytic.workload.presets import preset_job

    return merge_config(preset_job("llama3-8b", gpus), {"variability": {"scale": scale}})


def test_event_size_grows_with_tiers_in_the_job():
    from prism_analytic.workload.scale_variability import (
        apply_scale_variability,
        nodes_spanned,
        scale_events,
        scale_factors,
    )

    job = _scaled_job(
        1024,
        node_tail_prob=1e-3,
        node_tail_factor=3.0,
        node_tail_tier_growth=2.0,
        fat_tree_radix=8,
    )
    n = nodes_spanned(job)
    f = scale_factors(job)
    t = fat_tree_tiers(n, 8)
    assert f["collective_tiers"] == t and t >= 2
    assert f["collective_hit_factor"] == pytest.approx(1 + 2.0 * 2.0 ** (t - 1))
    inter0 = job.variability.network.inter_node
    inter = apply_scale_variability(job).variability.network.inter_node
    p2 = 1 - (1 - 1e-3) ** n
    # the tier's own tail is kept; the per-node event is a second, independent event
    # (tests/workload/test_scale_events_exact.py checks the law against unit-level draws)
    assert inter == inter0
    assert scale_events(job).collective_events == (
        (pytest.approx(p2), pytest.approx(f["collective_hit_factor"])),
    )
    # strided data-parallel groups (pipeline inside) span the whole job's tiers
    from prism_analytic.workload.jobs import merge_config
    from prism_analytic.workload.scale_variability import group_extent_nodes

    strided = merge_config(job, {"parallelism": {"rank_order": "tp-cp-pp-dp"}})
    assert group_extent_nodes(strided) == 1024 // job.hardware.gpus_per_node
    assert group_extent_nodes(job) == n
    from prism_analytic.workload.config import ConfigError

    with pytest.raises(ConfigError, match="fat_tree_radix"):
        _scaled_job(64, fat_tree_radix=9)
    with pytest.raises(ConfigError, match="node_tail_factor"):
        _scaled_job(64, node_tail_factor=0.5)


def test_analytic_and_monte_carlo_agree_with_the_mechanism_on():
    import prism_analytic as pa
    from prism_analytic.workload.builder import build_step_graph

    job = _scaled_job(
        64,
        node_tail_prob=0.02,
        node_tail_factor=4.0,
        node_tail_tier_growth=1.5,
        fat_tree_radix=4,
    )
    g = build_step_graph(job)
    base = pa.predict(build_step_graph(_scaled_job(64)), "analytic")
    a = pa.predict(g, "analytic")
    assert a.mean() > base.mean()  # the mechanism moves the step
    m = pa.predict(g, "montecarlo", samples=4000, seed=5)
    x = np.asarray(m.distribution.samples)
    assert abs(a.mean() - x.mean()) < 5 * x.std() / np.sqrt(x.size)
    lo, hi = m.quantile_bracket(0.99, confidence=0.99)
    assert lo <= a.quantile(0.99) <= hi
