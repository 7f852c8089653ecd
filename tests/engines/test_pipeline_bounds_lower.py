"""The compact pipeline's lower bound: where it must lie (closed form, Monte Carlo), and its size.

The lower bound is the minimum CDF of a few dominant paths, each a sum of independent latencies
rounded down. Checked against an independent reference: the longest path by mean, found by
networkx on the explicit (op-by-op) graph, is a sum of independent normals, so its law is exact;
the bound can lie at most its rounding (one cell per op) below that path's quantile, and never
above the makespan's (Monte Carlo). The round-off deficit of every convolution goes to the -inf
atom: the low tail is then trimmed, and the partial sums stay a few path standard deviations
wide instead of growing by a whole op window per op.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
from scipy import stats

from prism_analytic.engines.pipeline_bounds import pipeline_bound_grids
from prism_analytic.policy import GridPolicy
from prism_analytic.validation.scenarios import compact_pipeline, pipeline

LEVELS = (0.01, 0.1, 0.5, 0.9, 0.99)


def _longest_mean_path(stages: int, microbatches: int) -> tuple[float, float, int]:
    """(mean, sd, ops) of the explicit graph's longest path by mean (all ops normal)."""
    g = pipeline(stages, microbatches).graph
    law = {v: g.nodes[v]["latency"] for v in g}
    dag = nx.DiGraph()
    dag.add_edges_from((u, v, {"w": law[v].mean()}) for u, v in g.edges)
    for s in [v for v in g if g.in_degree(v) == 0]:
        dag.add_edge("source", s, w=law[s].mean())
    path = nx.dag_longest_path(dag, weight="w")[1:]
    return (
        sum(law[v].mean() for v in path),
        float(np.sqrt(sum(law[v].var() for v in path))),
        len(path),
    )


def test_lower_bound_between_the_longest_path_and_the_makespan() -> None:
    p, m = 4, 16
    spec = next(iter(compact_pipeline(p, m).graph.nodes(data="spec")))[1]
    policy = GridPolicy(tail_mass=1e-30)
    h = 2e-3
    lower, _ = pipeline_bound_grids(spec, h, policy)
    mu, sd, ops = _longest_mean_path(p, m)
    makespan = np.sort(
        [float(x) for x in _explicit_samples(p, m, 4_000)]
    )  # Monte Carlo reference for the other side
    for q in LEVELS:
        low = float(lower.quantile_bracket(q)[0])
        # at most one cell per op of rounding below the exact path quantile (plus 1e-9 of mass)
        assert low >= stats.norm.ppf(q - 1e-9, mu, sd) - ops * h
        # never above the makespan: below the sample quantile's 99.9% upper order statistic
        k = int(stats.binom.isf(0.0005, makespan.size, q))
        assert low <= makespan[min(k, makespan.size - 1)]


def test_lower_bound_partial_sums_stay_narrow() -> None:
    # 8 x 32: paths of ~78 ops; with the deficit parked in the first cell the lower grid
    # spanned the sum of its ops' windows (~78 x 16 op sd), now a few path sd
    p, m = 8, 32
    spec = next(iter(compact_pipeline(p, m).graph.nodes(data="spec")))[1]
    h = 5e-3
    lower, _ = pipeline_bound_grids(spec, h, GridPolicy(tail_mass=1e-30))
    _, sd, ops = _longest_mean_path(p, m)
    width = lower.lo.size * h
    assert width < 30 * sd, (width, sd)
    assert width < 0.2 * ops * 16 * 0.1  # far below the sum of the ops' windows


def _explicit_samples(p: int, m: int, n: int) -> np.ndarray:
    from prism_analytic.engines.predict import predict

    return predict(pipeline(p, m), "montecarlo", samples=n, seed=7).distribution.samples
