"""The canonical form stays finite when one input of a max dominates by ~27 standard deviations.

There the rectifier residual's scale theta * phi(alpha) is ~1e-160; solving for the residual's
weight in those units overflowed ("std must be finite, got inf" on a trace-derived graph).
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from prism_analytic.engines.canonical import canonical_makespan


def _dominated_max() -> tuple[nx.DiGraph, dict[int, float], dict[int, float]]:
    """Six ops: a tied max (1, 2) after 0, then a max of 2 and 4 where 4 leads by ~27 sd."""
    g = nx.DiGraph([(0, 1), (0, 2), (1, 4), (2, 3), (2, 4), (2, 5), (4, 5)])
    mean = {0: 2.0, 1: 1.0, 2: 1.0, 3: 1.0, 4: 1.2, 5: 1.0}
    std = {0: 0.01, 1: 0.05, 2: 0.05, 3: 0.01, 4: 0.01, 5: 0.01}
    return g, mean, std


def _monte_carlo(g: nx.DiGraph, mean: dict, std: dict, n: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    fin: dict[int, np.ndarray] = {}
    for v in nx.topological_sort(g):
        start = np.max([fin[p] for p in g.predecessors(v)], axis=0) if g.in_degree(v) else 0.0
        fin[v] = start + rng.normal(mean[v], std[v], n)
    return np.max([fin[v] for v in g if g.out_degree(v) == 0], axis=0)


def test_dominated_max_is_finite_and_matches_monte_carlo() -> None:
    g, mean, std = _dominated_max()
    x = _monte_carlo(g, mean, std, 200_000)
    for method in ("clark-mehler", "clark"):
        r = canonical_makespan(g, mean, std, method=method)
        assert math.isfinite(r.mean) and math.isfinite(r.std) and r.std > 0
        # path 0-1-4-5 plus the lift of the tied max (1, 2): exact up to Clark's Gaussian max
        assert abs(r.mean - x.mean()) < 4 * x.std() / math.sqrt(x.size) + 2e-4
        assert abs(r.std / x.std() - 1) < 0.02


def test_trace_state_graph_predicts(shared_data) -> None:
    """The reproducer of the report: ``predict`` of trace-ST's state graph at row 4."""
    import pytest

    pytest.importorskip("pyarrow")
    import prism_analytic as pa
    from prism_analytic.engines.montecarlo import sample_step
    from prism_analytic.traces.graph import state_graph
    from prism_analytic.traces.model import fit_trace_model
    from prism_analytic.traces.readers import read_trace
    from prism_analytic.traces.structure import recover_structure

    path = shared_data / "straggler_traces" / "trace-ST.parquet"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    model = fit_trace_model(recover_structure(read_trace(path)), np.arange(18, 32))
    g = state_graph(model, 4)
    res = pa.predict(g)
    assert math.isfinite(res.mean()) and math.isfinite(res.std()) and res.std() > 0
    x = sample_step(g, 20_000)
    # independent reference: the graph sampled op by op (analytic: Clark-Mehler on 142 edges)
    assert abs(res.mean() - x.mean()) < 0.1 * x.std()
    assert abs(res.std() / x.std() - 1) < 0.05
