"""Collective-noise scale model: slowest of N nodes (calibration.collective_noise)."""

from __future__ import annotations

import numpy as np
import pytest

from prism_analytic.calibration.collective_noise import (
    NodeNoise,
    fit_node_noise,
    load_latencies,
    predicted_ratio_interval,
    ratio_quantiles,
)


def _sample(m: NodeNoise, n: int, size: int, rng) -> np.ndarray:
    """Slowest of n nodes; a node's multiplier is lognormal(0, sigma), or with probability q
    lognormal(log f, hypot(sigma, tail_sigma)) (body times a lognormal hiccup)."""
    hit = rng.uniform(size=(size, n)) < m.q
    body = rng.lognormal(0, m.sigma, (size, n))
    tail = rng.lognormal(np.log(m.f), np.hypot(m.sigma, m.tail_sigma), (size, n))
    return np.where(hit, tail, body).max(axis=1)


def test_max_quantiles_match_sampling():
    m = NodeNoise(sigma=0.03, q=0.002, f=2.0, tail_sigma=0.2)
    x = _sample(m, 64, 100_000, np.random.default_rng(0))
    want = np.quantile(x, [0.9, 0.99]) / np.median(x)
    got = ratio_quantiles(m, 64, (0.9, 0.99))
    np.testing.assert_allclose(got, want, rtol=0.01)


def test_fit_recovers_a_known_law_and_predicts_larger_n():
    truth = NodeNoise(sigma=0.02, q=0.001, f=1.8, tail_sigma=0.1)
    rng = np.random.default_rng(1)
    data = {n: _sample(truth, n, 10_000, rng) for n in (4, 16, 64)}
    fit, rms = fit_node_noise(data)
    assert rms < 0.02
    want = ratio_quantiles(truth, 512, (0.9, 0.99))
    got = ratio_quantiles(fit, 512, (0.9, 0.99))
    np.testing.assert_allclose(got, want, rtol=0.03)  # estimated from 3 x 10,000 draws
    iv = predicted_ratio_interval(fit, 512, 2000, reps=200)
    assert iv[0.9][0] < got[0] < iv[0.9][2] and iv[0.99][0] < got[1] < iv[0.99][2]


def test_bad_input():
    with pytest.raises(ValueError, match="need >= 20"):
        fit_node_noise({4: np.ones(5)})


def test_reads_the_shared_files(shared_data):
    x = load_latencies("2025_05_10___18_33_42", 0, "rabenseifner_ompi", 32768, shared_data)
    assert x.size == 1999 and 40e-6 < np.median(x) < 55e-6  # SOURCE.md: 47 us at 4 nodes
    with pytest.raises(ValueError, match="has no"):
        load_latencies("2025_05_10___18_33_42", 0, "nope", 32768, shared_data)
