"""The generic bounds engine with ``convolve_grids_bounded``'s round-off deficit at -inf.

The lower side of every bounded convolution sends its round-off deficit to the atom at -inf
(not to the first cell), so the low tail is trimmed and long sums stay short. These tests check
the bounds still contain independent references: closed forms (sums of normals; a fork-join's
max of independent normal branches, by quadrature) and Monte Carlo on a reconvergent graph.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from scipy import integrate, stats

import prism_analytic as pa
from prism_analytic.distributions import to_grid
from prism_analytic.distributions.grid import convolve_grids_bounded
from prism_analytic.engines.bounds import bound_distributions
from prism_analytic.graph import StepGraph
from prism_analytic.policy import GridPolicy
from prism_analytic.validation import scenarios

MS = 1e-3
LEVELS = np.array([1e-6, 1e-3, 0.05, 0.5, 0.95, 0.999, 1 - 1e-6])


def _contains(lower, upper, exact_quantile) -> None:
    """Each level's bound bracket holds the exact quantile."""
    for q in LEVELS:
        low, high = float(lower.quantile_bracket(q)[0]), float(upper.quantile_bracket(q)[1])
        x = exact_quantile(q)
        assert low <= x <= high, (q, low, x, high)


def test_long_normal_chain_against_closed_form() -> None:
    n = 120
    means = 1.0 + 0.5 * np.sin(np.arange(n))
    sds = 0.05 + 0.02 * np.cos(np.arange(n))
    g = StepGraph("chain")
    prev: list[str] = []
    for i in range(n):
        prev = [g.add_op(f"op{i}", pa.normal(means[i] * MS, sds[i] * MS), prev)]
    lower, upper = bound_distributions(g)
    total = stats.norm(means.sum() * MS, np.sqrt((sds**2).sum()) * MS)
    _contains(lower, upper, total.ppf)
    # the CDFs too, at points across the bulk and the tails
    x = total.ppf(np.linspace(1e-6, 1 - 1e-6, 41))
    assert np.all(upper.cdf_bounds(x)[0] <= total.cdf(x))
    assert np.all(total.cdf(x) <= lower.cdf_bounds(x)[1])
    # the low tail is trimmed: with the deficit in the first cell the lower grid kept the whole
    # sum of the operands' windows (~n op widths below the mean); now it starts within ~40 sd
    assert lower.points[0] > total.mean() - 40 * total.std()
    assert 0 < lower.below < 1e-6  # the deficit went to the atom, and it stays negligible


def test_fork_join_against_quadrature() -> None:
    # head, 4 independent normal branches of 3 ops, join: step = head + join + max_b S_b
    g = StepGraph("fork_join")
    g.add_op("head", pa.normal(1 * MS, 0.05 * MS))
    ends, branch = [], []
    for b in range(4):
        prev = ["head"]
        mean, sd = (2.0 + 0.1 * b) * MS, 0.08 * (2.0 + 0.1 * b) * MS
        for j in range(3):
            prev = [g.add_op(f"b{b}_{j}", pa.normal(mean, sd), prev)]
        ends.extend(prev)
        branch.append((3 * mean, np.sqrt(3) * sd))
    g.add_op("join", pa.normal(1 * MS, 0.05 * MS), after=ends)
    lower, upper = bound_distributions(g)
    outer = stats.norm(2 * MS, np.hypot(0.05, 0.05) * MS)

    def cdf(x: float) -> float:
        def inner(y: float) -> float:
            return outer.pdf(y) * np.prod([stats.norm.cdf((x - y - m) / s) for m, s in branch])

        lo, hi = outer.ppf(1e-15), outer.ppf(1 - 1e-15)
        return integrate.quad(inner, lo, hi, epsabs=1e-13, epsrel=1e-11, limit=200)[0]

    for x in np.linspace(6.8, 8.8, 21) * MS:
        exact = cdf(x)
        assert float(upper.cdf_bounds(x)[0]) <= exact + 1e-10, x
        assert exact <= float(lower.cdf_bounds(x)[1]) + 1e-10, x


def test_fsdp_overlap_against_monte_carlo() -> None:
    g = scenarios.fsdp_overlap(6)
    lower, upper = bound_distributions(g)
    rng = np.random.default_rng(20261130)
    n = 40_000
    finish: dict[str, np.ndarray] = {}
    for v in nx.topological_sort(g.graph):
        preds = list(g.graph.predecessors(v))
        start = np.max([finish[p] for p in preds], axis=0) if preds else 0.0
        finish[v] = start + g.graph.nodes[v]["latency"].sample(n, rng)
    step = np.max([finish[v] for v in g.graph if g.graph.out_degree(v) == 0], axis=0)
    # DKW: the empirical CDF is within eps of the true one everywhere with prob. 1 - 1e-6
    eps = np.sqrt(np.log(2 / 1e-6) / (2 * n))
    x = np.quantile(step, np.linspace(0.001, 0.999, 50))
    emp = np.searchsorted(np.sort(step), x, side="right") / n
    assert np.all(upper.cdf_bounds(x)[0] <= emp + eps)
    assert np.all(emp - eps <= lower.cdf_bounds(x)[1])


@pytest.mark.parametrize("n_ops", [2, 40])
def test_convolution_lower_side_below_the_exact_sum(n_ops: int) -> None:
    # repeated bounded convolutions of a gamma grid against the closed-form gamma sum
    shape, scale = 2.0, 1.0
    policy = GridPolicy(rel_width=1e-3, tail_mass=1e-30)
    one = to_grid(pa.gamma(shape * scale, np.sqrt(shape) * scale), 0.01, policy)
    acc = one
    for _ in range(n_ops - 1):
        acc = convolve_grids_bounded(acc, one)
    exact = stats.gamma(n_ops * shape, scale=scale)
    x = exact.ppf(np.linspace(1e-9, 1 - 1e-9, 60))
    low_cdf, high_cdf = acc.cdf_bounds(x)
    assert np.all(low_cdf <= exact.cdf(x)) and np.all(exact.cdf(x) <= high_cdf)
    assert acc.below <= 1e-6
