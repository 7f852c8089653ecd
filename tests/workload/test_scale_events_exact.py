"""variability.scale's rare events as independent components, against Monte Carlo.

Every reference here draws the *unmerged* mechanisms at the level of their units (nodes of a
collective, racks and GPUs of a job) with numpy, independently of the package's laws: the
step-level delays are added to draws of the mechanism-free step, the per-node collective
event multiplies a collective's draws beside its tier's own tail.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa
from prism_analytic.distributions.exposed import ExposedComm, tail_components
from prism_analytic.distributions.serialize import from_spec, to_spec
from prism_analytic.workload.builder import _multiplier_moments, build_step_graph
from prism_analytic.workload.jobs import merge_config
from prism_analytic.workload.presets import preset_job
from prism_analytic.workload.scale_variability import nodes_spanned, scale_factors
from prism_analytic.workload.step_estimate import step_time

N = 400_000


def _scaled(name: str, gpus: int, **scale):
    return merge_config(preset_job(name, gpus), {"variability": {"scale": scale}})


def _q_bracket(x: np.ndarray, q: float, conf: float = 0.999) -> tuple[float, float]:
    """Distribution-free bracket of the q-quantile from order statistics."""
    xs = np.sort(x)
    lo, hi = stats.binom.ppf([(1 - conf) / 2, (1 + conf) / 2], xs.size, q).astype(int)
    return float(xs[max(lo - 1, 0)]), float(xs[min(hi, xs.size - 1)])


def _raw_collective(rng, a, hidden, tier, nodes, p_node, factor, size=N):
    """max(0, a B T - hidden): B the tier's body, T = 1 + tier tail + per-node event."""
    s = tier.sigma
    body = np.exp(-0.5 * s * s + s * rng.standard_normal(size))
    tail = (rng.random(size) < tier.tail_prob) * (tier.tail_factor - 1)
    node = (rng.binomial(nodes, p_node, size) > 0) * (factor - 1)  # slowest of n nodes
    return np.maximum(a * body * (1 + tail + node) - hidden, 0.0)


def _check_against(law, x: np.ndarray, levels=(0.5, 0.99, 0.999)) -> None:
    se = x.std() / np.sqrt(x.size)
    assert abs(law.mean() - x.mean()) < 5 * se
    assert law.var() == pytest.approx(x.var(), rel=0.03)
    for q in levels:
        lo, hi = _q_bracket(x, q)
        assert lo <= law.quantile(q) <= hi, (q, lo, law.quantile(q), hi)


def test_exposed_comm_with_an_event_is_the_unmerged_mixture():
    tier = SimpleNamespace(sigma=0.17, tail_prob=0.005, tail_factor=2.0)
    p_node, nodes, factor = 1e-3, 32, 1.5
    p2 = 1 - (1 - p_node) ** nodes
    law = ExposedComm(0.2, tier, 0.15, [(p2, factor)])
    x = _raw_collective(np.random.default_rng(1), 0.2, 0.15, tier, nodes, p_node, factor)
    _check_against(law, x)
    # the former merge (one tail of the combined probability and mean excess) is narrower:
    # its p99.9 falls outside the unmerged draws' bracket, so this test tells them apart
    q = 1 - (1 - tier.tail_prob) * (1 - p2)
    excess = (tier.tail_prob * (tier.tail_factor - 1) + p2 * (factor - 1)) / q
    merged = ExposedComm(0.2, SimpleNamespace(sigma=0.17, tail_prob=q, tail_factor=1 + excess))
    lo, hi = _q_bracket(x, 0.999)
    assert not lo <= merged.quantile(0.999) - 0.15 <= hi
    # weights and values of T in closed form: none / tail / event / both (excesses add)
    w, m = tail_components(0.005, 2.0, [(p2, factor)])
    want_w = [0.995 * (1 - p2), 0.005 * (1 - p2), 0.995 * p2, 0.005 * p2]
    assert w == pytest.approx(want_w) and m == pytest.approx([1.0, 2.0, 1.5, 2.5])


def test_job_collective_law_against_unit_level_draws():
    """llama3-70b at 1,024 GPUs: the data-parallel reduce-scatter crosses 32 nodes."""
    job = _scaled("llama3-70b", 1024, node_tail_prob=1e-3, node_tail_factor=1.5)
    nodes = nodes_spanned(job)
    assert nodes == 32
    g = build_step_graph(job)
    law = g.node("dp_grad_reduce_scatter")["latency"]
    off = build_step_graph(preset_job("llama3-70b", 1024)).node("dp_grad_reduce_scatter")
    tier = job.variability.network.inter_node
    x = _raw_collective(np.random.default_rng(2), law.a, law.hidden, tier, nodes, 1e-3, 1.5)
    _check_against(law, x)
    assert law.var() > off["latency"].var()  # an event switched on never narrows the law


def test_multiplier_moments_with_an_event():
    tier = preset_job("llama3-8b", 1024).variability.network.inter_node
    rng = np.random.default_rng(3)
    x = _raw_collective(rng, 1.0, 0.0, tier, 128, 1e-4, 3.0, size=2_000_000)
    p2 = 1 - (1 - 1e-4) ** 128
    mean, var = _multiplier_moments(tier, ((p2, 3.0),))
    assert mean == pytest.approx(x.mean(), abs=5 * x.std() / np.sqrt(x.size))
    assert var == pytest.approx(x.var(), rel=0.02)
    assert var > _multiplier_moments(tier)[1]


def test_step_delays_against_unit_level_draws():
    """llama3-8b at 1,024 GPUs with rack throttling (15 racks) and fail-slow GPUs."""
    base = preset_job("llama3-8b", 1024)
    scale = {"rack_throttle_prob": 1e-3, "rack_throttle": 0.2, "fail_slow_prob": 1e-5}
    job = merge_config(base, {"variability": {"scale": scale}})
    off = pa.predict(build_step_graph(base), "analytic").distribution
    on = pa.predict(build_step_graph(job), "analytic").distribution
    det = step_time(base).step_s
    rng = np.random.default_rng(4)
    x = off.sample(N, rng)
    x = x + (rng.binomial(15, 1e-3, N) > 0) * 0.2 * det  # any of 15 racks throttled
    x = x + (rng.binomial(1024, 1e-5, N) > 0) * 0.5 * det  # any of 1,024 GPUs fail-slow
    _check_against(on, x, levels=(0.5, 0.99))
    assert scale_factors(job)["racks"] == 15


@pytest.mark.parametrize(
    "scale",
    [
        {"fail_slow_prob": 1e-5},  # 0.36 s, shorter than the 1.2 s hiccup
        {"rack_throttle_prob": 1e-3},  # 73 ms
        {"node_tail_prob": 1e-4, "node_tail_factor": 1.5},  # smaller than the tier's 2x tail
        {"node_tail_prob": 1e-4, "fail_slow_prob": 1e-5, "rack_throttle_prob": 1e-3},
    ],
)
def test_switching_a_mechanism_on_never_lowers_the_variance(scale):
    # a noisy inter-node body (8 MB messages at scale, sigma 0.17) exposes the collectives'
    # events; under the default's 0.017 a 1.5x hit stays hidden and its effect on the std
    # is below the grid's resolution
    noisy = {"variability": {"network": {"inter_node": {"sigma": 0.17}}}}
    base = merge_config(preset_job("llama3-8b", 1024), noisy)
    off = pa.predict(build_step_graph(base), "analytic")
    on = pa.predict(build_step_graph(merge_config(base, {"variability": {"scale": scale}})))
    assert on.std() > off.std() and on.mean() > off.mean()


def test_analytic_and_monte_carlo_engines_agree_with_every_event_on():
    job = _scaled("llama3-8b", 64, node_tail_prob=0.01, fail_slow_prob=1e-4, fail_slow_factor=2)
    g = build_step_graph(job)
    a = pa.predict(g, "analytic")
    m = pa.predict(g, "montecarlo", samples=20_000, seed=7)
    x = np.asarray(m.distribution.samples)
    assert abs(a.mean() - x.mean()) < 5 * x.std() / np.sqrt(x.size)
    lo, hi = m.quantile_bracket(0.99, confidence=0.999)
    assert lo <= a.quantile(0.99) <= hi


def test_events_round_trip_and_bad_events_are_named():
    tier = SimpleNamespace(sigma=0.1, tail_prob=0.01, tail_factor=3.0)
    law = ExposedComm(0.5, tier, 0.1, [(0.02, 1.5), (0.001, 4.0)])
    back = from_spec(to_spec(law))
    assert back.cdf([0.4, 0.9, 1.5]) == pytest.approx(law.cdf([0.4, 0.9, 1.5]), abs=0)
    plain = ExposedComm(0.5, tier, 0.1)
    assert "events" not in to_spec(plain)["fields"]  # specs without events are unchanged
    with pytest.raises(ValueError, match=r"events\[0\] probability"):
        ExposedComm(0.5, tier, 0.0, [(1.5, 2.0)])
    with pytest.raises(ValueError, match=r"events\[1\] factor"):
        ExposedComm(0.5, tier, 0.0, [(0.1, 2.0), (0.1, 0.5)])
    with pytest.raises(ValueError, match=r"events\[0\] must be a \(probability, factor\)"):
        ExposedComm(0.5, tier, 0.0, [(0.1,)])
