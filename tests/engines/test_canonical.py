"""Canonical-form makespan engine: closed forms, reference implementations, Monte Carlo."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
from scipy import integrate, special, stats

from prism_analytic.engines.canonical import (
    HERMITE_ORDER,
    METHODS,
    CanonicalResult,
    canonical_makespan,
)
from prism_analytic.schedules import pipeline_dag

FACT = np.array([math.factorial(n) for n in range(2, HERMITE_ORDER + 1)], dtype=float)


# --------------------------------------------------------------------------------------------
# Reference implementations (slow, dense, straight from the notes) and Monte Carlo
# --------------------------------------------------------------------------------------------
def dense_clark_mehler(g, mean, std, loadings=None, mehler=True):
    """Transcription of notes §4: dense a (sources), c (residuals), K x K Q; no window."""
    order = list(nx.topological_sort(g))
    factors = sorted({f for row in (loadings or {}).values() for f in row}, key=str)
    col = {n: k for k, n in enumerate(order)} | {f: len(order) + k for k, f in enumerate(factors)}
    n_src = len(order) + len(factors)
    k_max = sum(max(g.in_degree(n) - 1, 0) for n in order) + len(order)
    q_mat = np.zeros((k_max, k_max))
    dirs = np.zeros((k_max, n_src))
    herm = np.zeros((k_max, HERMITE_ORDER - 1))
    n_res = 0

    def cov(x, y):
        return x[1] @ y[1] + x[2][:n_res] @ q_mat[:n_res, :n_res] @ y[2][:n_res]

    def cmax(a, b):
        nonlocal n_res
        va, vb, cab = cov(a, a), cov(b, b), cov(a, b)
        th2 = va + vb - 2 * cab
        if th2 <= 1e-12 * (va + vb):
            return a if a[0] >= b[0] else b
        th = math.sqrt(th2)
        al = (a[0] - b[0]) / th
        t, ph = special.ndtr(al), math.exp(-al * al / 2) / math.sqrt(2 * math.pi)
        d = a[0] - b[0]  # centre on b's mean before squaring
        mu = d * t + th * ph
        v = (d * d + va) * t + vb * (1 - t) + d * th * ph - mu * mu
        lin = t * a[1] + (1 - t) * b[1]
        c = t * a[2] + (1 - t) * b[2]
        base = lin @ lin + c[:n_res] @ q_mat[:n_res, :n_res] @ c[:n_res]
        diff = a[1] - b[1]
        norm = np.linalg.norm(diff)
        u = diff / norm if norm > 1e-6 * math.sqrt(lin @ lin) else 0.0 * diff
        he = [1.0, -al]
        for k in range(2, HERMITE_ORDER - 1):
            he.append(-al * he[-1] - (k - 1) * he[-2])
        hh = th * ph * np.array(he) / FACT
        q = np.zeros(n_res)
        if mehler:
            r = dirs[:n_res] @ u
            q = sum(FACT[k] * herm[:n_res, k] * hh[k] * r ** (k + 2) for k in range(len(FACT)))
        rv = float(np.sum(FACT * hh * hh))
        beta = float(c[:n_res] @ q)
        disc = math.sqrt(max(beta**2 + rv * (v - base), 0.0))
        s = max(0.0, (-beta + disc) / rv) if rv > 0 else 0.0
        herm[n_res], dirs[n_res] = s * hh, u
        q_mat[n_res, :n_res] = q_mat[:n_res, n_res] = s * q
        q_mat[n_res, n_res] = s * s * rv
        c = c.copy()
        c[n_res] = 1.0
        n_res += 1
        return (mu + b[0], lin, c)

    def reduce(xs):
        xs = sorted(xs, key=lambda x: x[0])
        acc = xs[0]
        for x in xs[1:]:
            acc = cmax(acc, x)
        return acc

    state = {}
    for n in order:
        ps = [state[p] for p in g.predecessors(n)]
        y = reduce(ps) if ps else (0.0, np.zeros(n_src), np.zeros(k_max))
        a = y[1].copy()
        a[col[n]] += std[n]
        for f, val in (loadings or {}).get(n, {}).items():
            a[col[f]] += val
        state[n] = (y[0] + mean[n], a, y[2])
    out = reduce([state[n] for n in order if g.out_degree(n) == 0])
    return out[0], math.sqrt(cov(out, out))


def clark_1961(g, mean, std):
    """Clark's full-covariance propagation: explicit covariance matrix over all variables."""
    order = list(nx.topological_sort(g))
    mu, cov = [], np.zeros((0, 0))
    var_of = {}

    def append(m, row, v):
        nonlocal cov
        k = len(mu)
        new = np.zeros((k + 1, k + 1))
        new[:k, :k] = cov
        new[k, :k] = new[:k, k] = row
        new[k, k] = v
        cov = new
        mu.append(m)
        return k

    def cmax(i, j):
        va, vb, cab = cov[i, i], cov[j, j], cov[i, j]
        th = math.sqrt(va + vb - 2 * cab)
        al = (mu[i] - mu[j]) / th
        t, ph = special.ndtr(al), math.exp(-al * al / 2) / math.sqrt(2 * math.pi)
        m = mu[i] * t + mu[j] * (1 - t) + th * ph
        e2 = (mu[i] ** 2 + va) * t + (mu[j] ** 2 + vb) * (1 - t) + (mu[i] + mu[j]) * th * ph
        # Clark (1961): Cov(max, X_k) = T Cov(A, X_k) + (1 - T) Cov(B, X_k)
        return append(m, t * cov[i] + (1 - t) * cov[j], e2 - m * m)

    for n in order:
        ps = sorted((var_of[p] for p in g.predecessors(n)), key=lambda k: mu[k])
        if not ps:
            var_of[n] = append(mean[n], np.zeros(len(mu)), std[n] ** 2)
            continue
        acc = ps[0]
        for k in ps[1:]:
            acc = cmax(acc, k)
        var_of[n] = append(mu[acc] + mean[n], cov[acc], cov[acc, acc] + std[n] ** 2)
    sinks = sorted((var_of[n] for n in order if g.out_degree(n) == 0), key=lambda k: mu[k])
    acc = sinks[0]
    for k in sinks[1:]:
        acc = cmax(acc, k)
    return mu[acc], math.sqrt(cov[acc, acc])


def monte_carlo(g, mean, std, n, seed):
    """Vectorised sample of the makespan (normal ops), nodes in topological order."""
    rng = np.random.default_rng(seed)
    finish = {}
    for node in nx.topological_sort(g):
        start = None
        for p in g.predecessors(node):
            start = finish[p] if start is None else np.maximum(start, finish[p])
        d = mean[node] + std[node] * rng.standard_normal(n)
        finish[node] = d if start is None else start + d
    return np.max([finish[k] for k in g if g.out_degree(k) == 0], axis=0)


def pipeline_inputs(p, m, cv=0.05, schedule="1f1b", vpp=1):
    g = pipeline_dag(p, m, schedule, vpp)
    mean = {n: (1.0 if n[0] == "F" else 2.0) / vpp for n in g}
    return g, mean, {n: cv * mean[n] for n in g}


def random_dag(n, max_preds, rng):
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    for i in range(1, n):
        k = min(int(rng.integers(0, max_preds + 1)), i)
        g.add_edges_from((int(j), i) for j in rng.choice(i, size=k, replace=False))
    return g


def max2_moments_quad(m1, s1, m2, s2):
    """E and Var of max of two independent normals by numerical integration of x dF(x)."""

    def pdf(x):
        return stats.norm.pdf(x, m1, s1) * stats.norm.cdf(x, m2, s2) + stats.norm.pdf(
            x, m2, s2
        ) * stats.norm.cdf(x, m1, s1)

    lo, hi = min(m1 - 12 * s1, m2 - 12 * s2), max(m1 + 12 * s1, m2 + 12 * s2)
    e1 = integrate.quad(lambda x: x * pdf(x), lo, hi, epsabs=1e-13, epsrel=1e-12, limit=200)[0]
    e2 = integrate.quad(lambda x: x * x * pdf(x), lo, hi, epsabs=1e-13, epsrel=1e-12, limit=200)[0]
    return e1, e2 - e1 * e1


# --------------------------------------------------------------------------------------------
# Closed forms
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_chain_is_exact_sum(method: str) -> None:
    g = nx.path_graph(6, create_using=nx.DiGraph)
    mean = {i: 1.0 + i for i in g}
    std = {i: 0.1 * (i + 1) for i in g}
    r = canonical_makespan(g, mean, std, method=method)
    assert r.mean == pytest.approx(sum(mean.values()), rel=1e-14)
    assert r.std**2 == pytest.approx(sum(s * s for s in std.values()), rel=1e-13)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(("m1", "s1", "m2", "s2"), [(1, 1, 1, 1), (1, 0.5, 1.8, 1.2), (0, 1, 6, 1)])
def test_two_parallel_ops_match_integration(method, m1, s1, m2, s2) -> None:
    g = nx.DiGraph()
    g.add_nodes_from(["a", "b"])  # two sinks: the final max over sinks
    r = canonical_makespan(g, {"a": m1, "b": m2}, {"a": s1, "b": s2}, method=method)
    e1, var = max2_moments_quad(m1, s1, m2, s2)
    assert r.mean == pytest.approx(e1, abs=1e-9)
    assert r.std**2 == pytest.approx(var, abs=1e-9)
    assert r.n_max == 1


@pytest.mark.parametrize("method", ["clark", "clark-mehler"])
def test_fork_join_shared_ancestor_exact(method: str) -> None:
    # X -> A, X -> B, (A, B) -> J: makespan = X + max(A, B) + J with X independent of A, B.
    g = nx.DiGraph([("x", "a"), ("x", "b"), ("a", "j"), ("b", "j")])
    mean = {"x": 3.0, "a": 1.0, "b": 1.4, "j": 0.5}
    std = {"x": 0.7, "a": 0.3, "b": 0.5, "j": 0.2}
    e1, var = max2_moments_quad(1.0, 0.3, 1.4, 0.5)
    r = canonical_makespan(g, mean, std, method=method)
    assert r.mean == pytest.approx(3.5 + e1, abs=1e-9)
    assert r.std**2 == pytest.approx(0.49 + var + 0.04, abs=1e-9)
    naive = canonical_makespan(g, mean, std, method="independent")
    assert naive.mean > r.mean + 0.05  # treating the shared X as independent overestimates


def test_shared_factor_linear_parts_are_exact() -> None:
    g = nx.DiGraph([("a", "b"), ("b", "c")])
    mean = dict.fromkeys(g, 1.0)
    std = {"a": 0.1, "b": 0.2, "c": 0.3}
    load = {"a": {"f": 0.5}, "c": {"f": 0.25, "h": 0.4}}
    exact = 0.01 + 0.04 + 0.09 + 0.75**2 + 0.4**2
    for method in ("clark", "clark-mehler"):
        r = canonical_makespan(g, mean, std, method=method, loadings=load)
        assert r.std**2 == pytest.approx(exact, rel=1e-13)
    # the naive baseline keeps the factor variance but not its correlation
    r = canonical_makespan(g, mean, std, method="independent", loadings=load)
    assert r.std**2 == pytest.approx(0.14 + 0.25 + 0.0625 + 0.16, rel=1e-13)


@pytest.mark.parametrize("method", ["clark", "clark-mehler"])
def test_identical_inputs_tie(method: str) -> None:
    # a and b are the same variable (one factor, no private noise): max(a, b) = a exactly.
    g = nx.DiGraph([("a", "j"), ("b", "j")])
    mean = {"a": 2.0, "b": 2.0, "j": 0.0}
    std = dict.fromkeys(g, 0.0)
    load = {"a": {"z": 1.0}, "b": {"z": 1.0}}
    r = canonical_makespan(g, mean, std, method=method, loadings=load)
    assert (r.mean, r.std) == (2.0, 1.0)
    # a deterministic shift of the same variable: the larger one wins, exactly
    r = canonical_makespan(g, {"a": 2.0, "b": 2.5, "j": 0.0}, std, method=method, loadings=load)
    assert (r.mean, r.std) == (2.5, 1.0)


@pytest.mark.parametrize("method", METHODS)
def test_deterministic_pipeline_is_longest_path(method: str) -> None:
    g, mean, std = pipeline_inputs(4, 8, cv=0.0)
    r = canonical_makespan(g, mean, std, method=method)
    assert r.mean == pytest.approx((8 + 3) * 3.0, rel=1e-14)
    assert r.std == 0.0
    assert r.quantile(0.99) == r.mean
    assert r.cdf(r.mean) == 1.0 and r.sf(r.mean) == 0.0


@pytest.mark.parametrize("method", METHODS)
def test_single_node(method: str) -> None:
    g = nx.DiGraph()
    g.add_node("op")
    r = canonical_makespan(g, {"op": 1.5}, {"op": 0.25}, method=method)
    assert (r.mean, r.std, r.method, r.n_ops, r.n_max) == (1.5, 0.25, method, 1, 0)


def test_zero_std_ops_mixed_with_random() -> None:
    g, mean, std = pipeline_inputs(3, 5)
    std = {n: (0.0 if n[0] == "F" else s) for n, s in std.items()}
    ref = dense_clark_mehler(g, mean, std)
    r = canonical_makespan(g, mean, std, window=10**6)
    assert np.isfinite([r.mean, r.std]).all()
    assert r.mean == pytest.approx(ref[0], rel=1e-12)
    assert r.std == pytest.approx(ref[1], rel=1e-9)


# --------------------------------------------------------------------------------------------
# Agreement with the dense references
# --------------------------------------------------------------------------------------------
def reference_cases():
    rng = np.random.default_rng(2024)
    graphs = [
        pipeline_dag(4, 8),
        pipeline_dag(3, 6, "interleaved", vpp=2),
        pipeline_dag(3, 5, "gpipe"),
        random_dag(40, 3, rng),  # nodes with 3 predecessors and several sinks
    ]
    for g in graphs:
        mean = {n: float(rng.uniform(1, 3)) for n in g}
        std = {n: float(rng.uniform(0.05, 0.5)) for n in g}
        load = {n: {f: float(rng.normal(0, 0.1)) for f in "uv"} for n in list(g)[::3]}
        yield g, mean, std, None
        yield g, mean, std, load


@pytest.mark.parametrize(("g", "mean", "std", "load"), list(reference_cases()))
def test_untruncated_clark_mehler_equals_dense_reference(g, mean, std, load) -> None:
    mu, sd = dense_clark_mehler(g, mean, std, load)
    r = canonical_makespan(g, mean, std, loadings=load, window=10**9)
    assert r.mean == pytest.approx(mu, rel=1e-12)
    assert r.std == pytest.approx(sd, rel=1e-10)


@pytest.mark.parametrize(("g", "mean", "std", "load"), list(reference_cases()))
def test_clark_is_clark_mehler_with_q_zero(g, mean, std, load) -> None:
    mu, sd = dense_clark_mehler(g, mean, std, load, mehler=False)
    r = canonical_makespan(g, mean, std, loadings=load, method="clark")
    assert r.mean == pytest.approx(mu, rel=1e-12)
    assert r.std == pytest.approx(sd, rel=1e-10)
    if load is None:  # and both equal Clark's (1961) full-covariance propagation
        mu61, sd61 = clark_1961(g, mean, std)
        assert r.mean == pytest.approx(mu61, rel=1e-12)
        assert r.std == pytest.approx(sd61, rel=1e-9)


def test_window_truncation() -> None:
    g, mean, std = pipeline_inputs(8, 16)
    full = canonical_makespan(g, mean, std, window=10**9)
    assert full.window < 10**9  # capped at the number of residuals
    assert canonical_makespan(g, mean, std).window == 256
    narrow = canonical_makespan(g, mean, std, window=4)
    clark = canonical_makespan(g, mean, std, method="clark")
    # truncation drops residual correlations, moving the answer towards "clark"
    assert full.mean < narrow.mean < clark.mean


# --------------------------------------------------------------------------------------------
# Accuracy against Monte Carlo
# --------------------------------------------------------------------------------------------
def test_accuracy_vs_monte_carlo_1f1b_4x8() -> None:
    g, mean, std = pipeline_inputs(4, 8, cv=0.05)
    x = monte_carlo(g, mean, std, n=200_000, seed=12345)
    ks = {m: stats.kstest(x, canonical_makespan(g, mean, std, method=m).cdf).statistic
          for m in METHODS}  # fmt: skip
    assert ks["clark-mehler"] <= 0.02
    assert ks["clark-mehler"] < ks["clark"] < ks["independent"]
    r = canonical_makespan(g, mean, std)
    assert abs(r.mean - x.mean()) <= 0.1 * x.std()
    assert r.std == pytest.approx(x.std(), rel=0.03)


def test_accuracy_vs_monte_carlo_shared_factors() -> None:
    # per-microbatch work factors: every op of one microbatch scales together
    g, mean, std = pipeline_inputs(3, 6, cv=0.03)
    load = {n: {("mb", n[2]): 0.04 * mean[n]} for n in g}
    rng = np.random.default_rng(5)
    n = 100_000
    z = {("mb", i): rng.standard_normal(n) for i in range(6)}
    finish = {}
    for node in nx.topological_sort(g):
        ps = [finish[p] for p in g.predecessors(node)]
        start = np.max(ps, axis=0) if ps else 0.0
        d = (
            mean[node]
            + std[node] * rng.standard_normal(n)
            + load[node][("mb", node[2])] * z[("mb", node[2])]
        )
        finish[node] = start + d
    x = finish[("B", 0, 5, 0)]
    res = {m: canonical_makespan(g, mean, std, method=m, loadings=load) for m in METHODS}
    ks = {m: stats.kstest(x, r.cdf).statistic for m, r in res.items()}
    assert ks["clark-mehler"] < 0.03
    assert ks["clark-mehler"] < ks["independent"]
    assert abs(res["clark-mehler"].mean - x.mean()) <= 0.1 * x.std()


# --------------------------------------------------------------------------------------------
# Result object
# --------------------------------------------------------------------------------------------
def test_result_quantiles_and_normal() -> None:
    r = CanonicalResult(mean=10.0, std=2.0, method="clark")
    qs = np.array([1e-6, 0.1, 0.5, 0.99, 1 - 1e-9])
    np.testing.assert_allclose(r.quantile(qs), stats.norm(10, 2).ppf(qs), rtol=1e-14)
    assert r.cdf(10.0) == 0.5
    assert r.sf(10.0 + 2.0 * 30) > 0  # direct upper tail, not 1 - cdf
    assert r.quantile(0.0) == -np.inf and r.quantile(1.0) == np.inf
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        r.quantile(99)
    with pytest.raises(AttributeError):
        r.mean = 1.0  # frozen


def test_replica_quantile() -> None:
    r = CanonicalResult(mean=0.0, std=1.0, method="clark")
    assert r.replica_quantile(0.3, 1) == pytest.approx(r.quantile(0.3), rel=1e-14)
    # closed-form oracle: q99 of the max of 65,536 N(0, 1)
    assert r.replica_quantile(0.99, 65_536) == pytest.approx(5.1193, abs=1e-4)
    # stable for huge n and q near 1, and consistent with the replica CDF
    for q, n in [(0.5, 10**9), (1 - 1e-9, 10**9), (0.99, 512)]:
        x = r.replica_quantile(q, n)
        assert np.isfinite(x)
        assert np.exp(n * np.log1p(-stats.norm.sf(x))) == pytest.approx(q, rel=1e-6)
    shifted = CanonicalResult(mean=5.0, std=0.5, method="clark")
    assert shifted.replica_quantile(0.99, 512) == pytest.approx(
        5 + 0.5 * r.replica_quantile(0.99, 512)
    )
    np.testing.assert_allclose(r.replica_quantile(np.array([0.5, 0.99]), 8),
                               stats.norm.ppf(np.array([0.5, 0.99]) ** (1 / 8)),
                               rtol=1e-12)  # fmt: skip
    with pytest.raises(ValueError, match="n must be"):
        r.replica_quantile(0.5, 0)


# --------------------------------------------------------------------------------------------
# Input validation
# --------------------------------------------------------------------------------------------
def _small():
    g = nx.DiGraph([("a", "b")])
    return g, {"a": 1.0, "b": 1.0}, {"a": 0.1, "b": 0.1}


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda g, m, s, k: g.add_edge("b", "a"), "acyclic"),
        (lambda g, m, s, k: m.pop("b"), "node 'b' has no mean"),
        (lambda g, m, s, k: s.pop("a"), "node 'a' has no std"),
        (lambda g, m, s, k: m.update(b=float("nan")), "node 'b': mean must be finite"),
        (lambda g, m, s, k: s.update(a=-1.0), r"node 'a': std must be finite and >= 0"),
        (lambda g, m, s, k: s.update(a=float("inf")), "node 'a': std"),
        (lambda g, m, s, k: m.update(a="fast"), "node 'a': mean must be a number"),
        (lambda g, m, s, k: k.update(method="mc"), "method must be one of"),
        (lambda g, m, s, k: k.update(window=0), "window must be a positive integer"),
        (lambda g, m, s, k: k.update(loadings={"zz": {"f": 1.0}}), "not in the graph"),
        (lambda g, m, s, k: k.update(loadings={"a": {"f": np.nan}}), "loading on factor 'f'"),
    ],
)
def test_invalid_inputs(mutate, match) -> None:
    g, m, s = _small()
    kwargs: dict = {}
    mutate(g, m, s, kwargs)
    with pytest.raises(ValueError, match=match):
        canonical_makespan(g, m, s, **kwargs)


def test_invalid_graphs() -> None:
    with pytest.raises(ValueError, match="no nodes"):
        canonical_makespan(nx.DiGraph(), {}, {})
    with pytest.raises(ValueError, match="DiGraph"):
        canonical_makespan(nx.Graph([(1, 2)]), {1: 1.0, 2: 1.0}, {1: 0.0, 2: 0.0})
