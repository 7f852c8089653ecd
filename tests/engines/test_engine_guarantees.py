"""Engine-level guarantees: bounds that hold against round-off, honest labels.

Every check compares with an independent closed form (scipy in log space, longest paths by
hand), never with another engine's output.
"""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa
from prism_analytic.distributions.bounded_conv import bounded_convolve, fold_down, fold_up
from prism_analytic.graph import StepGraph


def _max_of_gamma2(n: int, q: float) -> float:
    """q-quantile of the max of n i.i.d. Gamma(2, 1): F^n = q, solved on the tail side."""
    return float(stats.gamma(2).isf(-np.expm1(np.log(q) / n)))


def _chain_group(n: int) -> StepGraph:
    body = StepGraph("body")
    body.add_op("a", pa.exponential(1.0))
    body.add_op("b", pa.exponential(1.0), after=["a"])  # Exp(1) + Exp(1) = Gamma(2, 1)
    g = StepGraph("group")
    g.add_replica_group("r", body, n)
    return g


@pytest.mark.parametrize("n", [10**3, 10**9, 10**12])
def test_bounds_on_a_huge_replica_group_of_a_gamma_chain_hold(n):
    # at n = 1e12 the p99 lower bound once was 35.8875 > exact 35.8377 (FFT round-off in
    # the body's far tail, read at level 1e-14 by F^n)
    res = pa.predict(_chain_group(n), "bounds")
    for q in (0.5, 0.99, 0.999):
        exact = _max_of_gamma2(n, q)
        low, high = res.quantile_bracket(q)
        assert low <= exact <= high, (n, q, low, exact, high)
        assert high - low <= 2e-3 * exact  # and still tight: a few lattice cells


def test_bounded_convolution_bound_holds_cell_by_cell_and_decays_in_the_tail():
    x = np.arange(0.0, 70.0, 0.01)
    p = -np.diff(stats.expon.sf(np.append(x, 70.0)))
    q = -np.diff(stats.norm(5, 1).sf(np.append(x[:3000], 30.0)))
    for a, b in ((p, p), (p, q)):
        est, err = bounded_convolve(a, b)
        ref = np.convolve(a, b)  # direct sums of non-negative terms: relative error ~ 1e-12
        assert (np.abs(est - ref) <= err + 1e-12 * ref).all()
        tail = np.cumsum(ref[::-1])[::-1]
        k = int(np.searchsorted(-tail, -1e-14))  # where the mass above is 1e-14
        assert err[k] <= 1e-6 * ref[k]  # relative, not the plain FFT's absolute 1e-16


def test_folded_sides_sandwich_the_exact_pmf():
    rng = np.random.default_rng(1)
    exact = rng.random(200)
    exact /= exact.sum()
    err = np.full(200, 1e-4)
    est = np.clip(exact + rng.uniform(-1e-4, 1e-4, 200), 0, None)
    low, high = fold_down(est, err, 1.0), fold_up(est, err, 1.0)
    s = np.cumsum(exact[::-1])[::-1]
    assert (np.cumsum(low[::-1])[::-1] <= s + 1e-15).all()  # lower: less mass above each cell
    assert (np.cumsum(high[::-1])[::-1] >= s - 1e-15).all()
    assert np.isclose(low.sum(), 1.0) and np.isclose(high.sum(), 1.0)


# ----- round-off stated next to every "guaranteed" bracket ----------------------------------------
def test_analytic_result_states_its_roundoff_and_folds_it_into_a_guaranteed_bracket():
    res = pa.predict(_chain_group(1000))
    assert res.exact and res.roundoff > 0
    assert "round-off" in res.guarantee and "round-off" in res.summary()
    out = res.to_dict()
    assert out["roundoff_cdf_error"] == res.roundoff
    for q in (0.5, 0.99):
        row = out["quantiles"][str(q)]
        low, high = row["bracket_with_roundoff_s"]
        num = row["numerical_bracket_s"]
        assert low <= num[0] and num[1] <= high
        assert low <= _max_of_gamma2(1000, q) <= high


def test_a_vacuous_roundoff_bound_is_not_called_guaranteed():
    res = pa.predict(_chain_group(10**12))
    assert res.roundoff == 1.0  # n copies multiply the L1 bound: nothing is left of it
    row = res.to_dict()["quantiles"]["0.99"]
    assert row["numerical_bracket_guaranteed"] is False
    assert row["bracket_with_roundoff_s"] == [-np.inf, np.inf]
    assert "without round-off" in res.summary()
    # folded per cell (GridPolicy(fold_roundoff=True)) the brackets hold and stay narrow
    folded = pa.predict(_chain_group(10**12), policy=pa.GridPolicy(fold_roundoff=True))
    assert folded.roundoff == 0.0 and "round-off" not in folded.guarantee
    for q in (0.5, 0.99):
        low, high = folded.quantile_bracket(q)
        assert low <= _max_of_gamma2(10**12, q) <= high and high - low < 0.01 * high


def test_prism_predict_json_reports_the_roundoff(capsys):
    from prism_analytic.cli import main

    assert main(["predict", "--preset", "llama3-8b", "--gpus", "8", "--json", "--no-verify"]) == 0
    text = capsys.readouterr().out

    def no_constants(name):
        raise AssertionError(f"invalid JSON constant {name}")

    out = json.loads(text, parse_constant=no_constants)
    assert out["exact"] and out["roundoff_cdf_error"] >= 0
    assert "round-off" in out["guarantee"] or out["roundoff_cdf_error"] == 0
    row = out["quantiles"]["0.99"]
    assert {"roundoff_cdf_error", "bracket_with_roundoff_s"} <= set(row)


# ----- deterministic graphs that are not series-parallel ------------------------------------------
def _wheatstone(values: dict[str, float]) -> tuple[StepGraph, float]:
    """A Wheatstone bridge (s -> x, y; x -> z, w; y -> z) of point masses and its longest path."""
    edges = {"s": [], "x": ["s"], "y": ["s"], "z": ["x", "y"], "w": ["x"], "t": ["z", "w"]}
    g, dag = StepGraph("bridge"), nx.DiGraph()
    for v, preds in edges.items():
        g.add_op(v, pa.point_mass(values[v]), after=preds)
        dag.add_node(v)
        dag.add_edges_from((p, v) for p in preds)
    finish: dict[str, float] = {}
    for v in nx.topological_sort(dag):  # the longest path by hand, in the order of the graph
        finish[v] = values[v] + max((finish[p] for p in dag.predecessors(v)), default=0.0)
    return g, max(finish.values())


@pytest.mark.parametrize("seed", range(6))
def test_constant_non_series_parallel_graph_is_exact_and_bracketed(seed):
    rng = np.random.default_rng(seed)
    values = {v: float(x) for v, x in zip("sxyzwt", rng.uniform(0.0, 3.0, 6))}
    if seed == 0:  # the value: the longest path is exactly 5.5 (with a tie)
        values = {"s": 1.0, "x": 2.0, "y": 1.5, "z": 2.5, "w": 0.5, "t": 0.0}
    g, exact = _wheatstone(values)
    res = pa.predict(g)
    assert res.exact and res.diagnostics.get("cores", []) == []
    for q in (0.0001, 0.5, 0.99):
        low, high = res.quantile_bracket(q)
        assert low <= exact <= high and high - low <= 1e-3 * exact
    low, high = pa.predict(g, "bounds").quantile_bracket(0.5)
    assert low <= exact <= high


def test_a_random_op_in_the_core_is_still_labelled_approximate():
    g, _ = _wheatstone({"s": 1.0, "x": 2.0, "y": 1.5, "z": 2.5, "w": 0.5, "t": 0.0})
    h = StepGraph("bridge+noise")
    for v in g.topological_order():
        d = g.node(v)
        law = pa.normal(2.0, 0.1) if v == "z" else d["latency"]
        h.add_op(v, law, after=list(g.graph.predecessors(v)))
    res = pa.predict(h)
    assert not res.exact and "NOT its error" in res.guarantee
